//! The HTML report and the CSV exports on the checked-in result documents: CSV against golden
//! files (`UPDATE_GOLDEN=1` rewrites them after a deliberate change), HTML for what an offline
//! page needs (nothing loaded from anywhere, every chart drawn with points, well-formed markup).

use std::path::{Path, PathBuf};

use goodput_results::{CapacityPoint, CapacityReport, ResultDoc};

fn fixture(name: &str) -> ResultDoc {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/results").join(name);
    ResultDoc::read(&p).expect("fixture reads")
}

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

fn check_golden(name: &str, got: &str) {
    let p = golden(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&p, got).expect("write golden");
    }
    let want = std::fs::read_to_string(&p).expect("golden file (UPDATE_GOLDEN=1 writes it)");
    assert!(got == want, "{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it)\n--- got\n{got}");
}

/// Splits one RFC 4180 CSV document into records of fields.
fn parse_csv(s: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut f) = (Vec::new(), Vec::new(), String::new());
    let mut chars = s.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                f.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => f.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut f)),
            (false, '\r') => {
                assert_eq!(chars.next(), Some('\n'), "CR without LF");
                row.push(std::mem::take(&mut f));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\n') => panic!("a bare LF ends a record"),
            (false, c) => f.push(c),
        }
    }
    assert!(row.is_empty() && f.is_empty(), "the last record ends with CRLF");
    rows
}

#[test]
fn request_csv_matches_its_golden_file_and_is_rfc4180() {
    let mut doc = fixture("v1-bench-before-run-ids.json");
    // a field that must be quoted
    if let Some(r) = doc.runs[0].requests.get_mut(0) {
        r.finish_reason = Some("stop, \"quoted\"\nnext line".into());
    }
    let csv = goodput_render::requests_csv(&doc);
    let rows = parse_csv(&csv);
    assert_eq!(rows[0], goodput_render::csv::REQUEST_COLUMNS.map(String::from).to_vec());
    assert_eq!(rows.len(), 1 + doc.runs[0].requests.len());
    assert!(rows.iter().all(|r| r.len() == rows[0].len()));
    assert_eq!(rows[1][29], "stop, \"quoted\"\nnext line");
    check_golden("requests.csv", &csv);
}

#[test]
fn summary_csv_matches_its_golden_file() {
    let mut doc = fixture("v1-sim-before-run-ids.json");
    let mut second = doc.runs[0].clone();
    second.name = Some("second, stage".into());
    doc.runs.push(second);
    let csv = goodput_render::summary_csv(&doc);
    let rows = parse_csv(&csv);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.len() == rows[0].len()));
    assert_eq!(rows[2][1], "second, stage");
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    assert_eq!(rows[1][col("completed")], doc.runs[0].summary.completed.to_string());
    assert_eq!(rows[1][col("ttft_ms_p99")], doc.runs[0].summary.ttft_ms.p99.unwrap().to_string());
    check_golden("summary.csv", &csv);
}

/// Checks that every element is closed in order (void elements written `<x/>`), and returns the
/// count of start tags per name.
fn well_formed(html: &str) -> std::collections::HashMap<String, usize> {
    let mut stack: Vec<String> = Vec::new();
    let mut counts = std::collections::HashMap::new();
    let body = html.strip_prefix("<!DOCTYPE html>\n").expect("doctype first");
    let mut rest = body;
    while let Some(i) = rest.find('<') {
        let after = &rest[i + 1..];
        let end = after.find('>').expect("tag closed");
        let tag = &after[..end];
        rest = &after[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name, "</{name}> closes <{open}>");
            continue;
        }
        let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        assert!(!name.is_empty(), "bad tag <{tag}>");
        *counts.entry(name.clone()).or_insert(0) += 1;
        if tag.ends_with('/') {
            continue;
        }
        if name == "style" {
            // CSS holds no '<'
            let close = rest.find("</style>").expect("style closed");
            assert!(!rest[..close].contains('<'));
            rest = &rest[close + "</style>".len()..];
            continue;
        }
        stack.push(name);
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert!(!rest.contains('>') || rest.trim().is_empty());
    counts
}

