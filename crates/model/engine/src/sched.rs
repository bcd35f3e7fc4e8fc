//! Scheduling: which sequences run in the next iteration, and how many tokens each computes.
//!
//! The engine keeps its sequences, queues and KV manager in a [`Core`]; a [`Policy`] plans each
//! iteration by calling the core's building blocks (admit the head of the queue, schedule the
//! running sequences, preempt). [`ContinuousBatching`] is iteration-level batching (vLLM's, with
//! prefill-first, decode-first or chunked prefill); [`StaticBatching`] forms request-level batches
//! that run to their longest sequence.

use std::collections::VecDeque;

use crate::config::Scheduling;
use crate::cost::BatchShape;
use crate::fasthash::{FastMap, fast_map};
use crate::kv::{BlockTable, KvManager};
use crate::serving::SeqId;

/// One sequence in the engine.
///
/// Laid out for the per-iteration walk over the running sequences: what every iteration reads
/// or writes comes first and fills one cache line (the alignment keeps it to one), the rest
/// follows. A few hundred running sequences then stay in the first-level cache.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Seq {
    pub id: SeqId,
    pub prompt: u64,
    /// Tokens whose KV is in the cache.
    pub computed: u64,
    pub table: BlockTable,
    /// Tokens to generate before it stops.
    pub target: u32,
    pub generated: u32,
    /// It has generated all its tokens but stays in its static batch as padding.
    pub done: bool,
    /// Its client went away ([`Core::abort`]): its blocks are freed, and it leaves its queue when
    /// the engine next looks there.
    pub aborted: bool,
    /// Which queue holds it.
    pub place: Place,
    /// Full blocks of computed tokens already offered to the prefix cache (those with a hash are
    /// registered).
    pub registered: u32,
    // -- the second cache line: read at admission and when a block fills --
    /// Hashes of the sequence's full blocks (prompt, then output), for the prefix cache.
    pub hashes: Vec<u64>,
    /// Leading blocks known to be cached (every one before this index): registering again
    /// starts here ([`KvManager::register_from`]).
    pub cached_upto: usize,
    /// Tokens of KV reserved at admission (pre-allocation); 0: blocks as it grows.
    pub reserve: u64,
    /// When it became schedulable, seconds.
    pub arrived: f64,
    /// Its own random stream (how many drafted tokens are accepted), from the request's seed.
    pub rng: Option<Box<rand_chacha::ChaCha8Rng>>,
}

// the per-iteration fields fit the first cache line
const _: () = assert!(std::mem::offset_of!(Seq, registered) + 4 <= 64);

/// Which queue holds a sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Place {
    /// Being taken in (the engine's intake): not schedulable yet.
    #[default]
    Intake,
    /// In the waiting queue.
    Waiting,
    /// In the running list.
    Running,
}

impl Seq {
    /// Tokens known so far: the prompt and every generated token.
    pub fn known(&self) -> u64 {
        self.prompt + self.generated as u64
    }
    /// Tokens to compute before the next token can be sampled.
    pub fn pending(&self) -> u64 {
        self.known() - self.computed
    }
    /// Whether the next iteration for it is a one-token decode.
    pub fn decoding(&self) -> bool {
        self.pending() == 1 && self.computed > 0
    }
}

/// How many sequences ahead a walk over the running list prefetches ([`Core::prefetch`]).
pub const PREFETCH_AHEAD: usize = 6;

/// Limits a policy schedules within.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_num_seqs: u32,
    pub max_batched_tokens: u32,
    /// Blocks kept free at admission (vLLM's watermark), so running sequences can grow.
    pub watermark: u32,
    /// Speculative decoding: tokens drafted per decoding sequence per iteration (0: off).
    pub spec_k: u32,
}

