//! The cost of `Engine::abort` against the length of the queues it searches: with 1k, 10k and
//! 100k sequences waiting (and a full running batch), aborts of sequences spread over the waiting
//! queue and the running list, timed per abort, then the next iteration's planning (which drops
//! the aborted running sequences). An O(1) abort keeps the per-abort figure flat: the printed
//! ratio (100k against 1k) stays at a few (cache misses in a 100× larger state) where a scan of
//! the queues would make it near 100.
//!
//! Figures only, no assertion on time: `cargo bench -p goodput-engine --bench abort_cost`

use std::time::Instant;

use goodput_engine::{Catalog, Engine, EngineConfig, EngineRequest, ServingEngine};

/// Nanoseconds per abort with `queued` sequences waiting behind a running batch.
fn per_abort_ns(queued: u64, aborts: u64) -> (f64, f64) {
    let c = Catalog::builtin();
    let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
    cfg.max_waiting = queued as usize + 1024;
    cfg.max_num_seqs = 256;
    cfg.efficiency.ingest_s = 0.0;
    cfg.efficiency.ingest_per_token_s = 0.0;
    let mut e = Engine::new(cfg).unwrap();
    let req = EngineRequest { prompt_tokens: 64, output_tokens: 64, ..Default::default() };
    for id in 0..queued {
        e.submit(id, req.clone(), 0.0).unwrap();
    }
    // one iteration admits a full batch; the rest waits
    e.start(0.0);
    let end = e.next_event().unwrap();
    e.complete(end, &mut Vec::new());
    // every k-th id: the running batch's and the queue's, spread over its whole length
    let aborts = aborts.min(queued / 4); // a quarter at most: the rest keeps the engine busy
    let stride = (queued / aborts).max(1);
    let ids: Vec<u64> = (0..aborts).map(|i| (i * stride + 1) % queued).collect();
    let t = Instant::now();
    for &id in &ids {
        e.abort(id);
    }
    let abort_ns = t.elapsed().as_nanos() as f64 / ids.len() as f64;
    let t = Instant::now();
    e.start(end);
    let plan_us = t.elapsed().as_nanos() as f64 / 1e3;
    assert!(e.has_work());
    (abort_ns, plan_us)
}

fn main() {
    let aborts = 1000;
    let mut first = None;
    println!("{:>10} {:>14} {:>22}", "waiting", "ns per abort", "next plan µs (after)");
    let mut last = 0.0;
    for queued in [1_000u64, 10_000, 100_000] {
        // best of 3: the least disturbed by other work on the machine
        let (ns, plan) = (0..3)
            .map(|_| per_abort_ns(queued, aborts))
            .fold((f64::MAX, f64::MAX), |(a, b), (x, y)| (a.min(x), b.min(y)));
        println!("{queued:>10} {ns:>14.0} {plan:>22.1}");
        first.get_or_insert(ns);
        last = ns;
    }
    let ratio = last / first.unwrap_or(last);
    println!(
        "abort cost, 100k waiting against 1k: {ratio:.2}× (O(1): a few, from cache misses; a scan of the queues: about 100)"
    );
}
