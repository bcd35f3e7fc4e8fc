//! Golden tests of the compare/check decisions on the hand-made result files in
//! `fixtures/compare/` (see `make.py` there for every number): base has TTFT 25 ms, TPOT 5 ms,
//! E2E 100 ms, 10 req/s, 160 tok/s, attainment 1.0; slower has TTFT 35 ms, E2E 110 ms,
//! 9.0909 req/s, 145.4545 tok/s, attainment 0.0.

use std::path::{Path, PathBuf};

use goodput_decide::compare::{
    Subject, bootstrap_quantile_diff, bootstrap_quantiles_diff, check, compare, compare_all, parse_bounds,
    parse_bounds_file,
};
use goodput_results::comparison::{Bound, Latency, Limit, Method, Metric, Significance, Stat};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/compare").join(name)
}

fn subject(name: &str) -> Subject {
    Subject::read(&fixture(name)).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

const P99_TTFT: Metric = Metric::Latency(Stat::P99, Latency::Ttft);

#[test]
fn fixtures_follow_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../schema/results.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    for f in ["base.json", "slower.json", "rerun.json", "other_workload.json"] {
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture(f)).unwrap()).unwrap();
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{f}: {errors:?}");
    }
}

#[test]
fn slower_run_deltas_by_hand() {
    let c = compare(&subject("base.json"), &subject("slower.json"));
    assert!(c.differences.is_empty(), "{:?}", c.differences);
    let d = c.get(P99_TTFT).unwrap();
    assert_eq!((d.base, d.other, d.delta), (Some(25.0), Some(35.0), Some(10.0)));
    assert!(close(d.relative.unwrap(), 0.4));
    // every TTFT is 25 ms on one side and 35 on the other: every resample's difference is 10
    assert_eq!(d.ci, Some([10.0, 10.0]));
    assert_eq!((d.method, d.significance, d.regression), (Method::Bootstrap, Significance::Significant, true));

    let d = c.get(Metric::Latency(Stat::Mean, Latency::E2e)).unwrap();
    assert_eq!((d.delta, d.ci), (Some(10.0), Some([10.0, 10.0])));
    assert!(close(d.relative.unwrap(), 0.1));
    assert_eq!(d.method, Method::Normal);

    let d = c.get(Metric::Latency(Stat::P50, Latency::Tpot)).unwrap();
    assert_eq!((d.delta, d.significance, d.regression), (Some(0.0), Significance::NotSignificant, false));

    // ITL: order-statistic intervals [5, 5] on both sides: the difference's interval is [0, 0]
    let d = c.get(Metric::Latency(Stat::P99, Latency::Itl)).unwrap();
    assert_eq!((d.ci, d.method), (Some([0.0, 0.0]), Method::OrderStatistics));

    // 160 → 80 / 0.55 tok/s: −1/11; a single run on each side gives no run-to-run noise
    let d = c.get(Metric::OutputThroughput).unwrap();
    assert!(close(d.relative.unwrap(), -1.0 / 11.0));
    assert_eq!((d.significance, d.regression), (Significance::NotAvailable, false));

    // attainment 1 → 0: both proportions certain, the interval is [−1, −1]
    let d = c.get(Metric::Attainment).unwrap();
    assert_eq!(
        (d.delta, d.ci, d.significance, d.regression),
        (Some(-1.0), Some([-1.0, -1.0]), Significance::Significant, true)
    );
}

#[test]
fn rerun_is_not_flagged() {
    let c = compare(&subject("base.json"), &subject("rerun.json"));
    assert!(c.differences.is_empty());
    assert!(c.metrics.iter().all(|d| !d.regression && d.significance != Significance::Significant), "{c:?}");
}

#[test]
fn different_workloads_are_named() {
    let c = compare(&subject("base.json"), &subject("other_workload.json"));
    let fields: Vec<&str> = c.differences.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["input lengths (planned)", "input tokens sent (mean)"]);
    assert_eq!((c.differences[0].a.as_str(), c.differences[0].b.as_str()), ("128", "256"));
    // the first file is the baseline of each later one
    let all = compare_all(&[subject("base.json"), subject("slower.json"), subject("other_workload.json")]);
    assert_eq!(all.len(), 2);
    assert!(all[0].differences.is_empty() && !all[1].differences.is_empty());
}

