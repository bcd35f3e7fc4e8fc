//! The result document (`--out results.json`): one typed format for measured and simulated runs,
//! and everything that reads one back.
//!
//! - [`plan`]: a run's plan as data;
//! - [`import`]: other tools' results (vLLM, GuideLLM, AIPerf) read into runs;
//! - [`ResultDoc`], [`Run`], [`Target`], [`CapacityReport`]: the document;
//! - [`ResultDoc::read`] checks `schema_version` (a newer major is refused with a clear error;
//!   files written before run ids and start times existed still read), [`ResultDoc::write`]
//!   writes atomically;
//! - [`Run::merge`]: runs of one plan (shards of one schedule) combined exactly: records
//!   concatenated on one clock with new ids (and, across separate runs, disjoint user and
//!   session ids), every distribution recomputed from all samples.
//!
//! Its JSON Schema is checked in at `schema/results.schema.json`; tests validate every document
//! the tool writes against it. Bump [`SCHEMA_VERSION`] on any incompatible change.

pub mod capacity;
pub mod comparison;
pub mod import;
pub mod plan;
pub mod planning;
pub mod roofline;
/// Engine types the document holds (a run's engine statistics, a plan's number formats), so that
/// readers of the document need not name the engine crate.
pub use goodput_engine::{Dtype, EngineStats};
pub use goodput_wire::server_metrics;
pub mod shards;

use std::path::Path;

use goodput_metrics::{
    ClosedLoop, Edge, RequestRecord, StopReason, Summary, SummaryOptions, Warning, WarningCode, summarize,
};
use goodput_workload::{Arrivals, Load};
use serde::{Deserialize, Serialize};

pub use capacity::{CapacityFinding, CapacityPoint, CapacityReport};
pub use plan::{Api, EnginePlan, RunPlan, TargetPlan, Timeouts};

/// The major version of the document's format: readers refuse a larger one.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// What was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// A server reached over HTTP.
    Url {
        url: String,
        /// The model name sent in requests.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// The engine model behind goodput's own HTTP server, in real time.
    Embedded {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        engine: Box<EnginePlan>,
    },
    /// The engine model in virtual time.
    Sim {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        engine: Box<EnginePlan>,
    },
    /// Results of another tool (`goodput import`): which tool and file, and what the file could
    /// not give.
    Imported(Box<import::ImportSource>),
}

impl Target {
    pub fn model(&self) -> Option<&str> {
        match self {
            Target::Url { model, .. } | Target::Embedded { model, .. } | Target::Sim { model, .. } => model.as_deref(),
            Target::Imported(s) => s.model.as_deref(),
        }
    }

    pub fn engine(&self) -> Option<&EnginePlan> {
        match self {
            Target::Url { .. } | Target::Imported(_) => None,
            Target::Embedded { engine, .. } | Target::Sim { engine, .. } => Some(engine),
        }
    }

    /// `url`, `embedded`, `sim` or `imported`.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Url { .. } => "url",
            Target::Embedded { .. } => "embedded",
            Target::Sim { .. } => "sim",
            Target::Imported(_) => "imported",
        }
    }

    /// What a reader calls it: the URL, "embedded engine" or "simulated engine".
    pub fn label(&self) -> String {
        match self {
            Target::Url { url, .. } => url.clone(),
            Target::Embedded { .. } => "embedded engine".into(),
            Target::Sim { .. } => "simulated engine".into(),
            Target::Imported(s) => format!("{} results from {}", s.tool.name(), s.file),
        }
    }
}

/// One run: a plain bench has one; sweeps and capacity searches have one per stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Unique to this run (documents written before ids existed read with an empty one).
    #[serde(default)]
    pub id: String,
    /// When the run's clock started (the time every record's milliseconds count from), RFC 3339
    /// UTC with nanoseconds; for a simulation, when it was simulated (its clock is virtual).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// The validated run plan (never holds secrets).
    pub plan: RunPlan,
    /// The load of this stage (a sweep's and a capacity search's stages differ from the plan's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
    /// Wall time the run took, seconds (for a simulation: how long it took to simulate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// A simulation's virtual time at its end, seconds (the virtual length of the run, whatever
    /// window the summary was narrowed to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_end_s: Option<f64>,
    pub target: Target,
    /// True when the run was cut short (Ctrl-C, `--max-errors`, a saturated capacity step).
    #[serde(default)]
    pub interrupted: bool,
    /// Why it ended.
    #[serde(default)]
    pub stop: StopReason,
    /// Over the measurement window.
    pub summary: Summary,
    /// Over the whole run, when a warm-up or cool-down narrowed the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_full: Option<Summary>,
    /// Engine statistics (embedded and sim targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_stats: Option<EngineStats>,
    /// The server's own metrics scraped during the run (`--scrape-metrics`; always for the
    /// embedded engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<server_metrics::ServerMetrics>,
    pub requests: Vec<RequestRecord>,
}

