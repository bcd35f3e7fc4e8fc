//! The HTTP layer: shared state, the router, and the OpenAI handlers (validation, counting the
//! prompt, submitting to the engine, streaming its tokens back).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use bytes::Bytes;
use goodput_engine::{Engine, EngineRequest, Reject, output_length};
use goodput_results::Api;
use goodput_tokenizer::Tokenizer;
use http_body_util::BodyExt;
use rand::SeedableRng;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::driver::{self, EngineHandle};
use crate::embedded::lower_priority_by;
use crate::metrics;
use crate::openai::{self, ApiError, Chunks, GenRequest};
use crate::stream::{Phase, TokenStream};

/// HTTP-side settings.
#[derive(Clone, Debug, Serialize)]
pub struct ServerConfig {
    /// The model id served (`GET /v1/models`); requests for any other model get 404.
    pub model_name: String,
    /// Bodies larger than this are refused with 413.
    pub max_body_bytes: usize,
    /// Seeds the output lengths of requests without `ignore_eos` and the generated words.
    pub seed: u64,
    /// Keep every token's emit time per request (for tests that hold clients against the truth).
    #[serde(skip)]
    pub trace: bool,
    /// Nice value of the embedded server's threads (its runtime and engine thread), so that a load
    /// generator on the same machine keeps precedence (0: unchanged).
    #[serde(skip)]
    pub nice: i32,
}

impl ServerConfig {
    pub fn new(model_name: impl Into<String>) -> Self {
        ServerConfig { model_name: model_name.into(), max_body_bytes: 16 << 20, seed: 0, trace: false, nice: 0 }
    }
}

/// When a request arrived and when each of its tokens was handed to the connection.
#[derive(Clone, Debug)]
pub struct Trace {
    pub id: u64,
    pub arrived: Instant,
    pub prompt_tokens: u64,
    /// One entry per chunk written, with the tokens it carried.
    pub emits: Vec<(Instant, u32)>,
}

pub(crate) struct Inner {
    pub(crate) engine: EngineHandle,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) cfg: ServerConfig,
    pub(crate) max_context: u64,
    pub(crate) metrics: metrics::ServerMetrics,
    pub(crate) next_id: AtomicU64,
    pub(crate) created: u64,
    pub(crate) traces: Mutex<Vec<Trace>>,
}

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

impl AppState {
    /// Starts the engine thread for `engine` and wraps it for the handlers.
    pub fn new(engine: Engine, tokenizer: Tokenizer, cfg: ServerConfig) -> Self {
        let max_context = engine.config().model.max_context;
        AppState(Arc::new(Inner {
            engine: EngineHandle::start(engine),
            tokenizer,
            cfg,
            max_context,
            metrics: metrics::ServerMetrics::default(),
            next_id: AtomicU64::new(0),
            created: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            traces: Mutex::new(Vec::new()),
        }))
    }

    pub fn engine(&self) -> &EngineHandle {
        &self.0.engine
    }

    /// Per-request emit times (when `ServerConfig::trace` is on).
    pub fn traces(&self) -> Vec<Trace> {
        self.0.traces.lock().expect("traces").clone()
    }
}

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

/// Serves `app(state)` on `listener` until `shutdown` resolves. Every accepted connection gets
/// TCP_NODELAY (without it, streamed chunks stall for ~40 ms behind Nagle's algorithm).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let engine = state.engine().clone();
    let r = axum::serve(listener, app(state)).with_graceful_shutdown(shutdown).await;
    engine.stop();
    r
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

/// Parses a request and counts its prompt, off the runtime's workers (a blocking-pool thread at
/// lowered priority) and in bounded time: counting stops as soon as the prompt passes the model's
/// context, and a prompt whose byte length alone proves it too long is not counted at all. So a
/// huge prompt costs the server a bounded amount of CPU and never delays other streams' tokens.
async fn parse_and_count(s: &AppState, endpoint: Api, bytes: Bytes) -> Result<(GenRequest, u64), ApiError> {
    let tk = s.0.tokenizer.clone();
    let max_context = s.0.max_context;
    let job = move || -> Result<(GenRequest, u64), ApiError> {
        lower_priority_by(5);
        let r: GenRequest = openai::parse(endpoint, &bytes)?;
        let template = template_tokens(endpoint, r.texts.len());
        let limit = max_context.saturating_sub(template) as usize;
        match tk.count_at_most(r.texts.iter().map(String::as_str), limit) {
            Ok(n) => Ok((r, n as u64 + template)),
            Err(at_least) => Err(ApiError::bad_request(format!(
                "This model's maximum context length is {max_context} tokens. However, your prompt has at least {} \
                 tokens. Please reduce the length of the messages or prompt.",
                at_least as u64 + template
            ))),
        }
    };
    tokio::task::spawn_blocking(job).await.map_err(|_| ApiError::unavailable("the request could not be read"))?
}

async fn generate(s: AppState, endpoint: Api, req: Request) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let m = &s.0;
    let bytes = read_body(req.into_body(), m.cfg.max_body_bytes).await?;
    let (r, prompt) = parse_and_count(&s, endpoint, bytes).await?;
    if r.model != m.cfg.model_name {
        return Err(ApiError::not_found(format!(
            "The model `{}` does not exist (this server serves `{}`).",
            r.model, m.cfg.model_name
        )));
    }
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
    let id = m.next_id.fetch_add(1, Ordering::Relaxed);
    // the request's own seed when it sends one (goodput does, to the embedded engine, so that
    // natural stops match the simulator's); otherwise one per request from the server's seed
    let seed = r.seed.unwrap_or(m.cfg.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let max_tokens = max_tokens.min(u32::MAX as u64);
    let output = output_length(seed, r.min_tokens, max_tokens as u32, r.ignore_eos);
    let ereq = EngineRequest {
        prompt_tokens: prompt.min(u32::MAX as u64) as u32,
        output_tokens: output,
        block_hashes: Vec::new(),
    };
    let rx = match m.engine.submit(id, ereq, arrived).await {
        Ok(rx) => rx,
        Err(driver::SubmitError::Rejected(Reject::QueueFull { limit })) => {
            return Err(ApiError::overloaded(format!(
                "the server is overloaded: {limit} requests are already waiting"
            )));
        }
        Err(driver::SubmitError::Rejected(e)) => return Err(ApiError::bad_request(e.to_string())),
        Err(driver::SubmitError::Stopped) => return Err(ApiError::unavailable("the engine has stopped")),
    };
    m.metrics.prompt(prompt);
    let chunks = Chunks { id: format!("cmpl-{id}"), created: m.created, model: m.cfg.model_name.clone(), endpoint };
    let stream = TokenStream {
        state: s.clone(),
        id,
        rx,
        chunks,
        rng,
        arrived,
        last: None,
        generated: 0,
        max_tokens,
        prompt,
        include_usage: r.include_usage,
        phase: if endpoint == Api::Chat { Phase::Role } else { Phase::Tokens },
        trace: m.cfg.trace.then(|| Trace { id, arrived, prompt_tokens: prompt, emits: Vec::new() }),
        done: false,
    };
    if r.stream {
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
        let (text, finish) = st.collect().await?;
        let full = st.chunks.full(&text, finish, prompt, st.generated);
        Ok(axum::Json(full).into_response())
    }
}
