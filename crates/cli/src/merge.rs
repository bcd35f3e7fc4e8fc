//! `goodput merge shard-*.json --out all.json [--allow-partial]`: the result files of the shards
//! of one run (`--shard I/N`) merged into one run ([`goodput_results::shards::merge_shards`]),
//! and the synchronized start that `bench --start-at` waits for.
//!
//! The shards of a plan search (`goodput plan --shard I/N`, documents whose `plan` report is set)
//! merge the same way ([`goodput_decide::planner::merge::merge_plan_shards`]): their candidates are
//! combined and ranked, and the Pareto front found, by the planner's own
//! [`goodput_decide::planner::rank_and_front`].
//!
//! Exit codes: 0 merged; 2 refused (one line naming the file: unreadable, not a shard, another
//! plan or seed, a duplicate or missing shard, mixed shard counts) or invalid usage.

use goodput_decide::planner::merge::merge_plan_shards;
use goodput_results::ResultDoc;
use goodput_results::shards::{ShardFile, merge_shards, wait_until};

use crate::args::MergeArgs;
use crate::outcome::Outcome;
use crate::plan::{Planned, UsageError, same_file, writable};

pub fn run(a: MergeArgs) -> anyhow::Result<Outcome> {
    writable("--out", &a.out)?;
    if let Some(f) = a.files.iter().find(|f| same_file(&a.out, f)) {
        return Err(UsageError(format!("--out: would overwrite the shard file {}", f.display())).into());
    }
    let mut files = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let name = f.display().to_string();
        files.push(ShardFile { name, doc: crate::plan::read_doc(f).map_err(|e| refused(e.0))? });
    }
    if files.iter().any(|f| f.doc.plan.is_some()) {
        return merge_plans(&a, &files);
    }
    let merged = merge_shards(&files, a.allow_partial).map_err(refused)?;
    warn_notes(&merged.notes);
    let doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), merged.runs);
    crate::output::write_result(&doc, &a.out)?;
    if !a.quiet {
        for run in &doc.runs {
            say!("{}", goodput_render::render_run("merge", run));
        }
    }
    let records: usize = doc.runs.iter().map(|r| r.requests.len()).sum();
    say!("wrote {} ({} shard files, {records} requests)\n", a.out.display(), files.len());
    Ok(Outcome::Ok)
}

/// The shards of a plan search merged into one plan report.
fn merge_plans(a: &MergeArgs, files: &[ShardFile]) -> anyhow::Result<Outcome> {
    let merged = merge_plan_shards(files, a.allow_partial).map_err(refused)?;
    warn_notes(&merged.notes);
    let (count, grid) = (merged.report.candidates.len(), merged.report.grid_size.unwrap_or(0));
    if !a.quiet {
        say!("{}", goodput_render::render_plan(&merged.report));
    }
    let mut doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), Vec::new());
    doc.plan = Some(merged.report);
    crate::output::write_result(&doc, &a.out)?;
    say!("wrote {} ({} shard files, {count} of {grid} candidates)\n", a.out.display(), files.len());
    Ok(Outcome::Ok)
}

/// What a merge that went through is missing (a partial merge), on stderr.
fn warn_notes(notes: &[String]) {
    for n in notes {
        warn!("goodput merge: warning: {n}");
    }
}

/// Shard files that do not make one run (or one plan search): a bad set of file arguments.
fn refused(e: impl std::fmt::Display) -> UsageError {
    UsageError(format!("merge refused: {e}"))
}

/// `bench --start-at`: waits (off the async runtime's workers) until the plan's start instant
/// and records the clocks' reading in the plan.
pub async fn wait_for_start(p: &mut Planned) -> anyhow::Result<()> {
    let Some(start) = &mut p.plan.load.start_at else { return Ok(()) };
    let at = goodput_results::parse_rfc3339_ns(&start.requested)
        .ok_or_else(|| UsageError(format!("--start-at: cannot read {}", start.requested)))?;
    if !p.quiet {
        let ahead = (at - goodput_results::unix_ns()) as f64 / 1e9;
        warn!("waiting {ahead:.3} s for the start at {}", start.requested);
    }
    let reading = tokio::task::spawn_blocking(move || wait_until(at)).await?;
    start.clock = Some(reading);
    Ok(())
}
