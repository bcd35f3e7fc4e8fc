//! The console report of a run, a sweep and its stages, and the engine's statistics: the text
//! `goodput` prints, which the HTML report also folds in.

use goodput_metrics::{ClientVerdict, Distribution, SloVerdict, Summary};
use goodput_results::EngineStats;
use goodput_results::{EnginePlan, Run, Target};
use goodput_workload::{Arrivals, Load};
use std::fmt::Write;

pub(crate) fn cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x.abs() >= 10_000.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
        None => "-".into(),
    }
}

pub(crate) fn cell3(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.3}"))
}

pub(crate) fn row(out: &mut String, name: &str, d: &Distribution) {
    let _ = writeln!(
        out,
        "  {name:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>11}",
        cell(d.mean),
        cell(d.p50),
        cell(d.p90),
        cell(d.p95),
        cell(d.p99),
        d.n
    );
}

/// The line under the latency table naming the rows whose percentiles were read off a sketch
/// (too many samples to keep exactly), with the sketch's error bound; empty when all are exact.
pub(crate) fn sketch_note(rows: &[(&str, &Distribution)]) -> String {
    let sketched: Vec<(&str, f64)> =
        rows.iter().filter_map(|(name, d)| d.estimate.as_ref().map(|e| (*name, e.relative_error))).collect();
    if sketched.is_empty() {
        return String::new();
    }
    let bound = sketched.iter().map(|s| s.1).fold(0.0, f64::max);
    let names: Vec<&str> = sketched.iter().map(|s| s.0).collect();
    format!(
        "  estimated: {} (too many samples to keep): percentiles from a log-linear sketch, within {:.2}% of exact; n, mean, min and max are exact\n",
        names.join(", "),
        bound * 100.0
    )
}

/// Whether two means differ by more than 5%.
pub(crate) fn differs(a: &Distribution, b: &Distribution) -> bool {
    match (a.mean, b.mean) {
        (Some(x), Some(y)) if x > 0.0 => (y - x).abs() / x > 0.05,
        _ => false,
    }
}

/// The summary table and everything under it, for a measured run.
pub fn render(title: &str, s: &Summary) -> String {
    render_summary(title, s, false)
}

/// The console labels of token-level ITL and of chunk ITL (vLLM's "ITL"), and the note that
/// tells them apart.
pub const ITL_PER_TOKEN: &str = "ITL (per token)";
pub const ITL_PER_CHUNK: &str = "ITL (per chunk)";
pub const ITL_NOTE: &str = "  ITL (per chunk) is what vLLM reports as ITL: the gap between streamed chunks; ITL (per token) splits each gap over its tokens";

/// The summary table and everything under it; `simulated`: a `sim` run, whose client-only
/// lines (token-count check, schedule lag) mean nothing and are left out.
pub fn render_summary(title: &str, s: &Summary, simulated: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{title}");
    write_latency_table(&mut o, s);
    let _ = writeln!(o);
    write_totals(&mut o, s, simulated);
    write_client_check(&mut o, s, simulated);
    if let Some(g) = &s.slo {
        o.push_str(&render_slo(g));
    }
    if !s.warnings.is_empty() {
        let _ = writeln!(o, "\nwarnings:");
        for w in &s.warnings {
            let _ = writeln!(o, "  ! {}", w.message);
        }
    }
    o
}

