//! The OpenAI wire format: request bodies for `/v1/completions` and `/v1/chat/completions`, and
//! the classification of each streamed chunk.

use goodput_workload::Message;
use serde::Deserialize;
use serde_json::{Value, json};

pub use goodput_results::Api;

/// The request body for one turn.
pub fn request_body(
    api: Api,
    model: &str,
    messages: &[Message],
    prompt_text: impl FnOnce() -> String,
    max_tokens: u32,
    ignore_eos: bool,
    extra: Option<&serde_json::Map<String, Value>>,
) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let obj = body.as_object_mut().expect("object");
    match api {
        Api::Completions => {
            obj.insert("prompt".into(), Value::String(prompt_text()));
        }
        Api::Chat => {
            obj.insert("messages".into(), serde_json::to_value(messages).expect("messages"));
        }
    }
    if ignore_eos {
        obj.insert("ignore_eos".into(), Value::Bool(true));
        obj.insert("min_tokens".into(), json!(max_tokens));
    }
    if let Some(extra) = extra {
        for (k, v) in extra {
            obj.insert(k.clone(), v.clone());
        }
    }
    body
}

/// Token usage reported by the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// What one `data:` payload carried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    /// Generated text in this chunk (text, content, reasoning, tool-call names and arguments).
    pub text: String,
    /// True when the chunk carried any non-empty generated content: a content event.
    pub is_content: bool,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// An error object sent inside the stream.
    pub error: Option<String>,
    /// The response id the server gave (`"id"`).
    pub id: Option<String>,
}

#[derive(Deserialize)]
struct RawChunk {
    /// Any JSON: some servers send a number; a type we do not use must not fail the stream.
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    choices: Vec<RawChoice>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
    /// vLLM-style top-level error objects: `{"object": "error", "message": ...}`.
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct RawChoice {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

/// A stream event whose payload is not a chunk: the stream is malformed.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON in stream event ({source}): {excerpt}")]
pub struct ChunkError {
    /// The event's first 120 characters.
    pub excerpt: String,
    pub source: serde_json::Error,
}

/// Parses one `data:` payload (not `[DONE]`). An `Err` means the stream is malformed.
pub fn parse_chunk(data: &str) -> Result<Chunk, ChunkError> {
    let raw: RawChunk = serde_json::from_str(data)
        .map_err(|source| ChunkError { excerpt: data.chars().take(120).collect(), source })?;
    let id = raw.id.map(|v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    });
    let mut c = Chunk { usage: raw.usage, id, ..Default::default() };
    if let Some(e) = raw.error.filter(|e| !e.is_null()) {
        c.error = Some(error_text(&e));
    } else if raw.object.as_deref() == Some("error") {
        c.error = Some(raw.message.unwrap_or_else(|| "error object in stream".into()));
    }
    for ch in raw.choices {
        if let Some(t) = ch.text {
            c.text.push_str(&t);
        }
        if let Some(d) = ch.delta {
            for t in [d.reasoning_content, d.reasoning, d.content].into_iter().flatten() {
                c.text.push_str(&t);
            }
            for call in d.tool_calls.unwrap_or_default() {
                let f = &call["function"];
                let before = c.text.len();
                for k in ["name", "arguments"] {
                    if let Some(s) = f[k].as_str() {
                        c.text.push_str(s);
                    }
                }
                if c.text.len() == before && !call.is_null() {
                    // a tool call with only an id/type still carries content
                    c.is_content = true;
                }
            }
        }
        if ch.finish_reason.is_some() {
            c.finish_reason = ch.finish_reason;
        }
    }
    c.is_content |= !c.text.is_empty();
    Ok(c)
}

fn error_text(e: &Value) -> String {
    match e {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            let msg = o.get("message").and_then(Value::as_str).unwrap_or("error object in stream");
            match o.get("code").or(o.get("type")) {
                Some(code) if !code.is_null() => {
                    format!("{msg} ({})", code.to_string().trim_matches('"'))
                }
                _ => msg.to_string(),
            }
        }
        other => other.to_string(),
    }
}

