//! Deployments of several engines behind one [`ServingEngine`]: replicas behind a router, and
//! prefill/decode disaggregation (prefill instances hand each request's KV over a link to decode
//! instances). Drivers run them exactly as they run one engine.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::config::EngineConfig;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::fasthash::{FastMap, fast_map};
use crate::serving::{Emit, EngineRequest, EngineStats, Gauges, Reject, SeqId, ServingEngine};
use crate::topology::{Disaggregation, Router, TransferStats};

/// An engine deployment from its configuration: one engine, replicas, or prefill and decode
/// pools.
pub fn build(cfg: &EngineConfig) -> Result<Box<dyn ServingEngine>, EngineError> {
    match (&cfg.disaggregation, cfg.replicas) {
        (Some(d), _) => Ok(Box::new(Disaggregated::new(cfg, d)?)),
        (None, 0 | 1) => Ok(Box::new(Engine::new(cfg.clone())?)),
        (None, n) => Ok(Box::new(Replicas::new(cfg, n)?)),
    }
}

/// One engine of a deployment, as its own configuration (a single replica).
fn unit(cfg: &EngineConfig) -> Result<Engine, EngineError> {
    let mut c = cfg.clone();
    c.replicas = 1;
    c.disaggregation = None;
    Engine::new(c)
}

/// Statistics of engines running side by side: counters summed, busy time summed, averages
/// weighted by each engine's busy time; each engine's own statistics in `parts`.
fn combine(parts: Vec<EngineStats>, role: &str, elapsed_s: f64) -> EngineStats {
    let mut s = EngineStats::default();
    for p in &parts {
        s.steps += p.steps;
        s.prefill_steps += p.prefill_steps;
        s.decode_steps += p.decode_steps;
        s.mixed_steps += p.mixed_steps;
        s.compute_bound_steps += p.compute_bound_steps;
        s.memory_bound_steps += p.memory_bound_steps;
        s.busy_s += p.busy_s;
        s.prefill_tokens += p.prefill_tokens;
        s.decode_tokens += p.decode_tokens;
        s.preemptions += p.preemptions;
        s.rejected += p.rejected;
        s.max_running = s.max_running.max(p.max_running);
        s.max_kv_utilization = s.max_kv_utilization.max(p.max_kv_utilization);
        s.spec_drafts += p.spec_drafts;
        s.spec_draft_tokens += p.spec_draft_tokens;
        s.spec_accepted_tokens += p.spec_accepted_tokens;
        s.spec_draft_s += p.spec_draft_s;
        s.late_steps += p.late_steps;
        if let Some(c) = p.prefix_cache {
            let t = s.prefix_cache.get_or_insert_with(Default::default);
            t.queried_blocks += c.queried_blocks;
            t.hit_blocks += c.hit_blocks;
            t.evicted_blocks += c.evicted_blocks;
        }
    }
    let busy: f64 = parts.iter().map(|p| p.busy_s).sum();
    if busy > 0.0 {
        let w = |f: fn(&EngineStats) -> f64| parts.iter().map(|p| f(p) * p.busy_s).sum::<f64>() / busy;
        s.mean_kv_utilization = w(|p| p.mean_kv_utilization);
        s.mean_kv_fragmentation = w(|p| p.mean_kv_fragmentation);
        s.mean_kv_used_share = w(|p| p.mean_kv_used_share);
    }
    // running and waiting add up across engines that run side by side
    s.mean_running = parts.iter().map(|p| p.mean_running).sum();
    s.mean_waiting = parts.iter().map(|p| p.mean_waiting).sum();
    s.mean_kv_reserved_tokens = parts.iter().map(|p| p.mean_kv_reserved_tokens).sum();
    s.mean_kv_stored_tokens = parts.iter().map(|p| p.mean_kv_stored_tokens).sum();
    s.series = parts.first().map(|p| p.series.clone()).unwrap_or_default();
    s.parts = parts
        .into_iter()
        .enumerate()
        .map(|(i, mut p)| {
            p.role = Some(format!("{role} {i}"));
            p.utilization = (elapsed_s > 0.0).then(|| p.busy_s / elapsed_s);
            p
        })
        .collect();
    s
}

