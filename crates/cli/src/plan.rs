//! Raw arguments → a validated, serializable run plan, before anything runs.
//!
//! Every error names the flag (or file) and says what is expected; the binary prints it on one
//! line and exits with code 2.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use goodput_engine::{
    Batching, Catalog, Disaggregation, Dtype, EngineSpec, KvAlloc, Link, ModelArch, Named, Scheduling, Speculative,
};
use goodput_metrics::{Edge, Slo, Smoothing};
use goodput_results::plan::{
    DistinctPrompts, EnginePlan, LoadPlan, OutputPlan, RunPlan, ScrapePlan, SloPlan, TargetPlan, Timeouts, WorkloadPlan,
};
use goodput_stage::Resources;
use goodput_tokenizer::Tokenizer;
use goodput_workload::{
    Arrivals, Dataset, DatasetKind, LengthDist, Load, Profile, Rate, Source, ThinkTime, Turns, WorkloadSpec,
};

use crate::args::{BenchArgs, EngineArgs, LoadArgs, OutputArgs, SimArgs, SloArgs, TimeoutArgs, WorkloadArgs};

/// Invalid usage: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(flag: &str, msg: impl std::fmt::Display) -> UsageError {
    UsageError(format!("{flag}: {msg}"))
}

/// Parses `10s`, `250ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(flag: &str, s: &str) -> Result<Duration, UsageError> {
    goodput_metrics::units::seconds(s, 1.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| usage(flag, format!("`{s}` is not a duration of at most 100 days (e.g. 30s, 250ms, 5m, 1h)")))
}

fn positive_duration(flag: &str, s: &str) -> Result<Duration, UsageError> {
    let d = parse_duration(flag, s)?;
    if d.is_zero() {
        return Err(usage(flag, "must be greater than zero"));
    }
    Ok(d)
}

/// `30s` (a duration) or `20` (requests).
fn edge(flag: &str, v: &Option<String>) -> Result<Edge, UsageError> {
    match v.as_deref().map(str::trim) {
        None => Ok(Edge::None),
        Some(t) if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() => {
            Ok(Edge::Requests(t.parse().map_err(|_| usage(flag, format!("`{t}` is too large")))?))
        }
        Some(t) => match parse_duration(flag, t) {
            Ok(d) => Ok(Edge::Seconds(d.as_secs_f64())),
            Err(_) => Err(usage(flag, format!("`{t}`: expected a duration (30s) or a number of requests (20)"))),
        },
    }
}

/// The most concurrent streams (users, or an open loop's cap) one run holds.
const MAX_CONCURRENCY: usize = 100_000;

/// `--rate inf`.
fn infinite_rate(a: &LoadArgs) -> bool {
    a.rate.is_some_and(Rate::is_unbounded)
}

/// The profile asked for, or the one the flags imply.
fn profile_of(a: &LoadArgs) -> Result<Profile, UsageError> {
    Ok(match a.profile {
        Some(p) => p,
        None => match (a.concurrency, &a.rate) {
            (Some(_), Some(_)) => {
                return Err(usage("--rate", "give --concurrency (closed loop) or --rate (open loop), not both"));
            }
            (None, Some(_)) if infinite_rate(a) => Profile::Throughput,
            (None, Some(_)) => Profile::Poisson,
            _ => Profile::Concurrent,
        },
    })
}

/// Refuses flags that do not apply to `profile`, and concurrency values out of range.
fn check_profile_flags(a: &LoadArgs, profile: Profile) -> Result<(), UsageError> {
    let name = profile.name();
    let not_for = |flag: &str| usage(flag, format!("does not apply to the {name} profile"));
    if a.concurrency.is_some() && !matches!(profile, Profile::Concurrent) {
        return Err(not_for("--concurrency"));
    }
    if a.max_concurrency.is_some() && !profile.is_open() {
        return Err(usage("--max-concurrency", "applies to open-loop profiles; closed loops have --concurrency"));
    }
    for (flag, n) in [("--max-concurrency", a.max_concurrency), ("--concurrency", a.concurrency)] {
        match n {
            Some(0) => return Err(usage(flag, "must be at least 1")),
            Some(n) if n > MAX_CONCURRENCY => {
                return Err(usage(flag, format!("{n} is more than the {MAX_CONCURRENCY} streams one client holds")));
            }
            _ => {}
        }
    }
    let needs_rate = matches!(profile, Profile::Constant | Profile::Poisson | Profile::Gamma | Profile::Ramp);
    if a.rate.is_some() && !needs_rate && !(profile == Profile::Throughput && infinite_rate(a)) {
        return Err(not_for("--rate"));
    }
    if a.burstiness.is_some() && profile != Profile::Gamma {
        return Err(not_for("--burstiness"));
    }
    if (a.rate_start.is_some() || a.ramp_duration.is_some()) && profile != Profile::Ramp {
        return Err(not_for(if a.rate_start.is_some() { "--rate-start" } else { "--ramp-duration" }));
    }
    if a.sweep_points.is_some() && profile != Profile::Sweep {
        return Err(not_for("--sweep-points"));
    }
    if a.time_scale.is_some() && profile != Profile::Replay {
        return Err(not_for("--time-scale"));
    }
    Ok(())
}

