//! One request, start to finish: send, timestamp every content event as its bytes arrive,
//! classify any failure, and produce the [`RequestRecord`].

use std::time::Instant;

use bytes::Bytes;
use goodput_metrics::{ErrorClass, RequestError, RequestRecord, TokenSource, tokens};
use goodput_tokenizer::Tokenizer;
use http_body_util::BodyExt;
use tokio::time::timeout_at;

use crate::http::{Cancel, Clock, HttpClient, Timeouts, error_chain, excerpt, is_timeout};
use crate::openai::{Api, Usage, parse_chunk};
use crate::sse::{SseDecoder, SseEvent};

/// What the record needs to know before the request is sent.
#[derive(Clone, Debug, Default)]
pub struct RequestMeta {
    pub id: u64,
    pub session: Option<u64>,
    pub turn: Option<u32>,
    pub scheduled_ms: f64,
    pub cap_wait_ms: f64,
    pub input_tokens_client: Option<u64>,
    pub requested_output_tokens: Option<u64>,
}

/// The record and the reply text (multi-turn sessions resend it).
#[derive(Debug)]
pub struct Exchange {
    pub record: RequestRecord,
    pub reply: String,
}

/// Everything shared by the requests of a run.
#[derive(Clone)]
pub struct Endpoint {
    pub client: HttpClient,
    pub api: Api,
    pub timeouts: Timeouts,
    pub tokenizer: Tokenizer,
    pub clock: Clock,
}

/// Bodies longer than this are not kept when reading an error response.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

struct Stream {
    rec: RequestRecord,
    deltas: Vec<String>,
    /// Cumulative `usage.completion_tokens` seen on each content event (vLLM continuous usage).
    cumulative: Vec<Option<u64>>,
    usage: Usage,
    done: bool,
}

impl Stream {
    fn fail(&mut self, class: ErrorClass, message: String, status: Option<u16>) {
        if self.rec.error.is_none() {
            self.rec.error = Some(RequestError { class, message, status });
        }
    }

    /// Handles one SSE event at arrival time `t`; returns false when the stream must stop.
    fn event(&mut self, ev: SseEvent, t: f64) -> bool {
        if self.done {
            return true; // ignore anything after [DONE]
        }
        if ev.data == "[DONE]" {
            self.done = true;
            return true;
        }
        if ev.event.as_deref() == Some("error") {
            self.fail(ErrorClass::ServerErrorEvent, format!("error event: {}", excerpt(ev.data.as_bytes(), 200)), None);
            return false;
        }
        let chunk = match parse_chunk(&ev.data) {
            Ok(c) => c,
            Err(m) => {
                self.fail(ErrorClass::MalformedStream, m, None);
                return false;
            }
        };
        if let Some(e) = chunk.error {
            self.fail(ErrorClass::ServerErrorEvent, e, None);
            return false;
        }
        if self.rec.response_id.is_none() {
            self.rec.response_id = chunk.id;
        }
        if let Some(u) = chunk.usage {
            self.usage.prompt_tokens = u.prompt_tokens.or(self.usage.prompt_tokens);
            self.usage.completion_tokens = u.completion_tokens.or(self.usage.completion_tokens);
        }
        if chunk.finish_reason.is_some() {
            self.rec.finish_reason = chunk.finish_reason;
        }
        if chunk.is_content {
            self.rec.event_ms.push(t);
            self.deltas.push(chunk.text);
            self.cumulative.push(chunk.usage.and_then(|u| u.completion_tokens));
        } else {
            self.rec.other_events += 1;
        }
        true
    }