/// The whole document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    pub schema_version: u32,
    pub tool: Tool,
    /// RFC 3339, UTC.
    pub created_at: String,
    #[serde(default)]
    pub interrupted: bool,
    pub runs: Vec<Run>,
    /// The answer of `goodput capacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityReport>,
    /// The answer of `goodput plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<planning::PlanReport>,
}

/// Why a result file could not be read, written or merged.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path} is not a goodput result document: {message}")]
    Format { path: String, message: String },
    #[error(
        "{path} is a {tool} result file, not a goodput result document: convert it first with `goodput import {path} --out FILE.json`"
    )]
    Foreign { path: String, tool: &'static str },
    #[error(
        "{path} was written by a newer goodput (result schema version {found}); this one reads version {SCHEMA_VERSION}: upgrade goodput"
    )]
    NewerSchema { path: String, found: u64 },
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
    #[error("cannot merge: {0}")]
    Merge(String),
}

impl ResultDoc {
    /// A document holding `runs`, written by `tool_version` now.
    pub fn new(tool_version: &str, runs: Vec<Run>) -> Self {
        let interrupted = runs.iter().any(|r| r.interrupted);
        ResultDoc {
            schema_version: SCHEMA_VERSION,
            tool: Tool { name: "goodput".into(), version: tool_version.into() },
            created_at: now_rfc3339(),
            interrupted,
            runs,
            capacity: None,
            plan: None,
        }
    }

    /// Reads a result document, checking its schema version first.
    pub fn read(path: &Path) -> Result<Self, ResultError> {
        let p = path.display().to_string();
        if path.is_dir() {
            return Err(ResultError::Read { path: p, message: "is a directory, not a result file".into() });
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| ResultError::Read { path: p.clone(), message: e.to_string() })?;
        Self::parse(&p, &text)
    }

    /// Parses a document's text (`path` names it in errors).
    pub fn parse(path: &str, text: &str) -> Result<Self, ResultError> {
        let format = |message: String| ResultError::Format { path: path.into(), message };
        let foreign = || import::detect(text).map(|f| ResultError::Foreign { path: path.into(), tool: f.name() });
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| foreign().unwrap_or(format(e.to_string())))?;
        match v.get("schema_version").and_then(serde_json::Value::as_u64) {
            None => {
                return Err(foreign().unwrap_or_else(|| format("no `schema_version` field".into())));
            }
            Some(n) if n > SCHEMA_VERSION as u64 => {
                return Err(ResultError::NewerSchema { path: path.into(), found: n });
            }
            Some(_) => {}
        }
        serde_json::from_value(v).map_err(|e| format(e.to_string()))
    }

    /// Writes the document (to a temporary name first, so a crash never leaves half a file).
    ///
    /// A document holding more than [`COMPACT_ABOVE_RECORDS`] records is written compactly: no
    /// indentation, and each record's event times as microsecond deltas and its token counts as
    /// run-length pairs (`goodput_metrics::events`; times within 0.5 µs). Smaller ones are
    /// indented, with exact arrays.
    pub fn write(&self, path: &Path) -> Result<(), ResultError> {
        use std::io::Write;
        let err = |e: std::io::Error| ResultError::Write { path: path.display().to_string(), message: e.to_string() };
        let tmp = path.with_extension("json.tmp");
        let written = (|| {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp).map_err(err)?);
            let records: usize = self.runs.iter().map(|r| r.requests.len()).sum();
            if records > COMPACT_ABOVE_RECORDS {
                goodput_metrics::events::compact_events(|| serde_json::to_writer(&mut w, self))
            } else {
                serde_json::to_writer_pretty(&mut w, self)
            }
            .map_err(|e| ResultError::Write { path: path.display().to_string(), message: e.to_string() })?;
            w.write_all(b"\n").map_err(err)?;
            w.flush().map_err(err)
        })();
        if let Err(e) = written {
            // a half-written copy is no use to anyone
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path).map_err(|e| ResultError::Write {
            path: path.display().to_string(),
            message: format!("{e} (the whole document is in {})", tmp.display()),
        })
    }
}

