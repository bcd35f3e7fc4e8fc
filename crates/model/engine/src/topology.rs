//! How engines are deployed together, as data: the router in front of replicas, the link between
//! instances, prefill/decode disaggregation, and what moved over the links. The deployments
//! themselves are the `cluster` module's.

use serde::{Deserialize, Serialize};

use crate::named::Named;

/// How a request picks its replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Router {
    /// In turn.
    #[default]
    RoundRobin,
    /// The replica with the fewest requests taken in and not finished.
    LeastLoaded,
    /// The replica holding most of the request's prefix in its cache (least loaded on a tie).
    PrefixAware,
}

impl Named for Router {
    const NAMES: &'static [(Self, &'static str)] = &[
        (Router::RoundRobin, "round-robin"),
        (Router::LeastLoaded, "least-loaded"),
        (Router::PrefixAware, "prefix-aware"),
    ];
}

/// The link that carries KV from prefill to decode instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// What it was given as (`100gbps`, `nvlink`).
    pub name: String,
    /// Bytes per second, per prefill instance.
    pub bytes_per_s: f64,
    /// Fixed time per transfer, seconds.
    pub latency_s: f64,
}

impl Link {
    /// `25gbps`, `100gbps`, `400gbps` or `<N>gbps` (network, 10 µs per transfer), or `nvlink`
    /// (the GPU's own scale-up link, 2 µs).
    pub fn parse(s: &str, gpu_link_gbs: f64) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "nvlink" {
            return Ok(Link::nvlink(gpu_link_gbs));
        }
        match t.strip_suffix("gbps").map(|n| n.trim().parse::<f64>()) {
            Some(Ok(g)) if g.is_finite() && g > 0.0 => {
                Ok(Link { name: t, bytes_per_s: g * 1e9 / 8.0, latency_s: 10e-6 })
            }
            _ => Err(format!("`{s}`: expected 25gbps, 100gbps, 400gbps, nvlink or <N>gbps")),
        }
    }

    /// How long moving `bytes` takes once the link is free.
    /// The GPUs' own interconnect, at `gpu_link_gbs` GB/s.
    pub fn nvlink(gpu_link_gbs: f64) -> Self {
        Link { name: "nvlink".into(), bytes_per_s: gpu_link_gbs * 1e9, latency_s: 2e-6 }
    }

    pub fn time(&self, bytes: f64) -> f64 {
        self.latency_s + bytes / self.bytes_per_s
    }
}

/// Prefill/decode disaggregation: `prefill` and `decode` instances of the configured engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Disaggregation {
    pub prefill: u32,
    pub decode: u32,
    pub link: Link,
    /// Append-prefill: a later turn of a conversation prefills on the decode instance that holds
    /// its history, moving no KV.
    #[serde(default)]
    pub ppd: bool,
}

impl Disaggregation {
    /// `prefill=P,decode=D` (both at least 1).
    pub fn parse(spec: &str, link: Link, ppd: bool) -> Result<Self, String> {
        let (mut prefill, mut decode) = (None, None);
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("`{part}`: expected prefill=P,decode=D"))?;
            let n: u32 = value
                .trim()
                .parse()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("`{part}`: the number of instances must be a whole number of at least 1"))?;
            match key.trim() {
                "prefill" => prefill = Some(n),
                "decode" => decode = Some(n),
                other => return Err(format!("`{other}`: expected prefill=P,decode=D")),
            }
        }
        match (prefill, decode) {
            (Some(prefill), Some(decode)) => Ok(Disaggregation { prefill, decode, link, ppd }),
            _ => Err(format!("`{spec}`: expected prefill=P,decode=D (both)")),
        }
    }
}

/// Transfer statistics of a disaggregated deployment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferStats {
    /// Requests whose KV moved from a prefill to a decode instance.
    pub transfers: u64,
    /// Prompt tokens whose KV moved.
    pub tokens: u64,
    /// Mean time per transfer, including waiting for the link, seconds.
    pub mean_s: f64,
    /// Mean transfer time per token moved, seconds.
    pub per_token_s: f64,
    /// Share of the run each prefill instance's link was busy (mean over links).
    pub link_utilization: f64,
    /// Later turns prefilled on the decode instance holding their history (append-prefill).
    pub append_prefills: u64,
}
