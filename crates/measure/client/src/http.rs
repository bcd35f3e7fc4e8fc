//! The pooled HTTP/1.1 client, the run's monotonic clock, and cancellation.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

use crate::error::{ClientError, UrlError};

/// The run's one monotonic clock: every timestamp is milliseconds since `t0`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    t0: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Clock { t0: Instant::now() }
    }
    pub fn at(t0: Instant) -> Self {
        Clock { t0 }
    }
    pub fn t0(&self) -> Instant {
        self.t0
    }
    pub fn ms(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.t0).as_secs_f64() * 1000.0
    }
    pub fn now_ms(&self) -> f64 {
        self.ms(Instant::now())
    }
    pub fn instant(&self, ms: f64) -> Instant {
        self.t0 + goodput_metrics::units::duration(ms / 1000.0)
    }
}

/// A flag that, once raised, wakes everything waiting on it.
#[derive(Clone, Debug)]
pub struct Cancel(watch::Receiver<bool>);

#[derive(Debug)]
pub struct CancelHandle(watch::Sender<bool>);

pub fn cancel_pair() -> (CancelHandle, Cancel) {
    let (tx, rx) = watch::channel(false);
    (CancelHandle(tx), Cancel(rx))
}

impl CancelHandle {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
    pub fn token(&self) -> Cancel {
        Cancel(self.0.subscribe())
    }
}

impl Cancel {
    /// A token that is never cancelled.
    pub fn never() -> Self {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        Cancel(rx)
    }
    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }
    pub async fn cancelled(&self) {
        let mut r = self.0.clone();
        if r.wait_for(|&v| v).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

pub use goodput_wire::Timeouts;

pub type Body = Full<Bytes>;
pub type Response = http::Response<hyper::body::Incoming>;

type Connector = crate::conn::Tracked<crate::tls::Connector>;

/// A pooled keep-alive client for one OpenAI-compatible base URL (http or https).
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<Connector, Body>,
    /// Without a pool: what POSTs use once keep-alive is off (the pooled connections are the
    /// ones the server closes after their responses).
    fresh: Client<Connector, Body>,
    /// The server's address: its base, API root and query.
    server: crate::url::ServerUrl,
    auth: Option<HeaderValue>,
    /// The API key, only to take it out of server texts ([`HttpClient::redact`]).
    key: Option<std::sync::Arc<str>>,
    /// The URIs of the two streaming endpoints, parsed once (a request clones one instead of
    /// formatting and parsing its URI).
    api_uris: std::sync::Arc<[(&'static str, Uri); 2]>,
    /// Whether POSTs still reuse keep-alive connections ([`crate::closing::KeepAlive`]): once
    /// off, each asks for its connection to be closed after the response (the server closes them
    /// anyway: reusing one only races its close).
    keep_alive: crate::closing::KeepAlive,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never print the key
        write!(f, "HttpClient({})", self.server.base)
    }
}

/// How long an idle pooled connection is kept: under the 5 s keep-alive timeout of uvicorn
/// (vLLM, SGLang) and llama.cpp's server, which close idle connections as a request may be
/// written into them.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// The streaming endpoint a full endpoint URL names (`…/v1/completions`, `…/chat/completions`,
/// with or without a query): [`crate::url::ServerUrl`].
pub fn endpoint_in_url(url: &str) -> Option<crate::openai::Api> {
    crate::url::ServerUrl::parse(url).ok()?.named
}

/// Normalizes a server URL to the one string a plan keeps: `http://h:p`, `http://h:p/`,
/// `http://h:p/v1` and `http://h:p/v1/chat/completions` all mean the same server; a query is
/// kept; an endpoint given whole without `/v1` (Azure) stays whole ([`crate::url::ServerUrl`]).
pub fn normalize_base(url: &str) -> Result<String, UrlError> {
    Ok(crate::url::ServerUrl::parse(url)?.canonical())
}

/// Where a server at `url` serves its Prometheus metrics (`/metrics` at its base).
pub fn metrics_url(url: &str) -> Result<String, UrlError> {
    Ok(crate::url::ServerUrl::parse(url)?.metrics())
}

/// The certificates in a PEM file (at least one), or why there are none: the check behind
/// `--ca-cert`, made before a run starts.
pub fn ca_certificates(pem: &[u8]) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read the CA certificate: {e}"))?;
    if certs.is_empty() {
        return Err("no PEM certificate (-----BEGIN CERTIFICATE-----) found in the CA file".into());
    }
    Ok(certs)
}

