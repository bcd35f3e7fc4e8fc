//! Real datasets and traces, parsed up front. Every malformed input is refused with the file,
//! the line and the field.
//!
//! | kind | format | gives |
//! |---|---|---|
//! | `sharegpt` | JSON array of `{"conversations": [{"from", "value"}, …]}` | prompts, reply lengths, whole conversations |
//! | `jsonl` | one object per line: `prompt` or `messages` or `input_tokens` (with optional `hash_ids` of `block_size` tokens), optional `output_tokens`, `reasoning_tokens`, `timestamp` (s) | exact prompts, arrival times, block-exact prefixes |
//! | `azure` | CSV `TIMESTAMP,ContextTokens,GeneratedTokens` (Azure LLM inference trace 2023) | arrival times and lengths |
//! | `mooncake` | JSONL `{"timestamp" (ms), "input_length", "output_length", "hash_ids"}` | arrival times, lengths, shared prefix blocks |
//! | `weka` | agent conversations (`{"block_size", "requests": [{"t", "in", "out", "hash_ids", "think_time"}, {"type": "subagent", …}]}`; a file, JSONL, or a directory of them) | agentic sessions, sub-agents, block-exact contexts ([`crate::agentic`]) |
//! | `bailian` | JSONL `{"chat_id", "parent_chat_id", "timestamp" (s), "input_length", "output_length", "hash_ids"}` | sessions by parent links, arrival times, 16-token blocks |

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::WorkloadError;
use crate::lengths::MAX_LENGTH;
use crate::session::Message;

/// Tokens per Mooncake `hash_ids` block.
pub const MOONCAKE_BLOCK: u32 = 512;

/// Which format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetKind {
    ShareGpt,
    Jsonl,
    Azure,
    Mooncake,
    Weka,
    Bailian,
}

impl DatasetKind {
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::ShareGpt => "sharegpt",
            DatasetKind::Jsonl => "jsonl",
            DatasetKind::Azure => "azure",
            DatasetKind::Mooncake => "mooncake",
            DatasetKind::Weka => "weka",
            DatasetKind::Bailian => "bailian",
        }
    }
}

impl FromStr for DatasetKind {
    type Err = goodput_metrics::ParseError;

    fn from_str(s: &str) -> Result<Self, goodput_metrics::ParseError> {
        Self::parse_text(s).map_err(|m| goodput_metrics::ParseError::new(s, m))
    }
}

impl DatasetKind {
    fn parse_text(s: &str) -> Result<Self, String> {
        match s {
            "sharegpt" => Ok(DatasetKind::ShareGpt),
            "jsonl" => Ok(DatasetKind::Jsonl),
            "azure" => Ok(DatasetKind::Azure),
            "mooncake" => Ok(DatasetKind::Mooncake),
            "weka" => Ok(DatasetKind::Weka),
            "bailian" => Ok(DatasetKind::Bailian),
            _ => Err(format!(
                "unknown dataset kind `{s}`: expected sharegpt, jsonl, azure, mooncake, weka, bailian or synthetic"
            )),
        }
    }
}

/// What a turn sends.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// A user message (or a completion prompt).
    Text(String),
    /// A whole chat history, sent as is.
    Messages(Vec<Message>),
    /// Only a length: a synthetic prompt of this many tokens is built.
    Tokens(u32),
}

/// One turn of a dataset entry.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EntryTurn {
    pub prompt: Prompt,
    /// Output length the dataset gives (`None`: use `--output-tokens`).
    pub output_tokens: Option<u32>,
    /// Reasoning length the dataset gives (`None`: use `--reasoning-tokens`, if any).
    pub reasoning_tokens: Option<u32>,
    /// The dataset's own reply (ShareGPT): its token count becomes `max_tokens`.
    pub reply: Option<String>,
    /// Prefix-block ids of the prompt (Mooncake, agentic traces): equal leading ids mean an
    /// identical prompt prefix; each block is the entry's `block_tokens` long, the last the rest.
    pub hash_ids: Vec<u64>,
    /// The prompt is the whole context of the call (an agentic trace's calls each carry theirs):
    /// it replaces the conversation instead of extending it.
    pub context: bool,
    /// The pause before this turn, seconds, when the trace gives it (`think_time`).
    pub think_s: Option<f64>,
    /// Sub-agents started after this turn's reply, each its own turns; the next turn waits for
    /// all of them.
    pub forks: Vec<Vec<EntryTurn>>,
}

