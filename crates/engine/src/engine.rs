//! The serving engine: iteration-level continuous batching over a paged KV cache.
//!
//! Time is not in here. A driver calls [`Engine::step`] with the current time (virtual or real);
//! the engine decides the next iteration's batch, returns how long it takes (from the roofline
//! [`CostModel`]) and which sequences emit tokens or finish at its end. The driver advances its
//! clock by that duration and delivers the tokens.
//!
//! Scheduling (vLLM's policy, `SchedulerPolicy::PrefillFirst`): a FCFS waiting queue; new
//! sequences are admitted as a prefill-only iteration, ahead of the running decodes, while KV
//! blocks (above a 1% watermark), `max_num_seqs` and the token budget allow; otherwise every
//! running sequence decodes one token. When a decoding sequence needs a block and none is free,
//! the most recently admitted running sequence is preempted: its blocks are freed and it goes back
//! to the head of the queue, to be recomputed (prompt plus the tokens generated so far).
//! With `chunked_prefill`, each iteration takes the running sequences first (decodes, then
//! unfinished prefill chunks), then admits waiting ones, all within the token budget.
//!
//! Mechanisms to come plug in here: static batching and pre-allocated KV are admission rules;
//! prefix caching shares reference-counted blocks at admission ([`BlockPool::share`]);
//! speculative decoding emits several tokens per step (`Emit::tokens`); disaggregation is two
//! engines with a KV transfer between them.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::config::{EngineConfig, MemoryPlan};
use crate::cost::{BatchShape, CostModel, StepTime};
use crate::kv::{BlockPool, BlockTable};
use crate::{EngineError, Reject};

/// The caller's id for a sequence (unique among live sequences).
pub type SeqId = u64;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineRequest {
    /// Prompt length in tokens.
    pub prompt_tokens: u32,
    /// Tokens to generate before the sequence stops (its `max_tokens`, or an earlier stop).
    pub output_tokens: u32,
}

/// How many tokens a request generates: all of `max_tokens` when it must (`ignore_eos`), else its
/// natural stop, drawn uniformly from `min..=max` from the request's own seed. The real-time
/// server and the simulator both call this, so they stop a request at the same length.
pub fn output_length(seed: u64, min: u32, max: u32, ignore_eos: bool) -> u32 {
    use rand::{Rng, SeedableRng};
    let max = max.max(1);
    if ignore_eos {
        return max;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(0x006e_6174_7572_616c);
    rng.random_range(min.clamp(1, max)..=max)
}

/// Tokens delivered to one sequence at the end of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emit {
    pub seq: SeqId,
    pub tokens: u32,
    /// The sequence has generated all its tokens and left the engine.
    pub finished: bool,
}

/// Which phases an iteration mixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Prefill,
    Decode,
    Mixed,
}

/// One iteration.
#[derive(Clone, Debug, Default)]
pub struct StepOut {
    pub time: StepTime,
    pub kind: Option<StepKind>,
    pub emitted: Vec<Emit>,
    pub preempted: Vec<SeqId>,
    pub batch_seqs: u32,
    pub batch_tokens: u64,
}

#[derive(Debug)]
struct Seq {
    id: SeqId,
    prompt: u64,
    target: u32,
    generated: u32,
    /// Tokens whose KV is in the cache.
    computed: u64,
    table: BlockTable,
}

impl Seq {
    /// Tokens known so far: the prompt and every generated token.
    fn known(&self) -> u64 {
        self.prompt + self.generated as u64
    }
    /// Tokens to compute before the next token can be sampled.
    fn pending(&self) -> u64 {
        self.known() - self.computed
    }
}

/// Running counters and time-weighted averages.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EngineStats {
    pub steps: u64,
    pub prefill_steps: u64,
    pub decode_steps: u64,
    pub mixed_steps: u64,
    pub compute_bound_steps: u64,
    pub memory_bound_steps: u64,
    /// Σ step durations, seconds.
    pub busy_s: f64,
    pub prefill_tokens: u64,
    pub decode_tokens: u64,
    pub preemptions: u64,
    pub rejected: u64,
    /// Time-weighted over busy time.
    pub mean_running: f64,
    pub max_running: u32,
    pub mean_waiting: f64,
    pub mean_kv_utilization: f64,
    pub max_kv_utilization: f64,
    /// Share of allocated KV slots not holding a token (internal fragmentation), time-weighted.
    pub mean_kv_fragmentation: f64,
    /// Downsampled state over time: `[t_s, running, waiting, kv_utilization]`.
    pub series: Vec<[f64; 4]>,
    #[serde(skip)]
    series_every: u64,
    #[serde(skip)]
    sums: [f64; 4],
}