    /// Token counts, their provenance and the per-event split.
    fn finish(mut self, tokenizer: &Tokenizer) -> Exchange {
        let reply: String = self.deltas.concat();
        let client_out = tokenizer.count(&reply) as u64;
        let server_out = self.usage.completion_tokens;
        let (n, src) = match server_out {
            Some(s) => (s, TokenSource::Server),
            None => (client_out, TokenSource::Tokenizer),
        };
        let r = &mut self.rec;
        r.output_tokens = Some(n);
        r.output_tokens_source = Some(src);
        r.output_tokens_client = Some(client_out);
        r.output_tokens_server = server_out;
        r.input_tokens_server = self.usage.prompt_tokens;
        (r.input_tokens, r.input_tokens_source) = match (self.usage.prompt_tokens, r.input_tokens_client) {
            (Some(s), _) => (Some(s), Some(TokenSource::Server)),
            (None, Some(c)) => (Some(c), Some(TokenSource::Tokenizer)),
            (None, None) => (None, None),
        };
        if !r.event_ms.is_empty() {
            let cum: Option<Vec<u64>> = self.cumulative.iter().copied().collect();
            let from_server = cum.filter(|c| c.windows(2).all(|w| w[0] <= w[1]) && c.last() == Some(&n));
            (r.event_tokens, r.event_tokens_source) = match from_server {
                Some(c) => (tokens::from_cumulative(&c), Some(TokenSource::Server)),
                // one token per event: nothing to apportion (a content event carries at least one)
                None if n == self.deltas.len() as u64 => (vec![1; self.deltas.len()], Some(TokenSource::Tokenizer)),
                None => {
                    let counts: Vec<u64> = self.deltas.iter().map(|d| tokenizer.count(d).max(1) as u64).collect();
                    (tokens::apportion(n, &counts), Some(TokenSource::Tokenizer))
                }
            };
        }
        Exchange { record: self.rec, reply }
    }
}