/// A `GET /v1/models` answer that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON from /v1/models ({source}): {excerpt}")]
pub struct ModelsError {
    /// The body's first 120 characters.
    pub excerpt: String,
    pub source: serde_json::Error,
}

/// The model ids a server lists at `GET /v1/models`.
pub fn parse_models(body: &[u8]) -> Result<Vec<String>, ModelsError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|source| ModelsError { excerpt: String::from_utf8_lossy(body).chars().take(120).collect(), source })?;
    let ids: Vec<String> = v["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["id"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_id_type_is_kept_as_text() {
        let c = parse_chunk(r#"{"id":"cmpl-1","choices":[{"text":" a"}]}"#).unwrap();
        assert_eq!(c.id.as_deref(), Some("cmpl-1"));
        let c = parse_chunk(r#"{"id":7,"choices":[{"text":" a"}]}"#).unwrap();
        assert_eq!((c.id.as_deref(), c.is_content), (Some("7"), true));
    }

    #[test]
    fn completion_and_chat_content() {
        let c = parse_chunk(r#"{"choices":[{"index":0,"text":" hi","finish_reason":null}]}"#).unwrap();
        assert!(c.is_content);
        assert_eq!(c.text, " hi");
        let role = parse_chunk(r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#).unwrap();
        assert!(!role.is_content);
        let empty = parse_chunk(r#"{"choices":[{"delta":{"content":""}}]}"#).unwrap();
        assert!(!empty.is_content);
        let r = parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#).unwrap();
        assert_eq!((r.is_content, r.text.as_str()), (true, "think"));
        let t =
            parse_chunk(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}"#)
                .unwrap();
        assert!(t.is_content);
    }

    #[test]
    fn usage_only_and_finish() {
        let u = parse_chunk(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}"#)
            .unwrap();
        assert!(!u.is_content);
        assert_eq!(u.usage, Some(Usage { prompt_tokens: Some(5), completion_tokens: Some(9) }));
        let f = parse_chunk(
            r#"{"choices":[{"text":"","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(f.finish_reason.as_deref(), Some("length"));
        assert!(!f.is_content);
    }

    #[test]
    fn errors_in_stream() {
        let e = parse_chunk(r#"{"error":{"message":"boom","type":"InternalError","code":500}}"#).unwrap();
        assert_eq!(e.error.as_deref(), Some("boom (500)"));
        let tgi = parse_chunk(r#"{"error":"Input validation error","error_type":"validation"}"#).unwrap();
        assert_eq!(tgi.error.as_deref(), Some("Input validation error"));
        let v = parse_chunk(r#"{"object":"error","message":"bad"}"#).unwrap();
        assert_eq!(v.error.as_deref(), Some("bad"));
        let e = parse_chunk("{not json").unwrap_err();
        assert_eq!(e.excerpt, "{not json");
        assert!(e.to_string().starts_with("invalid JSON in stream event ("), "{e}");
    }

    #[test]
    fn bodies() {
        let m = vec![Message { role: "user".into(), content: "hi".into() }];
        let b = request_body(Api::Chat, "m", &m, String::new, 8, true, None);
        assert_eq!(b["messages"][0]["content"], "hi");
        assert_eq!(b["min_tokens"], 8);
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        let b = request_body(Api::Completions, "m", &m, || "p".into(), 8, false, None);
        assert_eq!(b["prompt"], "p");
        assert!(b.get("ignore_eos").is_none());
    }

    #[test]
    fn models() {
        assert_eq!(parse_models(br#"{"object":"list","data":[{"id":"a"},{"id":"b"}]}"#).unwrap(), vec!["a", "b"]);
        let e = parse_models(b"<html>busy</html>").unwrap_err();
        assert!(e.to_string().contains("/v1/models") && e.to_string().ends_with("<html>busy</html>"), "{e}");
    }
}
