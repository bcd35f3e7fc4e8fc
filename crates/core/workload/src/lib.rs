//! goodput's workload core: what to send and when.
//!
//! A [`Workload`] turns a [`WorkloadSpec`] (synthetic lengths or a real dataset, shared prefixes,
//! multi-turn sessions, think times) into a deterministic stream of [`SessionSpec`]s; an
//! [`arrivals::ArrivalClock`] says when each starts and [`Load`] how load is offered. Both drivers
//! (the HTTP runner and the virtual-time simulator) consume the same stream, so `bench` and `sim`
//! see the same requests for the same seed.
//!
//! Pure and synchronous; the only I/O is reading dataset files up front ([`datasets`]), with
//! errors naming the file, line and field.

pub mod agentic;
pub mod arrivals;
pub mod datasets;
pub mod error;
pub mod lengths;
pub mod load;
pub mod machine;
pub mod rate;
pub mod seed;
pub mod session;
pub mod shard;
pub mod think;

use std::sync::Arc;

use goodput_tokenizer::Tokenizer;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize, Serializer};

pub use arrivals::{ArrivalClock, Arrivals};
pub use datasets::{Dataset, DatasetKind, Prompt};
pub use error::WorkloadError;
pub use lengths::{LengthDist, MAX_LENGTH};
pub use load::{Load, Profile};
pub use machine::{Bounds, Finished, LoadMachine, Next, Request, Sending, SessionSource};
pub use rate::{MIN_RATE, Rate};
pub use session::{Conversation, Message, Segment, SessionSpec, TurnSpec};
pub use shard::{Shard, ShardError};
pub use think::ThinkTime;

/// Where prompts and lengths come from.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Source {
    /// Random single-token words to an exact length.
    #[default]
    Synthetic,
    Dataset(Arc<Dataset>),
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Source::Synthetic => {
                use serde::ser::SerializeStruct;
                let mut st = s.serialize_struct("Source", 1)?;
                st.serialize_field("kind", "synthetic")?;
                st.end()
            }
            Source::Dataset(d) => d.serialize(s),
        }
    }
}

/// What a workload's source was, as data (a result file records this, not the dataset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    /// `synthetic`, or the dataset's format.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Usable entries, and entries left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<usize>,
}

impl Source {
    pub fn info(&self) -> SourceInfo {
        match self {
            Source::Synthetic => SourceInfo { kind: "synthetic".into(), path: None, entries: None, skipped: None },
            Source::Dataset(d) => SourceInfo {
                kind: serde_json::to_value(d.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                path: Some(d.path.clone()),
                entries: Some(d.entries.len()),
                skipped: Some(d.skipped.len()),
            },
        }
    }
}

/// How many turns a session has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Turns {
    /// One request per session (ShareGPT: the first human turn).
    #[default]
    One,
    /// Up to N turns (synthetic: exactly N).
    Up(u32),
    /// Whole conversations (ShareGPT).
    All,
}

impl Serialize for Turns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Turns::One => s.serialize_u32(1),
            Turns::Up(n) => s.serialize_u32(*n),
            Turns::All => s.serialize_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for Turns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u32),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(0 | 1) => Ok(Turns::One),
            Raw::N(n) => Ok(Turns::Up(n)),
            Raw::S(s) if s == "all" => Ok(Turns::All),
            Raw::S(s) => Err(serde::de::Error::custom(format!("turns: expected a number or \"all\", got {s:?}"))),
        }
    }
}

