//! The metrics scraper (`--scrape-metrics`): a task that GETs the server's Prometheus exposition
//! every interval while the load runs, beside it and never in its way.
//!
//! [`Scraper::start`] scrapes once before returning (so the counters' first value precedes the
//! first request), then keeps scraping on a tokio interval (a slow answer delays the next scrape,
//! never a request); [`Scraper::finish`] stops it after one last scrape (after the last request
//! ended) and turns what it read into the document's `ServerMetrics`, every sample's time on the
//! run's [`Clock`] (the records' milliseconds; negative before the load started).
//!
//! A scrape that fails (unreachable, an HTTP error, a body that is not the text format) is kept
//! as a counted error: it never fails or slows the run. The text is parsed on tokio's blocking
//! pool, off the threads that read the replies.

use std::time::{Duration, Instant};

use goodput_wire::server_metrics::{Flavour, ServerMetrics};

use crate::prometheus::{Scrape, Snapshot, parse_exposition, server_metrics};
use http::Uri;
use tokio::task::JoinHandle;

use crate::ClientError;
use crate::error::UrlError;
use crate::http::{Cancel, CancelHandle, Clock, HttpClient, cancel_pair, excerpt};

/// Where to scrape and how often.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// The exposition's full URL (`http://host:port/metrics`; a URL without a path means
    /// `/metrics`).
    pub url: String,
    pub interval: Duration,
    /// Sent as a bearer token (only set it for the target's own host).
    pub api_key: Option<String>,
    /// Extra CA certificates (PEM) for https.
    pub ca_pem: Option<Vec<u8>>,
    pub connect_timeout: Duration,
}

/// A running scraper.
pub struct Scraper {
    url: String,
    interval: Duration,
    stop: CancelHandle,
    task: JoinHandle<Vec<(Instant, Result<Snapshot, String>)>>,
}

/// `http://h:p/path?q` → (`http://h:p`, `/path?q`); no path: `/metrics`.
pub fn split_url(url: &str) -> Result<(String, String), UrlError> {
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|e: http::uri::InvalidUri| UrlError::NotAUrl { url: url.to_string(), message: e.to_string() })?;
    let scheme = match uri.scheme_str() {
        Some(s @ ("http" | "https")) => s,
        _ => return Err(UrlError::Scheme { url: url.to_string() }),
    };
    let authority = uri.authority().ok_or_else(|| UrlError::NoHost { url: url.to_string() })?;
    let path = match uri.path_and_query().map(|p| p.as_str()) {
        None | Some("" | "/") => "/metrics".to_string(),
        Some(p) => p.to_string(),
    };
    Ok((format!("{scheme}://{authority}"), path))
}

/// How long one scrape may take: the interval, within 250 ms … 5 s.
fn scrape_timeout(interval: Duration) -> Duration {
    interval.clamp(Duration::from_millis(250), Duration::from_secs(5))
}

async fn scrape_once(client: &HttpClient, path: &str, timeout: Duration) -> (Instant, Result<Snapshot, String>) {
    let got = client.get(path, timeout).await;
    let at = Instant::now();
    let text = match got {
        Ok((200, body)) => String::from_utf8(body.to_vec()).map_err(|_| "the body is not UTF-8".to_string()),
        Ok((status, body)) => {
            let mut message = format!("HTTP {status}: {}", excerpt(&body, 120));
            client.redact(&mut message);
            Err(message)
        }
        Err(e) => Err(e.to_string()),
    };
    let parsed = match text {
        Ok(t) => tokio::task::spawn_blocking(move || parse_exposition(&t).map_err(|e| e.to_string()))
            .await
            .unwrap_or_else(|e| Err(format!("the parser failed: {e}"))),
        Err(e) => Err(e),
    };
    (at, parsed)
}

impl Scraper {
    /// Scrapes once, then every `interval` until [`Scraper::finish`].
    pub async fn start(cfg: ScrapeConfig) -> Result<Scraper, ClientError> {
        let (base, path) = split_url(&cfg.url)?;
        let client =
            HttpClient::with_roots(&base, cfg.api_key.as_deref(), 1, cfg.connect_timeout, cfg.ca_pem.as_deref())?;
        let timeout = scrape_timeout(cfg.interval);
        let (stop, token) = cancel_pair();
        let first = scrape_once(&client, &path, timeout).await;
        let interval = cfg.interval;
        let task = tokio::spawn(run(client, path, interval, timeout, token, first));
        Ok(Scraper { url: cfg.url, interval, stop, task })
    }

    /// Stops after one last scrape; the series on `clock`, the flavour forced when known.
    pub async fn finish(self, clock: &Clock, flavour: Option<Flavour>) -> ServerMetrics {
        self.stop.cancel();
        let raw = self.task.await.unwrap_or_default();
        let scrapes: Vec<Scrape> = raw.into_iter().map(|(at, r)| (signed_ms(clock, at), r)).collect();
        server_metrics(&self.url, self.interval.as_secs_f64(), flavour, scrapes)
    }
}

async fn run(
    client: HttpClient,
    path: String,
    interval: Duration,
    timeout: Duration,
    stop: Cancel,
    first: (Instant, Result<Snapshot, String>),
) -> Vec<(Instant, Result<Snapshot, String>)> {
    let mut out = vec![first];
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        out.push(scrape_once(&client, &path, timeout).await);
    }
    // after the last request: the counters' final word
    out.push(scrape_once(&client, &path, timeout).await);
    out
}

/// `at` on the run's clock, ms (negative before its start).
fn signed_ms(clock: &Clock, at: Instant) -> f64 {
    let t0 = clock.t0();
    if at >= t0 { (at - t0).as_secs_f64() * 1e3 } else { -((t0 - at).as_secs_f64() * 1e3) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(split_url("http://h:8000").unwrap(), ("http://h:8000".into(), "/metrics".into()));
        assert_eq!(split_url("http://h:8000/").unwrap(), ("http://h:8000".into(), "/metrics".into()));
        assert_eq!(split_url("https://h/x/metrics?a=1").unwrap(), ("https://h".into(), "/x/metrics?a=1".into()));
        assert!(matches!(split_url("ftp://h/metrics"), Err(UrlError::Scheme { .. })));
        assert!(split_url("not a url").is_err());
    }

    #[test]
    fn timeouts() {
        assert_eq!(scrape_timeout(Duration::from_millis(10)), Duration::from_millis(250));
        assert_eq!(scrape_timeout(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(scrape_timeout(Duration::from_secs(60)), Duration::from_secs(5));
    }

    #[test]
    fn clock_sign() {
        let clock = Clock::start();
        let before = clock.t0() - Duration::from_millis(20);
        assert!((signed_ms(&clock, before) + 20.0).abs() < 1e-9);
        assert!((signed_ms(&clock, clock.t0() + Duration::from_millis(5)) - 5.0).abs() < 1e-9);
    }
}