/// The load of a single-stage run of `profile`.
fn load_of(
    a: &LoadArgs,
    profile: Profile,
    think: &ThinkTime,
    duration: Option<Duration>,
    dataset_has_times: bool,
) -> Result<Load, UsageError> {
    let name = profile.name();
    let the_rate = || -> Result<f64, UsageError> {
        match a.rate {
            Some(Rate::PerSecond(r)) => Ok(r),
            _ => Err(usage("--rate", format!("the {name} profile needs --rate R (requests per second)"))),
        }
    };
    let open_load = |arrivals| Load::Open { arrivals, max_concurrency: a.max_concurrency };
    Ok(match profile {
        Profile::Synchronous => Load::Closed { concurrency: 1, think: think.clone() },
        Profile::Concurrent => Load::Closed { concurrency: a.concurrency.unwrap_or(16), think: think.clone() },
        Profile::Constant => open_load(Arrivals::Constant { rate: the_rate()? }),
        Profile::Poisson => open_load(Arrivals::Poisson { rate: the_rate()? }),
        Profile::Gamma => {
            let b = a.burstiness.ok_or_else(|| usage("--burstiness", "the gamma profile needs --burstiness B"))?;
            if !(b.is_finite() && b > 0.0) {
                return Err(usage("--burstiness", format!("{b} must be positive")));
            }
            open_load(Arrivals::Gamma { rate: the_rate()?, burstiness: b })
        }
        Profile::Throughput | Profile::Sweep => open_load(Arrivals::AllAtOnce),
        Profile::Ramp => {
            let to = the_rate()?;
            let from = a.rate_start.unwrap_or(0.0);
            if !(from.is_finite() && from >= 0.0) {
                return Err(usage("--rate-start", format!("{from} must be zero or positive")));
            }
            let over = match (&a.ramp_duration, duration) {
                (Some(d), _) => positive_duration("--ramp-duration", d)?,
                (None, Some(d)) => d,
                (None, None) => {
                    return Err(usage("--ramp-duration", "the ramp profile needs --ramp-duration or --duration"));
                }
            };
            open_load(Arrivals::Ramp { from, to, over_s: over.as_secs_f64() })
        }
        Profile::Replay => {
            if !dataset_has_times {
                return Err(usage(
                    "--profile",
                    "replay needs arrival times: --dataset azure:PATH, mooncake:PATH, or jsonl:PATH with `timestamp`",
                ));
            }
            let f = a.time_scale.unwrap_or(1.0);
            if !(f.is_finite() && f > 0.0 && f <= 1000.0) {
                return Err(usage("--time-scale", format!("{f} must be positive and at most 1000")));
            }
            open_load(Arrivals::Replay { time_scale: f })
        }
    })
}

/// The load flags, validated.
fn load_plan(a: &LoadArgs, dataset_has_times: bool) -> Result<LoadPlan, UsageError> {
    let profile = profile_of(a)?;
    let think: ThinkTime = match &a.think_time {
        Some(t) => t.parse().map_err(|m| usage("--think-time", m))?,
        None => ThinkTime::default(),
    };
    check_profile_flags(a, profile)?;
    let duration = a.duration.as_deref().map(|d| positive_duration("--duration", d)).transpose()?;
    let load = load_of(a, profile, &think, duration, dataset_has_times)?;
    let sweep = profile == Profile::Sweep;
    let requests = match (a.requests, duration) {
        (Some(0), _) => return Err(usage("--requests", "must be at least 1")),
        (Some(n), _) => Some(n),
        (None, Some(_)) if !sweep => None,
        // a replay runs the whole trace unless told otherwise
        (None, None) if profile == Profile::Replay => None,
        _ => Some(100),
    };
    if requests.is_none() && load.is_all_at_once() {
        // every arrival is due at once: only a request count ends the sending
        return Err(usage(
            "--requests",
            "`--rate inf` / `--profile throughput` sends every request at once and needs --requests N \
             (a --duration alone would never stop it sending)",
        ));
    }
    // every sweep stage is bounded in time as well as in requests
    let duration = if sweep { Some(duration.unwrap_or(Duration::from_secs(30))) } else { duration };
    if a.max_errors == Some(0) {
        return Err(usage("--max-errors", "must be at least 1"));
    }
    let points = if sweep {
        match a.sweep_points.unwrap_or(5) {
            0 => return Err(usage("--sweep-points", "must be at least 1")),
            k if k > 50 => return Err(usage("--sweep-points", "at most 50 stages")),
            k => Some(k),
        }
    } else {
        None
    };
    if sweep && a.export_schedule.is_some() {
        return Err(usage("--export-schedule", "exports one stage's schedule: not with the sweep profile"));
    }
    let (warmup, cooldown) = (edge("--warmup", &a.warmup)?, edge("--cooldown", &a.cooldown)?);
    edges_leave_requests(requests, &warmup, &cooldown)?;
    Ok(LoadPlan {
        profile,
        load,
        sweep_points: points,
        max_concurrency: a.max_concurrency,
        requests,
        duration,
        warmup,
        cooldown,
        max_errors: a.max_errors,
        grace: parse_duration("--grace", &a.grace)?,
        export_schedule: match &a.export_schedule {
            Some(p) => writable("--export-schedule", p).map(|()| Some(p.clone()))?,
            None => None,
        },
        think_time: think,
        seed: a.seed,
        shard: shard_of(a, sweep)?,
        start_at: start_at_of(a)?,
    })
}

/// `--shard I/N`, validated (not with the sweep profile: its stages follow measurements, which
/// differ between shards).
fn shard_of(a: &LoadArgs, sweep: bool) -> Result<Option<goodput_workload::Shard>, UsageError> {
    let Some(s) = &a.shard else { return Ok(None) };
    let shard = s.parse::<goodput_workload::Shard>().map_err(|e| usage("--shard", e))?;
    if sweep {
        return Err(usage("--shard", "not with the sweep profile (each shard would measure its own stages)"));
    }
    Ok(Some(shard))
}

/// `--start-at`, parsed and checked against now.
fn start_at_of(a: &LoadArgs) -> Result<Option<goodput_results::shards::StartAt>, UsageError> {
    use goodput_results::shards::{StartAt, check_start_at, parse_start_at};
    let Some(s) = &a.start_at else { return Ok(None) };
    let ns = parse_start_at(s).map_err(|e| usage("--start-at", e))?;
    check_start_at(s, ns, goodput_results::unix_ns()).map_err(|e| usage("--start-at", e))?;
    Ok(Some(StartAt { requested: goodput_results::format_rfc3339_ns(ns), clock: None }))
}

