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
    /// `max_tokens` for this turn's answer.
    pub output_tokens: u32,
    /// Tokens a reasoning model thinks before the answer (the engine model generates them first;
    /// 0: no reasoning). Part of the turn's `max_tokens` as a server counts it.
    pub reasoning_tokens: u32,
    /// Pause after the previous turn ended before sending this one (0 for the first turn).
    pub think_s: f64,
    /// A whole chat history to send as is (a dataset line with `messages`), instead of `user`.
    pub history: Option<Vec<Message>>,
    /// Content identity of the user message (or history): one segment, or Mooncake's blocks.
    pub segments: Vec<Segment>,
    /// The message is the call's whole context (an agentic trace's calls carry theirs): it
    /// replaces the conversation after the system prompt instead of extending it.
    pub context: bool,
    /// Sub-agents started when this turn's reply arrives, each a session of its own that begins
    /// with this conversation so far; the next turn waits until every one has ended.
    pub forks: Vec<SessionSpec>,
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
    /// A sub-agent of session `id`: its number within the session (1-based); `None` for the
    /// session's own agent.
    pub agent: Option<u32>,
}

impl SessionSpec {
    /// Requests the session sends: its turns and its sub-agents'.
    pub fn requests(&self) -> u64 {
        self.turns.iter().map(|t| 1 + t.forks.iter().map(SessionSpec::requests).sum::<u64>()).sum()
    }

    /// Cuts the session to at most `n` requests, in the order a run meets them: a turn, then the
    /// sub-agents it starts (cut in turn), then the next turn.
    pub fn truncate_requests(&mut self, mut n: u64) {
        let mut keep = 0;
        for t in &mut self.turns {
            if n == 0 {
                break;
            }
            n -= 1;
            keep += 1;
            let mut forks = 0;
            for f in &mut t.forks {
                if n == 0 {
                    break;
                }
                f.truncate_requests(n);
                n -= f.requests();
                forks += 1;
            }
            t.forks.truncate(forks);
        }
        self.turns.truncate(keep);
    }
}

impl SessionSpec {
    pub fn single(id: u64, prompt: String, prompt_tokens: u32, output_tokens: u32) -> Self {
        SessionSpec {
            id,
            turns: vec![TurnSpec {
                user: prompt,
                user_tokens: prompt_tokens,
                output_tokens,
                reasoning_tokens: 0,
                think_s: 0.0,
                history: None,
                segments: vec![Segment { id: seed::mix(&[id, 0, 1]), tokens: prompt_tokens }],
                context: false,
                forks: Vec::new(),
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

    /// A sub-agent's conversation: this one so far, as the sub-agent's own (its replies get
    /// content ids of their own: `key` names the sub-agent).
    pub fn fork(&self, key: u64) -> Self {
        Conversation { session: key, ..self.clone() }
    }

    /// Adds the next user message (or, for a turn that carries a whole history or its whole
    /// context, replaces the conversation after the system prompt with it).
    pub fn push_user(&mut self, t: &TurnSpec) {
        if t.context {
            self.messages.truncate(self.system_messages);
            if self.text {
                self.messages.push(Message { role: "user".into(), content: t.user.clone() });
            }
            self.segments.truncate(self.system_segments);
            self.segments.extend(t.segments.iter().copied());
            self.tokens = self.system_tokens + t.user_tokens as u64;
            return;
        }
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
            reasoning_tokens: 0,
            think_s: 0.0,
            history: None,
            segments: vec![Segment { id, tokens: n }],
            context: false,
            forks: Vec::new(),
        }
    }

    #[test]
    fn a_session_with_sub_agents_counts_and_cuts_its_requests() {
        let child = |turns: usize| SessionSpec {
            id: 1,
            agent: Some(1),
            turns: (0..turns).map(|k| turn(4, 50 + k as u64)).collect(),
            ..Default::default()
        };
        let mut root = SessionSpec { id: 1, turns: (0..3).map(|k| turn(4, k)).collect(), ..Default::default() };
        root.turns[0].forks = vec![child(2), child(3)];
        assert_eq!(root.requests(), 3 + 5);
        let mut cut = root.clone();
        cut.truncate_requests(4); // turn 0, the first child's 2, one of the second's
        assert_eq!((cut.turns.len(), cut.requests()), (1, 4));
        assert_eq!(cut.turns[0].forks[1].turns.len(), 1);
        let mut cut = root.clone();
        cut.truncate_requests(7);
        assert_eq!((cut.turns.len(), cut.requests()), (2, 7));
    }

    #[test]
    fn a_whole_context_replaces_the_conversation() {
        let s = SessionSpec { id: 3, ..Default::default() };
        let mut c = Conversation::start(&s, true);
        c.push_user(&turn(20, 1));
        c.push_reply(0, "r".into(), 5);
        let mut whole = turn(40, 2);
        whole.context = true;
        c.push_user(&whole);
        assert_eq!((c.tokens, c.messages.len(), c.segments.len()), (40, 1, 1));
        // a fork keeps the conversation, its replies get ids of their own
        let f = c.fork(99);
        assert_eq!(f.tokens, 40);
        assert_ne!(Conversation::reply_segment(99, 0), Conversation::reply_segment(3, 0));
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
