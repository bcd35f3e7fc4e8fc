//! The SLO flags: predicates, presets and smoothing.

use super::*;

pub(super) fn ms(flag: &str, v: &Option<String>) -> Result<Option<f64>, UsageError> {
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
