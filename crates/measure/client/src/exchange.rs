//! One request, start to finish: send, timestamp every content event as its bytes arrive,
//! classify any failure, and produce the [`RequestRecord`].

use std::time::Instant;

use bytes::Bytes;
use goodput_metrics::{Attempt, ErrorClass, RequestError, RequestRecord, TokenSource, tokens};
use goodput_tokenizer::Tokenizer;
use http_body_util::BodyExt;
use tokio::time::timeout_at;

use crate::http::{Cancel, Clock, HttpClient, Timeouts, error_chain, excerpt, is_timeout};
use crate::openai::{Api, Usage, parse_chunk_into};
use crate::sse::{SseDecoder, SseEvent};

/// A measured exchange whose token counting is still to be done (off the load loop, by the
/// bookkeeping thread: [`Exchange::finish`]).
#[derive(Debug)]
pub struct Exchange {
    rec: RequestRecord,
    deltas: Deltas,
    /// Cumulative `usage.completion_tokens` seen on each content event (vLLM continuous usage).
    cumulative: Vec<Option<u64>>,
    usage: Usage,
    /// The request body's length (bytes): a server's prompt count is checked against it.
    sent_bytes: u64,
    reasoning: Phases,
}

/// A stream's reasoning and answer, as its events arrive ([`crate::reasoning`]).
#[derive(Debug, Default)]
struct Phases {
    parser: crate::reasoning::ReasoningParser,
    tags: crate::reasoning::ThinkTags,
    /// Byte ranges of the text that are reasoning, in order (adjacent ones merged).
    ranges: Vec<(usize, usize)>,
    /// The first content event that carried answer text.
    first_answer: Option<u32>,
    /// Some event carried reasoning.
    saw_reasoning: bool,
}

impl Phases {
    /// Classifies content event `index`, whose text is `text[start..]`, of which the chunk's
    /// reasoning fields gave the first `fields` bytes.
    fn event(&mut self, text: &str, start: usize, fields: usize, index: u32) {
        use crate::reasoning::ReasoningParser as P;
        let end = text.len();
        let mut reasoning = if self.parser == P::None { 0 } else { fields };
        let mut undecided = false;
        if self.parser == P::ThinkTags {
            let content = &text[start + reasoning..end];
            match self.tags.feed(content) {
                Some(b) => reasoning += b,
                None => {
                    undecided = true;
                    reasoning = end - start;
                }
            }
        }
        if reasoning > 0 {
            let (a, b) = (start, start + reasoning);
            match self.ranges.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => self.ranges.push((a, b)),
            }
        }
        if undecided {
            return;
        }
        // an event with answer text, or a tool call without text, answers
        if reasoning < end - start || end == start {
            self.first_answer.get_or_insert(index);
        } else {
            self.saw_reasoning = true;
        }
    }

    /// The reasoning text.
    fn text(&self, all: &str) -> String {
        self.ranges.iter().map(|&(a, b)| &all[a..b]).collect()
    }

    /// The answer text: everything but the reasoning.
    fn answer(&self, all: &str) -> String {
        let mut out = String::with_capacity(all.len());
        let mut at = 0;
        for &(a, b) in &self.ranges {
            out.push_str(&all[at..a]);
            at = b;
        }
        out.push_str(&all[at..]);
        out
    }
}

#[cfg(test)]
impl Exchange {
    /// An exchange that ended as `rec` says, with no content (for tests of what consumes them).
    pub(crate) fn of_record(rec: RequestRecord) -> Self {
        Exchange {
            rec,
            deltas: Deltas::default(),
            cumulative: Vec::new(),
            usage: Usage::default(),
            sent_bytes: 0,
            reasoning: Phases::default(),
        }
    }
}

/// Everything shared by the requests of a run.
#[derive(Clone)]
pub struct Endpoint {
    pub client: HttpClient,
    pub api: Api,
    pub timeouts: Timeouts,
    pub tokenizer: Tokenizer,
    pub clock: Clock,
    /// Resend a request that failed before any content arrived, at most this many times (each
    /// failed attempt is kept in the record). 0: every request is sent exactly once.
    pub retries: u32,
    /// Streams whose body did not end right after `[DONE]` (counted apart from the requests).
    pub after_done: AfterDone,
    /// Requests resent because the server had given up their connection, and keep-alive.
    pub connections: Connections,
    /// The largest one SSE event may be (bytes); a larger one fails its request
    /// (`event_too_large`).
    pub max_event_bytes: usize,
    /// How a reasoning model's thinking is told from its answer (`--reasoning-parser`).
    pub reasoning: crate::reasoning::ReasoningParser,
}

/// The default of [`Endpoint::max_event_bytes`]: 16 MiB.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// How the run's connections fared ([`goodput_metrics::ConnectionReuse`]): requests the server
/// was shown not to have taken on a reused connection, by how it showed, and whether keep-alive
/// was turned off because the server closes connections after its responses. Shared by a run's
/// requests.
#[derive(Clone, Debug, Default)]
pub struct Connections(std::sync::Arc<std::sync::Mutex<goodput_metrics::ConnectionReuse>>);

