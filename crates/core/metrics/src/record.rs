//! The one record type: what happened to one request, measured or simulated.
//!
//! Every driver (the HTTP client against a real server, the client against the embedded engine,
//! the virtual-time simulator) produces [`RequestRecord`]s, and everything downstream (summary,
//! SLOs, reports, comparisons) reads only these. Times are milliseconds on one monotonic clock,
//! relative to the start of the run.

use serde::{Deserialize, Serialize};

/// Where a token count came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server said so (`usage` in the stream, or the engine model itself).
    Server,
    /// Our tokenizer counted the text.
    Tokenizer,
}

/// Why a request failed. Serialized as a `snake_case` string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The TCP connection could not be made (refused, unreachable, reset before a response).
    Connect,
    /// The server answered with a non-2xx status.
    HttpStatus,
    /// Connecting took longer than the connect timeout.
    TimeoutConnect,
    /// No content event arrived within the first-token timeout after sending.
    TimeoutFirstToken,
    /// The gap between two stream events exceeded the idle timeout.
    TimeoutIdle,
    /// No bytes at all (not even a comment) arrived within the stall timeout.
    TimeoutStall,
    /// The whole request exceeded the total timeout.
    TimeoutTotal,
    /// The stream could not be parsed (bad SSE, invalid JSON, unexpected shape).
    MalformedStream,
    /// The server sent an `error` object inside the stream.
    ServerErrorEvent,
    /// The connection closed before `[DONE]`.
    StreamEndedEarly,
    /// The run was interrupted (Ctrl-C, `--max-errors`) while this request was in flight.
    Cancelled,
    /// The engine model rejected the request (simulation: over the context, queue full).
    Rejected,
    /// The server answered a complete JSON body: it ignored `stream: true`, so no token can be
    /// timed.
    NotStreamed,
    /// A 2xx response that is not an event stream (an HTML page from a proxy, for one).
    ContentType,
    /// One SSE event exceeded the event size cap (`--max-event-size`).
    EventTooLarge,
    /// The client itself ran out of a resource (file descriptors: EMFILE, ENFILE): not the
    /// server's failure, and the run is `client_bound`.
    ClientLimit,
    /// The stream carried far more than the `max_tokens` it asked for
    /// ([`crate::plausible::runaway_limit`]): the server ignores the limit, and the request was
    /// stopped (its record keeps what arrived up to the bound).
    RunawayStream,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::HttpStatus => "http_status",
            ErrorClass::TimeoutConnect => "timeout_connect",
            ErrorClass::TimeoutFirstToken => "timeout_first_token",
            ErrorClass::TimeoutIdle => "timeout_idle",
            ErrorClass::TimeoutStall => "timeout_stall",
            ErrorClass::TimeoutTotal => "timeout_total",
            ErrorClass::MalformedStream => "malformed_stream",
            ErrorClass::ServerErrorEvent => "server_error_event",
            ErrorClass::StreamEndedEarly => "stream_ended_early",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::Rejected => "rejected",
            ErrorClass::NotStreamed => "not_streamed",
            ErrorClass::ContentType => "content_type",
            ErrorClass::EventTooLarge => "event_too_large",
            ErrorClass::ClientLimit => "client_limit",
            ErrorClass::RunawayStream => "runaway_stream",
        }
    }
}

/// Why a run (or one stage of it) ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The request count was reached (or the dataset ran out) and everything finished.
    #[default]
    Completed,
    /// `--duration` elapsed: what was scheduled after it was not sent.
    Duration,
    /// `--max-errors` was reached.
    MaxErrors,
    /// Interrupted from outside (Ctrl-C).
    Interrupted,
    /// A capacity step stopped early: requests piled up far beyond what the SLO allows.
    Saturated,
    /// `--stop-over-saturated`: the server's queue grew without bound (the steady-state
    /// judgement of `trend::OverSaturation`).
    OverSaturated,
}

/// A classified failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestError {
    pub class: ErrorClass,
    /// Human-readable detail (for HTTP errors, a short excerpt of the body).
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// An attempt that failed before the one the record measures (`--retries`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// When the attempt was sent.
    pub sent_ms: f64,
    /// When its failure was noticed.
    pub end_ms: f64,
    pub error: RequestError,
}

