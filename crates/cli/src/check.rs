//! `goodput check RESULTS.json --baseline BASE.json --max-regress 'p99(ttft)=10%,…'`: a CI gate.
//! Exit 0 when every bound holds; 1 with one line per violated bound; 2 for bad usage (a bound
//! that does not parse names `--max-regress` or `FILE:LINE`; runs of different workloads are
//! refused unless `--force`). The bound grammar and the direction rule: `docs/metrics.md`,
//! "Comparing runs".

use goodput_decide::compare::{CompareError, check, compare, parse_bounds, parse_bounds_file};
use goodput_render::comparison::render_check;
use goodput_results::comparison::Bound;

use crate::args::CheckArgs;
use crate::compare::{refuse_different, subject};
use crate::outcome::Outcome;
use crate::plan::UsageError;

/// The bounds of `--max-regress` and `--bounds-file`, in that order.
pub fn bounds(a: &CheckArgs) -> Result<Vec<Bound>, UsageError> {
    let mut out = Vec::new();
    if let Some(text) = &a.max_regress {
        out.extend(parse_bounds(text, "--max-regress").map_err(|e| UsageError(e.to_string()))?);
    }
    if let Some(path) = &a.bounds_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("--bounds-file: cannot read {}: {e}", path.display())))?;
        out.extend(parse_bounds_file(&text, &path.display().to_string()).map_err(|e| UsageError(e.to_string()))?);
    }
    if out.is_empty() {
        return Err(UsageError("--max-regress: no bounds given (or give --bounds-file FILE)".into()));
    }
    Ok(out)
}

pub fn run(a: CheckArgs) -> anyhow::Result<Outcome> {
    let bounds = bounds(&a)?;
    let base = subject(&a.baseline)?;
    let this = subject(&a.results)?;
    let cmp = compare(&base, &this);
    refuse_different(std::slice::from_ref(&cmp), a.force)?;
    let checks = check(&cmp, &bounds, a.require_significant).map_err(|e| match e {
        CompareError::Missing { .. } => UsageError(e.to_string()),
        other => UsageError(other.to_string()),
    })?;
    say!("{}", render_check(&checks));
    for c in &cmp.cautions {
        warn!("caution: {c}");
    }
    Ok(if checks.iter().any(|c| c.violated) { Outcome::Failed } else { Outcome::Ok })
}
