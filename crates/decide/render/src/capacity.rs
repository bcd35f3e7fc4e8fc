//! A capacity search for people: its curve as a table, and what it found in words (the report's
//! `answer` and `notes`, written here from the search's typed [`CapacityFinding`]).

use std::fmt::Write;

use goodput_metrics::{ClientVerdict, Slo};
use goodput_results::{CapacityFinding, CapacityPoint, CapacityReport};

use crate::console::cell;

/// The capacity search's curve.
pub fn render_capacity_curve(curve: &[CapacityPoint], target: f64) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\ncapacity curve (target attainment {:.1}%)\n  {:>10}{:>12}{:>12}{:>12}{:>11}{:>11}{:>11}{:>11}",
        target * 100.0,
        "req/s",
        "attainment",
        "good req/s",
        "good tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99"
    );
    for p in curve {
        let _ = writeln!(
            o,
            "  {:>10.3}{:>11.1}%{:>12.2}{:>12.1}{:>11}{:>11}{:>11}{:>11}{}{}{}",
            p.rate,
            p.attainment * 100.0,
            p.request_goodput,
            p.token_goodput,
            cell(p.ttft_p50_ms),
            cell(p.ttft_p99_ms),
            cell(p.tpot_p50_ms),
            cell(p.tpot_p99_ms),
            if p.attainment >= target && !p.saturated { "  ok" } else { "  below" },
            match (p.saturated, p.stopped_early, p.queue_growth_ms) {
                (false, ..) => String::new(),
                (true, true, _) => " (saturated: stopped early)".into(),
                (true, false, Some(g)) =>
                    format!(" (saturated: not in steady state over the step; TTFT from schedule grew {g:.0} ms)"),
                (true, false, None) => " (saturated)".into(),
            },
            if p.verdict == ClientVerdict::ClientBound { " (client-bound)" } else { "" }
        );
    }
    o
}

/// A capacity search's curve, answer and notes.
pub fn render_capacity(c: &CapacityReport) -> String {
    let mut o = render_capacity_curve(&c.curve, c.attainment_target);
    let _ = writeln!(o, "\n{}", c.answer);
    for n in &c.notes {
        let _ = writeln!(o, "{n}");
    }
    o
}

/// The sentence that answers a capacity search: `finding` for `slo` at `attainment` (a share) on
/// the target described as `target`.
pub fn answer(finding: &CapacityFinding, slo: &Slo, attainment: f64, target: &str) -> String {
    let described = describe_slo(slo);
    let pct = format!("{}%", attainment * 100.0);
    match finding {
        CapacityFinding::Unusable { failures } => {
            let classes: Vec<String> = failures.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!(
                "The search stopped: no request succeeded in the last step ({}), so the target could not be used.",
                classes.join(", ")
            )
        }
        CapacityFinding::Bracketed { pass, fail } => format!(
            "At most {pass:.2} req/s (±{:.2}) keeps {pct} of requests within {described} {target}.",
            (fail - pass) / 2.0
        ),
        CapacityFinding::AtLeast { pass, max_steps } => format!(
            "At least {pass:.2} req/s keeps {pct} of requests within {described} {target} (no failing rate found \
             within {max_steps} steps)."
        ),
        CapacityFinding::Below { fail } => {
            format!("Even {fail:.3} req/s does not keep {pct} of requests within {described} {target}.")
        }
        CapacityFinding::Nothing => "No step completed.".to_string(),
    }
}

/// The notes under the answer: the measured attainment at the capacity with its interval, and
/// the steps at which the load generator was client-bound.
pub fn notes(curve: &[CapacityPoint], capacity: Option<f64>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(p) = capacity.and_then(|l| curve.iter().find(|p| p.rate == l))
        && let Some([ci_lo, ci_hi]) = p.attainment_ci
    {
        notes.push(format!(
            "Measured attainment at {:.2} req/s: {:.1}% (95% CI {:.1}–{:.1}%).",
            p.rate,
            p.attainment * 100.0,
            ci_lo * 100.0,
            ci_hi * 100.0
        ));
    }
    let bound: Vec<String> =
        curve.iter().filter(|p| p.verdict == ClientVerdict::ClientBound).map(|p| format!("{:.2}", p.rate)).collect();
    if !bound.is_empty() {
        notes.push(format!(
            "Warning: the load generator was client-bound at {} req/s (its sends lagged the schedule at p99 by \
             more than the larger of 1 ms and 5% of TTFT p50, or fell below 97% of its rate; see those runs' \
             warnings): those steps measured the \
             client as well as the server.",
            bound.join(", ")
        ));
    }
    notes
}

/// `ttft<=200ms, p99(tpot)<=40ms` → "TTFT ≤ 200 ms and TPOT ≤ 40 ms" (the sentence says which
/// share of requests must meet them).
pub fn describe_slo(slo: &Slo) -> String {
    slo.predicates
        .iter()
        .map(|p| {
            let name = p.metric.name().to_uppercase().replace("_SCHED", " (sched)").replace("ITL_MAX", "max ITL");
            let limit =
                if p.limit_ms >= 1000.0 { format!("{} s", p.limit_ms / 1000.0) } else { format!("{} ms", p.limit_ms) };
            // attainment counts requests, so a percentile bound reads as a per-request one here
            format!("{name} ≤ {limit}")
        })
        .collect::<Vec<_>>()
        .join(" and ")
}