impl Default for Prompt {
    fn default() -> Self {
        Prompt::Tokens(1)
    }
}

/// One entry: a request, or a conversation of several turns.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Line of the file where the entry starts (1-based).
    pub line: usize,
    /// Arrival time in seconds from the first entry (traces).
    pub time_s: Option<f64>,
    pub turns: Vec<EntryTurn>,
    /// Tokens per `hash_ids` block (512 for Mooncake, the trace's `block_size` for agentic traces).
    pub block_tokens: u32,
    /// Block ids are the entry's own (an agentic trace's `hash_id_scope: local`), not shared
    /// across the file's entries.
    pub local_blocks: bool,
}

/// A parsed dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    pub kind: DatasetKind,
    pub path: String,
    pub entries: Vec<Entry>,
    /// Entries left out, with why (e.g. ShareGPT conversations without a human turn).
    pub skipped: Vec<String>,
}

impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.path)
    }
}

impl Serialize for Dataset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Dataset", 4)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("path", &self.path)?;
        st.serialize_field("entries", &self.entries.len())?;
        st.serialize_field("skipped", &self.skipped.len())?;
        st.end()
    }
}

impl Dataset {
    /// Parses `text` as `kind` (the file name is used in errors).
    pub fn parse(kind: DatasetKind, path: &str, text: &str) -> Result<Self, WorkloadError> {
        let mut skipped = Vec::new();
        let entries = match kind {
            DatasetKind::ShareGpt => sharegpt(path, text, &mut skipped)?,
            DatasetKind::Jsonl => jsonl(path, text)?,
            DatasetKind::Azure => azure(path, text)?,
            DatasetKind::Mooncake => mooncake(path, text)?,
            DatasetKind::Weka => crate::agentic::weka(path, text)?,
            DatasetKind::Bailian => crate::agentic::bailian(path, text)?,
        };
        if entries.is_empty() {
            let why = match skipped_summary(&skipped) {
                Some(s) => format!("no usable entries: every one was left out ({s})"),
                None => "no usable entries: the file holds none".to_string(),
            };
            return Err(err(path, 0, "(file)", why));
        }
        Ok(Dataset { kind, path: path.to_string(), entries, skipped })
    }

    /// The entries left out, counted by reason with their first lines (`None` when none was).
    pub fn skipped_summary(&self) -> Option<String> {
        skipped_summary(&self.skipped)
    }

    /// Reads and parses a file.
    pub fn load(kind: DatasetKind, path: &str) -> Result<Self, WorkloadError> {
        let io = |p: &str, e: std::io::Error| WorkloadError::Io { file: p.into(), message: e.to_string() };
        if kind == DatasetKind::Weka && std::path::Path::new(path).is_dir() {
            // a directory of traces, one per file, in name order
            let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(path)
                .map_err(|e| io(path, e))?
                .filter_map(|d| d.ok().map(|d| d.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json" || x == "jsonl"))
                .collect();
            files.sort();
            let mut entries = Vec::new();
            for f in &files {
                let name = f.display().to_string();
                let text = std::fs::read_to_string(f).map_err(|e| io(&name, e))?;
                entries.extend(crate::agentic::weka(&name, &text)?);
            }
            if entries.is_empty() {
                return Err(WorkloadError::Invalid(format!("{path}: no *.json traces in the directory")));
            }
            return Ok(Dataset { kind, path: path.into(), entries, skipped: Vec::new() });
        }
        let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
        Self::parse(kind, path, &text)
    }

    /// Whether the entries carry arrival times (the `replay` profile needs them).
    pub fn has_times(&self) -> bool {
        self.entries.iter().all(|e| e.time_s.is_some())
    }

    /// Whether any prompt is text (token counts then need a tokenizer).
    pub fn has_text(&self) -> bool {
        self.entries.iter().flat_map(|e| &e.turns).any(|t| !matches!(t.prompt, Prompt::Tokens(_)))
    }
}

/// `skipped` ("line N: reason" each) counted by reason, with the first few lines of each:
/// "3 with an empty human turn (lines 4, 9, 12), 1 with no human turn (line 2)".
fn skipped_summary(skipped: &[String]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let mut by: Vec<(String, Vec<String>)> = Vec::new();
    for s in skipped {
        let (line, why) = s.split_once(": ").map_or(("?", s.as_str()), |(l, w)| (l.trim_start_matches("line "), w));
        match by.iter_mut().find(|(w, _)| w == why) {
            Some((_, lines)) => lines.push(line.to_string()),
            None => by.push((why.to_string(), vec![line.to_string()])),
        }
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(why, lines)| {
            let shown: Vec<&str> = lines.iter().take(5).map(String::as_str).collect();
            let more = if lines.len() > 5 { format!(" and {} more", lines.len() - 5) } else { String::new() };
            let word = if lines.len() == 1 { "line" } else { "lines" };
            format!("{}: {why} ({word} {}{more})", lines.len(), shown.join(", "))
        })
        .collect();
    Some(format!("{} left out: {}", skipped.len(), parts.join("; ")))
}

fn err(file: &str, line: usize, field: &str, message: impl Into<String>) -> WorkloadError {
    WorkloadError::Data { file: file.into(), line, field: field.into(), message: message.into() }
}

fn positive(v: &Value, file: &str, line: usize, field: &str) -> Result<Option<u32>, WorkloadError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if n >= 1 && n <= MAX_LENGTH as u64 => Ok(Some(n as u32)),
            _ => Err(err(file, line, field, format!("expected an integer from 1 to {MAX_LENGTH}, got {x}"))),
        },
    }
}

