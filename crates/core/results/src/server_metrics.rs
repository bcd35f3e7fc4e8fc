//! Server metrics scraped during a run (`--scrape-metrics`): the Prometheus text exposition
//! parsed with a real parser (`prom_text_format_parser`), the serving engines' own names mapped to
//! common series, and the server's generated-token count cross-checked against the client's.
//!
//! Pure: the scraping itself (an async task on the run's clock) lives in `goodput-client`
//! (`scrape.rs`); this module turns each scrape's text into a [`Snapshot`] and a list of
//! timestamped snapshots into the document's [`ServerMetrics`].
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

    /// The candidate source metrics of each series, first present wins (a newer name before a
    /// deprecated one, so a server exposing both is not counted twice).
    fn table(self) -> &'static [(Series, &'static [&'static str])] {
        match self {
            Flavour::Vllm | Flavour::Goodput => VLLM,
            Flavour::Sglang => SGLANG,
            Flavour::Tgi => TGI,
            Flavour::Llamacpp => LLAMACPP,
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
    fn is_ratio(self) -> bool {
        matches!(self, Series::KvUsage | Series::PrefixHitRate)
    }
}

const VLLM: &[(Series, &[&str])] = &[
    (Series::Running, &["vllm:num_requests_running"]),
    (Series::Waiting, &["vllm:num_requests_waiting"]),
    (Series::KvUsage, &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
    (
        Series::PrefixHits,
        &[
            "vllm:prefix_cache_hits_total",
            "vllm:prefix_cache_hits",
            "vllm:gpu_prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits",
        ],
    ),
    (
        Series::PrefixQueries,
        &[
            "vllm:prefix_cache_queries_total",
            "vllm:prefix_cache_queries",
            "vllm:gpu_prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries",
        ],
    ),
    (Series::PrefixHitRate, &["vllm:gpu_prefix_cache_hit_rate"]),
    (Series::Preemptions, &["vllm:num_preemptions_total", "vllm:num_preemptions"]),
    (Series::GenerationTokens, &["vllm:generation_tokens_total", "vllm:generation_tokens"]),
    (Series::PromptTokens, &["vllm:prompt_tokens_total", "vllm:prompt_tokens"]),
];

const SGLANG: &[(Series, &[&str])] = &[
    (Series::Running, &["sglang:num_running_reqs"]),
    (Series::Waiting, &["sglang:num_queue_reqs"]),
    (Series::KvUsage, &["sglang:token_usage"]),
    // every prompt token is looked up in SGLang's radix cache: the prompt tokens are the queries
    (Series::PrefixHits, &["sglang:cached_tokens_total"]),
    (Series::PrefixQueries, &["sglang:prompt_tokens_total"]),
    (Series::PrefixHitRate, &["sglang:cache_hit_rate"]),
    // `sglang:num_retracted_reqs` is a gauge reset after every report, not a count of the run
    (Series::GenerationTokens, &["sglang:generation_tokens_total"]),
    (Series::PromptTokens, &["sglang:prompt_tokens_total"]),
];

/// TGI counts tokens only per finished request, in histograms: their sums are the counters.
const TGI: &[(Series, &[&str])] = &[
    (Series::Running, &["tgi_batch_current_size"]),
    (Series::Waiting, &["tgi_queue_size"]),
    (Series::GenerationTokens, &["tgi_request_generated_tokens_sum"]),
    (Series::PromptTokens, &["tgi_request_input_length_sum"]),
];

const LLAMACPP: &[(Series, &[&str])] = &[
    (Series::Running, &["llamacpp:requests_processing"]),
    (Series::Waiting, &["llamacpp:requests_deferred"]),
    (Series::KvUsage, &["llamacpp:kv_cache_usage_ratio"]),
    (Series::GenerationTokens, &["llamacpp:tokens_predicted_total"]),
    (Series::PromptTokens, &["llamacpp:prompt_tokens_total"]),
];

/// Detection order: the first flavour one of whose names is present.
const DETECT: [Flavour; 4] = [Flavour::Vllm, Flavour::Sglang, Flavour::Tgi, Flavour::Llamacpp];

/// Why a scrape's text could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExpositionError {
    #[error("not the Prometheus text format: {0}")]
    Parse(String),
}

/// One metric's value over its label sets: their sum and how many there were.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Agg {
    sum: f64,
    n: u32,
}

