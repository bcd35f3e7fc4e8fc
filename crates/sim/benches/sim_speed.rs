//! Simulation speed: 100k requests of 200 input / 200 output tokens through the engine model in
//! virtual time, on one core. Prints simulated requests per second of wall time (target ≥ 100k).
//! `cargo bench -p goodput-sim --bench sim_speed`

use goodput_engine::{Catalog, Engine, EngineConfig};
use goodput_sim::{SimConfig, simulate};
use goodput_workload::{Arrivals, LengthDist, Load, Workload, WorkloadSpec};

fn main() {
    let n = 100_000u64;
    // everything arrives at once: let the whole run wait in the queue
    let c = Catalog::builtin();
    let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
    cfg.max_waiting = n as usize;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut engine = Engine::new(cfg.clone()).unwrap();
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(200),
            output_tokens: LengthDist::Fixed(200),
            ..Default::default()
        };
        let w = Workload::counts_only(spec).unwrap();
        let sim = SimConfig {
            load: Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None },
            requests: Some(n),
            duration_s: None,
            ignore_eos: true,
            seed: 0,
            max_errors: None,
        };
        let t = std::time::Instant::now();
        let out = simulate(&mut engine, &sim, w);
        let wall = t.elapsed().as_secs_f64();
        assert_eq!(out.records.len() as u64, n);
        assert!(out.records.iter().all(|r| r.error.is_none() && r.event_ms.len() == 200));
        best = best.min(wall);
        println!(
            "simulated {n} requests ({} steps, {:.0} s of virtual time) in {:.3} s",
            out.stats.steps, out.end_s, wall
        );
    }
    println!("sim speed: {:.0} simulated requests/s (best of 3; target ≥ 100000)", n as f64 / best);
}