/// Writes the latency table: one row per latency shown, and the notes under it.
fn write_latency_table(o: &mut String, s: &Summary) {
    let _ = writeln!(
        o,
        "  {:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>11}",
        "latency (ms)", "mean", "p50", "p90", "p95", "p99", "n"
    );
    let mut rows: Vec<(&str, &Distribution)> = vec![("TTFT", &s.ttft_ms)];
    if differs(&s.ttft_ms, &s.ttft_sched_ms) {
        rows.push(("TTFT (sched)", &s.ttft_sched_ms));
    }
    if let (Some(first), Some(later)) = (&s.ttft_first_turn_ms, &s.ttft_later_turns_ms) {
        rows.push(("TTFT turn 1", first));
        rows.push(("TTFT turns 2+", later));
    }
    // a reasoning model: the first answer token, and each phase's pace
    if let Some(r) = &s.reasoning {
        rows.push(("TTFO", &r.ttfo_ms));
    }
    rows.push(("TPOT", &s.tpot_ms));
    if let Some(r) = &s.reasoning {
        rows.push(("TPOT reasoning", &r.tpot_reasoning_ms));
        rows.push(("TPOT answer", &r.tpot_answer_ms));
    }
    rows.push((ITL_PER_TOKEN, &s.itl_ms));
    let chunks = s.chunk_itl_ms.n > 0;
    if chunks {
        rows.push((ITL_PER_CHUNK, &s.chunk_itl_ms));
    }
    rows.push(("E2E", &s.e2e_ms));
    if differs(&s.e2e_ms, &s.e2e_sched_ms) {
        rows.push(("E2E (sched)", &s.e2e_sched_ms));
    }
    if differs(&s.e2e_ms, &s.stream_close_ms) {
        rows.push(("stream close", &s.stream_close_ms));
    }
    for (name, d) in &rows {
        row(o, name, d);
    }
    if chunks {
        let _ = writeln!(o, "{ITL_NOTE}");
    }
    o.push_str(&sketch_note(&rows));
}

/// Writes the run's totals: requests, sends, duration, throughput, concurrency and token counts.
fn write_totals(o: &mut String, s: &Summary, simulated: bool) {
    let _ = writeln!(
        o,
        "  requests     {} attempted, {} completed, {} failed{}",
        s.attempted,
        s.completed,
        s.failed,
        if s.excluded > 0 { format!(" ({} outside the measurement window)", s.excluded) } else { String::new() }
    );
    if let Some(sends) = &s.sends {
        let _ = writeln!(o, "  sent         {}", sends.describe());
    }
    let _ = writeln!(o, "  duration     {:.2} s", s.duration_s);
    let _ = writeln!(
        o,
        "  throughput   {:.2} req/s · input {:.1} tok/s · output {:.1} tok/s · total {:.1} tok/s",
        s.request_throughput, s.input_throughput, s.output_throughput, s.total_throughput
    );
    let _ = writeln!(o, "  concurrency  {:.2} mean in flight", s.mean_concurrency);
    if let Some(w) = &s.steady {
        let _ = writeln!(
            o,
            "  steady       {:.2}–{:.2} s ({:.0}% of the run) at {:.0} in flight: {:.2} req/s · output {:.1} tok/s · TTFT \
             p50 {} p99 {} ms · TPOT p50 {} ms",
            w.start_ms / 1000.0,
            w.end_ms / 1000.0,
            w.share * 100.0,
            w.level,
            w.request_throughput,
            w.output_throughput,
            cell(w.ttft_ms.p50),
            cell(w.ttft_ms.p99),
            cell(w.tpot_ms.p50),
        );
    }
    let tc = &s.token_counts;
    let diff = |p: Option<f64>| p.map_or("n/a".to_string(), |p| format!("{p:+.1}%"));
    // the simulator's counts are its own: nothing to check them against
    let check = if simulated {
        String::new()
    } else {
        format!(
            " · our tokenizer vs server usage: input {}, output {}",
            diff(tc.input.diff_pct),
            diff(tc.output.diff_pct)
        )
    };
    let _ = writeln!(o, "  tokens       input {} · output {}{check}", s.input_tokens, s.output_tokens);
    if let Some(x) = &s.sessions {
        let by_call: Vec<String> = x
            .ttft_by_call
            .iter()
            .take(6)
            .map(|c| format!("{}: {}", c.call + 1, cell(c.mean)))
            .chain(
                x.ttft_by_call
                    .last()
                    .filter(|_| x.ttft_by_call.len() > 6)
                    .map(|c| format!("… {}: {}", c.call + 1, cell(c.mean))),
            )
            .collect();
        let subs =
            if x.with_sub_agents > 0 { format!(" ({} with sub-agents)", x.with_sub_agents) } else { String::new() };
        let _ = writeln!(
            o,
            "  sessions     {}{subs} · {} calls each on average · wall p50 {} s · the server had {:.0}% of their time, tools \
             or thinking {:.0}% · mean TTFT by call {} ms",
            x.sessions,
            cell(x.calls.mean),
            cell(x.wall_s.p50),
            x.server_share * 100.0,
            (1.0 - x.server_share) * 100.0,
            by_call.join(", ")
        );
    }
    if let Some(r) = &s.reasoning {
        let share = if r.reasoning_tokens + r.answer_tokens > 0 {
            r.reasoning_tokens as f64 / (r.reasoning_tokens + r.answer_tokens) as f64 * 100.0
        } else {
            0.0
        };
        let unanswered = if r.unanswered > 0 { format!(" · {} never answered", r.unanswered) } else { String::new() };
        let _ = writeln!(
            o,
            "  reasoning    {} requests reasoned · {} reasoning tokens ({share:.0}% of output), {} answer tokens · \
             {} reasoning tokens per request on average{unanswered}",
            r.requests,
            r.reasoning_tokens,
            r.answer_tokens,
            cell(r.reasoning_tokens_per_request.mean)
        );
    }
}

