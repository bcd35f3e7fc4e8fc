//! Each serving mechanism produces its known effect in virtual time, because of how it works:
//! small workloads, the direction and rough size of each effect, and the accounting by hand
//! where it can be done by hand. The scenario tables in docs/engine.md come from
//! `scripts/bench-mechanisms.sh` at full size.

use goodput_engine::{
    Batching, Catalog, Disaggregation, EngineConfig, KvAlloc, Link, Router, Scheduling, ServingEngine, SpecMethod,
    Speculative, build,
};
use goodput_metrics::{RequestRecord, SummaryOptions, summarize};
use goodput_sim::{SimConfig, SimOutcome, simulate};
use goodput_workload::{Arrivals, LengthDist, Load, ThinkTime, Turns, Workload, WorkloadSpec};

fn config(model: &str, gpu: &str, tweak: impl FnOnce(&mut EngineConfig)) -> EngineConfig {
    let c = Catalog::builtin();
    let mut cfg = EngineConfig::new(c.model(model).unwrap().clone(), c.gpu(gpu).unwrap().clone());
    tweak(&mut cfg);
    cfg
}

fn spec(input: LengthDist, output: LengthDist) -> WorkloadSpec {
    WorkloadSpec { input_tokens: input, output_tokens: output, ..Default::default() }
}

fn sim(cfg: &EngineConfig, load: Load, requests: u64, spec: WorkloadSpec) -> SimOutcome {
    let mut engine: Box<dyn ServingEngine> = build(cfg).unwrap();
    let c = SimConfig {
        bounds: goodput_workload::Bounds {
            requests: Some(requests),
            duration_s: None,
            max_errors: None,
            over_saturation_ms: None,
            pause_scale: None,
        },
        seed: 7,
        shard: None,
        ignore_eos: true,
        load,
    };
    let out = simulate(engine.as_mut(), &c, Workload::counts_only(spec).unwrap());
    assert!(out.records.iter().all(RequestRecord::is_success), "every request completes");
    out
}

fn at_once() -> Load {
    Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None }
}

/// Requests completed per second of virtual time.
fn request_rate(out: &SimOutcome) -> f64 {
    out.records.len() as f64 / out.end_s
}

/// The longest gap between two tokens of any request, ms.
fn max_itl(out: &SimOutcome) -> f64 {
    out.records.iter().flat_map(|r| r.event_ms.windows(2).map(|w| w[1] - w[0])).fold(0.0, f64::max)
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n as f64
}

#[test]
fn continuous_batching_gains_most_where_output_lengths_differ() {
    let gain = |output: LengthDist| {
        let w = spec(LengthDist::Fixed(200), output);
        let run = |b: Batching| {
            let cfg = config("llama-2-13b", "a100", |c| {
                c.batching = b;
                c.max_num_seqs = 64;
            });
            request_rate(&sim(&cfg, at_once(), 400, w.clone()))
        };
        run(Batching::Continuous) / run(Batching::Static)
    };
    let uniform = gain(LengthDist::Fixed(425));
    let mixed = gain(LengthDist::Uniform { lo: 50, hi: 800 });
    println!("continuous / static: uniform {uniform:.2}x, mixed {mixed:.2}x");
    // a static batch of equal lengths has no idle slots: nothing to gain but the overlap of
    // prefills with decodes; with mixed lengths, slots idle until the longest finishes
    assert!(uniform < 1.2, "{uniform}");
    assert!(mixed > 1.4, "{mixed}");
    assert!(mixed > uniform + 0.3);
}