/// Sequences, queues and the KV cache: what a policy plans over.
pub struct Core {
    pub kv: KvManager,
    pub limits: Limits,
    slots: Vec<Option<Seq>>,
    free_slots: Vec<usize>,
    index: FastMap<SeqId, usize>,
    /// FCFS queue of admitted-but-not-running sequences (preempted ones return to its head).
    pub waiting: VecDeque<usize>,
    /// Running sequences in admission order.
    pub running: Vec<usize>,
    /// The iteration being planned: (slot, tokens it computes, tokens drafted for it to verify).
    pub batch: Vec<(usize, u64, u32)>,
    pub shape: BatchShape,
    /// Sequences preempted while planning this iteration.
    pub preempted: Vec<SeqId>,
    pub preemptions: u64,
    /// Aborted sequences still in `waiting` (never at its head) and in `running` (dropped at the
    /// start of the next iteration's planning, [`Core::drop_aborted_running`]).
    aborted_waiting: usize,
    aborted_running: usize,
}

impl Core {
    pub fn new(kv: KvManager, limits: Limits) -> Self {
        Core {
            kv,
            limits,
            slots: Vec::new(),
            free_slots: Vec::new(),
            index: fast_map(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            batch: Vec::new(),
            shape: BatchShape::default(),
            preempted: Vec::new(),
            preemptions: 0,
            aborted_waiting: 0,
            aborted_running: 0,
        }
    }

    pub fn seq(&self, slot: usize) -> &Seq {
        self.slots[slot].as_ref().expect("live slot")
    }

    pub fn seq_mut(&mut self, slot: usize) -> &mut Seq {
        self.slots[slot].as_mut().expect("live slot")
    }

    /// Fetches `slot`'s per-iteration fields ahead of their use ([`crate::prefetch`]); an
    /// out-of-range slot is ignored.
    #[inline(always)]
    pub fn prefetch(&self, slot: Option<usize>) {
        if let Some(s) = slot.and_then(|i| self.slots.get(i)) {
            crate::hint::prefetch(s);
        }
    }

    pub fn slot_of(&self, id: SeqId) -> Option<usize> {
        self.index.get(&id).copied()
    }

    pub fn is_live(&self, id: SeqId) -> bool {
        self.index.contains_key(&id)
    }

    /// Stores a new sequence; returns its slot (not queued yet).
    pub fn insert(&mut self, seq: Seq) -> usize {
        let id = seq.id;
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
        slot
    }

    /// Removes a sequence (finished or aborted) and frees its blocks. It must already be out of
    /// the queues.
    pub fn remove(&mut self, slot: usize) {
        if let Some(mut seq) = self.slots[slot].take() {
            self.kv.free(&mut seq.table);
            self.index.remove(&seq.id);
            self.free_slots.push(slot);
        }
    }

    /// Sequences in the waiting queue, not counting aborted ones.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len() - self.aborted_waiting
    }

    /// Running sequences, not counting aborted ones.
    pub fn running_len(&self) -> usize {
        self.running.len() - self.aborted_running
    }

    /// Drops a sequence whose client went away, in O(1): its blocks are freed and its id forgotten
    /// at once (the id may be submitted again), while its slot stays taken until the sequence has
    /// left its queue (the waiting queue's head is never an aborted one; the running list drops
    /// them before the next plan; the caller drops those in its intake). Returns where it was
    /// and its slot; `None` for an unknown id.
    pub fn abort(&mut self, id: SeqId) -> Option<(Place, usize)> {
        let slot = self.index.remove(&id)?;
        let seq = self.slots[slot].as_mut().expect("an indexed slot is live");
        self.kv.free(&mut seq.table);
        seq.aborted = true;
        let place = seq.place;
        match place {
            Place::Intake => {}
            Place::Waiting => {
                self.aborted_waiting += 1;
                self.skip_aborted_waiting();
            }
            Place::Running => self.aborted_running += 1,
        }
        Some((place, slot))
    }

    /// Frees the slot of an aborted sequence that has left every queue.
    pub fn release_aborted(&mut self, slot: usize) {
        debug_assert!(self.slots[slot].as_ref().is_some_and(|q| q.aborted));
        self.slots[slot] = None;
        self.free_slots.push(slot);
    }

