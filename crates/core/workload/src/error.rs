//! Why a workload could not be built: a dataset's bad field (file, line, field), a file that
//! cannot be read, an invalid combination; and the serde helper that reads a value from its
//! text form.

use serde::Deserialize;

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{file}{}: field `{field}`: {message}", if *line > 0 { format!(", line {line}") } else { String::new() })]
    Data { file: String, line: usize, field: String, message: String },
    #[error("cannot read {file}: {message}")]
    Io { file: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// A value read from its text form (`FromStr`).
pub(crate) fn from_text<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr<Err = goodput_metrics::ParseError>,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}
