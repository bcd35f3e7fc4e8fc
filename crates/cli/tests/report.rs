//! `goodput report` and `--html` from the command line: a simulated run's document rendered as
//! HTML, the request CSV and the summary CSV; `bench --html` against the embedded engine;
//! `capacity --sim --html`; bad usage exits 2 naming the flag. When Debian's `chromium` is on
//! PATH (CI installs it and sets GOODPUT_REQUIRE_CHROMIUM=1), a report from a real run is opened
//! in headless Chromium: its DOM must hold every chart with points, the console no error, and the
//! screenshot is kept at `target/report.png`.

mod common;

use std::time::Duration;

use common::browser::*;
use common::*;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn report_renders_a_simulated_run_as_html_and_csv() {
    let dir = temp_dir("report-sim");
    let r = dir.join("r.json");
    let o = run(
        &[
            "sim",
            "--model",
            "llama-3.2-1b",
            "--rate",
            "20",
            "--requests",
            "200",
            "--input-tokens",
            "256",
            "--output-tokens",
            "32",
            "--slo",
            "ttft<=200ms,p99(tpot)<=40ms",
            "--out",
            r.to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let (html, csv, summary) = (dir.join("report.html"), dir.join("requests.csv"), dir.join("summary.csv"));
    let o = run(
        &[
            "report",
            r.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "--summary-csv",
            summary.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("latency (ms)") && out.contains("report.html"), "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    assert_charts(&page, &RUN_CHARTS);
    assert!(page.contains("95% CI") && page.contains("Token counts"));
    // the answer first: the headline tables hold the document's figures (as rounded on the page)
    let doc = load_valid(&r);
    let s = &doc["runs"][0]["summary"];
    let head = &page[..page.find("<details><summary>the console report").expect("the console text, folded")];
    assert!(head.contains("class=\"headline\"") && !head.contains("<pre>latency"), "no console text above it");
    for (m, st, digits) in [
        ("ttft_ms", "p50", 2),
        ("ttft_ms", "p90", 2),
        ("ttft_ms", "p99", 2),
        ("tpot_ms", "p50", 2),
        ("tpot_ms", "p99", 2),
        ("itl_ms", "p90", 2),
        ("e2e_ms", "p99", 2),
    ] {
        let want = s[m][st].as_f64().unwrap();
        let got = headline_figure(head, m, st);
        assert!((got - want).abs() <= 0.5 * 10f64.powi(-digits) + 1e-9, "{m} {st}: page {got} vs document {want}");
    }
    let rps = s["request_throughput"].as_f64().unwrap();
    assert!((headline_figure(head, "request_throughput", "value") - rps).abs() <= 0.005 + 1e-9);
    let att = s["slo"]["attainment"].as_f64().unwrap() * 100.0;
    assert!((headline_figure(head, "slo", "attainment") - att).abs() <= 0.05 + 1e-9);
    assert!(head.contains("data-metric=\"verdict\">ok<"), "verdict");
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.matches("\r\n").count(), 201, "a header and 200 requests");
    assert!(csv.starts_with("run,run_name,id,"));
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(summary.matches("\r\n").count(), 2);
    let head = fields(summary.lines().next().unwrap());
    let row = fields(summary.lines().nth(1).unwrap());
    assert_eq!(head.len(), row.len());
    assert_eq!(row[head.iter().position(|c| c == "slo").unwrap()], "ttft<=200ms,p99(tpot)<=40ms");
    assert_eq!(row[head.iter().position(|c| c == "completed").unwrap()], "200");
}

/// The fields of one CSV line without line breaks in it (RFC 4180 quoting).
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut f, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                f.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') => quoted = true,
            (false, ',') => out.push(std::mem::take(&mut f)),
            (_, c) => f.push(c),
        }
    }
    out.push(f);
    out
}

