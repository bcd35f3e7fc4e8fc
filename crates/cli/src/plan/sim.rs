//! `goodput sim`: the engine model in virtual time.

use super::*;

/// A validated `goodput sim`.
/// The waiting-queue bound of a simulated offline run without `--max-waiting` (more requests
/// than one simulated run holds, so none is ever refused for it).
pub const UNBOUNDED_WAITING: usize = u32::MAX as usize;

/// Everything is sent at once (`--rate inf`, `throughput`), or a sweep that ends with such a stage.
pub(super) fn offline_load(load: &LoadPlan) -> bool {
    matches!(load.profile, Profile::Throughput | Profile::Sweep)
        || matches!(load.load, Load::Open { arrivals: Arrivals::AllAtOnce, .. })
}

pub fn sim(a: &SimArgs) -> Result<Planned, UsageError> {
    if a.api.is_some() {
        return Err(usage(
            "--api",
            "sim has no API: it simulates the engine, not its HTTP layer (drop --api; bench takes it)",
        ));
    }
    if a.load.start_at.is_some() {
        return Err(usage("--start-at", "bench only: a simulation runs in virtual time (--shard works without it)"));
    }
    let (load, workload, res) = load_and_workload(&a.load, &a.workload)?;
    let max = goodput_stage::MAX_SIM_REQUESTS;
    if load.requests.is_some_and(|n| n > max) {
        return Err(usage("--requests", format!("at most {max} in one simulated run")));
    }
    let mut engine = engine_plan(a.model.as_deref(), &a.engine)?;
    check_workload_fits(&engine, &workload)?;
    // offline throughput (`--rate inf`, and a sweep's throughput stage) queues every request, as
    // `vllm bench throughput` does: the waiting queue is bounded only when --max-waiting says so
    if a.engine.max_waiting.is_none() && offline_load(&load) {
        engine.config.max_waiting = UNBOUNDED_WAITING;
    }
    let output = output_plan(&a.output)?;
    distinct_files(&load, &a.workload, &output)?;
    let plan = RunPlan {
        engine: Some(engine),
        ignore_eos: !a.no_ignore_eos,
        ..RunPlan::simulated(load, workload, slo_plan(&a.slo)?, output)
    };
    let extrapolated = twin_extrapolations(&a.engine, &plan.load, &plan.workload)?;
    Ok(Planned { plan, res, ca_pem: None, quiet: a.output.quiet, html: a.output.html.clone(), extrapolated })
}