/// One scrape, read: every sample's value combined per name. A histogram or summary `h` gives
/// `h_sum` and `h_count`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    values: BTreeMap<String, Agg>,
}

impl Snapshot {
    fn add(&mut self, name: String, v: f64) {
        if v.is_finite() {
            let a = self.values.entry(name).or_default();
            a.sum += v;
            a.n += 1;
        }
    }

    fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// `name` over its label sets: summed, or averaged for a ratio.
    fn value(&self, name: &str, ratio: bool) -> Option<f64> {
        let a = self.values.get(name)?;
        Some(if ratio { a.sum / a.n.max(1) as f64 } else { a.sum })
    }

    /// How many metric names it holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Parses one exposition (Prometheus text format 0.0.4).
pub fn parse_exposition(text: &str) -> Result<Snapshot, ExpositionError> {
    use prom_text_format_parser::{ScrapeParseError, Type, ValueType, parse_scrape};
    let mut snap = Snapshot::default();
    // an exposition with no samples is valid (the parser wants at least one line)
    if text.trim().is_empty() {
        return Ok(snap);
    }
    // the grammar wants every line ended, the last one too
    let owned;
    let text = if text.ends_with('\n') {
        text
    } else {
        owned = format!("{text}\n");
        &owned
    };
    // Lines that do not parse fail the scrape; metadata the parser could not attach to samples
    // (a `# TYPE x counter` whose samples are named `x_total`, a family with no samples) does not:
    // those samples are kept under their own names.
    let (metrics, error) = parse_scrape(text);
    if let Some(ScrapeParseError::Parse(msg)) = error {
        return Err(ExpositionError::Parse(
            msg.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" "),
        ));
    }
    for metric in &metrics {
        let name = &metric.name;
        for s in &metric.samples {
            let v = s.value.value.as_f64();
            match (metric.kind, s.value.value_type) {
                // a histogram's buckets and a summary's quantiles are not needed: their sum and count are
                (Type::Histogram | Type::Summary, ValueType::Sample) => {}
                (_, ValueType::Sample) => snap.add(name.clone(), v),
                (_, ValueType::Sum) => snap.add(format!("{name}_sum"), v),
                (_, ValueType::Count) => snap.add(format!("{name}_count"), v),
            }
        }
    }
    Ok(snap)
}

/// The flavour whose names a snapshot uses, if any.
pub fn detect(snap: &Snapshot) -> Option<Flavour> {
    DETECT.into_iter().find(|f| f.table().iter().any(|(_, names)| names.iter().any(|n| snap.has(n))))
}

