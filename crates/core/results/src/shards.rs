//! Sharded runs: the synchronized start (`--start-at`) and `goodput merge` of shard documents.
//!
//! Shards (`--shard I/N`, see `goodput_workload::shard`) run one plan and seed and each send a
//! deterministic slice of one global schedule. Their records already carry global ids, global
//! user and session ids and their shard, so merging them is a union on one clock:
//!
//! - every document must be a shard (its plan has `load.shard`), all of one `N`, each index once,
//!   of one plan and seed (the plans are compared with their shard, start clock reading and
//!   output file removed); missing indices are refused unless partial merges are allowed, which
//!   then says what is missing;
//! - records are put on one clock by each run's absolute start (`started_at`; a simulation's
//!   clock is virtual and shared as it is), and every distribution is recomputed from all of
//!   them (throughput over the union window);
//! - each shard's warnings are kept, prefixed `shard I/N: `; the merged run warns when the
//!   shards' actual starts differ by more than 1 ms.
//!
//! [`StartAt`] records a shard's synchronized start: the requested instant and what this
//! process's clocks said when its wait ended (see docs/metrics.md, Shards).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use goodput_metrics::{RequestRecord, StopReason, Warning, WarningCode};

use crate::{ResultDoc, Run, RunPlan, Target, format_rfc3339_ns, parse_rfc3339_ns, summaries, summary_options};

/// Shards whose actual starts differ by more than this are warned about.
pub const START_SPREAD_WARN_MS: f64 = 1.0;
/// A start time further in the past than this is refused.
pub const START_PAST_TOLERANCE: Duration = Duration::from_secs(5);
/// A start time further in the future than this is refused.
pub const START_FUTURE_LIMIT: Duration = Duration::from_secs(24 * 3600);

pub use crate::plan::{ClockReading, StartAt};

/// Why a start time was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartAtError {
    #[error("expected an RFC 3339 time (2026-01-02T03:04:05Z, offsets allowed) or Unix milliseconds, got {0:?}")]
    Syntax(String),
    #[error("{0} is {1:.1} s in the past (start times up to 5 s late are accepted)")]
    Past(String, f64),
    #[error("{0} is more than 24 h in the future")]
    Future(String),
}

/// Parses `--start-at`: RFC 3339 (`Z` or `±HH:MM`) or Unix milliseconds, into Unix ns.
pub fn parse_start_at(s: &str) -> Result<i128, StartAtError> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        let ms: i128 = t.parse().map_err(|_| StartAtError::Syntax(s.into()))?;
        return Ok(ms * 1_000_000);
    }
    if let Some(ns) = parse_rfc3339_ns(t) {
        return Ok(ns);
    }
    // an offset: ±HH:MM at the end
    if t.len() > 6 {
        let (base, off) = t.split_at(t.len() - 6);
        let b = off.as_bytes();
        if (b[0] == b'+' || b[0] == b'-') && b[3] == b':' {
            let hh: i128 = off[1..3].parse().map_err(|_| StartAtError::Syntax(s.into()))?;
            let mm: i128 = off[4..6].parse().map_err(|_| StartAtError::Syntax(s.into()))?;
            let ns = parse_rfc3339_ns(&format!("{base}Z")).ok_or_else(|| StartAtError::Syntax(s.into()))?;
            let shift = (hh * 3600 + mm * 60) * 1_000_000_000;
            return Ok(if b[0] == b'+' { ns - shift } else { ns + shift });
        }
    }
    Err(StartAtError::Syntax(s.into()))
}

/// Checks a start time (Unix ns) against `now_ns`: at most 5 s past, at most 24 h ahead.
pub fn check_start_at(s: &str, at_ns: i128, now_ns: i128) -> Result<(), StartAtError> {
    let ahead = at_ns - now_ns;
    if ahead < -(START_PAST_TOLERANCE.as_nanos() as i128) {
        return Err(StartAtError::Past(s.into(), -ahead as f64 / 1e9));
    }
    if ahead > START_FUTURE_LIMIT.as_nanos() as i128 {
        return Err(StartAtError::Future(s.into()));
    }
    Ok(())
}