/// Documents with more records than this are written compactly (see [`ResultDoc::write`]).
pub const COMPACT_ABOVE_RECORDS: usize = 10_000;

/// How a run's records are summarized: from its plan and its stage's load.
pub fn summary_options(plan: &RunPlan, load: &Load) -> SummaryOptions {
    SummaryOptions {
        percentiles: plan.output.percentiles,
        slo: plan.slo.slo(),
        warmup: plan.load.warmup,
        cooldown: plan.load.cooldown,
        offered_rate: load.offered_rate(),
        offered_is_drawn: matches!(load, Load::Open { arrivals: Arrivals::Ramp { .. } | Arrivals::Replay { .. }, .. }),
        // over the chat API the server also counts its chat template
        compare_input_counts: plan.api == Some(Api::Completions),
        expect_exact_output: plan.ignore_eos,
        closed_loop: match load {
            Load::Closed { concurrency, .. } => {
                load.users(plan.load.requests).map(|users| ClosedLoop { requested: *concurrency, users })
            }
            Load::Open { .. } => None,
        },
        ..SummaryOptions::new()
    }
}

/// The summary over the measurement window, and over the whole run when a window narrowed it.
pub fn summaries(records: &[RequestRecord], opts: &SummaryOptions) -> (Summary, Option<Summary>) {
    let s = summarize(records, opts);
    let full = (opts.warmup != Edge::None || opts.cooldown != Edge::None)
        .then(|| summarize(records, &SummaryOptions { warmup: Edge::None, cooldown: Edge::None, ..opts.clone() }));
    (s, full)
}

impl Run {
    /// Requests the run produced (and summarized): its records, or, when the document keeps a
    /// sample of them (`--records`), the count the summary says.
    pub fn record_count(&self) -> u64 {
        self.summary.records_kept.as_ref().map_or(self.requests.len() as u64, |k| k.total)
    }

    /// Combines runs of one plan (shards of one schedule, or pieces of one run) into one: records
    /// concatenated on one clock (measured runs are aligned by their absolute start times) with
    /// new ids in send order, every distribution recomputed from all samples, throughput over
    /// the union window. Runs whose plans differ (other than in their shard and output files)
    /// are refused.
    ///
    /// Runs with different ids are separate processes (shards), each numbering its closed-loop
    /// users from 0 and its sessions its own way: their users and sessions are renumbered apart,
    /// and the merged self-check counts every shard's users. Pieces of one run (one id) keep
    /// theirs. Engine statistics are kept when one shard has them; several shards' engines do
    /// not add up to one engine's statistics, so they are then dropped, with an
    /// `engine_stats_dropped` warning.
    pub fn merge(runs: &[Run]) -> Result<Run, ResultError> {
        let first = runs.first().ok_or_else(|| ResultError::Merge("no runs".into()))?;
        let base = check_mergeable(runs)?;
        let shards = Shards::of(runs);
        let load = first.load.clone().unwrap_or_else(|| first.plan.load.load.clone());
        let users = load.users(base.load.requests);
        let t0 = runs.iter().filter_map(|r| r.started_at.as_deref().and_then(parse_rfc3339_ns)).min();
        let mut records = merged_records(runs, &shards, users, t0);
        for (i, r) in records.iter_mut().enumerate() {
            r.id = i as u64;
        }
        let mut opts = summary_options(&base, &load);
        if let Some(c) = &mut opts.closed_loop {
            *c = ClosedLoop { requested: c.requested * shards.count, users: c.users * shards.count };
        }
        opts.runtime_lag = shards.firsts(runs).filter_map(|r| r.summary.runtime_lag_ms).reduce(|a, b| a.worst(b));
        opts.bookkeeping = shards.firsts(runs).filter_map(|r| r.summary.bookkeeping).reduce(|a, b| a + b);
        opts.after_done = shards.firsts(runs).filter_map(|r| r.summary.streams_after_done).reduce(|a, b| a + b);
        opts.connections =
            shards.firsts(runs).filter_map(|r| r.summary.sends.as_ref()?.connections).reduce(|a, b| a + b);
        let (mut summary, mut summary_full) = summaries(&records, &opts);
        let (engine_stats, dropped) = merged_engine_stats(runs, &shards);
        if let Some(w) = dropped {
            summary.warnings.push(w.clone());
            if let Some(f) = &mut summary_full {
                f.warnings.push(w);
            }
        }
        Ok(Run {
            name: first.name.clone(),
            id: format!("merged-{}", runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join("+")),
            started_at: t0.map(format_rfc3339_ns).or_else(|| first.started_at.clone()),
            plan: base,
            load: first.load.clone(),
            elapsed_s: None,
            virtual_end_s: runs.iter().filter_map(|r| r.virtual_end_s).reduce(f64::max),
            target: first.target.clone(),
            interrupted: runs.iter().any(|r| r.interrupted),
            stop: runs.iter().map(|r| r.stop).find(|s| *s != StopReason::Completed).unwrap_or_default(),
            summary,
            summary_full,
            engine_stats,
            // one server's scrapes stand for the merged run only when no other run has its own
            server_metrics: match runs.iter().filter_map(|r| r.server_metrics.as_ref()).collect::<Vec<_>>()[..] {
                [one] => Some(one.clone()),
                _ => None,
            },
            requests: records,
        })
    }
}

