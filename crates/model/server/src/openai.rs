//! The server's side of the OpenAI wire format: validating requests, OpenAI-style errors, and the
//! chunks of a stream (shaped the way vLLM streams them).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use goodput_wire::Api;
use serde_json::{Value, json};

/// An OpenAI-style error response: `{"error": {"message", "type", "code"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, message: message.into(), kind: "invalid_request_error" }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::NOT_FOUND, message: message.into(), kind: "not_found_error" }
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::METHOD_NOT_ALLOWED, message: message.into(), kind: "invalid_request_error" }
    }
    pub fn too_large(limit: usize) -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("request body is larger than {limit} bytes"),
            kind: "invalid_request_error",
        }
    }
    pub fn overloaded(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::TOO_MANY_REQUESTS, message: message.into(), kind: "rate_limit_error" }
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::SERVICE_UNAVAILABLE, message: message.into(), kind: "server_error" }
    }
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "code": self.status.as_u16()}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// A validated generation request.
#[derive(Clone, Debug, PartialEq)]
pub struct GenRequest {
    pub endpoint: Api,
    pub model: String,
    /// The prompt text (completions) or the messages' contents (chat), for counting.
    pub texts: Vec<String>,
    /// Chat: each message's role (as many as `texts`); empty for completions.
    pub roles: Vec<&'static str>,
    pub max_tokens: Option<u32>,
    pub min_tokens: u32,
    pub ignore_eos: bool,
    pub stream: bool,
    pub include_usage: bool,
    /// The request's own random seed (OpenAI's `seed`): its natural stop and its words.
    pub seed: Option<u64>,
    /// goodput's extension: how many tokens the model thinks before it answers (`max_tokens`
    /// counts them). A real reasoning model decides this itself; the engine model is told.
    pub reasoning_tokens: Option<u32>,
}

/// The chat roles a message may have.
pub const ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

fn uint(v: &Value, field: &str) -> Result<Option<u32>, ApiError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if n <= u32::MAX as u64 => Ok(Some(n as u32)),
            _ => Err(ApiError::bad_request(format!("`{field}` must be a non-negative integer"))),
        },
    }
}

fn boolean(v: &Value, field: &str) -> Result<bool, ApiError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request(format!("`{field}` must be a boolean"))),
    }
}

fn number(v: &Value, field: &str) -> Result<Option<f64>, ApiError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x.as_f64().map(Some).ok_or_else(|| ApiError::bad_request(format!("`{field}` must be a number"))),
    }
}

/// The sampling parameters, checked as vLLM checks them (`SamplingParams`): a request vLLM
/// refuses with a 400 is refused here too, with the same reason. Their values change nothing
/// else in the model (it has no text to sample).
fn sampling(v: &Value) -> Result<(), ApiError> {
    let bad = |m: String| Err(ApiError::bad_request(m));
    if let Some(t) = number(v, "temperature")?
        && t < 0.0
    {
        return bad(format!("`temperature` must be non-negative, got {t}"));
    }
    if let Some(p) = number(v, "top_p")?
        && !(p > 0.0 && p <= 1.0)
    {
        return bad(format!("`top_p` must be in (0, 1], got {p}"));
    }
    if let Some(p) = number(v, "min_p")?
        && !(0.0..=1.0).contains(&p)
    {
        return bad(format!("`min_p` must be in [0, 1], got {p}"));
    }
    match v.get("top_k") {
        None | Some(Value::Null) => {}
        Some(k) => match k.as_i64() {
            Some(k) if k >= -1 => {}
            Some(k) => return bad(format!("`top_k` must be -1 (disable), or at least 1, got {k}")),
            None => return bad("`top_k` must be an integer".into()),
        },
    }
    for f in ["presence_penalty", "frequency_penalty"] {
        if let Some(x) = number(v, f)?
            && !(-2.0..=2.0).contains(&x)
        {
            return bad(format!("`{f}` must be in [-2, 2], got {x}"));
        }
    }
    if let Some(x) = number(v, "repetition_penalty")?
        && x <= 0.0
    {
        return bad(format!("`repetition_penalty` must be greater than zero, got {x}"));
    }
    match v.get("stop") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => return bad("`stop` must be a string or a list of strings".into()),
    }
    Ok(())
}

