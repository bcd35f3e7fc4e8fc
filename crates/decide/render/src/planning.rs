//! The console form of a plan (`goodput plan`): the ranked candidates with their capacity, cost
//! and reason, the cost-vs-latency Pareto front, and what the search took.

use std::fmt::Write as _;

use goodput_results::planning::{PlanCandidate, PlanReport};

/// `v` with `digits` decimals, `-` where there is none.
pub(crate) fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

/// A candidate's figures as the console and the HTML page print them, in column order: req/s,
/// req/s per GPU, output tok/s, output tok/s per GPU, p99 TTFT (ms), p99 TPOT (ms), $ per
/// GPU-hour, $ per million output tokens, $ per million tokens in and out, the cached prompt share.
pub(crate) fn figures(c: &PlanCandidate) -> [String; 10] {
    [
        opt(c.capacity, 2),
        opt(c.capacity_per_gpu, 2),
        opt(c.output_tokens_per_s, 0),
        opt(c.output_tokens_per_s_per_gpu, 0),
        opt(c.ttft_p99_ms, 0),
        opt(c.tpot_p99_ms, 1),
        opt(c.price_per_gpu_hour, 2),
        opt(c.cost_per_m_output, 3),
        opt(c.cost_per_m_total, 3),
        c.cached_prompt_share.map_or_else(|| "-".into(), |s| format!("{:.0}%", s * 100.0)),
    ]
}

/// `h100 ×2 fp8 vllm baseline`.
pub(crate) fn name(c: &PlanCandidate) -> String {
    let mech = if c.mechanisms == "baseline" { String::new() } else { format!(" +{}", c.mechanisms) };
    format!("{}×{} tp{} {} {}{mech}", c.gpus, c.gpu, c.tp, c.dtype.name(), c.engine)
}