/// The plan runs share (less their shard and output files), or why they cannot be merged.
fn check_mergeable(runs: &[Run]) -> Result<RunPlan, ResultError> {
    let first = &runs[0];
    let same_plan = |p: &RunPlan| {
        let mut p = p.clone();
        p.load.shard = None;
        p.output.out = None;
        p.load.export_schedule = None;
        p
    };
    let base = same_plan(&first.plan);
    // a merge recomputes every distribution from the records: a run that kept a sample of them
    // (`--records`) cannot be merged exactly
    if let Some((r, k)) = runs.iter().find_map(|r| r.summary.records_kept.as_ref().map(|k| (r, k))) {
        return Err(ResultError::Merge(format!(
            "run {} holds {} of its {} records (--records {}): a merge recomputes its summary from every \
             record; rerun with --records all and at most 100000 requests per run",
            r.id, k.kept, k.total, k.mode
        )));
    }
    for r in &runs[1..] {
        if same_plan(&r.plan) != base {
            return Err(ResultError::Merge(format!(
                "run {} has another plan than run {} (different flags or seed)",
                r.id, first.id
            )));
        }
        if r.load != first.load || r.name != first.name {
            return Err(ResultError::Merge(format!("run {} is another stage than run {}", r.id, first.id)));
        }
    }
    Ok(base)
}

/// Which shard (separate run) each input run belongs to: runs sharing an id are pieces of one.
struct Shards {
    /// Per input run, its shard's index (in order of first appearance).
    index: Vec<usize>,
    count: usize,
}

impl Shards {
    fn of(runs: &[Run]) -> Self {
        let mut ids: Vec<&str> = Vec::new();
        let index = runs
            .iter()
            .map(|r| match ids.iter().position(|id| *id == r.id) {
                Some(i) => i,
                None => {
                    ids.push(&r.id);
                    ids.len() - 1
                }
            })
            .collect();
        Shards { index, count: ids.len() }
    }

    /// The first piece of each shard (its run-wide reports: lag, bookkeeping, engine).
    fn firsts<'a>(&'a self, runs: &'a [Run]) -> impl Iterator<Item = &'a Run> + 'a {
        (0..self.count).filter_map(move |k| self.index.iter().position(|&i| i == k).map(|p| &runs[p]))
    }
}

/// Every run's records on one clock, sorted in send order, with each shard's users and sessions
/// renumbered apart (`users`: a closed loop's users per shard).
fn merged_records(runs: &[Run], shards: &Shards, users: Option<usize>, t0: Option<i128>) -> Vec<RequestRecord> {
    // one clock: measured runs by their absolute starts; a simulation's clock is virtual
    let virtual_clock = matches!(runs[0].target, Target::Sim { .. });
    let mut sessions_per_shard = vec![0u64; shards.count];
    for (r, &k) in runs.iter().zip(&shards.index) {
        let top = r.requests.iter().filter_map(|x| x.session).map(|s| s + 1).max().unwrap_or(0);
        sessions_per_shard[k] = sessions_per_shard[k].max(top);
    }
    let session_base: Vec<u64> =
        sessions_per_shard.iter().scan(0, |acc, n| Some(std::mem::replace(acc, *acc + n))).collect();
    let mut records = Vec::new();
    for (r, &k) in runs.iter().zip(&shards.index) {
        let shift_ms = match (virtual_clock, r.started_at.as_deref().and_then(parse_rfc3339_ns), t0) {
            (false, Some(s), Some(t0)) => (s - t0) as f64 / 1e6,
            _ => 0.0,
        };
        let user_base = (users.unwrap_or(0) * k) as u32;
        records.extend(r.requests.iter().cloned().map(|mut rec| {
            rec.shift(shift_ms);
            rec.user = rec.user.map(|u| u + user_base);
            rec.session = rec.session.map(|s| s + session_base[k]);
            rec
        }));
    }
    records.sort_by(|a, b| {
        let key = |r: &RequestRecord| r.sent_ms.unwrap_or(r.scheduled_ms);
        key(a).total_cmp(&key(b)).then(a.scheduled_ms.total_cmp(&b.scheduled_ms)).then(a.id.cmp(&b.id))
    });
    records
}