/// Sends one request and measures it. Never panics; every failure becomes a classified record.
pub async fn execute(ep: &Endpoint, meta: &RequestMeta, body: Bytes, cancel: &Cancel) -> Exchange {
    let clock = ep.clock;
    let to = ep.timeouts;
    let rec = RequestRecord {
        id: meta.id,
        session: meta.session,
        turn: meta.turn,
        scheduled_ms: meta.scheduled_ms,
        cap_wait_ms: meta.cap_wait_ms,
        input_tokens_client: meta.input_tokens_client,
        requested_output_tokens: meta.requested_output_tokens,
        ..Default::default()
    };
    let mut st = Stream { rec, deltas: Vec::new(), cumulative: Vec::new(), usage: Usage::default(), done: false };

    let sent = Instant::now();
    st.rec.sent_ms = Some(clock.ms(sent));
    let total_deadline = sent + to.total;
    let first_deadline = (sent + to.first_token).min(total_deadline);
    let which = |d: Instant, other: ErrorClass| {
        if d >= total_deadline { ErrorClass::TimeoutTotal } else { other }
    };

    // Response headers. A pooled keep-alive connection that the server closed just as we wrote
    // to it fails before any response byte; that request never reached the server's handler, so
    // it is resent on another connection (at most twice) and counted in `reconnects`.
    let post = async {
        let mut attempt = 0;
        loop {
            let r = ep.client.post(ep.api.path(), body.clone()).await;
            match r {
                Err(e) if attempt < 2 && is_stale_connection(&e) => attempt += 1,
                r => return (r, attempt),
            }
        }
    };
    let resp = tokio::select! {
        r = timeout_at(first_deadline.into(), post) => r.map(|(r, attempts)| {
            st.rec.reconnects = attempts;
            r
        }),
        _ = cancel.cancelled() => {
            st.fail(ErrorClass::Cancelled, "run interrupted before the response arrived".into(), None);
            return end(st, ep).await;
        }
    };
    let resp = match resp {
        Err(_) => {
            let class = which(first_deadline, ErrorClass::TimeoutFirstToken);
            st.fail(class, format!("no response headers within {:.1} s", (first_deadline - sent).as_secs_f64()), None);
            return end(st, ep).await;
        }
        Ok(Err(e)) => {
            let (class, what) = if e.is_connect() {
                if is_timeout(&e) {
                    (ErrorClass::TimeoutConnect, "connect timed out")
                } else {
                    (ErrorClass::Connect, "cannot connect")
                }
            } else {
                (ErrorClass::StreamEndedEarly, "connection closed before the response")
            };
            st.fail(class, format!("{what}: {}", error_chain(&e)), None);
            return end(st, ep).await;
        }
        Ok(Ok(r)) => r,
    };
    st.rec.headers_ms = Some(clock.now_ms());
    let status = resp.status();
    let mut body = resp.into_body();

    if !status.is_success() {
        let mut buf = Vec::new();
        let read = async {
            while let Some(Ok(f)) = body.frame().await {
                if let Ok(d) = f.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() >= ERROR_BODY_LIMIT {
                        break;
                    }
                }
            }
        };
        let _ = timeout_at(total_deadline.min(Instant::now() + to.idle).into(), read).await;
        let text = excerpt(&buf, 200);
        st.fail(ErrorClass::HttpStatus, format!("HTTP {}: {text}", status.as_u16()), Some(status.as_u16()));
        return end(st, ep).await;
    }

    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut last_bytes = Instant::now();
    // One timer and one cancellation waiter for the whole stream (re-arming them per frame costs
    // more than reading the frame at hundreds of streams). The timer is moved only when it fires.
    let deadline_now = |st: &Stream, last_bytes: Instant| {
        if st.done {
            // the stream is complete; give the server a moment to close it
            (total_deadline.min(last_bytes + to.idle.min(std::time::Duration::from_secs(2))), None)
        } else if st.rec.event_ms.is_empty() {
            (first_deadline, Some(which(first_deadline, ErrorClass::TimeoutFirstToken)))
        } else {
            let d = (last_bytes + to.idle).min(total_deadline);
            (d, Some(which(d, ErrorClass::TimeoutIdle)))
        }
    };
    let mut armed = first_deadline;
    let timer = tokio::time::sleep_until(armed.into());
    tokio::pin!(timer);
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        let frame = tokio::select! {
            biased;
            f = body.frame() => Ok(f),
            _ = &mut timer => {
                let (deadline, class) = deadline_now(&st, last_bytes);
                if Instant::now() < deadline {
                    armed = deadline;
                    timer.as_mut().reset(armed.into());
                    continue;
                }
                Err(class)
            }
            _ = &mut cancelled => {
                st.fail(ErrorClass::Cancelled, "run interrupted while streaming".into(), None);
                break;
            }
        };
        match frame {
            Err(class) => {
                if let Some(class) = class {
                    let what = match class {
                        ErrorClass::TimeoutFirstToken => "no content within the first-token timeout",
                        ErrorClass::TimeoutIdle => "no bytes within the idle timeout",
                        _ => "the request exceeded the total timeout",
                    };
                    st.fail(class, what.into(), None);
                }
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                if !st.done {
                    st.fail(ErrorClass::StreamEndedEarly, format!("stream broke: {}", error_chain(&e)), None);
                }
                break;
            }
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let now = Instant::now();
                last_bytes = now;
                let t = clock.ms(now);
                decoder.feed(&data, &mut events);
                let mut keep_going = true;
                for ev in events.drain(..) {
                    if keep_going {
                        keep_going = st.event(ev, t);
                    }
                }
                if !keep_going {
                    break;
                }
                // a deadline only ever moves earlier when the stream changes phase
                let (deadline, _) = deadline_now(&st, last_bytes);
                if deadline < armed {
                    armed = deadline;
                    timer.as_mut().reset(armed.into());
                }
            }
        }
    }
    if st.rec.error.is_none() && !st.done {
        let detail = if decoder.has_partial() { " (mid-event)" } else { "" };
        st.fail(
            ErrorClass::StreamEndedEarly,
            format!("stream closed before [DONE]{detail} after {} content events", st.rec.event_ms.len()),
            None,
        );
    }
    end(st, ep).await
}

/// The server closed an idle pooled connection as we reused it: nothing of the response arrived.
fn is_stale_connection(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        if let Some(h) = x.downcast_ref::<hyper::Error>() {
            return h.is_incomplete_message() || h.is_canceled();
        }
        cur = x.source();
    }
    false
}

/// Closes the record. Counting tokens runs on a background thread at idle priority, so that
/// hundreds of streams ending together never delay the timestamps of the streams still running.
async fn end(mut st: Stream, ep: &Endpoint) -> Exchange {
    st.rec.end_ms = Some(ep.clock.now_ms());
    let tk = ep.tokenizer.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    crate::background::run(Box::new(move || {
        let _ = tx.send(st.finish(&tk));
    }));
    rx.await.expect("the background thread finishes every job")
}
