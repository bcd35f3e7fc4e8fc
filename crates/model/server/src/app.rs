//! The HTTP layer: shared state, the router, and the OpenAI handlers (validation, counting the
//! prompt, submitting to the engine, streaming its tokens back).

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use goodput_engine::{EngineRequest, Reject, SeqId, block_hashes, reasoned_length};
use goodput_tokenizer::Tokenizer;
use goodput_wire::Api;
use http_body_util::BodyExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::driver::{self, TokenEvent};
use crate::openai::{self, ApiError, Chunks, GenRequest};
use crate::priority::lower_priority_by;
use crate::state::{AppState, Inner, Trace};
use crate::stream::{Phase, TokenStream};

/// The router: OpenAI endpoints, `/health`, `/metrics`, and OpenAI-style 404s for anything else
/// (405s for a known path with the wrong method).
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { StatusCode::OK }))
        .route("/metrics", get(prometheus))
        .fallback(|req: Request| async move {
            ApiError::not_found(format!("no route for {} {}", req.method(), req.uri().path())).into_response()
        })
        .method_not_allowed_fallback(|req: Request| async move {
            let m = format!("{} is not allowed on {}", req.method(), req.uri().path());
            ApiError::method_not_allowed(m).into_response()
        })
        .with_state(state)
}

/// Serves `app(state)` on `listener` until `shutdown` resolves, then lets the connections finish
/// what they are doing (at most [`DRAIN`]). Every accepted connection gets TCP_NODELAY (without
/// it, streamed chunks stall for ~40 ms behind Nagle's algorithm), and one that has begun a
/// request but not sent all of its header within the header timeout is closed (slowloris), as
/// are keep-alive connections idle for longer.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let engine = state.engine().clone();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(state.0.cfg.header_timeout).keep_alive(true);
    let service = hyper_util::service::TowerToHyperService::new(app(state));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    let r = loop {
        let (tcp, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                // out of descriptors, or a connection reset before it was taken: go on
                Err(e) if accept_error_is_transient(&e) => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    continue;
                }
                Err(e) => break Err(e),
            },
            () = &mut shutdown => break Ok(()),
        };
        let _ = tcp.set_nodelay(true);
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(tcp), service.clone());
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    };
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    engine.stop();
    r
}

/// The longest the server waits, once stopping, for its connections to finish.
pub const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// An accept error after which the listener still works.
fn accept_error_is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock)
        || matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

async fn models(State(s): State<AppState>) -> Response {
    let m = &s.0;
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{"id": m.cfg.model_name, "object": "model", "created": m.created, "owned_by": "goodput",
                  "max_model_len": m.max_context}]
    }))
    .into_response()
}

