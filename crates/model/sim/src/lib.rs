//! The virtual-time driver: the load state machine and the engine model on a simulated clock,
//! producing the same [`RequestRecord`]s a measured run does.
//!
//! What is sent and when comes from [`LoadMachine`] (the same machine the HTTP runner drives), so
//! `goodput sim` and `goodput bench` send the same requests for the same plan and seed. A request
//! that becomes due while an iteration runs waits for the next one, as in a real engine; its
//! record still says it was sent when it was due (there is no client here to be late). Tokens are
//! timestamped at the end of the iteration that produced them.
//!
//! - [`calibration`]: the published figures the engine model is checked against.

pub mod calibration;

use std::collections::VecDeque;

use goodput_engine::{Emit, EngineRequest, EngineStats, ServingEngine, block_hashes, reasoned_length};
use goodput_metrics::{ErrorClass, RequestError, RequestRecord, StopReason, TokenSource};
use goodput_workload::{Finished, LoadMachine, Next, Request, Sending, Workload};

/// What the simulator sends and when it stops: the same [`Sending`] the real-time client takes.
pub type SimConfig = Sending;

/// What a simulation produced.
#[derive(Debug)]
pub struct SimOutcome {
    /// In send order (`records[i].id == i`).
    pub records: Vec<RequestRecord>,
    pub stats: EngineStats,
    /// Virtual time at the end, seconds.
    pub end_s: f64,
    pub stop: StopReason,
    /// Why the run was called over-saturated (`--stop-over-saturated`), when it was.
    pub over_saturation: Option<String>,
}

impl SimOutcome {
    /// Sending stopped because `max_errors` requests failed.
    pub fn max_errors_reached(&self) -> bool {
        self.stop == StopReason::MaxErrors
    }
}

/// How many emits ahead delivery prefetches the track it will update.
const PREFETCH_AHEAD: usize = 8;

/// A refused request still costs its client a round trip before it can send again.
const REJECT_RTT_S: f64 = 1e-3;

/// Runs the workload to completion (or its limits) in virtual time, keeping every record.
pub fn simulate(engine: &mut dyn ServingEngine, cfg: &SimConfig, workload: Workload) -> SimOutcome {
    let mut records = Vec::new();
    let end = simulate_with(engine, cfg, workload, &mut |r| {
        records.push(r);
        None
    });
    records.sort_by_key(|r| r.id);
    SimOutcome { records, stats: end.stats, end_s: end.end_s, stop: end.stop, over_saturation: end.over_saturation }
}

/// How a simulation whose records went to a sink ended.
#[derive(Debug)]
pub struct SimEnd {
    pub stats: EngineStats,
    /// Virtual time at the end, seconds.
    pub end_s: f64,
    pub stop: StopReason,
    /// Why the run was called over-saturated (`--stop-over-saturated`), when it was.
    pub over_saturation: Option<String>,
}

/// Runs the workload like [`simulate`], handing each record to `sink` as its request finishes
/// (in completion order) instead of keeping them: memory holds only requests in flight. The sink
/// may hand back a record it has no use for: its event buffers hold the next record's events (a
/// run of a million requests allocates them for the records kept, not for every one).
pub fn simulate_with(
    engine: &mut dyn ServingEngine,
    cfg: &SimConfig,
    workload: Workload,
    sink: &mut dyn FnMut(RequestRecord) -> Option<RequestRecord>,
) -> SimEnd {
    simulate_until(engine, cfg, workload, None, sink)
}

/// Runs the workload like [`simulate_with`], stopped early, [`StopReason::Saturated`], once more
/// than `saturation` requests are in flight (a capacity step whose queue has piled up far beyond
/// what its SLO allows, as a measured step is stopped): the requests in flight then end as
/// cancelled, and nothing more is sent.
pub fn simulate_until(
    engine: &mut dyn ServingEngine,
    cfg: &SimConfig,
    workload: Workload,
    saturation: Option<u64>,
    sink: &mut dyn FnMut(RequestRecord) -> Option<RequestRecord>,
) -> SimEnd {
    let mut sim = Sim::new(cfg, workload, sink);
    sim.saturation = saturation.unwrap_or(u64::MAX);
    sim.run(engine)
}