fn sum_gauges(engines: &[Engine]) -> Gauges {
    let mut g = Gauges::default();
    for e in engines {
        let x = e.gauges();
        g.running += x.running;
        g.waiting += x.waiting;
        g.kv_utilization += x.kv_utilization / engines.len() as f64;
        g.preemptions += x.preemptions;
        g.prefix_queried_tokens += x.prefix_queried_tokens;
        g.prefix_hit_tokens += x.prefix_hit_tokens;
        g.spec_drafts += x.spec_drafts;
        g.spec_draft_tokens += x.spec_draft_tokens;
        g.spec_accepted_tokens += x.spec_accepted_tokens;
    }
    g
}

/// Appends to `out` what `engines` completed by `now`, and forgets where each sequence that
/// finished was placed.
fn complete_and_forget(engines: &mut [Engine], now: f64, out: &mut Vec<Emit>, placed: &mut FastMap<SeqId, usize>) {
    let from = out.len();
    for e in engines {
        e.complete(now, out);
    }
    for e in &out[from..] {
        if e.finished {
            placed.remove(&e.seq);
        }
    }
}

fn earliest(engines: &[Engine]) -> Option<f64> {
    engines.iter().filter_map(|e| e.next_event()).reduce(f64::min)
}

/// The least loaded engine among `candidates` (the first on a tie).
fn least_loaded(engines: &[Engine], candidates: impl Iterator<Item = usize>) -> usize {
    candidates.min_by_key(|&i| engines[i].load()).unwrap_or(0)
}

/// `n` replicas of one engine behind a router.
pub struct Replicas {
    engines: Vec<Engine>,
    router: Router,
    owner: FastMap<SeqId, usize>,
    next: usize,
    now: f64,
}

impl Replicas {
    pub fn new(cfg: &EngineConfig, n: u32) -> Result<Self, EngineError> {
        let engines = (0..n.max(1)).map(|_| unit(cfg)).collect::<Result<Vec<_>, _>>()?;
        Ok(Replicas { engines, router: cfg.router, owner: fast_map(), next: 0, now: 0.0 })
    }

    fn route(&mut self, r: &EngineRequest) -> usize {
        let n = self.engines.len();
        match self.router {
            Router::RoundRobin => {
                self.next = (self.next + 1) % n;
                (self.next + n - 1) % n
            }
            Router::LeastLoaded => least_loaded(&self.engines, 0..n),
            Router::PrefixAware => {
                let best = (0..n).map(|i| self.engines[i].cached_prefix(&r.block_hashes)).max().unwrap_or(0);
                let holding = (0..n).filter(|&i| self.engines[i].cached_prefix(&r.block_hashes) == best);
                least_loaded(&self.engines, holding)
            }
        }
    }
}

impl ServingEngine for Replicas {
    fn submit(&mut self, id: SeqId, r: EngineRequest, now: f64) -> Result<(), Reject> {
        let i = self.route(&r);
        self.engines[i].submit(id, r, now)?;
        self.owner.insert(id, i);
        Ok(())
    }

    fn abort(&mut self, id: SeqId) {
        if let Some(i) = self.owner.remove(&id) {
            self.engines[i].abort(id);
        }
    }

    fn complete(&mut self, now: f64, out: &mut Vec<Emit>) {
        self.now = self.now.max(now);
        complete_and_forget(&mut self.engines, now, out, &mut self.owner);
    }

    fn start(&mut self, now: f64) {
        self.now = self.now.max(now);
        for e in &mut self.engines {
            e.start(now);
        }
    }

    fn next_event(&self) -> Option<f64> {
        earliest(&self.engines)
    }

    fn has_work(&self) -> bool {
        self.engines.iter().any(|e| e.has_work())
    }

    fn prefix_block_size(&self) -> Option<u32> {
        self.engines[0].prefix_block_size()
    }

    fn gauges(&self) -> Gauges {
        sum_gauges(&self.engines)
    }

    fn stats(&self) -> EngineStats {
        combine(self.engines.iter().map(|e| e.stats()).collect(), "replica", self.now)
    }
}

/// A KV hand-over in flight: request `id`, due at `at`.
#[derive(PartialEq)]
struct Transfer {
    at: f64,
    id: SeqId,
}
impl Eq for Transfer {}
impl PartialOrd for Transfer {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Transfer {
    // a min-heap on time, then id
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.total_cmp(&self.at).then(o.id.cmp(&self.id))
    }
}