/// A count that may be 0 (`reasoning_tokens`), at most [`MAX_LENGTH`].
fn count(v: &Value, file: &str, line: usize, field: &str) -> Result<Option<u32>, WorkloadError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if n <= MAX_LENGTH as u64 => Ok(Some(n as u32)),
            _ => Err(err(file, line, field, format!("expected an integer from 0 to {MAX_LENGTH}, got {x}"))),
        },
    }
}

fn messages(v: &Value, file: &str, line: usize) -> Result<Vec<Message>, WorkloadError> {
    let arr = v
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| err(file, line, "messages", "expected a non-empty array"))?;
    arr.iter()
        .enumerate()
        .map(|(i, m)| {
            let role = m["role"]
                .as_str()
                .ok_or_else(|| err(file, line, &format!("messages[{i}].role"), "expected a string"))?;
            let content = m["content"]
                .as_str()
                .ok_or_else(|| err(file, line, &format!("messages[{i}].content"), "expected a string"))?;
            Ok(Message { role: role.into(), content: content.into() })
        })
        .collect()
}

fn sharegpt(file: &str, text: &str, skipped: &mut Vec<String>) -> Result<Vec<Entry>, WorkloadError> {
    let raw: Vec<&serde_json::value::RawValue> = serde_json::from_str(text)
        .map_err(|e| err(file, e.line(), "(root)", format!("expected a JSON array of ShareGPT entries: {e}")))?;
    let mut out = Vec::new();
    // entries come in file order: count newlines only since the previous one (linear, not quadratic)
    let (mut at, mut line) = (0usize, 1usize);
    for (i, r) in raw.iter().enumerate() {
        let offset = r.get().as_ptr() as usize - text.as_ptr() as usize;
        line += text.as_bytes()[at..offset].iter().filter(|&&b| b == b'\n').count();
        at = offset;
        let v: Value = serde_json::from_str(r.get()).map_err(|e| err(file, line, "(entry)", e.to_string()))?;
        let conv = v.get("conversations").and_then(Value::as_array).ok_or_else(|| {
            err(file, line, &format!("[{i}].conversations"), "expected an array of {\"from\", \"value\"}")
        })?;
        let mut turns: Vec<EntryTurn> = Vec::new();
        let mut cut = false;
        for (k, m) in conv.iter().enumerate() {
            let field = |name: &str| format!("[{i}].conversations[{k}].{name}");
            let from = m
                .get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| err(file, line, &field("from"), "expected a string"))?;
            let value = m
                .get("value")
                .and_then(Value::as_str)
                .ok_or_else(|| err(file, line, &field("value"), "expected a string"))?;
            match from {
                "human" | "user" if value.trim().is_empty() => {
                    let why = if turns.is_empty() {
                        "the first human turn is empty"
                    } else {
                        "an empty human turn ends the conversation there (its earlier turns are kept)"
                    };
                    skipped.push(format!("line {line}: {why}"));
                    cut = true;
                    break;
                }
                "human" | "user" => turns.push(EntryTurn {
                    prompt: Prompt::Text(value.into()),
                    output_tokens: None,
                    reasoning_tokens: None,
                    ..Default::default()
                }),
                "gpt" | "chatgpt" | "bard" | "bing" | "assistant" | "model" => {
                    // a reply before any human turn is dropped with it
                    if let Some(t) = turns.last_mut()
                        && t.reply.is_none()
                    {
                        t.reply = Some(value.into());
                    }
                }
                "system" => {}
                other => return Err(err(file, line, &field("from"), format!("unknown speaker `{other}`"))),
            }
        }
        if turns.is_empty() {
            if !cut {
                skipped.push(format!("line {line}: no human turn"));
            }
            continue;
        }
        out.push(Entry { line, time_s: None, turns, block_tokens: MOONCAKE_BLOCK, local_blocks: false });
    }
    Ok(out)
}