/// The driver's state: the load machine and the records being built.
///
/// Token times are not written into each record as they happen (one scattered write per token
/// into memory that grows with the requests in flight): each moment at which tokens arrived is
/// logged once, and a request keeps only runs of consecutive log entries ([`Track`]). Its
/// record's `event_ms`/`event_tokens` are filled from the log, in one sequential pass, when it
/// finishes.
struct Sim<'a> {
    cfg: &'a SimConfig,
    machine: LoadMachine,
    /// Records of requests from id `base` on; `None` once finished and handed to the sink.
    records: VecDeque<Option<RequestRecord>>,
    /// Where each of those requests' tokens are in `log` (same positions as `records`).
    tracks: VecDeque<Track>,
    base: u64,
    /// The times (seconds) at which tokens arrived, from log entry `log_base` on: entries older
    /// than every request in flight are dropped.
    log: VecDeque<f64>,
    log_base: u64,
    sink: &'a mut dyn FnMut(RequestRecord) -> Option<RequestRecord>,
    emits: Vec<Emit>,
    /// Event buffers of a record the sink handed back (empty, their capacity kept).
    spare: (Vec<f64>, Vec<u32>),
    /// More requests in flight than this stops the run, saturated.
    saturation: u64,
}

/// Where one request's tokens are in the driver's log: runs of consecutive entries, each entry
/// of a run carrying the same number of tokens (a decoding sequence gets a token at every
/// iteration, so a request is one run or a few).
#[derive(Debug, Default)]
struct Track {
    /// The log's end when the request was sent: none of its tokens are before it.
    since: u64,
    /// The run being extended (`len == 0`: none yet).
    last: Run,
    /// Runs closed before it (allocated only when a request has more than one).
    earlier: Vec<Run>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Run {
    /// First log entry.
    start: u64,
    len: u32,
    tokens: u32,
}

impl Track {
    fn new(since: u64) -> Self {
        Track { since, ..Default::default() }
    }

    /// Tokens `tokens` arrived at log entry `at`.
    fn push(&mut self, at: u64, tokens: u32) {
        let last = &mut self.last;
        if last.len > 0 && last.start + last.len as u64 == at && last.tokens == tokens {
            last.len += 1;
            return;
        }
        if last.len > 0 {
            self.earlier.push(*last);
        }
        *last = Run { start: at, len: 1, tokens };
    }

    fn runs(&self) -> impl Iterator<Item = &Run> {
        self.earlier.iter().chain((self.last.len > 0).then_some(&self.last))
    }

    fn tokens(&self) -> u64 {
        self.runs().map(|r| r.len as u64 * r.tokens as u64).sum()
    }

    /// Log entries it has (its record's events).
    fn events(&self) -> usize {
        self.runs().map(|r| r.len as usize).sum()
    }

    /// Appends its events to `r` (`log` holds entries from `log_base` on).
    fn fill(&self, r: &mut RequestRecord, log: &VecDeque<f64>, log_base: u64) {
        let n = self.events();
        r.event_ms.reserve_exact(n);
        r.event_tokens.reserve_exact(n);
        for run in self.runs() {
            let from = (run.start - log_base) as usize;
            r.event_ms.extend(log.range(from..from + run.len as usize).map(|&t| t * 1e3));
            r.event_tokens.extend(std::iter::repeat_n(run.tokens, run.len as usize));
        }
    }
}

impl<'a> Sim<'a> {
    fn new(
        cfg: &'a SimConfig,
        workload: Workload,
        sink: &'a mut dyn FnMut(RequestRecord) -> Option<RequestRecord>,
    ) -> Self {
        let machine = cfg.machine(Box::new(workload), false);
        Sim {
            cfg,
            machine,
            records: VecDeque::new(),
            tracks: VecDeque::new(),
            base: 0,
            log: VecDeque::new(),
            log_base: 0,
            sink,
            emits: Vec::new(),
            spare: Default::default(),
            saturation: u64::MAX,
        }
    }