/// A warm-up and cool-down counted in requests must leave at least one of `--requests` to
/// measure (otherwise every request is excluded and the summary has nothing to say).
fn edges_leave_requests(requests: Option<u64>, warmup: &Edge, cooldown: &Edge) -> Result<(), UsageError> {
    let n = |e: &Edge| if let Edge::Requests(k) = e { *k } else { 0 };
    let (w, c) = (n(warmup), n(cooldown));
    match requests {
        Some(total) if w.saturating_add(c) >= total => {
            let flag = if w > 0 { "--warmup" } else { "--cooldown" };
            Err(usage(
                flag,
                format!(
                    "--warmup {w} and --cooldown {c} requests leave none of --requests {total} to measure: \
                     raise --requests above {} or lower them",
                    w.saturating_add(c)
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Load and workload together: the dataset decides whether `replay` is possible, the profile
/// whether the dataset cycles, and the think time applies to both.
pub fn load_and_workload(l: &LoadArgs, w: &WorkloadArgs) -> Result<(LoadPlan, WorkloadPlan, Resources), UsageError> {
    let replay = l.profile == Some(Profile::Replay);
    let (spec, res) = workload_spec(w, l.seed, replay)?;
    let has_times = res.dataset.as_ref().is_some_and(|d| d.has_times());
    let load = load_plan(l, has_times)?;
    let workload = workload_plan(spec, &res, &load.think_time);
    Ok((load, workload, res))
}

/// The workload flags as a plan, seeded, for a load that is not a replay.
pub fn workload(w: &WorkloadArgs, seed: u64) -> Result<(WorkloadPlan, Resources), UsageError> {
    let (spec, res) = workload_spec(w, seed, false)?;
    Ok((workload_plan(spec, &res, &ThinkTime::default()), res))
}

fn workload_plan(mut spec: WorkloadSpec, res: &Resources, think: &ThinkTime) -> WorkloadPlan {
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

fn length(flag: &str, s: &str) -> Result<LengthDist, UsageError> {
    let mut d: LengthDist = s.parse().map_err(|m| usage(flag, m))?;
    if let LengthDist::Empirical { path, values } = &mut d {
        let text = std::fs::read_to_string(Path::new(path.as_str()))
            .map_err(|e| usage(flag, format!("cannot read {path}: {e}")))?;
        *values = LengthDist::parse_values(path, &text).map_err(|e| usage(flag, e))?;
    }
    Ok(d)
}

/// The workload flags, validated, with the tokenizer and dataset loaded. `replay`: the dataset
/// is used once, in order.
fn workload_spec(a: &WorkloadArgs, seed: u64, replay: bool) -> Result<(WorkloadSpec, Resources), UsageError> {
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
    let turns = match a.turns.as_deref().map(str::trim) {
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
        Source::Dataset(d) if multi && d.kind != DatasetKind::ShareGpt => {
            return Err(usage(
                "--sessions",
                format!("multi-turn sessions come from sharegpt or synthetic, not {}", d.kind.name()),
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
    let spec = WorkloadSpec {
        source,
        input_tokens: length("--input-tokens", a.input_tokens.as_deref().unwrap_or(DEFAULT_INPUT_TOKENS))?,
        output_tokens: length("--output-tokens", a.output_tokens.as_deref().unwrap_or(DEFAULT_OUTPUT_TOKENS))?,
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

impl TimeoutArgs {
    pub fn plan(&self) -> Result<Timeouts, UsageError> {
        Ok(Timeouts {
            connect: positive_duration("--timeout-connect", &self.timeout_connect)?,
            first_token: positive_duration("--timeout-first-token", &self.timeout_first_token)?,
            idle: positive_duration("--timeout-idle", &self.timeout_idle)?,
            total: positive_duration("--timeout-total", &self.timeout_total)?,
            stall: self.timeout_stall.as_deref().map(|s| positive_duration("--timeout-stall", s)).transpose()?,
        })
    }
}

fn ms(flag: &str, v: &Option<String>) -> Result<Option<f64>, UsageError> {
    v.as_deref().map(|d| parse_duration(flag, d).map(|d| d.as_secs_f64() * 1000.0)).transpose()
}

/// The SLO flags, validated, with the smoothed-goodput parameters resolved.
pub fn slo_plan(a: &SloArgs) -> Result<SloPlan, UsageError> {
    let mut slo: Option<Slo> = None;
    for p in &a.slo_preset {
        let s = Slo::preset(p).map_err(|m| usage("--slo-preset", m))?;
        slo.get_or_insert_with(Slo::default).extend(s);
    }
    for text in &a.slo {
        let s = Slo::parse(text).map_err(|m| usage("--slo", m))?;
        slo.get_or_insert_with(Slo::default).extend(s);
    }
    let overrides = [&a.ttft_budget, &a.reading_pace, &a.delay_ok, &a.delay_max];
    let Some(slo) = slo else {
        if overrides.iter().any(|o| o.is_some()) {
            return Err(usage("--ttft-budget", "smoothed goodput needs an SLO (--slo or --slo-preset)"));
        }
        return Ok(SloPlan::default());
    };
    let mut sm = Smoothing::from_slo(&slo);
    let t0 = ms("--ttft-budget", &a.ttft_budget)?;
    if sm.is_none() && t0.is_some() {
        sm = Some(Smoothing { t0_ms: 0.0, tau_ms: 0.0, u_ok_ms: 0.0, u_max_ms: 0.0 });
    }
    if let Some(s) = &mut sm {
        if let Some(t0) = t0 {
            *s = Smoothing { t0_ms: t0, u_ok_ms: t0, u_max_ms: 5.0 * t0, ..*s };
        }
        if let Some(v) = ms("--reading-pace", &a.reading_pace)? {
            s.tau_ms = v;
        }
        if let Some(v) = ms("--delay-ok", &a.delay_ok)? {
            s.u_ok_ms = v;
        }
        if let Some(v) = ms("--delay-max", &a.delay_max)? {
            s.u_max_ms = v;
        }
        if s.u_max_ms < s.u_ok_ms {
            return Err(usage("--delay-max", "must not be below --delay-ok"));
        }
    }
    Ok(SloPlan { predicates: slo, smoothing: sm })
}

/// The output flags, validated (the result file can be written).
fn output_plan(a: &OutputArgs) -> Result<OutputPlan, UsageError> {
    if let Some(p) = &a.out {
        writable("--out", p)?;
    }
    if let Some(h) = &a.html {
        writable("--html", h)?;
        if a.out.as_ref().is_some_and(|o| same_file(o, h)) {
            return Err(usage("--html", "must differ from --out"));
        }
    }
    Ok(OutputPlan { out: a.out.clone(), percentiles: a.percentiles, records: a.records })
}

/// `STEM.requests.jsonl` beside the result file.
pub fn jsonl_path(out: &OutputPlan) -> Option<std::path::PathBuf> {
    let p = out.out.as_ref()?;
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "results".into());
    Some(p.with_file_name(format!("{stem}.requests.jsonl")))
}

/// Reads a result document given as an argument: any file that cannot be read as one (missing,
/// a directory, not JSON, another tool's results) is a usage error (exit 2) naming the file.
pub fn read_doc(path: &Path) -> Result<goodput_results::ResultDoc, UsageError> {
    goodput_results::ResultDoc::read(path).map_err(|e| UsageError(e.to_string()))
}

/// Checks before a run that a file can be written at `path`, so a long run never ends in an error
/// about its output: its directory exists and takes new files (results are written to a temporary
/// file there and renamed), and `path` is absent or a regular file (not a directory, a FIFO or a
/// dangling link). Nothing existing is opened or changed; the probe file is removed.
pub fn writable(flag: &str, path: &Path) -> Result<(), UsageError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(usage(flag, format!("directory {} does not exist", dir.display())));
    }
    match (std::fs::symlink_metadata(path), std::fs::metadata(path)) {
        (Err(_), _) => {}
        (Ok(_), Ok(m)) if m.is_file() => {}
        (Ok(_), Ok(m)) if m.is_dir() => {
            return Err(usage(flag, format!("{} is a directory; give a file name", path.display())));
        }
        (Ok(_), Ok(_)) => return Err(usage(flag, format!("{} is not a regular file", path.display()))),
        (Ok(_), Err(_)) => return Err(usage(flag, format!("{} is a dangling symbolic link", path.display()))),
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let probe = dir.join(format!(".{name}.{}.goodput-probe", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| usage(flag, format!("cannot write in {}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Refuses a run that would write one file twice, or over its own input: `--out`, its JSONL log,
/// `--export-schedule` and the `--dataset` file must all differ.
fn distinct_files(load: &LoadPlan, w: &WorkloadArgs, out: &OutputPlan) -> Result<(), UsageError> {
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

fn dtype(flag: &str, v: &str) -> Result<Dtype, UsageError> {
    Dtype::parse(v).ok_or_else(|| usage(flag, format!("`{v}`: expected bf16, fp8 or fp4")))
}

/// An engine setting by its name.
fn named<T: Named>(flag: &str, v: &str) -> Result<T, UsageError> {
    T::from_name(v).map_err(|m| usage(flag, m))
}

fn fraction(flag: &str, x: f64) -> Result<f64, UsageError> {
    if x > 0.0 && x <= 1.0 { Ok(x) } else { Err(usage(flag, format!("{x} must be in (0, 1]"))) }
}

/// The built-in catalog, with `--gpu-spec`'s GPUs added.
pub fn catalog(gpu_spec: Option<&std::path::Path>) -> Result<Catalog, UsageError> {
    let mut catalog = Catalog::builtin();
    if let Some(p) = gpu_spec {
        let text =
            std::fs::read_to_string(p).map_err(|e| usage("--gpu-spec", format!("cannot read {}: {e}", p.display())))?;
        catalog.add_gpu_file(&p.display().to_string(), &text).map_err(|e| usage("--gpu-spec", e))?;
    }
    Ok(catalog)
}

/// The catalog model `model` (default llama-3.1-8b) or `--model-config`, on `--gpu`, with every
/// engine flag applied ([`engine_spec`]) and the configuration checked (it must fit in memory).
pub fn engine_plan(model: Option<&str>, a: &EngineArgs) -> Result<EnginePlan, UsageError> {
    let catalog = catalog(a.gpu_spec.as_deref())?;
    let arch = model_arch(model, a.model_config.as_deref(), &catalog)?;
    let gpu = catalog.gpu(a.gpu.as_deref().unwrap_or("h100")).map_err(|e| usage("--gpu", e))?.clone();
    let spec = engine_spec(a, &catalog, gpu.link_gbs)?;
    EnginePlan::new(spec.build(arch, gpu)).map_err(|e| UsageError(e.to_string()))
}

/// The model: `--model-config`'s Hugging Face `config.json` (named by `--model`, or its folder),
/// or `--model` from the catalog (default llama-3.1-8b).
pub fn model_arch(model: Option<&str>, config: Option<&Path>, catalog: &Catalog) -> Result<ModelArch, UsageError> {
    Ok(match config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| usage("--model-config", format!("cannot read {}: {e}", p.display())))?;
            let default_name = p
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().to_lowercase())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "custom-model".into());
            let name = model.map(str::to_string).unwrap_or(default_name);
            goodput_engine::catalog::from_hf_config(&p.display().to_string(), &text, &name)
                .map_err(|e| usage("--model-config", e))?
        }
        None => catalog.model(model.unwrap_or("llama-3.1-8b")).map_err(|e| usage("--model", e))?.clone(),
    })
}

/// The engine flags as typed choices, each checked once, naming its flag.
pub fn engine_spec(a: &EngineArgs, catalog: &Catalog, link_gbs: f64) -> Result<EngineSpec, UsageError> {
    let mut s =
        EngineSpec { preset: a.preset.as_deref().map(|v| named("--engine", v)).transpose()?, ..Default::default() };
    sizes(&mut s, a)?;
    mechanisms(&mut s, a, catalog)?;
    deployment(&mut s, a, link_gbs)?;
    efficiency(&mut s, a)?;
    Ok(s)
}

/// Parallelism, number formats, batch limits and memory.
fn sizes(s: &mut EngineSpec, a: &EngineArgs) -> Result<(), UsageError> {
    s.tp = a.tp;
    s.dtype = a.dtype.as_deref().map(|d| dtype("--dtype", d)).transpose()?;
    s.kv_dtype = a.kv_dtype.as_deref().map(|d| dtype("--kv-dtype", d)).transpose()?;
    s.max_num_seqs = a.max_num_seqs;
    s.max_batched_tokens = a.max_batched_tokens;
    s.gpu_memory_utilization = a.gpu_memory_utilization.map(|v| fraction("--gpu-memory-utilization", v)).transpose()?;
    s.block_size = a.block_size;
    s.max_model_len = a.max_model_len;
    s.cpu_offload_gb = a.cpu_offload_gb;
    if a.max_waiting == Some(0) {
        return Err(usage("--max-waiting", "must be at least 1"));
    }
    s.max_waiting = a.max_waiting;
    Ok(())
}

/// Batching, prefill scheduling, KV allocation, prefix caching, speculative decoding.
fn mechanisms(s: &mut EngineSpec, a: &EngineArgs, catalog: &Catalog) -> Result<(), UsageError> {
    s.scheduling = a.scheduling.as_deref().map(|v| named("--scheduling", v)).transpose()?;
    if a.chunked_prefill {
        if a.scheduling.as_deref().is_some_and(|v| v != "chunked") {
            return Err(usage("--chunked-prefill", "is --scheduling chunked: give one of them"));
        }
        s.scheduling = Some(Scheduling::Chunked);
    }
    s.batching = a.batching.as_deref().map(|v| named("--batching", v)).transpose()?;
    if let Some(d) = &a.batch_timeout {
        if s.batching != Some(Batching::Static) {
            return Err(usage("--batch-timeout", "applies to --batching static"));
        }
        s.batch_timeout_s = Some(parse_duration("--batch-timeout", d)?.as_secs_f64());
    }
    s.kv_alloc = a.kv_alloc.as_deref().map(|v| named("--kv-alloc", v)).transpose()?;
    if let Some(v) = &a.prealloc {
        if s.kv_alloc != Some(KvAlloc::Prealloc) {
            return Err(usage("--prealloc", "applies to --kv-alloc prealloc"));
        }
        s.prealloc = Some(named("--prealloc", v)?);
    }
    s.prefix_caching = match a.prefix_caching.as_deref() {
        None => None,
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(v) => return Err(usage("--prefix-caching", format!("`{v}`: expected on or off"))),
    };
    if let Some(text) = &a.speculative {
        let lookup = |name: &str| catalog.model(name).cloned().map_err(|e| e.to_string());
        s.speculative = Some(Speculative::parse(text, lookup).map_err(|m| usage("--speculative", m))?);
    }
    Ok(())
}

/// Replicas and routing, or prefill/decode disaggregation.
fn deployment(s: &mut EngineSpec, a: &EngineArgs, link_gbs: f64) -> Result<(), UsageError> {
    if a.replicas == Some(0) {
        return Err(usage("--replicas", "must be at least 1"));
    }
    s.replicas = a.replicas;
    if let Some(v) = &a.router {
        if a.replicas.unwrap_or(1) < 2 {
            return Err(usage("--router", "picks among --replicas N (2 or more)"));
        }
        s.router = Some(named("--router", v)?);
    }
    match &a.disaggregate {
        Some(spec) => {
            if a.replicas.is_some() {
                return Err(usage(
                    "--replicas",
                    "is for colocated engines; with --disaggregate give prefill=P,decode=D",
                ));
            }
            let link = Link::parse(a.link.as_deref().unwrap_or("100gbps"), link_gbs).map_err(|m| usage("--link", m))?;
            s.disaggregation = Some(Disaggregation::parse(spec, link, a.ppd).map_err(|m| usage("--disaggregate", m))?);
        }
        None => {
            for (flag, given) in [("--link", a.link.is_some()), ("--ppd", a.ppd)] {
                if given {
                    return Err(usage(flag, "applies to --disaggregate prefill=P,decode=D"));
                }
            }
        }
    }
    Ok(())
}

/// The step-time model's efficiencies and overheads.
fn efficiency(s: &mut EngineSpec, a: &EngineArgs) -> Result<(), UsageError> {
    for (flag, v) in [("--mfu", a.mfu), ("--mbu", a.mbu)] {
        if v.is_some_and(|x| x < 0.01) {
            return Err(usage(flag, "must be at least 0.01 (a utilization, like 0.38)"));
        }
    }
    s.mfu = a.mfu.map(|v| fraction("--mfu", v)).transpose()?;
    s.mbu = a.mbu.map(|v| fraction("--mbu", v)).transpose()?;
    let seconds = |flag: &str, d: &Option<String>| -> Result<Option<f64>, UsageError> {
        d.as_deref().map(|d| parse_duration(flag, d).map(|d| d.as_secs_f64())).transpose()
    };
    s.step_overhead_s = seconds("--step-overhead", &a.step_overhead)?;
    s.seq_overhead_s = seconds("--seq-overhead", &a.seq_overhead)?;
    s.ingest_s = seconds("--ingest-overhead", &a.ingest_overhead)?;
    s.ingest_per_token_s = seconds("--ingest-per-token", &a.ingest_per_token)?;
    Ok(())
}

/// A validated plan, with what it names loaded.
pub struct Planned {
    pub plan: RunPlan,
    pub res: Resources,
    /// `--ca-cert`'s contents.
    pub ca_pem: Option<Vec<u8>>,
    /// No progress bar (`-q`).
    pub quiet: bool,
    /// `--html`: the HTML report written after the run (not part of the run's plan).
    pub html: Option<std::path::PathBuf>,
}

/// Whether two paths name one file (compared as absolute paths).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    abs(a) == abs(b)
}

/// The request fields the client sets itself, and what sets each instead of `--extra-body`.
const CLIENT_FIELDS: &[(&str, &str)] = &[
    ("model", "--model"),
    ("prompt", "--dataset / --input-tokens"),
    ("messages", "--dataset / --input-tokens"),
    ("max_tokens", "--output-tokens"),
    ("max_completion_tokens", "--output-tokens"),
    ("stream", "nothing: the client always streams, and measures the stream"),
    ("stream_options", "nothing: the client always asks for usage in the stream"),
    ("n", "nothing: the client measures one choice per request"),
];

/// Refuses `--extra-body` fields that would override what the client sends and measures (a
/// silent `"stream": false` fails every request with a misleading message; `"max_tokens"`
/// diverges from the lengths the results report). `ignore_eos`/`min_tokens` are the client's
/// unless `--no-ignore-eos` is given.
fn extra_body_owned_fields(m: &serde_json::Map<String, serde_json::Value>, ignore_eos: bool) -> Result<(), UsageError> {
    for key in m.keys() {
        let instead = CLIENT_FIELDS.iter().find(|(k, _)| k == key).map(|(_, f)| *f).or_else(|| {
            (ignore_eos && matches!(key.as_str(), "ignore_eos" | "min_tokens"))
                .then_some("--output-tokens (fixed lengths), or --no-ignore-eos to set it yourself")
        });
        if let Some(instead) = instead {
            return Err(usage("--extra-body", format!("`{key}` is set by the client; use {instead}")));
        }
    }
    Ok(())
}

/// The endpoint to call: `--api`, else the one a full endpoint `--url` names, else completions;
/// a `--url` naming one endpoint and an `--api` naming the other are refused.
fn api_of(a: &BenchArgs) -> Result<goodput_client::Api, UsageError> {
    let named = a.url.as_deref().and_then(goodput_client::http::endpoint_in_url);
    match (a.api, named) {
        (Some(api), Some(n)) if api != n => Err(usage(
            "--api",
            format!(
                "--url names the {} endpoint ({}): drop --api or change --url",
                n.path(),
                a.url.as_deref().unwrap_or("")
            ),
        )),
        (Some(api), _) => Ok(api),
        (None, Some(n)) => Ok(n),
        (None, None) => Ok(goodput_client::Api::default()),
    }
}

/// A size in bytes: `16MiB`, `512KiB`, `1MB`, `1000000` (at least 1 KiB).
pub fn parse_size(flag: &str, s: &str) -> Result<u64, UsageError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(usage(flag, format!("`{s}` is not a size (e.g. 16MiB, 512KiB, 1000000)"))),
    };
    let n = num
        .parse::<f64>()
        .ok()
        .map(|n| n * mult)
        .filter(|b| b.is_finite() && *b >= 1024.0 && *b <= 1e12)
        .ok_or_else(|| usage(flag, format!("`{s}` is not a size between 1KiB and 1TB (e.g. 16MiB)")))?;
    Ok(n as u64)
}

/// A validated `goodput bench`.
pub fn bench(a: &BenchArgs) -> Result<Planned, UsageError> {
    let target = match &a.url {
        Some(u) => {
            if a.engine != EngineArgs::default() {
                return Err(usage(
                    "--url",
                    "engine flags (--gpu, --tp, --dtype, …) describe the embedded engine: drop them or drop --url",
                ));
            }
            TargetPlan::Url { url: goodput_client::http::normalize_base(u).map_err(|e| usage("--url", e))? }
        }
        None => TargetPlan::Embedded { engine: Box::new(engine_plan(a.model.as_deref(), &a.engine)?) },
    };
    let extra_body = match &a.extra_body {
        Some(j) => match serde_json::from_str::<serde_json::Value>(j) {
            Ok(serde_json::Value::Object(m)) => {
                extra_body_owned_fields(&m, !a.no_ignore_eos)?;
                Some(m)
            }
            _ => {
                return Err(usage("--extra-body", "expected a JSON object, e.g. '{\"temperature\": 0}'"));
            }
        },
        None => None,
    };
    if a.api_key_env.is_empty() {
        return Err(usage("--api-key-env", "expected an environment variable name"));
    }
    let (load, workload, res) = load_and_workload(&a.load, &a.workload)?;
    if let TargetPlan::Embedded { engine } = &target {
        check_workload_fits(engine, &workload)?;
    }
    let ca_pem = match &a.ca_cert {
        Some(p) => {
            if a.url.is_none() {
                return Err(usage("--ca-cert", "applies to an https --url"));
            }
            let pem = std::fs::read(p).map_err(|e| usage("--ca-cert", format!("cannot read {}: {e}", p.display())))?;
            goodput_client::http::ca_certificates(&pem)
                .map_err(|e| usage("--ca-cert", format!("{}: {e}", p.display())))?;
            Some(pem)
        }
        None => None,
    };
    let output = output_plan(&a.output)?;
    distinct_files(&load, &a.workload, &output)?;
    let scrape = scrape_plan(a, &target)?;
    let plan = RunPlan {
        ca_cert: a.ca_cert.clone(),
        target: Some(target),
        engine: None,
        api: Some(api_of(a)?),
        max_event_bytes: Some(parse_size("--max-event-size", &a.max_event_size)?),
        model: a.model.clone(),
        api_key_env: Some(a.api_key_env.clone()),
        ignore_eos: !a.no_ignore_eos,
        extra_body,
        retries: Some(a.retries),
        workload,
        load,
        timeouts: Some(a.timeouts.plan()?),
        slo: slo_plan(&a.slo)?,
        output,
        scrape,
    };
    Ok(Planned { plan, res, ca_pem, quiet: a.output.quiet, html: a.output.html.clone() })
}

/// `--scrape-metrics [URL]` and `--scrape-interval`: on for the embedded engine whatever the
/// flags say (it serves `/metrics` itself), on for a URL only when asked.
fn scrape_plan(a: &BenchArgs, target: &TargetPlan) -> Result<Option<ScrapePlan>, UsageError> {
    let interval = parse_duration("--scrape-interval", &a.scrape_interval)?;
    if interval < Duration::from_millis(10) {
        return Err(usage("--scrape-interval", "at least 10ms (each scrape is an HTTP request to the server)"));
    }
    let url = match &a.scrape_metrics {
        Some(u) if !u.trim().is_empty() => {
            goodput_client::http::normalize_base(u).map_err(|e| usage("--scrape-metrics", e))?;
            Some(u.trim().to_string())
        }
        _ => None,
    };
    let on = a.scrape_metrics.is_some() || matches!(target, TargetPlan::Embedded { .. });
    Ok(on.then_some(ScrapePlan { url, interval }))
}

/// Refuses a synthetic workload whose every request the engine model would refuse, naming the
/// flag, instead of a run where all requests fail
/// ([`goodput_decide::planner::smallest_request_fits`]).
pub fn check_workload_fits(engine: &EnginePlan, w: &WorkloadPlan) -> Result<(), UsageError> {
    goodput_decide::planner::smallest_request_fits(&engine.config, w).map_err(|m| usage("--input-tokens", m))
}

/// A validated `goodput sim`.
/// The waiting-queue bound of a simulated offline run without `--max-waiting` (more requests
/// than one simulated run holds, so none is ever refused for it).
pub const UNBOUNDED_WAITING: usize = u32::MAX as usize;

/// Everything is sent at once (`--rate inf`, `throughput`), or a sweep that ends with such a stage.
fn offline_load(load: &LoadPlan) -> bool {
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
    Ok(Planned { plan, res, ca_pem: None, quiet: a.output.quiet, html: a.output.html.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Cli;
    use clap::Parser;

    fn bench(args: &[&str]) -> Result<RunPlan, UsageError> {
        let mut v = vec!["goodput", "bench"];
        v.extend_from_slice(args);
        let cli = Cli::try_parse_from(v).expect("clap parse");
        let crate::args::Command::Bench(b) = cli.command else { panic!("bench") };
        super::bench(&b).map(|p| p.plan)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("f", "250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("f", "2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("f", "1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("f", "soon").is_err());
        assert!(parse_duration("f", "-1s").is_err());
    }

    #[test]
    fn defaults() {
        let p = bench(&["--url", "http://127.0.0.1:9/v1/"]).unwrap();
        assert!(matches!(&p.target, Some(TargetPlan::Url { url }) if url == "http://127.0.0.1:9"));
        assert_eq!(p.load.requests, Some(100));
        assert!(p.ignore_eos);
        assert_eq!(p.workload.spec.input_tokens, LengthDist::Fixed(512));
        assert!(matches!(p.load.load, Load::Closed { concurrency: 16, .. }));
    }

    #[test]
    fn a_bad_rate_is_refused_where_the_flags_are_read_naming_the_flag() {
        for bad in ["--rate=-3", "--rate=1e-300", "--rate=fast"] {
            let e = Cli::try_parse_from(["goodput", "bench", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let text = e.to_string();
            assert!(text.contains("--rate") && text.contains("requests per second of at least 0.001"), "{text}");
        }
    }

    #[test]
    fn rate_and_duration() {
        let p = bench(&["--url", "http://h:1", "--rate", "2.5", "--duration", "30s"]).unwrap();
        assert_eq!(p.load.requests, None);
        assert_eq!(p.load.load.offered_rate(), Some(2.5));
        let p = bench(&["--url", "http://h:1", "--rate", "inf"]).unwrap();
        assert!(matches!(p.load.load, Load::Open { arrivals: Arrivals::AllAtOnce, .. }));
    }

    #[test]
    fn all_at_once_needs_a_request_count() {
        for args in [["--profile", "throughput"], ["--rate", "inf"]] {
            let mut v = vec!["--url", "http://h:1", "--duration", "10s"];
            v.extend_from_slice(&args);
            let e = bench(&v).unwrap_err().to_string();
            assert!(e.starts_with("--requests:") && e.contains("--rate inf"), "{e}");
            v.extend_from_slice(&["--requests", "1000"]);
            assert_eq!(bench(&v).unwrap().load.requests, Some(1000));
        }
        let cli = Cli::try_parse_from(["goodput", "sim", "--rate", "inf", "--duration", "60s"]).expect("clap parse");
        let crate::args::Command::Sim(a) = cli.command else { panic!("sim") };
        let e = super::sim(&a).err().expect("refused").to_string();
        assert!(e.starts_with("--requests:"), "{e}");
    }

    #[test]
    fn offline_sim_queues_without_bound_unless_told() {
        let sim = |args: &[&str]| {
            let mut v = vec!["goodput", "sim"];
            v.extend_from_slice(args);
            let cli = Cli::try_parse_from(v).expect("clap parse");
            let crate::args::Command::Sim(a) = cli.command else { panic!("sim") };
            super::sim(&a).map(|p| p.plan.engine.expect("engine").config.max_waiting).expect("plan")
        };
        assert_eq!(sim(&["--rate", "inf", "--requests", "10"]), UNBOUNDED_WAITING);
        assert_eq!(sim(&["--profile", "throughput", "--requests", "10"]), UNBOUNDED_WAITING);
        // asked for: kept
        assert_eq!(sim(&["--rate", "inf", "--requests", "10", "--max-waiting", "7"]), 7);
        // a rate keeps the server's default bound
        assert_eq!(sim(&["--rate", "5", "--requests", "10"]), 100_000);
    }

    #[test]
    fn errors_name_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--url", "ftp://x"], "--url"),
            (&["--url", "http://h:1", "--concurrency", "0"], "--concurrency"),
            (&["--url", "http://h:1", "--input-tokens", "uniform:9..1"], "--input-tokens"),
            (&["--url", "http://h:1", "--output-tokens", "file:/nonexistent"], "--output-tokens"),
            (&["--url", "http://h:1", "--tokenizer", "/nonexistent.json"], "--tokenizer"),
            (&["--url", "http://h:1", "--timeout-idle", "0s"], "--timeout-idle"),
            (&["--url", "http://h:1", "--extra-body", "[1]"], "--extra-body"),
            (&["--url", "http://h:1", "--out", "/nonexistent/dir/r.json"], "--out"),
            (&["--url", "http://h:1", "--out", "/proc/r.json"], "--out"),
            (&["--url", "http://h:1", "--export-schedule", "/nonexistent/s.jsonl"], "--export-schedule"),
            (&["--url", "http://h:1", "--export-schedule", "/tmp/x.json", "--out", "/tmp/x.json"], "--export-schedule"),
            (
                &["--url", "http://h:1", "--export-schedule", "/tmp/x.requests.jsonl", "--out", "/tmp/x.json"],
                "--export-schedule",
            ),
            (&["--url", "http://h:1", "--out", "/dev/null"], "--out"),
            (
                &["--url", "http://h:1", "--dataset", "jsonl:/tmp/goodput-d.json", "--out", "/tmp/goodput-d.json"],
                "--dataset",
            ),
            // values so large they would overflow a timer or an allocation
            (&["--url", "http://h:1", "--duration", "1e30"], "--duration"),
            (&["--url", "http://h:1", "--timeout-total", "1e30s"], "--timeout-total"),
            (&["--url", "http://h:1", "--grace", "1e300"], "--grace"),
            (&["--url", "http://h:1", "--concurrency", "2", "--think-time", "1e30s"], "--think-time"),
            (&["--url", "http://h:1", "--input-tokens", "4000000000"], "--input-tokens"),
            (&["--url", "http://h:1", "--concurrency", "100000000"], "--concurrency"),
            // the embedded engine would refuse every request
            (
                &["--scheduling", "prefill-first", "--max-batched-tokens", "256", "--input-tokens", "512"],
                "--input-tokens",
            ),
            (&["--engine", "tgi"], "--engine"),
            (&["--router", "least-loaded"], "--router"),
            (&["--replicas", "0"], "--replicas"),
            (&["--ppd"], "--ppd"),
            (&["--disaggregate", "prefill=1"], "--disaggregate"),
            (&["--disaggregate", "prefill=1,decode=1", "--link", "fast"], "--link"),
            (&["--prefix-caching", "maybe"], "--prefix-caching"),
            (&["--mbu", "1e-300"], "--mbu"),
            (&["--input-tokens", "131000", "--output-tokens", "1000", "--chunked-prefill"], "--input-tokens"),
        ];
        for (args, flag) in cases {
            let e = bench(args).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn outputs_must_not_overwrite_the_dataset() {
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/replay_small.jsonl");
        let dataset = format!("jsonl:{fixture}");
        let e = bench(&["--url", "http://h:1", "--dataset", &dataset, "--out", fixture]).unwrap_err().to_string();
        assert!(e.starts_with("--out") && e.contains("is also --dataset"), "{e}");
        let e = bench(&["--url", "http://h:1", "--dataset", &dataset, "--export-schedule", fixture])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--export-schedule") && e.contains("is also --dataset"), "{e}");
    }

    #[test]
    fn writable_checks_without_touching() {
        let dir = std::env::temp_dir().join(format!("goodput-writable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // an existing file is neither truncated nor removed; a new one is not left behind
        let existing = dir.join("r.json");
        std::fs::write(&existing, "keep").unwrap();
        writable("--out", &existing).unwrap();
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep");
        let fresh = dir.join("new.json");
        writable("--out", &fresh).unwrap();
        assert!(!fresh.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no probe left");
        // a dangling link and a directory are refused
        let link = dir.join("dangling.json");
        std::os::unix::fs::symlink(dir.join("nowhere/x"), &link).unwrap();
        assert!(writable("--out", &link).unwrap_err().to_string().contains("dangling"));
        assert!(writable("--out", &dir).unwrap_err().to_string().contains("directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn embedded_engine_by_default() {
        let p = bench(&[]).unwrap();
        let Some(TargetPlan::Embedded { engine }) = &p.target else { panic!("embedded") };
        assert_eq!(engine.config.model.name, "llama-3.1-8b");
        assert_eq!(engine.config.gpu.name, "h100");
        assert!(engine.memory.kv_blocks > 0);
        let p = bench(&["--model", "llama-2-70b", "--gpu", "h100", "--tp", "2", "--dtype", "fp8"]).unwrap();
        let Some(TargetPlan::Embedded { engine }) = &p.target else { panic!("embedded") };
        assert_eq!((engine.config.tp, engine.config.dtype), (2, Dtype::Fp8));
    }

    #[test]
    fn a_model_that_does_not_fit_is_refused_with_the_fix() {
        let e = bench(&["--model", "llama-2-70b"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "llama-2-70b in bf16 needs 138 GB of weights; one h100 offers 72 GB at 0.9 utilization: use --tp 2 or more, or --dtype fp8"
        );
    }

    #[test]
    fn plan_serializes_without_secrets() {
        let p = bench(&["--url", "http://h:1", "--api-key-env", "MY_KEY"]).unwrap();
        let j = serde_json::to_string(&p).unwrap();
        assert!(j.contains("\"api_key_env\":\"MY_KEY\""));
    }
}
