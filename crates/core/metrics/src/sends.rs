//! What the server was sent: every POST, by cause. A request is sent once; `--retries` sends it
//! again after a failure before any content (each failed attempt is in its record), and a
//! request the server was shown not to have taken on a reused keep-alive connection is sent
//! again on another one (`stale_resends`: the first never reached the server). Definitions: `docs/metrics.md`, "What the server was
//! sent".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{ErrorClass, RequestError, RequestRecord};

/// How a run's requests were shown not to have reached the server before they were resent
/// (measured runs; see the client's `closing` module), and whether keep-alive was turned off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectionReuse {
    /// The HTTP client never wrote the request: it saw the connection close first.
    pub unwritten: u64,
    /// The server's close was already there when the request was about to be written.
    pub closed_before_write: u64,
    /// The server's kernel answered the request with a reset.
    pub reset: u64,
    /// When keep-alive was turned off for the rest of the run (ms): the server closed a
    /// connection right after a response, so each request got a connection of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive_off_ms: Option<f64>,
}

impl std::ops::Add for ConnectionReuse {
    type Output = Self;

    /// Two clients' connections together (keep-alive off at the earlier time).
    fn add(self, o: Self) -> Self {
        let off = match (self.keep_alive_off_ms, o.keep_alive_off_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        ConnectionReuse {
            unwritten: self.unwritten + o.unwritten,
            closed_before_write: self.closed_before_write + o.closed_before_write,
            reset: self.reset + o.reset,
            keep_alive_off_ms: off,
        }
    }
}

/// Every POST of a run (all its records, inside the measurement window or not).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sends {
    /// Requests sent (at least one attempt).
    pub requests: u64,
    /// POSTs that reached the server, or may have (each record's `posts`): the requests and
    /// their `--retries` attempts that got a connection; resends after a connection the server
    /// had given up, and attempts that never connected, did not reach it.
    pub posts: u64,
    /// `--retries` resends (the failed attempts kept in the records).
    pub retries: u64,
    /// The retries by what the attempt before each failed with: the error class, with the
    /// status for HTTP errors (`http_429`, `http_503`, `connect`, …).
    pub retries_by_class: BTreeMap<String, u64>,
    /// Requests retried at least once (`--retries`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried: u64,
    /// Σ over all records of the time spent waiting between attempts for the server's
    /// `Retry-After` or the backoff (ms): the server's time, not the client's.
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub retry_wait_ms: f64,
    /// Resends after a reused connection turned out to have been given up by the server.
    pub stale_resends: u64,
    /// How those were shown not to have reached the server, and keep-alive (measured runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ConnectionReuse>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f(x: &f64) -> bool {
    *x == 0.0
}

/// The key an attempt's failure is counted under in [`Sends::retries_by_class`].
pub fn retry_class(e: &RequestError) -> String {
    match (e.class, e.status) {
        (ErrorClass::HttpStatus, Some(s)) => format!("http_{s}"),
        (c, _) => c.as_str().to_string(),
    }
}

impl Sends {
    /// Counts one record's POSTs.
    pub fn add(&mut self, r: &RequestRecord) {
        if r.sent_ms.is_none() {
            return;
        }
        self.requests += 1;
        self.retries += u64::from(r.reconnects);
        self.stale_resends += u64::from(r.stale_resends);
        self.posts += u64::from(r.posts.unwrap_or(1 + r.reconnects));
        if !r.attempts.is_empty() {
            self.retried += 1;
            self.retry_wait_ms += r.retry_wait_ms();
        }
        for a in &r.attempts {
            *self.retries_by_class.entry(retry_class(&a.error)).or_default() += 1;
        }
    }

    /// The verdict line's note when `--retries` shaped the run: how many requests waited, and
    /// how long, on the server's instructions (the server's time, not the client's).
    pub fn retry_note(&self) -> Option<String> {
        (self.retried > 0).then(|| {
            format!(
                "retries shaped the run: {} requests waited {:.2} s in all for the server's Retry-After or backoff \
                 (the server's time: not in the worker gap, the schedule lag or this verdict)",
                self.retried,
                self.retry_wait_ms / 1000.0
            )
        })
    }

