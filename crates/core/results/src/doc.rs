//! The document itself: its format version, the tool that wrote it, its runs and answers, and
//! reading it back (checking `schema_version`) and writing it atomically.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::capacity::CapacityReport;
use crate::error::ResultError;
use crate::planning;
use crate::run::Run;
use crate::time::now_rfc3339;

/// The major version of the document's format: readers refuse a larger one.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// What was measured.
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
    pub capacity: Option<CapacityReport>,
    /// The answer of `goodput plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<planning::PlanReport>,
    /// A twin's validation (`goodput fit --validate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<crate::validation::TwinValidation>,
}

impl ResultDoc {
    /// A document holding `runs`, written by `tool_version` now.
    pub fn new(tool_version: &str, runs: Vec<Run>) -> Self {
        let interrupted = runs.iter().any(|r| r.interrupted);
        ResultDoc {
            schema_version: SCHEMA_VERSION,
            tool: Tool { name: "goodput".into(), version: tool_version.into() },
            created_at: now_rfc3339(),
            interrupted,
            runs,
            capacity: None,
            plan: None,
            validation: None,
        }
    }

    /// Reads a result document, checking its schema version first.
    pub fn read(path: &Path) -> Result<Self, ResultError> {
        let p = path.display().to_string();
        if path.is_dir() {
            return Err(ResultError::Read { path: p, message: "is a directory, not a result file".into() });
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| ResultError::Read { path: p.clone(), message: e.to_string() })?;
        Self::parse(&p, &text)
    }

    /// Parses a document's text (`path` names it in errors).
    pub fn parse(path: &str, text: &str) -> Result<Self, ResultError> {
        let format = |message: String| ResultError::Format { path: path.into(), message };
        let foreign =
            || crate::source::detect(text).map(|f| ResultError::Foreign { path: path.into(), tool: f.name() });
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| foreign().unwrap_or(format(e.to_string())))?;
        match v.get("schema_version").and_then(serde_json::Value::as_u64) {
            None => {
                return Err(foreign().unwrap_or_else(|| format("no `schema_version` field".into())));
            }
            Some(n) if n > SCHEMA_VERSION as u64 => {
                return Err(ResultError::NewerSchema { path: path.into(), found: n, reads: SCHEMA_VERSION });
            }
            Some(_) => {}
        }
        serde_json::from_value(v).map_err(|e| format(e.to_string()))
    }

    /// Writes the document (to a temporary name first, so a crash never leaves half a file).
    ///
    /// A document holding more than [`COMPACT_ABOVE_RECORDS`] records is written compactly: no
    /// indentation, and each record's event times as microsecond deltas and its token counts as
    /// run-length pairs (`goodput_metrics::events`; times within 0.5 µs). Smaller ones are
    /// indented, with exact arrays.
    pub fn write(&self, path: &Path) -> Result<(), ResultError> {
        use std::io::Write;
        let err = |e: std::io::Error| ResultError::Write { path: path.display().to_string(), message: e.to_string() };
        let tmp = path.with_extension("json.tmp");
        let written = (|| {
            let file = std::fs::File::create(&tmp).map_err(err)?;
            // a document written over an earlier one keeps that one's permissions
            if let Ok(m) = std::fs::metadata(path) {
                let _ = file.set_permissions(m.permissions());
            }
            let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
            let records: usize = self.runs.iter().map(|r| r.requests.len()).sum();
            if records > COMPACT_ABOVE_RECORDS {
                goodput_metrics::events::compact_events(|| serde_json::to_writer(&mut w, self))
            } else {
                serde_json::to_writer_pretty(&mut w, self)
            }
            .map_err(|e| ResultError::Write { path: path.display().to_string(), message: e.to_string() })?;
            w.write_all(b"\n").map_err(err)?;
            w.flush().map_err(err)
        })();
        if let Err(e) = written {
            // a half-written copy is no use to anyone
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path).map_err(|e| ResultError::Write {
            path: path.display().to_string(),
            message: format!("{e} (the whole document is in {})", tmp.display()),
        })
    }
}

/// Documents with more records than this are written compactly (see [`ResultDoc::write`]).
pub const COMPACT_ABOVE_RECORDS: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_schemas_are_refused_and_garbage_named() {
        let e = ResultDoc::parse("r.json", r#"{"schema_version": 2, "runs": []}"#).unwrap_err().to_string();
        assert!(e.contains("r.json") && e.contains("newer goodput") && e.contains("version 2"), "{e}");
        let e = ResultDoc::parse("r.json", r#"{"runs": []}"#).unwrap_err().to_string();
        assert!(e.contains("schema_version"), "{e}");
        let e = ResultDoc::parse("x.json", "not json").unwrap_err().to_string();
        assert!(e.starts_with("x.json is not a goodput result document"), "{e}");
    }
}
