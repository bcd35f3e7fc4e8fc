//! Simulation speed on one core, in simulated requests per second of wall time:
//! - plain: 100k requests of 200 input / 200 output tokens, continuous batching over a paged
//!   cache (target ≥ 100k req/s);
//! - heaviest: 20k requests through every mechanism at once (a disaggregated deployment of 2
//!   prefill and 2 decode instances, prefix caching over shared prompts, speculative decoding
//!   with a draft model), target ≥ 20k req/s;
//! - agents: sessions of 12 calls whose contexts grow to about 100k tokens (a 12k-token first
//!   prompt, 8k tokens of tool output per call), 8 closed-loop agents over the prefix cache:
//!   target ≥ 100k calls/s. A long context's prompt is its segments, never re-tokenized, and
//!   its block hashes are reused from call to call.
//!
//! `cargo bench -p goodput-sim --bench sim_speed`

use goodput_engine::{Catalog, Disaggregation, EngineConfig, Link, SpecMethod, Speculative, build};
use goodput_sim::{SimConfig, simulate};
use goodput_workload::{AgenticSpec, Arrivals, LengthDist, Load, ThinkTime, Workload, WorkloadSpec};

fn measure(name: &str, cfg: &EngineConfig, spec: &WorkloadSpec, n: u64, target: f64) {
    measure_under(name, cfg, spec, Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None }, n, target);
}

fn measure_under(name: &str, cfg: &EngineConfig, spec: &WorkloadSpec, load: Load, n: u64, target: f64) {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut engine = build(cfg).unwrap();
        let w = Workload::counts_only(spec.clone()).unwrap();
        let sim = SimConfig::new(load.clone()).with_requests(n);
        let t = std::time::Instant::now();
        let out = simulate(engine.as_mut(), &sim, w);
        let wall = t.elapsed().as_secs_f64();
        if let Some(e) = out.records.iter().find_map(|r| r.error.as_ref()) {
            panic!("{name}: {} records, an error: {e:?}", out.records.len());
        }
        assert_eq!(out.records.len() as u64, n);
        assert!(out.records.iter().all(|r| r.error.is_none()), "{name}: every request completes");
        best = best.min(wall);
        println!(
            "{name}: simulated {n} requests ({} steps, {:.0} s of virtual time) in {:.3} s",
            out.stats.steps, out.end_s, wall
        );
    }
    println!("sim speed, {name}: {:.0} simulated requests/s (best of 3; target ≥ {target:.0})", n as f64 / best);
}

fn main() {
    let c = Catalog::builtin();
    let base = |n: u64| {
        let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        // everything arrives at once: let the whole run wait in the queue
        cfg.max_waiting = n as usize;
        cfg
    };
    let plain = WorkloadSpec {
        input_tokens: LengthDist::Fixed(200),
        output_tokens: LengthDist::Fixed(200),
        ..Default::default()
    };
    measure("plain", &base(100_000), &plain, 100_000, 100_000.0);

    let n = 20_000;
    let mut heavy = base(n);
    heavy.prefix_caching = true;
    heavy.chunked_prefill = true;
    heavy.scheduling = goodput_engine::Scheduling::Chunked;
    heavy.speculative = Some(Speculative {
        method: SpecMethod::Draft { model: Box::new(c.model("llama-3.2-1b").unwrap().clone()) },
        k: 4,
        acceptance: 0.7,
    });
    let link = Link::parse("100gbps", heavy.gpu.link_gbs).unwrap();
    heavy.disaggregation = Some(Disaggregation::parse("prefill=2,decode=2", link, false).unwrap());
    let shared = WorkloadSpec { prefix_groups: 16, prefix_tokens: 512, ..plain };
    measure("heaviest (disaggregated 2+2, prefix caching, draft speculation)", &heavy, &shared, n, 20_000.0);

    let mut agents = base(8);
    agents.prefix_caching = true;
    agents.chunked_prefill = true;
    agents.scheduling = goodput_engine::Scheduling::Chunked;
    let agentic = WorkloadSpec {
        input_tokens: LengthDist::Fixed(12_000),
        output_tokens: LengthDist::Fixed(64),
        agentic: Some(AgenticSpec {
            calls: LengthDist::Fixed(12),
            tool_time: ThinkTime::Fixed(1.0),
            tool_output_tokens: LengthDist::Fixed(8_000),
            ..Default::default()
        }),
        ..Default::default()
    };
    measure_under("agents (12 calls to ~100k-token contexts)", &agents, &agentic, Load::closed(8), 20_000, 100_000.0);
}
