//! A run's plan as data: what was asked for, validated, with every default resolved. The
//! command line builds it, the stage runner reads it, and the result document records it, so a
//! result file says exactly what produced it (and `compare` and `merge` can check that two runs
//! were asked the same thing). Loaded resources (a tokenizer, a dataset's entries) are not in
//! here: the plan names them.

use std::path::PathBuf;
use std::time::Duration;

use goodput_engine::{EngineConfig, MemoryPlan};
use goodput_metrics::{Edge, PercentileMethod, Slo, Smoothing};
use goodput_workload::{Load, Profile, SourceInfo, ThinkTime, WorkloadSpec};
use serde::{Deserialize, Serialize};

pub use goodput_wire::{Api, Timeouts, secs};

/// The load part of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadPlan {
    pub profile: Profile,
    /// The load of a single-stage run (a sweep derives its stages from measurements).
    pub load: Load,
    /// `sweep`: rates between the synchronous and throughput stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_points: Option<u32>,
    /// `sweep`: the cap applied to the throughput and rate stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<usize>,
    /// Per stage for a sweep.
    pub requests: Option<u64>,
    #[serde(with = "secs::opt", default)]
    pub duration: Option<Duration>,
    pub warmup: Edge,
    pub cooldown: Edge,
    pub max_errors: Option<u64>,
    /// Stop once the server is over-saturated (`--stop-over-saturated`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_over_saturated: bool,
    #[serde(with = "secs")]
    pub grace: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_schedule: Option<PathBuf>,
    /// Pause between turns (and, for closed loops, between sessions).
    pub think_time: ThinkTime,
    /// `--time-scale` outside a replay: multiplies the pauses between a session's calls (a
    /// trace's think and tool times). A replay's scales them with its arrivals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_scale: Option<f64>,
    pub seed: u64,
    /// This process's slice of a sharded run (`--shard I/N`; `Run::merge` ignores it when
    /// comparing plans).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// A synchronized start (`--start-at`): the requested instant and this process's clock
    /// reading when its wait ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<StartAt>,
}

impl LoadPlan {
    /// How long in-flight requests may finish after a stop, unless told otherwise (`--grace`).
    pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

    /// `requests` Poisson arrivals at `rate` requests per second from `seed`: no warm-up,
    /// cool-down, error bound or think time.
    pub fn poisson(rate: f64, requests: u64, seed: u64) -> Self {
        LoadPlan {
            profile: Profile::Poisson,
            load: Load::Open { arrivals: goodput_workload::Arrivals::Poisson { rate }, max_concurrency: None },
            sweep_points: None,
            max_concurrency: None,
            requests: Some(requests),
            duration: None,
            warmup: Edge::None,
            cooldown: Edge::None,
            max_errors: None,
            stop_over_saturated: false,
            grace: Self::DEFAULT_GRACE,
            export_schedule: None,
            think_time: ThinkTime::default(),
            pause_scale: None,
            seed,
            shard: None,
            start_at: None,
        }
    }
}

/// A synchronized start (`--start-at`): part of the plan (the requested instant is the same for
/// every shard), with this process's clock reading at the start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartAt {
    /// The requested start, RFC 3339 UTC with nanoseconds.
    pub requested: String,
    /// What the clocks said when the wait ended (absent until the run starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockReading>,
}

/// This process's clocks at the end of its wait for the start instant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockReading {
    /// The wall clock when the wait ended, RFC 3339 UTC with nanoseconds.
    pub woke_at: String,
    /// `woke_at − requested`, ms (positive: late).
    pub late_ms: f64,
    /// How far the wall clock moved against the monotonic clock over the wait, ms: (wall-clock
    /// time elapsed) − (monotonic time elapsed). Non-zero when the wall clock was stepped or
    /// slewed (NTP) while the shard waited; the wait itself runs on the monotonic clock.
    pub clock_offset_ms: f64,
    /// The spread of (wall − monotonic) over several back-to-back paired reads at the start, ms:
    /// how precisely this process can tie a monotonic instant to the wall clock. It does not
    /// include the wall clock's own error against UTC (no time server is consulted).
    pub clock_uncertainty_ms: f64,
}

/// One of `count` processes that share one schedule (see `goodput_workload::shard`).
pub use goodput_workload::Shard;

/// How many distinct prompts a run sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistinctPrompts {
    /// A new synthetic prompt for every request (built ahead of the load from single-token words:
    /// no tokenizer runs on the send path).
    PerRequest,
    /// The dataset's entries, cycled when the run asks for more.
    Dataset(usize),
}

/// The workload part of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPlan {
    pub spec: WorkloadSpec<SourceInfo>,
    /// `cl100k_base`, or the path of a `tokenizer.json`.
    pub tokenizer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_prompts: Option<DistinctPrompts>,
}

