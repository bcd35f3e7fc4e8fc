//! Why an engine could not be configured or built.

/// Why an engine could not be configured or built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("unknown {what} `{name}`; known: {known}")]
    Unknown { what: &'static str, name: String, known: String },
    #[error("{file}: {message}")]
    Spec { file: String, message: String },
    #[error("{0}")]
    Config(String),
}