/// Writes the client's self-check (load check or schedule lag) with its verdict; nothing for a simulated run.
fn write_client_check(o: &mut String, s: &Summary, simulated: bool) {
    let verdict = match s.verdict {
        ClientVerdict::Ok => "ok",
        ClientVerdict::ClientBound => "CLIENT-BOUND",
    };
    // a measured run's runtime probe: how late the client read what was ready
    let lag = s.runtime_lag_ms.map_or(String::new(), |l| format!(" · runtime lag p99 {:.2} ms", l.p99));
    // waits the server asked for (`--retries`) are the server's: said beside the verdict
    let retried = s.sends.as_ref().and_then(|x| x.retry_note()).map_or(String::new(), |n| format!(" · {n}"));
    let verdict = format!("{verdict}{retried}");
    if simulated {
        // the simulator has no client: no lag, no self-check
    } else if let Some(c) = &s.load_check {
        let users = if c.users > 0 { c.users } else { c.requested_concurrency };
        let of = if users < c.requested_concurrency {
            format!("{users} users ({} asked for; one per request)", c.requested_concurrency)
        } else {
            format!("{users} users")
        };
        let retrying = c.mean_retrying.filter(|r| *r > 0.005).map_or(String::new(), |r| format!(", {r:.1} retrying"));
        let load = match (c.mean_in_flight, c.mean_thinking) {
            (Some(f), Some(t)) if t > 0.005 => format!(" · {f:.1} in flight{retrying} and {t:.1} thinking of {of}"),
            (Some(f), _) => format!(" · {f:.1} of {of} in flight{retrying}"),
            _ => format!(" · {of}"),
        };
        let _ = writeln!(
            o,
            "  client       worker gap p50 {} ms, p99 {} ms ({:.2}% of the users' time){load} · sent {:.2} req/s{lag} · {verdict}",
            cell3(s.worker_gap_ms.p50),
            cell3(s.worker_gap_ms.p99),
            c.gap_share * 100.0,
            s.achieved_rate.unwrap_or(0.0),
        );
    } else if let (Some(p50), Some(p99)) = (s.schedule_lag_ms.p50, s.schedule_lag_ms.p99) {
        let rates = match (s.offered_rate, s.achieved_rate) {
            (Some(off), Some(ach)) => format!(" · offered {off:.2} req/s, achieved {ach:.2} req/s"),
            (None, Some(ach)) => format!(" · achieved {ach:.2} req/s"),
            _ => String::new(),
        };
        let _ = writeln!(o, "  client       schedule lag p50 {p50:.3} ms, p99 {p99:.3} ms{rates}{lag} · {verdict}");
    }
}

