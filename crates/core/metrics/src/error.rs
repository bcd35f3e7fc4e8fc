//! The error of a value given as text that does not parse.

/// A value given as text that does not parse: the text, and what is wrong with it (the message
/// names what was expected).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub input: String,
    pub message: String,
}

impl ParseError {
    pub fn new(input: &str, message: impl Into<String>) -> Self {
        ParseError { input: input.to_string(), message: message.into() }
    }
}