/// Prefill and decode pools joined by a link: a request prefills (and samples its first token)
/// on a prefill instance; its KV then moves over that instance's link, FIFO; a decode instance
/// takes it over and generates the rest. The first token reaches the client when the hand-over
/// completes, so TTFT includes the transfer.
pub struct Disaggregated {
    prefill: Vec<Engine>,
    decode: Vec<Engine>,
    d: Disaggregation,
    /// KV bytes per prompt token, whole model (all tensor-parallel shards move at once).
    kv_bytes_per_token: f64,
    /// Requests between submission and their hand-over: the original request and its instance.
    handing: FastMap<SeqId, (EngineRequest, usize)>,
    link_free_at: Vec<f64>,
    link_busy_s: Vec<f64>,
    transfers: BinaryHeap<Transfer>,
    /// Requests on a decode instance, and which.
    decoding: FastMap<SeqId, usize>,
    stats: TransferStats,
    transfer_s: f64,
    scratch: Vec<Emit>,
    now: f64,
}

impl Disaggregated {
    pub fn new(cfg: &EngineConfig, d: &Disaggregation) -> Result<Self, EngineError> {
        let pool = |n: u32, caching: bool| {
            (0..n.max(1))
                .map(|_| {
                    let mut c = cfg.clone();
                    c.prefix_caching |= caching;
                    unit(&c)
                })
                .collect::<Result<Vec<_>, _>>()
        };
        // append-prefill needs the decode instances to keep what they computed
        let decode = pool(d.decode, d.ppd)?;
        Ok(Disaggregated {
            prefill: pool(d.prefill, false)?,
            kv_bytes_per_token: cfg.model.kv_bytes_per_token(cfg.kv_dtype),
            link_free_at: vec![0.0; d.prefill.max(1) as usize],
            link_busy_s: vec![0.0; d.prefill.max(1) as usize],
            d: d.clone(),
            decode,
            handing: fast_map(),
            transfers: BinaryHeap::new(),
            decoding: fast_map(),
            stats: TransferStats::default(),
            transfer_s: 0.0,
            scratch: Vec::new(),
            now: 0.0,
        })
    }

    /// The decode instance holding the most of this request's history, when any holds some.
    fn holder(&self, r: &EngineRequest) -> Option<usize> {
        let hits: Vec<usize> = self.decode.iter().map(|e| e.cached_prefix(&r.block_hashes)).collect();
        let best = hits.iter().copied().max().unwrap_or(0);
        (best > 0).then(|| least_loaded(&self.decode, (0..hits.len()).filter(|&i| hits[i] == best)))
    }
}

impl ServingEngine for Disaggregated {
    fn submit(&mut self, id: SeqId, r: EngineRequest, now: f64) -> Result<(), Reject> {
        if self.d.ppd
            && let Some(i) = self.holder(&r)
        {
            self.decode[i].submit(id, r, now)?;
            self.decoding.insert(id, i);
            self.stats.append_prefills += 1;
            return Ok(());
        }
        let p = least_loaded(&self.prefill, 0..self.prefill.len());
        // the prefill instance computes the prompt and samples the first token
        let first = EngineRequest { output_tokens: 1, max_tokens: 1, ..r.clone() };
        self.prefill[p].submit(id, first, now)?;
        self.handing.insert(id, (r, p));
        Ok(())
    }

    fn abort(&mut self, id: SeqId) {
        if let Some((_, p)) = self.handing.remove(&id) {
            self.prefill[p].abort(id);
        }
        if let Some(i) = self.decoding.remove(&id) {
            self.decode[i].abort(id);
        }
    }

    fn complete(&mut self, now: f64, out: &mut Vec<Emit>) {
        self.now = self.now.max(now);
        // prefills that ended: their KV goes onto their instance's link
        let mut done = std::mem::take(&mut self.scratch);
        done.clear();
        for e in &mut self.prefill {
            e.complete(now, &mut done);
        }
        for e in &done {
            let Some((r, p)) = self.handing.get(&e.seq) else { continue };
            let bytes = self.kv_bytes_per_token * r.prompt_tokens as f64;
            let start = self.link_free_at[*p].max(now);
            let t = self.d.link.time(bytes);
            self.link_free_at[*p] = start + t;
            self.link_busy_s[*p] += t;
            self.stats.transfers += 1;
            self.stats.tokens += r.prompt_tokens as u64;
            self.transfer_s += start + t - now;
            self.transfers.push(Transfer { at: start + t, id: e.seq });
        }
        self.scratch = done;
        // hand-overs that arrived: the first token reaches the client, a decode instance goes on
        while self.transfers.peek().is_some_and(|t| t.at <= now + 1e-12) {
            let t = self.transfers.pop().expect("peeked");
            let Some((r, _)) = self.handing.remove(&t.id) else { continue }; // aborted meanwhile
            let last = r.output_tokens <= 1;
            out.push(Emit { seq: t.id, tokens: 1, finished: last });
            if last {
                continue;
            }
            let i = least_loaded(&self.decode, 0..self.decode.len());
            let rest = EngineRequest { kv_ready: true, ..r };
            if self.decode[i].submit(t.id, rest, now).is_ok() {
                self.decoding.insert(t.id, i);
            } else {
                // no decode instance can hold it: the stream ends at its first token
                out.last_mut().expect("pushed").finished = true;
            }
        }
        complete_and_forget(&mut self.decode, now, out, &mut self.decoding);
    }