/// Parses and validates a request body.
pub fn parse(endpoint: Api, body: &[u8]) -> Result<GenRequest, ApiError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let model = match v.get("model") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(ApiError::bad_request("`model` must be a non-empty string")),
        None => return Err(ApiError::bad_request("missing required field `model`")),
    };
    let (texts, roles) = match endpoint {
        Api::Completions => (completion_prompt(&v)?, Vec::new()),
        Api::Chat => chat_messages(&v)?,
    };
    let (max_tokens, min_tokens) = token_limits(&v)?;
    if let Some(n) = uint(&v, "n")?
        && n != 1
    {
        return Err(ApiError::bad_request("only `n: 1` is supported"));
    }
    sampling(&v)?;
    let include_usage = match v.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(o @ Value::Object(_)) => boolean(o, "include_usage")?,
        Some(_) => return Err(ApiError::bad_request("`stream_options` must be an object")),
    };
    Ok(GenRequest {
        endpoint,
        model,
        texts,
        roles,
        max_tokens,
        min_tokens,
        ignore_eos: boolean(&v, "ignore_eos")?,
        stream: boolean(&v, "stream")?,
        include_usage,
        seed: seed(&v)?,
        reasoning_tokens: uint(&v, "reasoning_tokens")?,
    })
}

/// A completions request's `prompt`: one string (alone or in a list of one).
fn completion_prompt(v: &Value) -> Result<Vec<String>, ApiError> {
    match v.get("prompt") {
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            Ok(vec![a[0].as_str().unwrap_or_default().to_string()])
        }
        Some(Value::Array(_)) => {
            Err(ApiError::bad_request("`prompt` must be a string or a list of exactly one string"))
        }
        Some(_) => Err(ApiError::bad_request("`prompt` must be a string")),
        None => Err(ApiError::bad_request("missing required field `prompt`")),
    }
}

/// A chat request's `messages`: each message's text (its text parts joined) and its role.
fn chat_messages(v: &Value) -> Result<(Vec<String>, Vec<&'static str>), ApiError> {
    let Some(msgs) = v.get("messages") else {
        return Err(ApiError::bad_request("missing required field `messages`"));
    };
    let Some(msgs) = msgs.as_array().filter(|a| !a.is_empty()) else {
        return Err(ApiError::bad_request("`messages` must be a non-empty array"));
    };
    let mut roles = Vec::new();
    let mut texts = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        let Some(known) = ROLES.iter().find(|r| Some(**r) == role) else {
            return Err(ApiError::bad_request(format!(
                "messages[{i}].role must be one of system, user, assistant, tool, developer"
            )));
        };
        roles.push(*known);
        match m.get("content") {
            Some(Value::String(s)) => texts.push(s.clone()),
            Some(Value::Array(parts)) => {
                let mut t = String::new();
                for p in parts {
                    match p.get("text").and_then(Value::as_str) {
                        Some(s) => t.push_str(s),
                        None => {
                            return Err(ApiError::bad_request(format!(
                                "messages[{i}].content parts must be text parts ({{\"type\": \"text\", \"text\": ...}})"
                            )));
                        }
                    }
                }
                texts.push(t);
            }
            Some(Value::Null) | None if role == Some("assistant") => texts.push(String::new()),
            _ => return Err(ApiError::bad_request(format!("messages[{i}].content must be a string"))),
        }
    }
    Ok((texts, roles))
}

/// The request's `max_tokens` (`max_completion_tokens` first) and `min_tokens`, checked against each other.
fn token_limits(v: &Value) -> Result<(Option<u32>, u32), ApiError> {
    let max_tokens = match uint(v, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => uint(v, "max_tokens")?,
    };
    if max_tokens == Some(0) {
        return Err(ApiError::bad_request("`max_tokens` must be at least 1"));
    }
    let min_tokens = uint(v, "min_tokens")?.unwrap_or(0);
    if let Some(m) = max_tokens
        && min_tokens > m
    {
        return Err(ApiError::bad_request(format!("`min_tokens` ({min_tokens}) must not exceed `max_tokens` ({m})")));
    }
    Ok((max_tokens, min_tokens))
}