/// The goodput block: attainment, goodput, what binds, percentile verdicts.
pub fn render_slo(g: &goodput_metrics::SloSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\ngoodput (SLO: {})", g.predicates.join(", "));
    let _ = writeln!(o, "  attainment   {:.1}% ({} of {} requests good)", g.attainment * 100.0, g.good, g.attempted);
    let _ = writeln!(o, "  goodput      {:.2} req/s · {:.1} output tok/s", g.request_goodput, g.token_goodput);
    if let (Some(sg), Some(sa), Some(sm)) = (g.smoothed_goodput, g.smoothed_attainment, g.smoothing) {
        let _ = writeln!(
            o,
            "  smoothed     {:.1} tok/s · attainment {:.1}% (T0 {} ms, pace {} ms/token){}",
            sg,
            sa * 100.0,
            sm.t0_ms,
            sm.tau_ms,
            g.fluidity_index.map_or(String::new(), |f| format!(" · fluidity {:.3}", f))
        );
    }
    let rates: Vec<String> =
        g.pass_rates.iter().map(|p| format!("{} {:.1}%", p.predicate, p.pass_rate * 100.0)).collect();
    let _ = writeln!(
        o,
        "  pass rates   {}{}",
        rates.join(" · "),
        g.binding.as_ref().map_or(String::new(), |b| format!(" · binding: {b}"))
    );
    for p in &g.percentiles {
        let ci =
            |x: Option<f64>| x.map_or("?".to_string(), |v| if v.is_finite() { format!("{v:.1}") } else { "∞".into() });
        let verdict = match p.verdict {
            SloVerdict::Met => "met",
            SloVerdict::Missed => "MISSED",
            SloVerdict::NotEnoughEvidence => "not enough evidence",
        };
        let _ = writeln!(
            o,
            "  {:<22} {} (value {} ms, 95% CI [{}, {}] over {} requests, {} over the limit)",
            p.predicate,
            verdict,
            cell(p.value),
            ci(p.ci[0]),
            ci(p.ci[1]),
            p.n,
            p.over
        );
    }
    o
}

/// One line per finished sweep stage.
pub fn stage_line(name: &str, s: &Summary) -> String {
    format!(
        "  stage {name:<18} {:>8.2} req/s · TTFT p50 {} ms p99 {} ms · TPOT p50 {} ms · {} ok, {} failed{}",
        s.request_throughput,
        cell(s.ttft_ms.p50),
        cell(s.ttft_ms.p99),
        cell(s.tpot_ms.p50),
        s.completed,
        s.failed,
        if s.verdict == ClientVerdict::ClientBound { " · CLIENT-BOUND" } else { "" }
    )
}

/// The sweep's stages side by side; with an SLO, each stage's attainment and goodput too.
pub fn render_sweep(runs: &[&Run]) -> String {
    let slo = runs.iter().find_map(|r| r.summary.slo.as_ref());
    let mut o = String::new();
    let _ = write!(
        o,
        "\nsweep{}\n  {:<18}{:>10}{:>10}{:>11}{:>11}{:>11}{:>11}{:>12}",
        slo.map_or(String::new(), |g| format!(" (SLO: {})", g.predicates.join(", "))),
        "stage",
        "offered",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "out tok/s"
    );
    if slo.is_some() {
        let _ = write!(o, "{:>8}{:>12}", "attain", "good req/s");
    }
    let _ = writeln!(o, "{:>8}", "client");
    for r in runs {
        let s = &r.summary;
        let _ = write!(
            o,
            "  {:<18}{:>10}{:>10.2}{:>11}{:>11}{:>11}{:>11}{:>12.1}",
            r.name.as_deref().unwrap_or("-"),
            s.offered_rate.map_or("-".into(), |x| format!("{x:.2}")),
            s.request_throughput,
            cell(s.ttft_ms.p50),
            cell(s.ttft_ms.p99),
            cell(s.tpot_ms.p50),
            cell(s.tpot_ms.p99),
            s.output_throughput,
        );
        if slo.is_some() {
            let (att, good) = match &s.slo {
                Some(g) => (format!("{:.1}%", g.attainment * 100.0), format!("{:.2}", g.request_goodput)),
                None => ("-".into(), "-".into()),
            };
            let _ = write!(o, "{att:>8}{good:>12}");
        }
        let _ = writeln!(
            o,
            "{:>8}",
            match s.verdict {
                ClientVerdict::Ok => "ok",
                ClientVerdict::ClientBound => "BOUND",
            }
        );
    }
    o
}