/// TLS with the Mozilla roots (compiled in: nothing is read or fetched at run time), plus any
/// extra roots given as PEM (a private CA).
fn tls_config(extra_roots_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = extra_roots_pem {
        for cert in ca_certificates(pem).map_err(ClientError::Tls)? {
            roots.add(cert).map_err(|e| ClientError::Tls(format!("cannot use the CA certificate: {e}")))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl HttpClient {
    /// `pool` is the number of idle keep-alive connections kept per host (the concurrency).
    pub fn new(
        base_url: &str,
        api_key: Option<&str>,
        pool: usize,
        connect_timeout: Duration,
    ) -> Result<Self, ClientError> {
        Self::with_roots(base_url, api_key, pool, connect_timeout, None)
    }

    /// As [`HttpClient::new`], also trusting the certificates in `extra_roots_pem` (PEM).
    pub fn with_roots(
        base_url: &str,
        api_key: Option<&str>,
        pool: usize,
        connect_timeout: Duration,
        extra_roots_pem: Option<&[u8]>,
    ) -> Result<Self, ClientError> {
        let server = crate::url::ServerUrl::parse(base_url)?;
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_connect_timeout(Some(connect_timeout));
        conn.enforce_http(false);
        let keep_alive = crate::closing::KeepAlive::default();
        // TCP and TLS together within the connect timeout
        let https = crate::tls::Connector::new(
            crate::arrival::Stamping(conn, keep_alive.clone()),
            tls_config(extra_roots_pem)?,
            connect_timeout,
        );
        // hyper resends a request whose pooled connection turned out to be closed; a benchmark
        // must send each request exactly once (`--retries` resends on purpose, and records it;
        // `exchange` resends only what hyper hands back unwritten). An idle connection is dropped
        // before the common servers' keep-alive timeout (uvicorn, llama.cpp: 5 s) so that a
        // request is not written into a socket the server is closing.
        let inner = Client::builder(TokioExecutor::new())
            .retry_canceled_requests(false)
            .pool_max_idle_per_host(pool.max(1))
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(crate::conn::Tracked(https.clone()));
        let fresh = Client::builder(TokioExecutor::new())
            .retry_canceled_requests(false)
            .pool_max_idle_per_host(0)
            .build(crate::conn::Tracked(https));
        let auth = match api_key {
            Some(k) if !k.is_empty() => {
                let mut v = HeaderValue::from_str(&format!("Bearer {k}")).map_err(|_| ClientError::ApiKey)?;
                v.set_sensitive(true);
                Some(v)
            }
            _ => None,
        };
        let uri = |api: crate::openai::Api| -> Result<(&'static str, Uri), ClientError> {
            let u = server.endpoint(api);
            let parsed = u.parse().map_err(|e: http::uri::InvalidUri| {
                ClientError::Url(UrlError::NotAUrl { url: base_url.to_string(), message: e.to_string() })
            })?;
            Ok((api.path(), parsed))
        };
        let api_uris = std::sync::Arc::new([uri(crate::openai::Api::Completions)?, uri(crate::openai::Api::Chat)?]);
        let key = api_key.filter(|k| !k.is_empty()).map(std::sync::Arc::from);
        Ok(HttpClient { inner, fresh, server, auth, key, api_uris, keep_alive })
    }

    pub fn base(&self) -> &str {
        &self.server.base
    }

    /// A server's text with the client's key, and anything else that looks like a credential,
    /// taken out (`goodput_metrics::redact`): what goodput keeps or prints of a server's words.
    pub fn redact(&self, text: &mut String) {
        let known: Vec<&str> = self.key.as_deref().into_iter().collect();
        goodput_metrics::redact::redact_in_place(text, &known);
    }

    /// The client's keep-alive switch: from when it is off, each request gets a connection of
    /// its own (`Connection: close`).
    pub fn keep_alive(&self) -> &crate::closing::KeepAlive {
        &self.keep_alive
    }

    fn request(&self, method: Method, path: &str, body: Bytes) -> Request<Body> {
        let b = Request::builder().method(method.clone());
        // an API's endpoint (with the URL's query), or a server-level path (`/metrics`) or full URI
        let mut b = match self.api_uris.iter().find(|(p, _)| *p == path) {
            Some((_, u)) => b.uri(u.clone()),
            None if path.starts_with("http://") || path.starts_with("https://") => b.uri(path),
            None => b.uri(format!("{}{}", self.server.base, path)),
        };
        if method == Method::GET || !self.keep_alive.on() {
            // probes (models, health, metrics) run before and beside the load at their own pace:
            // their connections are not pooled, so the load never draws one the server has let
            // go idle
            b = b.header(header::CONNECTION, "close");
        }
        if !body.is_empty() {
            // a compressed stream cannot be timestamped per event: ask for none
            b = b
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "text/event-stream")
                .header(header::ACCEPT_ENCODING, "identity");
        }
        if let Some(a) = &self.auth {
            b = b.header(header::AUTHORIZATION, a.clone());
        }
        b.body(Full::new(body)).expect("valid request")
    }

    /// Sends a POST; resolves when the response headers arrive, with what the request learned
    /// about its connection (whether it had carried a request before, when its data arrived).
    pub async fn post(
        &self,
        path: &str,
        body: Bytes,
    ) -> (Result<Response, hyper_util::client::legacy::Error>, crate::conn::ConnInfo) {
        let mut req = self.request(Method::POST, path, body);
        let capture = hyper_util::client::legacy::connect::capture_connection(&mut req);
        let client = if self.keep_alive.on() { &self.inner } else { &self.fresh };
        let r = client.request(req).await;
        (r, crate::conn::info(&capture))
    }

    /// `GET path` (under the server's base, or a whole URI), whole body, with a deadline.
    pub async fn get(&self, path: &str, timeout: Duration) -> Result<(u16, Bytes), ClientError> {
        let url = if path.starts_with("http") { path.to_string() } else { format!("{}{}", self.server.base, path) };
        let fut = async {
            let resp = self.inner.request(self.request(Method::GET, path, Bytes::new())).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
        };
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(x)) => Ok(x),
            Ok(Err(e)) => Err(ClientError::Unreachable { url, message: error_chain(e.as_ref()) }),
            Err(_) => Err(ClientError::Unreachable { url, message: format!("no answer within {timeout:?}") }),
        }
    }

    /// The model ids the server lists.
    pub async fn models(&self, timeout: Duration) -> Result<Vec<String>, ClientError> {
        let url = self.server.models();
        let (status, body) = self.get(&url, timeout).await?;
        if status != 200 {
            let mut message = format!("HTTP {status}: {}", excerpt(&body, 200));
            self.redact(&mut message);
            return Err(ClientError::Unreachable { url, message });
        }
        crate::openai::parse_models(&body).map_err(|e| {
            let mut message = e.to_string();
            self.redact(&mut message);
            ClientError::Unreachable { url, message }
        })
    }
}

/// The first `max` characters of a body, on one line.
pub fn excerpt(body: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(body);
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(max).collect();
    if one_line.chars().count() > max {
        out.push('…');
    }
    out
}

/// An error and all its sources, joined with ": ".
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// Whether an error chain contains an I/O timeout (a connect timeout from the connector).
pub fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        if let Some(io) = x.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        cur = x.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_close_their_connection_and_posts_keep_theirs() {
        let c = HttpClient::new("http://127.0.0.1:1/v1", None, 4, Duration::from_secs(1)).expect("client");
        let get = c.request(Method::GET, "/v1/models", Bytes::new());
        assert_eq!(get.uri(), "http://127.0.0.1:1/v1/models");
        assert_eq!(get.headers()[header::CONNECTION], "close");
        let post = c.request(Method::POST, "/v1/completions", Bytes::from_static(b"{}"));
        assert!(post.headers().get(header::CONNECTION).is_none());
        assert_eq!(post.headers()[header::ACCEPT], "text/event-stream");
        // idle connections go before a 5 s server keep-alive closes them
        assert!(POOL_IDLE_TIMEOUT < Duration::from_secs(5));
    }
}