/// What happened to one request. See `docs/metrics.md` for every derived quantity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Position in the run's schedule (0-based).
    pub id: u64,
    /// Session id and turn index (0-based) for multi-turn workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Agentic sessions: which sub-agent sent it (1-based; absent for the session's own agent).
    /// `turn` is then the call's index within that sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<u32>,
    /// The closed-loop user that sent it (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
    /// The shard that sent it (`--shard I/N`: `I`); its `id` is then the global id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// `a`: when the schedule said the request should start (for a closed loop: when its user's
    /// previous request ended, plus any think time).
    pub scheduled_ms: f64,
    /// Time spent waiting for a `--max-concurrency` slot (part of `s − a` that is not pacer lag).
    #[serde(default)]
    pub cap_wait_ms: f64,
    /// `s`: when the request was handed to the connection. `None` if it was never sent.
    pub sent_ms: Option<f64>,
    /// `s'`: when the connection had written the request's last byte to the socket (the client's
    /// own connect and dispatch time, `s' − s`, is then not counted as the server's). Absent
    /// where not known (the simulator, imported files, a request that got no response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_ms: Option<f64>,
    /// When the response headers arrived.
    pub headers_ms: Option<f64>,
    /// `c1..cK`: arrival time of each content event (a plain array, or in large documents the
    /// compact `{start, d_us}` form: see [`crate::events`]).
    #[serde(serialize_with = "crate::events::serialize_times", deserialize_with = "crate::events::deserialize_times")]
    pub event_ms: Vec<f64>,
    /// `m1..mK`: tokens carried by each content event (sums to `output_tokens`); a plain array,
    /// or run-length `{runs}` pairs in large documents.
    #[serde(
        serialize_with = "crate::events::serialize_tokens",
        deserialize_with = "crate::events::deserialize_tokens"
    )]
    pub event_tokens: Vec<u32>,
    /// Where `event_tokens` came from: the server's per-chunk usage, or our apportioning rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_tokens_source: Option<TokenSource>,
    /// When the stream closed (or the failure was noticed).
    pub end_ms: Option<f64>,
    /// Failed attempts before the measured one (`--retries N`; 0 by default: a request is sent
    /// exactly once). `sent_ms` and everything after it belong to the last attempt.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reconnects: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Times the request was handed a pooled keep-alive connection that the server had already
    /// closed, and was resent on another before any byte of it was written: it never reached the
    /// server, so this is not a retry (each request still reaches the server once). `sent_ms` is
    /// the send that did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale_resends: u32,
    /// POSTs of this request that reached the server, or may have: its attempts that got a
    /// connection and were not shown to have been refused unread (stale resends and attempts
    /// that never connected are not counted). Absent where no client counted (simulation,
    /// older documents): `1 + reconnects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posts: Option<u32>,
    /// Our tokenizer's counts were not made (the client's bookkeeping fell behind, or the run
    /// ended before they were): `*_tokens_client` are absent and the per-event split is one token
    /// per event unless the server gave it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counts_skipped: bool,
    /// Number of non-content events (role-only, empty, usage-only chunks).
    #[serde(default)]
    pub other_events: u32,

    /// Prompt length in tokens and its provenance (server `usage` preferred).
    pub input_tokens: Option<u64>,
    pub input_tokens_source: Option<TokenSource>,
    /// Output length in tokens and its provenance (server `usage` preferred).
    pub output_tokens: Option<u64>,
    pub output_tokens_source: Option<TokenSource>,
    /// Both counts when both exist, to report client-vs-server disagreement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_client: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_server: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_client: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_server: Option<u64>,
    /// Counts in the server's `usage` that were not believed (`docs/metrics.md`, "Server counts
    /// that are not believed"): the client's own count stands in for each, and
    /// `*_tokens_server` keeps the server's figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distrusted_counts: Vec<crate::plausible::DistrustedCount>,
    /// The output length the workload asked for (`max_tokens`).
    pub requested_output_tokens: Option<u64>,
    /// A reasoning model's stream (`docs/metrics.md`, "Reasoning models"): the content events
    /// before the first one that carried answer text (the reasoning phase; all of them when the
    /// stream never answered). `None` when the stream carried no reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_events: Option<u32>,
    /// Reasoning tokens (the server's `completion_tokens_details.reasoning_tokens`, else our
    /// count of the reasoning text), their provenance, and both counts when both exist. Part of
    /// `output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_source: Option<TokenSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_client: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_server: Option<u64>,
    /// The reasoning the workload asked the engine model for (embedded engine and simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_reasoning_tokens: Option<u64>,
    /// `--reasoning-parser think-tags`: a `<think>` was never closed, so the whole output is
    /// reasoning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub think_unclosed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The id the server gave the response (to correlate with its logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// `None` when the request succeeded.
    pub error: Option<RequestError>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RequestRecord {
    /// Moves every time of the record (its attempts' too) by `ms`.
    pub fn shift(&mut self, ms: f64) {
        if ms == 0.0 {
            return;
        }
        self.scheduled_ms += ms;
        for t in [&mut self.sent_ms, &mut self.written_ms, &mut self.headers_ms, &mut self.end_ms].into_iter().flatten()
        {
            *t += ms;
        }
        for t in &mut self.event_ms {
            *t += ms;
        }
        for a in &mut self.attempts {
            a.sent_ms += ms;
            a.end_ms += ms;
        }
    }

    /// `s₀`: when the request was first sent (its first attempt's send under `--retries`,
    /// else `s`). The client's lateness (schedule lag, worker gap) counts to here: what follows,
    /// failed attempts and the waits the server asked for, is the server's time.
    pub fn first_sent_ms(&self) -> Option<f64> {
        self.attempts.first().map(|a| a.sent_ms).or(self.sent_ms)
    }

    /// Time spent waiting between attempts for the server's `Retry-After` (or the backoff that
    /// stands in for it): Σ over the failed attempts of the next send minus its failure, in ms.
    /// 0 without retries.
    pub fn retry_wait_ms(&self) -> f64 {
        let nexts = self.attempts.iter().skip(1).map(|a| Some(a.sent_ms)).chain(std::iter::once(self.sent_ms));
        // a fold from +0 (an empty f64 sum is −0)
        self.attempts
            .iter()
            .zip(nexts)
            .map(|(a, next)| next.map_or(0.0, |n| (n - a.end_ms).max(0.0)))
            .fold(0.0, |x, y| x + y)
    }

    /// Where the service-view latencies (TTFT, E2E, stream close) start: `s'`, else `s`.
    pub fn service_start_ms(&self) -> Option<f64> {
        self.written_ms.or(self.sent_ms)
    }

    pub fn is_success(&self) -> bool {
        self.error.is_none()
    }

    /// First content event time `c1`.
    pub fn first_event_ms(&self) -> Option<f64> {
        self.event_ms.first().copied()
    }

    /// The first answer event's time: `c(R+1)` after `R` reasoning events, `c1` without reasoning;
    /// `None` when the stream never answered.
    pub fn first_answer_ms(&self) -> Option<f64> {
        match self.reasoning_events {
            Some(r) => self.event_ms.get(r as usize).copied(),
            None => self.first_event_ms(),
        }
    }

    /// Last content event time `cK`.
    pub fn last_event_ms(&self) -> Option<f64> {
        self.event_ms.last().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_waits_computed_by_hand() {
        let failed = |sent, end| Attempt {
            sent_ms: sent,
            end_ms: end,
            error: RequestError { class: ErrorClass::HttpStatus, message: String::new(), status: Some(429) },
        };
        // sent at 100, 429 at 102, waited 1000 ms; 429 at 1104, waited 1000 ms; sent at 2104
        let r = RequestRecord {
            scheduled_ms: 99.0,
            sent_ms: Some(2104.0),
            attempts: vec![failed(100.0, 102.0), failed(1102.0, 1104.0)],
            ..Default::default()
        };
        assert_eq!(r.first_sent_ms(), Some(100.0));
        assert_eq!(r.retry_wait_ms(), 2000.0);
        let plain = RequestRecord { sent_ms: Some(5.0), ..Default::default() };
        assert_eq!((plain.first_sent_ms(), plain.retry_wait_ms()), (Some(5.0), 0.0));
    }

    #[test]
    fn shift_moves_every_time_of_a_record_and_of_its_attempts() {
        let attempt = |sent, end| Attempt {
            sent_ms: sent,
            end_ms: end,
            error: RequestError { class: ErrorClass::HttpStatus, message: String::new(), status: Some(503) },
        };
        let mut r = RequestRecord {
            scheduled_ms: 1.0,
            sent_ms: Some(2.0),
            written_ms: Some(2.5),
            headers_ms: Some(3.0),
            event_ms: vec![4.0, 5.0],
            end_ms: Some(6.0),
            attempts: vec![attempt(0.5, 0.75)],
            ..Default::default()
        };
        r.shift(10.0);
        assert_eq!(r.scheduled_ms, 11.0);
        assert_eq!((r.sent_ms, r.written_ms, r.headers_ms, r.end_ms), (Some(12.0), Some(12.5), Some(13.0), Some(16.0)));
        assert_eq!(r.event_ms, vec![14.0, 15.0]);
        assert_eq!((r.attempts[0].sent_ms, r.attempts[0].end_ms), (10.5, 10.75));
        // first sent at 10.5, waited 12 − 10.75 for the retry
        assert_eq!(r.first_sent_ms(), Some(10.5));
        assert_eq!(r.retry_wait_ms(), 1.25);
        // an unknown time stays unknown
        let mut never = RequestRecord { scheduled_ms: 1.0, ..Default::default() };
        never.shift(10.0);
        assert_eq!((never.scheduled_ms, never.sent_ms, never.written_ms), (11.0, None, None));
    }
}
