//! `/metrics` in the Prometheus text format, with vLLM's metric names so existing dashboards and
//! scrapers work unchanged. Observations take no lock (atomic counters).

use std::fmt::Write;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use goodput_engine::Gauges;

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];

/// A histogram updated without a lock: one atomic counter per bucket, the sum as the bits of an
/// `f64` updated by compare-and-swap (observations from many handlers never wait on each other).
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_bits: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            sum_bits: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }
    /// `n` observations of `v`.
    fn observe_n(&self, v: f64, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.counts[i].fetch_add(n, Relaxed);
        }
        let add = v * n as f64;
        let _ = self.sum_bits.fetch_update(Relaxed, Relaxed, |b| Some((f64::from_bits(b) + add).to_bits()));
        self.count.fetch_add(n, Relaxed);
    }
    fn observe(&self, v: f64) {
        self.observe_n(v, 1);
    }
    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut acc = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            acc += c.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {acc}");
        }
        // a scrape concurrent with observations may see a bucket before the count: keep +Inf ≥ all
        let count = self.count.load(Relaxed).max(acc);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", f64::from_bits(self.sum_bits.load(Relaxed)));
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Counters and histograms the HTTP layer observes, without locks (atomics only), so a token
/// event costs a few atomic adds.
#[derive(Debug)]
pub struct ServerMetrics {
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics {
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
        }
    }
}

impl ServerMetrics {
    pub fn prompt(&self, tokens: u64) {
        self.prompt_tokens.fetch_add(tokens, Relaxed);
    }
    pub fn first_token(&self, ttft_s: f64) {
        self.ttft.observe(ttft_s);
    }
    /// `n` tokens arrived `gap_s` after the previous ones (each counts `gap_s / n` of ITL).
    pub fn tokens(&self, n: u32, gap_s: Option<f64>) {
        self.generation_tokens.fetch_add(n as u64, Relaxed);
        if let Some(g) = gap_s.filter(|_| n > 0) {
            self.itl.observe_n(g / n as f64, n as u64);
        }
    }
    pub fn finished(&self, e2e_s: f64) {
        self.e2e.observe(e2e_s);
    }

    /// The whole exposition.
    pub fn render(&self, model: &str, g: &Gauges) -> String {
        let m = self;
        let l = format!("model_name=\"{}\"", model.replace('\\', "\\\\").replace('"', "\\\""));
        let mut o = String::new();
        let mut scalar = |name: &str, kind: &str, help: &str, v: f64| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{l}}} {v}");
        };
        scalar("vllm:num_requests_running", "gauge", "Number of requests in the running batch.", g.running as f64);
        scalar("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be admitted.", g.waiting as f64);
        scalar("vllm:kv_cache_usage_perc", "gauge", "KV cache usage (1 means 100 percent).", g.kv_utilization);
        scalar("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.", g.preemptions as f64);
        let counters = [
            ("vllm:prefix_cache_queries_total", "Prefix cache queries, in tokens.", g.prefix_queried_tokens),
            ("vllm:prefix_cache_hits_total", "Prefix cache hits, in tokens.", g.prefix_hit_tokens),
            ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", g.spec_drafts),
            ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", g.spec_draft_tokens),
            ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", g.spec_accepted_tokens),
        ];
        for (name, help, v) in counters {
            scalar(name, "counter", help, v as f64);
        }
        scalar(
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            m.prompt_tokens.load(Relaxed) as f64,
        );
        scalar(
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            m.generation_tokens.load(Relaxed) as f64,
        );
        m.ttft.render(&mut o, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &l);
        m.itl.render(&mut o, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &l);
        m.e2e.render(
            &mut o,
            "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
            &l,
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_format() {
        let m = ServerMetrics::default();
        m.prompt(10);
        m.first_token(0.03);
        m.tokens(1, None);
        m.tokens(2, Some(0.04));
        m.finished(0.2);
        let g = Gauges {
            running: 2,
            waiting: 1,
            kv_utilization: 0.25,
            preemptions: 3,
            prefix_queried_tokens: 64,
            prefix_hit_tokens: 32,
            spec_drafts: 5,
            spec_draft_tokens: 20,
            spec_accepted_tokens: 12,
        };
        let t = m.render("llama", &g);
        assert!(t.contains("vllm:num_requests_running{model_name=\"llama\"} 2"));
        assert!(t.contains("vllm:kv_cache_usage_perc{model_name=\"llama\"} 0.25"));
        assert!(t.contains("vllm:generation_tokens_total{model_name=\"llama\"} 3"));
        assert!(t.contains("vllm:prefix_cache_hits_total{model_name=\"llama\"} 32"));
        assert!(t.contains("vllm:spec_decode_num_accepted_tokens_total{model_name=\"llama\"} 12"));
        assert!(t.contains("vllm:time_to_first_token_seconds_bucket{model_name=\"llama\",le=\"0.04\"} 1"));
        assert!(t.contains("vllm:time_to_first_token_seconds_bucket{model_name=\"llama\",le=\"0.02\"} 0"));
        // two ITL samples of 20 ms each
        assert!(t.contains("vllm:inter_token_latency_seconds_count{model_name=\"llama\"} 2"));
        assert!(t.contains("vllm:inter_token_latency_seconds_bucket{model_name=\"llama\",le=\"0.025\"} 2"));
        assert!(t.contains("vllm:e2e_request_latency_seconds_bucket{model_name=\"llama\",le=\"+Inf\"} 1"));
        for line in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap_or_else(|_| panic!("bad sample line {line}"));
        }
    }
}
