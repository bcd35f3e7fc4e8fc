//! A reasoning model's stream: which content events are thinking and which are the answer.
//!
//! Servers with a reasoning parser (vLLM, SGLang, DeepSeek's API) stream the thinking as
//! `delta.reasoning_content` or `delta.reasoning` and the answer as `delta.content`; a server
//! without one streams both as content, the thinking between `<think>` and `</think>`
//! (`--reasoning-parser think-tags`). Definitions: `docs/metrics.md`, "Reasoning models".

pub use goodput_wire::ReasoningParser;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Where a think-tags stream is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Tags {
    /// Nothing but whitespace (or the start of `<think>`) yet.
    #[default]
    Start,
    /// Inside `<think>`: content is reasoning.
    Inside,
    /// After `</think>`, or the stream never opened one: content is the answer.
    After,
}

/// The `<think>…</think>` state of one stream's content, fed event by event.
#[derive(Clone, Debug, Default)]
pub struct ThinkTags {
    state: Tags,
    /// The tail of the content seen in the current state that may be the start of a tag split
    /// across events.
    carry: String,
}

impl ThinkTags {
    /// Feeds one event's content; returns how many of its leading bytes are reasoning (the tags
    /// included), the rest being the answer, or `None` while the stream has shown only
    /// whitespace or the first bytes of `<think>` (undecided: neither phase).
    pub fn feed(&mut self, content: &str) -> Option<usize> {
        let mut at = 0;
        loop {
            match self.state {
                Tags::After => return Some(at),
                Tags::Start => {
                    let rest = &content[at..];
                    let seen = format!("{}{rest}", self.carry);
                    let trimmed = seen.trim_start();
                    if let Some(after) = trimmed.strip_prefix(OPEN) {
                        // the tag ends `after.len()` bytes before the end of `rest`
                        at = content.len() - after.len().min(rest.len());
                        self.carry.clear();
                        self.state = Tags::Inside;
                    } else if OPEN.starts_with(trimmed) {
                        // whitespace, or the tag's first bytes: wait for more
                        self.carry = seen;
                        return None;
                    } else {
                        // content that does not open a thought: no reasoning in this stream
                        self.carry.clear();
                        self.state = Tags::After;
                        return Some(at);
                    }
                }
                Tags::Inside => {
                    let rest = &content[at..];
                    let seen = format!("{}{rest}", self.carry);
                    match seen.find(CLOSE) {
                        Some(i) => {
                            let end_in_seen = i + CLOSE.len();
                            let end_in_rest = end_in_seen.saturating_sub(self.carry.len());
                            self.carry.clear();
                            self.state = Tags::After;
                            return Some(at + end_in_rest);
                        }
                        None => {
                            // keep what may be the start of a split `</think>`
                            let keep = (1..CLOSE.len())
                                .rev()
                                .find(|&k| {
                                    seen.len() >= k
                                        && seen.is_char_boundary(seen.len() - k)
                                        && CLOSE.starts_with(&seen[seen.len() - k..])
                                })
                                .unwrap_or(0);
                            self.carry = seen[seen.len() - keep..].to_string();
                            return Some(content.len());
                        }
                    }
                }
            }
        }
    }

    /// A `<think>` was opened and never closed (so far).
    pub fn unclosed(&self) -> bool {
        self.state == Tags::Inside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds the events; returns each one's reasoning bytes.
    fn feed(events: &[&str]) -> (Vec<Option<usize>>, ThinkTags) {
        let mut t = ThinkTags::default();
        let r = events.iter().map(|e| t.feed(e)).collect();
        (r, t)
    }

    #[test]
    fn tags_whole_in_events() {
        let (r, t) = feed(&["<think>", "Let me", " think.", "</think>", "\n\nThe answer", " is 4."]);
        assert_eq!(r, [7, 6, 7, 8, 0, 0].map(Some));
        assert!(!t.unclosed());
        // the closing tag and the answer in one event
        let (r, _) = feed(&["<think>hm", "</think>\n\nYes"]);
        assert_eq!(r, [9, 8].map(Some));
    }

    #[test]
    fn tags_split_across_events() {
        let (r, t) = feed(&["\n<th", "ink>a", "b</th", "ink>ans"]);
        // "\n<th" waits for more (undecided); "ink>" ends the tag, "a" is reasoning; "b</th" may
        // end it; "ink>" does, and "ans" is the answer
        assert_eq!(r, vec![None, Some(5), Some(5), Some(4)]);
        assert!(!t.unclosed());
    }

    #[test]
    fn no_think_tag_is_all_answer() {
        let (r, _) = feed(&["Hello", " <think>not a thought</think>"]);
        assert_eq!(r, [0, 0].map(Some));
        let (r, _) = feed(&["<thing>"]);
        assert_eq!(r, vec![Some(0)]);
        // leading whitespace is undecided until the answer shows
        let (r, _) = feed(&["\n", "Hi"]);
        assert_eq!(r, vec![None, Some(0)]);
    }

    #[test]
    fn a_thought_never_closed() {
        let (r, t) = feed(&["<think>", "still", " going"]);
        assert_eq!(r, [7, 5, 6].map(Some));
        assert!(t.unclosed());
    }
}
