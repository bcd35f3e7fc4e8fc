//! The workload flags: lengths, datasets, sessions, shared prefixes, and the files a run reads
//! and writes kept apart.

use super::*;

/// Load and workload together: the dataset decides whether `replay` is possible, the profile
/// whether the dataset cycles, and the think time applies to both.
pub fn load_and_workload(l: &LoadArgs, w: &WorkloadArgs) -> Result<(LoadPlan, WorkloadPlan, Resources), UsageError> {
    let replay = l.profile == Some(Profile::Replay);
    let (spec, res) = workload_spec(w, l.seed, replay)?;
    let has_times = res.dataset.as_ref().is_some_and(|d| d.has_times());
    let load = load_plan(l, has_times)?;
    // outside a replay it scales only the pauses between a session's calls: there must be some
    let dataset_sessions = res
        .dataset
        .as_ref()
        .is_some_and(|d| d.entries.iter().any(|e| e.turns.len() > 1 || e.turns.iter().any(|t| !t.forks.is_empty())));
    if load.pause_scale.is_some()
        && !dataset_sessions
        && spec.agentic.is_none()
        && spec.turns == goodput_workload::Turns::One
    {
        return Err(usage(
            "--time-scale",
            "outside --profile replay it scales the pauses between a session's calls: it needs sessions \
             (a dataset with them, --sessions or --agentic)",
        ));
    }
    // sub-agents run beside their parent: a cap below the fan-out could never run them together
    if let (Some(a), Some(cap)) = (&spec.agentic, l.max_concurrency)
        && a.fan_out as usize > cap
    {
        return Err(usage(
            "--fan-out",
            format!(
                "{} sub-agents run at once, over --max-concurrency {cap}: raise the cap or lower the fan-out",
                a.fan_out
            ),
        ));
    }
    let workload = workload_plan(spec, &res, &load.think_time);
    Ok((load, workload, res))
}

/// The workload flags as a plan, seeded, for a load that is not a replay.
pub fn workload(w: &WorkloadArgs, seed: u64) -> Result<(WorkloadPlan, Resources), UsageError> {
    let (spec, res) = workload_spec(w, seed, false)?;
    Ok((workload_plan(spec, &res, &ThinkTime::default()), res))
}

pub(super) fn workload_plan(mut spec: WorkloadSpec, res: &Resources, think: &ThinkTime) -> WorkloadPlan {
    spec.think_time = think.clone();
    let distinct_prompts = Some(match &spec.source {
        Source::Synthetic => DistinctPrompts::PerRequest,
        Source::Dataset(d) => DistinctPrompts::Dataset(d.entries.len()),
    });
    WorkloadPlan { spec: spec.info(), tokenizer: res.tokenizer.name().to_string(), distinct_prompts }
}

/// `--input-tokens` and `--output-tokens` when not given.
pub const DEFAULT_INPUT_TOKENS: &str = "512";

pub const DEFAULT_OUTPUT_TOKENS: &str = "128";

pub(super) fn length(flag: &str, s: &str) -> Result<LengthDist, UsageError> {
    let mut d: LengthDist = s.parse().map_err(|m| usage(flag, m))?;
    if let LengthDist::Empirical { path, values } = &mut d {
        let text = std::fs::read_to_string(Path::new(path.as_str()))
            .map_err(|e| usage(flag, format!("cannot read {path}: {e}")))?;
        *values = LengthDist::parse_values(path, &text).map_err(|e| usage(flag, e))?;
    }
    Ok(d)
}