/// Synthetic agents (`--agentic`): sessions of calls, each resending the whole context so far
/// plus a tool result, after a tool's latency; optionally sub-agents forked from one call, which
/// share its context as their prefix, run in parallel and return their answers to the parent as
/// its next tool result. Definitions: `docs/workloads.md`, "Agents".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgenticSpec {
    /// Calls per session (the first one sends the task: `input_tokens`).
    pub calls: LengthDist,
    /// The tool's latency before each call after the first, seconds.
    pub tool_time: ThinkTime,
    /// The tool result each call after the first adds, tokens.
    pub tool_output_tokens: LengthDist,
    /// Sub-agents forked together (0: none).
    pub fan_out: u32,
    /// The call (1-based) whose reply forks them; the next call takes their answers.
    pub fan_out_at: u32,
    /// Calls per sub-agent (its first sends its task: `tool_output_tokens`).
    pub sub_agent_calls: LengthDist,
}

impl Default for AgenticSpec {
    fn default() -> Self {
        AgenticSpec {
            calls: LengthDist::Fixed(8),
            tool_time: ThinkTime::Exponential { mean: 1.0 },
            tool_output_tokens: LengthDist::Fixed(512),
            fan_out: 0,
            fan_out_at: 1,
            sub_agent_calls: LengthDist::Fixed(4),
        }
    }
}

/// Everything that decides the requests (not their timing). `S` is the source: the loaded
/// [`Source`] at run time, its [`SourceInfo`] in a result file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec<S = Source> {
    pub source: S,
    /// Synthetic prompt lengths (and dataset entries without one).
    pub input_tokens: LengthDist,
    /// `max_tokens` when the dataset does not give an output length.
    pub output_tokens: LengthDist,
    /// Tokens the engine model reasons before each answer (`--reasoning-tokens`; a dataset's
    /// own `reasoning_tokens` first). `None`: no reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<LengthDist>,
    /// Number of shared-prefix groups (0: none) and the shared system prompt length in tokens.
    pub prefix_groups: u32,
    pub prefix_tokens: u32,
    pub turns: Turns,
    /// Synthetic agents (`--agentic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agentic: Option<AgenticSpec>,
    /// Pause between a session's turns.
    pub think_time: ThinkTime,
    /// Start over when a dataset runs out (off for trace replay).
    pub cycle: bool,
    pub seed: u64,
}

impl WorkloadSpec {
    /// The same spec with its source described as data.
    pub fn info(&self) -> WorkloadSpec<SourceInfo> {
        WorkloadSpec {
            source: self.source.info(),
            input_tokens: self.input_tokens.clone(),
            output_tokens: self.output_tokens.clone(),
            reasoning_tokens: self.reasoning_tokens.clone(),
            prefix_groups: self.prefix_groups,
            prefix_tokens: self.prefix_tokens,
            turns: self.turns,
            agentic: self.agentic.clone(),
            think_time: self.think_time.clone(),
            cycle: self.cycle,
            seed: self.seed,
        }
    }
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            source: Source::Synthetic,
            input_tokens: LengthDist::Fixed(512),
            output_tokens: LengthDist::Fixed(128),
            reasoning_tokens: None,
            prefix_groups: 0,
            prefix_tokens: 0,
            turns: Turns::One,
            agentic: None,
            think_time: ThinkTime::default(),
            cycle: true,
            seed: 0,
        }
    }
}

use seed::{AGENT_KEY, BLOCK_KEY, PREFIX_KEY};

/// Token counts of one dataset entry's turns by the run's tokenizer, computed once per entry.
#[derive(Clone, Debug)]
struct EntryCounts {
    /// Per turn: the prompt's tokens and, when the dataset gives a reply, its tokens.
    turns: Vec<(u32, Option<u32>)>,
}

/// The deterministic stream of sessions for one run.
pub struct Workload {
    spec: WorkloadSpec,
    /// Counts dataset text and builds synthetic text (`None`: lengths-only workloads).
    tokenizer: Option<Tokenizer>,
    /// Build prompt text (off for the simulator, which needs only token counts).
    text: bool,
    lengths: seed::Rng,
    text_rng: seed::Rng,
    think_rng: seed::Rng,
    reasoning_rng: seed::Rng,
    next_id: u64,
    prefixes: Vec<(String, u32)>,
    /// Dataset entries in the order they are used, and the position.
    order: Vec<usize>,
    pos: usize,
    /// Counts of dataset entries already used (a cycled entry is not counted again).
    counts: Vec<Option<EntryCounts>>,
    /// Each prefix block's text, made once (an agentic trace resends its context's blocks with
    /// every call: nothing is built or counted again).
    block_text: HashMap<u64, std::sync::Arc<str>>,
}

