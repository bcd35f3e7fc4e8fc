//! The OpenAI wire format: request bodies for `/v1/completions` and `/v1/chat/completions`, and
//! the classification of each streamed chunk.

use goodput_workload::Message;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

pub use goodput_wire::Api;

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
    /// `completion_tokens_details`: how many of the completion tokens were reasoning.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

/// `usage.completion_tokens_details`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// The reasoning tokens the server reported.
    pub fn reasoning_tokens(&self) -> Option<u64> {
        self.completion_tokens_details.and_then(|d| d.reasoning_tokens)
    }
}

/// What one `data:` payload carried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    /// Generated text in this chunk (text, content, reasoning, tool-call names and arguments).
    pub text: String,
    /// True when the chunk carried any non-empty generated content: a content event.
    pub is_content: bool,
    /// Of the text it appended, the leading bytes that came from reasoning fields
    /// (`reasoning_content`, `reasoning`); the rest is content and tool calls.
    pub reasoning_bytes: usize,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// An error object sent inside the stream.
    pub error: Option<String>,
    /// The response id the server gave (`"id"`).
    pub id: Option<String>,
}

/// A string field borrowed from the event's data when it has no escapes (no allocation), owned
/// otherwise. (serde borrows a `Cow` only as a field of its own, not inside an `Option`.)
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct RawChunk<'a> {
    /// Kept as text whatever its JSON type (a number, an object).
    #[serde(default, borrow, deserialize_with = "any_as_text")]
    id: Option<Text<'a>>,
    #[serde(default, borrow)]
    choices: Vec<RawChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    object: Option<Text<'a>>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Text<'a>>,
    #[serde(default, borrow)]
    delta: Option<RawDelta<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

/// Any JSON value as text: a string as itself (borrowed when it can be), `null` as absent, any
/// other value as its JSON.
fn any_as_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Text<'de>>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<Text<'de>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Borrowed(v))))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Owned(v.to_string()))))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Owned(v))))
        }
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Owned(v.to_string()))))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Owned(v.to_string()))))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Owned(v.to_string()))))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(Text(Cow::Owned(Value::from(v).to_string()))))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
            let v = Value::deserialize(serde::de::value::SeqAccessDeserializer::new(a))?;
            Ok(Some(Text(Cow::Owned(v.to_string()))))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
            let v = Value::deserialize(serde::de::value::MapAccessDeserializer::new(a))?;
            Ok(Some(Text(Cow::Owned(v.to_string()))))
        }
    }
    d.deserialize_option(V)
}

#[derive(Debug, thiserror::Error)]
#[error("invalid JSON in stream event ({source}): {excerpt}")]
pub struct ChunkError {
    /// The event's first 120 characters.
    pub excerpt: String,
    pub source: serde_json::Error,
}

/// Parses one `data:` payload (not `[DONE]`). An `Err` means the stream is malformed.
pub fn parse_chunk(data: &str) -> Result<Chunk, ChunkError> {
    let mut text = String::new();
    let mut c = parse_chunk_into(data, &mut text, true)?;
    c.text = text;
    Ok(c)
}

/// As [`parse_chunk`], appending the chunk's generated text to `text` (the returned
/// [`Chunk::text`] stays empty) and keeping its id only when `want_id`: a stream's events share
/// one text buffer, so a chunk costs no allocation of its own.
pub fn parse_chunk_into(data: &str, text: &mut String, want_id: bool) -> Result<Chunk, ChunkError> {
    let raw: RawChunk = serde_json::from_str(data)
        .map_err(|source| ChunkError { excerpt: data.chars().take(120).collect(), source })?;
    let id = if want_id { raw.id.map(|t| t.0.into_owned()) } else { None };
    let mut c = Chunk { usage: raw.usage, id, ..Default::default() };
    if let Some(e) = raw.error.filter(|e| !e.is_null()) {
        c.error = Some(error_text(&e));
    } else if raw.object.as_ref().is_some_and(|o| o.0 == "error") {
        c.error = Some(raw.message.unwrap_or_else(|| "error object in stream".into()));
    }
    let start = text.len();
    for ch in raw.choices {
        if let Some(t) = ch.text {
            push_text(text, t.0);
        }
        if let Some(d) = ch.delta {
            // reasoning first, then the answer: a chunk's reasoning bytes lead its text
            let before = text.len();
            for t in [d.reasoning_content, d.reasoning].into_iter().flatten() {
                push_text(text, t.0);
            }
            if before == start {
                c.reasoning_bytes = text.len() - before;
            }
            if let Some(t) = d.content {
                push_text(text, t.0);
            }
            for call in d.tool_calls.unwrap_or_default() {
                let f = &call["function"];
                let before = text.len();
                for k in ["name", "arguments"] {
                    if let Some(s) = f[k].as_str() {
                        text.push_str(s);
                    }
                }
                if text.len() == before && !call.is_null() {
                    // a tool call with only an id/type still carries content
                    c.is_content = true;
                }
            }
        }
        if ch.finish_reason.is_some() {
            c.finish_reason = ch.finish_reason;
        }
    }
    c.is_content |= text.len() > start;
    Ok(c)
}

/// Appends `t` to `text`, taking an owned string as it is when `text` is still empty.
fn push_text(text: &mut String, t: Cow<'_, str>) {
    match t {
        Cow::Owned(o) if text.is_empty() => *text = o,
        t => text.push_str(&t),
    }
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
    fn borrowed_and_escaped_text_parse_alike() {
        // escapes force an owned string; plain text is borrowed; both give the same chunk
        let c = parse_chunk(r#"{"id":null,"choices":[{"text":"a\"b\n\u00e9"}]}"#).unwrap();
        assert_eq!((c.text.as_str(), c.id.as_deref()), ("a\"b\né", None));
        let c = parse_chunk(r#"{"id":{"k":1},"choices":[{"delta":{"reasoning":"r","content":"c\t"}}]}"#).unwrap();
        assert_eq!((c.text.as_str(), c.id.as_deref()), ("rc\t", Some(r#"{"k":1}"#)));
        let c = parse_chunk(r#"{"id":1.5,"object":"error","message":"m"}"#).unwrap();
        assert_eq!((c.id.as_deref(), c.error.as_deref()), (Some("1.5"), Some("m")));
    }

    #[test]
    fn reasoning_leads_a_chunks_text_and_usage_counts_it() {
        let c = parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"hmm","content":"Yes"}}]}"#).unwrap();
        assert_eq!((c.text.as_str(), c.reasoning_bytes, c.is_content), ("hmmYes", 3, true));
        let c = parse_chunk(r#"{"choices":[{"delta":{"reasoning":"ok"}}]}"#).unwrap();
        assert_eq!((c.text.as_str(), c.reasoning_bytes), ("ok", 2));
        let c = parse_chunk(r#"{"choices":[{"delta":{"content":"a"}}]}"#).unwrap();
        assert_eq!(c.reasoning_bytes, 0);
        let c = parse_chunk(
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}}"#,
        )
        .unwrap();
        assert_eq!(c.usage.unwrap().reasoning_tokens(), Some(7));
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
        assert_eq!(u.usage, Some(Usage { prompt_tokens: Some(5), completion_tokens: Some(9), ..Default::default() }));
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
