//! The virtual-time driver: runs a workload through the engine on a simulated clock and produces
//! the same [`RequestRecord`]s a measured run does.
//!
//! Requests arrive by the run's load (closed loop: N users back to back; open loop: an arrival
//! process, optionally capped in flight). A request that arrives while an iteration runs waits for
//! the next one, as in a real engine. Tokens are timestamped at the end of the iteration that
//! produced them; a request is "sent" when it arrives (no network, no client lag).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use goodput_metrics::{ErrorClass, RequestError, RequestRecord, TokenSource};
use goodput_workload::{ArrivalClock, Load, SessionSpec, ThinkTime, Workload, seed};
use rand::Rng;
use serde::Serialize;

use crate::engine::{Engine, EngineRequest, EngineStats};

/// Run limits and request shaping (the simulator's half of a run plan).
#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    pub load: Load,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    /// Requests run to `max_tokens`; otherwise each stops at a length drawn uniformly from
    /// `1..=max_tokens` (seeded).
    pub ignore_eos: bool,
    pub seed: u64,
    /// Stop sending once this many requests have failed (`--max-errors`); those in flight finish.
    pub max_errors: Option<u64>,
}

/// What a simulation produced.
#[derive(Debug)]
pub struct SimOutcome {
    pub records: Vec<RequestRecord>,
    pub stats: EngineStats,
    /// Virtual time at the end, seconds.
    pub end_s: f64,
    /// Sending stopped because `max_errors` requests failed.
    pub max_errors_reached: bool,
}

#[derive(Debug)]
enum Event {
    /// A new session starts (for closed-loop user `user`, or the next open-loop arrival).
    Session { user: Option<usize>, spec: Box<SessionSpec>, scheduled: f64 },
    /// The next turn of a running session.
    Turn { session: usize, scheduled: f64 },
}

struct Timed {
    at: f64,
    order: u64,
    event: Event,
}

impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    // min-heap on (time, insertion order)
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.total_cmp(&self.at).then(o.order.cmp(&self.order))
    }
}

struct Session {
    spec: SessionSpec,
    user: Option<usize>,
    turn: usize,
    /// Tokens of the conversation so far (system prompt, earlier turns and replies).
    context: u64,
}

struct Sim<'a> {
    engine: &'a mut Engine,
    cfg: &'a SimConfig,
    workload: &'a mut Workload,
    queue: BinaryHeap<Timed>,
    order: u64,
    sessions: Vec<Session>,
    /// Request id → session index.
    owner: Vec<usize>,
    records: Vec<RequestRecord>,
    arrivals: Option<ArrivalClock>,
    arrival_rng: seed::Rng,
    length_rng: seed::Rng,
    sent: u64,
    failed: u64,
    /// Requests (turns) of the sessions started so far: new sessions stop at the budget.
    planned: u64,
    in_flight: usize,
    cap: Option<usize>,
    /// Arrivals waiting for a concurrency slot: (session, scheduled time).
    cap_queue: VecDeque<(usize, f64)>,
    think: ThinkTime,
    think_rng: seed::Rng,
}

/// Runs the workload to completion (or its limits) in virtual time.
pub fn simulate(engine: &mut Engine, cfg: &SimConfig, workload: &mut Workload) -> SimOutcome {
    let (arrivals, cap, users, think) = match &cfg.load {
        Load::Closed { concurrency, think } => (None, None, *concurrency, think.clone()),
        Load::Open { arrivals, max_concurrency } => {
            (Some(ArrivalClock::new(arrivals.clone())), *max_concurrency, 0, ThinkTime::default())
        }
    };
    let mut sim = Sim {
        engine,
        cfg,
        workload,
        queue: BinaryHeap::new(),
        order: 0,
        sessions: Vec::new(),
        owner: Vec::new(),
        records: Vec::new(),
        arrivals,
        arrival_rng: seed::rng(cfg.seed, seed::Stream::Arrivals),
        length_rng: seed::rng(cfg.seed, seed::Stream::Engine),
        sent: 0,
        failed: 0,
        planned: 0,
        in_flight: 0,
        cap,
        cap_queue: VecDeque::new(),
        think,
        think_rng: seed::rng_for(cfg.seed, 0x7573_6572_0000_0000),
    };
    for u in 0..users {
        sim.next_session(Some(u), 0.0);
    }
    if sim.arrivals.is_some() {
        sim.next_session(None, 0.0);
    }
    let end_s = sim.run();
    let stats = sim.engine.stats();
    let max_errors_reached = sim.errors_exhausted();
    SimOutcome { records: sim.records, stats, end_s, max_errors_reached }
}

