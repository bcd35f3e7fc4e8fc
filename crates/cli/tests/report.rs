//! `goodput report` and `--html` from the command line: a simulated run's document rendered as
//! HTML, the request CSV and the summary CSV; `bench --html` against the embedded engine;
//! `capacity --sim --html`; bad usage exits 2 naming the flag. When Debian's `chromium` is on
//! PATH (CI installs it and sets GOODPUT_REQUIRE_CHROMIUM=1), a report from a real run is opened
//! in headless Chromium: its DOM must hold every chart with points, the console no error, and the
//! screenshot is kept at `target/report.png`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(120);

/// The charts every run's section has (single-run documents: no suffix).
const RUN_CHARTS: [&str; 17] = [
    "chart-cdf-ttft",
    "chart-cdf-ttft-sched",
    "chart-cdf-tpot",
    "chart-cdf-itl",
    "chart-cdf-e2e",
    "chart-hist-ttft",
    "chart-hist-ttft-sched",
    "chart-hist-tpot",
    "chart-hist-itl",
    "chart-hist-e2e",
    "chart-throughput",
    "chart-requests",
    "chart-inflight",
    "chart-ttft-time",
    "chart-itl-position",
    "chart-engine-batch",
    "chart-engine-kv",
];

/// The `data-points` of each series of the chart `id` (panics when the chart is missing).
fn chart_points(html: &str, id: &str) -> Vec<usize> {
    let start = html.find(&format!("<svg class=\"chart\" id=\"{id}\"")).unwrap_or_else(|| panic!("chart {id} missing"));
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.match_indices("data-points=\"")
        .map(|(i, m)| svg[i + m.len()..].split('"').next().unwrap().parse().unwrap())
        .collect()
}

/// Nothing in the page loads from anywhere: no script, link or image, no src, hrefs only to
/// anchors in the page.
fn assert_offline(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("<img"));
    assert!(!html.contains("src=") && !html.contains("url(") && !html.contains("@import"));
    for (i, _) in html.match_indices("href=") {
        assert!(html[i + 5..].starts_with("\"#"), "href to elsewhere: {}", &html[i..i + 40]);
    }
    for scheme in ["http://", "https://"] {
        for (i, _) in html.match_indices(scheme) {
            let before = &html[i.saturating_sub(8)..i];
            assert!(!before.contains("src=") && !before.contains("href="), "{before}{scheme}…");
        }
    }
}

fn assert_charts(html: &str, ids: &[&str]) {
    for id in ids {
        let pts = chart_points(html, id);
        assert!(!pts.is_empty() && pts.iter().all(|&n| n > 0), "{id}: {pts:?}");
    }
}

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
    // a file that is no result document: a clear error, exit 1
    let o = run(&["report", r.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(1));
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
    browser_check(&html, "report.png");
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
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    assert_charts(&page, &["chart-goodput-rate", "chart-attainment-rate", "chart-p99-throughput"]);
    assert_charts(&page, &["chart-cdf-ttft-runs", "chart-cdf-ttft-r0", "chart-engine-batch-r0"]);
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
    assert_eq!(chart_points(&page, "chart-plan-cost"), vec![2, 2]);
    // the same page from the plan's result document
    let again = dir.join("again.html");
    let o = run(&["report", out.to_str().unwrap(), "--html", again.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(chart_points(&std::fs::read_to_string(&again).unwrap(), "chart-plan-cost"), vec![2, 2]);
}

/// Opens the report in headless Chromium when it is installed (required when
/// GOODPUT_REQUIRE_CHROMIUM=1): the rendered DOM has every chart with its points; the console
/// logged nothing (the page has no script, so any message is a refused load or an error); the
/// network log has no request of the page's (only the browser's own service hosts, which it
/// calls whatever it opens); a screenshot is saved under `target/`.
fn browser_check(html: &Path, shot: &str) {
    let required = std::env::var("GOODPUT_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|b| on_path(b)) else {
        assert!(!required, "GOODPUT_REQUIRE_CHROMIUM=1 but no chromium on PATH");
        eprintln!("note: chromium is not installed: the headless browser check is skipped");
        return;
    };
    let url = format!("file://{}", std::fs::canonicalize(html).unwrap().display());
    let dir = temp_dir("chromium");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-pings",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr",
        "--v=0",
    ];
    // stdout and stderr go to files: a pipe nobody reads would fill and stall the browser
    let run_browser = |name: &str, extra: &[String]| {
        let (out, err) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.err")));
        let child = std::process::Command::new(chromium)
            .args(common)
            .arg(format!("--user-data-dir={}", dir.join(format!("{name}-profile")).display()))
            .args(extra)
            .arg(&url)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let o = wait_with_deadline(child, Duration::from_secs(90));
        (o.status, std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(err).unwrap())
    };
    let netlog = dir.join("netlog.json");
    let (status, dom, log) = run_browser("dom", &["--dump-dom".into(), format!("--log-net-log={}", netlog.display())]);
    assert!(status.success(), "chromium failed: {log}");
    assert_charts(&dom, &RUN_CHARTS);
    let bad: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE") || l.contains("Refused to")).collect();
    assert!(bad.is_empty(), "console messages:\n{}", bad.join("\n"));
    let net = std::fs::read_to_string(&netlog).unwrap_or_default();
    let own = ["google.com/", "googleapis.com/", "gvt1.com/", "gstatic.com/"];
    let requests: Vec<&str> = net
        .match_indices("\"url\":\"")
        .map(|(i, m)| net[i + m.len()..].split('"').next().unwrap_or(""))
        .filter(|u| !u.starts_with("file:") && !own.iter().any(|h| u.contains(h)))
        .collect();
    assert!(requests.is_empty(), "the page made network requests: {requests:?}");
    let png = target_dir().join(shot);
    let (status, _, log) =
        run_browser("shot", &[format!("--screenshot={}", png.display()), "--window-size=1340,3000".into()]);
    assert!(status.success() && png.is_file(), "no screenshot: {log}");
}

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

/// The workspace's `target/` (where CI collects artifacts).
fn target_dir() -> PathBuf {
    let d = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    std::fs::create_dir_all(&d).unwrap();
    d
}
