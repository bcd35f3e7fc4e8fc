//! Why a result file could not be read, written or merged.

/// Why a result file could not be read, written or merged.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path} is not a goodput result document: {message}")]
    Format { path: String, message: String },
    #[error(
        "{path} is a {tool} result file, not a goodput result document: convert it first with `goodput import {path} --out FILE.json`"
    )]
    Foreign { path: String, tool: &'static str },
    #[error(
        "{path} was written by a newer goodput (result schema version {found}); this one reads version {reads}: upgrade goodput"
    )]
    NewerSchema { path: String, found: u64, reads: u32 },
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
    #[error("cannot merge: {0}")]
    Merge(String),
}
