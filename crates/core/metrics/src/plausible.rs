//! What a server may plausibly say about a request: which of its token counts are believed, and
//! how much a stream may carry before it is stopped as a runaway. Definitions:
//! `docs/metrics.md`, "Server counts that are not believed" and "Runaway streams".
//!
//! - A content event carries non-empty text, and text comes from at least one token: a
//!   `completion_tokens` below the number of content events is impossible.
//! - A tokenizer yields at most one token per byte of text (byte-level BPE and byte fallback
//!   both), and a chat template adds far fewer than [`TEMPLATE_MARGIN`] tokens: a
//!   `prompt_tokens` above the request body's bytes plus that margin is implausible.
//! - A stream that has carried more than [`runaway_limit`] content events for the `max_tokens`
//!   it asked for ignores that limit and is stopped (`runaway_stream`).

use serde::{Deserialize, Serialize};

/// Tokens a chat template (and a server's default system prompt) may add beyond the bytes sent.
pub const TEMPLATE_MARGIN: u64 = 1024;

/// Content events a stream may carry per token it asked for, and on top, before it is a runaway.
pub const RUNAWAY_FACTOR: u64 = 4;
pub const RUNAWAY_MARGIN: u64 = 64;
/// Content events a stream may carry when the request set no `max_tokens`.
pub const RUNAWAY_UNBOUNDED: u64 = 262_144;
/// Bytes of text a stream may carry per content event it is allowed, and at least in all (one
/// event may be large: up to `--max-event-size`): the text kept for counting is bounded with the
/// events ([`runaway_bytes`]).
pub const RUNAWAY_BYTES_PER_EVENT: u64 = 256;
pub const RUNAWAY_MIN_BYTES: u64 = 64 << 20;

/// The most bytes of text a stream of at most `events` content events may carry:
/// `max(256 · events, 64 MiB)`.
pub fn runaway_bytes(events: u64) -> u64 {
    events.saturating_mul(RUNAWAY_BYTES_PER_EVENT).max(RUNAWAY_MIN_BYTES)
}

/// The most content events a stream asking for `max_tokens` may carry:
/// `4 · max_tokens + 64`, or [`RUNAWAY_UNBOUNDED`] without a limit.
pub fn runaway_limit(max_tokens: Option<u64>) -> u64 {
    max_tokens.map_or(RUNAWAY_UNBOUNDED, |m| m.saturating_mul(RUNAWAY_FACTOR).saturating_add(RUNAWAY_MARGIN))
}

/// A count in the server's `usage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageField {
    PromptTokens,
    CompletionTokens,
}

impl UsageField {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageField::PromptTokens => "prompt_tokens",
            UsageField::CompletionTokens => "completion_tokens",
        }
    }
}

/// The rule a server's count broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CountRule {
    /// Fewer completion tokens than content events (the bound is the events).
    FewerThanEvents,
    /// More prompt tokens than the request's bytes plus [`TEMPLATE_MARGIN`] (the bound).
    MoreThanBytesSent,
}

/// A server's count that was not believed: its figure, the rule it broke, and the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistrustedCount {
    pub field: UsageField,
    /// What the server said.
    pub server: u64,
    pub rule: CountRule,
    /// The content events (fewer than which is impossible), or the most tokens the bytes sent
    /// allow.
    pub bound: u64,
}

impl DistrustedCount {
    /// The count, the rule and why, in words.
    pub fn describe(&self) -> String {
        match self.rule {
            CountRule::FewerThanEvents => format!(
                "{} {} for a stream of {} content events (fewer tokens than content events is impossible)",
                self.field.as_str(),
                self.server,
                self.bound
            ),
            CountRule::MoreThanBytesSent => format!(
                "{} {} for a request of {} bytes (more than one token per byte sent plus {TEMPLATE_MARGIN} for a \
                 chat template is implausible)",
                self.field.as_str(),
                self.server,
                self.bound - TEMPLATE_MARGIN
            ),
        }
    }
}

/// The server's counts that are not believed, given what was streamed and sent.
pub fn judge_usage(
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    content_events: u64,
    bytes_sent: u64,
) -> Vec<DistrustedCount> {
    let mut out = Vec::new();
    if let Some(c) = completion_tokens.filter(|&c| c < content_events) {
        out.push(DistrustedCount {
            field: UsageField::CompletionTokens,
            server: c,
            rule: CountRule::FewerThanEvents,
            bound: content_events,
        });
    }
    let most = bytes_sent.saturating_add(TEMPLATE_MARGIN);
    if let Some(p) = prompt_tokens.filter(|&p| bytes_sent > 0 && p > most) {
        out.push(DistrustedCount {
            field: UsageField::PromptTokens,
            server: p,
            rule: CountRule::MoreThanBytesSent,
            bound: most,
        });
    }
    out
}

/// A run's distrusted counts of one field and rule: how many requests, and the first one seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistrustTally {
    pub requests: u64,
    pub first: DistrustedCount,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runaway_limits_by_hand() {
        assert_eq!(runaway_limit(Some(16)), 128); // 4 · 16 + 64
        assert_eq!(runaway_limit(Some(0)), 64);
        assert_eq!(runaway_limit(None), RUNAWAY_UNBOUNDED);
        assert_eq!(runaway_limit(Some(u64::MAX)), u64::MAX);
        assert_eq!(runaway_bytes(128), 64 << 20);
        assert_eq!(runaway_bytes(1 << 20), 256 << 20);
    }

    #[test]
    fn the_issues_server_is_not_believed() {
        // usage says 3 completion tokens for 16 content events, 999,999 prompt tokens for 212 bytes
        let d = judge_usage(Some(999_999), Some(3), 16, 212);
        assert_eq!(
            d,
            vec![
                DistrustedCount {
                    field: UsageField::CompletionTokens,
                    server: 3,
                    rule: CountRule::FewerThanEvents,
                    bound: 16
                },
                DistrustedCount {
                    field: UsageField::PromptTokens,
                    server: 999_999,
                    rule: CountRule::MoreThanBytesSent,
                    bound: 1236
                },
            ]
        );
        assert_eq!(
            d[0].describe(),
            "completion_tokens 3 for a stream of 16 content events (fewer tokens than content events is impossible)"
        );
        assert!(d[1].describe().starts_with("prompt_tokens 999999 for a request of 212 bytes"), "{}", d[1].describe());
    }

    #[test]
    fn honest_counts_are_believed() {
        // as many tokens as events, more (several per event), a template's tokens on a short prompt
        assert!(judge_usage(Some(30), Some(16), 16, 212).is_empty());
        assert!(judge_usage(Some(1236), Some(40), 16, 212).is_empty());
        // no usage at all, or nothing sent that we know of
        assert!(judge_usage(None, None, 16, 212).is_empty());
        assert!(judge_usage(Some(5000), None, 0, 0).is_empty());
    }
}
