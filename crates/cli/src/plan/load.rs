//! The load flags: profile, rate, concurrency, bounds, warm-up and cool-down, shards and a
//! synchronized start.

use super::*;

/// `30s` (a duration) or `20` (requests).
pub(super) fn edge(flag: &str, v: &Option<String>) -> Result<Edge, UsageError> {
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
pub(super) const MAX_CONCURRENCY: usize = 100_000;

/// `--rate inf`.
pub(super) fn infinite_rate(a: &LoadArgs) -> bool {
    a.rate.is_some_and(Rate::is_unbounded)
}

/// The profile asked for, or the one the flags imply.
pub(super) fn profile_of(a: &LoadArgs) -> Result<Profile, UsageError> {
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
pub(super) fn check_profile_flags(a: &LoadArgs, profile: Profile) -> Result<(), UsageError> {
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
    Ok(())
}

/// The load of a single-stage run of `profile`.
pub(super) fn load_of(
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
pub(super) fn load_plan(a: &LoadArgs, dataset_has_times: bool) -> Result<LoadPlan, UsageError> {
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
        stop_over_saturated: a.stop_over_saturated,
        grace: parse_duration("--grace", &a.grace)?,
        export_schedule: match &a.export_schedule {
            Some(p) => writable("--export-schedule", p).map(|()| Some(p.clone()))?,
            None => None,
        },
        think_time: think,
        pause_scale: match (profile, a.time_scale) {
            (Profile::Replay, _) | (_, None) => None,
            (_, Some(f)) if !(f.is_finite() && f > 0.0 && f <= 1000.0) => {
                return Err(usage("--time-scale", format!("{f} must be positive and at most 1000")));
            }
            (_, Some(f)) => Some(f),
        },
        seed: a.seed,
        shard: shard_of(a, sweep)?,
        start_at: start_at_of(a)?,
    })
}

/// `--shard I/N`, validated (not with the sweep profile: its stages follow measurements, which
/// differ between shards).
pub(super) fn shard_of(a: &LoadArgs, sweep: bool) -> Result<Option<goodput_workload::Shard>, UsageError> {
    let Some(s) = &a.shard else { return Ok(None) };
    let shard = s.parse::<goodput_workload::Shard>().map_err(|e| usage("--shard", e))?;
    if sweep {
        return Err(usage("--shard", "not with the sweep profile (each shard would measure its own stages)"));
    }
    Ok(Some(shard))
}

/// `--start-at`, parsed and checked against now.
pub(super) fn start_at_of(a: &LoadArgs) -> Result<Option<goodput_results::shards::StartAt>, UsageError> {
    use goodput_results::shards::{StartAt, check_start_at, parse_start_at};
    let Some(s) = &a.start_at else { return Ok(None) };
    let ns = parse_start_at(s).map_err(|e| usage("--start-at", e))?;
    check_start_at(s, ns, goodput_results::unix_ns()).map_err(|e| usage("--start-at", e))?;
    Ok(Some(StartAt { requested: goodput_results::format_rfc3339_ns(ns), clock: None }))
}

/// A warm-up and cool-down counted in requests must leave at least one of `--requests` to
/// measure (otherwise every request is excluded and the summary has nothing to say).
pub(super) fn edges_leave_requests(requests: Option<u64>, warmup: &Edge, cooldown: &Edge) -> Result<(), UsageError> {
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