#[test]
fn run_to_run_noise_by_hand() {
    // two runs a side: 160 and 170 tok/s against 144 and 146: means 165 and 145, difference −20;
    // pooled s² = (50 + 2) / 2 = 26, t(2) = 4.303: ±4.303 × √26 × √(1/2 + 1/2) = ±21.94
    let base = subject("base.json");
    let mut a = base.clone();
    let mut b = base.clone();
    a.per_run = [160.0, 170.0].map(|x| with_output(&base, x)).to_vec();
    b.per_run = [144.0, 146.0].map(|x| with_output(&base, x)).to_vec();
    b.summary = with_output(&base, 145.0);
    a.summary = with_output(&base, 165.0);
    let d = compare(&a, &b).get(Metric::OutputThroughput).unwrap().clone();
    let [lo, hi] = d.ci.unwrap();
    let half = 4.303 * 26f64.sqrt();
    assert!(close(lo, -20.0 - half) && close(hi, -20.0 + half), "{lo} {hi}");
    assert_eq!(d.significance, Significance::NotSignificant);
    // the same with a tight spread: 164 and 166 against 144 and 146: s² = 2, ±4.303 × √2
    a.per_run = [164.0, 166.0].map(|x| with_output(&base, x)).to_vec();
    let d = compare(&a, &b).get(Metric::OutputThroughput).unwrap().clone();
    assert_eq!((d.significance, d.regression), (Significance::Significant, true));
}

fn with_output(s: &Subject, x: f64) -> goodput_metrics::Summary {
    let mut m = s.summary.clone();
    m.output_throughput = x;
    m
}

#[test]
fn bootstrap_is_seeded_and_exact_on_constants() {
    assert_eq!(bootstrap_quantile_diff(&[10.0; 7], &[15.0; 9], 0.99, 2000, 1), [5.0, 5.0]);
    let a: Vec<f64> = (0..200).map(|i| i as f64).collect();
    let b: Vec<f64> = (0..200).map(|i| i as f64 + 0.5).collect();
    let x = bootstrap_quantile_diff(&a, &b, 0.5, 2000, 7);
    assert_eq!(x, bootstrap_quantile_diff(&a, &b, 0.5, 2000, 7), "deterministic");
    assert!(x[0] < 0.0 && x[1] > 0.0, "a half-unit shift of a 200-wide spread is noise: {x:?}");
    let c: Vec<f64> = (0..200).map(|i| i as f64 + 100.0).collect();
    let y = bootstrap_quantile_diff(&a, &c, 0.5, 2000, 7);
    assert!(y[0] > 50.0 && y[1] < 150.0, "{y:?}");
}

#[test]
fn bounds_grammar() {
    let b = parse_bounds(
        "p99(ttft)=10%, output_throughput=-5%,attainment=-1pt,p50(tpot)=+2ms,mean(e2e)=1.5s",
        "--max-regress",
    )
    .unwrap();
    assert_eq!(
        b,
        [
            Bound { metric: P99_TTFT, limit: Limit::Percent(10.0) },
            Bound { metric: Metric::OutputThroughput, limit: Limit::Percent(5.0) },
            Bound { metric: Metric::Attainment, limit: Limit::Points(1.0) },
            Bound { metric: Metric::Latency(Stat::P50, Latency::Tpot), limit: Limit::Absolute(2.0) },
            Bound { metric: Metric::Latency(Stat::Mean, Latency::E2e), limit: Limit::Absolute(1500.0) },
        ]
    );
    for (bad, says) in [
        ("p99(ttft)=-10%", "takes +"),
        ("output_throughput=+5%", "takes -"),
        ("p99(ttft)=1pt", "pt is for attainment"),
        ("p97(ttft)=1%", "unknown metric"),
        ("p99(ttft)", "METRIC=AMOUNT"),
        ("p99(ttft)=abc", "not an amount"),
        ("attainment=-1ms", "pt"),
    ] {
        let e = parse_bounds(bad, "--max-regress").unwrap_err();
        assert!(e.to_string().starts_with("--max-regress: ") && e.to_string().contains(says), "{bad}: {e}");
    }
    let e = parse_bounds_file("# gate\np99(ttft)=10%\n\noutput_throughput=-5% # tokens\nbogus=1\n", "gate.txt")
        .unwrap_err();
    assert!(e.to_string().starts_with("gate.txt:5: unknown metric `bogus`"), "{e}");
    assert_eq!(parse_bounds_file("# gate\np99(ttft)=10%, attainment=1pt\n", "g").unwrap().len(), 2);
}

#[test]
fn check_decisions_by_hand() {
    let c = compare(&subject("base.json"), &subject("slower.json"));
    let bounds = parse_bounds(
        "p99(ttft)=10%,p99(ttft)=+10ms,p99(ttft)=+9ms,output_throughput=-5%,output_throughput=-10%,attainment=-1pt,p50(tpot)=1%",
        "x",
    )
    .unwrap();
    let r = check(&c, &bounds, false).unwrap();
    let violated: Vec<bool> = r.iter().map(|c| c.violated).collect();
    // +40% > 10%; +10 ms ≤ 10 ms; +10 ms > 9 ms; 9.09% > 5%; 9.09% ≤ 10%; 100 pt > 1 pt; 0% ≤ 1%
    assert_eq!(violated, [true, false, true, true, false, true, false]);
    assert!(
        close(r[0].regressed_by, 40.0) && close(r[3].regressed_by, 100.0 / 11.0) && close(r[5].regressed_by, 100.0)
    );
    assert_eq!(
        r[0].line(),
        "p99(ttft): 25.00 ms -> 35.00 ms (worse by 40.00%; bound p99(ttft)=+10%; significant: yes)"
    );
    // significance-aware: a significant regression still fails; a throughput of single runs
    // (significance n/a) is judged on its value
    let r = check(&c, &bounds, true).unwrap();
    assert_eq!(r.iter().map(|c| c.violated).collect::<Vec<_>>(), [true, false, true, true, false, true, false]);

    // the rerun violates nothing; an improvement is never a regression
    let same = compare(&subject("base.json"), &subject("rerun.json"));
    assert!(check(&same, &bounds, false).unwrap().iter().all(|c| !c.violated));
    let better = compare(&subject("slower.json"), &subject("base.json"));
    assert!(check(&better, &bounds, false).unwrap().iter().all(|c| !c.violated));
}