    /// Pops aborted sequences off the head of the waiting queue (amortized O(1): each is popped
    /// once).
    fn skip_aborted_waiting(&mut self) {
        while let Some(&slot) = self.waiting.front() {
            if !self.seq(slot).aborted {
                break;
            }
            self.waiting.pop_front();
            self.aborted_waiting -= 1;
            self.release_aborted(slot);
        }
    }

    /// Takes aborted sequences out of the running list (one pass over it, only when some were
    /// aborted: planning an iteration passes over the running list anyway).
    pub fn drop_aborted_running(&mut self) {
        if self.aborted_running == 0 {
            return;
        }
        let mut gone = Vec::new();
        let slots = &self.slots;
        self.running.retain(|&s| {
            let keep = !slots[s].as_ref().is_some_and(|q| q.aborted);
            if !keep {
                gone.push(s);
            }
            keep
        });
        for slot in gone {
            self.release_aborted(slot);
        }
        self.aborted_running = 0;
    }

    /// Moves a sequence whose intake ended to the back of the waiting queue.
    pub fn enqueue(&mut self, slot: usize, arrived: f64) {
        let seq = self.seq_mut(slot);
        seq.arrived = arrived;
        seq.place = Place::Waiting;
        self.waiting.push_back(slot);
    }

    /// Takes the head of the waiting queue into the running list.
    fn start_head(&mut self, slot: usize) {
        debug_assert_eq!(self.waiting.front(), Some(&slot));
        self.waiting.pop_front();
        self.seq_mut(slot).place = Place::Running;
        self.running.push(slot);
        self.skip_aborted_waiting();
    }

    /// Takes sequences that left (finished) out of the running list.
    pub fn drop_removed_from_running(&mut self) {
        let slots = &self.slots;
        self.running.retain(|&s| slots[s].is_some());
    }

    /// Registers in the prefix cache the blocks of `slot` that its computed tokens now fill.
    #[inline]
    pub fn register_computed_blocks(&mut self, slot: usize) {
        // the common case (every iteration of every sequence): no block filled since the last
        // call, found without a division
        let bs = self.kv.block_size() as u64;
        let seq = self.seq(slot);
        if seq.computed >= (seq.registered as u64 + 1) * bs {
            self.register_filled_blocks(slot);
        }
    }

    #[inline(never)]
    fn register_filled_blocks(&mut self, slot: usize) {
        let bs = self.kv.block_size() as u64;
        let seq = self.slots[slot].as_mut().expect("live slot");
        let full = (seq.computed / bs) as u32;
        let n = (full as usize).min(seq.hashes.len());
        seq.cached_upto = self.kv.register_from(&seq.table, &seq.hashes[..n], seq.cached_upto);
        seq.registered = full;
    }

    /// Whether every running sequence is padding (a static batch has finished).
    pub fn batch_done(&self) -> bool {
        self.running.iter().all(|&s| self.slots[s].as_ref().is_none_or(|q| q.done))
    }

    /// Removes every running sequence (the end of a static batch).
    pub fn end_batch(&mut self) {
        for slot in std::mem::take(&mut self.running) {
            self.remove(slot);
        }
    }

    /// Tokens stored in the KV cache by running sequences.
    pub fn stored_tokens(&self) -> u64 {
        self.running.iter().map(|&s| self.slots[s].as_ref().map_or(0, |q| q.computed)).sum()
    }

    /// Frees a running sequence's blocks and puts it back at the head of the queue (it will
    /// recompute its prompt and the tokens generated so far; cached blocks may spare some).
    pub fn preempt(&mut self, slot: usize) {
        if self.running.last() == Some(&slot) {
            self.running.pop();
        } else {
            self.running.retain(|&s| s != slot);
        }
        let seq = self.slots[slot].as_mut().expect("live slot");
        seq.place = Place::Waiting;
        self.kv.free(&mut seq.table);
        seq.computed = 0;
        seq.registered = 0;
        seq.cached_upto = 0;
        self.preempted.push(seq.id);
        self.waiting.push_front(slot);
        self.preemptions += 1;
    }

