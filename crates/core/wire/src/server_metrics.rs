//! Server metrics scraped during a run (`--scrape-metrics`), as the result document holds them:
//! the serving engines' names mapped to common series, a sample per scrape on the run's clock,
//! and the server's generated-token count cross-checked against the client's. Reading the
//! Prometheus text and mapping the names is the client's (`goodput_client::prometheus`), beside
//! the scraper.
//!
//! Label sets are combined per metric name: counts (requests running or waiting, counters,
//! histogram sums) are **summed** over every label set (several engines of a data-parallel
//! vLLM, several `model_name`s), ratios (KV-cache usage, a hit-rate gauge) are **averaged**
//! over them (two engines each 50% full are 50% full, not 100%). See `docs/metrics.md`,
//! Server metrics.

use std::collections::BTreeMap;

use goodput_metrics::{Warning, WarningCode};
use serde::{Deserialize, Serialize};

/// Which server's names an exposition uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    Vllm,
    Sglang,
    Tgi,
    Llamacpp,
    /// goodput's embedded engine (it serves vLLM's names).
    Goodput,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Vllm => "vLLM",
            Flavour::Sglang => "SGLang",
            Flavour::Tgi => "TGI",
            Flavour::Llamacpp => "llama.cpp",
            Flavour::Goodput => "goodput (embedded)",
        }
    }
}

/// A common series, whichever server fed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    /// Requests in the running batch (gauge).
    Running,
    /// Requests queued, not yet admitted (gauge).
    Waiting,
    /// KV-cache usage, 0..1 (gauge).
    KvUsage,
    /// Prefix-cache hits, tokens (counter).
    PrefixHits,
    /// Prefix-cache queries, tokens (counter).
    PrefixQueries,
    /// The server's own prefix-cache hit rate, 0..1 (gauge; when it has no counters).
    PrefixHitRate,
    /// Preemptions (counter).
    Preemptions,
    /// Generated (output) tokens (counter).
    GenerationTokens,
    /// Prompt (prefill) tokens (counter).
    PromptTokens,
}

impl Series {
    /// Averaged over label sets (a ratio) rather than summed.
    pub fn is_ratio(self) -> bool {
        matches!(self, Series::KvUsage | Series::PrefixHitRate)
    }
}

/// One scrape's values on the run's clock (`null`: the server does not expose that series).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSample {
    /// When the scrape was answered, ms on the run's clock (the records' clock; negative before
    /// the first request was sent).
    pub t_ms: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_usage: Option<f64>,
    pub prefix_hits: Option<f64>,
    pub prefix_queries: Option<f64>,
    pub prefix_hit_rate: Option<f64>,
    pub preemptions: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub prompt_tokens: Option<f64>,
}

/// The server's generated tokens over the run against the client's count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenCheck {
    /// The server's generated-token counter, last scrape minus first.
    pub server: f64,
    /// Output tokens the client counted over every request of the run.
    pub client: u64,
    /// (server − client) / client; `null` when the client counted none.
    pub rel_diff: Option<f64>,
    /// Within [`TOKEN_TOLERANCE`].
    pub agrees: bool,
}

/// How far the server's and the client's generated-token counts may differ before a warning.
pub const TOKEN_TOLERANCE: f64 = 0.05;

impl TokenCheck {
    pub fn new(server: f64, client: u64) -> Self {
        let rel_diff = (client > 0).then(|| (server - client as f64) / client as f64);
        let agrees = match rel_diff {
            Some(r) => r.abs() <= TOKEN_TOLERANCE,
            None => server == 0.0,
        };
        TokenCheck { server, client, rel_diff, agrees }
    }
}

/// What the run's scrapes of the server's metrics produced (`Run.server_metrics`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    /// The URL scraped.
    pub url: String,
    /// The scrape period, seconds.
    pub interval_s: f64,
    /// Whose names the exposition used (`null`: none recognized, or no scrape succeeded).
    pub flavour: Option<Flavour>,
    /// The source metric of each common series (absent: the server has none).
    pub sources: BTreeMap<Series, String>,
    /// Scrapes tried.
    pub scrapes: u64,
    /// Scrapes that failed (unreachable, an HTTP error, text that does not parse): never fatal.
    pub errors: u64,
    /// The first failure, for the reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// One per successful scrape, in time order.
    pub samples: Vec<ServerSample>,
    /// The generated-token cross-check (when the server counts generated tokens and two scrapes
    /// succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenCheck>,
}

impl ServerMetrics {
    /// The generated-token counter's growth from the first scrape that has it to the last.
    pub fn server_generated(&self) -> Option<f64> {
        let mut it = self.samples.iter().filter_map(|s| s.generation_tokens);
        let first = it.next()?;
        let last = it.next_back()?;
        Some(last - first)
    }

    /// Sets [`ServerMetrics::tokens`] from the output tokens the client counted over the run.
    pub fn cross_check(&mut self, client: u64) {
        self.tokens = self.server_generated().map(|server| TokenCheck::new(server, client));
    }