#[test]
fn static_batches_wait_for_their_longest_sequence() {
    // 12 requests at once into batches of at most 4, lengths 16 to 64: no request joins a batch
    // while another decodes, so a request that starts after another starts after it ends
    let cfg = config("llama-3.1-8b", "h100", |c| {
        c.batching = Batching::Static;
        c.max_num_seqs = 4;
    });
    let out = sim(&cfg, at_once(), 12, spec(LengthDist::Fixed(64), LengthDist::Uniform { lo: 16, hi: 64 }));
    let span = |r: &RequestRecord| (r.event_ms[0], r.end_ms.unwrap());
    let mut batches = 0usize;
    for a in &out.records {
        let (first_a, end_a) = span(a);
        let together = out.records.iter().filter(|b| (span(b).0 - first_a).abs() < 1e-9).count();
        assert!(together <= 4);
        for b in &out.records {
            let (first_b, _) = span(b);
            if first_b > first_a + 1e-9 {
                assert!(first_b > end_a, "a request started while a batch it was not in was decoding");
            }
        }
        batches += usize::from(out.records.iter().all(|b| span(b).0 >= first_a - 1e-9));
    }
    assert!(batches >= 1, "a first batch");
    // continuous batching, for contrast, starts requests while others decode
    let cont = config("llama-3.1-8b", "h100", |c| c.max_num_seqs = 4);
    let out = sim(&cont, at_once(), 12, spec(LengthDist::Fixed(64), LengthDist::Uniform { lo: 16, hi: 64 }));
    let overlaps =
        out.records.iter().any(|a| out.records.iter().any(|b| span(b).0 > span(a).0 + 1e-9 && span(b).0 < span(a).1));
    assert!(overlaps);
}

#[test]
fn pre_allocation_holds_a_fraction_of_what_it_reserves() {
    // ShareGPT-like lengths: prompts and replies of a few hundred tokens, a 4096-token context
    let w = spec(LengthDist::Uniform { lo: 50, hi: 600 }, LengthDist::Uniform { lo: 50, hi: 600 });
    let run = |alloc: KvAlloc| {
        let cfg = config("llama-2-13b", "a100", |c| {
            c.kv_alloc = alloc;
            c.max_model_len = Some(4096);
            c.max_num_seqs = 256;
        });
        let out = sim(&cfg, at_once(), 600, w.clone());
        (out.stats.clone(), request_rate(&out))
    };
    let (paged, paged_rate) = run(KvAlloc::Paged);
    let (pre, pre_rate) = run(KvAlloc::Prealloc);
    println!(
        "used share: paged {:.1}%, pre-allocated {:.1}%; running {:.1} vs {:.1}; rate {paged_rate:.2} vs {pre_rate:.2}",
        paged.mean_kv_used_share * 100.0,
        pre.mean_kv_used_share * 100.0,
        paged.mean_running,
        pre.mean_running
    );
    // the published figures: about 96% used with paging, 20–40% with pre-allocation
    assert!(paged.mean_kv_used_share > 0.9, "{}", paged.mean_kv_used_share);
    assert!((0.05..0.45).contains(&pre.mean_kv_used_share), "{}", pre.mean_kv_used_share);
    // what follows: fewer sequences fit, the batch is smaller, throughput lower
    assert!(pre.mean_running < 0.6 * paged.mean_running);
    assert!(pre_rate < paged_rate);
}

#[test]
fn chunked_prefill_removes_the_decode_stall_of_long_prompts() {
    // decodes running when 8k-token prompts keep arriving
    let w = spec(LengthDist::Fixed(8192), LengthDist::Fixed(128));
    let run = |s: Scheduling, chunked: bool| {
        let cfg = config("llama-3.1-8b", "h100", |c| {
            c.scheduling = s;
            c.chunked_prefill = chunked;
            c.max_batched_tokens = if chunked { 512 } else { 8192 };
        });
        sim(&cfg, Load::closed(8), 48, w.clone())
    };
    let first = max_itl(&run(Scheduling::PrefillFirst, false));
    let chunked = max_itl(&run(Scheduling::Chunked, true));
    println!("max ITL: prefill-first {first:.1} ms, chunked {chunked:.1} ms");
    // a whole 8k prefill stalls every running decode; a 512-token chunk much less
    assert!(chunked < 0.4 * first, "{chunked} vs {first}");
}