/// The request's `seed`, if given: an integer (a negative one taken as its two's complement).
fn seed(v: &Value) -> Result<Option<u64>, ApiError> {
    Ok(match v.get("seed") {
        None | Some(Value::Null) => None,
        Some(x) => match (x.as_u64(), x.as_i64()) {
            (Some(n), _) => Some(n),
            (None, Some(n)) => Some(n as u64),
            _ => return Err(ApiError::bad_request("`seed` must be an integer")),
        },
    })
}

/// Builds the stream's JSON chunks for one request, writing their bytes directly: the part every
/// chunk shares (`data: {"id":…,"object":…,"created":…,"model":…,"choices":[`) is built once per
/// stream, and each chunk appends its choice with only its text JSON-escaped (no `json!` tree, one
/// allocation per chunk).
pub struct Chunks {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub endpoint: Api,
    head: String,
}

impl Chunks {
    pub fn new(id: String, created: u64, model: String, endpoint: Api) -> Self {
        let mut head = String::with_capacity(64 + id.len() + model.len());
        head.push_str("data: {\"id\":");
        push_json_str(&mut head, &id);
        head.push_str(",\"object\":\"");
        head.push_str(match endpoint {
            Api::Completions => "text_completion",
            Api::Chat => "chat.completion.chunk",
        });
        head.push_str("\",\"created\":");
        head.push_str(&created.to_string());
        head.push_str(",\"model\":");
        push_json_str(&mut head, &model);
        head.push_str(",\"choices\":[");
        Chunks { id, created, model, endpoint, head }
    }

    fn start(&self, extra: usize) -> String {
        let mut s = String::with_capacity(self.head.len() + 96 + extra);
        s.push_str(&self.head);
        s
    }

    /// The first chunk of a chat stream: the role, no content.
    pub fn role(&self) -> String {
        let mut s = self.start(0);
        s.push_str(
            "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        );
        s
    }

    /// Generated text, with the finish reason on the last one.
    pub fn text(&self, text: &str, finish: Option<&str>) -> String {
        self.parts("", text, finish)
    }

    /// Generated reasoning and answer text (either may be empty), with the finish reason on the
    /// last chunk: chat streams the reasoning as `delta.reasoning_content` (as vLLM's reasoning
    /// parsers do); completions have no field for it, so the caller wraps it in `<think>` tags.
    pub fn parts(&self, reasoning: &str, text: &str, finish: Option<&str>) -> String {
        let mut s = self.start(reasoning.len() + text.len() + 8);
        match self.endpoint {
            Api::Completions => {
                s.push_str("{\"index\":0,\"text\":");
                if reasoning.is_empty() {
                    push_json_str(&mut s, text);
                } else {
                    push_json_str(&mut s, &format!("{reasoning}{text}"));
                }
            }
            Api::Chat => {
                s.push_str("{\"index\":0,\"delta\":{");
                if !reasoning.is_empty() {
                    s.push_str("\"reasoning_content\":");
                    push_json_str(&mut s, reasoning);
                }
                if !text.is_empty() || reasoning.is_empty() {
                    if !reasoning.is_empty() {
                        s.push(',');
                    }
                    s.push_str("\"content\":");
                    push_json_str(&mut s, text);
                }
                s.push('}');
            }
        }
        s.push_str(",\"logprobs\":null,\"finish_reason\":");
        match finish {
            Some(f) => push_json_str(&mut s, f),
            None => s.push_str("null"),
        }
        s.push_str("}]}\n\n");
        s
    }

    pub fn usage(&self, prompt: u64, completion: u64) -> String {
        self.usage_with(prompt, completion, 0)
    }

    /// Usage with `completion_tokens_details.reasoning_tokens` when the model reasoned.
    pub fn usage_with(&self, prompt: u64, completion: u64, reasoning: u64) -> String {
        use std::fmt::Write;
        let mut s = self.start(0);
        let details = if reasoning > 0 {
            format!(",\"completion_tokens_details\":{{\"reasoning_tokens\":{reasoning}}}")
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion},\"total_tokens\":{}{details}}}}}\n\n",
            prompt + completion
        );
        s
    }

    /// The whole response of a non-streaming request (`reasoning`: its thinking and tokens).
    pub fn full(&self, text: &str, finish: &str, prompt: u64, completion: u64) -> Value {
        self.full_with(("", 0), text, finish, prompt, completion)
    }

