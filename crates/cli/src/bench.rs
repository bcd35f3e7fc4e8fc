//! `goodput bench`: measure a server (or the embedded engine model), one stage or a sweep.

use crate::args::BenchArgs;
use crate::outcome::Outcome;
use crate::plan;
use crate::run::{run_plan, target};

pub async fn run(args: BenchArgs) -> anyhow::Result<Outcome> {
    let mut p = plan::bench(&args)?;
    enough_files(&p.plan)?;
    let mut t = target(&mut p).await?;
    crate::merge::wait_for_start(&mut p).await?;
    run_plan("bench", &mut t, &p).await
}

/// Raises the open-file limit, and refuses a run whose connections could not all be opened
/// (they would fail as `client_limit`, the client's own failure): the limit is named before any
/// request is sent. An uncapped open loop has no bound to check.
pub fn enough_files(plan: &goodput_results::RunPlan) -> Result<(), plan::UsageError> {
    use goodput_workload::Load;
    let (flag, connections) = match (&plan.load.load, plan.load.max_concurrency) {
        (Load::Closed { .. }, _) => ("--concurrency", plan.load.load.users(plan.load.requests)),
        (Load::Open { max_concurrency: Some(m), .. }, _) => ("--max-concurrency", Some(*m)),
        (_, Some(m)) => ("--max-concurrency", Some(m)),
        _ => ("--rate", None),
    };
    let per = if matches!(plan.target, Some(goodput_results::plan::TargetPlan::Embedded { .. })) { 2 } else { 1 };
    match connections {
        Some(n) => {
            goodput_client::limits::ensure_fds(n as u64, per).map_err(|e| plan::UsageError(format!("{flag} {n}: {e}")))
        }
        None => {
            goodput_client::limits::raise_fd_limit();
            Ok(())
        }
    }
}