use std::collections::HashMap;

impl Workload {
    /// A workload with prompt text built by `tokenizer`.
    pub fn new(spec: WorkloadSpec, tokenizer: Tokenizer) -> Result<Self, WorkloadError> {
        Self::build(spec, Some(tokenizer), true)
    }

    /// The same requests (same lengths, arrivals and sessions for the same seed) without building
    /// text: what the simulator needs. A dataset with text still needs the tokenizer, to count.
    pub fn counts(spec: WorkloadSpec, tokenizer: Option<Tokenizer>) -> Result<Self, WorkloadError> {
        Self::build(spec, tokenizer, false)
    }

    /// Lengths only, no tokenizer (synthetic and length-only traces).
    pub fn counts_only(spec: WorkloadSpec) -> Result<Self, WorkloadError> {
        Self::build(spec, None, false)
    }

    fn build(spec: WorkloadSpec, tokenizer: Option<Tokenizer>, text: bool) -> Result<Self, WorkloadError> {
        let mut order = Vec::new();
        if let Source::Dataset(d) = &spec.source {
            if tokenizer.is_none() && (d.has_text() || d.kind == DatasetKind::ShareGpt) {
                return Err(WorkloadError::Invalid(format!("dataset {d} has text: counting it needs a tokenizer")));
            }
            let sessions = matches!(d.kind, DatasetKind::ShareGpt | DatasetKind::Weka | DatasetKind::Bailian);
            if !matches!(spec.turns, Turns::One) && !sessions {
                return Err(WorkloadError::Invalid(format!(
                    "multi-turn sessions come from sharegpt, weka and bailian datasets or synthetic prompts, not {}",
                    d.kind.name()
                )));
            }
            order = (0..d.entries.len()).collect();
            if d.kind == DatasetKind::ShareGpt {
                order.shuffle(&mut seed::rng(spec.seed, seed::Stream::Sessions));
            }
        }
        if text && tokenizer.is_none() {
            return Err(WorkloadError::Invalid("building prompt text needs a tokenizer".into()));
        }
        let mut prefixes = Vec::new();
        for g in 0..spec.prefix_groups {
            let mut r = seed::rng_for(spec.seed, PREFIX_KEY | g as u64);
            prefixes.push(match (&tokenizer, text) {
                (Some(tk), true) => {
                    let (t, n) = tk.synthesize(spec.prefix_tokens as usize, &mut r);
                    (t, n as u32)
                }
                _ => (String::new(), spec.prefix_tokens),
            });
        }
        Ok(Workload {
            lengths: seed::rng(spec.seed, seed::Stream::Lengths),
            text_rng: seed::rng(spec.seed, seed::Stream::Text),
            think_rng: seed::rng(spec.seed, seed::Stream::Think),
            reasoning_rng: seed::rng(spec.seed, seed::Stream::Reasoning),
            counts: vec![None; order.len()],
            spec,
            tokenizer,
            text,
            next_id: 0,
            prefixes,
            order,
            pos: 0,
            block_text: HashMap::new(),
        })
    }

    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.tokenizer.as_ref()
    }

    /// How many distinct prompts the workload draws from: every synthetic prompt is new; a
    /// dataset offers its entries (cycled when the run asks for more).
    pub fn distinct_prompts(&self) -> Option<usize> {
        match &self.spec.source {
            Source::Synthetic => None,
            Source::Dataset(d) => Some(d.entries.len()),
        }
    }

    fn count(&self, text: &str) -> u32 {
        self.tokenizer.as_ref().map_or(0, |t| t.count(text) as u32)
    }

    /// A synthetic text of `n` tokens (empty in counts-only mode).
    fn synth(&mut self, n: u32) -> (String, u32) {
        match (&self.tokenizer, self.text) {
            (Some(tk), true) => {
                let (t, c) = tk.synthesize(n as usize, &mut self.text_rng);
                (t, c as u32)
            }
            _ => (String::new(), n),
        }
    }

    /// The next session, or `None` when a dataset is exhausted (and not cycling).
    pub fn next_session(&mut self) -> Option<SessionSpec> {
        let id = self.next_id;
        let mut s = match self.spec.source.clone() {
            Source::Synthetic => self.synthetic(id),
            Source::Dataset(d) => {
                if self.pos >= self.order.len() {
                    if !self.spec.cycle {
                        return None;
                    }
                    self.pos = 0;
                }
                let index = self.order[self.pos];
                self.pos += 1;
                self.session_from(id, &d, index)
            }
        };
        self.next_id += 1;
        s.multi_turn = self.spec.turns != Turns::One;
        if !self.prefixes.is_empty() {
            let g = (id % self.prefixes.len() as u64) as usize;
            let (text, n) = &self.prefixes[g];
            s.system = Some(text.clone());
            s.system_tokens = *n;
            s.system_segment = Some(Segment { id: PREFIX_KEY | g as u64, tokens: *n });
        }
        Some(s)
    }

    /// A turn's reasoning: the dataset's, else a draw from `--reasoning-tokens` (its own stream:
    /// other draws do not move), else none.
    fn reasoning(&mut self, given: Option<u32>) -> u32 {
        let drawn = self.spec.reasoning_tokens.as_ref().map(|d| d.sample(&mut self.reasoning_rng));
        given.or(drawn).unwrap_or(0)
    }

    fn think(&mut self, turn: usize) -> f64 {
        if turn == 0 { 0.0 } else { self.spec.think_time.sample(&mut self.think_rng) }
    }

    fn synthetic(&mut self, id: u64) -> SessionSpec {
        if let Some(a) = self.spec.agentic.clone() {
            return self.agent_session(id, &a);
        }
        let mut s = SessionSpec { id, ..Default::default() };
        let n = match self.spec.turns {
            Turns::One => 1,
            Turns::Up(n) => n.max(1),
            Turns::All => 1,
        };
        for t in 0..n as usize {
            let n_in = self.spec.input_tokens.sample(&mut self.lengths);
            let n_out = self.spec.output_tokens.sample(&mut self.lengths);
            let think_s = self.think(t);
            let turn = self.synthetic_turn(n_in, n_out, think_s, seed::mix(&[self.spec.seed, id, t as u64, 1]));
            s.turns.push(turn);
        }
        s
    }

    /// One synthetic agent's calls (`agent`: 0 for the session's own, k for its k-th sub-agent),
    /// drawn from the session's own stream: the task (`task` tokens), then tool results after
    /// tool latencies.
    fn agent_calls(
        &mut self,
        id: u64,
        agent: u32,
        calls: u32,
        task: u32,
        a: &AgenticSpec,
        rng: &mut seed::Rng,
    ) -> Vec<TurnSpec> {
        (0..calls.max(1))
            .map(|t| {
                let n_in = if t == 0 { task } else { a.tool_output_tokens.sample(rng) };
                let n_out = self.spec.output_tokens.sample(rng);
                let think_s = if t == 0 { 0.0 } else { a.tool_time.sample(rng) };
                self.synthetic_turn(n_in, n_out, think_s, seed::mix(&[self.spec.seed, id, agent as u64, t as u64, 4]))
            })
            .collect()
    }

    /// A synthetic turn: a new prompt of `n_in` tokens (one segment, content id `segment`), its
    /// reasoning drawn, nothing resent.
    fn synthetic_turn(&mut self, n_in: u32, n_out: u32, think_s: f64, segment: u64) -> TurnSpec {
        let (user, count) = self.synth(n_in);
        let reasoning_tokens = self.reasoning(None);
        TurnSpec {
            user,
            user_tokens: count,
            output_tokens: n_out,
            reasoning_tokens,
            think_s,
            history: None,
            segments: vec![Segment { id: segment, tokens: count }],
            context: false,
            forks: Vec::new(),
        }
    }

    /// A synthetic agentic session: its calls, and the sub-agents one of them forks, whose
    /// answers come back to it as the next call's tool result.
    fn agent_session(&mut self, id: u64, a: &AgenticSpec) -> SessionSpec {
        let mut rng = seed::rng_for(self.spec.seed, AGENT_KEY ^ id);
        let calls = a.calls.sample(&mut rng).max(1);
        let task = self.spec.input_tokens.sample(&mut rng);
        let mut turns = self.agent_calls(id, 0, calls, task, a, &mut rng);
        let at = a.fan_out_at.max(1) as usize;
        if a.fan_out > 0 && at < turns.len() {
            let mut answers = 0u32;
            let forks: Vec<SessionSpec> = (1..=a.fan_out)
                .map(|k| {
                    let n = a.sub_agent_calls.sample(&mut rng).max(1);
                    let sub_task = a.tool_output_tokens.sample(&mut rng);
                    let turns = self.agent_calls(id, k, n, sub_task, a, &mut rng);
                    answers = answers.saturating_add(turns.last().map_or(0, |t| t.output_tokens));
                    SessionSpec { id, agent: Some(k), turns, multi_turn: true, ..Default::default() }
                })
                .collect();
            turns[at - 1].forks = forks;
            // the sub-agents' answers are the next call's tool result, beside its own
            let (text, count) = self.synth(answers);
            let next = &mut turns[at];
            next.user = format!("{text}{}", next.user);
            next.user_tokens += count;
            next.segments.insert(0, Segment { id: seed::mix(&[self.spec.seed, id, at as u64, 5]), tokens: count });
        }
        SessionSpec { id, turns, multi_turn: true, ..Default::default() }
    }

    /// The token counts of entry `index`, computed on its first use.
    fn entry_counts(&mut self, d: &Dataset, index: usize) -> EntryCounts {
        if let Some(c) = &self.counts[index] {
            return c.clone();
        }
        let e = &d.entries[index];
        let turns = e
            .turns
            .iter()
            .map(|t| {
                let prompt = match &t.prompt {
                    Prompt::Text(text) => self.count(text),
                    Prompt::Messages(ms) => ms.iter().map(|m| self.count(&m.content)).sum(),
                    Prompt::Tokens(n) => *n,
                };
                (prompt, t.reply.as_ref().map(|r| self.count(r)))
            })
            .collect();
        let c = EntryCounts { turns };
        self.counts[index] = Some(c.clone());
        c
    }

    fn session_from(&mut self, id: u64, d: &Dataset, index: usize) -> SessionSpec {
        let counts = self.entry_counts(d, index);
        let e = &d.entries[index];
        let keep = match self.spec.turns {
            Turns::One => 1,
            Turns::Up(n) => n.max(1) as usize,
            Turns::All => usize::MAX,
        };
        let mut agents = 0;
        let turns = self.turns_of(id, e, index, &e.turns[..keep.min(e.turns.len())], Some(&counts), 0, &mut agents);
        SessionSpec { id, trace_time_s: e.time_s, turns, ..Default::default() }
    }

    /// The turns of a dataset entry's agent (`agent` 0: the entry's own; `agents` numbers the
    /// sub-agents met so far), with the sub-agents each turn forks.
    #[allow(clippy::too_many_arguments)]
    fn turns_of(
        &mut self,
        id: u64,
        e: &datasets::Entry,
        index: usize,
        turns: &[datasets::EntryTurn],
        counts: Option<&EntryCounts>,
        agent: u32,
        agents: &mut u32,
    ) -> Vec<TurnSpec> {
        let mut out = Vec::with_capacity(turns.len());
        for (t, turn) in turns.iter().enumerate() {
            let (prompt_tokens, reply_tokens) = match (counts, &turn.prompt) {
                (Some(c), _) => c.turns[t],
                (None, Prompt::Tokens(n)) => (*n, None),
                (None, Prompt::Text(x)) => (self.count(x), None),
                (None, Prompt::Messages(ms)) => (ms.iter().map(|m| self.count(&m.content)).sum(), None),
            };
            // draw from the length stream whether or not it is used, so datasets with and without
            // lengths keep the stream aligned
            let sampled_out = self.spec.output_tokens.sample(&mut self.lengths);
            let output_tokens = match (turn.output_tokens, reply_tokens) {
                (Some(n), _) => n,
                (None, Some(r)) => r.max(1),
                (None, None) => sampled_out,
            };
            let drawn = self.think(t);
            let think_s = turn.think_s.unwrap_or(drawn);
            // a dataset text is the same text whenever the entry is used: one content id per
            // entry and turn; a synthesized prompt is new each time
            let entry_segment =
                |tokens| vec![Segment { id: seed::mix(&[0x6461_7461, index as u64, agent as u64, t as u64]), tokens }];
            let (user, user_tokens, history, segments) = match &turn.prompt {
                Prompt::Text(text) => (text.clone(), prompt_tokens, None, entry_segment(prompt_tokens)),
                Prompt::Messages(ms) => (String::new(), prompt_tokens, Some(ms.clone()), entry_segment(prompt_tokens)),
                Prompt::Tokens(n) if !turn.hash_ids.is_empty() => {
                    let key = block_key(e, index, agent);
                    let tail = seed::mix(&[self.spec.seed, id, agent as u64, t as u64, 3]);
                    let segs = blocks(&turn.hash_ids, *n, e.block_tokens, key, tail);
                    (self.blocks_text(&segs), *n, None, segs)
                }
                Prompt::Tokens(n) => {
                    let (text, c) = self.synth(*n);
                    let segments =
                        vec![Segment { id: seed::mix(&[self.spec.seed, id, agent as u64, t as u64, 1]), tokens: c }];
                    (text, c, None, segments)
                }
            };
            let reasoning_tokens = self.reasoning(turn.reasoning_tokens);
            let mut forks = Vec::with_capacity(turn.forks.len());
            for f in &turn.forks {
                *agents += 1;
                let k = *agents;
                let turns = self.turns_of(id, e, index, f, None, k, agents);
                forks.push(SessionSpec { id, agent: Some(k), turns, multi_turn: true, ..Default::default() });
            }
            out.push(TurnSpec {
                user,
                user_tokens,
                output_tokens,
                reasoning_tokens,
                think_s,
                history,
                segments,
                context: turn.context,
                forks,
            });
        }
        out
    }

    /// A block-built prompt's text: each block's words, the same text for the same content id
    /// (seeded by it, made once and kept), so prompts with equal leading blocks share an
    /// identical prefix.
    fn blocks_text(&mut self, segs: &[Segment]) -> String {
        let (Some(tk), true) = (&self.tokenizer, self.text) else { return String::new() };
        let mut out = String::new();
        for g in segs {
            // a block's id and length make its text (a last block is shorter)
            let key = g.id ^ (g.tokens as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            if let Some(t) = self.block_text.get(&key) {
                out.push_str(t);
                continue;
            }
            let mut r = seed::rng_for(self.spec.seed, g.id);
            let t: std::sync::Arc<str> = tk.words_text(g.tokens as usize, &mut r).into();
            out.push_str(&t);
            if self.block_text.len() < BLOCK_TEXT_CACHE {
                self.block_text.insert(key, t);
            }
        }
        out
    }
}

