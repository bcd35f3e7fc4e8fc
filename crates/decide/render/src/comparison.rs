//! `goodput compare` and `goodput check` on the console: the comparison table and the bound
//! lines. Reads only the comparison data of `goodput_results::comparison`.

use std::fmt::Write;

use goodput_results::comparison::{BoundCheck, Comparison, Difference, Metric, MetricDelta, Significance};

pub(crate) fn num(v: Option<f64>, m: Metric) -> String {
    match (v, m) {
        (None, _) => "-".into(),
        (Some(x), Metric::Attainment) => format!("{:.2}%", x * 100.0),
        (Some(x), _) if x.abs() >= 10_000.0 => format!("{x:.0}"),
        (Some(x), _) => format!("{x:.2}"),
    }
}

pub(crate) fn signed(v: Option<f64>, m: Metric) -> String {
    match (v, m) {
        (None, _) => "-".into(),
        (Some(x), Metric::Attainment) => format!("{:+.2}pt", x * 100.0),
        (Some(x), _) if x.abs() >= 10_000.0 => format!("{x:+.0}"),
        (Some(x), _) => format!("{x:+.2}"),
    }
}

fn row(out: &mut String, d: &MetricDelta) {
    let m = d.metric;
    let name = if d.unit.is_empty() { m.name() } else { format!("{} {}", m.name(), d.unit) };
    let rel = d.relative.map_or("-".into(), |r| format!("{:+.1}%", r * 100.0));
    let ci = d.ci.map_or("-".into(), |[lo, hi]| format!("[{}, {}]", signed(Some(lo), m), signed(Some(hi), m)));
    let sig = match (d.significance, d.regression) {
        (Significance::Significant, true) => "yes, worse",
        (Significance::Significant, false) => "yes, better",
        (s, _) => s.label(),
    };
    let _ = writeln!(
        out,
        "  {name:<26}{:>11}{:>11}{:>11}{:>9}  {ci:<24}{sig}",
        num(d.base, m),
        num(d.other, m),
        signed(d.delta, m),
        rel
    );
}

/// The fields that make two workloads different, one per line.
pub fn render_differences(base: &str, other: &str, diffs: &[Difference]) -> String {
    let mut out = format!("{other} and {base} ran different workloads:\n");
    for d in diffs {
        let _ = writeln!(out, "  {}: {} vs {}", d.field, d.b, d.a);
    }
    out
}

/// One comparison as a table: every metric either side has, with its delta, relative delta,
/// the 95% interval of the delta and whether it is significant.
pub fn render_comparison(c: &Comparison) -> String {
    let mut out = format!("{} against {} (baseline)\n", c.other, c.base);
    if !c.differences.is_empty() {
        out.push_str("  compared although the workloads differ (--force):\n");
        for d in &c.differences {
            let _ = writeln!(out, "    {}: {} vs {}", d.field, d.b, d.a);
        }
    }
    for c in &c.cautions {
        let _ = writeln!(out, "  caution: {c}");
    }
    let _ = writeln!(
        out,
        "  {:<26}{:>11}{:>11}{:>11}{:>9}  {:<24}significant",
        "metric", "baseline", "this", "delta", "rel", "95% CI of delta"
    );
    for d in c.metrics.iter().filter(|d| d.base.is_some() || d.other.is_some()) {
        row(&mut out, d);
    }
    let worse: Vec<String> = c.metrics.iter().filter(|d| d.regression).map(|d| d.metric.name()).collect();
    if worse.is_empty() {
        out.push_str("  no significant regression\n");
    } else {
        let _ = writeln!(out, "  significant regressions: {}", worse.join(", "));
    }
    out
}

/// `goodput check`'s report: one line per violated bound (or that every bound holds).
pub fn render_check(checks: &[BoundCheck]) -> String {
    let bad: Vec<&BoundCheck> = checks.iter().filter(|c| c.violated).collect();
    if bad.is_empty() {
        return format!("all {} bounds hold\n", checks.len());
    }
    let mut out = String::new();
    for c in bad {
        let _ = writeln!(out, "REGRESSION {}", c.line());
    }
    out
}