/// The agentic flags as a spec (`--agentic`); every other agentic flag needs it.
fn agentic_spec(a: &WorkloadArgs, source: &Source) -> Result<Option<goodput_workload::AgenticSpec>, UsageError> {
    let given = [
        ("--calls", a.calls.is_some()),
        ("--tool-time", a.tool_time.is_some()),
        ("--tool-output-tokens", a.tool_output_tokens.is_some()),
        ("--fan-out", a.fan_out.is_some()),
        ("--fan-out-at", a.fan_out_at.is_some()),
        ("--sub-agent-calls", a.sub_agent_calls.is_some()),
    ];
    if !a.agentic {
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            return Err(usage(flag, "describes synthetic agents: add --agentic"));
        }
        return Ok(None);
    }
    if !matches!(source, Source::Synthetic) {
        return Err(usage(
            "--agentic",
            "makes synthetic agents; a trace's agents come from the trace itself (--dataset weka:PATH or bailian:PATH)",
        ));
    }
    if a.sessions || a.turns.is_some() {
        return Err(usage("--agentic", "its calls are its sessions' turns: drop --sessions and --turns (use --calls)"));
    }
    let d = goodput_workload::AgenticSpec::default();
    let spec = goodput_workload::AgenticSpec {
        calls: a.calls.as_deref().map(|c| length("--calls", c)).transpose()?.unwrap_or(d.calls),
        tool_time: match &a.tool_time {
            Some(t) => t.parse().map_err(|e| usage("--tool-time", e))?,
            None => d.tool_time,
        },
        tool_output_tokens: a
            .tool_output_tokens
            .as_deref()
            .map(|c| length("--tool-output-tokens", c))
            .transpose()?
            .unwrap_or(d.tool_output_tokens),
        fan_out: a.fan_out.unwrap_or(0),
        fan_out_at: a.fan_out_at.unwrap_or(1),
        sub_agent_calls: a
            .sub_agent_calls
            .as_deref()
            .map(|c| length("--sub-agent-calls", c))
            .transpose()?
            .unwrap_or(d.sub_agent_calls),
    };
    if spec.fan_out > 64 {
        return Err(usage("--fan-out", "at most 64 sub-agents at once"));
    }
    if spec.fan_out > 0 && spec.fan_out_at == 0 {
        return Err(usage("--fan-out-at", "a call number from 1"));
    }
    if spec.fan_out > 0 && spec.calls.max().is_some_and(|m| spec.fan_out_at >= m) {
        return Err(usage(
            "--fan-out-at",
            format!(
                "call {} is a session's last (--calls {}): the sub-agents' answers need a call after it",
                spec.fan_out_at, spec.calls
            ),
        ));
    }
    Ok(Some(spec))
}

/// `--reasoning-tokens DIST`: a length distribution that may be 0 (no reasoning).
pub fn reasoning_length(s: &str) -> Result<LengthDist, UsageError> {
    if s.trim() == "0" {
        return Ok(LengthDist::Fixed(0));
    }
    length("--reasoning-tokens", s)
}

