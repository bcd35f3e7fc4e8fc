//! Which OpenAI-compatible endpoint a request goes to.

use serde::{Deserialize, Serialize};

/// Which OpenAI endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    #[default]
    Completions,
    Chat,
}

impl Api {
    pub const NAMES: [&'static str; 2] = ["completions", "chat"];

    /// The endpoint's path on an OpenAI-compatible server.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }

    /// The endpoint's path under the API root (`/v1`, or where an endpoint given whole sits).
    pub fn suffix(self) -> &'static str {
        &self.path()["/v1".len()..]
    }

    pub fn name(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat",
        }
    }
}

impl std::str::FromStr for Api {
    type Err = goodput_metrics::ParseError;

    fn from_str(s: &str) -> Result<Self, goodput_metrics::ParseError> {
        Self::parse_text(s).map_err(|m| goodput_metrics::ParseError::new(s, m))
    }
}

impl Api {
    fn parse_text(s: &str) -> Result<Self, String> {
        match s.trim() {
            "completions" => Ok(Api::Completions),
            "chat" => Ok(Api::Chat),
            other => Err(format!("unknown API `{other}`; expected completions or chat")),
        }
    }
}