#[test]
fn prefix_caching_skips_the_shared_prefix() {
    let w =
        WorkloadSpec { prefix_groups: 4, prefix_tokens: 1024, ..spec(LengthDist::Fixed(256), LengthDist::Fixed(32)) };
    let run = |on: bool| {
        let cfg = config("llama-3.1-8b", "h100", |c| c.prefix_caching = on);
        sim(&cfg, Load::closed(4), 200, w.clone())
    };
    let (off, on) = (run(false), run(true));
    let ttft = |o: &SimOutcome| summarize(&o.records, &SummaryOptions::new()).ttft_ms.mean.unwrap();
    let c = on.stats.prefix_cache.expect("counters");
    println!(
        "prefill tokens {} → {}, TTFT {:.2} → {:.2} ms, hit {}/{} blocks",
        off.stats.prefill_tokens,
        on.stats.prefill_tokens,
        ttft(&off),
        ttft(&on),
        c.hit_blocks,
        c.queried_blocks
    );
    // every request's 1024-token prefix after its group's first is cached (whole blocks)
    let saved = off.stats.prefill_tokens - on.stats.prefill_tokens;
    assert!(saved >= (200 - 4 - 4) * 1024, "{saved}");
    assert!(ttft(&on) < 0.6 * ttft(&off));
    assert!(c.hit_blocks * 100 > 60 * c.queried_blocks);
}

fn speculative(k: u32, acceptance: f64) -> Speculative {
    let c = Catalog::builtin();
    Speculative {
        method: SpecMethod::Draft { model: Box::new(c.model("llama-3.2-1b").unwrap().clone()) },
        k,
        acceptance,
    }
}

#[test]
fn speculation_speeds_one_user_and_slows_a_full_batch() {
    let w = spec(LengthDist::Fixed(256), LengthDist::Fixed(256));
    let run = |spec: bool, load: Load, n: u64| {
        let cfg = config("llama-3.1-70b", "h100", |c| {
            c.tp = 4;
            c.speculative = spec.then(|| speculative(4, 0.7));
        });
        sim(&cfg, load, n, w.clone())
    };
    let tpot = |o: &SimOutcome| summarize(&o.records, &SummaryOptions::new()).tpot_ms.mean.unwrap();
    let (plain1, spec1) = (run(false, Load::closed(1), 4), run(true, Load::closed(1), 4));
    let (plain_full, spec_full) = (run(false, at_once(), 512), run(true, at_once(), 512));
    let tput = |o: &SimOutcome| summarize(&o.records, &SummaryOptions::new()).output_throughput;
    println!(
        "one user: TPOT {:.2} → {:.2} ms; 512 at once: {:.0} → {:.0} tok/s",
        tpot(&plain1),
        tpot(&spec1),
        tput(&plain_full),
        tput(&spec_full)
    );
    // alone, decode is memory-bound: verifying 5 tokens costs about one step and yields ~2.8
    assert!(tpot(&spec1) < 0.75 * tpot(&plain1));
    // a full batch is compute-bound: verifying rejected drafts is work thrown away
    assert!(tput(&spec_full) < tput(&plain_full));
    // accounting: acceptance is accepted / drafted
    let s = &spec1.stats;
    assert_eq!(s.spec_draft_tokens, 4 * s.spec_drafts);
    let rate = s.spec_accepted_tokens as f64 / s.spec_draft_tokens as f64;
    assert!((0.35..0.75).contains(&rate), "{rate}");
}

#[test]
fn a_disaggregated_ttft_includes_the_kv_transfer() {
    let c = Catalog::builtin();
    let gpu = c.gpu("h100").unwrap().clone();
    let link = Link::parse("100gbps", gpu.link_gbs).unwrap();
    assert_eq!(link.bytes_per_s, 12.5e9);
    let colocated = config("llama-3.1-8b", "h100", |_| {});
    let disagg = config("llama-3.1-8b", "h100", |c| {
        c.disaggregation = Some(Disaggregation::parse("prefill=1,decode=1", link.clone(), false).unwrap());
    });
    let w = spec(LengthDist::Fixed(2048), LengthDist::Fixed(16));
    let a = sim(&colocated, Load::closed(1), 1, w.clone());
    let b = sim(&disagg, Load::closed(1), 1, w);
    // 2048 tokens of KV at the model's bytes per token, over 12.5 GB/s, plus 10 µs
    let bytes = 2048.0 * colocated.model.kv_bytes_per_token(colocated.kv_dtype);
    let transfer_ms = link.time(bytes) * 1e3;
    let (ta, tb) = (a.records[0].event_ms[0], b.records[0].event_ms[0]);
    println!("TTFT colocated {ta:.3} ms, disaggregated {tb:.3} ms, transfer {transfer_ms:.3} ms");
    assert!((tb - ta - transfer_ms).abs() < 1e-6, "{tb} - {ta} vs {transfer_ms}");
    let t = b.stats.transfers.expect("transfer statistics");
    assert_eq!((t.transfers, t.tokens), (1, 2048));
    assert!((t.mean_s * 1e3 - transfer_ms).abs() < 1e-6);
    assert_eq!(b.stats.parts.len(), 2);
}