/// The `data-points` of each series in the chart with this id.
fn chart_points(html: &str, id: &str) -> Vec<usize> {
    let start = html.find(&format!("<svg class=\"chart\" id=\"{id}\"")).unwrap_or_else(|| panic!("chart {id} missing"));
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.match_indices("data-points=\"")
        .map(|(i, m)| svg[i + m.len()..].split('"').next().unwrap().parse().unwrap())
        .collect()
}

fn offline(html: &str) {
    for attr in ["src=", "href=", "url(", "@import"] {
        for (i, _) in html.match_indices(attr) {
            let v = &html[i + attr.len()..(i + attr.len() + 12).min(html.len())];
            assert!(attr == "href=" && v.starts_with("\"#"), "{attr}{v}… loads something");
        }
    }
    assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("<img"));
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
}

#[test]
fn html_of_one_run_is_offline_well_formed_and_draws_every_chart() {
    let doc = fixture("v1-sim-before-run-ids.json");
    let html = goodput_render::html_report(&doc, "r.json");
    offline(&html);
    let tags = well_formed(&html);
    assert!(tags["svg"] >= 17, "{} charts", tags["svg"]);
    for id in ["ttft", "ttft-sched", "tpot", "itl", "e2e"] {
        for kind in ["cdf", "hist"] {
            let pts = chart_points(&html, &format!("chart-{kind}-{id}"));
            assert!(pts.iter().any(|&n| n > 0), "chart-{kind}-{id}: {pts:?}");
        }
    }
    for id in [
        "chart-throughput",
        "chart-requests",
        "chart-inflight",
        "chart-ttft-time",
        "chart-itl-position",
        "chart-engine-batch",
        "chart-engine-kv",
    ] {
        let pts = chart_points(&html, id);
        assert!(pts.iter().all(|&n| n > 0), "{id}: {pts:?}");
    }
    // a short run still gets a curve over time (at least 20 buckets)
    assert!(chart_points(&html, "chart-throughput")[0] >= 20);
    assert!(chart_points(&html, "chart-inflight")[0] >= 20);
    // the text: the console report, SLO verdicts with their intervals, token provenance
    assert!(html.contains("latency (ms)") && html.contains("95% CI") && html.contains("Token counts"));
    assert!(html.contains("engine model"));
}

#[test]
fn html_of_a_capacity_search_draws_its_curves_and_each_step() {
    let mut doc = fixture("v1-sim-before-run-ids.json");
    let base = doc.runs[0].clone();
    doc.runs = (0..3)
        .map(|i| {
            let mut r = base.clone();
            r.name = Some(format!("capacity step {i}"));
            r.summary.request_throughput *= 1.0 + i as f64;
            r
        })
        .collect();
    let point = |rate: f64, att: f64| CapacityPoint {
        rate,
        attainment: att,
        request_goodput: rate * att,
        token_goodput: rate * att * 100.0,
        ttft_p50_ms: Some(50.0),
        ttft_p99_ms: Some(90.0),
        tpot_p50_ms: Some(10.0),
        tpot_p99_ms: Some(20.0),
        saturated: att < 0.9,
        stopped_early: false,
        attainment_ci: None,
        queue_growth_ms: None,
        queue_trend: None,
        step_s: None,
        achieved_rate: Some(rate),
        verdict: goodput_metrics::ClientVerdict::Ok,
    };
    doc.capacity = Some(CapacityReport {
        rate: Some(2.0),
        uncertainty: Some(0.1),
        per_gpu: Some(2.0),
        attainment_target: 0.99,
        slo: "ttft<=200ms".into(),
        answer: "capacity 2.0 req/s".into(),
        notes: vec![],
        curve: vec![point(1.0, 1.0), point(2.0, 0.995), point(4.0, 0.5)],
    });
    let html = goodput_render::html_report(&doc, "cap.json");
    offline(&html);
    well_formed(&html);
    assert_eq!(chart_points(&html, "chart-goodput-rate"), vec![3, 3]);
    assert_eq!(chart_points(&html, "chart-attainment-rate"), vec![3, 3, 2]);
    assert_eq!(chart_points(&html, "chart-p99-throughput"), vec![3, 3, 3]);
    assert_eq!(chart_points(&html, "chart-cdf-ttft-runs").len(), 3);
    for i in 0..3 {
        assert!(chart_points(&html, &format!("chart-cdf-tpot-r{i}"))[0] > 0);
        assert!(html.contains(&format!("id=\"run-{i}\"")));
    }
}
