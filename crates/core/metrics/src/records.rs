//! Which per-request records a result document keeps (`--records all|sample:N|none`), and what
//! it says it kept.

use serde::{Deserialize, Serialize};

/// Records a result document keeps by default before it samples them.
pub const DEFAULT_RECORD_CAP: u64 = 100_000;

/// Which per-request records the result document holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordsMode {
    /// Every record up to the cap ([`DEFAULT_RECORD_CAP`]), then a seeded uniform sample of that
    /// many.
    #[default]
    All,
    /// A seeded uniform sample of at most `N` records.
    Sample(u64),
    /// None (the summary, and the JSONL log, still see every record).
    None,
}

impl RecordsMode {
    /// The most records kept.
    pub fn cap(self) -> u64 {
        match self {
            RecordsMode::All => DEFAULT_RECORD_CAP,
            RecordsMode::Sample(n) => n,
            RecordsMode::None => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordsMode::All => "all",
            RecordsMode::Sample(_) => "sample",
            RecordsMode::None => "none",
        }
    }
}

impl std::str::FromStr for RecordsMode {
    type Err = crate::error::ParseError;

    fn from_str(s: &str) -> Result<Self, crate::error::ParseError> {
        let t = s.trim();
        match t {
            "all" => Ok(RecordsMode::All),
            "none" => Ok(RecordsMode::None),
            _ => match t.strip_prefix("sample:").map(|n| n.trim().parse::<u64>()) {
                Some(Ok(n)) if n > 0 => Ok(RecordsMode::Sample(n)),
                _ => Err(crate::error::ParseError::new(s, format!("`{s}`: expected all, none or sample:N (N ≥ 1)"))),
            },
        }
    }
}

/// As `--records` takes it: `all`, `none`, `sample:N`.
impl std::fmt::Display for RecordsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordsMode::Sample(n) => write!(f, "sample:{n}"),
            m => f.write_str(m.name()),
        }
    }
}

/// What the result document's `requests` hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordsKept {
    /// `all`, `sample` or `none` (the mode asked for).
    pub mode: String,
    /// Records in the document.
    pub kept: u64,
    /// Records the run produced (and summarized).
    pub total: u64,
}

impl RecordsKept {
    /// The document holds fewer records than the run produced.
    pub fn is_partial(&self) -> bool {
        self.kept < self.total
    }
}