    fn start(&mut self, now: f64) {
        self.now = self.now.max(now);
        for e in self.prefill.iter_mut().chain(self.decode.iter_mut()) {
            e.start(now);
        }
    }

    fn next_event(&self) -> Option<f64> {
        let engines = earliest(&self.prefill).into_iter().chain(earliest(&self.decode));
        engines.chain(self.transfers.peek().map(|t| t.at)).reduce(f64::min)
    }

    fn has_work(&self) -> bool {
        !self.transfers.is_empty() || self.prefill.iter().chain(&self.decode).any(|e| e.has_work())
    }

    fn prefix_block_size(&self) -> Option<u32> {
        self.decode[0].prefix_block_size().or(self.prefill[0].prefix_block_size())
    }

    fn gauges(&self) -> Gauges {
        let (p, d) = (sum_gauges(&self.prefill), sum_gauges(&self.decode));
        Gauges {
            running: p.running + d.running,
            waiting: p.waiting + d.waiting,
            kv_utilization: (p.kv_utilization + d.kv_utilization) / 2.0,
            preemptions: p.preemptions + d.preemptions,
            prefix_queried_tokens: p.prefix_queried_tokens + d.prefix_queried_tokens,
            prefix_hit_tokens: p.prefix_hit_tokens + d.prefix_hit_tokens,
            spec_drafts: d.spec_drafts,
            spec_draft_tokens: d.spec_draft_tokens,
            spec_accepted_tokens: d.spec_accepted_tokens,
        }
    }

    fn stats(&self) -> EngineStats {
        let elapsed = self.now;
        let p = combine(self.prefill.iter().map(|e| e.stats()).collect(), "prefill", elapsed);
        let d = combine(self.decode.iter().map(|e| e.stats()).collect(), "decode", elapsed);
        let mut parts = p.parts.clone();
        parts.extend(d.parts.iter().cloned());
        let mut s = combine(Vec::new(), "", elapsed);
        // the deployment's counters: both pools'
        for x in [&p, &d] {
            s.steps += x.steps;
            s.prefill_steps += x.prefill_steps;
            s.decode_steps += x.decode_steps;
            s.mixed_steps += x.mixed_steps;
            s.compute_bound_steps += x.compute_bound_steps;
            s.memory_bound_steps += x.memory_bound_steps;
            s.busy_s += x.busy_s;
            s.prefill_tokens += x.prefill_tokens;
            s.decode_tokens += x.decode_tokens;
            s.preemptions += x.preemptions;
            s.rejected += x.rejected;
            s.max_running = s.max_running.max(x.max_running);
            s.mean_running += x.mean_running;
            s.mean_waiting += x.mean_waiting;
            s.spec_drafts += x.spec_drafts;
            s.spec_draft_tokens += x.spec_draft_tokens;
            s.spec_accepted_tokens += x.spec_accepted_tokens;
            s.spec_draft_s += x.spec_draft_s;
        }
        s.mean_kv_utilization = d.mean_kv_utilization;
        s.mean_kv_used_share = d.mean_kv_used_share;
        s.mean_kv_fragmentation = d.mean_kv_fragmentation;
        s.max_kv_utilization = d.max_kv_utilization;
        s.prefix_cache = d.prefix_cache;
        s.series = d.series.clone();
        s.parts = parts;
        let mut t = self.stats;
        if t.transfers > 0 {
            t.mean_s = self.transfer_s / t.transfers as f64;
            t.per_token_s = self.transfer_s / t.tokens.max(1) as f64;
        }
        if elapsed > 0.0 {
            t.link_utilization = self.link_busy_s.iter().sum::<f64>() / self.link_busy_s.len() as f64 / elapsed;
        }
        s.transfers = Some(t);
        s
    }
}