    /// Makes room for `slot` to hold `tokens` tokens, preempting the most recently admitted
    /// running sequences as needed. Returns false if `slot` itself had to be preempted.
    /// Padding (finished sequences a static batch keeps) gives its blocks up first: it has
    /// nothing left to compute, so it leaves the batch rather than the queue's head (requeued, it
    /// would be computed again for a request that has already ended).
    pub fn reserve(&mut self, slot: usize, tokens: u64) -> bool {
        loop {
            let seq = self.slots[slot].as_mut().expect("live slot");
            if self.kv.grow(&mut seq.table, tokens) {
                return true;
            }
            if let Some(i) = self.running.iter().rposition(|&s| self.slots[s].as_ref().is_some_and(|q| q.done)) {
                let padding = self.running.remove(i);
                self.remove(padding);
                continue;
            }
            let victim = *self.running.last().expect("a sequence that needs blocks is running");
            self.preempt(victim);
            if victim == slot {
                return false;
            }
        }
    }

    /// The cached prefix `slot` would attach on its first admission: blocks found, and how many
    /// of them no one references (attaching those takes them out of the free pool). Counts no
    /// query.
    fn cached_prefix(&self, slot: usize) -> (usize, u32) {
        let seq = self.seq(slot);
        if seq.computed > 0 || !seq.table.is_empty() || !self.kv.prefix_caching() {
            return (0, 0);
        }
        let hashes = &seq.hashes[..self.cacheable(seq)];
        let hit = self.kv.peek(hashes);
        (hit, self.kv.unreferenced(&hashes[..hit]))
    }

    /// Blocks of `seq` the prefix cache may serve: full blocks before its last known token (at
    /// least that one is computed, to sample from).
    fn cacheable(&self, seq: &Seq) -> usize {
        let bs = self.kv.block_size() as u64;
        (((seq.known() - 1) / bs) as usize).min(seq.hashes.len())
    }

    /// Attaches `slot`'s cached prefix (counted as one query): those tokens need no computing.
    fn attach_cached_prefix(&mut self, slot: usize) {
        let bs = self.kv.block_size() as u64;
        let n = self.cacheable(self.seq(slot));
        let seq = self.slots[slot].as_mut().expect("live slot");
        if seq.computed > 0 || !seq.table.is_empty() || !self.kv.prefix_caching() {
            return;
        }
        let hit = self.kv.lookup(&seq.hashes[..n]);
        self.kv.attach(&mut seq.table, &seq.hashes[..hit]);
        seq.computed = hit as u64 * bs;
        seq.registered = hit as u32;
        seq.cached_upto = hit;
    }

    /// Admits the head of the waiting queue into the batch if slots, `budget` and KV blocks (above
    /// the watermark) allow; it computes `min(pending, budget)` tokens when `chunk`, else all of
    /// them. Its cached prefix is attached only once it is admitted. Returns whether it was.
    pub fn admit_head(&mut self, budget: &mut u64, chunk: bool) -> bool {
        let Some(&slot) = self.waiting.front() else { return false };
        if self.running.len() >= self.limits.max_num_seqs as usize || *budget == 0 {
            return false;
        }
        let bs = self.kv.block_size() as u64;
        let (hit, idle) = self.cached_prefix(slot);
        let (known, computed, held, reserve) = {
            let s = self.seq(slot);
            (s.known(), s.computed.max(hit as u64 * bs), s.table.len() as u32, s.reserve)
        };
        let pending = known - computed;
        let tokens = if chunk { pending.min(*budget) } else { pending };
        if tokens > *budget {
            return false;
        }
        // a pre-allocated sequence takes its whole reservation now; cached blocks are shared,
        // but those no one references leave the free pool
        let hold = (computed + tokens).max(reserve);
        let fresh = (hold.div_ceil(bs) as u32).saturating_sub(held + hit as u32);
        if self.kv.available() < fresh + idle + self.limits.watermark {
            return false;
        }
        self.attach_cached_prefix(slot);
        let ok = {
            let seq = self.slots[slot].as_mut().expect("live slot");
            self.kv.grow(&mut seq.table, hold)
        };
        debug_assert!(ok);
        self.start_head(slot);
        self.batch.push((slot, tokens, 0));
        if self.seq(slot).decoding() {
            // a hand-over (its KV arrived computed): it joins straight into decoding
            self.shape.add_decode(computed + 1);
        } else {
            self.shape.add_prefill(tokens, computed);
        }
        *budget -= tokens;
        true
    }

