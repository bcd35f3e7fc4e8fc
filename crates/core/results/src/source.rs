//! Where an imported run came from: which tool wrote the file ([`ImportFormat`], recognised by
//! [`detect`]), what its record times count from ([`RecordClock`]) and what it could not give
//! ([`ImportSource`]). The readers themselves are the `import` module; a result document names the
//! tool of a foreign file from here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which tool wrote the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportFormat {
    /// vLLM `benchmark_serving.py` / `vllm bench serve --save-result`.
    Vllm,
    /// GuideLLM `benchmark --output-path x.json`.
    Guidellm,
    /// NVIDIA AIPerf `profile_export.jsonl` (per request) or `profile_export_aiperf.json`.
    Aiperf,
}

impl ImportFormat {
    pub const NAMES: [&'static str; 3] = ["vllm", "guidellm", "aiperf"];

    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::Vllm => "vllm",
            ImportFormat::Guidellm => "guidellm",
            ImportFormat::Aiperf => "aiperf",
        }
    }
}

impl std::str::FromStr for ImportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "vllm" => Ok(ImportFormat::Vllm),
            "guidellm" => Ok(ImportFormat::Guidellm),
            "aiperf" => Ok(ImportFormat::Aiperf),
            other => Err(format!("unknown format `{other}`; expected vllm, guidellm or aiperf")),
        }
    }
}

/// What the times of an imported run's records count from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordClock {
    /// One clock for the run (send times known), from `started_at` when the file gives it.
    Run,
    /// Each record's times count from its own send (`scheduled_ms = sent_ms = 0`): the file
    /// holds no send times, so nothing that needs them (schedule lag, client queue, anything over
    /// time) is reported.
    PerRequest,
    /// No records: the file holds only summary statistics.
    SummaryOnly,
}

/// Where an imported run came from, and what could not be recovered from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportSource {
    pub tool: ImportFormat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The file as named on the command line.
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The server the tool measured, when the file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub clock: RecordClock,
    /// What the file does not hold (left empty in the run, never guessed), and how fields were
    /// mapped where the tools' definitions differ from ours.
    pub notes: Vec<String>,
}

/// Which tool wrote `text`, judged from its first JSON value's keys.
pub fn detect(text: &str) -> Option<ImportFormat> {
    let first = first_value(text)?;
    let o = first.as_object()?;
    let has = |k: &str| o.contains_key(k);
    if has("benchmarks") && (has("metadata") || has("config") || has("args")) {
        return Some(ImportFormat::Guidellm);
    }
    if has("metadata") && has("metrics") {
        return Some(ImportFormat::Aiperf);
    }
    if has("input_config") || (has("aiperf_version")) || (has("benchmark_duration") && has("request_throughput")) {
        return Some(ImportFormat::Aiperf);
    }
    if has("ttfts") || has("mean_ttft_ms") || (has("completed") && has("request_throughput") && has("duration")) {
        return Some(ImportFormat::Vllm);
    }
    None
}

/// The first JSON value of a file that may hold one value or one per line.
fn first_value(text: &str) -> Option<Value> {
    let clean = lenient_json(text);
    let mut it = serde_json::Deserializer::from_str(&clean).into_iter::<Value>();
    it.next()?.ok()
}

/// `text` with Python's non-standard `NaN`, `Infinity` and `-Infinity` literals (outside strings)
/// turned into the strings `"NaN"`, `"Infinity"` and `"-Infinity"`, which [`num`] reads back.
pub fn lenient_json(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("NaN") && !text.contains("Infinity") {
        return std::borrow::Cow::Borrowed(text);
    }
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let (mut i, mut copied, mut in_str, mut esc) = (0, 0, false, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_str = true;
            i += 1;
            continue;
        }
        let word = ["-Infinity", "Infinity", "NaN"].into_iter().find(|w| b[i..].starts_with(w.as_bytes()));
        match word {
            Some(w) => {
                out.push_str(&text[copied..i]);
                out.push('"');
                out.push_str(w);
                out.push('"');
                i += w.len();
                copied = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}
