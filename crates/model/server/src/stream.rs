//! One request's response: engine events turned into SSE chunks.

use bytes::Bytes;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::driver::TokenEvent;
use crate::openai::{ApiError, Chunks};
use crate::state::{AppState, Trace};
use goodput_wire::Api;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Role,
    Tokens,
    Usage,
    Done,
    End,
}

/// One request's response: turns engine events into SSE chunks. Dropping it (the client went
/// away) aborts the sequence, freeing its KV blocks.
pub(crate) struct TokenStream {
    pub(crate) state: AppState,
    pub(crate) id: u64,
    pub(crate) rx: UnboundedReceiver<TokenEvent>,
    pub(crate) chunks: Chunks,
    pub(crate) rng: rand_chacha::ChaCha8Rng,
    pub(crate) arrived: Instant,
    pub(crate) last: Option<Instant>,
    pub(crate) generated: u64,
    /// The first tokens that are reasoning (streamed as reasoning, not as the answer).
    pub(crate) reasoning: u64,
    pub(crate) max_tokens: u64,
    pub(crate) prompt: u64,
    pub(crate) include_usage: bool,
    pub(crate) phase: Phase,
    pub(crate) trace: Option<Trace>,
    pub(crate) done: bool,
}

/// `first` and the events already queued behind it, up to the last: the iterations that ended
/// while this stream waited to be written go out as one chunk (as vLLM's output collector merges
/// the outputs of a request its consumer has not taken yet). Their tokens together, whether the
/// last of them finished the request, and when the first was released (so that the emit-time
/// error counts from the earliest).
fn merge_ready(first: TokenEvent, rx: &mut UnboundedReceiver<TokenEvent>) -> (u32, bool, Instant) {
    let TokenEvent::Tokens { mut n, mut finished, at } = first;
    while !finished {
        let Ok(TokenEvent::Tokens { n: more, finished: last, .. }) = rx.try_recv() else { break };
        n += more;
        finished = last;
    }
    (n, finished, at)
}

impl TokenStream {
    fn words(&mut self, n: u32) -> String {
        self.state.0.tokenizer.words_text(n as usize, &mut self.rng)
    }

    /// Waits for the next engine event (merged with those queued behind it: [`merge_ready`]);
    /// returns its reasoning text, its answer text, its tokens, whether it was the last, and
    /// when the engine released the first of them. Completions have no field for reasoning: it
    /// goes in the text between `<think>` and `</think>`, as from a server without a reasoning
    /// parser.
    async fn tokens(&mut self) -> Option<(String, String, u32, bool, Instant)> {
        let first = self.rx.recv().await?;
        let (n, finished, at) = merge_ready(first, &mut self.rx);
        let now = Instant::now();
        let m = &self.state.0.metrics;
        if self.last.is_none() {
            m.first_token(now.duration_since(self.arrived).as_secs_f64());
        }
        m.tokens(n, self.last.map(|p| now.duration_since(p).as_secs_f64()));
        self.last = Some(now);
        let before = self.generated;
        self.generated += n as u64;
        if finished {
            self.done = true;
            m.finished(now.duration_since(self.arrived).as_secs_f64());
        }
        let thinking = self.reasoning.saturating_sub(before).min(n as u64) as u32;
        let mut reasoning = self.words(thinking);
        let answer = self.words(n - thinking);
        if self.chunks.endpoint == Api::Completions && thinking > 0 {
            if before == 0 {
                reasoning.insert_str(0, "<think>");
            }
            if before + thinking as u64 == self.reasoning {
                reasoning.push_str("</think>");
            }
        }
        Some((reasoning, answer, n, finished, at))
    }

    fn finish_reason(&self) -> &'static str {
        if self.generated >= self.max_tokens { "length" } else { "stop" }
    }

    fn emitted(&mut self, n: u32, released: Instant) {
        if let Some(t) = &mut self.trace {
            t.emits.push((Instant::now(), n));
            t.released.push(released);
        }
    }

    /// The next SSE chunk, or `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        match self.phase {
            Phase::Role => {
                self.phase = Phase::Tokens;
                Some(Bytes::from(self.chunks.role()))
            }
            Phase::Tokens => {
                let (reasoning, text, n, last, released) = self.tokens().await?;
                if last {
                    self.phase = if self.include_usage { Phase::Usage } else { Phase::Done };
                }
                let chunk = self.chunks.parts(&reasoning, &text, last.then(|| self.finish_reason()));
                self.emitted(n, released);
                Some(Bytes::from(chunk))
            }
            Phase::Usage => {
                self.phase = Phase::Done;
                let reasoning = self.reasoning.min(self.generated);
                Some(Bytes::from(self.chunks.usage_with(self.prompt, self.generated, reasoning)))
            }
            Phase::Done => {
                self.phase = Phase::End;
                Some(Bytes::from_static(b"data: [DONE]\n\n"))
            }
            Phase::End => None,
        }
    }

    /// A non-streaming response: all the reasoning, the answer and the finish reason.
    pub(crate) async fn collect(&mut self) -> Result<(String, String, &'static str), ApiError> {
        let (mut reasoning, mut text) = (String::new(), String::new());
        loop {
            match self.tokens().await {
                Some((r, t, _, last, _)) => {
                    reasoning.push_str(&r);
                    text.push_str(&t);
                    if last {
                        return Ok((reasoning, text, self.finish_reason()));
                    }
                }
                None => return Err(ApiError::unavailable("the engine stopped before the request finished")),
            }
        }
    }
}

impl Drop for TokenStream {
    fn drop(&mut self) {
        if !self.done {
            self.state.0.engine.abort(self.id);
        }
        if let Some(t) = self.trace.take() {
            self.state.0.traces.lock().expect("traces").push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ev(n: u32, at: Instant, finished: bool) -> TokenEvent {
        TokenEvent::Tokens { n, at, finished }
    }

    #[test]
    fn queued_iterations_go_out_as_one_chunk_up_to_the_last() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let t0 = Instant::now();
        let (t1, t2) = (t0 + Duration::from_millis(5), t0 + Duration::from_millis(10));
        // nothing queued behind: the event alone
        assert_eq!(merge_ready(ev(1, t0, false), &mut rx), (1, false, t0));
        // two iterations queued behind the first: 1 + 2 + 1 tokens, released at the first's time
        tx.send(ev(2, t1, false)).unwrap();
        tx.send(ev(1, t2, false)).unwrap();
        assert_eq!(merge_ready(ev(1, t0, false), &mut rx), (4, false, t0));
        assert!(rx.try_recv().is_err());
        // the last event ends the merge; a finished first takes nothing more
        tx.send(ev(3, t1, true)).unwrap();
        tx.send(ev(9, t2, false)).unwrap();
        assert_eq!(merge_ready(ev(1, t0, false), &mut rx), (4, true, t0));
        assert_eq!(merge_ready(ev(1, t0, true), &mut rx), (1, true, t0));
        assert_eq!(rx.try_recv().unwrap(), ev(9, t2, false));
    }
}
