//! Checks of a self-contained HTML report: every chart drawn with points, nothing loaded from
//! anywhere, and (when Debian's `chromium` is installed; required with
//! GOODPUT_REQUIRE_CHROMIUM=1) the page opened in headless Chromium.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{temp_dir, wait_with_deadline};

/// The charts every run's section has (single-run documents: no suffix).
pub const RUN_CHARTS: [&str; 17] = [
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
pub fn chart_points(html: &str, id: &str) -> Vec<usize> {
    let start = html.find(&format!("<svg class=\"chart\" id=\"{id}\"")).unwrap_or_else(|| panic!("chart {id} missing"));
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.match_indices("data-points=\"")
        .map(|(i, m)| svg[i + m.len()..].split('"').next().unwrap().parse().unwrap())
        .collect()
}

/// Nothing in the page loads from anywhere: no script, link or image, no src, hrefs only to
/// anchors in the page.
pub fn assert_offline(html: &str) {
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

pub fn assert_charts(html: &str, ids: &[&str]) {
    for id in ids {
        let pts = chart_points(html, id);
        assert!(!pts.is_empty() && pts.iter().all(|&n| n > 0), "{id}: {pts:?}");
        assert_titled(html, id);
    }
}

/// Every dot and bar of chart `id` carries a `<title>` naming its series, x and y, and every
/// line a title and titled hover targets.
pub fn assert_titled(html: &str, id: &str) {
    let start = html.find(&format!("<svg class=\"chart\" id=\"{id}\"")).unwrap();
    let chart = &html[start..start + html[start..].find("</svg>").unwrap()];
    // the series' marks (the legend's swatches are not points)
    for group in chart.split("<g class=\"series\"").skip(1) {
        let svg = &group[..group.find("</g>").unwrap_or(group.len())];
        check_marks(id, svg);
    }
}

fn check_marks(id: &str, svg: &str) {
    for mark in ["<circle ", "<rect "] {
        for (i, _) in svg.match_indices(mark) {
            let el = &svg[i..];
            let end = el.find('>').unwrap();
            assert!(!el[..end].ends_with('/'), "{id}: an untitled mark {}", &el[..end + 1]);
            assert!(el[end + 1..].starts_with("<title>"), "{id}: an untitled mark {}", &el[..end + 1]);
            let title = &el[end + 8..end + 8 + el[end + 8..].find("</title>").unwrap()];
            assert!(title.contains(" = ") && title.contains(':'), "{id}: title {title:?}");
        }
    }
    for (i, _) in svg.match_indices("<polyline ") {
        assert!(svg[i..].split("</polyline>").next().unwrap().contains("<title>"), "{id}: an untitled line");
    }
}

/// The figure a headline cell shows (`data-metric`, `data-stat`), parsed.
pub fn headline_figure(html: &str, metric: &str, stat: &str) -> f64 {
    let key = format!("data-metric=\"{metric}\" data-stat=\"{stat}\">");
    let i = html.find(&key).unwrap_or_else(|| panic!("no headline figure {metric} {stat}"));
    let v = &html[i + key.len()..];
    v[..v.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap()].parse().unwrap()
}

/// Opens the report in headless Chromium when it is installed (required when
/// GOODPUT_REQUIRE_CHROMIUM=1): the rendered DOM has every chart with its points; the console
/// logged nothing (the page has no script, so any message is a refused load or an error); the
/// network log has no request of the page's (only the browser's own service hosts, which it
/// calls whatever it opens); a screenshot is saved under `target/` (and, for `readme-*` shots
/// with UPDATE_SCREENSHOTS=1, under docs/img/ for the README); at 1,280 px the page does not
/// scroll sideways.
pub fn browser_check(html: &Path, shot: &str, charts: &[&str]) {
    let Some(chromium) = chromium() else {
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
    assert_charts(&dom, charts);
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
        run_browser("shot", &[format!("--screenshot={}", png.display()), "--window-size=1280,2400".into()]);
    assert!(status.success() && png.is_file(), "no screenshot: {log}");
    // the README's screenshots are these, refreshed with UPDATE_SCREENSHOTS=1
    if shot.starts_with("readme-") && std::env::var("UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(&png, docs.join(shot)).unwrap();
    }
    let layout = measure(chromium, html, 1280);
    assert!(
        layout.scroll_width <= layout.client_width,
        "{shot}: the page scrolls sideways at 1,280 px ({} px wide in {} px)",
        layout.scroll_width,
        layout.client_width
    );
}

/// How a page lays out in headless Chromium at a window `width` px wide: its scrolling width
/// against the window's, and the milliseconds from navigation to its layout done.
pub struct Layout {
    pub scroll_width: f64,
    pub client_width: f64,
    pub layout_ms: f64,
}

/// Opens a copy of `html` with a measuring script appended (and the copy's CSP letting inline
/// script run: the page itself has none) and reads what it wrote into the DOM.
pub fn measure(chromium: &str, html: &Path, width: u32) -> Layout {
    let page = std::fs::read_to_string(html).unwrap();
    let probe = "<script>(function(){const e=document.documentElement;const w=e.scrollWidth;\
                 const p=document.createElement('pre');p.id='goodput-layout';\
                 p.textContent=w+' '+e.clientWidth+' '+performance.now();document.body.appendChild(p);})();</script>";
    let page = page
        .replacen("style-src 'unsafe-inline'\"", "style-src 'unsafe-inline'; script-src 'unsafe-inline'\"", 1)
        .replacen("</body>", &format!("{probe}</body>"), 1);
    let dir = temp_dir("chromium-layout");
    let copy = dir.join("page.html");
    std::fs::write(&copy, page).unwrap();
    let out = dir.join("dom.out");
    let child = std::process::Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--window-size={width},900"))
        .arg("--dump-dom")
        .arg(format!("file://{}", copy.display()))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let o = wait_with_deadline(child, Duration::from_secs(90));
    assert!(o.status.success(), "chromium failed measuring {}", html.display());
    let dom = std::fs::read_to_string(out).unwrap();
    let key = "id=\"goodput-layout\">";
    let i = dom.find(key).unwrap_or_else(|| panic!("the layout probe did not run in {}", html.display()));
    let v: Vec<f64> =
        dom[i + key.len()..].split('<').next().unwrap().split_whitespace().map(|x| x.parse().unwrap()).collect();
    Layout { scroll_width: v[0], client_width: v[1], layout_ms: v[2] }
}

/// Chromium's binary, when installed (required with GOODPUT_REQUIRE_CHROMIUM=1).
pub fn chromium() -> Option<&'static str> {
    let required = std::env::var("GOODPUT_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| on_path(b));
    assert!(found.is_some() || !required, "GOODPUT_REQUIRE_CHROMIUM=1 but no chromium on PATH");
    found
}

pub fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

/// The workspace's `target/` (where CI collects artifacts).
pub fn target_dir() -> PathBuf {
    let d = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    std::fs::create_dir_all(&d).unwrap();
    d
}
