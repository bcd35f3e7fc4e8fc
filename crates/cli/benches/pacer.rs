//! The load generator's own precision: a Poisson schedule of 2,000 req/s (short outputs) for 10 s
//! against the embedded engine, on this machine. Prints schedule lag p50/p99 and achieved vs
//! offered rate (targets: lag p99 ≤ 1 ms, achieved within 2% of offered).
//! `cargo bench -p goodput --bench pacer`

use std::sync::Arc;

use goodput_client::{Api, Cancel, Endpoint, HttpClient, Load, RunConfig, Timeouts, run};
use goodput_engine::{Catalog, Dtype, EngineConfig};
use goodput_metrics::{SummaryOptions, summarize};
use goodput_server::{Embedded, ServerConfig};
use goodput_tokenizer::Tokenizer;
use goodput_workload::{Arrivals, LengthDist, Workload, WorkloadSpec};

fn main() {
    let rate = 2000.0;
    let secs = 10u64;
    // as `goodput bench` runs: the load generator's workers at raised priority, the embedded
    // engine on its own runtime at lowered priority
    let rt = tokio::runtime::Builder::new_multi_thread()
        .on_thread_start(goodput_client::priority::worker)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tk = Tokenizer::cl100k().unwrap();
        let c = Catalog::builtin();
        // a fast engine, so the server keeps up and what is measured is the client
        let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("b200").unwrap().clone());
        cfg.dtype = Dtype::Fp8;
        cfg.max_num_seqs = 1024;
        let e = Embedded::start(cfg, tk.clone(), ServerConfig { nice: 10, ..ServerConfig::new("llama-3.1-8b") })
            .await
            .unwrap();
        let timeouts = Timeouts::default();
        let ep = Endpoint::new(
            HttpClient::new(&e.url(), None, 256, timeouts.connect).unwrap(),
            Api::Completions,
            timeouts,
            tk.clone(),
        );
        let load = Load::Open { arrivals: Arrivals::Poisson { rate }, max_concurrency: None };
        let mut run_cfg = RunConfig::new(load, "llama-3.1-8b");
        run_cfg.sending.bounds.duration_s = Some(secs as f64);
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(16),
            output_tokens: LengthDist::Fixed(4),
            ..Default::default()
        };
        let w = Workload::new(spec, tk).unwrap();
        let out = run(ep, run_cfg, w, Cancel::never(), Arc::new(())).await;
        let s = summarize(&out.records, &SummaryOptions { offered_rate: Some(rate), ..SummaryOptions::new() });
        let achieved = s.achieved_rate.unwrap_or(0.0);
        // the schedule actually drawn (a Poisson sample of 10 s deviates from the nominal rate)
        let n = out.records.len();
        let span = out.records.iter().map(|r| r.scheduled_ms).fold(0.0, f64::max) / 1000.0;
        let drawn = (n - 1) as f64 / span;
        let p99 = s.schedule_lag_ms.p99.unwrap_or(f64::NAN);
        println!(
            "pacer: {n} requests, offered {rate:.0} req/s (drawn schedule {drawn:.1}), achieved {achieved:.1} req/s \
             ({:+.2}% of the schedule, {:+.2}% of offered), schedule lag p50 {:.3} ms, p99 {p99:.3} ms, max {:.3} ms, \
             failed {}, verdict {:?} (targets: lag p99 ≤ 1 ms: {}; achieved within 2%: {})",
            (achieved / drawn - 1.0) * 100.0,
            (achieved / rate - 1.0) * 100.0,
            s.schedule_lag_ms.p50.unwrap_or(f64::NAN),
            s.schedule_lag_ms.max.unwrap_or(f64::NAN),
            s.failed,
            s.verdict,
            if p99 <= 1.0 { "met" } else { "MISSED" },
            if (achieved / drawn - 1.0).abs() <= 0.02 { "met" } else { "MISSED" },
        );
        e.shutdown().await;
    });
}
