//! goodput's workload core: what to send and when.
//!
//! A [`Workload`] turns a [`WorkloadSpec`] (dataset or synthetic lengths, shared prefixes,
//! sessions) into a deterministic stream of [`SessionSpec`]s; an [`arrivals::ArrivalClock`] says
//! when each starts. Both drivers (the HTTP runner and the virtual-time simulator) consume the
//! same stream, so `bench` and `sim` see the same requests for the same seed.
//!
//! Pure and synchronous; the only I/O is reading dataset files up front, with errors naming the
//! file, line and field.

pub mod arrivals;
pub mod lengths;
pub mod load;
pub mod seed;
pub mod session;

use goodput_tokenizer::Tokenizer;
use serde::Serialize;

pub use arrivals::{ArrivalClock, Arrivals};
pub use lengths::LengthDist;
pub use load::Load;
pub use session::{Conversation, Message, SessionSpec, TurnSpec};

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{file}{}: field `{field}`: {message}", if *line > 0 { format!(", line {line}") } else { String::new() })]
    Data { file: String, line: usize, field: String, message: String },
    #[error("cannot read {file}: {message}")]
    Io { file: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Where prompts and lengths come from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Dataset {
    /// Random single-token words to an exact length.
    Synthetic,
}

/// Everything that decides the requests (not their timing).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadSpec {
    pub dataset: Dataset,
    pub input_tokens: LengthDist,
    pub output_tokens: LengthDist,
    /// Number of shared-prefix groups (0: none) and the prefix length in tokens.
    pub prefix_groups: u32,
    pub prefix_tokens: u32,
    /// Turns per synthetic session (1: plain requests).
    pub turns: u32,
    /// Pause between turns, seconds.
    pub think_time_s: f64,
    pub seed: u64,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            dataset: Dataset::Synthetic,
            input_tokens: LengthDist::Fixed(512),
            output_tokens: LengthDist::Fixed(128),
            prefix_groups: 0,
            prefix_tokens: 0,
            turns: 1,
            think_time_s: 0.0,
            seed: 0,
        }
    }
}

/// The deterministic stream of sessions for one run.
pub struct Workload {
    spec: WorkloadSpec,
    /// `None`: token counts only (the simulator needs no text).
    tokenizer: Option<Tokenizer>,
    lengths: seed::Rng,
    text_rng: seed::Rng,
    next_id: u64,
    prefixes: Vec<(String, u32)>,
}

impl Workload {
    /// A workload with prompt text built by `tokenizer`.
    pub fn new(spec: WorkloadSpec, tokenizer: Tokenizer) -> Result<Self, WorkloadError> {
        Self::build(spec, Some(tokenizer))
    }

    /// The same requests (same lengths, arrivals and sessions for the same seed) without text:
    /// what the simulator needs.
    pub fn counts_only(spec: WorkloadSpec) -> Result<Self, WorkloadError> {
        Self::build(spec, None)
    }

    fn build(spec: WorkloadSpec, tokenizer: Option<Tokenizer>) -> Result<Self, WorkloadError> {
        let mut prefixes = Vec::new();
        for g in 0..spec.prefix_groups {
            let mut r = seed::rng_for(spec.seed, 0x5052_4546_0000_0000 | g as u64);
            prefixes.push(match &tokenizer {
                Some(tk) => {
                    let (text, n) = tk.synthesize(spec.prefix_tokens as usize, &mut r);
                    (text, n as u32)
                }
                None => (String::new(), spec.prefix_tokens),
            });
        }
        Ok(Workload {
            lengths: seed::rng(spec.seed, seed::Stream::Lengths),
            text_rng: seed::rng(spec.seed, seed::Stream::Text),
            spec,
            tokenizer,
            next_id: 0,
            prefixes,
        })
    }

    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.tokenizer.as_ref()
    }

    /// The next session, or `None` when a finite dataset is exhausted.
    pub fn next_session(&mut self) -> Option<SessionSpec> {
        let id = self.next_id;
        self.next_id += 1;
        match self.spec.dataset {
            Dataset::Synthetic => Some(self.synthetic(id)),
        }
    }

    fn synthetic(&mut self, id: u64) -> SessionSpec {
        let mut s = SessionSpec { id, ..Default::default() };
        if !self.prefixes.is_empty() {
            let g = (id % self.prefixes.len() as u64) as usize;
            let (text, n) = &self.prefixes[g];
            s.system = Some(text.clone());
            s.system_tokens = *n;
            s.prefix_blocks = vec![0x5052_4546_0000_0000 | g as u64];
            s.prefix_block_tokens = *n;
        }
        for t in 0..self.spec.turns.max(1) {
            let n_in = self.spec.input_tokens.sample(&mut self.lengths);
            let n_out = self.spec.output_tokens.sample(&mut self.lengths);
            let (user, count) = match &self.tokenizer {
                Some(tk) => tk.synthesize(n_in as usize, &mut self.text_rng),
                None => (String::new(), n_in as usize),
            };
            let think_s = if t == 0 { 0.0 } else { self.spec.think_time_s };
            s.turns.push(TurnSpec { user, user_tokens: count as u32, output_tokens: n_out, think_s });
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_is_deterministic_and_exact() {
        let tk = Tokenizer::cl100k().unwrap();
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
        let mut a = Workload::new(spec.clone(), Tokenizer::cl100k().unwrap()).unwrap();
        let mut b = Workload::counts_only(spec).unwrap();
        for _ in 0..50 {
            let (x, y) = (a.next_session().unwrap(), b.next_session().unwrap());
            assert_eq!(x.turns[0].user_tokens, y.turns[0].user_tokens);
            assert!(y.turns[0].user.is_empty());
        }
    }

    #[test]
    fn prefix_groups_share_identical_system_prompts() {
        let tk = Tokenizer::cl100k().unwrap();
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
}