/// The engine block: what was modelled and how the batch and KV cache behaved.
pub fn render_engine(p: &EnginePlan, s: &EngineStats) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\nengine model   {}", p.describe());
    let steps = format!(
        "{} iterations ({} prefill, {} decode, {} mixed)",
        s.steps, s.prefill_steps, s.decode_steps, s.mixed_steps
    );
    if s.parts.is_empty() {
        let _ = writeln!(
            o,
            "  batch        mean running {:.1} (max {}) · mean waiting {:.1} · {steps}",
            s.mean_running, s.max_running, s.mean_waiting
        );
    } else {
        // a deployment: its means add up over its engines; a maximum is one engine's
        let n = s.parts.len();
        let _ = writeln!(
            o,
            "  batch        per engine: mean running {:.1} (max {} on one engine), mean waiting {:.1} · deployment of \
             {n} engines: mean running {:.1} in all, mean waiting {:.1} in all · {steps}",
            s.mean_running / n as f64,
            s.max_running,
            s.mean_waiting / n as f64,
            s.mean_running,
            s.mean_waiting
        );
    }
    let _ = writeln!(
        o,
        "  bound        {:.0}% of iterations compute-bound, {:.0}% memory-bound",
        s.compute_bound_share() * 100.0,
        (1.0 - s.compute_bound_share()) * 100.0 * f64::from(s.steps > 0)
    );
    let _ = writeln!(
        o,
        "  kv cache     utilization mean {:.1}%, max {:.1}% · {:.1}% of reserved slots hold tokens · preemptions {}{}{}",
        s.mean_kv_utilization * 100.0,
        s.max_kv_utilization * 100.0,
        s.mean_kv_used_share * 100.0,
        s.preemptions,
        s.kv_seq_capacity.map_or(String::new(), |n| format!(" · {n} sequences fit")),
        if s.rejected > 0 { format!(" · rejected {}", s.rejected) } else { String::new() }
    );
    if let Some(c) = &s.prefix_cache {
        let rate = if c.queried_blocks > 0 { c.hit_blocks as f64 / c.queried_blocks as f64 * 100.0 } else { 0.0 };
        let saved = c.hit_blocks * p.config.block_size as u64;
        let _ = writeln!(
            o,
            "  prefix cache hit rate {rate:.1}% ({} of {} blocks) · {saved} prefill tokens saved · {} evicted",
            c.hit_blocks, c.queried_blocks, c.evicted_blocks
        );
    }
    if let (Some(len), Some(rate)) = (s.mean_accepted_length(), s.acceptance_rate()) {
        let draft = if s.busy_s > 0.0 { s.spec_draft_s / s.busy_s * 100.0 } else { 0.0 };
        let _ = writeln!(
            o,
            "  speculative  {len:.2} tokens per verified step · {:.0}% of {} drafted tokens accepted · drafting {draft:.0}% of busy time",
            rate * 100.0,
            s.spec_draft_tokens
        );
    }
    if let Some(t) = &s.transfers {
        let _ = writeln!(
            o,
            "  kv transfer  {} hand-overs · mean {:.2} ms ({:.2} us per token) · link busy {:.0}%{}",
            t.transfers,
            t.mean_s * 1e3,
            t.per_token_s * 1e6,
            t.link_utilization * 100.0,
            if t.append_prefills > 0 { format!(" · {} append-prefills", t.append_prefills) } else { String::new() }
        );
    }
    for part in &s.parts {
        let _ = writeln!(
            o,
            "  {:<12} busy {:.0}% · mean running {:.1} (max {}) · {} iterations · kv mean {:.1}%",
            part.role.as_deref().unwrap_or("engine"),
            part.utilization.unwrap_or(0.0) * 100.0,
            part.mean_running,
            part.max_running,
            part.steps,
            part.mean_kv_utilization * 100.0
        );
    }
    if s.late_steps > 0 {
        let _ = writeln!(
            o,
            "  ! the embedded engine started {} iterations more than 5 ms late (host CPU busy): its timing is less exact",
            s.late_steps
        );
    }
    o
}

