//! One request's response: engine events turned into SSE chunks.

use bytes::Bytes;
use std::time::Instant;

use crate::driver::TokenEvent;
use crate::openai::{ApiError, Chunks};
use crate::state::{AppState, Trace};

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
    pub(crate) rx: tokio::sync::mpsc::UnboundedReceiver<TokenEvent>,
    pub(crate) chunks: Chunks,
    pub(crate) rng: rand_chacha::ChaCha8Rng,
    pub(crate) arrived: Instant,
    pub(crate) last: Option<Instant>,
    pub(crate) generated: u64,
    pub(crate) max_tokens: u64,
    pub(crate) prompt: u64,
    pub(crate) include_usage: bool,
    pub(crate) phase: Phase,
    pub(crate) trace: Option<Trace>,
    pub(crate) done: bool,
}

impl TokenStream {
    fn words(&mut self, n: u32) -> String {
        self.state.0.tokenizer.words_text(n as usize, &mut self.rng)
    }

    /// Waits for the next engine event; returns its text, its tokens, whether it was the last, and
    /// when the engine released it.
    async fn tokens(&mut self) -> Option<(String, u32, bool, Instant)> {
        let TokenEvent::Tokens { n, finished, at } = self.rx.recv().await?;
        let now = Instant::now();
        let m = &self.state.0.metrics;
        if self.last.is_none() {
            m.first_token(now.duration_since(self.arrived).as_secs_f64());
        }
        m.tokens(n, self.last.map(|p| now.duration_since(p).as_secs_f64()));
        self.last = Some(now);
        self.generated += n as u64;
        if finished {
            self.done = true;
            m.finished(now.duration_since(self.arrived).as_secs_f64());
        }
        Some((self.words(n), n, finished, at))
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
                let (text, n, last, released) = self.tokens().await?;
                if last {
                    self.phase = if self.include_usage { Phase::Usage } else { Phase::Done };
                }
                let chunk = self.chunks.text(&text, last.then(|| self.finish_reason()));
                self.emitted(n, released);
                Some(Bytes::from(chunk))
            }
            Phase::Usage => {
                self.phase = Phase::Done;
                Some(Bytes::from(self.chunks.usage(self.prompt, self.generated)))
            }
            Phase::Done => {
                self.phase = Phase::End;
                Some(Bytes::from_static(b"data: [DONE]\n\n"))
            }
            Phase::End => None,
        }
    }

    /// A non-streaming response: all the text and the finish reason.
    pub(crate) async fn collect(&mut self) -> Result<(String, &'static str), ApiError> {
        let mut text = String::new();
        loop {
            match self.tokens().await {
                Some((t, _, last, _)) => {
                    text.push_str(&t);
                    if last {
                        return Ok((text, self.finish_reason()));
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