impl Connections {
    /// A request was shown not to have reached the server. If the server gave its connection up
    /// right after a response, it closes connections after each: keep-alive goes off.
    fn closed_unused(&self, how: crate::closing::NotTaken, peer: Option<&crate::closing::Peer>, client: &HttpClient) {
        use crate::closing::{CLOSES_AFTER_RESPONSE, NotTaken};
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match how {
            NotTaken::Unwritten => s.unwritten += 1,
            NotTaken::ClosedBeforeWrite => s.closed_before_write += 1,
            NotTaken::Reset => s.reset += 1,
        }
        if peer.and_then(crate::closing::Peer::idle_for).is_some_and(|d| d < CLOSES_AFTER_RESPONSE) {
            client.keep_alive().turn_off();
        }
    }

    /// What was counted, with when keep-alive went off on `clock`.
    pub fn stats(&self, client: &HttpClient, clock: Clock) -> goodput_metrics::ConnectionReuse {
        let mut s = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.keep_alive_off_ms = client.keep_alive().off_since().map(|t| clock.ms(t));
        s
    }
}

/// At most this long (or the idle timeout, if shorter) a background drain waits for a body to
/// end after `[DONE]` before it drops the connection.
pub const DONE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Streams that stayed open after `[DONE]`, shared by a run's requests. A request ends at
/// `[DONE]` (its `end_ms` is `[DONE]`'s arrival, and the load goes on at once); what is left of
/// its body is drained apart and counted here.
#[derive(Clone, Debug, Default)]
pub struct AfterDone {
    drained: std::sync::Arc<std::sync::atomic::AtomicU64>,
    left_open: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl AfterDone {
    /// Streams whose body had not ended by the time `[DONE]` was read (drained in the background:
    /// most servers' terminating chunk simply arrives a moment later).
    pub fn drained(&self) -> u64 {
        self.drained.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Of those, the streams the server had not closed within the grace ([`DONE_GRACE`], or
    /// the idle timeout if shorter): their connection was dropped.
    pub fn left_open(&self) -> u64 {
        self.left_open.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Endpoint {
    /// A run's endpoint: its clock starts now (the runner restarts it when the load begins), and
    /// each request is sent once.
    pub fn new(client: HttpClient, api: Api, timeouts: Timeouts, tokenizer: Tokenizer) -> Self {
        Endpoint {
            client,
            api,
            timeouts,
            tokenizer,
            clock: Clock::start(),
            retries: 0,
            after_done: AfterDone::default(),
            connections: Connections::default(),
            max_event_bytes: MAX_EVENT_BYTES,
            reasoning: crate::reasoning::ReasoningParser::default(),
        }
    }
}

/// Bodies longer than this are not kept when reading an error response.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The text of a stream's content events, kept in one buffer with each event's end (no
/// allocation per event).
#[derive(Debug, Default)]
struct Deltas {
    text: String,
    ends: Vec<usize>,
}

impl Deltas {
    /// Content events.
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each event's text, in order.
    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(a, &b)| &self.text[a..b])
    }
}

struct Stream {
    rec: RequestRecord,
    deltas: Deltas,
    cumulative: Vec<Option<u64>>,
    usage: Usage,
    done: bool,
    /// The wait a failed response asked for (`Retry-After`).
    retry_after: Option<std::time::Duration>,
    /// The request reached the server, or may have: it got a connection and was not shown to
    /// have been refused unread.
    posted: bool,
    /// The most content events the stream may carry before it is a runaway
    /// ([`goodput_metrics::plausible::runaway_limit`]), and the most bytes of their text.
    runaway_events: u64,
    runaway_bytes: u64,
    reasoning: Phases,
}

impl Stream {
    fn fail(&mut self, class: ErrorClass, message: String, status: Option<u16>) {
        if self.rec.error.is_none() {
            self.rec.error = Some(RequestError { class, message, status });
        }
    }

    /// Handles one SSE event at arrival time `t`; returns false when the stream must stop.
    fn event(&mut self, ev: &SseEvent, t: f64) -> bool {
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
        let start = self.deltas.text.len();
        let want_id = self.rec.response_id.is_none();
        let chunk = match parse_chunk_into(&ev.data, &mut self.deltas.text, want_id) {
            Ok(c) => c,
            Err(e) => {
                self.fail(ErrorClass::MalformedStream, e.to_string(), None);
                return false;
            }
        };
        if let Some(e) = chunk.error {
            self.deltas.text.truncate(start);
            self.fail(ErrorClass::ServerErrorEvent, e, None);
            return false;
        }
        if want_id {
            self.rec.response_id = chunk.id;
        }
        if let Some(u) = chunk.usage {
            self.usage.prompt_tokens = u.prompt_tokens.or(self.usage.prompt_tokens);
            self.usage.completion_tokens = u.completion_tokens.or(self.usage.completion_tokens);
            self.usage.completion_tokens_details = u.completion_tokens_details.or(self.usage.completion_tokens_details);
        }
        if chunk.finish_reason.is_some() {
            self.rec.finish_reason = chunk.finish_reason;
        }
        if chunk.is_content {
            let events = self.rec.event_ms.len() as u64;
            if events >= self.runaway_events || self.deltas.text.len() as u64 > self.runaway_bytes {
                // what arrived up to the bound stays; the rest is not read
                self.deltas.text.truncate(start);
                let asked =
                    self.rec.requested_output_tokens.map_or("no max_tokens".into(), |m| format!("max_tokens {m}"));
                self.fail(
                    ErrorClass::RunawayStream,
                    format!(
                        "the stream went on past {events} content events ({} bytes of text) for {asked}: the server \
                         ignores the limit; stopped at the bound of 4 × max_tokens + 64 events",
                        self.deltas.text.len()
                    ),
                    None,
                );
                return false;
            }
            self.reasoning.event(&self.deltas.text, start, chunk.reasoning_bytes, events as u32);
            self.rec.event_ms.push(t);
            self.deltas.ends.push(self.deltas.text.len());
            self.cumulative.push(chunk.usage.and_then(|u| u.completion_tokens));
        } else {
            self.deltas.text.truncate(start);
            self.rec.other_events += 1;
        }
        true
    }
}

impl Exchange {
    /// The record so far (times and errors are final; token counts are not).
    pub fn record(&self) -> &RequestRecord {
        &self.rec
    }

    pub fn is_success(&self) -> bool {
        self.rec.error.is_none()
    }

    /// The output length the server reported (`usage.completion_tokens`).
    pub fn server_output_tokens(&self) -> Option<u64> {
        self.usage.completion_tokens
    }

    /// The reply text (multi-turn sessions resend it): the answer, without the reasoning (as
    /// chat clients resend a reasoning model's replies).
    pub fn reply(&self) -> String {
        if self.reasoning.ranges.is_empty() {
            self.deltas.text.clone()
        } else {
            self.reasoning.answer(&self.deltas.text)
        }
    }

    /// The output length for the load loop, without counting: the server's count, else one
    /// token per content event (the record's own count is made later, off the load loop).
    pub fn output_tokens_estimate(&self) -> u64 {
        // fewer tokens than content events is impossible (`goodput_metrics::plausible`)
        let events = self.deltas.len() as u64;
        self.server_output_tokens().filter(|&n| n >= events).unwrap_or(events)
    }

    /// The answer's length for the load loop (a conversation resends the answer alone): the
    /// output less the server's reasoning count, else less one token per reasoning event.
    pub fn answer_tokens_estimate(&self) -> u64 {
        let all = self.output_tokens_estimate();
        let reasoning = self.usage.reasoning_tokens().unwrap_or_else(|| {
            let k = self.reasoning.first_answer.map_or(self.deltas.len(), |k| k as usize);
            if self.reasoning.saw_reasoning { k as u64 } else { 0 }
        });
        all.saturating_sub(reasoning)
    }

    /// Token counts, their provenance and the per-event split: the record, complete.
    pub fn finish(self, tokenizer: &Tokenizer) -> RequestRecord {
        self.complete(Some(tokenizer))
    }

    /// The record without our tokenizer's counts (the bookkeeping fell behind, or the run ended
    /// before it got to this one): the server's counts when it gave them, one token per event
    /// otherwise, and `counts_skipped` set.
    pub fn finish_without_counts(self) -> RequestRecord {
        self.complete(None)
    }

    fn complete(mut self, tokenizer: Option<&Tokenizer>) -> RequestRecord {
        use goodput_metrics::plausible::{UsageField, judge_usage};
        let client_out = tokenizer.map(|tk| tk.count(&self.deltas.text) as u64);
        // a server's count that breaks a plausibility rule is kept as its figure, not believed
        let distrusted = judge_usage(
            self.usage.prompt_tokens,
            self.usage.completion_tokens,
            self.deltas.len() as u64,
            self.sent_bytes,
        );
        let believed = |f: UsageField| !distrusted.iter().any(|d| d.field == f);
        let server_out = self.usage.completion_tokens.filter(|_| believed(UsageField::CompletionTokens));
        let server_in = self.usage.prompt_tokens.filter(|_| believed(UsageField::PromptTokens));
        let (n, src) = match (server_out, client_out) {
            (Some(s), _) => (s, TokenSource::Server),
            (None, Some(c)) => (c, TokenSource::Tokenizer),
            (None, None) => (self.deltas.len() as u64, TokenSource::Tokenizer),
        };
        let r = &mut self.rec;
        r.counts_skipped = tokenizer.is_none();
        r.output_tokens = Some(n);
        r.output_tokens_source = Some(src);
        r.output_tokens_client = client_out;
        r.output_tokens_server = self.usage.completion_tokens;
        r.input_tokens_server = self.usage.prompt_tokens;
        r.distrusted_counts = distrusted;
        (r.input_tokens, r.input_tokens_source) = match (server_in, r.input_tokens_client) {
            (Some(s), _) => (Some(s), Some(TokenSource::Server)),
            (None, Some(c)) => (Some(c), Some(TokenSource::Tokenizer)),
            (None, None) => (None, None),
        };
        let phases = &self.reasoning;
        // more reasoning than output is impossible: such a count is not believed
        let server_reasoning = self.usage.reasoning_tokens().filter(|&x| x > 0 && x <= n);
        if phases.saw_reasoning || server_reasoning.is_some() {
            let k = r.event_ms.len() as u32;
            // hidden reasoning (the server counts it, streams none): before the first token
            r.reasoning_events = Some(if phases.saw_reasoning { phases.first_answer.unwrap_or(k) } else { 0 });
            let client = tokenizer
                .filter(|_| !phases.ranges.is_empty())
                .map(|tk| tk.count(&phases.text(&self.deltas.text)) as u64);
            r.reasoning_tokens_client = client;
            r.reasoning_tokens_server = self.usage.reasoning_tokens();
            (r.reasoning_tokens, r.reasoning_tokens_source) = match (server_reasoning, client) {
                (Some(s), _) => (Some(s), Some(TokenSource::Server)),
                (None, Some(c)) => (Some(c.min(n)), Some(TokenSource::Tokenizer)),
                // no count: one token per reasoning event
                (None, None) => (r.reasoning_events.map(u64::from), Some(TokenSource::Tokenizer)),
            };
            r.think_unclosed = phases.tags.unclosed();
        }
        if !r.event_ms.is_empty() {
            let cum: Option<Vec<u64>> = self.cumulative.iter().copied().collect();
            let from_server = cum.filter(|c| c.windows(2).all(|w| w[0] <= w[1]) && c.last() == Some(&n));
            (r.event_tokens, r.event_tokens_source) = match (from_server, tokenizer) {
                (Some(c), _) => (tokens::from_cumulative(&c), Some(TokenSource::Server)),
                // one token per event: nothing to apportion (a content event carries at least one)
                _ if n == self.deltas.len() as u64 => (vec![1; self.deltas.len()], Some(TokenSource::Tokenizer)),
                (None, Some(tk)) => {
                    let counts: Vec<u64> = self.deltas.iter().map(|d| tk.count(d).max(1) as u64).collect();
                    (tokens::apportion(n, &counts), Some(TokenSource::Tokenizer))
                }
                (None, None) => (tokens::apportion(n, &vec![1; self.deltas.len()]), Some(TokenSource::Tokenizer)),
            };
        }
        self.rec
    }
}

/// Sends one request and measures it (resending it after a failure before any content, when
/// `ep.retries` allows). Never panics; every failure becomes a classified record. Token counting
/// is left to [`Exchange::finish`], so the caller can hand it off the load loop.
/// `template` holds what is known before sending (ids, schedule, lengths asked for).
pub async fn execute(ep: &Endpoint, template: &RequestRecord, body: Bytes, cancel: &Cancel) -> Exchange {
    let mut attempts = Vec::new();
    let mut stale_resends = 0;
    let mut posts = 0;
    loop {
        let mut st = attempt(ep, template.clone(), body.clone(), cancel).await;
        stale_resends += st.rec.stale_resends;
        posts += u32::from(st.posted);
        let mut retry = (attempts.len() as u32) < ep.retries && st.rec.event_ms.is_empty() && retryable(&st.rec);
        let wait = retry_wait(st.retry_after, attempts.len() as u32, template.id);
        if retry && let Err(asked) = wait {
            retry = false;
            if let Some(e) = &mut st.rec.error {
                e.message.push_str(&format!(
                    " (not retried: the server asked to wait {} s, beyond the {} s goodput waits)",
                    asked.as_secs_f64(),
                    MAX_RETRY_AFTER.as_secs()
                ));
            }
        }
        if !retry {
            let mut rec = st.rec;
            // a server's words may echo the key: never kept
            for e in rec.error.iter_mut().chain(attempts.iter_mut().map(|a: &mut Attempt| &mut a.error)) {
                ep.client.redact(&mut e.message);
            }
            rec.reconnects = attempts.len() as u32;
            rec.attempts = attempts;
            rec.stale_resends = stale_resends;
            rec.posts = Some(posts);
            let sent_bytes = body.len() as u64;
            return Exchange {
                rec,
                deltas: st.deltas,
                cumulative: st.cumulative,
                usage: st.usage,
                sent_bytes,
                reasoning: st.reasoning,
            };
        }
        if let (Some(sent_ms), Some(error)) = (st.rec.sent_ms, st.rec.error) {
            attempts.push(Attempt { sent_ms, end_ms: st.rec.end_ms.unwrap_or(sent_ms), error });
        }
        let pause = tokio::time::sleep(wait.unwrap_or_default());
        tokio::select! {
            () = pause => {}
            () = cancel.cancelled() => {}
        }
    }
}

/// The longest `Retry-After` honoured; a server that asks for more is not retried.
pub const MAX_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(60);
/// Backoff without `Retry-After`: the first retry waits about this long, each next one twice as
/// long, up to [`MAX_BACKOFF`], less a random quarter at most (jitter, so that requests failed
/// together do not come back together).
pub const FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_millis(500);
pub const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(8);

/// How long to wait before retry `k` (0-based) of request `id`: the server's `Retry-After` when
/// it gave one (an error when it is over [`MAX_RETRY_AFTER`]), else capped exponential backoff
/// with jitter drawn from the request and the retry (the same run waits the same).
pub fn retry_wait(
    retry_after: Option<std::time::Duration>,
    k: u32,
    id: u64,
) -> Result<std::time::Duration, std::time::Duration> {
    if let Some(d) = retry_after {
        return if d <= MAX_RETRY_AFTER { Ok(d) } else { Err(d) };
    }
    let full = FIRST_BACKOFF.saturating_mul(1u32 << k.min(16)).min(MAX_BACKOFF);
    // splitmix64 of the request and the retry: a uniform draw in [0, 1)
    let mut z = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(k).wrapping_add(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let u = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
    Ok(full.mul_f64(1.0 - 0.25 * u))
}

/// `Retry-After` (RFC 9110 §10.2.3): a number of seconds, or an HTTP date (the wait until then,
/// nothing if it has passed). `None` when absent or unreadable.
pub fn parse_retry_after(v: &http::HeaderValue, now: std::time::SystemTime) -> Option<std::time::Duration> {
    let v = v.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(std::time::Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// Failures worth another attempt: the connection failed, the server shed load (408, 429, 5xx),
/// or the stream ended before any content.
fn retryable(r: &RequestRecord) -> bool {
    let Some(e) = &r.error else { return false };
    match e.class {
        ErrorClass::Connect | ErrorClass::TimeoutConnect | ErrorClass::StreamEndedEarly => true,
        ErrorClass::HttpStatus => matches!(e.status, Some(408 | 429 | 500..=599)),
        _ => false,
    }
}

/// One attempt.
async fn attempt(ep: &Endpoint, rec: RequestRecord, body: Bytes, cancel: &Cancel) -> Stream {
    let clock = ep.clock;
    let to = ep.timeouts;
    let mut st = Stream {
        rec,
        deltas: Deltas::default(),
        cumulative: Vec::new(),
        usage: Usage::default(),
        done: false,
        retry_after: None,
        posted: false,
        runaway_events: 0,
        runaway_bytes: 0,
        reasoning: Phases { parser: ep.reasoning, ..Default::default() },
    };
    let limit = goodput_metrics::plausible::runaway_limit(st.rec.requested_output_tokens);
    st.runaway_events = limit;
    st.runaway_bytes = goodput_metrics::plausible::runaway_bytes(limit);

    let sent = Instant::now();
    st.rec.sent_ms = Some(clock.ms(sent));
    let total_deadline = sent + to.total;
    let first_deadline = (sent + to.first_token).min(total_deadline);
    let which = |d: Instant, other: ErrorClass| {
        if d >= total_deadline { ErrorClass::TimeoutTotal } else { other }
    };

    let Some((resp, arrivals)) = headers(ep, &body, cancel, &mut st, sent, first_deadline, total_deadline).await else {
        return end(st, ep);
    };
    // bytes are stamped when they arrived (`crate::arrival`), never before the request was sent
    // (again, if it was resent) or before the request's previous stamp
    let floor = st.rec.sent_ms.map_or(sent, |ms| clock.instant(ms));
    let mut stamped = crate::arrival::stamp(arrivals.as_ref(), floor);
    st.rec.headers_ms = Some(clock.ms(stamped));
    // the newest write on the connection before its response is the end of this request's
    if let Some(w) = arrivals.as_ref().and_then(crate::arrival::Arrivals::written) {
        st.rec.written_ms = Some(clock.ms(w.max(floor).min(stamped)));
    }
    let status = resp.status();
    let encoding = content_encoding(resp.headers());
    let (parts, mut body) = resp.into_parts();
    let resp_headers = parts.headers;

    if !status.is_success() {
        st.retry_after = resp_headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
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
        let message = match resp_headers.get(http::header::LOCATION).filter(|_| status.is_redirection()) {
            Some(to) => format!(
                "HTTP {} redirect to {}: redirects are not followed (give the final URL as --url)",
                status.as_u16(),
                String::from_utf8_lossy(to.as_bytes())
            ),
            None => format!("HTTP {}: {text}", status.as_u16()),
        };
        st.fail(ErrorClass::HttpStatus, message, Some(status.as_u16()));
        return end(st, ep);
    }

    if let Some((class, message)) = not_an_event_stream(&resp_headers) {
        // what the body says, for the message (a complete JSON reply, a proxy's page)
        let mut buf = Vec::new();
        let read = async {
            while let Some(Ok(f)) = body.frame().await {
                if let Ok(d) = f.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() >= 4096 {
                        break;
                    }
                }
            }
        };
        let _ = timeout_at(total_deadline.min(Instant::now() + to.idle.min(DONE_GRACE)).into(), read).await;
        st.fail(class, format!("{message}; the body begins: {}", excerpt(&buf, 200)), None);
        return end(st, ep);
    }

    if let Some(enc) = encoding {
        // the client asks for `Accept-Encoding: identity`; a compressed stream cannot be
        // timestamped per event, so it is named rather than decoded
        st.fail(
            ErrorClass::MalformedStream,
            format!(
                "the response is `Content-Encoding: {enc}`, which was not asked for (the request says \
                 `Accept-Encoding: identity`): turn compression off for text/event-stream on the server or proxy"
            ),
            None,
        );
        return end(st, ep);
    }

    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    // the idle timeout runs from the last dispatched event (a keep-alive comment or a trickle of
    // bytes that never completes one does not reset it); the stall guard from the last byte
    let mut last = Silence { event: stamped, bytes: stamped, comments: 0, bytes_since_event: 0 };
    let mut done_at = None;
    // One timer and one cancellation waiter for the whole stream (re-arming them per frame costs
    // more than reading the frame at hundreds of streams). The timer is moved only when it fires.
    let deadline_now = |st: &Stream, last: Silence| {
        if st.rec.event_ms.is_empty() {
            (first_deadline, Some(which(first_deadline, ErrorClass::TimeoutFirstToken)))
        } else {
            let idle = last.event + to.idle;
            let stall = last.bytes + to.stall();
            let (d, class) =
                if stall < idle { (stall, ErrorClass::TimeoutStall) } else { (idle, ErrorClass::TimeoutIdle) };
            let d = d.min(total_deadline);
            (d, Some(which(d, class)))
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
                let (deadline, class) = deadline_now(&st, last);
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
                        ErrorClass::TimeoutFirstToken => {
                            format!("no content within the first-token timeout ({})", secs(to.first_token))
                        }
                        ErrorClass::TimeoutIdle => format!(
                            "no stream event within the idle timeout ({}; {} comment lines and {} bytes arrived \
                             meanwhile)",
                            secs(to.idle),
                            decoder.comments - last.comments,
                            last.bytes_since_event
                        ),
                        ErrorClass::TimeoutStall => format!("no bytes within the stall timeout ({})", secs(to.stall())),
                        _ => format!("the request exceeded the total timeout ({})", secs(to.total)),
                    };
                    st.fail(class, what, None);
                }
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                st.fail(ErrorClass::StreamEndedEarly, format!("stream broke: {}", error_chain(&e)), None);
                break;
            }
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                stamped = crate::arrival::stamp(arrivals.as_ref(), stamped);
                last.bytes = stamped;
                let t = clock.ms(stamped);
                decoder.feed(&data, &mut events);
                let cap = ep.max_event_bytes;
                if decoder.pending_bytes() > cap || events.iter().any(|e| e.data.len() > cap) {
                    st.fail(
                        ErrorClass::EventTooLarge,
                        format!(
                            "one stream event exceeded {} bytes (--max-event-size): not a token stream",
                            ep.max_event_bytes
                        ),
                        None,
                    );
                    break;
                }
                if events.is_empty() {
                    last.bytes_since_event += data.len() as u64;
                } else {
                    last = Silence { event: stamped, bytes: stamped, comments: decoder.comments, bytes_since_event: 0 };
                }
                let mut keep_going = true;
                for ev in events.drain(..) {
                    if keep_going {
                        keep_going = st.event(&ev, t);
                    }
                    decoder.recycle(ev.data);
                }
                if !keep_going {
                    break;
                }
                if st.done {
                    // the request ends at [DONE]; the rest of the body is not the load's business
                    done_at = Some(stamped);
                    break;
                }
                // a deadline only ever moves earlier when the stream changes phase
                let (deadline, _) = deadline_now(&st, last);
                if deadline < armed {
                    armed = deadline;
                    timer.as_mut().reset(armed.into());
                }
            }
        }
    }
    if let Some(at) = done_at {
        st.rec.end_ms = Some(clock.ms(at));
        close_after_done(body, to.idle.min(DONE_GRACE), &ep.after_done);
        return st;
    }
    if st.rec.error.is_none() && !st.done {
        let detail = if decoder.has_partial() { " (mid-event)" } else { "" };
        st.fail(
            ErrorClass::StreamEndedEarly,
            format!("stream closed before [DONE]{detail} after {} content events", st.rec.event_ms.len()),
            None,
        );
    }
    end(st, ep)
}

/// Where a stream's silences are measured from: its last dispatched event (the idle timeout) and
/// its last bytes (the stall guard), with what came between (for the message).
#[derive(Clone, Copy)]
struct Silence {
    event: Instant,
    bytes: Instant,
    /// The decoder's comment count at the last event.
    comments: u64,
    bytes_since_event: u64,
}

/// A timeout as the flags write it.
fn secs(d: std::time::Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// A 2xx response that is not an event stream: its class and what it is. A stream is
/// `text/event-stream` (or, leniently, `text/plain`, or no type at all); `application/json` is
/// a complete reply from a server that ignored `stream: true`.
fn not_an_event_stream(h: &http::HeaderMap) -> Option<(ErrorClass, String)> {
    let v = h.get(http::header::CONTENT_TYPE)?;
    let v = String::from_utf8_lossy(v.as_bytes()).to_string();
    let mime = v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match mime.as_str() {
        "" | "text/event-stream" | "text/plain" => None,
        "application/json" => Some((
            ErrorClass::NotStreamed,
            "the server answered `Content-Type: application/json`, a whole reply at once: it ignored `stream: true`, \
             so no token can be timed (does this endpoint stream? some proxies and servers need streaming turned on)"
                .to_string(),
        )),
        _ => Some((
            ErrorClass::ContentType,
            format!("the response is `Content-Type: {v}`, not an event stream (text/event-stream): a proxy's page?"),
        )),
    }
}

/// The response's `Content-Encoding`, unless it is absent or `identity`.
fn content_encoding(h: &http::HeaderMap) -> Option<String> {
    let v = h.get(http::header::CONTENT_ENCODING)?;
    let v = String::from_utf8_lossy(v.as_bytes()).trim().to_string();
    (!v.is_empty() && !v.eq_ignore_ascii_case("identity")).then_some(v)
}

/// Reads a body to its end (or its first error).
async fn drain(body: &mut hyper::body::Incoming) {
    while let Some(Ok(_)) = body.frame().await {}
}

/// Lets a stream's body end after `[DONE]` without holding the request: what already arrived
/// (the terminating chunk usually comes with `[DONE]`) is read at once and the connection goes
/// back to the pool; otherwise a background task drains the body for up to `grace` and counts
/// it in `stats`, so a server that keeps streams open after `[DONE]` never holds a user or a
/// slot of the load (no timer either: a wait here would count against the client).
fn close_after_done(mut body: hyper::body::Incoming, grace: std::time::Duration, stats: &AfterDone) {
    use hyper::body::Body as _;
    use std::sync::atomic::Ordering::Relaxed;
    use std::task::{Context, Poll, Waker};
    // poll without waiting: only what hyper has already received
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if body.is_end_stream() {
            return;
        }
        match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(_))) => continue,
            Poll::Ready(None | Some(Err(_))) => return,
            Poll::Pending => break,
        }
    }
    stats.drained.fetch_add(1, Relaxed);
    let left_open = std::sync::Arc::clone(&stats.left_open);
    tokio::spawn(async move {
        if tokio::time::timeout(grace, drain(&mut body)).await.is_err() {
            left_open.fetch_add(1, Relaxed);
        }
    });
}

