//! Shared helpers for the client's integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use goodput_client::{Api, Cancel, Endpoint, HttpClient, Load, RunConfig, RunOutcome, Timeouts, run};
use goodput_tokenizer::Tokenizer;
use goodput_workload::{LengthDist, Workload, WorkloadSpec};

pub fn tokenizer() -> Tokenizer {
    static TK: std::sync::OnceLock<Tokenizer> = std::sync::OnceLock::new();
    TK.get_or_init(|| Tokenizer::cl100k().unwrap()).clone()
}

pub fn endpoint(url: &str, api: Api, timeouts: Timeouts) -> Endpoint {
    Endpoint::new(HttpClient::new(url, None, 8, timeouts.connect).unwrap(), api, timeouts, tokenizer())
}

pub fn config(requests: u64, concurrency: usize) -> RunConfig {
    let mut c = RunConfig {
        grace: Some(Duration::from_millis(500)),
        ..RunConfig::new(Load::closed(concurrency), "scripted-model")
    };
    c.sending.bounds.requests = Some(requests);
    c
}

pub fn workload(input: u32, output: u32) -> Workload {
    let spec = WorkloadSpec {
        input_tokens: LengthDist::Fixed(input),
        output_tokens: LengthDist::Fixed(output),
        ..Default::default()
    };
    Workload::new(spec, tokenizer()).unwrap()
}

/// Runs `cfg` against `url` within `limit` (the test fails if the run does not end in time).
pub async fn run_within(limit: Duration, ep: Endpoint, cfg: RunConfig, w: Workload) -> RunOutcome {
    tokio::time::timeout(limit, run(ep, cfg, w, Cancel::never(), Arc::new(())))
        .await
        .expect("the run must end within its time bound")
}

/// Host noise (a virtual machine's scheduler hiccup of a few ms every few seconds) may hit any
/// single sample: at least `share` of `values` must be within `tol` of `want`, and their median.
pub fn assert_mostly_close(what: &str, values: &[f64], want: f64, tol: f64, share: f64) {
    let within = values.iter().filter(|v| (*v - want).abs() <= tol).count();
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!(
        within as f64 >= share * values.len() as f64 && (median - want).abs() <= tol,
        "{what}: {within} of {} within {want} ± {tol} ms (median {median:.3}): {values:?}",
        values.len()
    );
}

pub fn assert_close(what: &str, got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol, "{what}: measured {got:.3} ms, expected {want:.3} ± {tol} ms");
}
