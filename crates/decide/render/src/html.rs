//! The HTML report of a result document: one self-contained file that works offline. It loads
//! nothing (no script, font, stylesheet or image from anywhere; a Content-Security-Policy says
//! so to the browser), its CSS is inline with print styles, and every chart is inline SVG
//! ([`crate::svg`]) drawn from downsampled points while every statistic in its text comes from
//! the document's summaries, which were computed from every sample.
//!
//! Sections: the document (tool, when), a plan's ranking and cost-vs-latency chart, a capacity
//! search's or a sweep's curve and charts, distributions across runs, then each run: its console
//! report (latency table, throughputs, the client's self-check, SLO verdicts, warnings, engine
//! statistics), SLO verdicts with their confidence intervals, token-count provenance, its
//! distributions, the run over time, ITL by token position, the engine over time, and its plan.

use std::fmt::Write;

use goodput_metrics::{SloVerdict, TokenSource};
use goodput_results::{ResultDoc, Run};

use crate::charts::{self, METRICS};
use crate::page::{charts_block, open_page, pre};
use crate::planning::opt;
use crate::svg::{Chart, MAX_POINTS, esc};

/// The whole report; `source` names the document (its file name) in the title.
pub fn html_report(doc: &ResultDoc, source: &str) -> String {
    let mut o = String::with_capacity(256 * 1024);
    let title = format!("goodput report: {source}");
    open_page(&mut o, &title);
    let _ = writeln!(
        o,
        "<p class=\"meta\">written by {} {} at {} · schema version {} · {} run{}{}</p>",
        esc(&doc.tool.name),
        esc(&doc.tool.version),
        esc(&doc.created_at),
        doc.schema_version,
        doc.runs.len(),
        if doc.runs.len() == 1 { "" } else { "s" },
        if doc.interrupted { " · <span class=\"warn\">interrupted</span>" } else { "" }
    );
    if doc.runs.len() > 1 {
        o.push_str("<nav>");
        for (i, r) in doc.runs.iter().enumerate() {
            let _ = write!(o, "<a href=\"#run-{i}\">{}</a>", esc(&run_name(i, r)));
        }
        o.push_str("</nav>\n");
    }
    if let Some(p) = &doc.plan {
        o.push_str("<section id=\"plan\"><h2>Plan</h2>");
        plan_table(&mut o, p);
        let mut plan_charts = vec![charts::plan_chart(p)];
        plan_charts.extend(charts::plan_curves(p));
        charts_block(&mut o, &plan_charts);
        o.push_str("<details><summary>the console plan</summary>");
        pre(&mut o, &crate::render_plan(p));
        o.push_str("</details></section>\n");
    }
    if let Some(v) = &doc.validation {
        o.push_str("<section id=\"validation\"><h2>Twin validation: predicted vs measured</h2>");
        validation_table(&mut o, v);
        charts_block(&mut o, &crate::twin::validation_charts(v));
        o.push_str("<details><summary>the console validation</summary>");
        pre(&mut o, &crate::twin::render_validation(v));
        o.push_str("</details></section>\n");
    }
    if let Some(c) = &doc.capacity {
        o.push_str("<section id=\"capacity\"><h2>Capacity</h2>");
        capacity_headline(&mut o, c);
        charts_block(&mut o, &charts::rate_charts(&doc.runs, Some(c)));
        o.push_str("<details><summary>the console capacity search</summary>");
        pre(&mut o, &crate::render_capacity(c));
        o.push_str("</details></section>\n");
    } else if doc.runs.len() > 1 {
        o.push_str("<section id=\"sweep\"><h2>Runs by rate</h2>");
        sweep_table(&mut o, &doc.runs);
        charts_block(&mut o, &charts::rate_charts(&doc.runs, None));
        o.push_str("<details><summary>the console sweep</summary>");
        pre(&mut o, &crate::console::render_sweep(&doc.runs.iter().collect::<Vec<_>>()));
        o.push_str("</details></section>\n");
    }
    if doc.runs.len() > 1 {
        o.push_str("<section id=\"across\"><h2>Distributions across runs</h2>");
        let cs: Vec<Chart> = METRICS
            .iter()
            .map(|(id, label)| {
                let runs: Vec<(String, Vec<f64>)> =
                    doc.runs.iter().enumerate().map(|(i, r)| (run_name(i, r), charts::samples(r, id))).collect();
                let mut c = charts::cdf_chart(id, label, &runs);
                c.id = format!("chart-cdf-{id}-runs");
                c
            })
            .collect();
        charts_block(&mut o, &cs);
        o.push_str("</section>\n");
    }
    // several runs share the point budget of their detailed charts
    let budget = if doc.runs.len() > 4 { MAX_POINTS / 4 } else { MAX_POINTS };
    for (i, run) in doc.runs.iter().enumerate() {
        let suffix = if doc.runs.len() > 1 { format!("-r{i}") } else { String::new() };
        run_section(&mut o, i, run, &suffix, budget);
    }
    o.push_str("</body></html>\n");
    o
}