/// The one shard's engine statistics, or none and a warning when several shards had their own.
fn merged_engine_stats(runs: &[Run], shards: &Shards) -> (Option<EngineStats>, Option<Warning>) {
    let with: Vec<&Run> = shards.firsts(runs).filter(|r| r.engine_stats.is_some()).collect();
    match with.as_slice() {
        [] => (None, None),
        [one] => (one.engine_stats.clone(), None),
        many => {
            let ids: Vec<&str> = many.iter().map(|r| r.id.as_str()).collect();
            let message = format!(
                "runs {} each had their own engine: their engine statistics do not add up to one engine's and \
                 were left out of the merged run (read them in each run)",
                ids.join(", ")
            );
            (None, Some(Warning { code: WarningCode::EngineStatsDropped, message }))
        }
    }
}

/// A new run id: time and process based, unique in practice.
pub fn new_run_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let ns = unix_ns();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}-{:05x}-{n:x}", ns as u64, std::process::id())
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

/// Now, as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339_utc(unix_ns() as f64 / 1e9)
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC with millisecond precision.
pub fn rfc3339_utc(unix_seconds: f64) -> String {
    let secs = unix_seconds.floor() as i64;
    let millis = ((unix_seconds - secs as f64) * 1000.0).floor() as i64;
    format!("{}.{millis:03}Z", civil(secs))
}

/// Formats nanoseconds since the Unix epoch as RFC 3339 UTC with nanosecond precision.
pub fn format_rfc3339_ns(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000) as i64;
    let frac = ns.rem_euclid(1_000_000_000);
    format!("{}.{frac:09}Z", civil(secs))
}

/// `YYYY-MM-DDTHH:MM:SS` of Unix seconds (Howard Hinnant's civil-from-days).
fn civil(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (UTC) into nanoseconds since the Unix epoch.
pub fn parse_rfc3339_ns(s: &str) -> Option<i128> {
    let s = s.trim().strip_suffix('Z').or_else(|| s.trim().strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    if !frac.chars().all(|c| c.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let nanos: i128 = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().ok()? };
    // days-from-civil
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as i128 * 1_000_000_000 + nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_utc(0.0), "1970-01-01T00:00:00.000Z");
        // 2026-12-02T11:55:00.250Z
        assert_eq!(rfc3339_utc(1_796_212_500.25), "2026-12-02T11:55:00.250Z");
        assert_eq!(rfc3339_utc(951_782_400.0), "2000-02-29T00:00:00.000Z");
        let ns = 1_796_212_500_250_000_123i128;
        assert_eq!(format_rfc3339_ns(ns), "2026-12-02T11:55:00.250000123Z");
        assert_eq!(parse_rfc3339_ns("2026-12-02T11:55:00.250000123Z"), Some(ns));
        assert_eq!(parse_rfc3339_ns("2000-02-29T00:00:00Z"), Some(951_782_400_000_000_000));
        assert_eq!(parse_rfc3339_ns("2000-02-29T00:00:00.5Z"), Some(951_782_400_500_000_000));
        assert_eq!(parse_rfc3339_ns("2000-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_ns("yesterday"), None);
    }

    #[test]
    fn newer_schemas_are_refused_and_garbage_named() {
        let e = ResultDoc::parse("r.json", r#"{"schema_version": 2, "runs": []}"#).unwrap_err().to_string();
        assert!(e.contains("r.json") && e.contains("newer goodput") && e.contains("version 2"), "{e}");
        let e = ResultDoc::parse("r.json", r#"{"runs": []}"#).unwrap_err().to_string();
        assert!(e.contains("schema_version"), "{e}");
        let e = ResultDoc::parse("x.json", "not json").unwrap_err().to_string();
        assert!(e.starts_with("x.json is not a goodput result document"), "{e}");
    }

    #[test]
    fn run_ids_are_unique() {
        let a = new_run_id();
        let b = new_run_id();
        assert_ne!(a, b);
    }
}
