//! The connector: TCP (kernel-stamped, [`crate::arrival::Stamping`]) and, for `https://`, the TLS
//! handshake, both under one deadline, the connect timeout (`--timeout-connect`). A server that
//! accepts the TCP connection and then never answers the handshake (a plain-HTTP server given an
//! `https://` URL waits for a request that never comes) fails at the connect timeout, and the
//! error names which stage hung.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;

use crate::arrival::{StampedTcp, Stamping};

/// What the connector fails with.
pub type ConnectError = Box<dyn std::error::Error + Send + Sync>;

/// TCP, then TLS for `https://`, within `timeout` together.
#[derive(Clone)]
pub struct Connector {
    tcp: Stamping,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
}

impl Connector {
    /// HTTP/1.1 over TLS is asked for by ALPN (`http/1.1`), as every OpenAI-compatible server serves it.
    pub fn new(tcp: Stamping, mut tls: rustls::ClientConfig, timeout: Duration) -> Self {
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Connector { tcp, tls: Arc::new(tls), timeout }
    }
}

/// A connect-stage timeout: an I/O `TimedOut` error (classified `timeout_connect`) saying what hung.
fn timed_out(message: String) -> ConnectError {
    Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, message))
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = MaybeHttpsStream<StampedTcp>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
        let (tls, timeout) = (Arc::clone(&self.tls), self.timeout);
        let started = Instant::now();
        let deadline = started + timeout;
        let tcp = self.tcp.call(uri);
        Box::pin(async move {
            let secs = timeout.as_secs_f64();
            let tcp = match tokio::time::timeout_at(deadline.into(), tcp).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(timed_out(format!(
                        "the TCP connection to {host} was not made within the connect timeout ({secs} s)"
                    )));
                }
            };
            if !https {
                return Ok(MaybeHttpsStream::Http(tcp));
            }
            let connected = started.elapsed();
            let name = rustls_pki_types::ServerName::try_from(host.clone())
                .map_err(|e| std::io::Error::other(format!("`{host}` is not a TLS server name: {e}")))?;
            let handshake = tokio_rustls::TlsConnector::from(tls).connect(name, TokioIo::new(tcp));
            match tokio::time::timeout_at(deadline.into(), handshake).await {
                Ok(Ok(s)) => Ok(MaybeHttpsStream::Https(TokioIo::new(s))),
                Ok(Err(e)) => Err(Box::new(std::io::Error::other(e))),
                Err(_) => Err(timed_out(format!(
                    "the TLS handshake with {host} did not finish within the connect timeout ({secs} s; the TCP \
                     connection was made in {:.1} ms, then the server answered nothing): is it serving TLS? A \
                     plain-HTTP server on an https:// URL waits for a request that never comes (try http://)",
                    connected.as_secs_f64() * 1e3
                ))),
            }
        })
    }
}