fn run_name(i: usize, r: &Run) -> String {
    r.name.clone().unwrap_or_else(|| format!("run {i}"))
}

fn run_section(o: &mut String, i: usize, run: &Run, suffix: &str, budget: usize) {
    let _ = write!(o, "<section class=\"run\" id=\"run-{i}\"><h2>{}</h2>", esc(&crate::console::title("report", run)));
    let _ = writeln!(
        o,
        "<p class=\"meta\">target {} · model {} · started {} · {}{}</p>",
        esc(&run.target.label()),
        esc(run.target.model().unwrap_or("?")),
        esc(run.started_at.as_deref().unwrap_or("?")),
        run.elapsed_s.map_or(String::new(), |s| format!("took {s:.2} s")),
        run.plan.engine_plan().map_or(String::new(), |e| format!(" · engine {}", esc(&e.describe())))
    );
    headline(o, run);
    sends_table(o, run);
    slo_table(o, run);
    provenance(o, run);

    o.push_str("<h3>Distributions</h3>");
    let mut cs = Vec::new();
    let mut hs = Vec::new();
    for (id, label) in METRICS {
        let s = charts::samples(run, id);
        let mut h = charts::histogram_chart(id, label, &s);
        h.id.push_str(suffix);
        hs.push(h);
        let mut c = charts::cdf_chart(id, label, &[(label.to_string(), s)]);
        for series in &mut c.series {
            series.points = crate::svg::downsample(&series.points, budget);
        }
        c.id.push_str(suffix);
        cs.push(c);
    }
    charts_block(o, &cs);
    charts_block(o, &hs);
    o.push_str("<h3>Over time</h3>");
    let mut t = charts::time_charts(run, suffix);
    t.push(charts::itl_position_chart(run, suffix));
    t.extend(charts::call_chart(run, suffix));
    charts_block(o, &t);
    let e = charts::engine_charts(run, suffix);
    if !e.is_empty() {
        o.push_str("<h3>Engine over time</h3>");
        charts_block(o, &e);
    }
    let sc = crate::server_charts::server_charts(run, suffix);
    if let Some(m) = run.server_metrics.as_ref().filter(|_| !sc.is_empty()) {
        let _ = write!(o, "<h3>Server metrics over time</h3><p class=\"meta\">{}</p>", esc(&m.line()));
        charts_block(o, &sc);
    }
    o.push_str("<details><summary>the console report</summary>");
    pre(o, &crate::console::render_run("report", run));
    o.push_str("</details>");
    o.push_str("<details><summary>the run's plan (as data)</summary>");
    pre(o, &serde_json::to_string_pretty(&run.plan).unwrap_or_default());
    o.push_str("</details></section>\n");
}