/// A whole run: its title, the table and everything under it, and the engine block.
pub fn render_run(command: &str, run: &Run) -> String {
    let mut o = render_summary(&title(command, run), &run.summary, matches!(run.target, Target::Sim { .. }));
    if let (Some(e), Some(stats)) = (run.target.engine(), &run.engine_stats) {
        o.push_str(&render_engine(e, stats));
    }
    if let Some(m) = &run.server_metrics {
        let _ = writeln!(o, "\n{}", m.line());
    }
    o
}

/// `goodput bench · embedded engine · model … · completions · concurrency 16 · 100 requests`.
pub fn title(command: &str, run: &Run) -> String {
    let load = run.load.as_ref().unwrap_or(&run.plan.load.load);
    let model = run.target.model().unwrap_or("?");
    match &run.target {
        Target::Sim { .. } => format!(
            "goodput {command} · {model} · {} · {} requests in {:.1} s of virtual time{}",
            describe(load),
            run.record_count(),
            run.virtual_end_s.unwrap_or(run.summary.window.end_ms / 1000.0),
            run.elapsed_s.map_or(String::new(), |s| format!(" ({s:.2} s to simulate)"))
        ),
        _ => {
            let api = run.plan.api.map_or(String::new(), |a| format!(" · {}", a.name()));
            let bounds = match (run.plan.load.requests, run.plan.load.duration) {
                (Some(n), Some(d)) => format!(" · {n} requests or {:.0} s", d.as_secs_f64()),
                (Some(n), None) => format!(" · {n} requests"),
                (None, Some(d)) => format!(" · {:.0} s", d.as_secs_f64()),
                (None, None) => String::new(),
            };
            format!("goodput {command} · {} · model {model}{api} · {}{bounds}", run.target.label(), describe(load))
        }
    }
}

/// A short description of a load.
pub fn describe(load: &Load) -> String {
    match load {
        Load::Closed { concurrency: 1, .. } => "synchronous".into(),
        Load::Closed { concurrency, think } if think.is_zero() => format!("concurrency {concurrency}"),
        Load::Closed { concurrency, think } => format!("concurrency {concurrency}, think {think}"),
        Load::Open { arrivals, max_concurrency } => {
            let a = match arrivals {
                Arrivals::Constant { rate } => format!("constant {rate:.2} req/s"),
                Arrivals::Poisson { rate } => format!("poisson {rate} req/s"),
                Arrivals::Gamma { rate, burstiness } => format!("gamma {rate} req/s, burstiness {burstiness}"),
                Arrivals::Ramp { from, to, over_s } => format!("ramp {from}→{to} req/s over {over_s:.0} s"),
                Arrivals::AllAtOnce => "throughput (all at once)".into(),
                Arrivals::Replay { time_scale } => format!("replay ×{time_scale}"),
            };
            match max_concurrency {
                Some(c) => format!("{a}, at most {c} in flight"),
                None => a,
            }
        }
    }
}