    /// Admits the head alone, ignoring the watermark: when nothing else can run (every running
    /// sequence was preempted), this keeps the engine moving. If even that does not fit, the head
    /// gives its cached blocks back and waits.
    pub fn force_admit_head(&mut self, chunk: bool) {
        let Some(&slot) = self.waiting.front() else { return };
        self.attach_cached_prefix(slot);
        let max = self.limits.max_batched_tokens as u64;
        let (pending, computed, reserve) = (self.seq(slot).pending(), self.seq(slot).computed, self.seq(slot).reserve);
        let tokens = if chunk { pending.min(max) } else { pending };
        let seq = self.slots[slot].as_mut().expect("live slot");
        if self.kv.grow(&mut seq.table, (computed + tokens).max(reserve)) {
            self.start_head(slot);
            self.batch.push((slot, tokens, 0));
            self.shape.add_prefill(tokens, computed);
        } else {
            self.kv.free(&mut seq.table);
            (seq.computed, seq.registered, seq.cached_upto) = (0, 0, 0);
        }
    }

    /// Schedules the running sequences in admission order: a decode takes one token, an
    /// unfinished prefill (chunked) what the budget leaves. A sequence that needs a block when
    /// none is free preempts the most recently admitted ones.
    pub fn schedule_running(&mut self, budget: &mut u64) {
        self.schedule_running_live(budget);
    }

    /// As [`Core::schedule_running`], skipping padding (finished sequences of a static batch).
    pub fn schedule_running_live(&mut self, budget: &mut u64) {
        let bs = self.kv.block_size() as u64;
        let mut i = 0;
        while i < self.running.len() {
            self.prefetch(self.running.get(i + PREFETCH_AHEAD).copied());
            let slot = self.running[i];
            if self.seq(slot).done {
                i += 1;
                continue;
            }
            let (pending, computed, decoding, held) = {
                let s = self.seq(slot);
                (s.pending(), s.computed, s.decoding(), s.table.len() as u64 * bs)
            };
            let tokens = pending.min(*budget);
            if tokens == 0 {
                break;
            }
            // speculative decoding: the last token and `k` drafted ones are verified together
            let k = self.limits.spec_k;
            let drafted = if decoding && k > 0 && *budget > k as u64 { k } else { 0 };
            let positions = tokens + drafted as u64;
            // the common case, without a call: its blocks already have room
            if computed + positions > held && !self.reserve(slot, computed + positions) {
                continue; // preempted itself; `running` shrank, `i` now points past the end
            }
            self.batch.push((slot, tokens, drafted));
            if drafted > 0 {
                self.shape.add_verify(positions, computed);
            } else if decoding {
                self.shape.add_decode(computed + 1);
            } else {
                self.shape.add_prefill(tokens, computed);
            }
            *budget -= positions;
            i += 1;
        }
        // a preemption may have removed sequences already batched: drop them from the batch
        if !self.preempted.is_empty() {
            let running = &self.running;
            self.batch.retain(|(s, _, _)| running.contains(s));
        }
    }
}

/// Plans iterations.
pub trait Policy: Send {
    /// Fills `core.batch` and `core.shape` for the iteration starting at `now` (both start
    /// empty). An empty batch means nothing runs now.
    fn plan(&mut self, core: &mut Core, now: f64);
    /// Whether a prompt may be longer than the token budget (it is split into chunks, or the
    /// policy prefills whole batches).
    fn takes_long_prompts(&self) -> bool;
    /// Whether a sequence that finished stays, as padding, until its batch ends.
    fn keeps_finished(&self) -> bool {
        false
    }
    /// When the policy wants to plan again although nothing else happens (a batch timeout).
    fn wake_at(&self, _core: &Core) -> Option<f64> {
        None
    }
}