/// The run's answer first: its verdict, SLO attainment and goodput, throughput, and TTFT / TPOT /
/// ITL / E2E at p50 / p90 / p99 with their 95% intervals, as tables (each figure carries
/// `data-metric` and `data-stat`, so a test can hold it against the document); then the
/// warnings with their codes.
fn headline(o: &mut String, run: &Run) {
    let s = &run.summary;
    let (verdict, class) = if run.stop == goodput_metrics::StopReason::Saturated {
        ("saturated: stopped early, requests piled up".to_string(), "missed")
    } else if s.verdict == goodput_metrics::ClientVerdict::ClientBound {
        ("client-bound: the load generator fell behind; the figures measure the client too".to_string(), "missed")
    } else if s.failed > 0 {
        (format!("{} of {} requests failed", s.failed, s.attempted), "missed")
    } else {
        ("ok".to_string(), "met")
    };
    // waits the server asked for are the server's, said beside the verdict
    let verdict = match s.sends.as_ref().and_then(|x| x.retry_note()) {
        Some(note) => format!("{verdict} · {note}"),
        None => verdict,
    };
    let _ = write!(
        o,
        "<div class=\"headline\"><p class=\"verdict\">verdict: <span class=\"{class}\" data-metric=\"verdict\">{}</span> \
         · {} completed of {} attempted in {:.2} s</p>",
        esc(&verdict),
        s.completed,
        s.attempted,
        s.duration_s
    );
    o.push_str("<div class=\"tables\">");
    if let Some(slo) = &s.slo {
        let _ = write!(
            o,
            "<table class=\"figures\"><caption>SLO {}</caption><tr><th class=\"l\">attainment</th>\
             <td data-metric=\"slo\" data-stat=\"attainment\">{:.1}%</td></tr><tr><th class=\"l\">goodput, req/s</th>\
             <td data-metric=\"slo\" data-stat=\"request_goodput\">{:.2}</td></tr><tr><th class=\"l\">goodput, tok/s</th>\
             <td data-metric=\"slo\" data-stat=\"token_goodput\">{:.1}</td></tr></table>",
            esc(&slo.predicates.join(", ")),
            slo.attainment * 100.0,
            slo.request_goodput,
            slo.token_goodput
        );
    }
    let _ = write!(
        o,
        "<table class=\"figures\"><caption>throughput</caption><tr><th class=\"l\">requests/s</th>\
         <td data-metric=\"request_throughput\" data-stat=\"value\">{:.2}</td></tr><tr><th class=\"l\">output tokens/s</th>\
         <td data-metric=\"output_throughput\" data-stat=\"value\">{:.1}</td></tr><tr><th class=\"l\">total tokens/s</th>\
         <td data-metric=\"total_throughput\" data-stat=\"value\">{:.1}</td></tr></table>",
        s.request_throughput, s.output_throughput, s.total_throughput
    );
    if let Some(w) = &s.steady {
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
        let _ = write!(
            o,
            "<table class=\"figures\"><caption>steady state, {:.2}–{:.2} s ({:.0}% of the run, {:.0} in flight)</caption>\
             <tr><th class=\"l\">requests/s</th><td data-metric=\"steady\" data-stat=\"request_throughput\">{:.2}</td></tr>\
             <tr><th class=\"l\">output tokens/s</th><td data-metric=\"steady\" data-stat=\"output_throughput\">{:.1}</td></tr>\
             <tr><th class=\"l\">TTFT p50 / p99, ms</th><td data-metric=\"steady\" data-stat=\"ttft\">{} / {}</td></tr>\
             <tr><th class=\"l\">TPOT p50, ms</th><td data-metric=\"steady\" data-stat=\"tpot\">{}</td></tr></table>",
            w.start_ms / 1000.0,
            w.end_ms / 1000.0,
            w.share * 100.0,
            w.level,
            w.request_throughput,
            w.output_throughput,
            f(w.ttft_ms.p50),
            f(w.ttft_ms.p99),
            f(w.tpot_ms.p50),
        );
    }
    o.push_str(
        "<table class=\"figures latency\"><caption>latency, ms (95% interval)</caption><tr><th class=\"l\">metric</th>\
         <th>p50</th><th>p90</th><th>p99</th><th>mean</th><th>n</th></tr>",
    );
    let mut rows = vec![("ttft_ms", "TTFT", &s.ttft_ms)];
    // a reasoning model: the first answer token, and each phase's pace
    if let Some(r) = &s.reasoning {
        rows.push(("ttfo_ms", "TTFO (first answer token)", &r.ttfo_ms));
    }
    rows.push(("tpot_ms", "TPOT", &s.tpot_ms));
    if let Some(r) = &s.reasoning {
        rows.push(("tpot_reasoning_ms", "TPOT, reasoning", &r.tpot_reasoning_ms));
        rows.push(("tpot_answer_ms", "TPOT, answer", &r.tpot_answer_ms));
    }
    rows.extend([("itl_ms", "ITL", &s.itl_ms), ("e2e_ms", "E2E", &s.e2e_ms)]);
    for (id, label, d) in rows {
        let cell = |stat: &str, v: Option<f64>, ci: Option<[Option<f64>; 2]>| {
            let v = v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
            let ci = ci.map_or(String::new(), |[lo, hi]| {
                let f = |x: Option<f64>| x.map_or_else(|| "?".to_string(), |x| format!("{x:.2}"));
                format!("<br/><small>{}–{}</small>", f(lo), f(hi))
            });
            format!("<td data-metric=\"{id}\" data-stat=\"{stat}\">{v}{ci}</td>")
        };
        let _ = write!(
            o,
            "<tr><th class=\"l\">{label}</th>{}{}{}{}<td>{}</td></tr>",
            cell("p50", d.p50, d.p50_ci),
            cell("p90", d.p90, d.p90_ci),
            cell("p99", d.p99, d.p99_ci),
            cell("mean", d.mean, None),
            d.n
        );
    }
    o.push_str("</table></div>");
    if !s.warnings.is_empty() {
        o.push_str("<ul class=\"warnings\">");
        for w in &s.warnings {
            let _ = write!(o, "<li><code>{}</code> {}</li>", w.code.as_str(), esc(&w.message));
        }
        o.push_str("</ul>");
    }
    o.push_str("</div>\n");
}