/// Most times one request is resent because its pooled connection had been closed unused (a
/// server that closes every connection at once must still end in a failure).
const MAX_STALE_RESENDS: u32 = 3;

/// Posts the body and waits for the response headers; `None` when the attempt failed (`st`
/// says how).
///
/// A request that met a pooled keep-alive connection the server had given up is sent again on
/// another connection, counted in `stale_resends`, and measured from that send, but only when
/// the connection shows the server did not take it ([`crate::closing`]: hyper never wrote it,
/// the server's close was there before it was written, or the server's kernel reset it). Any
/// other failure ends the attempt: a request that may have reached the server is sent once
/// (`--retries` resends it on purpose, and says so). A server seen closing connections right
/// after their responses (llama.cpp's does) gets a connection per request from then on
/// ([`Connections`]).
async fn headers(
    ep: &Endpoint,
    body: &Bytes,
    cancel: &Cancel,
    st: &mut Stream,
    sent: Instant,
    first_deadline: Instant,
    total_deadline: Instant,
) -> Option<(crate::http::Response, Option<crate::arrival::Arrivals>)> {
    loop {
        let resp = tokio::select! {
            r = timeout_at(first_deadline.into(), ep.client.post(ep.api.path(), body.clone())) => r,
            _ = cancel.cancelled() => {
                // it may have been written
                st.posted = true;
                st.fail(ErrorClass::Cancelled, "run interrupted before the response arrived".into(), None);
                return None;
            }
        };
        match resp {
            Ok((Ok(r), conn)) => {
                st.posted = true;
                return Some((r, conn.arrivals));
            }
            Ok((Err(e), conn)) => {
                // on a reused connection, a request the server can be shown not to have taken is
                // sent again (see `crate::closing`); anything else is final
                let not_taken = match conn.reused {
                    Some(true) if st.rec.stale_resends < MAX_STALE_RESENDS => {
                        crate::closing::not_taken(&e, conn.peer.as_ref()).await
                    }
                    _ => None,
                };
                let Some(how) = not_taken else {
                    // a request that got a connection may have reached the server
                    st.posted = conn.reused.is_some() && crate::closing::shown_by_error(&e).is_none();
                    let (class, what) = failure_before_headers(&e, conn.reused == Some(true));
                    st.fail(class, format!("{what}: {}", error_chain(&e)), None);
                    return None;
                };
                st.rec.stale_resends += 1;
                st.rec.sent_ms = Some(ep.clock.now_ms());
                ep.connections.closed_unused(how, conn.peer.as_ref(), &ep.client);
            }
            Err(_) => {
                // no headers in time: the request was (or is being) written
                st.posted = true;
                let class = if first_deadline >= total_deadline {
                    ErrorClass::TimeoutTotal
                } else {
                    ErrorClass::TimeoutFirstToken
                };
                let waited = (first_deadline - sent).as_secs_f64();
                st.fail(class, format!("no response headers within {waited:.1} s"), None);
                return None;
            }
        }
    }
}