    /// The record of request `id`, with its events filled in from the log, out of the window
    /// (`None` if it was handed over already).
    fn take(&mut self, id: u64) -> Option<RequestRecord> {
        let i = (id - self.base) as usize;
        let mut r = self.records[i].take()?;
        let track = std::mem::take(&mut self.tracks[i]);
        let n = track.events();
        // the spare buffers, unless they would hold more than twice what this record needs (a
        // record the sink keeps keeps its buffers)
        if (n..=2 * n.max(8)).contains(&self.spare.0.capacity()) && self.spare.1.capacity() >= n {
            (r.event_ms, r.event_tokens) = std::mem::take(&mut self.spare);
        }
        track.fill(&mut r, &self.log, self.log_base);
        if let Some(k) = r.requested_reasoning_tokens {
            r.reasoning_events = Some(reasoning_events(&r.event_tokens, k));
        }
        Some(r)
    }

    /// Hands a finished record to the sink, keeping the event buffers of what it hands back.
    fn hand_over(&mut self, r: RequestRecord) {
        if let Some(mut back) = (self.sink)(r) {
            back.event_ms.clear();
            back.event_tokens.clear();
            self.spare = (std::mem::take(&mut back.event_ms), std::mem::take(&mut back.event_tokens));
        }
    }

    /// Hands request `id`'s record to the sink and drops finished records from the front (and
    /// log entries older than every request still in flight).
    fn finish(&mut self, id: u64) {
        let r = self.take(id).expect("finished once");
        self.hand_over(r);
        while self.records.front().is_some_and(|r| r.is_none()) {
            self.records.pop_front();
            self.tracks.pop_front();
            self.base += 1;
        }
        let keep_from = self.tracks.front().map_or(self.log_base + self.log.len() as u64, |t| t.since);
        let drop = keep_from.saturating_sub(self.log_base).min(self.log.len() as u64) as usize;
        self.log.drain(..drop);
        self.log_base += drop as u64;
    }

    /// Hands every record still held to the sink (in id order), with the events it has so far.
    fn flush(&mut self) -> Vec<RequestRecord> {
        let ids = self.base..self.base + self.records.len() as u64;
        let out = ids.filter_map(|id| self.take(id)).collect();
        self.records.clear();
        self.tracks.clear();
        out
    }

    fn end(&self, engine: &dyn ServingEngine, end_s: f64, stop: StopReason) -> SimEnd {
        SimEnd {
            stats: engine.stats(),
            end_s,
            stop,
            over_saturation: self.machine.over_saturation().map(str::to_string),
        }
    }

    fn run(mut self, engine: &mut dyn ServingEngine) -> SimEnd {
        let mut t = 0.0f64;
        loop {
            // tokens of iterations that ended by now, then everything due now, then the next
            // iteration (a request due now joins it)
            self.emits.clear();
            engine.complete(t, &mut self.emits);
            if !self.emits.is_empty() {
                self.log.push_back(t);
            }
            for i in 0..self.emits.len() {
                if let Some(ahead) = self.emits.get(i + PREFETCH_AHEAD) {
                    // the tracks of the sequences of one iteration are scattered over the window
                    if let Some(t) = self.tracks.get(ahead.seq.wrapping_sub(self.base) as usize) {
                        goodput_engine::prefetch(t);
                    }
                }
                let e = self.emits[i];
                self.deliver(e, t);
            }
            let wait = loop {
                if self.machine.in_flight() as u64 > self.saturation {
                    self.cancel_unfinished(t);
                    return self.end(engine, t, StopReason::Saturated);
                }
                if self.machine.stopped() == Some(StopReason::OverSaturated) {
                    // as a measured run: what is in flight is cancelled, not drained
                    self.cancel_unfinished(t);
                    return self.end(engine, t, StopReason::OverSaturated);
                }
                match self.machine.next(t) {
                    Next::Send(r) => self.send(engine, *r),
                    Next::Wait(at) => break Some(at),
                    Next::Idle => break None,
                    Next::Done(stop) => {
                        for r in self.flush() {
                            self.hand_over(r);
                        }
                        return self.end(engine, t, stop);
                    }
                }
            };
            engine.start(t);
            t = match (engine.next_event(), wait) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                // requests in flight but nothing will happen: a modelling defect, never a hang
                (None, None) => break,
            }
            .max(t);
        }
        self.fail_unfinished(t);
        let stop = self.machine.stopped().unwrap_or_default();
        self.end(engine, t, stop)
    }

    /// Ends, as failed, requests the engine left unfinished although nothing more would happen.
    fn fail_unfinished(&mut self, t: f64) {
        self.end_unfinished(
            t,
            ErrorClass::StreamEndedEarly,
            "the engine model stalled with this request unfinished (a modelling defect: please report it)",
        );
    }

