//! One run of the document: its target, plan, summaries, engine and server statistics and
//! records; how a run's records are summarized; and runs of one plan merged into one.

use goodput_metrics::{
    ClosedLoop, Edge, RequestRecord, StopReason, Summary, SummaryOptions, Warning, WarningCode, summarize,
};
use goodput_workload::{Arrivals, Load};
use serde::{Deserialize, Serialize};

use crate::error::ResultError;
use crate::plan::{Api, EnginePlan, RunPlan};
use crate::time::{format_rfc3339_ns, parse_rfc3339_ns};
use crate::{EngineStats, server_metrics};

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
    Imported(Box<crate::source::ImportSource>),
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
    /// A run of `plan` on `target` with its summary and the records its document keeps, and a
    /// new id; it ended normally, and nothing else about it is known yet (set what is).
    pub fn from_parts(plan: RunPlan, target: Target, summary: Summary, requests: Vec<RequestRecord>) -> Self {
        Run {
            name: None,
            id: crate::time::new_run_id(),
            started_at: None,
            plan,
            load: None,
            elapsed_s: None,
            virtual_end_s: None,
            target,
            interrupted: false,
            stop: StopReason::default(),
            summary,
            summary_full: None,
            engine_stats: None,
            server_metrics: None,
            requests,
        }
    }

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