    pub fn full_with(&self, reasoning: (&str, u64), text: &str, finish: &str, prompt: u64, completion: u64) -> Value {
        let choice = match self.endpoint {
            Api::Completions => {
                json!({"index": 0, "text": format!("{}{text}", reasoning.0), "logprobs": null, "finish_reason": finish})
            }
            Api::Chat if !reasoning.0.is_empty() => json!({"index": 0,
                "message": {"role": "assistant", "reasoning_content": reasoning.0, "content": text},
                "logprobs": null, "finish_reason": finish}),
            Api::Chat => {
                json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": finish})
            }
        };
        let object = match self.endpoint {
            Api::Completions => "text_completion",
            Api::Chat => "chat.completion",
        };
        let mut usage = usage(prompt, completion);
        if reasoning.1 > 0 {
            usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning.1});
        }
        json!({"id": self.id, "object": object, "created": self.created, "model": self.model,
               "choices": [choice], "usage": usage})
    }
}

/// Appends `v` as a JSON string (quoted, escaped).
fn push_json_str(out: &mut String, v: &str) {
    // serde_json writes valid UTF-8 for a &str, so the bytes stay a String
    let mut buf = std::mem::take(out).into_bytes();
    serde_json::to_writer(&mut buf, v).expect("writing to a Vec cannot fail");
    *out = String::from_utf8(buf).expect("serde_json writes UTF-8");
}