#[test]
fn report_refuses_bad_usage() {
    let dir = temp_dir("report-usage");
    let missing = dir.join("missing.json");
    let o = run(&["report", missing.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let r = dir.join("r.json");
    std::fs::write(&r, "{\"not\": \"a result\"}").unwrap();
    let o = run(&["report", r.to_str().unwrap(), "--html", r.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--html"), "{}", text(&o.stderr));
    let o = run(&["report", r.to_str().unwrap(), "--csv", "/nonexistent-dir/x.csv"], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--csv"));
    // a file that is no result document: a clear error, exit 2 (a bad file argument)
    let o = run(&["report", r.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("not a goodput result document"), "{}", text(&o.stderr));
}

#[test]
fn bench_html_against_the_embedded_engine() {
    let dir = temp_dir("report-bench");
    let html = dir.join("r.html");
    let o = run(
        &[
            "bench",
            "--model",
            "llama-3.2-1b",
            "--requests",
            "20",
            "--concurrency",
            "4",
            "--input-tokens",
            "128",
            "--output-tokens",
            "16",
            "--html",
            html.to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    assert_charts(&page, &RUN_CHARTS);
    assert!(page.contains("embedded engine"));
    // the README's screenshot of a run report
    browser_check(&html, "readme-run-report.png", &RUN_CHARTS);
}

#[test]
fn capacity_html_draws_the_search() {
    let dir = temp_dir("report-capacity");
    let html = dir.join("cap.html");
    let o = run(
        &[
            "capacity",
            "--sim",
            "--model",
            "llama-3.2-1b",
            "--input-tokens",
            "256",
            "--output-tokens",
            "32",
            "--slo",
            "ttft<=100ms",
            "--step-time",
            "20s",
            "--max-steps",
            "4",
            "--start-rate",
            "4",
            "--html",
            html.to_str().unwrap(),
            "--out",
            dir.join("cap.json").to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let charts = ["chart-goodput-rate", "chart-attainment-rate", "chart-p99-throughput"];
    assert_charts(&page, &charts);
    assert_charts(&page, &["chart-cdf-ttft-runs", "chart-cdf-ttft-r0", "chart-engine-batch-r0"]);
    // the answer first, as the document has it, and a row per step
    let doc = load_valid(&dir.join("cap.json"));
    let cap = &doc["capacity"];
    assert!((headline_figure(&page, "capacity", "rate") - cap["rate"].as_f64().unwrap()).abs() < 0.0005 + 1e-9);
    assert_eq!(page.matches("data-metric=\"step\" data-stat=\"rate\"").count(), cap["curve"].as_array().unwrap().len());
    browser_check(&html, "capacity.png", &charts);
}

#[test]
fn sweep_html_tables_the_runs_by_rate() {
    let dir = temp_dir("report-sweep");
    let (out, html) = (dir.join("s.json"), dir.join("s.html"));
    let o = run(
        &[
            "sim",
            "--model",
            "llama-3.2-1b",
            "--profile",
            "sweep",
            "--sweep-points",
            "2",
            "--requests",
            "100",
            "--input-tokens",
            "256",
            "--output-tokens",
            "32",
            "--slo",
            "ttft<=100ms",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&["report", out.to_str().unwrap(), "--html", html.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let doc = load_valid(&out);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "synchronous, throughput and two constant rates");
    for (i, r) in runs.iter().enumerate() {
        let row = &page[page.find(&format!("<tr data-run=\"{i}\">")).unwrap()..];
        let want = format!("{:.3}<", r["summary"]["request_throughput"].as_f64().unwrap());
        assert!(row[..row.find("</tr>").unwrap()].contains(&want), "run {i}: {want}");
    }
    let charts = ["chart-goodput-rate", "chart-attainment-rate", "chart-p99-throughput"];
    assert_charts(&page, &charts);
    browser_check(&html, "sweep.png", &charts);
}

#[test]
fn plan_html_draws_cost_vs_latency() {
    let dir = temp_dir("report-plan");
    let (html, out) = (dir.join("plan.html"), dir.join("plan.json"));
    let o = run(
        &[
            "plan",
            "--model",
            "llama-3.2-1b",
            "--gpus",
            "h100,a100",
            "--step-time",
            "20s",
            "--slo",
            "ttft<=200ms,tpot<=40ms",
            "--out",
            out.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    // two candidates; the front holds one or both
    let pts = chart_points(&page, "chart-plan-cost");
    assert!(pts[0] == 2 && (1..=2).contains(&pts[1]), "{pts:?}");
    assert_titled(&page, "chart-plan-cost");
    // the ranking as a table with units, its figures the document's; the Pareto points named on
    // the chart
    let doc = load_valid(&out);
    for h in ["req/s per GPU", "output tok/s per GPU", "p99 TTFT, ms", "$ per M output tokens", "binding SLO"] {
        assert!(page.contains(h), "{h}");
    }
    for (i, c) in doc["plan"]["candidates"].as_array().unwrap().iter().enumerate() {
        let row = &page[page.find(&format!("<tr data-candidate=\"{i}\">")).unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        if let Some(cost) = c["cost_per_m_output"].as_f64() {
            assert!(row.contains(&format!("data-field=\"cost_per_m_output\">{cost:.3}<")), "{row}");
        }
    }
    assert!(page.contains("<text class=\"pl\""), "the Pareto points are labelled on the chart");
    // the top candidates' latency against rate, the SLO's limits drawn and each capacity marked
    for id in ["chart-plan-ttft-rate", "chart-plan-tpot-rate"] {
        let pts = chart_points(&page, id);
        assert!(pts.len() >= 3 && pts.iter().all(|&n| n > 0), "{id}: {pts:?}");
        assert_titled(&page, id);
    }
    assert!(page.contains("SLO TTFT ≤ 200 ms") && page.contains("SLO TPOT ≤ 40 ms"));
    assert!(page.contains("#1 capacity "), "the capacity is marked");
    assert!(doc["plan"]["candidates"][0]["curve"].as_array().is_some_and(|c| !c.is_empty()));
    // the README's screenshot of a plan page
    browser_check(
        &html,
        "readme-plan-report.png",
        &["chart-plan-cost", "chart-plan-ttft-rate", "chart-plan-tpot-rate"],
    );
    // the same page from the plan's result document
    let again = dir.join("again.html");
    let o = run(&["report", out.to_str().unwrap(), "--html", again.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(chart_points(&std::fs::read_to_string(&again).unwrap(), "chart-plan-cost"), pts);
}

/// A 100,000-request run's page stays under 1 MB and lays out in Chromium in under 2 s (the
/// issue's bounds; about 0.5 MB and 0.2 s here), without sideways scrolling at 1,280 px.
#[test]
fn a_hundred_thousand_request_page_is_small_and_fast() {
    let dir = temp_dir("report-100k");
    let (out, html) = (dir.join("big.json"), dir.join("big.html"));
    let o = run(
        &[
            "sim",
            "--model",
            "llama-3.2-1b",
            "--rate",
            "200",
            "--requests",
            "100000",
            "--input-tokens",
            "256",
            "--output-tokens",
            "32",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(240),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&["report", out.to_str().unwrap(), "--html", html.to_str().unwrap()], Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let size = std::fs::metadata(&html).unwrap().len();
    assert!(size < 1_000_000, "the page is {size} bytes");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    assert_charts(&page, &RUN_CHARTS);
    std::fs::remove_file(&out).unwrap();
    let Some(chromium) = chromium() else { return };
    let layout = measure(chromium, &html, 1280);
    assert!(
        layout.scroll_width <= layout.client_width,
        "{} px wide in {} px",
        layout.scroll_width,
        layout.client_width
    );
    assert!(layout.layout_ms < 2000.0, "laid out in {:.0} ms", layout.layout_ms);
}

/// A quick simulated run written to `out` (extra flags appended).
fn sim_to(out: &std::path::Path, extra: &[&str]) {
    let mut args = vec![
        "sim",
        "--model",
        "llama-3.2-1b",
        "--rate",
        "20",
        "--requests",
        "200",
        "--input-tokens",
        "256",
        "--output-tokens",
        "32",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    let o = run(&args, LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn compare_html_overlays_the_cdfs_of_each_file() {
    let dir = temp_dir("report-compare");
    let (a, b, html) = (dir.join("a.json"), dir.join("b.json"), dir.join("cmp.html"));
    sim_to(&a, &[]);
    sim_to(&b, &["--max-num-seqs", "2"]);
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--html", html.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let charts = ["chart-cmp-cdf-ttft", "chart-cmp-cdf-tpot", "chart-cmp-cdf-itl", "chart-cmp-cdf-e2e"];
    assert_charts(&page, &charts);
    for id in charts {
        assert_eq!(chart_points(&page, id).len(), 2, "{id}: one series per file");
    }
    // the table: the console's numbers, with the interval and verdict of each delta
    let (a_name, b_name) = (a.display().to_string(), b.display().to_string());
    assert!(page.contains(&format!("<h2>{b_name} against {a_name} (baseline)</h2>")), "{page}");
    assert!(page.contains("<th>95% CI of delta</th>"));
    // its figures are the documents': p99 TTFT of the baseline and of the other file
    let p99 = |f: &std::path::Path| {
        let d = load_valid(f);
        d["runs"][0]["summary"]["ttft_ms"]["p99"].as_f64().unwrap()
    };
    assert!(
        page.contains(&format!("<td class=\"l\">p99(ttft) ms</td><td>{:.2}</td><td>{:.2}</td>", p99(&a), p99(&b))),
        "{page}"
    );
    // two sequences at a time on a 20 req/s load: E2E is significantly worse
    assert!(page.contains("yes, worse") && page.contains("significant regressions: "), "{page}");
    browser_check(&html, "compare.png", &charts);
    // --html must not overwrite an input
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--html", a.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--html"), "{}", text(&o.stderr));
}

#[test]
fn sim_html_draws_the_engine_mechanisms_over_time() {
    let dir = temp_dir("report-mechanisms");
    let (prefix, spec) = (dir.join("prefix.html"), dir.join("spec.html"));
    let out = dir.join("r.json");
    sim_to(
        &out,
        &[
            "--prefix-caching",
            "on",
            "--prefix-groups",
            "2",
            "--prefix-tokens",
            "512",
            "--html",
            prefix.to_str().unwrap(),
        ],
    );
    let page = std::fs::read_to_string(&prefix).unwrap();
    assert_charts(&page, &["chart-engine-tokens", "chart-engine-prefix"]);
    // the counters are in the document's series, after the five gauges
    let doc = load_valid(&out);
    let series = doc["runs"][0]["engine_stats"]["series"].as_array().unwrap();
    let last = series.last().unwrap().as_array().unwrap();
    assert_eq!(last.len(), 12, "{last:?}");
    assert!(last[7].as_f64().unwrap() > 0.0, "prefix hit tokens: {last:?}");
    sim_to(
        &out,
        &["--prefix-caching", "off", "--speculative", "ngram,k=4,acceptance=0.6", "--html", spec.to_str().unwrap()],
    );
    let page = std::fs::read_to_string(&spec).unwrap();
    assert_charts(&page, &["chart-engine-tokens", "chart-engine-spec", "chart-engine-spec-length"]);
    assert!(!page.contains("id=\"chart-engine-prefix\""), "no prefix caching, no hit-rate chart");
}
