//! `goodput sim`: predict a run in virtual time with the engine model, one stage or a sweep.

use crate::args::SimArgs;
use crate::outcome::Outcome;
use crate::plan;
use crate::run::{run_plan, target};

pub async fn run(args: SimArgs) -> anyhow::Result<Outcome> {
    let mut p = plan::sim(&args)?;
    let mut t = target(&mut p).await?;
    run_plan("sim", &mut t, &p).await
}
