//! Over random plans and every mechanism flag, a simulation never panics and every request
//! ends (issue 23: `--batching static` once indexed out of bounds when a padding sequence was
//! preempted and then computed again for a request that had already ended).

use goodput_engine::{
    Batching, Catalog, Disaggregation, EngineConfig, KvAlloc, Link, Prealloc, Router, Scheduling, ServingEngine,
    SpecMethod, Speculative, build,
};
use goodput_sim::{SimConfig, simulate};
use goodput_workload::{Arrivals, LengthDist, Load, ThinkTime, Turns, Workload, WorkloadSpec};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Plan {
    batching: Batching,
    scheduling: Scheduling,
    kv_alloc: KvAlloc,
    prealloc: Prealloc,
    prefix_caching: bool,
    speculative: Option<(bool, u32, f64)>,
    replicas: u32,
    router: Router,
    disaggregate: Option<(u32, u32, bool)>,
    max_num_seqs: u32,
    block_size: u32,
    memory: f64,
    rate: Option<f64>,
    concurrency: usize,
    input: (u32, u32),
    output: (u32, u32),
    sessions: bool,
    prefix_tokens: u32,
    requests: u64,
    ignore_eos: bool,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        (
            prop_oneof![Just(Batching::Continuous), Just(Batching::Static)],
            prop_oneof![Just(Scheduling::PrefillFirst), Just(Scheduling::DecodeFirst), Just(Scheduling::Chunked)],
            prop_oneof![Just(KvAlloc::Paged), Just(KvAlloc::Prealloc)],
            prop_oneof![Just(Prealloc::MaxModelLen), Just(Prealloc::Request)],
            any::<bool>(),
            proptest::option::of((any::<bool>(), 1u32..6, 0.1f64..0.95)),
            1u32..4,
            prop_oneof![Just(Router::RoundRobin), Just(Router::LeastLoaded), Just(Router::PrefixAware)],
            proptest::option::of((1u32..3, 1u32..3, any::<bool>())),
            prop_oneof![Just(4u32), Just(16), Just(64), Just(256)],
        ),
        (
            prop_oneof![Just(1u32), Just(16), Just(32)],
            // a small share of memory, so that KV runs out and preemption happens
            prop_oneof![Just(0.25f64), Just(0.5), Just(0.9)],
            proptest::option::of(prop_oneof![Just(f64::INFINITY), 1.0f64..200.0]),
            1usize..64,
            (16u32..2000, 0u32..4000),
            (1u32..200, 0u32..900),
            any::<bool>(),
            prop_oneof![Just(0u32), Just(500)],
            20u64..400,
            any::<bool>(),
        ),
    )
        .prop_map(|(a, b)| Plan {
            batching: a.0,
            scheduling: a.1,
            kv_alloc: a.2,
            prealloc: a.3,
            prefix_caching: a.4,
            speculative: a.5,
            replicas: a.6,
            router: a.7,
            disaggregate: a.8,
            max_num_seqs: a.9,
            block_size: b.0,
            memory: b.1,
            rate: b.2,
            concurrency: b.3,
            input: (b.4.0, b.4.0 + b.4.1),
            output: (b.5.0, b.5.0 + b.5.1),
            sessions: b.6,
            prefix_tokens: b.7,
            requests: b.8,
            ignore_eos: b.9,
        })
}