fn jsonl(file: &str, text: &str) -> Result<Vec<Entry>, WorkloadError> {
    let mut out = Vec::new();
    let mut first_time: Option<f64> = None;
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(l).map_err(|e| err(file, line, "(line)", format!("invalid JSON: {e}")))?;
        if !v.is_object() {
            return Err(err(file, line, "(line)", "expected a JSON object"));
        }
        let prompt = if let Some(p) = v.get("prompt") {
            let p = p.as_str().ok_or_else(|| err(file, line, "prompt", "expected a string"))?;
            if p.trim().is_empty() {
                return Err(err(file, line, "prompt", "is empty"));
            }
            Prompt::Text(p.into())
        } else if let Some(m) = v.get("messages") {
            Prompt::Messages(messages(m, file, line)?)
        } else if let Some(n) = positive(&v, file, line, "input_tokens")? {
            Prompt::Tokens(n)
        } else {
            return Err(err(file, line, "prompt", "each line needs `prompt`, `messages` or `input_tokens`"));
        };
        let time_s = match v.get("timestamp") {
            None | Some(Value::Null) => None,
            Some(t) => {
                let t = t
                    .as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| err(file, line, "timestamp", "expected a non-negative number of seconds"))?;
                Some(t)
            }
        };
        if let Some(t) = time_s {
            first_time.get_or_insert(t);
        }
        let output_tokens = positive(&v, file, line, "output_tokens")?;
        let reasoning_tokens = count(&v, file, line, "reasoning_tokens")?;
        // block-exact prefixes, as Mooncake's: `hash_ids` of `block_size` tokens (512)
        let hash_ids: Vec<u64> = match v.get("hash_ids") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if matches!(prompt, Prompt::Tokens(_)) => a
                .iter()
                .map(|x| {
                    x.as_u64()
                        .ok_or_else(|| err(file, line, "hash_ids", format!("`{x}` is not a non-negative integer")))
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Array(_)) => {
                return Err(err(
                    file,
                    line,
                    "hash_ids",
                    "goes with `input_tokens` (the prompt is built from its blocks), not with a text prompt",
                ));
            }
            Some(x) => return Err(err(file, line, "hash_ids", format!("expected an array of integers, got {x}"))),
        };
        let block_tokens = positive(&v, file, line, "block_size")?.unwrap_or(MOONCAKE_BLOCK);
        out.push(Entry {
            line,
            time_s,
            turns: vec![EntryTurn { prompt, output_tokens, reasoning_tokens, hash_ids, ..Default::default() }],
            block_tokens,
            local_blocks: false,
        });
    }
    // times relative to the first line that has one; all or none, in order
    if let Some(t0) = first_time {
        if let Some(e) = out.iter().find(|e| e.time_s.is_none()) {
            return Err(err(file, e.line, "timestamp", "some lines have a timestamp and this one does not"));
        }
        check_sorted(file, &out)?;
        let t0 = out.iter().filter_map(|e| e.time_s).fold(t0, f64::min);
        for e in &mut out {
            e.time_s = e.time_s.map(|t| t - t0);
        }
    }
    Ok(out)
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` → seconds since the Unix epoch.
fn parse_timestamp(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once([' ', 'T'])?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (hh, mm) = (t.next()?.parse::<i64>().ok()?, t.next()?.parse::<i64>().ok()?);
    let ss: f64 = t.next()?.parse().ok()?;
    if !(1..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || !(0..=23).contains(&hh)
        || !(0..=59).contains(&mm)
        || !(0.0..61.0).contains(&ss)
    {
        return None;
    }
    // days from civil (Howard Hinnant)
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + (hh * 3600 + mm * 60) as f64 + ss)
}

fn azure(file: &str, text: &str) -> Result<Vec<Entry>, WorkloadError> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, h)| h.trim().trim_start_matches('\u{feff}')).unwrap_or_default();
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols.len() != 3
        || !cols[0].eq_ignore_ascii_case("TIMESTAMP")
        || !cols[1].eq_ignore_ascii_case("ContextTokens")
        || !cols[2].eq_ignore_ascii_case("GeneratedTokens")
    {
        return Err(err(
            file,
            1,
            "(header)",
            format!("expected `TIMESTAMP,ContextTokens,GeneratedTokens`, got `{header}`"),
        ));
    }
    let mut out = Vec::new();
    let mut t0: Option<f64> = None;
    for (i, l) in lines {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 3 {
            return Err(err(file, line, "(row)", format!("expected 3 fields, got {}", f.len())));
        }
        let t = parse_timestamp(f[0])
            .ok_or_else(|| err(file, line, "TIMESTAMP", format!("`{}` is not YYYY-MM-DD HH:MM:SS.fraction", f[0])))?;
        let ctx = f[1].parse::<u32>().ok().filter(|n| (1..=MAX_LENGTH).contains(n)).ok_or_else(|| {
            err(file, line, "ContextTokens", format!("`{}` is not an integer from 1 to {MAX_LENGTH}", f[1]))
        })?;
        let generated = f[2].parse::<u32>().ok().filter(|n| (1..=MAX_LENGTH).contains(n)).ok_or_else(|| {
            err(file, line, "GeneratedTokens", format!("`{}` is not an integer from 1 to {MAX_LENGTH}", f[2]))
        })?;
        let base = *t0.get_or_insert(t);
        out.push(Entry {
            line,
            time_s: Some(t - base),
            turns: vec![EntryTurn {
                prompt: Prompt::Tokens(ctx),
                output_tokens: Some(generated),
                reasoning_tokens: None,
                ..Default::default()
            }],
            block_tokens: MOONCAKE_BLOCK,
            local_blocks: false,
        });
    }
    check_sorted(file, &out)?;
    Ok(out)
}

fn mooncake(file: &str, text: &str) -> Result<Vec<Entry>, WorkloadError> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(l).map_err(|e| err(file, line, "(line)", format!("invalid JSON: {e}")))?;
        let ts = v
            .get("timestamp")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| err(file, line, "timestamp", "expected a non-negative number of milliseconds"))?;
        let input =
            positive(&v, file, line, "input_length")?.ok_or_else(|| err(file, line, "input_length", "missing"))?;
        let output =
            positive(&v, file, line, "output_length")?.ok_or_else(|| err(file, line, "output_length", "missing"))?;
        let ids: Vec<u64> = v
            .get("hash_ids")
            .and_then(Value::as_array)
            .ok_or_else(|| err(file, line, "hash_ids", "expected an array of integers"))?
            .iter()
            .map(|x| {
                x.as_u64().ok_or_else(|| err(file, line, "hash_ids", format!("`{x}` is not a non-negative integer")))
            })
            .collect::<Result<_, _>>()?;
        if ids.len() as u64 != (input as u64).div_ceil(MOONCAKE_BLOCK as u64) {
            return Err(err(
                file,
                line,
                "hash_ids",
                format!("{} ids for {input} input tokens: expected ceil({input}/{MOONCAKE_BLOCK}) blocks", ids.len()),
            ));
        }
        out.push(Entry {
            line,
            time_s: Some(ts / 1000.0),
            turns: vec![EntryTurn {
                prompt: Prompt::Tokens(input),
                output_tokens: Some(output),
                hash_ids: ids,
                ..Default::default()
            }],
            block_tokens: MOONCAKE_BLOCK,
            local_blocks: false,
        });
    }
    check_sorted(file, &out)?;
    Ok(out)
}

fn check_sorted(file: &str, entries: &[Entry]) -> Result<(), WorkloadError> {
    for w in entries.windows(2) {
        if w[1].time_s < w[0].time_s {
            return Err(err(file, w[1].line, "timestamp", "arrival times must not go backwards"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_left_out_are_counted_by_reason_and_named() {
        let text = r#"[
{"conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "x"}]},
{"conversations": [{"from": "gpt", "value": "hello"}]},
{"conversations": [{"from": "human", "value": "  "}]},
{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
]"#;
        let d = Dataset::parse(DatasetKind::ShareGpt, "d.json", text).unwrap();
        assert_eq!(d.entries.len(), 1);
        assert_eq!(
            d.skipped_summary().unwrap(),
            "3 left out: 2: the first human turn is empty (lines 2, 4); 1: no human turn (line 3)"
        );
        // none usable: the error says why
        let e = Dataset::parse(DatasetKind::ShareGpt, "d.json", &text.replace("\"hi\"", "\"\"")).unwrap_err();
        assert!(
            e.to_string()
                .contains("no usable entries: every one was left out (4 left out: 3: the first human turn is empty"),
            "{e}"
        );
        let e = Dataset::parse(DatasetKind::ShareGpt, "d.json", "[]").unwrap_err();
        assert!(e.to_string().contains("the file holds none"), "{e}");
    }

    fn shared(name: &str) -> Option<String> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/data").join(name);
        p.is_file().then(|| p.display().to_string())
    }

    #[test]
    fn sharegpt_real_files() {
        if let Some(p) = shared("sharegpt/sharegpt_v3_multiturn_8conv.json") {
            let d = Dataset::load(DatasetKind::ShareGpt, &p).unwrap();
            assert_eq!(d.entries.len(), 8);
            assert_eq!(d.entries.iter().map(|e| e.turns.len()).sum::<usize>(), 28, "56 messages, alternating");
            assert!(d.entries.iter().all(|e| e.turns.iter().all(|t| t.reply.is_some())));
            assert_eq!(d.entries[0].line, 2);
        }
        if let Some(p) = shared("sharegpt/sharegpt_v3_first_prompt_1000.json") {
            let d = Dataset::load(DatasetKind::ShareGpt, &p).unwrap();
            assert_eq!(d.entries.len(), 1000);
            assert!(d.entries.iter().all(|e| e.turns.len() == 1 && e.turns[0].reply.is_none()));
        }
        if let Some(p) = shared("sharegpt/sharegpt_v3_50conv_with_token_counts.json") {
            let d = Dataset::load(DatasetKind::ShareGpt, &p).unwrap();
            assert_eq!(d.entries.len(), 50);
        }
    }

    #[test]
    fn azure_real_files() {
        for (name, rows) in [("AzureLLMInferenceTrace_conv.csv", 19366), ("AzureLLMInferenceTrace_code.csv", 8819)] {
            if let Some(p) = shared(name) {
                let d = Dataset::load(DatasetKind::Azure, &p).unwrap();
                assert_eq!(d.entries.len(), rows);
                assert_eq!(d.entries[0].time_s, Some(0.0));
                let last = d.entries.last().unwrap().time_s.unwrap();
                assert!((3000.0..3700.0).contains(&last), "about one hour: {last}");
                assert!(d.has_times());
            }
        }
    }

    #[test]
    fn mooncake_real_files() {
        for (name, rows) in [("mooncake_conversation_trace.jsonl", 12031), ("mooncake_synthetic_trace.jsonl", 3993)] {
            if let Some(p) = shared(name) {
                let d = Dataset::load(DatasetKind::Mooncake, &p).unwrap();
                assert_eq!(d.entries.len(), rows);
                assert!(d.entries.iter().all(|e| !e.turns[0].hash_ids.is_empty()));
            }
        }
    }

    #[test]
    fn azure_timestamps_by_hand() {
        let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.1805900,10,2";
        let d = Dataset::parse(DatasetKind::Azure, "a.csv", csv).unwrap();
        assert_eq!(d.entries[1].time_s, Some(3.5));
        assert_eq!(d.entries[1].turns[0].prompt, Prompt::Tokens(10));
        assert_eq!(parse_timestamp("1970-01-02 00:00:01"), Some(86_401.0));
        assert_eq!(parse_timestamp("2000-03-01 00:00:00"), Some(951_868_800.0));
    }

    #[test]
    fn malformed_inputs_name_file_line_and_field() {
        let cases: &[(DatasetKind, &str, &str)] = &[
            (DatasetKind::Azure, "TIMESTAMP,Context,Generated\n", "line 1: field `(header)`"),
            (
                DatasetKind::Azure,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,3\n",
                "line 2: field `ContextTokens`",
            ),
            (
                DatasetKind::Azure,
                "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,3\n",
                "line 2: field `TIMESTAMP`",
            ),
            (
                DatasetKind::Azure,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,3\n2023-11-16 18:15:40,1,3\n",
                "line 3: field `timestamp`",
            ),
            (DatasetKind::Jsonl, "{\"prompt\": \"a\"}\n{\"prompt\": 3}\n", "line 2: field `prompt`"),
            (DatasetKind::Jsonl, "{\"prompt\": \"a\", \"output_tokens\": 0}\n", "line 1: field `output_tokens`"),
            (DatasetKind::Jsonl, "{\"nothing\": 1}\n", "line 1: field `prompt`"),
            (DatasetKind::Jsonl, "not json\n", "line 1: field `(line)`"),
            (DatasetKind::Jsonl, "{\"prompt\": \"a\"}\n{\"prompt\": \" \"}\n", "line 2: field `prompt`"),
            (
                DatasetKind::Jsonl,
                "{\"prompt\": \"a\", \"timestamp\": 5}\n{\"prompt\": \"b\", \"timestamp\": 1}\n",
                "line 2: field `timestamp`",
            ),
            (
                DatasetKind::Azure,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 -1:30:00,1,3\n",
                "line 2: field `TIMESTAMP`",
            ),
            (
                DatasetKind::Jsonl,
                "{\"prompt\": \"a\", \"timestamp\": 1}\n{\"prompt\": \"b\"}\n",
                "line 2: field `timestamp`",
            ),
            (
                DatasetKind::Jsonl,
                "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}\n",
                "line 1: field `messages[0].content`",
            ),
            (
                DatasetKind::Mooncake,
                "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1]}\n",
                "field `hash_ids`",
            ),
            (
                DatasetKind::Mooncake,
                "{\"timestamp\": 0, \"output_length\": 5, \"hash_ids\": []}\n",
                "field `input_length`",
            ),
            (DatasetKind::ShareGpt, "{\"conversations\": []}", "field `(root)`"),
            (DatasetKind::ShareGpt, "[\n{\"id\": 1},\n]", "line 3: field `(root)`"),
            (DatasetKind::ShareGpt, "[\n {\"id\": 1}\n]", "line 2: field `[0].conversations`"),
            (
                DatasetKind::ShareGpt,
                "[\n{\"conversations\": []},\n\n {\"id\": 1}\n]",
                "line 4: field `[1].conversations`",
            ),
            (
                DatasetKind::ShareGpt,
                "[\n {\"conversations\": [{\"from\": \"human\", \"value\": 1}]}\n]",
                "line 2: field `[0].conversations[0].value`",
            ),
        ];
        for (kind, text, needle) in cases {
            let e = Dataset::parse(*kind, "f.txt", text).unwrap_err().to_string();
            assert!(e.starts_with("f.txt") && e.contains(needle), "{kind:?} {text:?}: {e}");
        }
    }

    #[test]
    fn jsonl_forms_and_relative_times() {
        let t = "{\"prompt\": \"hi\", \"output_tokens\": 5, \"timestamp\": 10.5}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"timestamp\": 11}\n{\"input_tokens\": 30, \"timestamp\": 12}\n";
        let d = Dataset::parse(DatasetKind::Jsonl, "s.jsonl", t).unwrap();
        assert_eq!(d.entries.len(), 3);
        assert_eq!(d.entries.iter().map(|e| e.time_s.unwrap()).collect::<Vec<_>>(), vec![0.0, 0.5, 1.5]);
        assert_eq!(d.entries[0].turns[0].output_tokens, Some(5));
        assert!(matches!(d.entries[1].turns[0].prompt, Prompt::Messages(_)));
        assert_eq!(d.entries[2].turns[0].prompt, Prompt::Tokens(30));
        assert_eq!(d.entries[2].line, 4);
    }
}