    /// One line for the console and the report: the POSTs by cause.
    pub fn describe(&self) -> String {
        let mut causes = Vec::new();
        if self.retries > 0 {
            let by: Vec<String> = self.retries_by_class.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let waited = if self.retried > 0 {
                format!(
                    "; {} requests waited {:.2} s in all for the server's Retry-After or backoff",
                    self.retried,
                    self.retry_wait_ms / 1000.0
                )
            } else {
                String::new()
            };
            causes.push(format!("{} retries ({}{waited})", self.retries, by.join(", ")));
        }
        if self.stale_resends > 0 {
            let how = self.connections.map_or(String::new(), |c| {
                let parts: Vec<String> = [
                    (c.unwritten, "never written"),
                    (c.closed_before_write, "closed before the write"),
                    (c.reset, "reset by the server's kernel"),
                ]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, w)| format!("{n} {w}"))
                .collect();
                if parts.is_empty() { String::new() } else { format!(": {}", parts.join(", ")) }
            });
            causes.push(format!(
                "{} sent again after a connection the server had given up, shown not to have reached it{how}",
                self.stale_resends
            ));
        }
        let mut line = format!("{} POSTs reached the server for {} requests", self.posts, self.requests);
        if !causes.is_empty() {
            line.push_str(&format!(" · {}", causes.join(" · ")));
        }
        if let Some(ms) = self.connections.and_then(|c| c.keep_alive_off_ms) {
            line.push_str(&format!(
                " · keep-alive off from {:.2} s (the server closes connections after its responses)",
                ms / 1000.0
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Attempt;

    fn sent(id: u64, reconnects: u32, stale: u32, attempts: Vec<(ErrorClass, Option<u16>)>) -> RequestRecord {
        // the client counts POSTs that got a connection: a refused connect never posted
        let posts = 1 + attempts.iter().filter(|(c, _)| *c != ErrorClass::Connect).count() as u32;
        RequestRecord {
            id,
            sent_ms: Some(id as f64),
            reconnects,
            stale_resends: stale,
            posts: Some(posts),
            attempts: attempts
                .into_iter()
                .map(|(class, status)| Attempt {
                    sent_ms: 0.0,
                    end_ms: 0.0,
                    error: RequestError { class, message: String::new(), status },
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn posts_by_cause_computed_by_hand() {
        let mut s = Sends::default();
        // 4 requests: one plain; one retried twice after 429s; one retried after a refused
        // connect and sent again once after a connection the server had given up; one never sent
        s.add(&sent(0, 0, 0, vec![]));
        s.add(&sent(1, 2, 0, vec![(ErrorClass::HttpStatus, Some(429)), (ErrorClass::HttpStatus, Some(429))]));
        s.add(&sent(2, 1, 1, vec![(ErrorClass::Connect, None)]));
        s.add(&RequestRecord { id: 3, ..Default::default() });
        // POSTs that reached the server: 1 + 3 + 1 (the refused connect and the stale one did not)
        assert_eq!((s.requests, s.posts, s.retries, s.stale_resends), (3, 5, 3, 1));
        // request 1 resent at 1 ms after failures at 0; request 2 at 2 ms after one at 0
        assert_eq!((s.retried, s.retry_wait_ms), (2, 3.0));
        assert_eq!(s.retries_by_class, BTreeMap::from([("connect".into(), 1), ("http_429".into(), 2)]));
        s.connections = Some(ConnectionReuse { reset: 1, keep_alive_off_ms: Some(1500.0), ..Default::default() });
        assert_eq!(
            s.describe(),
            "5 POSTs reached the server for 3 requests · 3 retries (connect 1, http_429 2; 2 requests waited 0.00 s \
             in all for the server's Retry-After or backoff) · 1 sent again after a connection the server had \
             given up, shown not to have reached it: 1 reset by the server's kernel · \
             keep-alive off from 1.50 s (the server closes connections after its responses)"
        );
        // a record no client counted (simulated, older): one POST and its retries
        let mut s = Sends::default();
        s.add(&RequestRecord { sent_ms: Some(0.0), reconnects: 2, ..Default::default() });
        assert_eq!(s.posts, 3);
    }

    #[test]
    fn two_clients_connections_add_up() {
        let a = ConnectionReuse { unwritten: 1, keep_alive_off_ms: Some(9.0), ..Default::default() };
        let b = ConnectionReuse { reset: 2, keep_alive_off_ms: Some(4.0), ..Default::default() };
        assert_eq!(
            a + b,
            ConnectionReuse { unwritten: 1, closed_before_write: 0, reset: 2, keep_alive_off_ms: Some(4.0) }
        );
    }
}
