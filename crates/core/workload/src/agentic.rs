//! Agentic traces: sessions of calls, each carrying its whole context as prefix blocks, with
//! sub-agents. Two public formats a peer reads:
//!
//! - `weka`: one JSON object per agent conversation (a file, one per line of a JSONL file, or
//!   every `*.json` of a directory), as in callanjfox/kv-cache-tester's Claude Code traces and
//!   read by NVIDIA AIPerf (`weka_trace`) and inference-perf (`weka_trace_replay`):
//!   `{"id", "block_size", "hash_id_scope", "requests": [{"t", "type", "in", "out", "hash_ids",
//!   "think_time", …}, {"type": "subagent", "requests": […]}, …]}`;
//! - `bailian`: Alibaba's Qwen Bailian usage traces (`alibaba-edu/qwen-bailian-usagetraces-anon`,
//!   read by AIPerf's `bailian_trace`): JSONL rows `{"chat_id", "parent_chat_id" (−1: a new
//!   session), "timestamp" (s), "input_length", "output_length", "type", "turn", "hash_ids"}`
//!   with 16-token blocks; a session is a chain of rows linked by their parents.
//!
//! Every call's prompt is its whole context (the rows already hold it), built block by block so
//! that requests sharing hash ids share exactly those token blocks. Errors name the file, the
//! line (or the trace and request) and the field.

use serde_json::Value;

use crate::WorkloadError;
use crate::datasets::{Entry, EntryTurn, Prompt};
use crate::lengths::MAX_LENGTH;

/// Tokens per block of a Bailian trace.
pub const BAILIAN_BLOCK: u32 = 16;

fn err(file: &str, line: usize, field: &str, message: impl Into<String>) -> WorkloadError {
    WorkloadError::Data { file: file.into(), line, field: field.into(), message: message.into() }
}

/// The fields a Weka trace object, one of its requests and one of its sub-agents may have.
const TRACE_FIELDS: [&str; 8] =
    ["id", "models", "block_size", "hash_id_scope", "tool_tokens", "system_tokens", "totals", "requests"];
const REQUEST_FIELDS: [&str; 13] = [
    "t",
    "type",
    "model",
    "in",
    "out",
    "hash_ids",
    "input_types",
    "output_types",
    "stop",
    "api_time",
    "think_time",
    "ttft",
    "cached",
];
const SUBAGENT_FIELDS: [&str; 12] = [
    "t",
    "type",
    "agent_id",
    "subagent_type",
    "duration_ms",
    "total_tokens",
    "tool_use_count",
    "status",
    "models",
    "tool_tokens",
    "system_tokens",
    "requests",
];

/// Refuses a field not in `known`, naming it and what is known.
fn known_fields(v: &Value, known: &[&str], file: &str, line: usize, at: &str) -> Result<(), WorkloadError> {
    if let Some(o) = v.as_object()
        && let Some(k) = o.keys().find(|k| !known.contains(&k.as_str()))
    {
        return Err(err(
            file,
            line,
            &format!("{at}{k}"),
            format!(
                "unknown field (a {} trace has {})",
                if at.is_empty() { "weka" } else { "weka request in a" },
                known.join(", ")
            ),
        ));
    }
    Ok(())
}

fn count(v: &Value, field: &str, file: &str, line: usize, at: &str, min: u64) -> Result<u32, WorkloadError> {
    let x = v.get(field).ok_or_else(|| err(file, line, &format!("{at}{field}"), "missing"))?;
    x.as_u64().filter(|n| *n >= min && *n <= MAX_LENGTH as u64).map(|n| n as u32).ok_or_else(|| {
        err(file, line, &format!("{at}{field}"), format!("expected an integer from {min} to {MAX_LENGTH}, got {x}"))
    })
}