    /// The warnings the run carries: failed scrapes (one warning however many), and a token
    /// count that disagrees with the client's.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut w = Vec::new();
        if self.errors > 0 {
            w.push(Warning {
                code: WarningCode::ScrapeFailed,
                message: format!(
                    "{} of {} scrapes of {} failed (first: {}); the run itself was not affected",
                    self.errors,
                    self.scrapes,
                    self.url,
                    self.first_error.as_deref().unwrap_or("?"),
                ),
            });
        }
        if let Some(t) = &self.tokens
            && !t.agrees
        {
            let rel = t.rel_diff.map_or("n/a".to_string(), |r| format!("{:+.1}%", r * 100.0));
            w.push(Warning {
                code: WarningCode::ServerTokenMismatch,
                message: format!(
                    "the server generated {:.0} tokens during the run, the client counted {} ({rel}, over {:.0}%): \
                     other clients of the server, requests still in flight at the first or last scrape, tokens \
                     generated for cancelled or failed requests, or a server that counts at request end \
                     (TGI, llama.cpp) make them differ",
                    t.server,
                    t.client,
                    TOKEN_TOLERANCE * 100.0,
                ),
            });
        }
        w
    }

    /// Counters as rates between successive samples, for charts.
    pub fn rates(&self) -> Vec<RatePoint> {
        self.samples
            .windows(2)
            .filter_map(|w| {
                let (a, b) = (&w[0], &w[1]);
                let dt = (b.t_ms - a.t_ms) / 1e3;
                if dt <= 0.0 {
                    return None;
                }
                let per_s = |x: Option<f64>, y: Option<f64>| Some(((y? - x?) / dt).max(0.0));
                let hit_rate = match (a.prefix_hits, b.prefix_hits, a.prefix_queries, b.prefix_queries) {
                    (Some(h0), Some(h1), Some(q0), Some(q1)) if q1 > q0 => {
                        Some(((h1 - h0) / (q1 - q0)).clamp(0.0, 1.0))
                    }
                    _ => b.prefix_hit_rate,
                };
                Some(RatePoint {
                    t_ms: b.t_ms,
                    generation_tokens_per_s: per_s(a.generation_tokens, b.generation_tokens),
                    preemptions_per_s: per_s(a.preemptions, b.preemptions),
                    prefix_hit_rate: hit_rate,
                })
            })
            .collect()
    }

    /// One line for the console.
    pub fn line(&self) -> String {
        let who = self.flavour.map_or("unrecognized names", Flavour::name);
        let mut s = format!("server metrics: {who}, {} samples from {}", self.samples.len(), self.url);
        if self.errors > 0 {
            s.push_str(&format!(", {} of {} scrapes failed", self.errors, self.scrapes));
        }
        match &self.tokens {
            Some(t) => {
                let rel = t.rel_diff.map_or("n/a".to_string(), |r| format!("{:+.1}%", r * 100.0));
                s.push_str(&format!(
                    "; generated tokens: server {:.0}, client {} ({rel}{})",
                    t.server,
                    t.client,
                    if t.agrees { "" } else { ", MISMATCH" }
                ));
            }
            None => s.push_str("; no generated-token counter to cross-check"),
        }
        s
    }
}

/// Counters turned into rates over one scrape interval (ending at `t_ms`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatePoint {
    pub t_ms: f64,
    pub generation_tokens_per_s: Option<f64>,
    pub preemptions_per_s: Option<f64>,
    /// Hits over queries in the interval, or the server's own rate gauge.
    pub prefix_hit_rate: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: f64, tokens: f64, hits: f64, queries: f64, pre: f64) -> ServerSample {
        ServerSample {
            t_ms,
            generation_tokens: Some(tokens),
            prefix_hits: Some(hits),
            prefix_queries: Some(queries),
            preemptions: Some(pre),
            ..Default::default()
        }
    }

    fn metrics(samples: Vec<ServerSample>) -> ServerMetrics {
        ServerMetrics {
            url: "u".into(),
            interval_s: 1.0,
            flavour: Some(Flavour::Vllm),
            sources: BTreeMap::new(),
            scrapes: samples.len() as u64,
            errors: 0,
            first_error: None,
            samples,
            tokens: None,
        }
    }

    #[test]
    fn rates_between_scrapes() {
        let m = metrics(vec![sample(0.0, 100.0, 0.0, 0.0, 0.0), sample(500.0, 300.0, 30.0, 120.0, 1.0)]);
        let r = m.rates();
        assert_eq!(r.len(), 1);
        // 200 tokens in 0.5 s; 1 preemption in 0.5 s; 30 of 120 queried tokens hit
        assert_eq!(r[0].generation_tokens_per_s, Some(400.0));
        assert_eq!(r[0].preemptions_per_s, Some(2.0));
        assert_eq!(r[0].prefix_hit_rate, Some(0.25));
        assert_eq!(r[0].t_ms, 500.0);
    }

    #[test]
    fn token_cross_check() {
        let mut m = metrics(vec![sample(-5.0, 1000.0, 0.0, 0.0, 0.0), sample(9000.0, 1960.0, 0.0, 0.0, 0.0)]);
        assert_eq!(m.server_generated(), Some(960.0));
        m.cross_check(1000);
        let t = m.tokens.clone().unwrap();
        // (960 − 1000) / 1000 = −4%: within 5%
        assert_eq!((t.server, t.client), (960.0, 1000));
        assert!((t.rel_diff.unwrap() + 0.04).abs() < 1e-12);
        assert!(t.agrees);
        assert!(m.warnings().is_empty());
        m.cross_check(1100);
        // (960 − 1100) / 1100 = −12.7%
        assert!(!m.tokens.as_ref().unwrap().agrees);
        let w = m.warnings();
        assert_eq!(w[0].code, WarningCode::ServerTokenMismatch);
        assert!(w[0].message.contains("-12.7%"), "{}", w[0].message);
        assert!(m.line().contains("MISMATCH"));
    }

    #[test]
    fn serde_round_trip_with_nulls() {
        let m = metrics(vec![sample(0.0, 1.0, 0.0, 0.0, 0.0)]);
        let j = serde_json::to_value(&m).unwrap();
        assert!(j["samples"][0]["running"].is_null());
        assert_eq!(j["flavour"], "vllm");
        let back: ServerMetrics = serde_json::from_value(j).unwrap();
        assert_eq!(back, m);
    }
}