impl EngineStats {
    /// Share of steps that were compute-bound.
    pub fn compute_bound_share(&self) -> f64 {
        if self.steps == 0 { 0.0 } else { self.compute_bound_steps as f64 / self.steps as f64 }
    }

    fn finish_averages(&mut self) {
        if self.busy_s > 0.0 {
            self.mean_running = self.sums[0] / self.busy_s;
            self.mean_waiting = self.sums[1] / self.busy_s;
            self.mean_kv_utilization = self.sums[2] / self.busy_s;
            self.mean_kv_fragmentation = self.sums[3] / self.busy_s;
        }
    }
}

/// A point-in-time view for gauges (`/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Gauges {
    pub running: u32,
    pub waiting: u32,
    pub kv_utilization: f64,
    pub preemptions: u64,
}

/// The engine.
pub struct Engine {
    cfg: EngineConfig,
    plan: MemoryPlan,
    cost: CostModel,
    kv: BlockPool,
    watermark: u32,
    slots: Vec<Option<Seq>>,
    free_slots: Vec<usize>,
    index: HashMap<SeqId, usize>,
    waiting: VecDeque<usize>,
    running: Vec<usize>,
    batch: Vec<(usize, u64)>,
    finished: Vec<usize>,
    out: StepOut,
    stats: EngineStats,
}