fn ids(v: &Value, field: &str, file: &str, line: usize, at: &str) -> Result<Vec<u64>, WorkloadError> {
    let f = format!("{at}{field}");
    match v.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_u64().ok_or_else(|| err(file, line, &f, format!("`{x}` is not a non-negative integer"))))
            .collect(),
        Some(x) => Err(err(file, line, &f, format!("expected an array of integers, got {x}"))),
    }
}

/// The calls of one Weka agent (its `requests`), sub-agents attached to the call before them.
fn weka_calls(reqs: &Value, file: &str, line: usize, at: &str, depth: u32) -> Result<Vec<EntryTurn>, WorkloadError> {
    let arr = reqs.as_array().ok_or_else(|| err(file, line, &format!("{at}requests"), "expected an array"))?;
    let mut turns: Vec<EntryTurn> = Vec::new();
    let mut prev_t: Option<f64> = None;
    for (i, r) in arr.iter().enumerate() {
        let here = format!("{at}requests[{i}].");
        let kind = r.get("type").and_then(Value::as_str).unwrap_or("n");
        if kind == "subagent" {
            known_fields(r, &SUBAGENT_FIELDS, file, line, &here)?;
            if depth >= 1 {
                return Err(err(file, line, &format!("{here}type"), "a sub-agent inside a sub-agent is not replayed"));
            }
            let calls = weka_calls(r.get("requests").unwrap_or(&Value::Null), file, line, &here, depth + 1)?;
            let Some(parent) = turns.last_mut() else {
                return Err(err(file, line, &format!("{here}type"), "a sub-agent before its agent's first call"));
            };
            if !calls.is_empty() {
                parent.forks.push(calls);
            }
            continue;
        }
        known_fields(r, &REQUEST_FIELDS, file, line, &here)?;
        if !matches!(kind, "n" | "s") {
            return Err(err(file, line, &format!("{here}type"), format!("`{kind}`: expected n, s or subagent")));
        }
        let input = count(r, "in", file, line, &here, 1)?;
        let output = count(r, "out", file, line, &here, 0)?.max(1);
        let t = r.get("t").and_then(Value::as_f64).filter(|t| t.is_finite() && *t >= 0.0);
        let t =
            t.ok_or_else(|| err(file, line, &format!("{here}t"), "expected seconds from the conversation's start"))?;
        if prev_t.is_some_and(|p| t < p) {
            return Err(err(file, line, &format!("{here}t"), "calls must not go back in time"));
        }
        // the recorded client delay (kv-cache-tester's think-only timing); without it, the
        // recorded gap between calls
        let think = match r.get("think_time").and_then(Value::as_f64) {
            Some(x) if x.is_finite() && x >= 0.0 => x,
            Some(_) => return Err(err(file, line, &format!("{here}think_time"), "expected non-negative seconds")),
            None => prev_t.map_or(0.0, |p| t - p),
        };
        prev_t = Some(t);
        turns.push(EntryTurn {
            prompt: Prompt::Tokens(input),
            output_tokens: Some(output),
            hash_ids: ids(r, "hash_ids", file, line, &here)?,
            context: true,
            think_s: Some(if turns.is_empty() { 0.0 } else { think }),
            ..Default::default()
        });
    }
    Ok(turns)
}

/// One Weka trace object (the entry of `line`).
fn weka_trace(v: &Value, file: &str, line: usize) -> Result<Entry, WorkloadError> {
    if !v.is_object() {
        return Err(err(file, line, "(trace)", "expected a JSON object with `requests`"));
    }
    known_fields(v, &TRACE_FIELDS, file, line, "")?;
    let block = match v.get("block_size") {
        None => 64,
        Some(b) => b.as_u64().filter(|b| (1..=65536).contains(b)).ok_or_else(|| {
            err(file, line, "block_size", format!("expected a positive block size in tokens, got {b}"))
        })? as u32,
    };
    let local = match v.get("hash_id_scope").and_then(Value::as_str) {
        None | Some("local") => true,
        Some("global") => false,
        Some(s) => return Err(err(file, line, "hash_id_scope", format!("`{s}`: expected local or global"))),
    };
    let turns = weka_calls(v.get("requests").unwrap_or(&Value::Null), file, line, "", 0)?;
    if turns.is_empty() {
        return Err(err(file, line, "requests", "no calls"));
    }
    Ok(Entry { line, time_s: None, turns, block_tokens: block, local_blocks: local })
}