/// Iteration-level (continuous) batching: sequences join and leave at every iteration.
///
/// - prefill-first (vLLM V0's default): when waiting sequences fit, the iteration is a prefill of
///   them, ahead of the running decodes; otherwise every running sequence decodes one token;
/// - decode-first: every running sequence decodes, and whole waiting prompts join in the budget
///   that is left;
/// - chunked: running sequences first (decodes, then unfinished prompt chunks), then waiting
///   prompts, split to fill the token budget.
#[derive(Clone, Copy, Debug)]
pub struct ContinuousBatching {
    pub scheduling: Scheduling,
}

impl Policy for ContinuousBatching {
    fn plan(&mut self, core: &mut Core, _now: f64) {
        let mut budget = core.limits.max_batched_tokens as u64;
        match self.scheduling {
            Scheduling::Chunked => {
                core.schedule_running(&mut budget);
                while core.admit_head(&mut budget, true) {}
            }
            Scheduling::DecodeFirst => {
                core.schedule_running(&mut budget);
                while core.admit_head(&mut budget, false) {}
            }
            Scheduling::PrefillFirst => {
                while core.admit_head(&mut budget, false) {}
                if core.batch.is_empty() {
                    let mut unlimited = u64::MAX;
                    core.schedule_running(&mut unlimited);
                }
            }
        }
        if core.batch.is_empty() {
            // nothing fits (e.g. every running sequence was preempted): the queue would wait for
            // blocks no one frees unless something runs, so the head runs alone
            core.force_admit_head(self.scheduling == Scheduling::Chunked);
        }
    }

    fn takes_long_prompts(&self) -> bool {
        self.scheduling == Scheduling::Chunked
    }
}

/// Request-level (static) batching, as before iteration-level scheduling: a batch of up to
/// `max_num_seqs` forms from the queue (it waits at most `timeout_s` for the batch to fill),
/// prefills together, and decodes until its longest sequence finishes. A finished sequence stays
/// as padding: it is computed (its context frozen) and holds its KV until the batch ends; new
/// requests wait for the next batch.
#[derive(Clone, Copy, Debug)]
pub struct StaticBatching {
    pub timeout_s: f64,
}

impl Policy for StaticBatching {
    fn plan(&mut self, core: &mut Core, now: f64) {
        if !core.running.is_empty() && core.batch_done() {
            core.end_batch();
        }
        if core.running.is_empty() {
            let Some(&head) = core.waiting.front() else { return };
            let full = core.waiting_len() >= core.limits.max_num_seqs as usize;
            if !full && now + 1e-12 < core.seq(head).arrived + self.timeout_s {
                return; // wait for the batch to fill
            }
            let mut unlimited = u64::MAX;
            while core.admit_head(&mut unlimited, false) {}
            if core.batch.is_empty() {
                core.force_admit_head(false);
            }
            return;
        }
        // the batch decodes; finished sequences are padding at their final context
        let mut unlimited = u64::MAX;
        core.schedule_running_live(&mut unlimited);
        // (after scheduling: padding that gave its blocks to a live sequence has left the batch)
        let padding: Vec<u64> =
            core.running.iter().map(|&s| core.seq(s)).filter(|q| q.done).map(|q| q.computed).collect();
        for context in padding {
            core.shape.add_padding(context);
        }
    }

    fn takes_long_prompts(&self) -> bool {
        true
    }

    fn keeps_finished(&self) -> bool {
        true
    }

    fn wake_at(&self, core: &Core) -> Option<f64> {
        match core.waiting.front() {
            Some(&head) if core.running_len() == 0 => Some(core.seq(head).arrived + self.timeout_s),
            _ => None,
        }
    }
}