/// How a request failed before any response: the class and a few words.
fn failure_before_headers(e: &hyper_util::client::legacy::Error, reused: bool) -> (ErrorClass, &'static str) {
    if let Some(limit) = client_limit(e) {
        (ErrorClass::ClientLimit, limit)
    } else if e.is_connect() {
        if is_timeout(e) {
            (ErrorClass::TimeoutConnect, "connect timed out")
        } else if tls_met_plain_http(e) {
            (ErrorClass::Connect, "cannot connect: the server answered the TLS handshake in plain HTTP (use http://)")
        } else {
            (ErrorClass::Connect, "cannot connect")
        }
    } else if hyper_error(e).is_some_and(hyper::Error::is_parse) {
        // e.g. a TLS alert read as a status line: plain HTTP sent to a TLS port
        (ErrorClass::Connect, "the reply is not HTTP/1.x (a TLS port? use https://)")
    } else if hyper_error(e).is_some_and(hyper::Error::is_incomplete_message) && reused {
        (
            ErrorClass::StreamEndedEarly,
            "the server closed the connection after the request was written, before any response (it may have \
             read the request, so it is not sent again)",
        )
    } else if hyper_error(e).is_some_and(hyper::Error::is_incomplete_message) {
        (
            ErrorClass::StreamEndedEarly,
            "the connection closed before any response, on a fresh connection (the server closes connections as \
             requests arrive?)",
        )
    } else {
        (ErrorClass::StreamEndedEarly, "connection closed before the response")
    }
}

