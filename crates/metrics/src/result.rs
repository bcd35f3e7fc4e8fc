//! The result document (`--out results.json`): one format for measured and simulated runs.
//!
//! Its JSON Schema is checked in at `schema/results.schema.json`; tests validate every document
//! the tool writes against it. Bump [`SCHEMA_VERSION`] on any incompatible change.

use serde::{Deserialize, Serialize};

use crate::record::RequestRecord;
use crate::summary::Summary;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// What was measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// `url` (a server we reached over HTTP), `embedded` (our engine model behind our own HTTP
    /// server, in real time) or `sim` (the engine model in virtual time).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The model name sent in requests (or simulated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The engine configuration, for `embedded` and `sim` targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<serde_json::Value>,
}

/// One run: a plain bench has one; sweeps and capacity searches have one per stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The validated run plan (never holds secrets).
    pub plan: serde_json::Value,
    pub target: Target,
    /// True when the run was cut short (Ctrl-C, `--max-errors`, a saturated capacity step).
    #[serde(default)]
    pub interrupted: bool,
    /// Over the measurement window.
    pub summary: Summary,
    /// Over the whole run, when a warm-up or cool-down narrowed the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_full: Option<Summary>,
    /// Engine statistics (embedded and sim targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_stats: Option<serde_json::Value>,
    pub requests: Vec<RequestRecord>,
}

/// The whole document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    pub schema_version: u32,
    pub tool: Tool,
    /// RFC 3339, UTC.
    pub created_at: String,
    #[serde(default)]
    pub interrupted: bool,
    pub runs: Vec<Run>,
    /// The answer of `goodput capacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<serde_json::Value>,
}

impl ResultDoc {
    pub fn new(tool_version: &str, created_at: String, runs: Vec<Run>) -> Self {
        let interrupted = runs.iter().any(|r| r.interrupted);
        ResultDoc {
            schema_version: SCHEMA_VERSION,
            tool: Tool { name: "goodput".into(), version: tool_version.into() },
            created_at,
            interrupted,
            runs,
            capacity: None,
        }
    }
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC with millisecond precision.
pub fn rfc3339_utc(unix_seconds: f64) -> String {
    let secs = unix_seconds.floor() as i64;
    let millis = ((unix_seconds - secs as f64) * 1000.0).floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // civil-from-days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_utc(0.0), "1970-01-01T00:00:00.000Z");
        // 2026-12-02T11:55:00.250Z
        assert_eq!(rfc3339_utc(1_796_212_500.25), "2026-12-02T11:55:00.250Z");
        assert_eq!(rfc3339_utc(951_782_400.0), "2000-02-29T00:00:00.000Z");
    }
}