/// A capacity search's answer first: the rate and its resolution, per GPU, the SLO and target,
/// then every step as a row.
fn capacity_headline(o: &mut String, c: &goodput_results::CapacityReport) {
    let _ = write!(
        o,
        "<div class=\"headline\"><p class=\"verdict\">{}</p><div class=\"tables\"><table class=\"figures\">\
         <tr><th class=\"l\">capacity, req/s</th><td data-metric=\"capacity\" data-stat=\"rate\">{}</td></tr>\
         <tr><th class=\"l\">± req/s</th><td data-metric=\"capacity\" data-stat=\"uncertainty\">{}</td></tr>\
         <tr><th class=\"l\">per GPU, req/s</th><td data-metric=\"capacity\" data-stat=\"per_gpu\">{}</td></tr>\
         <tr><th class=\"l\">SLO</th><td>{}</td></tr><tr><th class=\"l\">attainment target</th><td>{:.1}%</td></tr>\
         </table>",
        esc(&c.answer),
        opt(c.rate, 3),
        opt(c.uncertainty, 3),
        opt(c.per_gpu, 3),
        esc(&c.slo),
        c.attainment_target * 100.0
    );
    o.push_str(
        "<table class=\"figures\"><caption>steps of the search</caption><tr><th>rate, req/s</th><th>attainment</th>\
         <th>p99 TTFT, ms</th><th>p99 TPOT, ms</th><th>queue</th><th>step, s</th></tr>",
    );
    for p in &c.curve {
        let _ = write!(
            o,
            "<tr><td data-metric=\"step\" data-stat=\"rate\">{:.3}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.rate,
            p.attainment * 100.0,
            opt(p.ttft_p99_ms, 1),
            opt(p.tpot_p99_ms, 2),
            esc(p.queue_trend.as_deref().unwrap_or(if p.saturated { "saturated" } else { "-" })),
            opt(p.step_s, 0)
        );
    }
    o.push_str("</table></div></div>\n");
}

/// A sweep's runs as a table: offered and served rate, throughput, p99 latencies, attainment.
fn sweep_table(o: &mut String, runs: &[Run]) {
    o.push_str(
        "<div class=\"headline\"><table class=\"figures\"><tr><th class=\"l\">run</th><th>offered, req/s</th>\
         <th>served, req/s</th><th>output tok/s</th><th>p99 TTFT, ms</th><th>p99 TPOT, ms</th><th>SLO attainment</th></tr>",
    );
    for (i, r) in runs.iter().enumerate() {
        let s = &r.summary;
        let label = r.name.clone().unwrap_or_else(|| format!("run {}", i + 1));
        let _ = write!(
            o,
            "<tr data-run=\"{i}\"><td class=\"l\">{}</td><td>{}</td><td data-metric=\"request_throughput\" data-stat=\"value\">{:.3}</td>\
             <td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&label),
            opt(s.offered_rate, 2),
            s.request_throughput,
            s.output_throughput,
            opt(s.ttft_ms.p99, 1),
            opt(s.tpot_ms.p99, 2),
            s.slo.as_ref().map_or("-".to_string(), |g| format!("{:.1}%", g.attainment * 100.0))
        );
    }
    o.push_str("</table></div>\n");
}