#[test]
fn append_prefill_keeps_later_turns_on_their_decode_instance() {
    let w = WorkloadSpec {
        turns: Turns::Up(4),
        think_time: ThinkTime::Fixed(0.5),
        ..spec(LengthDist::Fixed(1024), LengthDist::Fixed(64))
    };
    let run = |ppd: bool| {
        let cfg = config("llama-3.1-8b", "h100", |c| {
            let link = Link::parse("25gbps", 0.0).unwrap();
            c.prefix_caching = true;
            c.disaggregation = Some(Disaggregation::parse("prefill=1,decode=2", link, ppd).unwrap());
        });
        sim(&cfg, Load::closed(8), 160, w.clone())
    };
    let later_ttft = |o: &SimOutcome| {
        mean(o.records.iter().filter(|r| r.turn.unwrap_or(0) > 0).map(|r| r.event_ms[0] - r.sent_ms.unwrap()))
    };
    let (plain, ppd) = (run(false), run(true));
    let (tp, tq) = (plain.stats.transfers.unwrap(), ppd.stats.transfers.unwrap());
    println!(
        "later turns' TTFT {:.2} → {:.2} ms; transfers {} → {}, append-prefills {}",
        later_ttft(&plain),
        later_ttft(&ppd),
        tp.transfers,
        tq.transfers,
        tq.append_prefills
    );
    // 40 sessions of 4 turns: every later turn (120) prefills where its history is
    assert_eq!(tp.append_prefills, 0);
    assert_eq!(tq.append_prefills, 120);
    assert_eq!(tq.transfers, 40);
    assert!(later_ttft(&ppd) < later_ttft(&plain));
}

#[test]
fn prefix_aware_routing_finds_the_cached_prefix() {
    // 7 groups over 4 replicas: in turn, every replica meets every group
    let w =
        WorkloadSpec { prefix_groups: 7, prefix_tokens: 2048, ..spec(LengthDist::Fixed(128), LengthDist::Fixed(16)) };
    let hits = |router: Router| {
        let cfg = config("llama-3.1-8b", "h100", |c| {
            c.prefix_caching = true;
            c.replicas = 4;
            c.router = router;
        });
        let out = sim(&cfg, Load::closed(8), 400, w.clone());
        let (mut hit, mut queried) = (0, 0);
        for p in &out.stats.parts {
            let c = p.prefix_cache.expect("counters");
            hit += c.hit_blocks;
            queried += c.queried_blocks;
        }
        hit as f64 / queried as f64
    };
    let (rr, aware) = (hits(Router::RoundRobin), hits(Router::PrefixAware));
    println!("prefix hit rate: round-robin {:.1}%, prefix-aware {:.1}%", rr * 100.0, aware * 100.0);
    // round-robin computes each group's prefix once per replica (28 misses); prefix-aware once
    assert!(aware > rr + 0.03, "{aware} vs {rr}");
    assert!(aware > 0.9, "{aware}");
}

#[test]
fn flags_that_describe_deployments_parse_or_say_why() {
    assert!(Disaggregation::parse("prefill=2,decode=3", Link::parse("nvlink", 450.0).unwrap(), false).is_ok());
    for bad in ["prefill=0,decode=1", "prefill=1", "decode=2,prefill=x", "prefill=1,decode=1,extra=2"] {
        let e = Disaggregation::parse(bad, Link::parse("100gbps", 0.0).unwrap(), false).unwrap_err();
        assert!(e.contains('`'), "{bad}: {e}");
    }
    let nv = Link::parse("nvlink", 450.0).unwrap();
    assert_eq!((nv.bytes_per_s, nv.latency_s), (450e9, 2e-6));
    assert!(Link::parse("fast", 450.0).is_err());
    assert!(Link::parse("-5gbps", 450.0).is_err());
}