    /// Ends, as cancelled, the requests in flight when the run stopped saturated.
    fn cancel_unfinished(&mut self, t: f64) {
        self.end_unfinished(t, ErrorClass::Cancelled, "the step stopped saturated while this request was in flight");
    }

    fn end_unfinished(&mut self, t: f64, class: ErrorClass, message: &str) {
        for mut r in self.flush() {
            r.end_ms = Some(t * 1e3);
            r.error = Some(RequestError { class, message: message.into(), status: None });
            self.hand_over(r);
        }
    }

    /// Tokens of request `e.seq` arrived at `t` (the log's last entry).
    fn deliver(&mut self, e: Emit, t: f64) {
        let at = self.log_base + self.log.len() as u64 - 1;
        let i = (e.seq - self.base) as usize;
        self.tracks[i].push(at, e.tokens);
        if e.finished {
            let n = self.tracks[i].tokens();
            let r = self.records[i].as_mut().expect("a request in flight has its record");
            r.end_ms = Some(t * 1e3);
            r.output_tokens = Some(n);
            r.output_tokens_source = Some(TokenSource::Server);
            r.finish_reason = Some(if Some(n) == r.requested_output_tokens { "length" } else { "stop" }.into());
            // a reasoning model's thinking comes first; a conversation resends the answer alone
            let reasoning = r.requested_reasoning_tokens.map(|k| k.min(n));
            if reasoning.is_some() {
                (r.reasoning_tokens, r.reasoning_tokens_source) = (reasoning, Some(TokenSource::Server));
            }
            let answer = n - reasoning.unwrap_or(0);
            let first_token_s = self.tracks[i].runs().next().map(|run| self.log[(run.start - self.log_base) as usize]);
            self.machine.finished(
                e.seq,
                t,
                Finished { ok: true, output_tokens: answer, reply: String::new(), first_token_s, sent_s: None },
            );
            self.finish(e.seq);
        }
    }

    /// Submits request `r` to the engine at its due time (or, when it waited for a concurrency
    /// slot, when the slot freed).
    fn send(&mut self, engine: &mut dyn ServingEngine, r: Request) {
        let sent = r.scheduled_s + r.cap_wait_s;
        let mut rec = RequestRecord {
            sent_ms: Some(sent * 1e3),
            input_tokens: Some(r.input_tokens),
            input_tokens_source: Some(TokenSource::Server),
            event_tokens_source: Some(TokenSource::Server),
            ..r.record()
        };
        debug_assert_eq!(self.base + self.records.len() as u64, r.id, "ids are dense, in send order");
        // a server's max_tokens counts the reasoning and the answer
        let (reasoning, output) = reasoned_length(r.seed, 1, r.total_tokens(), r.reasoning_tokens, self.cfg.ignore_eos);
        let req = EngineRequest {
            prompt_tokens: r.input_tokens.min(u32::MAX as u64) as u32,
            output_tokens: output,
            max_tokens: r.total_tokens(),
            seed: r.seed,
            frontend_seed: match r.user {
                Some(u) => goodput_workload::seed::mix(&[self.cfg.seed, u as u64, r.scheduled_s.to_bits()]),
                None => r.seed,
            },
            block_hashes: engine.prefix_block_size().map(|bs| hashes(&r, reasoning, output, bs)).unwrap_or_default(),
            kv_ready: false,
        };
        self.tracks.push_back(Track::new(self.log_base + self.log.len() as u64));
        match engine.submit(r.id, req, sent) {
            Ok(()) => self.records.push_back(Some(rec)),
            Err(reject) => {
                rec.end_ms = rec.sent_ms;
                rec.output_tokens = Some(0);
                rec.output_tokens_source = Some(TokenSource::Server);
                rec.error =
                    Some(RequestError { class: ErrorClass::Rejected, message: reject.to_string(), status: None });
                self.records.push_back(Some(rec));
                self.machine.finished(r.id, sent + REJECT_RTT_S, Finished::default());
                self.finish(r.id);
            }
        }
    }
}