/// The ranked table, the Pareto front and the notes.
pub fn render_plan(r: &PlanReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "goodput plan · {} · {}{} · SLO {} for {:.0}% of requests · {} candidates in {:.1} s\n",
        r.model,
        r.workload,
        r.preset.as_ref().map_or(String::new(), |p| format!(" (preset {p})")),
        r.slo,
        r.attainment_target * 100.0,
        r.candidates.len(),
        r.elapsed_s
    );
    if let Some(s) = r.shard {
        let _ = writeln!(
            o,
            "  shard {s} of a grid of {} candidates: `goodput merge` the shards for the whole ranking\n",
            r.grid_size.map_or_else(|| "?".into(), |g| g.to_string())
        );
    }
    if !r.missing_candidates.is_empty() {
        let _ = writeln!(
            o,
            "  partial: {} candidates of the grid are missing (their shards were not merged)\n",
            r.missing_candidates.len()
        );
    }
    let target = r.target_rate.is_some();
    let _ = writeln!(
        o,
        "  {:>3}  {:<34} {:>9} {:>9} {:>10} {:>9} {:>8} {:>8} {:>7} {:>8} {:>8} {:>9} {:>6}{}",
        "#",
        "deployment",
        "req/s",
        "req/s/GPU",
        "out tok/s",
        "/GPU",
        "p99 TTFT",
        "p99 TPOT",
        "$/GPU·h",
        "$/M out",
        "$/M all",
        "cached",
        "GPUs",
        if target { format!(" {:>11}", "GPUs·$/h") } else { String::new() }
    );
    let _ = writeln!(
        o,
        "  {:>3}  {:<34} {:>9} {:>9} {:>10} {:>9} {:>8} {:>8} {:>7} {:>8} {:>8} {:>9} {:>6}{}",
        "",
        "",
        "served",
        "",
        "per dep.",
        "tok/s",
        "ms",
        "ms",
        "$",
        "$",
        "in+out $",
        "prompt %",
        "",
        if target { format!(" {:>11}", "for target") } else { String::new() }
    );
    let pareto = |i: usize| r.pareto.contains(&i);
    for (i, c) in r.candidates.iter().enumerate() {
        let rank = if c.capacity.is_some() { format!("{}", i + 1) } else { "-".into() };
        let for_target = match (c.gpus_for_target, c.cost_per_hour_for_target) {
            (Some(g), Some(d)) => format!(" {:>11}", format!("{g}·{d:.0}")),
            _ if target => format!(" {:>11}", "-"),
            _ => String::new(),
        };
        let [rps, rps_gpu, tok, tok_gpu, ttft, tpot, price, out, all, cached] = figures(c);
        let _ = writeln!(
            o,
            "{} {:>3}  {:<34} {rps:>9} {rps_gpu:>9} {tok:>10} {tok_gpu:>9} {ttft:>8} {tpot:>8} {price:>7} {out:>8} {all:>8} \
             {cached:>9} {:>6}{for_target}",
            if pareto(i) { "*" } else { " " },
            rank,
            name(c),
            c.gpus,
        );
        let _ = writeln!(o, "        {}", c.reason);
        if let Some(h) = c.break_even_hours {
            let _ = writeln!(o, "        buying breaks even with renting after {h:.0} hours of use");
        }
    }
    let _ =
        writeln!(o, "\n  * on the Pareto front of cost per million output tokens against p99 TTFT + TPOT at capacity");
    let _ = writeln!(
        o,
        "  req/s: requests served per second at capacity, per deployment and per GPU; out tok/s: output tokens per \
         second per deployment and per GPU; $/M all: per million tokens in and out, cached prompt tokens included \
         (cached: the share of prompt tokens the prefix cache served)"
    );
    let _ = writeln!(
        o,
        "  capacity: the highest Poisson rate (simulated) at which the SLO holds for the target share; \
         costs at that rate, per GPU-hour prices (--price; defaults in docs/plan.md)"
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_results::Dtype;

    fn candidate(capacity: Option<f64>) -> PlanCandidate {
        PlanCandidate {
            grid_index: None,
            gpu: "h100".into(),
            tp: 2,
            dtype: Dtype::Fp8,
            engine: "vllm".into(),
            mechanisms: "spec".into(),
            gpus: 2,
            fits: true,
            capacity,
            capacity_per_gpu: capacity.map(|c| c / 2.0),
            served_requests_per_s: capacity,
            output_tokens_per_s_per_gpu: Some(2500.0),
            cached_prompt_share: Some(0.25),
            output_tokens_per_s: Some(5000.0),
            total_tokens_per_s: Some(9000.0),
            ttft_p99_ms: Some(150.0),
            tpot_p99_ms: Some(30.0),
            binding: Some("ttft<=200ms".into()),
            bound: Some("memory".into()),
            price_per_gpu_hour: Some(3.99),
            cost_per_m_output: Some(0.443),
            cost_per_m_total: Some(0.246),
            replicas_for_target: None,
            gpus_for_target: None,
            cost_per_hour_for_target: None,
            break_even_hours: Some(7713.0),
            reason: "capacity 12.00 req/s".into(),
            curve: Vec::new(),
        }
    }

    #[test]
    fn the_top_candidates_curves_carry_the_slo_and_the_capacity() {
        let step = |rate: f64, ttft: f64| goodput_results::CapacityPoint {
            rate,
            attainment: 1.0,
            request_goodput: rate,
            token_goodput: rate * 100.0,
            ttft_p50_ms: Some(ttft / 2.0),
            ttft_p99_ms: Some(ttft),
            tpot_p50_ms: Some(10.0),
            tpot_p99_ms: Some(20.0),
            saturated: false,
            stopped_early: false,
            attainment_ci: None,
            queue_growth_ms: None,
            queue_trend: None,
            step_s: None,
            achieved_rate: None,
            verdict: goodput_metrics::ClientVerdict::Ok,
        };
        let mut c = candidate(Some(12.0));
        // the step at 12 req/s was run twice (longer): its last figures count
        c.curve = vec![step(4.0, 50.0), step(16.0, 400.0), step(12.0, 90.0), step(12.0, 120.0)];
        let p = PlanReport {
            slo: "ttft<=200ms, tpot<=50ms".into(),
            candidates: vec![c.clone(), candidate(None), c],
            ..PlanReport::default()
        };
        let charts = crate::charts::plan_curves(&p);
        assert_eq!(charts.len(), 2);
        let ttft = &charts[0];
        // candidates #1 and #3 (the one without a capacity has no curve), the capacities, the SLO
        let names: Vec<&str> = ttft.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["#1", "#3", "capacity", "SLO TTFT ≤ 200 ms"]);
        assert_eq!(ttft.series[0].points, [(4.0, 50.0), (12.0, 120.0), (16.0, 400.0)]);
        assert_eq!(ttft.series[2].labels, ["#1 capacity 12.0 req/s", "#3 capacity 12.0 req/s"]);
        assert_eq!(ttft.series[3].points, [(4.0, 200.0), (16.0, 200.0)]);
        assert_eq!(charts[1].series[3].name, "SLO TPOT ≤ 50 ms");
    }

    #[test]
    fn ranked_rows_with_reasons_and_the_front() {
        let r = PlanReport {
            model: "llama-3.1-70b".into(),
            preset: Some("chat".into()),
            workload: "input 512 tokens, output 128".into(),
            slo: "TTFT ≤ 200 ms".into(),
            attainment_target: 0.99,
            target_rate: None,
            budget_per_hour: None,
            seed: 0,
            grid_size: None,
            shard: None,
            missing_candidates: Vec::new(),
            candidates: vec![candidate(Some(12.0)), candidate(None)],
            pareto: vec![0],
            elapsed_s: 1.5,
        };
        let text = render_plan(&r);
        assert!(text.contains("2×h100 tp2 fp8 vllm +spec"), "{text}");
        assert!(text.contains("*   1"), "{text}");
        assert!(text.contains("  -  2×h100"), "{text}");
        assert!(text.contains("capacity 12.00 req/s") && text.contains("7713 hours"), "{text}");
        // units under every header; per-GPU output, cost per million tokens in and out, the cached share
        for h in ["req/s/GPU", "out tok/s", "p99 TTFT", "ms", "$/M out", "$/M all", "cached", "prompt %"] {
            assert!(text.contains(h), "{h}: {text}");
        }
        let row = text.lines().find(|l| l.contains("*   1")).unwrap();
        assert!(row.contains(" 2500 ") && row.contains(" 0.246 ") && row.contains(" 25% "), "{row}");
    }
}