/// The engine a plan names, with the combinations the configuration refuses left out (each
/// refused one is refused with a message, which `plan()` checks).
fn engine(p: &Plan) -> Option<EngineConfig> {
    let c = Catalog::builtin();
    let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("a100").unwrap().clone());
    cfg.batching = p.batching;
    cfg.set_scheduling(if p.batching == Batching::Static { Scheduling::PrefillFirst } else { p.scheduling });
    cfg.kv_alloc = p.kv_alloc;
    cfg.prealloc = p.prealloc;
    cfg.prefix_caching = p.prefix_caching && p.kv_alloc == KvAlloc::Paged;
    cfg.max_num_seqs = p.max_num_seqs;
    cfg.max_batched_tokens = cfg.max_batched_tokens.max(p.max_num_seqs.min(1024));
    cfg.block_size = p.block_size;
    cfg.gpu_memory_utilization = p.memory;
    if let Some((draft, k, acceptance)) = p.speculative.filter(|_| p.batching == Batching::Continuous) {
        let method = if draft {
            SpecMethod::Draft { model: Box::new(c.model("llama-3.2-1b").unwrap().clone()) }
        } else {
            SpecMethod::Ngram
        };
        cfg.speculative = Some(Speculative { method, k, acceptance });
    }
    match p.disaggregate.filter(|_| p.batching == Batching::Continuous) {
        Some((prefill, decode, ppd)) => {
            cfg.disaggregation =
                Some(Disaggregation { prefill, decode, link: Link::parse("100gbps", 600.0).unwrap(), ppd });
        }
        None => {
            cfg.replicas = p.replicas;
            cfg.router = p.router;
        }
    }
    match cfg.plan() {
        Ok(_) => Some(cfg),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_request_of_every_plan_ends(p in plan()) {
        let Some(cfg) = engine(&p) else { return Ok(()) };
        let mut e: Box<dyn ServingEngine> = build(&cfg).unwrap();
        let load = match p.rate {
            Some(r) if r.is_infinite() => Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None },
            Some(rate) => Load::Open { arrivals: Arrivals::Poisson { rate }, max_concurrency: None },
            None => Load::Closed { concurrency: p.concurrency, think: ThinkTime::default() },
        };
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Uniform { lo: p.input.0, hi: p.input.1 },
            output_tokens: LengthDist::Uniform { lo: p.output.0, hi: p.output.1 },
            turns: if p.sessions { Turns::Up(3) } else { Turns::default() },
            prefix_groups: if p.prefix_tokens > 0 { 2 } else { 0 },
            prefix_tokens: p.prefix_tokens,
            ..Default::default()
        };
        let Ok(w) = Workload::counts_only(spec) else { return Ok(()) };
        let sc = SimConfig { ignore_eos: p.ignore_eos, seed: 11, ..SimConfig::new(load).with_requests(p.requests) };
        let out = simulate(e.as_mut(), &sc, w);
        // a conversation broken by a failed turn is not continued: its later turns are never
        // sent (they count against the budget); otherwise every request of the budget is sent
        let failed = out.records.iter().filter(|r| r.error.is_some()).count();
        if failed == 0 || !p.sessions {
            prop_assert_eq!(out.records.len() as u64, p.requests);
        } else {
            prop_assert!(out.records.len() as u64 <= p.requests);
        }
        for r in &out.records {
            prop_assert!(r.end_ms.is_some(), "request {} never ended: {:?}", r.id, r);
            // a request the model could not serve is rejected with a reason; any other failure
            // is a modelling defect
            if let Some(err) = &r.error {
                prop_assert_eq!(err.class, goodput_metrics::ErrorClass::Rejected, "{:?}", err);
            } else {
                prop_assert!(r.output_tokens.unwrap_or(0) >= 1);
            }
        }
    }
}

#[test]
fn static_batching_with_mixed_lengths_and_a_long_queue_ends() {
    // the command the issue quotes: 600 requests at once, outputs of 50 to 800 tokens
    let c = Catalog::builtin();
    let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
    cfg.batching = Batching::Static;
    let mut e = build(&cfg).unwrap();
    let spec = WorkloadSpec {
        input_tokens: LengthDist::Fixed(256),
        output_tokens: LengthDist::Uniform { lo: 50, hi: 800 },
        ..Default::default()
    };
    let sc = SimConfig::new(Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None }).with_requests(600);
    let out = simulate(e.as_mut(), &sc, Workload::counts_only(spec).unwrap());
    assert_eq!(out.records.len(), 600);
    assert!(out.records.iter().all(|r| r.is_success()));
}
