//! One engine replica: request intake, iteration-level scheduling over a paged KV cache, and the
//! statistics of what it did.
//!
//! Time is not in here: a driver tells it the time. [`Engine::submit`] takes a request in (its
//! intake ends a moment later: see [`Efficiency::ingest_s`]); [`Engine::start`] begins the next
//! iteration when the engine is idle and has work (its policy plans the batch, the step-cost
//! model prices it); [`Engine::complete`] hands over the tokens of an iteration that has ended;
//! [`Engine::next_event`] says when something next happens on its own. The real-time server and
//! the virtual-time simulator drive it the same way, through [`crate::serving::ServingEngine`].
//!
//! Sequences are admitted FCFS (see [`crate::sched`]); when a running sequence needs a block and
//! none is free, the most recently admitted one is preempted (recomputed later). Each iteration's
//! tokens appear at its end; a sequence may receive more than one token from one iteration.
//!
//! [`Efficiency::ingest_s`]: crate::Efficiency::ingest_s

use std::collections::VecDeque;

use crate::config::{Batching, EngineConfig, MemoryPlan};
use crate::cost::{BatchShape, Roofline, StepCost, StepTime};
use crate::error::EngineError;
use crate::kv::{BlockTable, KvManager};
use crate::sched::{ContinuousBatching, Core, Limits, PREFETCH_AHEAD, Place, Policy, Seq, StaticBatching};
use crate::serving::{Emit, EngineRequest, EngineStats, Gauges, Reject, SeqId, ServingEngine, StepKind, StepOut};
use crate::speculate::Speculation;

/// One engine replica.
pub struct Engine {
    cfg: EngineConfig,
    plan: MemoryPlan,
    cost: Box<dyn StepCost>,
    /// How iterations speculate (drafted tokens, acceptance, drafting time).
    speculation: Box<dyn Speculation>,
    policy: Box<dyn Policy>,
    core: Core,
    /// Requests in intake: when each becomes schedulable. Its head is never an aborted one.
    intake: VecDeque<(f64, usize)>,
    /// Aborted requests still in `intake` (they are dropped when they reach its head).
    aborted_intake: usize,
    /// When the intake is free for the next request.
    intake_free_at: f64,
    /// The iteration in flight.
    step: Option<StepOut>,
    /// An emptied token buffer, reused by the next iteration.
    spare: Vec<Emit>,
    stats: EngineStats,
}