/// The TLS handshake read a record that is not TLS: a plain-HTTP server's answer (`HTTP/1.1 400`).
/// rustls says `InvalidContentType`; the error reaches us boxed inside an I/O error, so it is
/// recognized by its text.
fn tls_met_plain_http(e: &(dyn std::error::Error + 'static)) -> bool {
    error_chain(e).contains("InvalidContentType")
}

/// The client's own limit an error names: out of file descriptors (EMFILE, ENFILE).
fn client_limit(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    chain(e).filter_map(|x| x.downcast_ref::<std::io::Error>()).find_map(|io| match io.raw_os_error() {
        Some(libc::EMFILE) => {
            Some("this process ran out of file descriptors (EMFILE: raise `ulimit -n`, or lower the concurrency)")
        }
        Some(libc::ENFILE) => Some("the system ran out of file descriptors (ENFILE: raise fs.file-max)"),
        _ => None,
    })
}

/// An error and its sources.
fn chain<'a>(e: &'a (dyn std::error::Error + 'static)) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |x| x.source())
}

/// The hyper error in an error's chain.
fn hyper_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a hyper::Error> {
    chain(e).find_map(|x| x.downcast_ref::<hyper::Error>())
}

/// Closes the attempt's record at the time its stream ended.
fn end(mut st: Stream, ep: &Endpoint) -> Stream {
    st.rec.end_ms = Some(ep.clock.now_ms());
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> Stream {
        Stream {
            rec: RequestRecord::default(),
            deltas: Deltas::default(),
            cumulative: Vec::new(),
            usage: Usage::default(),
            done: false,
            retry_after: None,
            posted: false,
            runaway_events: u64::MAX,
            runaway_bytes: u64::MAX,
            reasoning: Phases::default(),
        }
    }

    #[test]
    fn a_stream_past_its_bound_is_a_runaway_and_keeps_what_came_before() {
        // max_tokens 2: at most 4 · 2 + 64 = 72 content events
        let mut st = stream();
        st.rec.requested_output_tokens = Some(2);
        st.runaway_events = goodput_metrics::plausible::runaway_limit(Some(2));
        for k in 0..72 {
            assert!(st.event(&ev(r#"{"choices":[{"text":"a"}]}"#), k as f64), "event {k} is within the bound");
        }
        assert!(!st.event(&ev(r#"{"choices":[{"text":"a"}]}"#), 72.0), "the 73rd stops it");
        assert_eq!(st.rec.event_ms.len(), 72);
        assert_eq!(st.deltas.text.len(), 72);
        let e = st.rec.error.as_ref().expect("failed");
        assert_eq!(e.class, ErrorClass::RunawayStream);
        assert!(e.message.contains("past 72 content events") && e.message.contains("max_tokens 2"), "{}", e.message);
        // the text is bounded too: a few huge events
        let mut st = stream();
        st.runaway_bytes = 10;
        assert!(st.event(&ev(r#"{"choices":[{"text":"01234567"}]}"#), 1.0));
        assert!(!st.event(&ev(r#"{"choices":[{"text":"89ab"}]}"#), 2.0));
        assert_eq!(st.deltas.text, "01234567");
        assert_eq!(st.rec.error.as_ref().map(|e| e.class), Some(ErrorClass::RunawayStream));
    }

    fn ev(data: &str) -> SseEvent {
        SseEvent { data: data.into(), ..Default::default() }
    }

    #[test]
    fn content_events_share_one_text_buffer() {
        let mut st = stream();
        assert!(st.event(&ev(r#"{"id":"c-1","choices":[{"delta":{"role":"assistant","content":""}}]}"#), 1.0));
        assert!(st.event(&ev(r#"{"id":"c-1","choices":[{"text":"He"}]}"#), 2.0));
        assert!(st.event(&ev(r#"{"id":"c-2","choices":[{"text":"llo"}]}"#), 3.5));
        // a usage-only chunk is not content and leaves the text as it was
        assert!(st.event(&ev(r#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#), 4.0));
        assert!(st.event(&ev("[DONE]"), 5.0));
        assert_eq!(st.rec.event_ms, vec![2.0, 3.5]);
        assert_eq!(st.rec.other_events, 2);
        // the first id seen is kept
        assert_eq!(st.rec.response_id.as_deref(), Some("c-1"));
        assert_eq!(st.deltas.iter().collect::<Vec<_>>(), vec!["He", "llo"]);
        assert_eq!(st.deltas.len(), 2);
        assert_eq!(st.deltas.text, "Hello");
        // an error chunk's text is not kept
        let mut st = stream();
        assert!(!st.event(&ev(r#"{"choices":[{"text":"x"}],"error":"boom"}"#), 1.0));
        assert_eq!((st.deltas.text.as_str(), st.deltas.len()), ("", 0));
    }
}