/// The SLO: its predicates (none: no SLO) and smoothed-goodput parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SloPlan {
    pub predicates: Slo,
    pub smoothing: Option<Smoothing>,
}

impl SloPlan {
    /// The SLO to evaluate, when there is one.
    pub fn slo(&self) -> Option<(Slo, Option<Smoothing>)> {
        (!self.predicates.is_empty()).then(|| (self.predicates.clone(), self.smoothing))
    }
}

/// Output settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputPlan {
    pub out: Option<PathBuf>,
    pub percentiles: PercentileMethod,
    /// Which per-request records the result document holds (`--records`; absent: `all`).
    #[serde(default, skip_serializing_if = "is_default_records")]
    pub records: goodput_metrics::RecordsMode,
}

fn is_default_records(m: &goodput_metrics::RecordsMode) -> bool {
    *m == goodput_metrics::RecordsMode::All
}

/// The engine model: a validated configuration and the memory plan it implies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnginePlan {
    pub config: EngineConfig,
    pub memory: MemoryPlan,
}

impl EnginePlan {
    /// Validates `config` (it must fit in memory) and computes its memory plan.
    pub fn new(config: EngineConfig) -> Result<Self, goodput_engine::EngineError> {
        let memory = config.plan()?;
        Ok(EnginePlan { config, memory })
    }

    /// A few words: model, GPUs (all of a deployment's), weight format.
    pub fn short(&self) -> String {
        let c = &self.config;
        let layout = match (&c.disaggregation, c.replicas) {
            (Some(d), _) => format!(", {} prefill + {} decode of {}", d.prefill, d.decode, c.tp),
            (None, r) if r > 1 => format!(", {r} replicas of {}", c.tp),
            _ => String::new(),
        };
        format!("{} on {}× {} ({}{layout})", c.model.name, c.gpus(), c.gpu.name, c.dtype.name())
    }

    /// One line: what is modelled, and how it serves.
    pub fn describe(&self) -> String {
        let c = &self.config;
        let mut s = format!(
            "{} on {}× {} ({} weights, {} KV, {} KV blocks of {} = {} tokens)",
            c.model.name,
            c.tp,
            c.gpu.name,
            c.dtype.name(),
            c.kv_dtype.name(),
            self.memory.kv_blocks,
            c.block_size,
            self.memory.kv_tokens
        );
        for m in c.mechanisms() {
            s.push_str(" · ");
            s.push_str(&m);
        }
        s
    }
}

/// What `bench` measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetPlan {
    /// A server at a URL.
    Url { url: String },
    /// The engine model, served in-process on a loopback port.
    Embedded { engine: Box<EnginePlan> },
}

/// A validated run plan (`bench`: `target` and the client's settings; `sim`: `engine`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetPlan>,
    /// The simulated engine (`sim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EnginePlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// The model requested (`bench`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    pub ignore_eos: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Resends after a failure before any content (`bench`; 0: each request is sent once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// The largest one stream event may be, bytes (`bench`; default 16 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_event_bytes: Option<u64>,
    /// How a reasoning model's thinking is told from its answer (`bench --reasoning-parser`;
    /// default `fields`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_parser: Option<goodput_wire::ReasoningParser>,
    pub load: LoadPlan,
    pub workload: WorkloadPlan,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Timeouts>,
    pub slo: SloPlan,
    pub output: OutputPlan,
    /// Scrape the server's metrics during each measured stage (`--scrape-metrics`; always for
    /// the embedded engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape: Option<ScrapePlan>,
}

impl RunPlan {
    /// A run of `load` on `workload` under `slo` in the engine model, ignoring end-of-sequence
    /// tokens as `sim` does by default; no engine yet (the caller sets the one it runs).
    pub fn simulated(load: LoadPlan, workload: WorkloadPlan, slo: SloPlan, output: OutputPlan) -> Self {
        RunPlan {
            target: None,
            engine: None,
            api: None,
            model: None,
            api_key_env: None,
            ca_cert: None,
            ignore_eos: true,
            extra_body: None,
            retries: None,
            max_event_bytes: None,
            reasoning_parser: None,
            load,
            workload,
            timeouts: None,
            slo,
            output,
            scrape: None,
        }
    }
}

/// Where and how often the server's metrics are scraped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScrapePlan {
    /// The exposition's URL; `null`: the target's own `/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The scrape period.
    #[serde(with = "secs")]
    pub interval: Duration,
}

impl RunPlan {
    /// The engine modelled, if any (embedded or simulated).
    pub fn engine_plan(&self) -> Option<&EnginePlan> {
        match (&self.target, &self.engine) {
            (Some(TargetPlan::Embedded { engine }), _) => Some(engine),
            (_, Some(e)) => Some(e),
            _ => None,
        }
    }
}
