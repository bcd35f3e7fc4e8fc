//! Charts of the server's own metrics scraped during a run (`Run.server_metrics`), on the same
//! time axis as the client's charts (seconds on the run's clock): running and waiting requests,
//! KV-cache usage, and the counters as rates over each scrape interval (generated tokens/s,
//! preemptions/s, the prefix cache's hit rate). A chart appears only when the server exposes
//! its series; points are downsampled to [`MAX_POINTS`].

use goodput_results::Run;
use goodput_results::server_metrics::ServerSample;

use crate::svg::{Chart, MAX_POINTS, Mark, Series, downsample};

/// The server-metrics charts of a run (none when nothing was scraped).
pub fn server_charts(run: &Run, suffix: &str) -> Vec<Chart> {
    let Some(m) = run.server_metrics.as_ref() else { return Vec::new() };
    let samples = downsample(&m.samples, MAX_POINTS);
    let col = |f: fn(&ServerSample) -> Option<f64>, scale: f64| -> Vec<(f64, f64)> {
        samples.iter().filter_map(|s| Some((s.t_ms / 1e3, f(s)? * scale))).collect()
    };
    let rates = downsample(&m.rates(), MAX_POINTS);
    let rate = |f: fn(&goodput_results::server_metrics::RatePoint) -> Option<f64>, scale: f64| -> Vec<(f64, f64)> {
        rates.iter().filter_map(|r| Some((r.t_ms / 1e3, f(r)? * scale))).collect()
    };
    let who = m.flavour.map_or("server", |f| f.name());
    let mut out = vec![
        Chart::new(format!("chart-server-queue{suffix}"), "Server: running and waiting", "time (s)", "requests")
            .with(Series::new("running", Mark::Step, col(|s| s.running, 1.0)))
            .with(Series::new("waiting", Mark::Step, col(|s| s.waiting, 1.0))),
        Chart::new(format!("chart-server-kv{suffix}"), "Server: KV usage", "time (s)", "%").with(Series::new(
            format!("{who} KV cache"),
            Mark::Step,
            col(|s| s.kv_usage, 100.0),
        )),
        Chart::new(format!("chart-server-tokens{suffix}"), "Server: generated tokens", "time (s)", "tokens/s")
            .with(Series::new("generated tokens/s", Mark::Line, rate(|r| r.generation_tokens_per_s, 1.0))),
        Chart::new(format!("chart-server-preemptions{suffix}"), "Server: preemptions", "time (s)", "preemptions/s")
            .with(Series::new("preemptions/s", Mark::Line, rate(|r| r.preemptions_per_s, 1.0))),
        Chart::new(format!("chart-server-prefix{suffix}"), "Server: prefix cache hit rate", "time (s)", "%")
            .with(Series::new("hit rate", Mark::Line, rate(|r| r.prefix_hit_rate, 100.0))),
    ];
    // a mechanism's chart only when its counter moved (as for the engine's own charts)
    let grew = |f: fn(&ServerSample) -> Option<f64>| {
        let mut v = m.samples.iter().filter_map(f);
        matches!((v.next(), v.next_back()), (Some(a), Some(b)) if b > a)
    };
    if !grew(|s| s.preemptions) {
        out.retain(|c| !c.id.starts_with("chart-server-preemptions"));
    }
    if !grew(|s| s.prefix_queries) && m.samples.iter().all(|s| s.prefix_hit_rate.is_none_or(|r| r == 0.0)) {
        out.retain(|c| !c.id.starts_with("chart-server-prefix"));
    }
    for c in &mut out {
        c.series.retain(|s| !s.points.is_empty());
    }
    out.retain(|c| c.has_points());
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use goodput_results::server_metrics::{Flavour, ServerMetrics};

    use super::*;

    #[test]
    fn charts_only_for_series_the_server_has() {
        let sample = |t_ms: f64, running: f64, tokens: f64| ServerSample {
            t_ms,
            running: Some(running),
            waiting: Some(0.0),
            generation_tokens: Some(tokens),
            ..Default::default()
        };
        let m = ServerMetrics {
            url: "http://h/metrics".into(),
            interval_s: 1.0,
            flavour: Some(Flavour::Tgi),
            sources: BTreeMap::new(),
            scrapes: 3,
            errors: 0,
            first_error: None,
            samples: vec![sample(-2.0, 0.0, 0.0), sample(998.0, 4.0, 50.0), sample(1998.0, 2.0, 150.0)],
            tokens: None,
        };
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../../fixtures/results/v1-bench-before-run-ids.json")).unwrap();
        let mut run: Run = serde_json::from_value(doc["runs"][0].clone()).unwrap();
        run.server_metrics = Some(m);
        let cs = server_charts(&run, "-0");
        let ids: Vec<&str> = cs.iter().map(|c| c.id.as_str()).collect();
        // TGI has no KV usage, no preemptions, no prefix cache
        assert_eq!(ids, ["chart-server-queue-0", "chart-server-tokens-0"]);
        // 50 tokens in 1 s, then 100 in 1 s
        assert_eq!(cs[1].series[0].points, vec![(0.998, 50.0), (1.998, 100.0)]);
        assert_eq!(cs[0].series[0].points[1], (0.998, 4.0));
    }
}