impl Sim<'_> {
    fn push(&mut self, at: f64, event: Event) {
        self.order += 1;
        self.queue.push(Timed { at, order: self.order, event });
    }

    fn budget_left(&self) -> bool {
        self.cfg.requests.is_none_or(|n| self.sent < n) && !self.errors_exhausted()
    }

    fn errors_exhausted(&self) -> bool {
        self.cfg.max_errors.is_some_and(|m| self.failed >= m)
    }

    fn within_duration(&self, t: f64) -> bool {
        self.cfg.duration_s.is_none_or(|d| t <= d + 1e-9)
    }

    /// Schedules the next session: for a closed-loop user at `after` plus think time, or the next
    /// open-loop arrival.
    fn next_session(&mut self, user: Option<usize>, after: f64) {
        if self.cfg.requests.is_some_and(|n| self.planned >= n) || self.errors_exhausted() {
            return;
        }
        let Some(mut spec) = self.workload.next_session() else {
            return;
        };
        if let Some(n) = self.cfg.requests {
            spec.turns.truncate(((n - self.planned) as usize).max(1));
        }
        self.planned += spec.turns.len() as u64;
        let at = match (&mut self.arrivals, user) {
            (Some(clock), None) => clock.next(&mut self.arrival_rng, spec.trace_time_s),
            _ => after,
        };
        if !self.within_duration(at) {
            return;
        }
        self.push(at, Event::Session { user, spec: Box::new(spec), scheduled: at });
    }

    fn run(&mut self) -> f64 {
        let mut t = 0.0f64;
        loop {
            while self.queue.peek().is_some_and(|e| e.at <= t) {
                let e = self.queue.pop().expect("peeked");
                self.arrive(e.event);
            }
            if self.engine.has_work() {
                let Some(out) = self.engine.step(t) else {
                    break;
                };
                let end = t + out.time.total_s;
                let emitted = out.emitted.clone();
                for e in emitted {
                    self.deliver(e.seq as usize, e.tokens, e.finished, end);
                }
                t = end;
            } else if let Some(e) = self.queue.peek() {
                t = t.max(e.at);
            } else {
                return t;
            }
        }
        t
    }

    /// An event's time has come (the engine sees it at the start of its next iteration).
    fn arrive(&mut self, e: Event) {
        match e {
            Event::Session { user, spec, scheduled } => {
                if user.is_none() {
                    self.next_session(None, scheduled); // keep one open-loop arrival ahead
                }
                let context = spec.system_tokens as u64;
                self.sessions.push(Session { spec: *spec, user, turn: 0, context });
                let s = self.sessions.len() - 1;
                self.start(s, scheduled);
            }
            Event::Turn { session, scheduled } => self.start(session, scheduled),
        }
    }

    /// Sends the session's current turn (or queues it behind the concurrency cap).
    fn start(&mut self, s: usize, scheduled: f64) {
        if !self.budget_left() || !self.within_duration(scheduled) {
            return;
        }
        if self.cap.is_some_and(|c| self.in_flight >= c) {
            self.cap_queue.push_back((s, scheduled));
            return;
        }
        self.send(s, scheduled, scheduled);
    }

    /// Submits the session's current turn, sent at `sent` (later than `scheduled` only when it
    /// waited for a concurrency slot).
    fn send(&mut self, s: usize, scheduled: f64, sent: f64) {
        let id = self.records.len();
        self.sent += 1;
        let sess = &self.sessions[s];
        let turn = &sess.spec.turns[sess.turn];
        // a turn carrying a whole history is sent as is, after the system prompt
        let prompt = match turn.history {
            Some(_) => sess.spec.system_tokens as u64 + turn.user_tokens as u64,
            None => sess.context + turn.user_tokens as u64,
        };
        let max_tokens = turn.output_tokens.max(1);
        let output = if self.cfg.ignore_eos { max_tokens } else { self.length_rng.random_range(1..=max_tokens) };
        let multi = sess.spec.multi_turn || sess.spec.turns.len() > 1;
        let mut rec = RequestRecord {
            id: id as u64,
            session: multi.then_some(sess.spec.id),
            turn: multi.then_some(sess.turn as u32),
            scheduled_ms: scheduled * 1e3,
            cap_wait_ms: (sent - scheduled).max(0.0) * 1e3,
            sent_ms: Some(sent * 1e3),
            input_tokens: Some(prompt),
            input_tokens_source: Some(TokenSource::Server),
            requested_output_tokens: Some(max_tokens as u64),
            event_tokens_source: Some(TokenSource::Server),
            ..Default::default()
        };
        let req = EngineRequest { prompt_tokens: prompt.min(u32::MAX as u64) as u32, output_tokens: output };
        self.owner.push(s);
        match self.engine.submit(id as u64, req) {
            Ok(()) => {
                self.in_flight += 1;
                self.records.push(rec);
            }
            Err(reject) => {
                self.failed += 1;
                rec.end_ms = rec.sent_ms;
                rec.output_tokens = Some(0);
                rec.output_tokens_source = Some(TokenSource::Server);
                rec.error =
                    Some(RequestError { class: ErrorClass::Rejected, message: reject.to_string(), status: None });
                self.records.push(rec);
                // a refusal still costs the client a round trip before its next request
                self.session_done(s, sent + 1e-3);
            }
        }
    }

    fn deliver(&mut self, id: usize, tokens: u32, finished: bool, t: f64) {
        let r = &mut self.records[id];
        r.event_ms.push(t * 1e3);
        r.event_tokens.push(tokens);
        if !finished {
            return;
        }
        let n: u64 = r.event_tokens.iter().map(|&m| m as u64).sum();
        r.end_ms = Some(t * 1e3);
        r.output_tokens = Some(n);
        r.output_tokens_source = Some(TokenSource::Server);
        r.finish_reason = Some(if Some(n) == r.requested_output_tokens { "length" } else { "stop" }.into());
        self.in_flight -= 1;
        if let Some((s, scheduled)) = self.cap_queue.pop_front() {
            self.send(s, scheduled, t);
        }
        let s = self.owner[id];
        let sess = &mut self.sessions[s];
        sess.context += sess.spec.turns[sess.turn].user_tokens as u64 + n;
        sess.turn += 1;
        if sess.turn < sess.spec.turns.len() {
            let at = t + sess.spec.turns[sess.turn].think_s;
            self.push(at, Event::Turn { session: s, scheduled: at });
        } else {
            self.session_done(s, t);
        }
    }

    /// A session ended: a closed-loop user starts its next one after its think time.
    fn session_done(&mut self, s: usize, t: f64) {
        if let Some(u) = self.sessions[s].user {
            let pause = self.think.sample(&mut self.think_rng);
            self.next_session(Some(u), t + pause);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::config::EngineConfig;
    use goodput_metrics::{SummaryOptions, summarize};
    use goodput_workload::{Arrivals, LengthDist, WorkloadSpec};

    fn engine(tweak: impl FnOnce(&mut EngineConfig)) -> Engine {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        tweak(&mut cfg);
        Engine::new(cfg).unwrap()
    }

    fn run(load: Load, requests: u64, tweak: impl FnOnce(&mut EngineConfig)) -> SimOutcome {
        run_bounded(load, requests, None, tweak)
    }

    fn run_bounded(
        load: Load,
        requests: u64,
        max_errors: Option<u64>,
        tweak: impl FnOnce(&mut EngineConfig),
    ) -> SimOutcome {
        let mut e = engine(tweak);
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(512),
            output_tokens: LengthDist::Fixed(128),
            ..Default::default()
        };
        let mut w = Workload::counts_only(spec).unwrap();
        let cfg = SimConfig { load, requests: Some(requests), duration_s: None, ignore_eos: true, seed: 0, max_errors };
        simulate(&mut e, &cfg, &mut w)
    }

    #[test]
    fn max_errors_stops_sending() {
        // 512-token prompts cannot be scheduled under a 256-token budget without chunked prefill
        let tweak = |c: &mut EngineConfig| c.max_batched_tokens = 256;
        let out = run_bounded(closed(2), 50, Some(5), tweak);
        assert!(out.max_errors_reached);
        assert_eq!(out.records.len(), 5);
        assert!(out.records.iter().all(|r| r.error.as_ref().is_some_and(|e| e.class == ErrorClass::Rejected)));
        let all = run_bounded(closed(2), 50, None, tweak);
        assert!(!all.max_errors_reached);
        assert_eq!(all.records.len(), 50);
    }

    fn closed(n: usize) -> Load {
        Load::closed(n)
    }

    #[test]
    fn one_request_by_hand() {
        let out = run(closed(1), 1, |_| {});
        let r = &out.records[0];
        assert_eq!(r.event_ms.len(), 128);
        assert_eq!(r.output_tokens, Some(128));
        assert_eq!(r.input_tokens, Some(512));
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        // TTFT = one prefill iteration; TPOT = one batch-1 decode iteration
        let e = engine(|_| {});
        let mut b = crate::cost::BatchShape::default();
        b.add_prefill(512, 0);
        b.sampled = 1;
        let prefill = e.cost().time(&b).total_s * 1e3;
        assert!((r.event_ms[0] - prefill).abs() < 1e-9);
        let mut d = crate::cost::BatchShape::default();
        d.add_decode(513);
        let decode = e.cost().time(&d).total_s * 1e3;
        assert!((r.event_ms[1] - r.event_ms[0] - decode).abs() < 1e-9);
    }

    #[test]
    fn concurrency_raises_throughput_and_tpot_until_saturation() {
        let mut last_tp = 0.0;
        let mut last_tpot = 0.0;
        for n in [1, 4, 16, 64] {
            let out = run(closed(n), 4 * n as u64 + 8, |_| {});
            let s = summarize(&out.records, &SummaryOptions::new());
            let tp = s.output_throughput;
            let tpot = s.tpot_ms.mean.unwrap();
            assert!(tp > last_tp * 1.3, "throughput should grow: {n} users → {tp:.0} tok/s (was {last_tp:.0})");
            assert!(tpot > last_tpot, "TPOT should grow: {n} users → {tpot:.2} ms (was {last_tpot:.2})");
            (last_tp, last_tpot) = (tp, tpot);
        }
        // with more users than batch slots, the extra ones queue: it shows in TTFT
        let cap = |c: &mut EngineConfig| c.max_num_seqs = 8;
        let s8 = summarize(&run(closed(8), 64, cap).records, &SummaryOptions::new());
        let s32 = summarize(&run(closed(32), 128, cap).records, &SummaryOptions::new());
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
    fn duration_bounds_the_run() {
        let load = Load::Open { arrivals: Arrivals::Constant { rate: 10.0 }, max_concurrency: None };
        let mut e = engine(|_| {});
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(64),
            output_tokens: LengthDist::Fixed(8),
            ..Default::default()
        };
        let mut w = Workload::counts_only(spec).unwrap();
        let cfg =
            SimConfig { load, requests: None, duration_s: Some(2.0), ignore_eos: true, seed: 0, max_errors: None };
        let out = simulate(&mut e, &cfg, &mut w);
        assert_eq!(out.records.len(), 21, "arrivals at 0, 0.1, …, 2.0 s");
    }

    #[test]
    fn without_ignore_eos_lengths_vary_up_to_max() {
        let mut e = engine(|_| {});
        let spec = WorkloadSpec {
            input_tokens: LengthDist::Fixed(64),
            output_tokens: LengthDist::Fixed(50),
            ..Default::default()
        };
        let mut w = Workload::counts_only(spec).unwrap();
        let cfg = SimConfig {
            load: closed(4),
            requests: Some(100),
            duration_s: None,
            ignore_eos: false,
            seed: 3,
            max_errors: None,
        };
        let out = simulate(&mut e, &cfg, &mut w);
        let lens: Vec<u64> = out.records.iter().map(|r| r.output_tokens.unwrap()).collect();
        assert!(lens.iter().all(|&n| (1..=50).contains(&n)));
        assert!(lens.iter().any(|&n| n < 25) && lens.iter().any(|&n| n > 25));
        assert!(out.records.iter().any(|r| r.finish_reason.as_deref() == Some("stop")));
    }
}