fn usage(prompt: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_requests() {
        let r = parse(Api::Completions, br#"{"model":"m","prompt":"hi","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"min_tokens":5}"#).unwrap();
        assert_eq!(
            (r.max_tokens, r.min_tokens, r.stream, r.include_usage, r.ignore_eos),
            (Some(5), 5, true, true, true)
        );
        let r = parse(Api::Chat, br#"{"model":"m","messages":[{"role":"system","content":"a"},{"role":"user","content":[{"type":"text","text":"b"}]}]}"#).unwrap();
        assert_eq!(r.texts, vec!["a", "b"]);
        assert_eq!(r.max_tokens, None);
    }

    #[test]
    fn sampling_parameters_vllm_refuses_are_refused() {
        let req = |extra: &str| parse(Api::Completions, format!(r#"{{"model":"m","prompt":"hi",{extra}}}"#).as_bytes());
        for ok in [
            r#""temperature":0"#,
            r#""temperature":1.5"#,
            r#""top_p":1"#,
            r#""top_p":0.01"#,
            r#""top_k":-1"#,
            r#""top_k":40"#,
            r#""min_p":0"#,
            r#""presence_penalty":-2"#,
            r#""frequency_penalty":2"#,
            r#""repetition_penalty":1.1"#,
            r#""stop":["x","y"]"#,
            r#""stop":"x""#,
            r#""temperature":null"#,
        ] {
            assert!(req(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            (r#""temperature":"hot""#, "`temperature` must be a number"),
            (r#""temperature":-0.1"#, "`temperature` must be non-negative"),
            (r#""top_p":0"#, "`top_p` must be in (0, 1]"),
            (r#""top_p":1.5"#, "`top_p` must be in (0, 1]"),
            (r#""top_k":-2"#, "`top_k` must be -1"),
            (r#""top_k":2.5"#, "`top_k` must be an integer"),
            (r#""min_p":2"#, "`min_p` must be in [0, 1]"),
            (r#""presence_penalty":3"#, "`presence_penalty` must be in [-2, 2]"),
            (r#""repetition_penalty":0"#, "`repetition_penalty` must be greater than zero"),
            (r#""stop":[1]"#, "`stop` must be a string or a list of strings"),
        ] {
            let e = req(bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(says), "{bad}: {}", e.message);
            assert_eq!(e.body()["error"]["type"], "invalid_request_error");
        }
    }

    #[test]
    fn invalid_requests_name_the_field() {
        for (ep, body, needle) in [
            (Api::Completions, &b"{nope"[..], "invalid JSON"),
            (Api::Completions, br#"{"prompt":"x"}"#, "`model`"),
            (Api::Completions, br#"{"model":"m"}"#, "`prompt`"),
            (Api::Completions, br#"{"model":"m","prompt":3}"#, "`prompt`"),
            (Api::Completions, br#"{"model":"m","prompt":"x","max_tokens":-1}"#, "`max_tokens`"),
            (Api::Completions, br#"{"model":"m","prompt":"x","max_tokens":0}"#, "`max_tokens`"),
            (Api::Completions, br#"{"model":"m","prompt":"x","max_tokens":2,"min_tokens":3}"#, "`min_tokens`"),
            (Api::Completions, br#"{"model":"m","prompt":"x","stream":"yes"}"#, "`stream`"),
            (Api::Completions, br#"{"model":"m","prompt":"x","n":2}"#, "`n: 1`"),
            (Api::Chat, br#"{"model":"m","messages":[]}"#, "`messages`"),
            (Api::Chat, br#"{"model":"m","messages":[{"role":"wizard","content":"x"}]}"#, "role"),
            (Api::Chat, br#"{"model":"m","messages":[{"role":"user","content":5}]}"#, "content"),
        ] {
            let e = parse(ep, body).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{needle}: {}", e.message);
        }
    }

    #[test]
    fn reasoning_chunks() {
        let c = Chunks::new("c".into(), 1, "m".into(), Api::Chat);
        let j = |s: String| -> Value { serde_json::from_str(s.trim().strip_prefix("data: ").unwrap()).unwrap() };
        let t = j(c.parts(" think", "", None));
        assert_eq!(t["choices"][0]["delta"], json!({"reasoning_content": " think"}));
        let t = j(c.parts(" a", " b", Some("stop")));
        assert_eq!(t["choices"][0]["delta"], json!({"reasoning_content": " a", "content": " b"}));
        let u = j(c.usage_with(3, 9, 7));
        assert_eq!(u["usage"]["completion_tokens_details"]["reasoning_tokens"], 7);
        assert!(j(c.usage(3, 9))["usage"].get("completion_tokens_details").is_none());
        let r = parse(Api::Chat, br#"{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_tokens":5}"#);
        assert_eq!(r.unwrap().reasoning_tokens, Some(5));
        let e = parse(Api::Chat, br#"{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_tokens":-1}"#);
        assert!(e.unwrap_err().message.contains("`reasoning_tokens`"));
    }

    #[test]
    fn chunk_shapes() {
        let c = Chunks::new("cmpl-1".into(), 1, "m".into(), Api::Chat);
        let role: Value = serde_json::from_str(c.role().trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(role["choices"][0]["delta"]["role"], "assistant");
        let t: Value =
            serde_json::from_str(c.text(" a", Some("length")).trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(t["choices"][0]["delta"]["content"], " a");
        assert_eq!(t["choices"][0]["finish_reason"], "length");
        let u: Value = serde_json::from_str(c.usage(3, 4).trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(u["usage"]["total_tokens"], 7);
        assert_eq!(u["choices"].as_array().unwrap().len(), 0);
    }

    /// The bytes written directly are exactly the JSON a `json!` tree gave (same values, escaping
    /// included), for both endpoints, with and without a finish reason.
    #[test]
    fn direct_chunks_match_the_json_tree() {
        let parse = |s: String| -> Value {
            assert!(s.starts_with("data: {") && s.ends_with("}\n\n"), "{s:?}");
            serde_json::from_str(s.trim().strip_prefix("data: ").unwrap()).unwrap()
        };
        let text = "a \"q\" \\ \n\u{1}é";
        for (ep, object) in [(Api::Completions, "text_completion"), (Api::Chat, "chat.completion.chunk")] {
            let c = Chunks::new("cmpl-\"7\"".into(), 42, "m/\"x\"".into(), ep);
            let wrap = |choices: Value| json!({"id": "cmpl-\"7\"", "object": object, "created": 42, "model": "m/\"x\"", "choices": choices});
            for finish in [None, Some("length")] {
                let choice = match ep {
                    Api::Completions => json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish}),
                    Api::Chat => {
                        json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": finish})
                    }
                };
                assert_eq!(parse(c.text(text, finish)), wrap(json!([choice])));
            }
            let mut usage = wrap(json!([]));
            usage["usage"] = json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7});
            assert_eq!(parse(c.usage(3, 4)), usage);
            assert_eq!(
                parse(c.role()),
                wrap(
                    json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}])
                )
            );
        }
    }
}
