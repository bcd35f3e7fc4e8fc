//! Client-measured token times against the server's own emit times, at many concurrent streams.
//!
//! The server runs on a runtime of its own and the client on another, as they would on two hosts.
//! On Linux with two or more CPUs each side is pinned to its own CPU: otherwise the kernel's
//! wake-affine placement queues the client's thread behind the server's on one core for whole
//! bursts of 200 writes, and what is measured is the scheduler, not the client.

use std::sync::Arc;
use std::time::Duration;

use goodput_client::{Api, Cancel, Endpoint, HttpClient, Load, RunConfig, Timeouts, run};
use goodput_engine::{Catalog, EngineConfig};
use goodput_metrics::{PercentileMethod, Samples};
use goodput_server::{Embedded, ServerConfig};
use goodput_tokenizer::Tokenizer;
use goodput_workload::{LengthDist, Workload, WorkloadSpec};

/// Pins the calling thread (and every thread it spawns afterwards) to one CPU.
fn pin_to(cpu: usize) {
    #[cfg(target_os = "linux")]
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let _ = cpu;
}

fn unpin() {
    #[cfg(target_os = "linux")]
    unsafe {
        // every CPU the mask can name (the kernel keeps the ones that exist); available_parallelism
        // would read the pinned mask back and pin to CPU 0
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

pub struct EmitLag {
    pub events: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Runs `requests` requests over `streams` closed-loop streams against the embedded engine and
/// compares every content event's client timestamp with the server's emit time.
pub fn measure(streams: usize, requests: u64) -> EmitLag {
    let tk = Tokenizer::cl100k().unwrap();
    let pin = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if pin {
        pin_to(0); // the server's threads (runtime, engine) inherit this
    }
    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let c = Catalog::builtin();
    let cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
    let sc = ServerConfig { trace: true, ..ServerConfig::new("llama-3.1-8b") };
    let embedded = server_rt.block_on(Embedded::start(cfg, tk.clone(), sc)).unwrap();
    let url = embedded.url();
    if pin {
        pin_to(1); // the client's threads
    }
    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let outcome = client_rt.block_on(async {
        let timeouts = Timeouts::default();
        let ep = Endpoint::new(
            HttpClient::new(&url, None, streams, timeouts.connect).unwrap(),
            Api::Completions,
            timeouts,
            tk.clone(),
        );
        let mut cfg = RunConfig::new(Load::closed(streams), "llama-3.1-8b");
        cfg.sending.bounds.requests = Some(requests);
        // varied output lengths, as in real traffic: streams end (and are replaced) a few at a time
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(64),
            output_tokens: LengthDist::Uniform { lo: 16, hi: 112 },
            ..Default::default()
        };
        let w = Workload::new(spec, tk.clone()).unwrap();
        tokio::time::timeout(Duration::from_secs(300), run(ep, cfg, w, Cancel::never(), Arc::new(()))).await.unwrap()
    });
    if pin {
        unpin();
    }
    let traces = embedded.state.traces();
    server_rt.block_on(embedded.shutdown());

    let (records, clock) = (outcome.records, outcome.clock);
    assert_eq!(records.len() as u64, requests);
    let by_id: std::collections::HashMap<String, &goodput_server::Trace> =
        traces.iter().map(|t| (format!("cmpl-{}", t.id), t)).collect();
    let mut lag = Samples::new();
    for r in &records {
        assert!(r.is_success(), "{:?}", r.error);
        let t = by_id[r.response_id.as_ref().expect("response id")];
        assert_eq!(t.emits.len(), r.event_ms.len());
        for (k, &(at, _)) in t.emits.iter().enumerate() {
            lag.push((r.event_ms[k] - clock.ms(at)).abs());
        }
    }
    EmitLag {
        events: lag.count(),
        p50_ms: lag.percentile(0.5, PercentileMethod::Linear).unwrap(),
        p99_ms: lag.percentile(0.99, PercentileMethod::Linear).unwrap(),
    }
}