async fn prometheus(State(s): State<AppState>) -> Response {
    let text = s.0.metrics.render(&s.0.cfg.model_name, &s.0.engine.gauges());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn completions(State(s): State<AppState>, req: Request) -> Response {
    generate(s, Api::Completions, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn chat(State(s): State<AppState>, req: Request) -> Response {
    generate(s, Api::Chat, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::too_large(limit)),
        Err(e) => Err(ApiError::bad_request(format!("cannot read the request body: {e}"))),
    }
}

/// Tokens a chat template adds: 3 per message and 3 to prime the reply (OpenAI's counting rule).
fn template_tokens(endpoint: Api, messages: usize) -> u64 {
    match endpoint {
        Api::Completions => 0,
        Api::Chat => 3 * messages as u64 + 3,
    }
}

/// A parsed request and its prompt's length in tokens (with the chat template's).
struct Counted {
    request: GenRequest,
    prompt: u64,
    sequence: Option<Vec<u64>>,
}

/// A chat role's marker in a hashed sequence (above every token id).
fn role_marker(role: &str) -> u64 {
    let i = openai::ROLES.iter().position(|r| *r == role).unwrap_or(0);
    (1 << 40) + i as u64
}

/// The prompt as the prefix cache sees it: its token ids (`texts`: each text's), each chat
/// message after its role's marker, and for chat the assistant's marker that opens the reply (as
/// a chat template's generation prompt does). The next turn of a conversation repeats this
/// sequence and the reply.
fn prompt_sequence(r: &GenRequest, texts: Vec<Vec<u32>>) -> Vec<u64> {
    let mut seq = Vec::new();
    for (i, ids) in texts.into_iter().enumerate() {
        if let Some(role) = r.roles.get(i) {
            seq.push(role_marker(role));
        }
        seq.extend(ids.into_iter().map(u64::from));
    }
    if r.endpoint == Api::Chat {
        seq.push(role_marker("assistant"));
    }
    seq
}

/// The block hashes of a request whose prompt is `sequence` and whose reply will be the `output`
/// words the stream's generator draws from `rng`.
fn sequence_hashes(tk: &Tokenizer, mut sequence: Vec<u64>, rng: &ChaCha8Rng, output: u32, block_size: u32) -> Vec<u64> {
    sequence.extend(tk.words_ids(output as usize, &mut rng.clone()).into_iter().map(u64::from));
    let tokens: Vec<(u64, u32)> = sequence.into_iter().map(|t| (t, 1)).collect();
    block_hashes(&tokens, block_size)
}

/// Parses a request and counts its prompt, off the runtime's workers (a blocking-pool thread at
/// lowered priority) and in bounded time: counting stops as soon as the prompt passes the model's
/// context, and a prompt whose byte length alone proves it too long is not counted at all. So a
/// huge prompt costs the server a bounded amount of CPU and never delays other streams' tokens.
///
/// When the engine reuses prefixes it also returns the prompt's content as a token sequence to
/// hash ([`prompt_sequence`]).
async fn parse_and_count(s: &AppState, endpoint: Api, bytes: Bytes) -> Result<Counted, ApiError> {
    let tk = s.0.tokenizer.clone();
    let max_context = s.0.max_context;
    let caching = s.0.engine.prefix_block_size().is_some();
    let job = move || -> Result<Counted, ApiError> {
        lower_priority_by(5);
        let r: GenRequest = openai::parse(endpoint, &bytes)?;
        let template = template_tokens(endpoint, r.texts.len());
        let limit = max_context.saturating_sub(template) as usize;
        let texts = r.texts.iter().map(String::as_str);
        // with prefix caching the ids are kept to hash (one pass: tokenizing a long context twice
        // cost a few ms per call, time `sim` does not spend)
        let counted = if caching {
            tk.encode_at_most(texts, limit).map(|ids| (ids.iter().map(Vec::len).sum(), Some(ids)))
        } else {
            tk.count_at_most(texts, limit).map(|n| (n, None))
        };
        match counted {
            Ok((n, ids)) => {
                let sequence = ids.map(|ids| prompt_sequence(&r, ids));
                Ok(Counted { prompt: n as u64 + template, sequence, request: r })
            }
            Err(at_least) => Err(ApiError::bad_request(format!(
                "This model's maximum context length is {max_context} tokens. However, your prompt has at least {} \
                 tokens. Please reduce the length of the messages or prompt.",
                at_least as u64 + template
            ))),
        }
    };
    tokio::task::spawn_blocking(job).await.map_err(|_| ApiError::unavailable("the request could not be read"))?
}

/// Serves one completions or chat request: checks it, submits it to the engine, then streams or returns its tokens.
async fn generate(s: AppState, endpoint: Api, req: Request) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let m = &s.0;
    let bytes = read_body(req.into_body(), m.cfg.max_body_bytes).await?;
    let Counted { request: r, prompt, sequence } = parse_and_count(&s, endpoint, bytes).await?;
    if r.model != m.cfg.model_name {
        return Err(ApiError::not_found(format!(
            "The model `{}` does not exist (this server serves `{}`).",
            r.model, m.cfg.model_name
        )));
    }
    let max_tokens = checked_max_tokens(m, &r, endpoint, prompt)?;
    let id = m.next_id.fetch_add(1, Ordering::Relaxed);
    // the request's own seed when it sends one (goodput does, to the embedded engine, so that
    // natural stops match the simulator's); otherwise one per request from the server's seed
    let seed = r.seed.unwrap_or(m.cfg.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let rng = ChaCha8Rng::seed_from_u64(seed);
    let max_tokens = max_tokens.min(u32::MAX as u64);
    // a reasoning model thinks first (as the request says, else as the server's model does),
    // then answers within what max_tokens leaves
    let think = r.reasoning_tokens.or_else(|| {
        m.cfg.reasoning_tokens.as_ref().map(|d| {
            let mut g = ChaCha8Rng::seed_from_u64(seed ^ 0x7265_6173_6f6e);
            d.sample(&mut g)
        })
    });
    let (reasoning, output) = reasoned_length(seed, r.min_tokens, max_tokens as u32, think.unwrap_or(0), r.ignore_eos);
    let ereq = EngineRequest {
        prompt_tokens: prompt.min(u32::MAX as u64) as u32,
        output_tokens: output,
        max_tokens: max_tokens as u32,
        seed,
        frontend_seed: 0,
        block_hashes: match (sequence, m.engine.prefix_block_size()) {
            (Some(seq), Some(bs)) => sequence_hashes(&m.tokenizer, seq, &rng, output, bs),
            _ => Vec::new(),
        },
        kv_ready: false,
    };
    let rx = submit(m, id, ereq, arrived).await?;
    m.metrics.prompt(prompt);
    let chunks = Chunks::new(format!("cmpl-{id}"), m.created, m.cfg.model_name.clone(), endpoint);
    let stream = TokenStream {
        state: s.clone(),
        id,
        rx,
        chunks,
        rng,
        arrived,
        last: None,
        generated: 0,
        reasoning: reasoning as u64,
        max_tokens,
        prompt,
        include_usage: r.include_usage,
        phase: if endpoint == Api::Chat { Phase::Role } else { Phase::Tokens },
        trace: m.cfg.trace.then(|| Trace {
            id,
            arrived,
            prompt_tokens: prompt,
            emits: Vec::new(),
            released: Vec::new(),
        }),
        done: false,
    };
    respond(stream, r.stream, prompt).await
}

/// The request's token limit (its own, else the endpoint's default), checked against the context and `min_tokens`.
fn checked_max_tokens(m: &Inner, r: &GenRequest, endpoint: Api, prompt: u64) -> Result<u64, ApiError> {
    let room = m.max_context.saturating_sub(prompt);
    let max_tokens = match (r.max_tokens, endpoint) {
        (Some(n), _) => n as u64,
        (None, Api::Completions) => 16,
        (None, Api::Chat) => room.min(4096),
    };
    if prompt + max_tokens > m.max_context || max_tokens == 0 {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in the completion). \
             Please reduce the length of the messages or completion.",
            m.max_context,
            prompt + max_tokens,
            prompt,
            max_tokens
        )));
    }
    if r.min_tokens as u64 > max_tokens {
        return Err(ApiError::bad_request(format!(
            "`min_tokens` ({}) must not exceed `max_tokens` ({max_tokens}, the default when not given)",
            r.min_tokens
        )));
    }
    Ok(max_tokens)
}

