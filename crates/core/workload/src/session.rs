//! What one user sends: a session of one or more turns.
//!
//! A plain request is a one-turn session. Multi-turn sessions resend the conversation so far with
//! each new user message; the conversation includes the server's actual replies, so the load
//! state machine composes each turn's prompt as it goes, with [`Conversation`].
//!
//! Every prompt is also described by its **segments**: runs of tokens with a content identity
//! (a shared system prompt, a user message, a reply, a Mooncake block). Two prompts that start
//! with the same segments start with the same tokens, which is what a prefix cache can reuse;
//! the engine model hashes its KV blocks from them.

use serde::{Deserialize, Serialize};

use crate::seed;

/// One chat message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// A run of `tokens` prompt tokens whose content is identified by `id`: equal ids, equal text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Segment {
    pub id: u64,
    pub tokens: u32,
}

/// One turn: a new user message and how many tokens to ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnSpec {
    /// The new user message (or the whole prompt for a one-turn completion).
    pub user: String,
    /// Its length in tokens by the run's tokenizer.
    pub user_tokens: u32,
    /// `max_tokens` for this turn.
    pub output_tokens: u32,
    /// Pause after the previous turn ended before sending this one (0 for the first turn).
    pub think_s: f64,
    /// A whole chat history to send as is (a dataset line with `messages`), instead of `user`.
    pub history: Option<Vec<Message>>,
    /// Content identity of the user message (or history): one segment, or Mooncake's blocks.
    pub segments: Vec<Segment>,
}

/// One user's session.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SessionSpec {
    pub id: u64,
    /// The time the dataset gives for this arrival (trace replay), in seconds.
    pub trace_time_s: Option<f64>,
    /// A system prompt shared by a prefix group (sent as a `system` message for chat).
    pub system: Option<String>,
    pub system_tokens: u32,
    /// Content identity of the system prompt (its prefix group).
    pub system_segment: Option<Segment>,
    pub turns: Vec<TurnSpec>,
    /// Part of a multi-turn workload: records carry the session id and turn index (even when this
    /// session happens to have a single turn).
    pub multi_turn: bool,
}

impl SessionSpec {
    pub fn single(id: u64, prompt: String, prompt_tokens: u32, output_tokens: u32) -> Self {
        SessionSpec {
            id,
            turns: vec![TurnSpec {
                user: prompt,
                user_tokens: prompt_tokens,
                output_tokens,
                think_s: 0.0,
                history: None,
                segments: vec![Segment { id: seed::mix(&[id, 0, 1]), tokens: prompt_tokens }],
            }],
            ..Default::default()
        }
    }
}

/// A session's conversation so far, as the driver sees it.
#[derive(Clone, Debug, Default)]
pub struct Conversation {
    /// The messages (empty in counts-only mode: the simulator needs no text).
    pub messages: Vec<Message>,
    /// Tokens of everything in the conversation (our tokenizer's count, summed per message).
    pub tokens: u64,
    /// The conversation's content, in order (see the module documentation).
    pub segments: Vec<Segment>,
    text: bool,
    session: u64,
    system_tokens: u64,
    system_messages: usize,
    system_segments: usize,
}

impl Conversation {
    /// A conversation that keeps its messages' text when `text` is true.
    pub fn start(s: &SessionSpec, text: bool) -> Self {
        let mut c = Conversation { text, session: s.id, ..Default::default() };
        if let Some(sys) = &s.system {
            if text {
                c.messages.push(Message { role: "system".into(), content: sys.clone() });
            }
            c.system_messages = usize::from(text);
        }
        if s.system.is_some() || s.system_tokens > 0 {
            c.tokens += s.system_tokens as u64;
            c.system_tokens = s.system_tokens as u64;
            if let Some(seg) = s.system_segment {
                c.segments.push(seg);
            }
            c.system_segments = c.segments.len();
        }
        c
    }

    /// Adds the next user message (or, for a turn that carries a whole history, replaces the
    /// conversation after the system prompt with it).
    pub fn push_user(&mut self, t: &TurnSpec) {
        match &t.history {
            Some(h) => {
                self.messages.truncate(self.system_messages);
                if self.text {
                    self.messages.extend(h.iter().cloned());
                }
                self.segments.truncate(self.system_segments);
                self.tokens = self.system_tokens + t.user_tokens as u64;
            }
            None => {
                if self.text {
                    self.messages.push(Message { role: "user".into(), content: t.user.clone() });
                }
                self.tokens += t.user_tokens as u64;
            }
        }
        self.segments.extend(t.segments.iter().copied());
    }

    /// Adds the reply the server actually gave to turn `turn` (`text` is ignored in counts-only
    /// mode).
    pub fn push_reply(&mut self, turn: u32, text: String, tokens: u64) {
        if self.text {
            self.messages.push(Message { role: "assistant".into(), content: text });
        }
        self.tokens += tokens;
        if tokens > 0 {
            let id = Self::reply_segment(self.session, turn);
            self.segments.push(Segment { id, tokens: tokens.min(u32::MAX as u64) as u32 });
        }
    }

    /// The content id of session `session`'s reply to turn `turn`.
    pub fn reply_segment(session: u64, turn: u32) -> u64 {
        seed::mix(&[session, turn as u64, 2])
    }

    /// The conversation as one text, for the completions API: messages concatenated in order.
    /// Word-level tokens never merge across the joins (every synthesized word starts with a space),
    /// so the text's token count is the sum of the parts for synthetic prompts.
    pub fn as_text(&self) -> String {
        let mut s = String::new();
        for m in &self.messages {
            s.push_str(&m.content);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: u32, id: u64) -> TurnSpec {
        TurnSpec {
            user: format!("u{id}"),
            user_tokens: n,
            output_tokens: 5,
            think_s: 0.0,
            history: None,
            segments: vec![Segment { id, tokens: n }],
        }
    }

    #[test]
    fn turns_repeat_the_conversation_and_its_segments() {
        let s = SessionSpec {
            id: 7,
            system: Some("sys".into()),
            system_tokens: 10,
            system_segment: Some(Segment { id: 99, tokens: 10 }),
            ..Default::default()
        };
        for text in [true, false] {
            let mut c = Conversation::start(&s, text);
            c.push_user(&turn(20, 1));
            assert_eq!(c.tokens, 30);
            c.push_reply(0, "reply".into(), 5);
            c.push_user(&turn(3, 2));
            assert_eq!(c.tokens, 38);
            let ids: Vec<u64> = c.segments.iter().map(|g| g.id).collect();
            assert_eq!(ids.len(), 4);
            assert_eq!((ids[0], ids[1], ids[3]), (99, 1, 2));
            assert_eq!(c.segments.iter().map(|g| g.tokens as u64).sum::<u64>(), c.tokens);
            assert_eq!(c.messages.len(), if text { 4 } else { 0 });
        }
    }
}