fn wall_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

/// (wall − monotonic) over `reads` back-to-back paired reads against `base`: (the first, the
/// spread), ns.
fn paired_reads(base: (Instant, i128), reads: usize) -> (i128, i128) {
    let mut offsets = Vec::with_capacity(reads);
    for _ in 0..reads {
        let m = base.0.elapsed().as_nanos() as i128;
        let w = wall_ns() - base.1;
        offsets.push(w - m);
    }
    let lo = offsets.iter().copied().min().unwrap_or(0);
    let hi = offsets.iter().copied().max().unwrap_or(0);
    (offsets[0], hi - lo)
}

/// Waits until the wall-clock instant `at_ns` (Unix ns), sleeping on the monotonic clock for
/// the remaining time computed once now (then spinning the last 2 ms), and returns the clocks'
/// reading at the end.
pub fn wait_until(at_ns: i128) -> ClockReading {
    let base = (Instant::now(), wall_ns());
    let remaining = (at_ns - base.1).max(0) as u64;
    let deadline = base.0 + Duration::from_nanos(remaining);
    let spin = Duration::from_millis(2);
    if let Some(d) = deadline.checked_duration_since(Instant::now())
        && d > spin
    {
        std::thread::sleep(d - spin);
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
    let (drift, spread) = paired_reads(base, 8);
    let woke = base.1 + base.0.elapsed().as_nanos() as i128 + drift;
    ClockReading {
        woke_at: format_rfc3339_ns(woke),
        late_ms: (woke - at_ns) as f64 / 1e6,
        clock_offset_ms: drift as f64 / 1e6,
        clock_uncertainty_ms: spread as f64 / 1e6,
    }
}

/// A shard document to merge: its file name (for messages) and its contents.
pub struct ShardFile {
    pub name: String,
    pub doc: ResultDoc,
}

/// What `goodput merge` produced: the merged runs and what to say on stderr.
pub struct Merged {
    pub runs: Vec<Run>,
    /// Notes for stderr (what a partial merge is missing); also warnings in the merged runs.
    pub notes: Vec<String>,
}

/// Why shards could not be merged: a one-line reason naming the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct MergeRefused(pub String);

/// The plan shards must share: less their shard, their clock reading and their output files.
fn shared_plan(p: &RunPlan) -> RunPlan {
    let mut p = p.clone();
    p.load.shard = None;
    if let Some(s) = &mut p.load.start_at {
        s.clock = None;
    }
    p.output.out = None;
    p.load.export_schedule = None;
    p
}

/// Merges shard documents (see the module documentation).
pub fn merge_shards(files: &[ShardFile], allow_partial: bool) -> Result<Merged, MergeRefused> {
    let refuse = |m: String| Err(MergeRefused(m));
    let Some(first) = files.first() else { return refuse("no shard files given".into()) };
    let mut shards = Vec::with_capacity(files.len());
    for f in files {
        let Some(run) = f.doc.runs.first() else { return refuse(format!("{}: holds no runs", f.name)) };
        let Some(s) = run.plan.load.shard else {
            return refuse(format!("{}: not a shard (written without --shard I/N)", f.name));
        };
        if s.count == 0 || s.index >= s.count {
            return refuse(format!("{}: shard {s} is not a valid shard", f.name));
        }
        shards.push(s);
    }
    let (n, first_shard) = (shards[0].count, shards[0]);
    let base = shared_plan(&first.doc.runs[0].plan);
    let mut seen: Vec<Option<&str>> = vec![None; n as usize];
    for (f, s) in files.iter().zip(&shards) {
        if s.count != n {
            return refuse(format!(
                "{}: shard {s} does not go with {} (shard {first_shard}): mixed shard counts",
                f.name, first.name
            ));
        }
        if let Some(other) = seen[s.index as usize] {
            return refuse(format!("{}: shard {s} is already given by {other}", f.name));
        }
        seen[s.index as usize] = Some(&f.name);
        let plan = &f.doc.runs[0].plan;
        if plan.load.seed != base.load.seed {
            return refuse(format!(
                "{}: seed {}, but {} has seed {}",
                f.name, plan.load.seed, first.name, base.load.seed
            ));
        }
        if shared_plan(plan) != base {
            return refuse(format!("{}: another plan than {} (the flags differ)", f.name, first.name));
        }
        if f.doc.runs.len() != first.doc.runs.len() {
            return refuse(format!(
                "{}: {} runs, but {} has {}",
                f.name,
                f.doc.runs.len(),
                first.name,
                first.doc.runs.len()
            ));
        }
        for (a, b) in f.doc.runs.iter().zip(&first.doc.runs) {
            if a.name != b.name || a.load != b.load || shared_plan(&a.plan) != shared_plan(&b.plan) {
                return refuse(format!("{}: its stages differ from {}'s", f.name, first.name));
            }
        }
    }
    let missing: Vec<String> =
        seen.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| format!("{i}/{n}")).collect();
    let mut notes = Vec::new();
    if !missing.is_empty() {
        let list = missing.join(", ");
        if !allow_partial {
            return refuse(format!(
                "shard{} {list} missing (merge them too, or pass --allow-partial)",
                plural(&missing)
            ));
        }
        notes.push(format!(
            "partial merge: shard{} {list} missing; the merged run holds {} of {n} slices of the schedule",
            plural(&missing),
            n as usize - missing.len()
        ));
    }
    let mut runs = Vec::with_capacity(first.doc.runs.len());
    for stage in 0..first.doc.runs.len() {
        let parts: Vec<(&Run, goodput_workload::Shard)> =
            files.iter().zip(&shards).map(|(f, s)| (&f.doc.runs[stage], *s)).collect();
        let (run, spread_note) = merge_stage(&parts, &notes);
        if let Some(s) = spread_note
            && !notes.contains(&s)
        {
            notes.push(s);
        }
        runs.push(run);
    }
    Ok(Merged { runs, notes })
}

