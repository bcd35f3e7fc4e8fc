//! `goodput compare --html`: a self-contained HTML page comparing result files. The page shell
//! (no external load, inline CSS with print styles) is the run report's ([`crate::page`]); this module adds, for
//! each later file against the baseline, the comparison table of [`goodput_results::comparison`]
//! (baseline, this, absolute and relative delta, the 95% interval of the delta, significance),
//! the workload differences and cautions, and then the CDFs of TTFT, TPOT, ITL and E2E overlaid,
//! one series per file (every successful request of every run in the file; drawn from
//! downsampled points).

use std::fmt::Write;

use goodput_results::ResultDoc;
use goodput_results::comparison::{Comparison, MetricDelta, Significance};

use crate::charts;
use crate::comparison::{num, signed};
use crate::page::{charts_block, open_page, pre};
use crate::svg::{Chart, esc};

/// The latencies whose CDFs are overlaid: (id as in [`charts::METRICS`], label).
pub const CDF_METRICS: [(&str, &str); 4] = [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")];

/// The id of the overlaid CDF chart of metric `id` (`chart-cmp-cdf-ttft`, …).
pub fn cdf_chart_id(id: &str) -> String {
    format!("chart-cmp-cdf-{id}")
}

/// The page: `files` are the compared documents with their labels (the baseline first), `cmps`
/// each later file against the baseline (as `goodput_decide::compare::compare_all` gives them).
pub fn comparison_html(files: &[(String, &ResultDoc)], cmps: &[Comparison]) -> String {
    let mut o = String::with_capacity(128 * 1024);
    let names: Vec<&str> = files.iter().map(|(l, _)| l.as_str()).collect();
    open_page(&mut o, &format!("goodput comparison: {}", names.join(" vs ")));
    let _ = writeln!(
        o,
        "<p class=\"meta\">baseline {} · compared: {} · written by goodput {}</p>",
        esc(names.first().copied().unwrap_or("?")),
        esc(&names.get(1..).unwrap_or_default().join(", ")),
        esc(env!("CARGO_PKG_VERSION"))
    );
    for c in cmps {
        table(&mut o, c);
    }
    o.push_str("<section id=\"distributions\"><h2>Distributions</h2>");
    o.push_str(
        "<p class=\"meta\">one series per file: every successful request of its runs \
         (the table's statistics exclude warm-up and cool-down)</p>",
    );
    charts_block(&mut o, &cdf_charts(files));
    o.push_str("</section>\n</body></html>\n");
    o
}

/// The legend's names of `labels`: the file names alone when they tell the files apart (long
/// paths would not fit a legend), else the labels as given.
pub fn legend_names(labels: &[&str]) -> Vec<String> {
    let short: Vec<String> = labels
        .iter()
        .map(|l| std::path::Path::new(l).file_name().map_or(l.to_string(), |n| n.to_string_lossy().into_owned()))
        .collect();
    let distinct = short.iter().collect::<std::collections::BTreeSet<_>>().len() == short.len();
    if distinct { short } else { labels.iter().map(|l| l.to_string()).collect() }
}

/// The overlaid CDFs of [`CDF_METRICS`], one series per file.
pub fn cdf_charts(files: &[(String, &ResultDoc)]) -> Vec<Chart> {
    let names = legend_names(&files.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>());
    CDF_METRICS
        .iter()
        .map(|(id, label)| {
            let series: Vec<(String, Vec<f64>)> = files
                .iter()
                .zip(&names)
                .map(|((_, doc), name)| {
                    let mut s: Vec<f64> = doc.runs.iter().flat_map(|r| charts::samples(r, id)).collect();
                    if doc.runs.len() > 1 {
                        charts::sort(&mut s);
                    }
                    (name.clone(), s)
                })
                .collect();
            let mut c = charts::cdf_chart(id, label, &series);
            c.id = cdf_chart_id(id);
            c
        })
        .collect()
}

/// One comparison's section: differences, cautions, the table and the verdict line.
fn table(o: &mut String, c: &Comparison) {
    let _ = write!(o, "<section class=\"cmp\"><h2>{} against {} (baseline)</h2>", esc(&c.other), esc(&c.base));
    if !c.differences.is_empty() {
        let lines: Vec<String> = c.differences.iter().map(|d| format!("{}: {} vs {}", d.field, d.b, d.a)).collect();
        o.push_str("<p class=\"warn\">compared although the workloads differ (--force):</p>");
        pre(o, &lines.join("\n"));
    }
    for caution in &c.cautions {
        let _ = write!(o, "<p class=\"warn\">caution: {}</p>", esc(caution));
    }
    o.push_str(
        "<table><tr><th class=\"l\">metric</th><th>baseline</th><th>this</th><th>delta</th>\
         <th>relative</th><th>95% CI of delta</th><th class=\"l\">significant</th></tr>\n",
    );
    for d in c.metrics.iter().filter(|d| d.base.is_some() || d.other.is_some()) {
        o.push_str(&row(d));
    }
    o.push_str("</table>\n");
    let worse: Vec<String> = c.metrics.iter().filter(|d| d.regression).map(|d| d.metric.name()).collect();
    if worse.is_empty() {
        o.push_str("<p class=\"met\">no significant regression</p>");
    } else {
        let _ = write!(o, "<p class=\"missed\">significant regressions: {}</p>", esc(&worse.join(", ")));
    }
    o.push_str("</section>\n");
}

/// One table row: the numbers as the console prints them; a significant change coloured by
/// whether it is worse or better.
pub fn row(d: &MetricDelta) -> String {
    let m = d.metric;
    let name = if d.unit.is_empty() { m.name() } else { format!("{} {}", m.name(), d.unit) };
    let rel = d.relative.map_or("-".into(), |r| format!("{:+.1}%", r * 100.0));
    let ci = d.ci.map_or("-".into(), |[lo, hi]| format!("[{}, {}]", signed(Some(lo), m), signed(Some(hi), m)));
    let (class, sig) = match (d.significance, d.regression) {
        (Significance::Significant, true) => ("missed", "yes, worse"),
        (Significance::Significant, false) => ("met", "yes, better"),
        (s, _) => ("unsure", s.label()),
    };
    format!(
        "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l {class}\">{sig}</td></tr>\n",
        esc(&name),
        esc(&num(d.base, m)),
        esc(&num(d.other, m)),
        esc(&signed(d.delta, m)),
        esc(&rel),
        esc(&ci),
    )
}

#[cfg(test)]
mod tests {
    use goodput_results::comparison::{Latency, Method, Metric, Stat};

    use super::*;

    fn delta(metric: Metric, unit: &str, base: f64, other: f64, ci: Option<[f64; 2]>) -> MetricDelta {
        let significance = match ci {
            Some([lo, hi]) if lo > 0.0 || hi < 0.0 => Significance::Significant,
            Some(_) => Significance::NotSignificant,
            None => Significance::NotAvailable,
        };
        MetricDelta {
            metric,
            unit: unit.into(),
            base: Some(base),
            other: Some(other),
            delta: Some(other - base),
            relative: Some((other - base) / base),
            ci,
            method: Method::Bootstrap,
            significance,
            regression: significance == Significance::Significant && other > base,
        }
    }

    /// A hand-made comparison: p99 TTFT 100 → 150 ms (significant, worse), mean TPOT 20 → 19 ms
    /// (not significant), attainment 0.99 → 0.95 (no interval).
    fn comparison() -> Comparison {
        let mut att = delta(Metric::Attainment, "", 0.99, 0.95, None);
        att.relative = Some((0.95 - 0.99) / 0.99);
        Comparison {
            base: "a.json".into(),
            other: "b.json".into(),
            differences: Vec::new(),
            cautions: vec!["b.json: the client could not keep up with its schedule (client_bound)".into()],
            metrics: vec![
                delta(Metric::Latency(Stat::P99, Latency::Ttft), "ms", 100.0, 150.0, Some([30.0, 70.0])),
                delta(Metric::Latency(Stat::Mean, Latency::Tpot), "ms", 20.0, 19.0, Some([-3.0, 1.0])),
                att,
                MetricDelta {
                    base: None,
                    other: None,
                    delta: None,
                    relative: None,
                    ..delta(Metric::Goodput, "req/s", 1.0, 1.0, None)
                },
            ],
        }
    }

    #[test]
    fn table_rows_hold_the_deltas_intervals_and_verdicts() {
        let c = comparison();
        assert_eq!(
            row(&c.metrics[0]),
            "<tr><td class=\"l\">p99(ttft) ms</td><td>100.00</td><td>150.00</td><td>+50.00</td><td>+50.0%</td>\
             <td>[+30.00, +70.00]</td><td class=\"l missed\">yes, worse</td></tr>\n"
        );
        assert_eq!(
            row(&c.metrics[1]),
            "<tr><td class=\"l\">mean(tpot) ms</td><td>20.00</td><td>19.00</td><td>-1.00</td><td>-5.0%</td>\
             <td>[-3.00, +1.00]</td><td class=\"l unsure\">no</td></tr>\n"
        );
        assert_eq!(
            row(&c.metrics[2]),
            "<tr><td class=\"l\">attainment</td><td>99.00%</td><td>95.00%</td><td>-4.00pt</td><td>-4.0%</td>\
             <td>-</td><td class=\"l unsure\">n/a</td></tr>\n"
        );
    }

    #[test]
    fn legends_use_file_names_when_they_differ() {
        assert_eq!(legend_names(&["/tmp/x/a.json", "runs/b.json"]), ["a.json", "b.json"]);
        assert_eq!(legend_names(&["old/r.json", "new/r.json"]), ["old/r.json", "new/r.json"]);
    }

    #[test]
    fn the_page_is_self_contained_with_the_table_and_one_cdf_per_latency() {
        let doc = ResultDoc::new("0", Vec::new());
        let files = vec![("a.json".to_string(), &doc), ("b.json".to_string(), &doc)];
        let page = comparison_html(&files, &[comparison()]);
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</body></html>\n"));
        assert!(page.contains("default-src 'none'") && !page.contains("<script") && !page.contains("src="));
        assert!(page.contains("<h2>b.json against a.json (baseline)</h2>"));
        assert!(page.contains("caution: b.json: the client could not keep up"));
        assert!(page.contains("significant regressions: p99(ttft)"));
        // a metric neither side has is left out
        assert_eq!(page.matches("<tr><td").count(), 3);
        for (id, _) in CDF_METRICS {
            assert!(page.contains(&format!("id=\"{}\"", cdf_chart_id(id))), "{id}");
        }
    }
}
