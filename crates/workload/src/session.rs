//! What one user sends: a session of one or more turns.
//!
//! A plain request is a one-turn session. Multi-turn sessions resend the conversation so far with
//! each new user message; the conversation includes the server's actual replies, so the driver
//! (HTTP runner or simulator) composes each turn's prompt as it goes, with [`Conversation`].

use serde::{Deserialize, Serialize};

/// One chat message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
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
    pub turns: Vec<TurnSpec>,
    /// Prefix-block identities of the first turn's prompt (Mooncake `hash_ids`, or derived from
    /// the prefix group): equal leading ids mean an identical prompt prefix.
    pub prefix_blocks: Vec<u64>,
    /// Tokens per prefix block.
    pub prefix_block_tokens: u32,
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
            }],
            ..Default::default()
        }
    }
}

/// A session's conversation so far, as the driver sees it.
#[derive(Clone, Debug, Default)]
pub struct Conversation {
    pub messages: Vec<Message>,
    /// Tokens of everything in `messages` (our tokenizer's count, summed per message).
    pub tokens: u64,
    system_tokens: u64,
    system_messages: usize,
}

impl Conversation {
    pub fn start(s: &SessionSpec) -> Self {
        let mut c = Conversation::default();
        if let Some(sys) = &s.system {
            c.messages.push(Message { role: "system".into(), content: sys.clone() });
            c.tokens += s.system_tokens as u64;
            c.system_tokens = s.system_tokens as u64;
            c.system_messages = 1;
        }
        c
    }

    /// Adds the next user message (or, for a turn that carries a whole history, replaces the
    /// conversation after the system prompt with it).
    pub fn push_user(&mut self, t: &TurnSpec) {
        match &t.history {
            Some(h) => {
                self.messages.truncate(self.system_messages);
                self.messages.extend(h.iter().cloned());
                self.tokens = self.system_tokens + t.user_tokens as u64;
            }
            None => {
                self.messages.push(Message { role: "user".into(), content: t.user.clone() });
                self.tokens += t.user_tokens as u64;
            }
        }
    }

    /// Adds the reply the server actually gave.
    pub fn push_reply(&mut self, text: String, tokens: u64) {
        self.messages.push(Message { role: "assistant".into(), content: text });
        self.tokens += tokens;
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