/// Each held-out run's figures, measured and predicted, with their ratio and verdict.
fn validation_table(o: &mut String, v: &goodput_results::validation::TwinValidation) {
    let _ = write!(
        o,
        "<div class=\"headline\"><p class=\"meta\">twin {} · {} held-out runs</p><table class=\"figures\">\
         <tr><th class=\"l\">run</th><th class=\"l\">load</th><th class=\"l\">figure</th><th>measured</th>\
         <th>predicted</th><th>predicted ÷ measured</th><th class=\"l\">verdict</th></tr>",
        esc(&v.twin),
        v.runs.len()
    );
    for (i, r) in v.runs.iter().enumerate() {
        for m in &r.metrics {
            let class = if m.verdict == goodput_results::validation::Verdict::Within10 { "met" } else { "missed" };
            let _ = write!(
                o,
                "<tr data-run=\"{i}\"><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{} {}</td>\
                 <td data-metric=\"{}\" data-stat=\"{}-measured\">{:.3}</td><td data-metric=\"{}\" data-stat=\"{}-predicted\">{:.3}</td>\
                 <td>{}</td><td class=\"l {class}\">{}</td></tr>",
                esc(&r.file),
                esc(&r.load),
                esc(&m.metric),
                esc(&m.stat),
                esc(&m.metric),
                esc(&m.stat),
                m.measured,
                esc(&m.metric),
                esc(&m.stat),
                m.predicted,
                m.ratio.map_or("-".to_string(), |x| format!("×{x:.3}")),
                m.verdict.as_str()
            );
        }
    }
    o.push_str("</table></div>\n");
}

/// The plan's ranking as a table: units in the headers, the SLO predicate that binds, costs per
/// million output and total tokens, tokens per second per GPU, and each row's reason.
fn plan_table(o: &mut String, p: &goodput_results::planning::PlanReport) {
    let _ = write!(
        o,
        "<p class=\"meta\">{} · {} · SLO {} for {:.0}% of requests · {} candidates; ★ on the Pareto front of cost \
         against p99 latency</p>",
        esc(&p.model),
        esc(&p.workload),
        esc(&p.slo),
        p.attainment_target * 100.0,
        p.candidates.len()
    );
    o.push_str(
        "<table class=\"plan\"><tr><th>#</th><th class=\"l\">deployment</th><th>GPUs</th><th>req/s</th><th>req/s per GPU</th>\
         <th>output tok/s</th><th>output tok/s per GPU</th><th>p99 TTFT, ms</th><th>p99 TPOT, ms</th>\
         <th class=\"l\">binding SLO</th><th>$ per GPU-hour</th><th>$ per M output tokens</th>\
         <th>$ per M tokens in+out</th><th>prompt tokens cached</th><th class=\"l\">why</th></tr>",
    );
    for (i, c) in p.candidates.iter().enumerate() {
        let rank = if c.capacity.is_some() { (i + 1).to_string() } else { "-".into() };
        let star = if p.pareto.contains(&i) { "★ " } else { "" };
        let [rps, rps_gpu, tok, tok_gpu, ttft, tpot, price, out, all, cached] = crate::planning::figures(c);
        let _ = write!(
            o,
            "<tr data-candidate=\"{i}\"><td>{rank}</td><td class=\"l\">{star}{}</td><td>{}</td>\
             <td data-field=\"capacity\">{rps}</td><td>{rps_gpu}</td><td data-field=\"output_tokens_per_s\">{tok}</td>\
             <td>{tok_gpu}</td><td>{ttft}</td><td>{tpot}</td><td class=\"l\">{}</td><td>{price}</td>\
             <td data-field=\"cost_per_m_output\">{out}</td><td data-field=\"cost_per_m_total\">{all}</td>\
             <td>{cached}</td><td class=\"l\">{}</td></tr>",
            esc(&crate::planning::name(c)),
            c.gpus,
            esc(c.binding.as_deref().unwrap_or("-")),
            esc(&c.reason)
        );
    }
    o.push_str("</table>\n");
}