/// Submits the request to the engine: its token events' channel, or the engine's refusal as an API error.
async fn submit(
    m: &Inner,
    id: SeqId,
    ereq: EngineRequest,
    arrived: Instant,
) -> Result<UnboundedReceiver<TokenEvent>, ApiError> {
    match m.engine.submit(id, ereq, arrived).await {
        Ok(rx) => Ok(rx),
        Err(driver::SubmitError::Rejected(Reject::QueueFull { limit })) => {
            Err(ApiError::overloaded(format!("the server is overloaded: {limit} requests are already waiting")))
        }
        Err(driver::SubmitError::Rejected(e)) => Err(ApiError::bad_request(e.to_string())),
        Err(driver::SubmitError::Stopped) => Err(ApiError::unavailable("the engine has stopped")),
    }
}

/// The response: the tokens as a server-sent event stream, or, without `stream`, the whole completion at its end.
async fn respond(stream: TokenStream, streaming: bool, prompt: u64) -> Result<Response, ApiError> {
    if streaming {
        let body =
            futures::stream::unfold(
                stream,
                |mut st| async move { st.next().await.map(|b| (Ok::<_, Infallible>(b), st)) },
            );
        Ok((
            [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
            Body::from_stream(body),
        )
            .into_response())
    } else {
        let mut st = stream;
        let (reasoning, text, finish) = st.collect().await?;
        let thought = st.reasoning.min(st.generated);
        let full = st.chunks.full_with((&reasoning, thought), &text, finish, prompt, st.generated);
        Ok(axum::Json(full).into_response())
    }
}