/// The request's block hashes at the engine's block size: its prompt's segments, then its
/// reasoning (content of its own: a conversation does not resend it), then its answer (whose
/// content id the next turn of its session will repeat).
fn hashes(r: &Request, reasoning: u32, output: u32, block_size: u32) -> Vec<u64> {
    let mut segs: Vec<(u64, u32)> = r.segments.iter().map(|s| (s.id, s.tokens)).collect();
    if reasoning > 0 {
        segs.push((goodput_workload::seed::mix(&[r.reply_segment, 0x0074_6869_6e6b]), reasoning));
    }
    segs.push((r.reply_segment, output - reasoning));
    block_hashes(&segs, block_size)
}

/// The events of a stream whose first `reasoning` tokens are reasoning, before the first event
/// that carries an answer token (all of them when none does).
pub fn reasoning_events(event_tokens: &[u32], reasoning: u64) -> u32 {
    let mut seen = 0u64;
    for (k, &m) in event_tokens.iter().enumerate() {
        seen += m as u64;
        if seen > reasoning {
            return k as u32;
        }
    }
    event_tokens.len() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_engine::{Catalog, Engine, EngineConfig};
    use goodput_metrics::{SummaryOptions, summarize};
    use goodput_workload::{Arrivals, LengthDist, WorkloadSpec};
    use goodput_workload::{Bounds, Load};

    fn engine(tweak: impl FnOnce(&mut EngineConfig)) -> Engine {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        tweak(&mut cfg);
        Engine::new(cfg).unwrap()
    }

    fn workload(input: u32, output: u32) -> Workload {
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(input),
            output_tokens: LengthDist::Fixed(output),
            ..Default::default()
        };
        Workload::counts_only(spec).unwrap()
    }

    fn cfg(load: Load, requests: Option<u64>) -> SimConfig {
        SimConfig { bounds: Bounds { requests, ..Bounds::default() }, ..Sending::new(load) }
    }

    fn run(load: Load, requests: u64, tweak: impl FnOnce(&mut EngineConfig)) -> SimOutcome {
        simulate(&mut engine(tweak), &cfg(load, Some(requests)), workload(512, 128))
    }

    #[test]
    fn a_track_fills_its_events_from_the_log() {
        // log entries 10.. hold times 1.0, 1.1, …; tokens at 11, 12, 13 (one each), 15 (two), 16
        // (two), 18 (one): three runs, filled from a log whose first entry is 10
        let log: VecDeque<f64> = (0..10).map(|k| 1.0 + k as f64 / 10.0).collect();
        let mut t = Track::new(11);
        for (at, m) in [(11, 1), (12, 1), (13, 1), (15, 2), (16, 2), (18, 1)] {
            t.push(at, m);
        }
        assert_eq!((t.earlier.len(), t.tokens()), (2, 8));
        let mut r = RequestRecord::default();
        t.fill(&mut r, &log, 10);
        let ms: Vec<f64> = [1.1, 1.2, 1.3, 1.5, 1.6, 1.8].iter().map(|&s| (s * 10.0f64).round() * 100.0).collect();
        assert_eq!(r.event_ms.len(), 6);
        for (a, b) in r.event_ms.iter().zip(&ms) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
        assert_eq!(r.event_tokens, [1, 1, 1, 2, 2, 1]);
    }

    #[test]
    fn max_errors_stops_sending() {
        // 512-token prompts cannot be scheduled under a 256-token budget without chunked prefill
        let tweak = |c: &mut EngineConfig| c.max_batched_tokens = 256;
        let mut c = cfg(Load::closed(2), Some(50));
        c.bounds.max_errors = Some(5);
        let out = simulate(&mut engine(tweak), &c, workload(512, 128));
        assert!(out.max_errors_reached());
        assert_eq!(out.records.len(), 5);
        assert!(out.records.iter().all(|r| r.error.as_ref().is_some_and(|e| e.class == ErrorClass::Rejected)));
        let all = run(Load::closed(2), 50, tweak);
        assert!(!all.max_errors_reached());
        assert_eq!(all.records.len(), 50);
    }

    #[test]
    fn one_request_by_hand() {
        // without the front end's random latency (its draw is tested in the engine)
        let no_front = |c: &mut EngineConfig| {
            c.efficiency.frontend_s = 0.0;
            c.efficiency.frontend_jitter_s = 0.0;
        };
        let out = run(Load::closed(1), 1, no_front);
        let r = &out.records[0];
        assert_eq!(r.event_ms.len(), 128);
        assert_eq!(r.output_tokens, Some(128));
        assert_eq!(r.input_tokens, Some(512));
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        // TTFT = one prefill iteration; TPOT = one batch-1 decode iteration
        let e = engine(no_front);
        let mut b = goodput_engine::cost::BatchShape::default();
        b.add_prefill(512, 0);
        b.sampled = 1;
        let prefill = e.cost().time(&b).total_s * 1e3;
        // intake: 500 µs + 0.5 µs per prompt token
        let intake = (500e-6 + 512.0 * 0.5e-6) * 1e3;
        assert!((r.event_ms[0] - intake - prefill).abs() < 1e-9);
        let mut d = goodput_engine::cost::BatchShape::default();
        d.add_decode(513);
        let decode = e.cost().time(&d).total_s * 1e3;
        assert!((r.event_ms[1] - r.event_ms[0] - decode).abs() < 1e-9);
    }

    #[test]
    fn concurrency_raises_throughput_and_tpot_until_saturation() {
        let mut last_tp = 0.0;
        let mut last_tpot = 0.0;
        for n in [1, 4, 16, 64] {
            let out = run(Load::closed(n), 4 * n as u64 + 8, |_| {});
            let s = summarize(&out.records, &SummaryOptions::new());
            let tp = s.output_throughput;
            let tpot = s.tpot_ms.mean.unwrap();
            assert!(tp > last_tp * 1.3, "throughput should grow: {n} users → {tp:.0} tok/s (was {last_tp:.0})");
            assert!(tpot > last_tpot, "TPOT should grow: {n} users → {tpot:.2} ms (was {last_tpot:.2})");
            (last_tp, last_tpot) = (tp, tpot);
        }
        // with more users than batch slots, the extra ones queue: it shows in TTFT
        let cap = |c: &mut EngineConfig| c.max_num_seqs = 8;
        let s8 = summarize(&run(Load::closed(8), 64, cap).records, &SummaryOptions::new());
        let s32 = summarize(&run(Load::closed(32), 128, cap).records, &SummaryOptions::new());
        assert!(s32.ttft_ms.mean.unwrap() > 3.0 * s8.ttft_ms.mean.unwrap());
        assert!((s32.output_throughput / s8.output_throughput - 1.0).abs() < 0.1, "saturated: throughput flat");
    }

    #[test]
    fn deterministic_for_a_seed() {
        let load = Load::Open { arrivals: Arrivals::Poisson { rate: 20.0 }, max_concurrency: None };
        let a = run(load.clone(), 200, |_| {});
        let b = run(load, 200, |_| {});
        assert_eq!(a.records, b.records);
        assert!(a.records.iter().all(|r| r.is_success()));
    }

    #[test]
    fn open_loop_cap_counts_client_queueing() {
        let load = Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: Some(4) };
        let out = run(load, 12, |_| {});
        let waited = out.records.iter().filter(|r| r.cap_wait_ms > 0.0).count();
        assert_eq!(waited, 8);
        for r in &out.records {
            assert_eq!(r.sent_ms.unwrap(), r.scheduled_ms + r.cap_wait_ms);
        }
        let s = summarize(&out.records, &SummaryOptions::new());
        assert!(s.ttft_sched_ms.mean.unwrap() > s.ttft_ms.mean.unwrap() * 1.5);
        assert_eq!(s.schedule_lag_ms.max, Some(0.0), "waiting for the cap is not lag");
    }

    #[test]
    fn all_at_once_queues_unless_the_queue_is_bounded() {
        let load = Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None };
        // a bound of 10 waiting requests: the rest are refused, and the message names the flag
        let out = run(load.clone(), 60, |c| c.max_waiting = 10);
        let rejected: Vec<_> = out.records.iter().filter_map(|r| r.error.as_ref()).collect();
        assert!(!rejected.is_empty());
        assert!(rejected.iter().all(|e| e.class == ErrorClass::Rejected && e.message.contains("--max-waiting")));
        // unbounded (what `sim --rate inf` plans without --max-waiting): every request waits its turn
        let out = run(load, 60, |c| c.max_waiting = u32::MAX as usize);
        assert!(out.records.iter().all(|r| r.is_success()));
        assert_eq!(out.records.len(), 60);
    }

    #[test]
    fn records_stream_to_a_sink_in_completion_order() {
        let load = Load::Open { arrivals: Arrivals::Poisson { rate: 20.0 }, max_concurrency: None };
        let kept = run(load.clone(), 100, |_| {});
        let mut seen = Vec::new();
        let end = simulate_with(&mut engine(|_| {}), &cfg(load, Some(100)), workload(512, 128), &mut |r| {
            seen.push(r);
            None
        });
        assert_eq!(end.stop, kept.stop);
        assert!(seen.windows(2).all(|w| w[0].end_ms <= w[1].end_ms), "handed over as they finish");
        seen.sort_by_key(|r| r.id);
        assert_eq!(seen, kept.records);
    }

    #[test]
    fn a_record_handed_back_lends_its_buffers_and_nothing_else() {
        // lengths vary (natural stops): a record's buffers go to later ones, longer or shorter
        let load = Load::Open { arrivals: Arrivals::Poisson { rate: 20.0 }, max_concurrency: None };
        let c = SimConfig { ignore_eos: false, ..cfg(load, Some(200)) };
        let kept = simulate(&mut engine(|_| {}), &c, workload(512, 128));
        let mut copies = Vec::new();
        simulate_with(&mut engine(|_| {}), &c, workload(512, 128), &mut |r| {
            copies.push(r.clone());
            Some(r)
        });
        copies.sort_by_key(|r| r.id);
        assert_eq!(copies, kept.records);
        let lens: std::collections::BTreeSet<usize> = copies.iter().map(|r| r.event_ms.len()).collect();
        assert!(lens.len() > 20, "lengths vary: {lens:?}");
    }

    #[test]
    fn duration_bounds_the_run() {
        let load = Load::Open { arrivals: Arrivals::Constant { rate: 10.0 }, max_concurrency: None };
        let mut c = cfg(load, None);
        c.bounds.duration_s = Some(2.0);
        let out = simulate(&mut engine(|_| {}), &c, workload(64, 8));
        assert_eq!(out.records.len(), 21, "arrivals at 0, 0.1, …, 2.0 s");
        assert_eq!(out.stop, StopReason::Duration);
    }

    #[test]
    fn a_saturated_run_stops_once_too_many_are_in_flight() {
        // 1,000 req/s of 512/128 on one H100 piles up at once: the run stops when the 33rd
        // request is in flight, the 33 unfinished end as cancelled at that moment, and nothing
        // more is sent
        let load = Load::Open { arrivals: Arrivals::Constant { rate: 1000.0 }, max_concurrency: None };
        let mut c = cfg(load, None);
        c.bounds.duration_s = Some(10.0);
        let mut records = Vec::new();
        let end = simulate_until(&mut engine(|_| {}), &c, workload(512, 128), Some(32), &mut |r| {
            records.push(r);
            None
        });
        assert_eq!(end.stop, StopReason::Saturated);
        let cancelled: Vec<_> =
            records.iter().filter(|r| r.error.as_ref().is_some_and(|e| e.class == ErrorClass::Cancelled)).collect();
        assert_eq!(cancelled.len(), 33);
        assert!(cancelled.iter().all(|r| r.end_ms == Some(end.end_s * 1e3)));
        let finished = records.len() - cancelled.len();
        assert!(finished < 10, "few finish before the queue piles up: {finished}");
        assert!(end.end_s < 0.1, "stopped within {} s of the 10 s asked", end.end_s);
        // without a limit the same run keeps sending for its 10 s
        let out = simulate(&mut engine(|_| {}), &c, workload(512, 128));
        assert_eq!((out.stop, out.records.len()), (StopReason::Duration, 10_001));
    }

    #[test]
    fn without_ignore_eos_lengths_vary_up_to_max() {
        let c = SimConfig { ignore_eos: false, seed: 3, ..cfg(Load::closed(4), Some(100)) };
        let out = simulate(&mut engine(|_| {}), &c, workload(64, 50));
        let lens: Vec<u64> = out.records.iter().map(|r| r.output_tokens.unwrap()).collect();
        assert!(lens.iter().all(|&n| (1..=50).contains(&n)));
        assert!(lens.iter().any(|&n| n < 25) && lens.iter().any(|&n| n > 25));
        assert!(out.records.iter().any(|r| r.finish_reason.as_deref() == Some("stop")));
    }
}