/// What the server was sent (measured runs): POSTs by cause.
fn sends_table(o: &mut String, run: &Run) {
    let Some(x) = &run.summary.sends else { return };
    let c = x.connections.unwrap_or_default();
    o.push_str("<h3 id=\"sends\">What the server was sent</h3><table class=\"sends\"><tr><th class=\"l\">cause</th><th>POSTs</th></tr>");
    let mut row = |what: String, n: u64| {
        let _ = write!(o, "<tr><td class=\"l\">{}</td><td>{n}</td></tr>", esc(&what));
    };
    row("requests (first sends)".into(), x.requests);
    for (class, n) in &x.retries_by_class {
        row(format!("--retries after {class}"), *n);
    }
    for (n, how) in [
        (c.unwritten, "never written: the client saw the close first"),
        (c.closed_before_write, "the server had closed the connection before the write"),
        (c.reset, "the server's kernel reset the request"),
    ] {
        if n > 0 {
            row(format!("resent on a fresh connection ({how})"), n);
        }
    }
    let shown = c.unwritten + c.closed_before_write + c.reset;
    if x.stale_resends > shown {
        row("resent on a fresh connection (reused connection given up)".into(), x.stale_resends - shown);
    }
    let _ = write!(o, "<tr><th class=\"l\">total</th><th>{}</th></tr></table>", x.posts);
    if x.retried > 0 {
        let _ = write!(
            o,
            "<p class=\"meta\">{} requests waited {:.2} s in all between attempts for the server's Retry-After or \
             backoff: the server's time, not counted against the client</p>",
            x.retried,
            x.retry_wait_ms / 1000.0
        );
    }
    if let Some(ms) = c.keep_alive_off_ms {
        let _ = write!(
            o,
            "<p class=\"meta\">keep-alive off from {:.2} s: the server closes connections after its responses</p>",
            ms / 1000.0
        );
    }
    o.push('\n');
}

/// Each percentile predicate's verdict with its 95% confidence interval.
fn slo_table(o: &mut String, run: &Run) {
    let Some(g) = &run.summary.slo else { return };
    let _ = write!(
        o,
        "<h3>SLO</h3><p>{} · attainment {:.1}% ({} of {}) · goodput {:.2} req/s, {:.1} output tok/s{}</p>",
        esc(&g.predicates.join(", ")),
        g.attainment * 100.0,
        g.good,
        g.attempted,
        g.request_goodput,
        g.token_goodput,
        g.binding.as_ref().map_or(String::new(), |b| format!(" · binding: {}", esc(b)))
    );
    if g.percentiles.is_empty() {
        return;
    }
    o.push_str("<table><tr><th class=\"l\">predicate</th><th>value (ms)</th><th>95% CI</th><th>n</th><th>over</th><th class=\"l\">verdict</th></tr>");
    let f = |x: Option<f64>| match x {
        Some(v) if v.is_finite() => format!("{v:.1}"),
        Some(_) => "∞".into(),
        None => "?".into(),
    };
    for p in &g.percentiles {
        let (class, word) = match p.verdict {
            SloVerdict::Met => ("met", "met"),
            SloVerdict::Missed => ("missed", "missed"),
            SloVerdict::NotEnoughEvidence => ("unsure", "not enough evidence"),
        };
        let _ = write!(
            o,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>[{}, {}]</td><td>{}</td><td>{}</td><td class=\"l {class}\">{word}</td></tr>",
            esc(&p.predicate),
            f(p.value),
            f(p.ci[0]),
            f(p.ci[1]),
            p.n,
            p.over
        );
    }
    o.push_str("</table>\n");
}

/// Where the token counts came from: per source, how many requests, and the tokenizer.
fn provenance(o: &mut String, run: &Run) {
    let count = |get: &dyn Fn(&goodput_metrics::RequestRecord) -> Option<TokenSource>| {
        let mut c = [0u64; 3];
        for r in &run.requests {
            c[match get(r) {
                Some(TokenSource::Server) => 0,
                Some(TokenSource::Tokenizer) => 1,
                None => 2,
            }] += 1;
        }
        c
    };
    let rows = [
        ("prompt length", count(&|r| r.input_tokens_source)),
        ("output length", count(&|r| r.output_tokens_source)),
        ("tokens per event", count(&|r| r.event_tokens_source)),
    ];
    let tc = &run.summary.token_counts;
    let diff = |p: Option<f64>| p.map_or("n/a".to_string(), |p| format!("{p:+.1}%"));
    let _ = write!(
        o,
        "<h3>Token counts</h3><p>tokenizer {} · ours vs the server's: input {}, output {} · {} requests without our counts</p>\
         <table><tr><th class=\"l\">count</th><th>server</th><th>our tokenizer</th><th>none</th></tr>",
        esc(&run.plan.workload.tokenizer),
        diff(tc.input.diff_pct),
        diff(tc.output.diff_pct),
        run.summary.counts_skipped
    );
    for (name, c) in rows {
        let _ = write!(o, "<tr><td class=\"l\">{name}</td><td>{}</td><td>{}</td><td>{}</td></tr>", c[0], c[1], c[2]);
    }
    o.push_str("</table>\n");
}