/// The workload flags, validated, with the tokenizer and dataset loaded. `replay`: the dataset
/// is used once, in order.
pub(super) fn workload_spec(
    a: &WorkloadArgs,
    seed: u64,
    replay: bool,
) -> Result<(WorkloadSpec, Resources), UsageError> {
    let tk = Tokenizer::load(a.tokenizer.as_deref()).map_err(|e| usage("--tokenizer", e))?;
    let source = match a.dataset.as_deref().map(str::trim) {
        None | Some("synthetic") => Source::Synthetic,
        Some(d) => {
            let (kind, path) = d
                .split_once(':')
                .ok_or_else(|| usage("--dataset", format!("`{d}`: expected KIND:PATH, e.g. sharegpt:data.json")))?;
            let kind: DatasetKind = kind.parse().map_err(|m| usage("--dataset", m))?;
            let d = Dataset::load(kind, path).map_err(|e| usage("--dataset", e))?;
            if let Some(s) = d.skipped_summary() {
                warn!("goodput: --dataset {d}: {s}");
            }
            Source::Dataset(Arc::new(d))
        }
    };
    let agentic_trace =
        matches!(&source, Source::Dataset(d) if matches!(d.kind, DatasetKind::Weka | DatasetKind::Bailian));
    let turns = match a.turns.as_deref().map(str::trim) {
        // an agentic trace's sessions are whole: every call of every conversation
        None if agentic_trace || a.agentic => match &source {
            Source::Dataset(_) => Turns::All,
            Source::Synthetic => Turns::Up(1),
        },
        None if a.sessions => match &source {
            Source::Dataset(_) => Turns::All,
            Source::Synthetic => Turns::Up(4),
        },
        None => Turns::One,
        Some("all") => Turns::All,
        Some(n) => match n.parse::<u32>() {
            Ok(0) | Err(_) => return Err(usage("--turns", format!("`{n}`: expected a positive number or `all`"))),
            Ok(1) => Turns::One,
            Ok(n) => Turns::Up(n),
        },
    };
    let multi = !matches!(turns, Turns::One);
    match &source {
        Source::Synthetic if turns == Turns::All => {
            return Err(usage("--turns", "`all` keeps whole dataset conversations; synthetic sessions need a number"));
        }
        Source::Dataset(d)
            if multi && !matches!(d.kind, DatasetKind::ShareGpt | DatasetKind::Weka | DatasetKind::Bailian) =>
        {
            return Err(usage(
                "--sessions",
                format!("multi-turn sessions come from sharegpt, weka, bailian or synthetic, not {}", d.kind.name()),
            ));
        }
        _ => {}
    }
    let (groups, ptokens) = (a.prefix_groups.unwrap_or(0), a.prefix_tokens.unwrap_or(0));
    if ptokens > goodput_workload::MAX_LENGTH {
        return Err(usage("--prefix-tokens", format!("at most {} tokens", goodput_workload::MAX_LENGTH)));
    }
    if (groups > 0) != (ptokens > 0) {
        return Err(usage(
            if groups > 0 { "--prefix-tokens" } else { "--prefix-groups" },
            "--prefix-groups G and --prefix-tokens P go together",
        ));
    }
    let agentic = agentic_spec(a, &source)?;
    let spec = WorkloadSpec {
        source,
        agentic,
        input_tokens: length("--input-tokens", a.input_tokens.as_deref().unwrap_or(DEFAULT_INPUT_TOKENS))?,
        output_tokens: length("--output-tokens", a.output_tokens.as_deref().unwrap_or(DEFAULT_OUTPUT_TOKENS))?,
        reasoning_tokens: a.reasoning_tokens.as_deref().map(reasoning_length).transpose()?,
        prefix_groups: groups,
        prefix_tokens: ptokens,
        turns,
        think_time: ThinkTime::default(),
        cycle: !replay,
        seed,
    };
    let dataset = match &spec.source {
        Source::Dataset(d) => Some(Arc::clone(d)),
        Source::Synthetic => None,
    };
    Ok((spec, Resources { tokenizer: tk, dataset }))
}

/// Refuses a run that would write one file twice, or over its own input: `--out`, its JSONL log,
/// `--export-schedule` and the `--dataset` file must all differ.
pub(super) fn distinct_files(load: &LoadPlan, w: &WorkloadArgs, out: &OutputPlan) -> Result<(), UsageError> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let dataset = w.dataset.as_deref().and_then(|d| d.split_once(':')).map(|(_, p)| std::path::PathBuf::from(p));
    let files = [
        ("--dataset", dataset),
        ("--out", out.out.clone()),
        ("--out's JSONL log", jsonl_path(out)),
        ("--export-schedule", load.export_schedule.clone()),
    ];
    let given: Vec<(&str, std::path::PathBuf)> =
        files.into_iter().filter_map(|(f, p)| p.map(|p| (f, abs(&p)))).collect();
    for (i, (a, pa)) in given.iter().enumerate() {
        if let Some((b, _)) = given[i + 1..].iter().find(|(_, pb)| pb == pa) {
            let flag = if b.starts_with("--out's") { "--out" } else { b };
            return Err(usage(flag, format!("{} is also {a}: give another file", pa.display())));
        }
    }
    Ok(())
}