fn plural<T>(v: &[T]) -> &'static str {
    if v.len() == 1 { "" } else { "s" }
}

/// One stage's runs (one per shard) merged; the start-spread note when there is one.
fn merge_stage(parts: &[(&Run, goodput_workload::Shard)], notes: &[String]) -> (Run, Option<String>) {
    let mut sorted: Vec<&(&Run, goodput_workload::Shard)> = parts.iter().collect();
    sorted.sort_by_key(|p| p.1.index);
    let first = sorted[0].0;
    let virtual_clock = matches!(first.target, Target::Sim { .. });
    let starts: Vec<Option<i128>> =
        sorted.iter().map(|(r, _)| r.started_at.as_deref().and_then(parse_rfc3339_ns)).collect();
    let t0 = starts.iter().flatten().copied().min();
    let mut records: Vec<RequestRecord> = Vec::new();
    for ((run, shard), start) in sorted.iter().zip(&starts) {
        let shift_ms = match (virtual_clock, start, t0) {
            (false, Some(s), Some(t0)) => (s - t0) as f64 / 1e6,
            _ => 0.0,
        };
        records.extend(run.requests.iter().cloned().map(|mut rec| {
            rec.shift(shift_ms);
            rec.shard = Some(shard.index);
            rec
        }));
    }
    records.sort_by(|a, b| {
        let key = |r: &RequestRecord| r.sent_ms.unwrap_or(r.scheduled_ms);
        key(a).total_cmp(&key(b)).then(a.scheduled_ms.total_cmp(&b.scheduled_ms)).then(a.id.cmp(&b.id))
    });
    let plan = shared_plan(&first.plan);
    let load = first.load.clone().unwrap_or_else(|| plan.load.load.clone());
    let mut opts = summary_options(&plan, &load);
    opts.runtime_lag = sorted.iter().filter_map(|(r, _)| r.summary.runtime_lag_ms).reduce(|a, b| a.worst(b));
    opts.bookkeeping = sorted.iter().filter_map(|(r, _)| r.summary.bookkeeping).reduce(|a, b| a + b);
    opts.after_done = sorted.iter().filter_map(|(r, _)| r.summary.streams_after_done).reduce(|a, b| a + b);
    opts.connections = sorted.iter().filter_map(|(r, _)| r.summary.sends.as_ref()?.connections).reduce(|a, b| a + b);
    let (mut summary, mut summary_full) = summaries(&records, &opts);
    let mut extra: Vec<Warning> = Vec::new();
    for note in notes {
        extra.push(Warning { code: WarningCode::ShardsMissing, message: note.clone() });
    }
    let spread_note = match (starts.iter().flatten().min(), starts.iter().flatten().max()) {
        (Some(lo), Some(hi)) if !virtual_clock && (hi - lo) as f64 / 1e6 > START_SPREAD_WARN_MS => Some(format!(
            "the shards' actual starts differ by {:.3} ms (more than {START_SPREAD_WARN_MS} ms): their schedules \
             are offset by up to that much",
            (hi - lo) as f64 / 1e6
        )),
        _ => None,
    };
    if let Some(s) = &spread_note {
        extra.push(Warning { code: WarningCode::ShardStartSpread, message: s.clone() });
    }
    for (run, shard) in &sorted {
        for w in &run.summary.warnings {
            extra.push(Warning { code: w.code, message: format!("shard {shard}: {}", w.message) });
        }
    }
    summary.warnings.extend(extra.iter().cloned());
    if let Some(f) = &mut summary_full {
        f.warnings.extend(extra);
    }
    let engine_stats = match sorted.as_slice() {
        [(one, _)] => one.engine_stats.clone(),
        _ => None,
    };
    let run = Run {
        name: first.name.clone(),
        id: format!("merged-{}", sorted.iter().map(|(r, _)| r.id.as_str()).collect::<Vec<_>>().join("+")),
        started_at: t0.map(format_rfc3339_ns).or_else(|| first.started_at.clone()),
        plan,
        load: first.load.clone(),
        elapsed_s: None,
        virtual_end_s: sorted.iter().filter_map(|(r, _)| r.virtual_end_s).reduce(f64::max),
        target: first.target.clone(),
        interrupted: sorted.iter().any(|(r, _)| r.interrupted),
        stop: sorted.iter().map(|(r, _)| r.stop).find(|s| *s != StopReason::Completed).unwrap_or_default(),
        summary,
        summary_full,
        engine_stats,
        ..first.clone()
    };
    (Run { requests: records, server_metrics: None, ..run }, spread_note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_parse() {
        assert_eq!(parse_start_at("1700000000123"), Ok(1_700_000_000_123_000_000));
        let z = parse_start_at("2026-12-03T17:00:00Z").unwrap();
        assert_eq!(parse_start_at("2026-12-03T18:30:00+01:30"), Ok(z));
        assert_eq!(parse_start_at("2026-12-03T16:00:00-01:00"), Ok(z));
        assert_eq!(parse_start_at("2026-12-03T17:00:00.5Z"), Ok(z + 500_000_000));
        assert!(matches!(parse_start_at("tomorrow"), Err(StartAtError::Syntax(_))));
    }

    #[test]
    fn start_times_in_the_past_or_far_ahead_are_refused() {
        let now = 1_000_000_000_000_000_000i128;
        assert!(check_start_at("x", now - 4_000_000_000, now).is_ok());
        assert_eq!(check_start_at("x", now - 6_000_000_000, now), Err(StartAtError::Past("x".into(), 6.0)));
        assert!(check_start_at("x", now + 23 * 3_600_000_000_000, now).is_ok());
        assert_eq!(check_start_at("x", now + 25 * 3_600_000_000_000, now), Err(StartAtError::Future("x".into())));
    }

    #[test]
    fn a_wait_for_a_past_instant_returns_at_once() {
        let at = wall_ns() - 1_000_000;
        let r = wait_until(at);
        assert!(r.late_ms >= 1.0, "{r:?}");
        assert!(r.clock_uncertainty_ms >= 0.0);
    }
}