#[test]
fn require_significant_spares_noise() {
    // a regression past the bound that is not significant: p50 of a 200-wide spread up by 0.5
    let base = subject("base.json");
    let mut a = base.clone();
    let mut b = base.clone();
    a.samples.insert(Latency::Ttft, (0..200).map(|i| i as f64).collect());
    b.samples.insert(Latency::Ttft, (0..200).map(|i| i as f64 + 0.5).collect());
    a.summary.ttft_ms.p50 = Some(99.5);
    b.summary.ttft_ms.p50 = Some(100.0);
    let c = compare(&a, &b);
    let bound = parse_bounds("p50(ttft)=+0.1ms", "x").unwrap();
    assert!(check(&c, &bound, false).unwrap()[0].violated);
    assert!(!check(&c, &bound, true).unwrap()[0].violated);
}

#[test]
fn a_bound_on_a_missing_metric_is_an_error() {
    let mut a = subject("base.json");
    a.summary.slo = None;
    let c = compare(&a, &subject("slower.json"));
    let e = check(&c, &parse_bounds("attainment=-1pt", "x").unwrap(), false).unwrap_err();
    assert!(e.to_string().contains("attainment is not available (the run has no SLO)"), "{e}");
}

#[test]
fn several_quantiles_share_their_resamples() {
    let a: Vec<f64> = (0..500).map(|i| ((i * 37) % 101) as f64).collect();
    let b: Vec<f64> = (0..400).map(|i| ((i * 53) % 97) as f64 + 3.0).collect();
    let all = bootstrap_quantiles_diff(&a, &b, &[0.5, 0.9, 0.99], 500, 11);
    for (k, p) in [0.5, 0.9, 0.99].into_iter().enumerate() {
        assert_eq!(all[k], bootstrap_quantile_diff(&a, &b, p, 500, 11), "p{p}");
    }
}

/// Not a timed test: `cargo test -p goodput-results --test compare -- --ignored --nocapture`.
#[test]
#[ignore]
fn bootstrap_of_100k_requests() {
    let a: Vec<f64> = (0..100_000).map(|i| ((i * 7919) % 100_003) as f64).collect();
    let t = std::time::Instant::now();
    let x = bootstrap_quantiles_diff(&a, &a, &[0.5, 0.9, 0.99], 2000, 1);
    println!("3 quantiles of 100k vs 100k, 2,000 resamples: {:?} {x:?}", t.elapsed());
}

#[test]
fn a_client_that_fell_behind_is_a_caution() {
    let mut doc = goodput_results::ResultDoc::read(&fixture("slower.json")).unwrap();
    doc.runs[0].summary.verdict = goodput_metrics::ClientVerdict::ClientBound;
    let b = Subject::of("slower.json", &doc).unwrap();
    let c = compare(&subject("base.json"), &b);
    assert_eq!(c.cautions, ["slower.json: the client could not keep up with its schedule (client_bound)"]);
    assert!(compare(&subject("base.json"), &subject("rerun.json")).cautions.is_empty());
}

#[test]
fn repeats_in_one_file_average_their_throughputs() {
    let mut doc = goodput_results::ResultDoc::read(&fixture("base.json")).unwrap();
    let mut again = doc.runs[0].clone();
    again.id = "base-again".into();
    again.summary.output_throughput = 170.0;
    doc.runs.push(again);
    let a = Subject::of("base2", &doc).unwrap();
    assert_eq!(a.per_run.len(), 2);
    assert!(close(a.summary.request_throughput, 10.0), "{}", a.summary.request_throughput);
    assert!(close(a.summary.output_throughput, 165.0));
    assert_eq!(a.samples[&Latency::Ttft].len(), 10);
    assert_eq!(a.summary.ttft_ms.p99, Some(25.0));
    // a file whose runs ran different workloads is refused
    doc.runs[1].plan.workload.spec.input_tokens = "256".parse().unwrap();
    let e = Subject::of("mixed", &doc).unwrap_err().to_string();
    assert!(
        e.starts_with("mixed holds runs of different workloads") && e.contains("input lengths (planned): 128 vs 256"),
        "{e}"
    );
}