/// Block texts kept at most (about 64 tokens × 6 bytes each for an agentic trace's blocks).
const BLOCK_TEXT_CACHE: usize = 1 << 18;

/// The key a dataset entry's block ids are read under: the file's (Mooncake, global scope), or
/// the entry's and agent's own (an agentic trace's local scope).
fn block_key(e: &datasets::Entry, index: usize, agent: u32) -> Option<u64> {
    e.local_blocks.then(|| seed::mix(&[BLOCK_KEY, index as u64, agent as u64]))
}

/// A block-built prompt's segments: one per hash id of `block` tokens (the last holding what
/// is left), content ids `BLOCK_KEY ^ id` (or mixed with the entry's `key`, for ids local to an
/// entry); tokens past the blocks are one segment of their own (`tail`).
fn blocks(ids: &[u64], tokens: u32, block: u32, key: Option<u64>, tail: u64) -> Vec<Segment> {
    let mut left = tokens;
    let mut out: Vec<Segment> = ids
        .iter()
        .map_while(|&id| {
            let n = left.min(block);
            left -= n;
            let id = match key {
                None => BLOCK_KEY ^ id,
                Some(k) => seed::mix(&[k, id]),
            };
            (n > 0).then_some(Segment { id, tokens: n })
        })
        .collect();
    if left > 0 {
        out.push(Segment { id: tail, tokens: left });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tk() -> Tokenizer {
        Tokenizer::cl100k().unwrap()
    }

    #[test]
    fn synthetic_is_deterministic_and_exact() {
        let tk = tk();
        let spec = WorkloadSpec {
            input_tokens: "uniform:10..50".parse().unwrap(),
            output_tokens: LengthDist::Fixed(7),
            seed: 42,
            ..Default::default()
        };
        let mut a = Workload::new(spec.clone(), tk.clone()).unwrap();
        let mut b = Workload::new(spec, tk.clone()).unwrap();
        for _ in 0..20 {
            let (x, y) = (a.next_session().unwrap(), b.next_session().unwrap());
            assert_eq!(x, y);
            let t = &x.turns[0];
            assert!((10..=50).contains(&t.user_tokens));
            assert_eq!(tk.count(&t.user), t.user_tokens as usize);
            assert_eq!(t.output_tokens, 7);
        }
    }

    #[test]
    fn counts_only_draws_the_same_lengths() {
        let spec = WorkloadSpec { input_tokens: "lognormal:100,50".parse().unwrap(), seed: 9, ..Default::default() };
        let mut a = Workload::new(spec.clone(), tk()).unwrap();
        let mut b = Workload::counts_only(spec).unwrap();
        for _ in 0..50 {
            let (x, y) = (a.next_session().unwrap(), b.next_session().unwrap());
            assert_eq!(x.turns[0].user_tokens, y.turns[0].user_tokens);
            assert!(y.turns[0].user.is_empty());
        }
    }

    #[test]
    fn prefix_groups_share_identical_system_prompts() {
        let tk = tk();
        let spec = WorkloadSpec {
            prefix_groups: 2,
            prefix_tokens: 100,
            input_tokens: LengthDist::Fixed(20),
            ..Default::default()
        };
        let mut w = Workload::new(spec, tk.clone()).unwrap();
        let s: Vec<_> = (0..4).map(|_| w.next_session().unwrap()).collect();
        assert_eq!(s[0].system, s[2].system);
        assert_eq!(s[1].system, s[3].system);
        assert_ne!(s[0].system, s[1].system);
        assert_eq!(tk.count(s[0].system.as_ref().unwrap()), 100);
        assert_ne!(s[0].turns[0].user, s[2].turns[0].user);
    }

    #[test]
    fn synthetic_sessions_with_think_time() {
        let spec = WorkloadSpec { turns: Turns::Up(3), think_time: ThinkTime::Fixed(2.0), ..Default::default() };
        let mut w = Workload::counts_only(spec).unwrap();
        let s = w.next_session().unwrap();
        assert_eq!(s.turns.iter().map(|t| t.think_s).collect::<Vec<_>>(), vec![0.0, 2.0, 2.0]);
    }

    fn data(kind: DatasetKind, text: &str) -> Source {
        Source::Dataset(Arc::new(Dataset::parse(kind, "t", text).unwrap()))
    }

    #[test]
    fn mooncake_prompts_share_prefix_blocks() {
        let tk = tk();
        let src = data(
            DatasetKind::Mooncake,
            "{\"timestamp\": 0, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, 2]}\n\
             {\"timestamp\": 20, \"input_length\": 1100, \"output_length\": 3, \"hash_ids\": [1, 2, 3]}\n\
             {\"timestamp\": 40, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [4, 5]}\n",
        );
        let spec = WorkloadSpec { source: src, cycle: false, ..Default::default() };
        let mut w = Workload::new(spec, tk.clone()).unwrap();
        let s: Vec<_> = std::iter::from_fn(|| w.next_session()).collect();
        assert_eq!(s.len(), 3);
        let (a, b, c) = (&s[0].turns[0].user, &s[1].turns[0].user, &s[2].turns[0].user);
        assert_eq!((tk.count(a), tk.count(b), tk.count(c)), (700, 1100, 600));
        // the first 512-token block is identical; the second block of `a` (188 tokens) is a prefix of `b`'s
        assert!(b.starts_with(a.as_str()), "equal leading ids share an identical prefix");
        assert!(!c.starts_with(&a[..50]));
        assert_eq!(s[1].trace_time_s, Some(0.02));
        let ids = |k: usize| s[k].turns[0].segments.iter().map(|g| g.id).collect::<Vec<_>>();
        assert_eq!(ids(1)[..2], ids(0)[..], "equal leading hash ids, equal leading segments");
        assert_eq!(s[1].turns[0].segments.iter().map(|g| g.tokens).collect::<Vec<_>>(), vec![512, 512, 76]);
        assert_eq!(s[0].turns[0].output_tokens, 5);
    }

    #[test]
    fn sharegpt_sessions_and_reply_lengths() {
        let tk = tk();
        let src = data(
            DatasetKind::ShareGpt,
            r#"[{"conversations": [{"from": "human", "value": "hello there"}, {"from": "gpt", "value": "hi, how are you today"},
                                   {"from": "human", "value": "fine"}, {"from": "gpt", "value": "good"}]}]"#,
        );
        let one = WorkloadSpec { source: src.clone(), ..Default::default() };
        let s = Workload::new(one, tk.clone()).unwrap().next_session().unwrap();
        assert_eq!(s.turns.len(), 1);
        assert_eq!(s.turns[0].user, "hello there");
        assert_eq!(s.turns[0].output_tokens, tk.count("hi, how are you today") as u32);
        let all = WorkloadSpec { source: src, turns: Turns::All, ..Default::default() };
        let s = Workload::new(all, tk.clone()).unwrap().next_session().unwrap();
        assert_eq!(s.turns.len(), 2);
        assert_eq!(s.turns[1].output_tokens, 1);
        // cycling: a one-entry dataset keeps giving sessions
        let mut w = Workload::counts(
            WorkloadSpec { source: data(DatasetKind::Jsonl, "{\"prompt\": \"x\"}\n"), ..Default::default() },
            Some(tk),
        )
        .unwrap();
        assert!(w.next_session().is_some() && w.next_session().is_some());
    }

    #[test]
    fn text_datasets_need_a_tokenizer_and_multi_turn_needs_sharegpt() {
        let src = data(DatasetKind::Jsonl, "{\"prompt\": \"x\"}\n");
        assert!(Workload::counts_only(WorkloadSpec { source: src.clone(), ..Default::default() }).is_err());
        let e = Workload::new(WorkloadSpec { source: src, turns: Turns::Up(2), ..Default::default() }, tk());
        assert!(e.is_err());
    }
}