impl Engine {
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        let plan = cfg.plan()?;
        let cost = CostModel::new(&cfg);
        Ok(Engine {
            kv: BlockPool::new(plan.kv_blocks),
            watermark: plan.kv_blocks / 100,
            cost,
            plan,
            cfg,
            slots: Vec::new(),
            free_slots: Vec::new(),
            index: HashMap::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            batch: Vec::new(),
            finished: Vec::new(),
            out: StepOut::default(),
            stats: EngineStats { series_every: 1, ..Default::default() },
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn memory(&self) -> &MemoryPlan {
        &self.plan
    }

    pub fn cost(&self) -> &CostModel {
        &self.cost
    }

    /// Checks a request against the model's limits without queueing it.
    pub fn check(&self, r: &EngineRequest) -> Result<(), Reject> {
        let total = r.prompt_tokens as u64 + r.output_tokens as u64;
        if r.prompt_tokens == 0 || r.output_tokens == 0 {
            return Err(Reject::Empty);
        }
        if total > self.cfg.model.max_context {
            return Err(Reject::OverContext { tokens: total, limit: self.cfg.model.max_context });
        }
        if !self.cfg.chunked_prefill && r.prompt_tokens as u64 > self.cfg.max_batched_tokens as u64 {
            return Err(Reject::OverBudget {
                tokens: r.prompt_tokens as u64,
                limit: self.cfg.max_batched_tokens as u64,
            });
        }
        if total > self.plan.kv_tokens {
            return Err(Reject::OverCapacity { tokens: total, limit: self.plan.kv_tokens });
        }
        Ok(())
    }

    /// Queues a sequence. `id` must not be live already.
    pub fn submit(&mut self, id: SeqId, r: EngineRequest) -> Result<(), Reject> {
        if let Err(e) = self.check(&r) {
            self.stats.rejected += 1;
            return Err(e);
        }
        if self.waiting.len() >= self.cfg.max_waiting {
            self.stats.rejected += 1;
            return Err(Reject::QueueFull { limit: self.cfg.max_waiting });
        }
        debug_assert!(!self.index.contains_key(&id), "sequence id {id} is live");
        let seq = Seq {
            id,
            prompt: r.prompt_tokens as u64,
            target: r.output_tokens,
            generated: 0,
            computed: 0,
            table: BlockTable::default(),
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(seq);
                s
            }
            None => {
                self.slots.push(Some(seq));
                self.slots.len() - 1
            }
        };
        self.index.insert(id, slot);
        self.waiting.push_back(slot);
        Ok(())
    }

    /// Drops a sequence (client went away), freeing its blocks. Unknown ids are ignored.
    pub fn abort(&mut self, id: SeqId) {
        let Some(slot) = self.index.remove(&id) else {
            return;
        };
        self.waiting.retain(|&s| s != slot);
        self.running.retain(|&s| s != slot);
        self.release(slot);
    }

    fn release(&mut self, slot: usize) {
        if let Some(mut seq) = self.slots[slot].take() {
            seq.table.release_all(&mut self.kv);
            self.free_slots.push(slot);
        }
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    pub fn gauges(&self) -> Gauges {
        Gauges {
            running: self.running.len() as u32,
            waiting: self.waiting.len() as u32,
            kv_utilization: self.kv.used_count() as f64 / self.kv.capacity().max(1) as f64,
            preemptions: self.stats.preemptions,
        }
    }

    /// Statistics so far (averages over busy time).
    pub fn stats(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.finish_averages();
        s
    }

    fn seq(&self, slot: usize) -> &Seq {
        self.slots[slot].as_ref().expect("live slot")
    }

    fn seq_mut(&mut self, slot: usize) -> &mut Seq {
        self.slots[slot].as_mut().expect("live slot")
    }

    /// Frees a running sequence's blocks and puts it back at the head of the queue.
    fn preempt(&mut self, slot: usize) {
        self.running.retain(|&s| s != slot);
        let kv = &mut self.kv;
        let seq = self.slots[slot].as_mut().expect("live slot");
        seq.table.release_all(kv);
        seq.computed = 0;
        self.out.preempted.push(seq.id);
        self.waiting.push_front(slot);
        self.stats.preemptions += 1;
    }

    /// Makes room for `slot` to hold `tokens` tokens, preempting the most recently admitted
    /// running sequences as needed. Returns false if `slot` itself had to be preempted.
    fn reserve(&mut self, slot: usize, tokens: u64) -> bool {
        let bs = self.cfg.block_size;
        loop {
            let kv = &mut self.kv;
            let seq = self.slots[slot].as_mut().expect("live slot");
            if seq.table.grow_to(kv, tokens, bs) {
                return true;
            }
            let victim = *self.running.last().expect("a sequence that needs blocks is running");
            self.preempt(victim);
            if victim == slot {
                return false;
            }
        }
    }

    /// Admits waiting sequences while blocks, sequence slots and `budget` allow. Each admitted
    /// sequence computes `min(pending, budget)` tokens (the whole prompt unless chunking).
    fn admit(&mut self, budget: &mut u64, shape: &mut BatchShape) {
        let bs = self.cfg.block_size as u64;
        while let Some(&slot) = self.waiting.front() {
            if self.running.len() >= self.cfg.max_num_seqs as usize || *budget == 0 {
                break;
            }
            let pending = self.seq(slot).pending();
            let chunk = if self.cfg.chunked_prefill { pending.min(*budget) } else { pending };
            if chunk > *budget {
                break;
            }
            let need = chunk.div_ceil(bs) as u32;
            if self.kv.free_count() < need + self.watermark {
                break;
            }
            let kv = &mut self.kv;
            let seq = self.slots[slot].as_mut().expect("live slot");
            let ok = seq.table.grow_to(kv, chunk, bs as u32);
            debug_assert!(ok);
            self.waiting.pop_front();
            self.running.push(slot);
            self.batch.push((slot, chunk));
            shape.add_prefill(chunk, 0);
            *budget -= chunk;
        }
    }

    /// Schedules running sequences in admission order: decodes take one token, unfinished
    /// prefills (chunked mode) take what the budget leaves.
    fn schedule_running(&mut self, budget: &mut u64, shape: &mut BatchShape) {
        let mut i = 0;
        while i < self.running.len() {
            let slot = self.running[i];
            let (pending, computed) = {
                let s = self.seq(slot);
                (s.pending(), s.computed)
            };
            let chunk = pending.min(*budget);
            if chunk == 0 {
                break;
            }
            if !self.reserve(slot, computed + chunk) {
                continue; // preempted itself; `running` shrank, `i` now points past the end
            }
            self.batch.push((slot, chunk));
            if pending == 1 && computed > 0 {
                shape.add_decode(computed + 1);
            } else {
                shape.add_prefill(chunk, computed);
            }
            *budget -= chunk;
            i += 1;
        }
        // a preemption may have removed sequences already batched: drop them from the batch
        if !self.out.preempted.is_empty() {
            let running = &self.running;
            self.batch.retain(|(s, _)| running.contains(s));
        }
    }

    /// Plans and applies the next iteration starting at `now_s`. `None` when there is no work.
    pub fn step(&mut self, now_s: f64) -> Option<&StepOut> {
        if !self.has_work() {
            return None;
        }
        self.out.emitted.clear();
        self.out.preempted.clear();
        self.batch.clear();
        let mut shape = BatchShape::default();
        let mut budget = self.cfg.max_batched_tokens as u64;
        if self.cfg.chunked_prefill {
            self.schedule_running(&mut budget, &mut shape);
            self.admit(&mut budget, &mut shape);
        } else {
            self.admit(&mut budget, &mut shape);
            if self.batch.is_empty() {
                let mut unlimited = u64::MAX;
                self.schedule_running(&mut unlimited, &mut shape);
            }
        }
        if self.batch.is_empty() {
            // Nothing fits (e.g. every running sequence was preempted): the queue waits for blocks
            // that no one will free unless something runs. Admit the head alone, ignoring the
            // watermark, so the engine always makes progress.
            self.force_admit_head(&mut shape);
        }
        // apply the iteration; a prefill that reaches the end of its prompt samples a token too
        for &(slot, chunk) in &self.batch {
            let seq = self.slots[slot].as_mut().expect("live slot");
            let was_decode = seq.pending() == 1 && seq.computed > 0;
            seq.computed += chunk;
            if !was_decode && seq.computed == seq.known() {
                shape.sampled += 1;
            }
        }
        let time = self.cost.time(&shape);
        let kind = match (shape.prefill_tokens > 0, shape.decode_seqs > 0) {
            (true, true) => StepKind::Mixed,
            (true, false) => StepKind::Prefill,
            _ => StepKind::Decode,
        };
        // tokens appear at the end of the iteration
        let mut finished = std::mem::take(&mut self.finished);
        finished.clear();
        for i in 0..self.batch.len() {
            let slot = self.batch[i].0;
            let seq = self.seq_mut(slot);
            if seq.computed < seq.known() {
                continue; // a prefill chunk that did not reach the end of the prompt
            }
            seq.generated += 1;
            let done = seq.generated >= seq.target;
            let id = seq.id;
            self.out.emitted.push(Emit { seq: id, tokens: 1, finished: done });
            if done {
                finished.push(slot);
            }
        }
        if !finished.is_empty() {
            for &slot in &finished {
                let id = self.seq(slot).id;
                self.index.remove(&id);
                self.release(slot);
            }
            let slots = &self.slots;
            self.running.retain(|&s| slots[s].is_some());
        }
        self.finished = finished;
        self.record(now_s, &time, kind, &shape);
        self.out.time = time;
        self.out.kind = Some(kind);
        self.out.batch_seqs = self.batch.len() as u32;
        self.out.batch_tokens = shape.tokens();
        Some(&self.out)
    }

    fn force_admit_head(&mut self, shape: &mut BatchShape) {
        let Some(&slot) = self.waiting.front() else {
            return;
        };
        let bs = self.cfg.block_size;
        let pending = self.seq(slot).pending();
        let chunk = if self.cfg.chunked_prefill { pending.min(self.cfg.max_batched_tokens as u64) } else { pending };
        let kv = &mut self.kv;
        let seq = self.slots[slot].as_mut().expect("live slot");
        if seq.table.grow_to(kv, chunk, bs) {
            self.waiting.pop_front();
            self.running.push(slot);
            self.batch.push((slot, chunk));
            shape.add_prefill(chunk, 0);
        }
    }

    fn record(&mut self, now_s: f64, t: &StepTime, kind: StepKind, shape: &BatchShape) {
        let st = &mut self.stats;
        st.steps += 1;
        match kind {
            StepKind::Prefill => st.prefill_steps += 1,
            StepKind::Decode => st.decode_steps += 1,
            StepKind::Mixed => st.mixed_steps += 1,
        }
        if t.compute_bound {
            st.compute_bound_steps += 1;
        } else {
            st.memory_bound_steps += 1;
        }
        st.prefill_tokens += shape.prefill_tokens;
        st.decode_tokens += shape.decode_seqs;
        let d = t.total_s;
        st.busy_s += d;
        let running = self.running.len() as f64;
        let waiting = self.waiting.len() as f64;
        let used = self.kv.used_count() as f64;
        let util = used / self.kv.capacity().max(1) as f64;
        let slots = used * self.cfg.block_size as f64;
        let stored: u64 = self.running.iter().map(|&s| self.slots[s].as_ref().map_or(0, |q| q.computed)).sum();
        let frag = if slots > 0.0 { (slots - stored as f64).max(0.0) / slots } else { 0.0 };
        st.sums[0] += d * running;
        st.sums[1] += d * waiting;
        st.sums[2] += d * util;
        st.sums[3] += d * frag;
        st.max_running = st.max_running.max(self.running.len() as u32);
        st.max_kv_utilization = st.max_kv_utilization.max(util);
        // keep at most ~512 samples: halve the series and double the stride when full
        if st.steps.is_multiple_of(st.series_every) {
            st.series.push([now_s, running, waiting, util]);
            if st.series.len() >= 1024 {
                st.series = st.series.iter().step_by(2).copied().collect();
                st.series_every *= 2;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalog::Catalog;

    /// Llama-3.1-8B on an H100 whose memory is cut so that exactly `blocks` KV blocks fit.
    pub(crate) fn small_engine(blocks: u32, tweak: impl FnOnce(&mut EngineConfig)) -> Engine {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        cfg.max_batched_tokens = 2048;
        tweak(&mut cfg);
        let full = cfg.plan().unwrap();
        let block_bytes = full.kv_bytes_per_token * cfg.block_size as f64;
        let need = full.weights_gb * 1e9 + full.activation_reserve_gb * 1e9 + (blocks as f64 + 0.5) * block_bytes;
        cfg.gpu.memory_gb = need / cfg.gpu_memory_utilization / 1e9;
        let e = Engine::new(cfg).unwrap();
        assert_eq!(e.memory().kv_blocks, blocks);
        e
    }

    fn req(p: u32, o: u32) -> EngineRequest {
        EngineRequest { prompt_tokens: p, output_tokens: o }
    }

    fn emitted(out: &StepOut) -> Vec<(SeqId, bool)> {
        out.emitted.iter().map(|e| (e.seq, e.finished)).collect()
    }

    #[test]
    fn prefill_then_decode_then_finish() {
        let mut e = small_engine(1000, |_| {});
        e.submit(1, req(100, 3)).unwrap();
        e.submit(2, req(50, 2)).unwrap();
        let out = e.step(0.0).unwrap();
        assert_eq!(out.kind, Some(StepKind::Prefill));
        assert_eq!(out.batch_tokens, 150);
        assert_eq!(emitted(out), vec![(1, false), (2, false)]);
        let out = e.step(0.1).unwrap();
        assert_eq!(out.kind, Some(StepKind::Decode));
        assert_eq!(emitted(out), vec![(1, false), (2, true)]);
        let out = e.step(0.2).unwrap();
        assert_eq!(emitted(out), vec![(1, true)]);
        assert!(!e.has_work());
        assert_eq!(e.kv.free_count(), 1000, "finished sequences free their blocks");
        let s = e.stats();
        assert_eq!((s.prefill_steps, s.decode_steps, s.decode_tokens, s.prefill_tokens), (1, 2, 3, 150));
    }

    #[test]
    fn new_prefills_go_ahead_of_running_decodes() {
        let mut e = small_engine(1000, |_| {});
        e.submit(1, req(100, 10)).unwrap();
        e.step(0.0).unwrap();
        e.step(0.1).unwrap();
        e.submit(2, req(100, 10)).unwrap();
        // the running sequence stalls for a whole prefill iteration of the newcomer
        let out = e.step(0.2).unwrap();
        assert_eq!(out.kind, Some(StepKind::Prefill));
        assert_eq!(emitted(out), vec![(2, false)]);
        let out = e.step(0.3).unwrap();
        assert_eq!(out.kind, Some(StepKind::Decode));
        assert_eq!(out.batch_seqs, 2);
    }

    #[test]
    fn chunked_prefill_mixes_decodes_and_chunks() {
        let mut e = small_engine(1000, |c| {
            c.chunked_prefill = true;
            c.max_batched_tokens = 256;
        });
        e.submit(1, req(10, 50)).unwrap();
        e.step(0.0).unwrap();
        e.submit(2, req(600, 5)).unwrap();
        // decode of 1 first (1 token), then a 255-token chunk of 2
        let out = e.step(0.1).unwrap();
        assert_eq!(out.kind, Some(StepKind::Mixed));
        assert_eq!(out.batch_tokens, 256);
        assert_eq!(emitted(out), vec![(1, false)], "a partial prefill emits nothing");
        let out = e.step(0.2).unwrap();
        assert_eq!(emitted(out), vec![(1, false)]);
        // 600 − 255 − 255 = 90 left: this chunk ends the prompt, so 2 samples its first token
        let out = e.step(0.3).unwrap();
        assert_eq!(out.batch_tokens, 91);
        assert_eq!(emitted(out), vec![(1, false), (2, false)]);
    }

    #[test]
    fn preemption_frees_the_most_recent_and_recomputes_it() {
        // 3 blocks of 16: two sequences of 16-token prompts fill 2 blocks; growing needs more
        let mut e = small_engine(3, |c| c.max_num_seqs = 8);
        e.watermark = 0;
        e.submit(1, req(16, 20)).unwrap();
        e.submit(2, req(16, 20)).unwrap();
        e.step(0.0).unwrap(); // both prefilled: 2 blocks used
        let out = e.step(0.1).unwrap(); // 1 needs a 2nd block (ok: 3rd free); 2 then needs one too → preempted
        assert_eq!(out.preempted, vec![2]);
        assert_eq!(emitted(out), vec![(1, false)]);
        assert_eq!(e.stats().preemptions, 1);
        // run to completion: every token of both is delivered exactly once
        let mut got = std::collections::HashMap::<SeqId, u32>::new();
        got.insert(1, 2);
        got.insert(2, 1);
        let mut t = 0.2;
        while let Some(out) = e.step(t) {
            for em in &out.emitted {
                *got.entry(em.seq).or_default() += em.tokens;
            }
            t += 0.1;
        }
        assert_eq!(got[&1], 20);
        assert_eq!(got[&2], 20);
        assert_eq!(e.kv.free_count(), 3);
    }

    #[test]
    fn max_num_seqs_caps_the_batch() {
        let mut e = small_engine(1000, |c| c.max_num_seqs = 2);
        for i in 0..5 {
            e.submit(i, req(10, 5)).unwrap();
        }
        let out = e.step(0.0).unwrap();
        assert_eq!(out.batch_seqs, 2);
        assert_eq!(e.gauges().waiting, 3);
    }

    #[test]
    fn rejections() {
        let mut e = small_engine(100, |c| c.max_waiting = 1);
        assert!(matches!(e.submit(1, req(130_000, 2000)), Err(Reject::OverContext { .. })));
        assert!(matches!(e.submit(1, req(4000, 1)), Err(Reject::OverBudget { .. })));
        assert!(matches!(e.submit(1, req(1000, 1000)), Err(Reject::OverCapacity { .. })));
        assert!(matches!(e.submit(1, req(0, 1)), Err(Reject::Empty)));
        e.submit(1, req(10, 1)).unwrap();
        assert!(matches!(e.submit(2, req(10, 1)), Err(Reject::QueueFull { limit: 1 })));
        assert_eq!(e.stats().rejected, 5);
    }

    #[test]
    fn abort_frees_blocks() {
        let mut e = small_engine(100, |_| {});
        e.submit(1, req(100, 50)).unwrap();
        e.step(0.0).unwrap();
        assert!(e.kv.free_count() < 100);
        e.abort(1);
        assert_eq!(e.kv.free_count(), 100);
        assert!(!e.has_work());
        e.abort(42); // unknown: ignored
    }

    #[test]
    fn fragmentation_is_the_last_partial_block() {
        // one sequence of 20 tokens in 16-token blocks: 32 slots hold 20 tokens
        let mut e = small_engine(100, |_| {});
        e.submit(1, req(20, 100)).unwrap();
        e.step(0.0).unwrap();
        let s = e.stats();
        assert!((s.mean_kv_fragmentation - 12.0 / 32.0).abs() < 1e-9, "{}", s.mean_kv_fragmentation);
    }
}