impl Engine {
    /// An engine with the roofline step-cost model and the configuration's batching policy.
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        let cost: Box<dyn StepCost> = match &cfg.fitted {
            Some(f) => Box::new(f.step),
            None => Box::new(Roofline::new(&cfg)),
        };
        let policy: Box<dyn Policy> = match cfg.batching {
            Batching::Continuous => Box::new(ContinuousBatching { scheduling: cfg.scheduling() }),
            Batching::Static => Box::new(StaticBatching { timeout_s: cfg.batch_timeout_s }),
        };
        Self::with_parts(cfg, cost, policy)
    }

    /// An engine with the given step-cost model and scheduling policy.
    pub fn with_parts(
        cfg: EngineConfig,
        cost: Box<dyn StepCost>,
        policy: Box<dyn Policy>,
    ) -> Result<Self, EngineError> {
        let plan = cfg.plan()?;
        let kv = KvManager::with_rule(plan.kv_blocks, cfg.block_size, cfg.prefix_caching, crate::kv::rule(&cfg));
        let limits = Limits {
            max_num_seqs: cfg.max_num_seqs,
            max_batched_tokens: cfg.max_batched_tokens,
            watermark: plan.kv_blocks / 100,
            spec_k: 0,
        };
        let speculation = crate::speculate::strategy(&cfg);
        let limits = Limits { spec_k: speculation.k(), ..limits };
        Ok(Engine {
            core: Core::new(kv, limits),
            cost,
            speculation,
            policy,
            plan,
            cfg,
            intake: VecDeque::new(),
            aborted_intake: 0,
            intake_free_at: 0.0,
            step: None,
            spare: Vec::new(),
            stats: EngineStats { series_every: 1, ..Default::default() },
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn memory(&self) -> &MemoryPlan {
        &self.plan
    }

    pub fn cost(&self) -> &dyn StepCost {
        self.cost.as_ref()
    }

    /// Checks a request against the model's limits without queueing it.
    pub fn check(&self, r: &EngineRequest) -> Result<(), Reject> {
        let total = r.prompt_tokens as u64 + r.output_tokens as u64;
        if r.prompt_tokens == 0 || r.output_tokens == 0 {
            return Err(Reject::Empty);
        }
        if total > self.cfg.context() {
            return Err(Reject::OverContext { tokens: total, limit: self.cfg.context() });
        }
        if !self.policy.takes_long_prompts() && r.prompt_tokens as u64 > self.cfg.max_batched_tokens as u64 {
            return Err(Reject::OverBudget {
                tokens: r.prompt_tokens as u64,
                limit: self.cfg.max_batched_tokens as u64,
            });
        }
        let need = total.max(self.reservation(r));
        if need > self.plan.kv_tokens {
            return Err(Reject::OverCapacity { tokens: need, limit: self.plan.kv_tokens });
        }
        Ok(())
    }

    /// The KV a request reserves at admission (0: blocks as it grows), by the KV manager's rule.
    fn reservation(&self, r: &EngineRequest) -> u64 {
        self.core.kv.reservation(r.prompt_tokens as u64, r.max_tokens.max(r.output_tokens) as u64)
    }

    /// How long taking `r` in costs (nothing for a hand-over: its intake was paid upstream).
    fn intake_time(&self, r: &EngineRequest) -> f64 {
        let e = &self.cfg.efficiency;
        if r.kv_ready { 0.0 } else { e.ingest_s + e.ingest_per_token_s * r.prompt_tokens as f64 }
    }

    /// Requests taken in and not finished: a router's measure of load.
    pub fn load(&self) -> usize {
        self.intake_len() + self.core.waiting_len() + self.core.running_len()
    }

    /// Requests in intake, not counting aborted ones.
    fn intake_len(&self) -> usize {
        self.intake.len() - self.aborted_intake
    }

    /// Pops aborted requests off the head of the intake (each once: amortized O(1)).
    fn skip_aborted_intake(&mut self) {
        while let Some(&(_, slot)) = self.intake.front() {
            if !self.core.seq(slot).aborted {
                break;
            }
            self.intake.pop_front();
            self.aborted_intake -= 1;
            self.core.release_aborted(slot);
        }
    }

    /// How many of `hashes`' leading blocks this engine holds (a prefix-aware router's look).
    pub fn cached_prefix(&self, hashes: &[u64]) -> usize {
        self.core.kv.peek(hashes)
    }

    /// Moves requests whose intake has ended by `now` to the waiting queue.
    fn take_in(&mut self, now: f64) {
        while self.intake.front().is_some_and(|&(at, _)| at <= now + 1e-12) {
            let (at, slot) = self.intake.pop_front().expect("peeked");
            self.core.enqueue(slot, at);
            self.skip_aborted_intake();
        }
    }

    /// Plans and prices the next iteration at `now` (nothing when there is no work).
    fn begin(&mut self, now: f64) {
        let core = &mut self.core;
        core.drop_aborted_running();
        core.batch.clear();
        core.preempted.clear();
        core.shape = BatchShape::default();
        if core.waiting.is_empty() && core.running.is_empty() {
            return;
        }
        self.policy.plan(core, now);
        if core.batch.is_empty() && core.shape.tokens() == 0 {
            return;
        }
        // apply the iteration: a prefill that reaches the end of its prompt samples a token too;
        // the tokens appear at the end of the iteration, and finished sequences leave
        let mut shape = core.shape;
        let mut emitted = std::mem::take(&mut self.spare);
        emitted.clear();
        let (caching, keep, mut finished) = (core.kv.prefix_caching(), self.policy.keeps_finished(), false);
        let mut draft = BatchShape::default();
        // KV tokens of the batch's sequences that stay (the running list's total when the batch
        // is all of it, as it mostly is: no second pass over it then)
        let (mut stored, mut stay) = (0u64, 0usize);
        for i in 0..core.batch.len() {
            core.prefetch(core.batch.get(i + PREFETCH_AHEAD).map(|b| b.0));
            let (slot, tokens, drafted) = core.batch[i];
            let seq = core.seq_mut(slot);
            let was_decode = seq.decoding();
            // a verified step keeps the last token, the accepted drafts, and samples one more
            let accepted = if drafted > 0 {
                draft.add_decode(seq.computed + 1);
                let rng = seq.rng.as_deref_mut().expect("speculative sequences have their stream");
                let a = self.speculation.accepted(rng, drafted);
                self.stats.spec_drafts += 1;
                self.stats.spec_draft_tokens += drafted as u64;
                self.stats.spec_accepted_tokens += a as u64;
                a.min(seq.target - seq.generated - 1)
            } else {
                0
            };
            seq.computed += tokens + accepted as u64;
            if seq.computed < seq.known() {
                // a prefill chunk that did not reach the end of the prompt
                (stored, stay) = (stored + seq.computed, stay + 1);
                if caching {
                    core.register_computed_blocks(slot);
                }
                continue;
            }
            shape.sampled += u64::from(!was_decode);
            let n = 1 + accepted;
            seq.generated += n;
            self.stats.generated += u64::from(n);
            let done = seq.generated >= seq.target;
            emitted.push(Emit { seq: seq.id, tokens: n, finished: done });
            if caching {
                core.register_computed_blocks(slot);
            }
            if done && keep {
                core.seq_mut(slot).done = true;
            } else if done {
                finished = true;
                core.remove(slot);
                continue;
            }
            (stored, stay) = (stored + core.seq(slot).computed, stay + 1);
        }
        if finished {
            core.drop_removed_from_running();
        }
        if stay != core.running.len() {
            stored = core.stored_tokens();
        }
        debug_assert_eq!(stored, core.stored_tokens());
        let mut time = self.cost.time(&shape);
        let t = self.speculation.draft_time(&draft);
        if t > 0.0 {
            self.stats.spec_draft_s += t;
            time.total_s += t;
        }
        let kind = match (shape.prefill_seqs > 0, shape.decode_seqs + shape.verify_seqs > 0) {
            (true, true) => StepKind::Mixed,
            (true, false) => StepKind::Prefill,
            _ => StepKind::Decode,
        };
        let out = StepOut {
            start: now,
            end: now + time.total_s,
            time,
            kind: Some(kind),
            preempted: std::mem::take(&mut core.preempted),
            batch_seqs: core.batch.len() as u32,
            batch_tokens: shape.tokens(),
            emitted,
        };
        self.record(now, &time, kind, &shape, stored);
        self.step = Some(out);
    }

    /// Adds an iteration to the statistics; `stored`: KV tokens the running sequences hold.
    fn record(&mut self, now_s: f64, t: &StepTime, kind: StepKind, shape: &BatchShape, stored: u64) {
        let core = &self.core;
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
        let running = core.running.len() as f64;
        let waiting = (core.waiting_len() + self.intake.len() - self.aborted_intake) as f64;
        let used = core.kv.used() as f64;
        let util = used / core.kv.capacity().max(1) as f64;
        let slots = used * self.cfg.block_size as f64;
        let stored = (stored as f64).min(slots);
        let frag = if slots > 0.0 { (slots - stored) / slots } else { 0.0 };
        let used_share = if slots > 0.0 { stored / slots } else { 0.0 };
        st.sums[0] += d * running;
        st.sums[1] += d * waiting;
        st.sums[2] += d * util;
        st.sums[3] += d * frag;
        st.sums[4] += d * used_share;
        st.sums[5] += d * slots;
        st.sums[6] += d * stored;
        st.max_running = st.max_running.max(core.running.len() as u32);
        st.max_kv_utilization = st.max_kv_utilization.max(util);
        // keep at most ~512 samples: halve the series and double the stride when full
        if st.steps.is_multiple_of(st.series_every) {
            let kv = &core.kv.counters;
            let block = self.cfg.block_size as f64;
            st.series.push(vec![
                now_s,
                running,
                waiting,
                util,
                used_share,
                core.preemptions as f64,
                kv.queried_blocks as f64 * block,
                kv.hit_blocks as f64 * block,
                st.spec_drafts as f64,
                st.spec_draft_tokens as f64,
                st.spec_accepted_tokens as f64,
                st.generated as f64,
            ]);
            if st.series.len() >= 1024 {
                st.series = st.series.iter().step_by(2).cloned().collect();
                st.series_every *= 2;
            }
        }
    }

    /// Runs one whole iteration at `now` when there is work: starts it and completes it at its
    /// end (a convenience for tests and simple drivers).
    pub fn step(&mut self, now: f64) -> Option<StepOut> {
        self.start(now);
        let out = self.step.take()?;
        Some(out)
    }
}

impl ServingEngine for Engine {
    fn submit(&mut self, id: SeqId, r: EngineRequest, now: f64) -> Result<(), Reject> {
        if let Err(e) = self.check(&r) {
            self.stats.rejected += 1;
            return Err(e);
        }
        if self.core.waiting_len() + self.intake_len() >= self.cfg.max_waiting {
            self.stats.rejected += 1;
            return Err(Reject::QueueFull { limit: self.cfg.max_waiting });
        }
        debug_assert!(!self.core.is_live(id), "sequence id {id} is live");
        let mut ready = self.intake_free_at.max(now) + self.intake_time(&r);
        self.intake_free_at = ready;
        // the front end (a twin's fitted one, or the preset's): requests pass it side by side,
        // each with its own latency, drawn from the request's own seed (so that a request's draw
        // does not depend on which engine or shard serves it), or its id where it has none; a
        // request handed over with its KV (disaggregation) does not pass it again
        if !r.kv_ready {
            let seed = [r.frontend_seed, r.seed].into_iter().find(|&s| s != 0).unwrap_or(id.rotate_left(17));
            ready += match &self.cfg.fitted {
                Some(f) => f.frontend_delay(r.prompt_tokens as u64, seed),
                None => self.cfg.efficiency.frontend_delay(seed),
            };
        }
        // room for every block it will hold, so that its table does not reallocate as it grows
        let reserve = self.reservation(&r);
        let tokens = (r.prompt_tokens as u64 + r.output_tokens as u64).max(reserve);
        let table = BlockTable { blocks: Vec::with_capacity(tokens.div_ceil(self.cfg.block_size as u64) as usize) };
        let slot = self.core.insert(Seq {
            id,
            prompt: r.prompt_tokens as u64,
            target: r.output_tokens,
            generated: u32::from(r.kv_ready),
            computed: if r.kv_ready { r.prompt_tokens as u64 } else { 0 },
            table,
            reserve,
            hashes: r.block_hashes,
            registered: 0,
            cached_upto: 0,
            arrived: ready,
            done: false,
            place: Place::Intake,
            aborted: false,
            rng: (self.speculation.k() > 0).then(|| {
                use rand::SeedableRng;
                let mut g = rand_chacha::ChaCha8Rng::seed_from_u64(r.seed);
                g.set_stream(0x7370_6563);
                Box::new(g)
            }),
        });
        // the intake in order of readiness (a front end's jitter may reorder requests)
        let at = self.intake.partition_point(|&(t, _)| t <= ready);
        self.intake.insert(at, (ready, slot));
        Ok(())
    }

    /// O(1) (amortized): the blocks are freed and the id forgotten at once; the sequence leaves
    /// its queue when the engine next looks there (see [`Core::abort`]).
    fn abort(&mut self, id: SeqId) {
        if let Some((Place::Intake, _)) = self.core.abort(id) {
            self.aborted_intake += 1;
            self.skip_aborted_intake();
        }
    }

    fn complete(&mut self, now: f64, out: &mut Vec<Emit>) {
        if self.step.as_ref().is_some_and(|s| s.end <= now + 1e-12) {
            let mut s = self.step.take().expect("checked");
            if out.is_empty() {
                std::mem::swap(out, &mut s.emitted); // the driver's buffer comes back as the spare
            } else {
                out.append(&mut s.emitted);
            }
            self.spare = s.emitted;
        }
    }

    fn start(&mut self, now: f64) {
        self.take_in(now);
        if self.step.is_none() {
            self.begin(now);
        }
    }

    fn next_event(&self) -> Option<f64> {
        match &self.step {
            Some(s) => Some(s.end),
            None => {
                let intake = self.intake.front().map(|&(at, _)| at);
                let wake = self.policy.wake_at(&self.core);
                match (intake, wake) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        }
    }

    fn has_work(&self) -> bool {
        self.step.is_some() || self.intake_len() > 0 || self.core.waiting_len() > 0 || self.core.running_len() > 0
    }

    fn prefix_block_size(&self) -> Option<u32> {
        self.cfg.prefix_caching.then_some(self.cfg.block_size)
    }

    fn gauges(&self) -> Gauges {
        let kv = &self.core.kv;
        Gauges {
            running: self.core.running_len() as u32,
            waiting: (self.core.waiting_len() + self.intake_len()) as u32,
            kv_utilization: kv.used() as f64 / kv.capacity().max(1) as f64,
            preemptions: self.core.preemptions,
            prefix_queried_tokens: kv.counters.queried_blocks * self.cfg.block_size as u64,
            prefix_hit_tokens: kv.counters.hit_blocks * self.cfg.block_size as u64,
            spec_drafts: self.stats.spec_drafts,
            spec_draft_tokens: self.stats.spec_draft_tokens,
            spec_accepted_tokens: self.stats.spec_accepted_tokens,
        }
    }

    fn stats(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.preemptions = self.core.preemptions;
        s.kv_seq_capacity = self.core.kv.seq_capacity(self.plan.kv_tokens);
        if self.core.kv.prefix_caching() {
            s.prefix_cache = Some(self.core.kv.counters);
        }
        s.finish_averages();
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalog::Catalog;

    /// Llama-3.1-8B on an H100 whose memory is cut so that exactly `blocks` KV blocks fit; no
    /// intake time nor front end (requests are schedulable when submitted).
    pub(crate) fn small_engine(blocks: u32, tweak: impl FnOnce(&mut EngineConfig)) -> Engine {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        cfg.max_batched_tokens = 2048;
        cfg.efficiency.ingest_s = 0.0;
        cfg.efficiency.ingest_per_token_s = 0.0;
        cfg.efficiency.frontend_s = 0.0;
        cfg.efficiency.frontend_jitter_s = 0.0;
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
        EngineRequest { prompt_tokens: p, output_tokens: o, ..Default::default() }
    }

    fn emitted(out: &StepOut) -> Vec<(SeqId, bool)> {
        out.emitted.iter().map(|e| (e.seq, e.finished)).collect()
    }

    fn submit(e: &mut Engine, id: SeqId, r: EngineRequest) -> Result<(), Reject> {
        e.submit(id, r, 0.0)
    }

    #[test]
    fn prefill_then_decode_then_finish() {
        let mut e = small_engine(1000, |_| {});
        submit(&mut e, 1, req(100, 3)).unwrap();
        submit(&mut e, 2, req(50, 2)).unwrap();
        let out = e.step(0.0).unwrap();
        assert_eq!(out.kind, Some(StepKind::Prefill));
        assert_eq!(out.batch_tokens, 150);
        assert_eq!(emitted(&out), vec![(1, false), (2, false)]);
        let out = e.step(0.1).unwrap();
        assert_eq!(out.kind, Some(StepKind::Decode));
        assert_eq!(emitted(&out), vec![(1, false), (2, true)]);
        let out = e.step(0.2).unwrap();
        assert_eq!(emitted(&out), vec![(1, true)]);
        assert!(!e.has_work());
        assert_eq!(e.core.kv.available(), 1000, "finished sequences free their blocks");
        let s = e.stats();
        assert_eq!((s.prefill_steps, s.decode_steps, s.decode_tokens, s.prefill_tokens), (1, 2, 3, 150));
    }

    #[test]
    fn the_event_interface_delivers_tokens_at_the_end_of_the_iteration() {
        let mut e = small_engine(1000, |c| {
            c.efficiency.ingest_s = 0.001;
        });
        e.submit(1, req(100, 2), 0.0).unwrap();
        // the request is being taken in: nothing to start before 1 ms
        e.start(0.0);
        assert_eq!(e.next_event(), Some(0.001));
        e.start(0.001);
        let end = e.next_event().unwrap();
        assert!(end > 0.001);
        let mut out = Vec::new();
        e.complete(end - 1e-6, &mut out);
        assert!(out.is_empty(), "not yet");
        e.complete(end, &mut out);
        assert_eq!(out, vec![Emit { seq: 1, tokens: 1, finished: false }]);
        e.start(end);
        let end2 = e.next_event().unwrap();
        e.complete(end2, &mut out);
        assert_eq!(out[1], Emit { seq: 1, tokens: 1, finished: true });
        e.start(end2);
        assert_eq!((e.next_event(), e.has_work()), (None, false));
    }

    #[test]
    fn the_front_end_spreads_a_burst_of_equal_requests() {
        // eight requests sent at once pass a front end of 2 ms ± 2 ms each: they reach the
        // scheduler at eight different instants, the first one alone
        let mut e = small_engine(1000, |c| {
            c.efficiency.frontend_s = 2e-3;
            c.efficiency.frontend_jitter_s = 2e-3;
        });
        for id in 0..8 {
            e.submit(id, EngineRequest { seed: 11 + id, ..req(100, 5) }, 0.0).unwrap();
        }
        let mut ready: Vec<f64> = e.intake.iter().map(|&(t, _)| t).collect();
        assert!(ready.windows(2).all(|w| w[0] <= w[1]), "the intake is kept in order of readiness");
        ready.dedup();
        assert_eq!(ready.len(), 8, "{ready:?}");
        assert!(ready.iter().all(|&t| t > 0.0));
        let first = e.next_event().unwrap();
        assert_eq!(first, ready[0]);
        e.start(first);
        assert_eq!(e.step.as_ref().unwrap().batch_seqs, 1);
    }

    #[test]
    fn intake_spreads_a_burst() {
        // three requests submitted at once enter 1 ms apart: the first runs alone
        let mut e = small_engine(1000, |c| c.efficiency.ingest_s = 0.001);
        for id in 0..3 {
            e.submit(id, req(100, 5), 0.0).unwrap();
        }
        e.start(0.001);
        assert_eq!(e.step.as_ref().unwrap().batch_seqs, 1);
        assert_eq!(e.gauges().waiting, 2);
    }

    #[test]
    fn new_prefills_go_ahead_of_running_decodes() {
        let mut e = small_engine(1000, |_| {});
        submit(&mut e, 1, req(100, 10)).unwrap();
        e.step(0.0).unwrap();
        e.step(0.1).unwrap();
        submit(&mut e, 2, req(100, 10)).unwrap();
        // the running sequence stalls for a whole prefill iteration of the newcomer
        let out = e.step(0.2).unwrap();
        assert_eq!(out.kind, Some(StepKind::Prefill));
        assert_eq!(emitted(&out), vec![(2, false)]);
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
        submit(&mut e, 1, req(10, 50)).unwrap();
        e.step(0.0).unwrap();
        submit(&mut e, 2, req(600, 5)).unwrap();
        // decode of 1 first (1 token), then a 255-token chunk of 2
        let out = e.step(0.1).unwrap();
        assert_eq!(out.kind, Some(StepKind::Mixed));
        assert_eq!(out.batch_tokens, 256);
        assert_eq!(emitted(&out), vec![(1, false)], "a partial prefill emits nothing");
        let out = e.step(0.2).unwrap();
        assert_eq!(emitted(&out), vec![(1, false)]);
        // 600 − 255 − 255 = 90 left: this chunk ends the prompt, so 2 samples its first token
        let out = e.step(0.3).unwrap();
        assert_eq!(out.batch_tokens, 91);
        assert_eq!(emitted(&out), vec![(1, false), (2, false)]);
    }

    #[test]
    fn preemption_frees_the_most_recent_and_recomputes_it() {
        // 3 blocks of 16: two sequences of 16-token prompts fill 2 blocks; growing needs more
        let mut e = small_engine(3, |c| c.max_num_seqs = 8);
        e.core.limits.watermark = 0;
        submit(&mut e, 1, req(16, 20)).unwrap();
        submit(&mut e, 2, req(16, 20)).unwrap();
        e.step(0.0).unwrap(); // both prefilled: 2 blocks used
        let out = e.step(0.1).unwrap(); // 1 needs a 2nd block (ok: 3rd free); 2 then needs one too → preempted
        assert_eq!(out.preempted, vec![2]);
        assert_eq!(emitted(&out), vec![(1, false)]);
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
        assert_eq!(e.core.kv.available(), 3);
    }

    #[test]
    fn max_num_seqs_caps_the_batch() {
        let mut e = small_engine(1000, |c| c.max_num_seqs = 2);
        for i in 0..5 {
            submit(&mut e, i, req(10, 5)).unwrap();
        }
        let out = e.step(0.0).unwrap();
        assert_eq!(out.batch_seqs, 2);
        assert_eq!(e.gauges().waiting, 3);
    }

    #[test]
    fn rejections() {
        let mut e = small_engine(100, |c| c.max_waiting = 1);
        assert!(matches!(submit(&mut e, 1, req(130_000, 2000)), Err(Reject::OverContext { .. })));
        assert!(matches!(submit(&mut e, 1, req(4000, 1)), Err(Reject::OverBudget { .. })));
        assert!(matches!(submit(&mut e, 1, req(1000, 1000)), Err(Reject::OverCapacity { .. })));
        assert!(matches!(submit(&mut e, 1, req(0, 1)), Err(Reject::Empty)));
        submit(&mut e, 1, req(10, 1)).unwrap();
        assert!(matches!(submit(&mut e, 2, req(10, 1)), Err(Reject::QueueFull { limit: 1 })));
        assert_eq!(e.stats().rejected, 5);
    }

    #[test]
    fn abort_frees_blocks() {
        let mut e = small_engine(100, |_| {});
        submit(&mut e, 1, req(100, 50)).unwrap();
        e.step(0.0).unwrap();
        assert!(e.core.kv.available() < 100);
        e.abort(1);
        assert_eq!(e.core.kv.available(), 100);
        assert!(!e.has_work());
        e.abort(42); // unknown: ignored
    }

    /// The abort this engine had before it became O(1): out of every queue at once (the
    /// reference the lazy one must match).
    fn abort_eagerly(e: &mut Engine, id: SeqId) {
        let Some(slot) = e.core.slot_of(id) else { return };
        e.core.waiting.retain(|&s| s != slot);
        e.core.running.retain(|&s| s != slot);
        e.intake.retain(|&(_, s)| s != slot);
        e.core.remove(slot);
    }

    /// The sequences to abort after a few iterations: the middle and the last of the running
    /// list, the head, middle and tail of the waiting queue, the middle and tail of the intake.
    fn victims(e: &Engine) -> Vec<SeqId> {
        let id = |slot: usize| e.core.seq(slot).id;
        let mut v = Vec::new();
        let run = &e.core.running;
        v.extend(run.get(run.len() / 2).map(|&s| id(s)));
        v.extend(run.last().map(|&s| id(s)));
        let w = &e.core.waiting;
        for i in [0, w.len() / 2, w.len().saturating_sub(1)] {
            v.extend(w.get(i).map(|&s| id(s)));
        }
        let n = e.intake.len();
        for i in [n / 2, n.saturating_sub(1)] {
            v.extend(e.intake.get(i).map(|&(_, s)| id(s)));
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// One token delivery: the time's bits, the sequence, its tokens, whether it finished.
    type Delivery = (u64, SeqId, u32, bool);

    /// A named configuration change.
    type Tweak = (&'static str, fn(&mut EngineConfig));

    /// Drives an engine through 40 requests (submitted at 0 and taken in 2 ms apart), aborts
    /// `victims` after the 3rd iteration with `abort`, submits one aborted id again (and an
    /// unknown id is aborted), and runs to the end. Returns every token delivery (time bits,
    /// id, tokens, finished), the victims, and the statistics.
    fn run_with_aborts(
        tweak: impl Fn(&mut EngineConfig),
        abort: fn(&mut Engine, SeqId),
    ) -> (Vec<Delivery>, Vec<SeqId>, EngineStats) {
        let mut e = small_engine(120, |c| {
            c.efficiency.ingest_s = 0.002;
            c.max_num_seqs = 6;
            tweak(c);
        });
        for id in 0..40 {
            e.submit(id, req(40 + 7 * id as u32, 20 + (id as u32 * 13) % 17), 0.0).unwrap();
        }
        let (mut t, mut steps, mut trace, mut out) = (0.0, 0, Vec::new(), Vec::new());
        let mut aborted = Vec::new();
        loop {
            out.clear();
            e.complete(t, &mut out);
            for em in &out {
                trace.push((t.to_bits(), em.seq, em.tokens, em.finished));
            }
            if !out.is_empty() {
                steps += 1;
            }
            if steps == 3 && aborted.is_empty() {
                aborted = victims(&e);
                let (avail, running, waiting) = (e.core.kv.available(), e.gauges().running, e.gauges().waiting);
                for &id in &aborted {
                    abort(&mut e, id);
                    abort(&mut e, id); // twice: the second is ignored
                }
                abort(&mut e, 999); // unknown: ignored
                let g = e.gauges();
                assert!(e.core.kv.available() > avail, "the blocks are freed at once");
                assert_eq!(g.running + g.waiting, running + waiting - aborted.len() as u32, "gone from the counts");
                // the id may come back at once, as a new request
                e.submit(aborted[0], req(64, 8), t).unwrap();
            }
            e.start(t);
            match e.next_event() {
                Some(next) => t = next.max(t),
                None => break,
            }
        }
        assert!(!e.has_work());
        assert_eq!(e.core.kv.used(), 0, "every block came back");
        (trace, aborted, e.stats())
    }

    #[test]
    fn lazy_abort_schedules_the_others_exactly_as_an_eager_one() {
        let configs: [Tweak; 4] = [
            ("continuous", |_| {}),
            ("chunked prefill", |c| {
                c.chunked_prefill = true;
                c.max_batched_tokens = 128;
            }),
            ("tight KV: preemptions", |c| c.max_num_seqs = 16),
            ("static batching", |c| {
                c.batching = Batching::Static;
                c.batch_timeout_s = 0.01;
            }),
        ];
        for (name, tweak) in configs {
            let (lazy, victims, lazy_stats) = run_with_aborts(tweak, |e, id| e.abort(id));
            let (eager, victims2, eager_stats) = run_with_aborts(tweak, abort_eagerly);
            assert_eq!(victims, victims2);
            assert!(victims.len() >= 4, "{name}: aborts in several queues: {victims:?}");
            assert_eq!(lazy, eager, "{name}: every other sequence gets the same tokens at the same times");
            assert_eq!(lazy_stats, eager_stats, "{name}");
            // the aborted ones stop: only the re-submitted id finishes (as its new request)
            let finished: Vec<SeqId> = lazy.iter().filter(|x| x.3).map(|x| x.1).collect();
            assert_eq!(finished.len(), 40 - victims.len() + 1, "{name}");
            assert!(victims[1..].iter().all(|v| !finished.contains(v)), "{name}");
        }
        let (_, _, s) = run_with_aborts(|c| c.max_num_seqs = 16, |e, id| e.abort(id));
        assert!(s.preemptions > 0, "the tight-KV case preempts");
    }

    #[test]
    fn an_aborted_slot_is_reused_only_once_it_left_its_queue() {
        let mut e = small_engine(1000, |c| c.max_num_seqs = 1);
        for id in 0..4 {
            submit(&mut e, id, req(16, 4)).unwrap();
        }
        e.start(0.0); // 0 runs; 1, 2, 3 wait
        let slot2 = e.core.slot_of(2).unwrap();
        e.abort(2); // in the middle of the queue: it stays there, marked
        assert_eq!(e.core.waiting.len(), 3);
        assert_eq!(e.gauges().waiting, 2);
        submit(&mut e, 7, req(16, 4)).unwrap();
        assert_ne!(e.core.slot_of(7), Some(slot2), "a new request does not take the queued slot");
        e.start(0.0); // 7 joins the queue (the iteration in flight goes on)
        e.abort(1); // the head: 1 and then 2 (aborted) leave the queue at once
        assert_eq!(e.core.waiting.iter().map(|&s| e.core.seq(s).id).collect::<Vec<_>>(), vec![3, 7]);
        submit(&mut e, 8, req(16, 4)).unwrap();
        assert_eq!(e.core.slot_of(8), Some(slot2), "its slot is free once it left the queue");
        // the running one: freed now, out of the list before the next plan
        let before = e.core.kv.available();
        e.abort(0);
        assert!(e.core.kv.available() > before);
        assert_eq!(e.gauges().running, 0);
        assert_eq!(e.load(), 3);
    }

    #[test]
    fn fragmentation_is_the_last_partial_block() {
        // one sequence of 20 tokens in 16-token blocks: 32 slots hold 20 tokens
        let mut e = small_engine(100, |_| {});
        submit(&mut e, 1, req(20, 100)).unwrap();
        e.step(0.0).unwrap();
        let s = e.stats();
        assert!((s.mean_kv_fragmentation - 12.0 / 32.0).abs() < 1e-9, "{}", s.mean_kv_fragmentation);
    }

    #[test]
    fn a_cached_prefix_is_not_computed_again() {
        let mut e = small_engine(1000, |c| c.prefix_caching = true);
        // a 1000-token shared prefix and 24 own tokens: 64 blocks of 16, 62 of them the prefix
        let hashes = |own: u64| crate::kv::block_hashes(&[(7, 1000), (own, 24)], 16);
        let r = |own| EngineRequest {
            prompt_tokens: 1024,
            output_tokens: 2,
            block_hashes: hashes(own),
            ..Default::default()
        };
        submit(&mut e, 1, r(1)).unwrap();
        let first = e.step(0.0).unwrap();
        assert_eq!(first.batch_tokens, 1024);
        submit(&mut e, 2, r(2)).unwrap();
        // blocks 0..62 (992 tokens) are the shared prefix; block 62 mixes prefix and own tokens
        let second = e.step(0.1).unwrap();
        assert_eq!(second.kind, Some(StepKind::Prefill));
        assert_eq!(second.batch_tokens, 1024 - 62 * 16, "only the uncached tail is computed");
        assert!(second.time.total_s < first.time.total_s / 2.0);
        let c = e.stats().prefix_cache.unwrap();
        assert_eq!((c.queried_blocks, c.hit_blocks), (63 + 63, 62));
    }
}