/// A Weka file: one trace object, or one per line.
pub fn weka(file: &str, text: &str) -> Result<Vec<Entry>, WorkloadError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{')
        && let Ok(v) = serde_json::from_str::<Value>(trimmed)
    {
        return Ok(vec![weka_trace(&v, file, 1)?]);
    }
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(l).map_err(|e| err(file, i + 1, "(line)", format!("invalid JSON: {e}")))?;
        out.push(weka_trace(&v, file, i + 1)?);
    }
    Ok(out)
}

/// A Bailian trace: sessions are chains of rows (`parent_chat_id` −1 starts one).
pub fn bailian(file: &str, text: &str) -> Result<Vec<Entry>, WorkloadError> {
    // chat id → (its session's entry index, its row's turn index)
    let mut where_: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    let mut sessions: Vec<(Entry, f64)> = Vec::new();
    let mut last_t = f64::NEG_INFINITY;
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(l).map_err(|e| err(file, line, "(line)", format!("invalid JSON: {e}")))?;
        let known =
            ["chat_id", "parent_chat_id", "timestamp", "input_length", "output_length", "type", "turn", "hash_ids"];
        if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| !known.contains(&k.as_str()))) {
            return Err(err(file, line, k, format!("unknown field (a bailian row has {})", known.join(", "))));
        }
        let int = |f: &str| v.get(f).and_then(Value::as_i64).ok_or_else(|| err(file, line, f, "expected an integer"));
        let (chat, parent) = (int("chat_id")?, int("parent_chat_id")?);
        let t = v
            .get("timestamp")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| err(file, line, "timestamp", "expected non-negative seconds"))?;
        if t < last_t {
            return Err(err(file, line, "timestamp", "rows must not go back in time"));
        }
        last_t = t;
        let input = count(&v, "input_length", file, line, "", 1)?;
        let output = count(&v, "output_length", file, line, "", 0)?.max(1);
        let turn = EntryTurn {
            prompt: Prompt::Tokens(input),
            output_tokens: Some(output),
            hash_ids: ids(&v, "hash_ids", file, line, "")?,
            context: true,
            ..Default::default()
        };
        if where_.contains_key(&chat) {
            return Err(err(file, line, "chat_id", format!("{chat} appears twice")));
        }
        if parent == -1 {
            where_.insert(chat, sessions.len());
            let e =
                Entry { line, time_s: Some(t), turns: vec![turn], block_tokens: BAILIAN_BLOCK, local_blocks: false };
            sessions.push((e, t));
        } else {
            let Some(&k) = where_.get(&parent) else {
                return Err(err(
                    file,
                    line,
                    "parent_chat_id",
                    format!("{parent} is no earlier row's chat_id: the session's link is broken"),
                ));
            };
            let (e, prev) = &mut sessions[k];
            // the recorded gap between the two calls stands for the client's pause
            let mut turn = turn;
            turn.think_s = Some(t - *prev);
            *prev = t;
            e.turns.push(turn);
            where_.insert(chat, k);
        }
    }
    let mut out: Vec<Entry> = sessions.into_iter().map(|(e, _)| e).collect();
    if let Some(t0) = out.first().and_then(|e| e.time_s) {
        for e in &mut out {
            e.time_s = e.time_s.map(|t| t - t0);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"{"id":"t1","block_size":4,"hash_id_scope":"local","requests":[
        {"t":0.0,"type":"s","in":10,"out":3,"hash_ids":[1,2]},
        {"t":5.0,"type":"n","in":14,"out":2,"hash_ids":[1,2,3],"think_time":2.5},
        {"t":6.0,"type":"subagent","agent_id":"a1","requests":[{"t":0.0,"type":"n","in":8,"out":1,"hash_ids":[7,8]}]},
        {"t":9.0,"type":"n","in":20,"out":4,"hash_ids":[1,2,3,4,5]}]}"#;

    #[test]
    fn a_weka_trace_is_calls_with_whole_contexts_and_sub_agents() {
        let e = weka("t.json", TRACE).unwrap();
        assert_eq!(e.len(), 1);
        let t = &e[0];
        assert_eq!((t.block_tokens, t.local_blocks, t.turns.len()), (4, true, 3));
        assert!(t.turns.iter().all(|c| c.context));
        assert_eq!(t.turns[1].hash_ids, vec![1, 2, 3]);
        // think time: the recorded one, else the gap between calls; the first call none
        assert_eq!(t.turns.iter().map(|c| c.think_s.unwrap()).collect::<Vec<_>>(), vec![0.0, 2.5, 4.0]);
        // the sub-agent forks from the call before it
        assert_eq!(t.turns[1].forks.len(), 1);
        assert_eq!(t.turns[1].forks[0][0].hash_ids, vec![7, 8]);
        // JSONL of traces
        let two = format!("{}\n{}\n", TRACE.replace('\n', ""), TRACE.replace('\n', ""));
        assert_eq!(weka("t.jsonl", &two).unwrap().len(), 2);
    }

    #[test]
    fn bad_weka_traces_are_named() {
        for (text, field) in [
            (r#"{"requests":[{"t":0,"in":5,"out":1,"colour":"red"}]}"#, "requests[0].colour"),
            (r#"{"requests":[{"t":0,"in":0,"out":1}]}"#, "requests[0].in"),
            (r#"{"requests":[{"t":0,"type":"x","in":5,"out":1}]}"#, "requests[0].type"),
            (r#"{"requests":[{"t":5,"in":5,"out":1},{"t":1,"in":5,"out":1}]}"#, "requests[1].t"),
            (r#"{"requests":[{"type":"subagent","requests":[]}]}"#, "requests[0].type"),
            (r#"{"requests":[]}"#, "requests"),
            (r#"{"block_size":0,"requests":[]}"#, "block_size"),
            (r#"{"weird":1,"requests":[]}"#, "weird"),
        ] {
            let e = weka("bad.json", text).unwrap_err().to_string();
            assert!(e.contains("bad.json") && e.contains(&format!("field `{field}`")), "{field}: {e}");
        }
    }

    #[test]
    fn bailian_sessions_follow_their_parent_links() {
        let rows = "{\"chat_id\":1,\"parent_chat_id\":-1,\"timestamp\":10.0,\"input_length\":40,\"output_length\":5,\"type\":\"text\",\"turn\":1,\"hash_ids\":[1,2,3]}\n\
                    {\"chat_id\":2,\"parent_chat_id\":-1,\"timestamp\":11.0,\"input_length\":20,\"output_length\":5,\"type\":\"text\",\"turn\":1,\"hash_ids\":[9,10]}\n\
                    {\"chat_id\":3,\"parent_chat_id\":1,\"timestamp\":13.5,\"input_length\":60,\"output_length\":5,\"type\":\"text\",\"turn\":2,\"hash_ids\":[1,2,3,4]}\n";
        let e = bailian("b.jsonl", rows).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].time_s, e[1].time_s), (Some(0.0), Some(1.0)));
        assert_eq!(e[0].turns.len(), 2);
        assert_eq!(e[0].turns[1].think_s, Some(3.5));
        assert_eq!(e[0].block_tokens, 16);
        let broken = rows.replace("\"parent_chat_id\":1,", "\"parent_chat_id\":7,");
        let m = bailian("b.jsonl", &broken).unwrap_err().to_string();
        assert!(m.contains("line 3") && m.contains("parent_chat_id") && m.contains("link is broken"), "{m}");
    }
}