/// For each series, the first candidate name of `flavour` present in any of the snapshots.
pub fn sources<'a>(
    flavour: Flavour,
    snaps: impl IntoIterator<Item = &'a Snapshot> + Clone,
) -> BTreeMap<Series, String> {
    let mut out = BTreeMap::new();
    for (series, names) in flavour.table() {
        if let Some(n) = names.iter().find(|n| snaps.clone().into_iter().any(|s| s.has(n))) {
            out.insert(*series, (*n).to_string());
        }
    }
    out
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

impl ServerSample {
    /// The sample of `snap` at `t_ms`, from the chosen `sources`.
    pub fn map(t_ms: f64, snap: &Snapshot, sources: &BTreeMap<Series, String>) -> Self {
        let get = |s: Series| sources.get(&s).and_then(|n| snap.value(n, s.is_ratio()));
        ServerSample {
            t_ms,
            running: get(Series::Running),
            waiting: get(Series::Waiting),
            kv_usage: get(Series::KvUsage),
            prefix_hits: get(Series::PrefixHits),
            prefix_queries: get(Series::PrefixQueries),
            prefix_hit_rate: get(Series::PrefixHitRate),
            preemptions: get(Series::Preemptions),
            generation_tokens: get(Series::GenerationTokens),
            prompt_tokens: get(Series::PromptTokens),
        }
    }
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

/// One scrape as the scraper saw it: when (ms on the run's clock) and what it read.
pub type Scrape = (f64, Result<Snapshot, String>);

impl ServerMetrics {
    /// Builds the series from every scrape of a run; `flavour` is forced when the server is
    /// known (the embedded engine), else detected from the first snapshot that names one.
    pub fn from_scrapes(url: &str, interval_s: f64, flavour: Option<Flavour>, scrapes: Vec<Scrape>) -> Self {
        let mut first_error = None;
        let mut errors = 0;
        let mut snaps = Vec::new();
        for (t, r) in &scrapes {
            match r {
                Ok(s) => snaps.push((*t, s)),
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert_with(|| e.clone());
                }
            }
        }
        let flavour = flavour.or_else(|| snaps.iter().find_map(|(_, s)| detect(s)));
        let sources = flavour.map(|f| sources(f, snaps.iter().map(|(_, s)| *s))).unwrap_or_default();
        let mut samples: Vec<ServerSample> = snaps.iter().map(|(t, s)| ServerSample::map(*t, s, &sources)).collect();
        samples.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
        ServerMetrics {
            url: url.to_string(),
            interval_s,
            flavour,
            sources,
            scrapes: scrapes.len() as u64,
            errors,
            first_error,
            samples,
            tokens: None,
        }
    }

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

    fn fixture(name: &str) -> String {
        let path = format!("{}/../../../fixtures/metrics/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn one(name: &str) -> (Option<Flavour>, BTreeMap<Series, String>, ServerSample) {
        let snap = parse_exposition(&fixture(name)).unwrap();
        let f = detect(&snap);
        let src = sources(f.unwrap(), [&snap]);
        let s = ServerSample::map(0.0, &snap, &src);
        (f, src, s)
    }

    #[test]
    fn vllm_v1_sums_engines_and_averages_kv() {
        let (f, src, s) = one("vllm.txt");
        assert_eq!(f, Some(Flavour::Vllm));
        // two engines (data parallel): 3 + 2 running, 1 + 0 waiting
        assert_eq!(s.running, Some(5.0));
        assert_eq!(s.waiting, Some(1.0));
        // 0.25 and 0.75 full: 0.5 on average
        assert_eq!(s.kv_usage, Some(0.5));
        assert_eq!(src[&Series::KvUsage], "vllm:kv_cache_usage_perc");
        // the current names win over the deprecated gpu_ ones (exposed too, with other values)
        assert_eq!(src[&Series::PrefixHits], "vllm:prefix_cache_hits_total");
        assert_eq!(s.prefix_hits, Some(300.0 + 100.0));
        assert_eq!(s.prefix_queries, Some(1000.0 + 600.0));
        assert_eq!(s.preemptions, Some(4.0));
        assert_eq!(s.generation_tokens, Some(5120.0 + 2048.0));
        assert_eq!(s.prompt_tokens, Some(8192.0 + 4096.0));
        assert_eq!(s.prefix_hit_rate, None);
    }

    #[test]
    fn vllm_v0_deprecated_names() {
        let (f, src, s) = one("vllm_v0.txt");
        assert_eq!(f, Some(Flavour::Vllm));
        assert_eq!(src[&Series::KvUsage], "vllm:gpu_cache_usage_perc");
        assert_eq!(s.kv_usage, Some(0.87));
        assert_eq!(s.prefix_hit_rate, Some(0.45));
        assert_eq!(s.running, Some(5.0));
        assert_eq!(s.generation_tokens, Some(1500.0));
        assert_eq!(s.prefix_hits, None);
    }

    #[test]
    fn sglang() {
        let (f, src, s) = one("sglang.txt");
        assert_eq!(f, Some(Flavour::Sglang));
        assert_eq!(s.running, Some(8.0));
        assert_eq!(s.waiting, Some(4.0));
        assert_eq!(s.kv_usage, Some(0.52));
        assert_eq!(s.prefix_hit_rate, Some(0.28));
        assert_eq!(s.prefix_hits, Some(2560.0));
        assert_eq!(s.prefix_queries, Some(10240.0));
        assert_eq!(s.generation_tokens, Some(4096.0));
        assert_eq!(src[&Series::PromptTokens], "sglang:prompt_tokens_total");
        assert_eq!(s.preemptions, None);
    }

    #[test]
    fn tgi_histogram_sums_are_the_token_counters() {
        let (f, src, s) = one("tgi.txt");
        assert_eq!(f, Some(Flavour::Tgi));
        assert_eq!(s.running, Some(4.0));
        assert_eq!(s.waiting, Some(7.0));
        assert_eq!(s.generation_tokens, Some(8123.0));
        assert_eq!(s.prompt_tokens, Some(5632.0));
        assert_eq!(src[&Series::GenerationTokens], "tgi_request_generated_tokens_sum");
        assert_eq!((s.kv_usage, s.preemptions), (None, None));
    }

    #[test]
    fn llamacpp() {
        let (f, _, s) = one("llamacpp.txt");
        assert_eq!(f, Some(Flavour::Llamacpp));
        assert_eq!(s.running, Some(1.0));
        assert_eq!(s.waiting, Some(4.0));
        assert_eq!(s.generation_tokens, Some(39080.0));
        assert_eq!(s.prompt_tokens, Some(512.0));
        // recent builds dropped the KV ratio
        assert_eq!(s.kv_usage, None);
    }

    #[test]
    fn goodput_embedded_serves_vllm_names() {
        let (f, _, s) = one("goodput.txt");
        assert_eq!(f, Some(Flavour::Vllm));
        assert_eq!(s.running, Some(2.0));
        assert_eq!(s.kv_usage, Some(0.25));
        assert_eq!(s.generation_tokens, Some(3.0));
        assert_eq!(s.prefix_hits, Some(32.0));
    }

    #[test]
    fn metadata_without_its_samples_keeps_the_samples() {
        // a TYPE line named without `_total` (OpenMetrics style), a summary, an empty exposition
        let s = parse_exposition(
            "# TYPE x counter\nx_total 5\n# TYPE y summary\ny{quantile=\"0.5\"} 1\ny_sum 3\ny_count 2\n",
        )
        .unwrap();
        assert_eq!(s.len(), 3); // x_total, y_sum, y_count (quantiles dropped)
        assert!(s.has("x_total") && s.has("y_sum") && s.has("y_count"));
        assert!(parse_exposition("").unwrap().is_empty());
        assert!(parse_exposition("  \n").unwrap().is_empty());
    }

    #[test]
    fn garbage_is_an_error_and_counted() {
        assert!(parse_exposition("<html>404 page not found</html>").is_err());
        assert!(parse_exposition("vllm:num_requests_running{model_name=\"m\" 3\n").is_err());
        let ok = parse_exposition("# TYPE x gauge\nx 1").unwrap(); // no final newline
        assert_eq!(ok.len(), 1);
        let good = parse_exposition(&fixture("vllm.txt")).unwrap();
        let bad = parse_exposition("not metrics at all").unwrap_err().to_string();
        let m = ServerMetrics::from_scrapes(
            "http://h/metrics",
            1.0,
            None,
            vec![(-1.0, Ok(good.clone())), (999.0, Err(bad.clone())), (2000.0, Ok(good))],
        );
        assert_eq!((m.scrapes, m.errors, m.samples.len()), (3, 1, 2));
        assert_eq!(m.first_error.as_deref(), Some(bad.as_str()));
        let w = m.warnings();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].code, WarningCode::ScrapeFailed);
        assert!(w[0].message.contains("1 of 3 scrapes"), "{}", w[0].message);
    }

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
