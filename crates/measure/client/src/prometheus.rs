//! The Prometheus text exposition of a serving engine, read (`--scrape-metrics`): parsed with a
//! real parser (`prom_text_format_parser`), each engine's own names mapped to common series
//! (vLLM, SGLang, TGI, llama.cpp; goodput's embedded engine serves vLLM's), and a run's
//! timestamped scrapes turned into the document's [`ServerMetrics`]. Pure; the scraper
//! (the scraper, `scrape.rs`) runs it on the run's clock.
//!
//! Label sets are combined per metric name: counts (requests running or waiting, counters,
//! histogram sums) are **summed** over every label set (several engines of a data-parallel
//! vLLM, several `model_name`s), ratios (KV-cache usage, a hit-rate gauge) are **averaged**
//! over them (two engines each 50% full are 50% full, not 100%). See `docs/metrics.md`,
//! Server metrics.

use std::collections::BTreeMap;

use goodput_wire::server_metrics::{Flavour, Series, ServerMetrics, ServerSample};

/// The candidate source metrics of each series, first present wins (a newer name before a
/// deprecated one, so a server exposing both is not counted twice).
fn table(f: Flavour) -> &'static [(Series, &'static [&'static str])] {
    match f {
        Flavour::Vllm | Flavour::Goodput => VLLM,
        Flavour::Sglang => SGLANG,
        Flavour::Tgi => TGI,
        Flavour::Llamacpp => LLAMACPP,
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
    // its prompt counter excludes the tokens the prompt cache served (`--cache-prompt`): every
    // prompt token was looked up, so the queries are the two together
    (Series::PrefixHits, &["llamacpp:prompt_tokens_cached_total"]),
    (Series::PrefixQueries, &["llamacpp:prompt_tokens_cached_total+llamacpp:prompt_tokens_total"]),
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

    /// Whether it has `name` (a candidate `a+b`: both).
    fn has(&self, name: &str) -> bool {
        name.split('+').all(|n| self.values.contains_key(n))
    }

    /// `name` over its label sets: summed, or averaged for a ratio. A candidate `a+b` (counters
    /// only) is the sum of both.
    fn value(&self, name: &str, ratio: bool) -> Option<f64> {
        if name.contains('+') {
            return name.split('+').map(|n| self.value(n, ratio)).sum();
        }
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
    DETECT.into_iter().find(|&f| table(f).iter().any(|(_, names)| names.iter().any(|n| snap.has(n))))
}

/// For each series, the first candidate name of `flavour` present in any of the snapshots.
pub fn sources<'a>(
    flavour: Flavour,
    snaps: impl IntoIterator<Item = &'a Snapshot> + Clone,
) -> BTreeMap<Series, String> {
    let mut out = BTreeMap::new();
    for (series, names) in table(flavour) {
        if let Some(n) = names.iter().find(|n| snaps.clone().into_iter().any(|s| s.has(n))) {
            out.insert(*series, (*n).to_string());
        }
    }
    out
}

/// The sample of `snap` at `t_ms`, from the chosen `sources`.
pub fn sample(t_ms: f64, snap: &Snapshot, sources: &BTreeMap<Series, String>) -> ServerSample {
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

/// One scrape as the scraper saw it: when (ms on the run's clock) and what it read.
pub type Scrape = (f64, Result<Snapshot, String>);

/// Builds the series from every scrape of a run; `flavour` is forced when the server is
/// known (the embedded engine), else detected from the first snapshot that names one.
pub fn server_metrics(url: &str, interval_s: f64, flavour: Option<Flavour>, scrapes: Vec<Scrape>) -> ServerMetrics {
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
    let mut samples: Vec<ServerSample> = snaps.iter().map(|(t, s)| sample(*t, s, &sources)).collect();
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
        let s = sample(0.0, &snap, &src);
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
        // its prompt counter leaves out what the prompt cache served: 512 computed + 1536 cached
        assert_eq!((s.prefix_hits, s.prefix_queries), (Some(1536.0), Some(2048.0)));
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
        let m = server_metrics(
            "http://h/metrics",
            1.0,
            None,
            vec![(-1.0, Ok(good.clone())), (999.0, Err(bad.clone())), (2000.0, Ok(good))],
        );
        assert_eq!((m.scrapes, m.errors, m.samples.len()), (3, 1, 2));
        assert_eq!(m.first_error.as_deref(), Some(bad.as_str()));
        let w = m.warnings();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].code, goodput_metrics::WarningCode::ScrapeFailed);
        assert!(w[0].message.contains("1 of 3 scrapes"), "{}", w[0].message);
    }
}
