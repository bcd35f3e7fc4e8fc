//! `goodput bench`: measure a server (or the embedded engine model), one stage or a sweep.

use crate::Outcome;
use crate::args::BenchArgs;
use crate::plan;
use crate::run::{run_plan, target};

pub async fn run(args: BenchArgs) -> anyhow::Result<Outcome> {
    let mut p = plan::bench(&args)?;
    let mut t = target(&mut p).await?;
    crate::merge::wait_for_start(&mut p).await?;
    run_plan("bench", &mut t, &p).await
}
