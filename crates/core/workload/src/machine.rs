//! The load state machine: who sends what, and when, for every load profile.
//!
//! One pure, synchronous machine decides the whole load of a run: open-loop arrivals (every
//! arrival process), closed-loop users and their pauses, sessions and their turns (each turn's
//! prompt is the conversation so far), think times, a concurrency cap, the request budget, the
//! duration and the error budget. Drivers feed it what happened and do what it says:
//!
//! - [`LoadMachine::next`]`(now)` answers [`Next::Send`] (send this request now), [`Next::Wait`]
//!   (nothing is due before `t`), [`Next::Idle`] (nothing is due until a request finishes) or
//!   [`Next::Done`];
//! - [`LoadMachine::finished`] reports a request's end (when, whether it succeeded, how many
//!   tokens the reply had, and its text when the driver keeps text).
//!
//! The async HTTP runner drives it on the wall clock, the simulator in virtual time; neither
//! re-implements any of it, so `bench` and `sim` send the same requests for the same plan and
//! seed. Every random draw comes from [`crate::seed`], keyed so that it does not depend on the
//! order in which the driver reaches it.
//!
//! With a [`Shard`] ([`LoadMachine::sharded`]) the machine still generates the global schedule
//! but sends only its slice of it (see [`crate::shard`]).
//!
//! Times are seconds since the run start.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use goodput_metrics::StopReason;
use serde::{Deserialize, Serialize};

use crate::arrivals::{ArrivalClock, Arrivals};
use crate::load::Load;
use crate::seed;
use crate::session::{Conversation, Message, Segment, SessionSpec};
use crate::shard::Shard;
use crate::think::ThinkTime;

/// Where sessions come from: a [`crate::Workload`], or a queue a generator thread fills.
pub trait SessionSource: Send {
    /// The next session, or `None` when there are no more.
    fn next_session(&mut self) -> Option<SessionSpec>;
}

impl SessionSource for crate::Workload {
    fn next_session(&mut self) -> Option<SessionSpec> {
        crate::Workload::next_session(self)
    }
}

/// When a run stops sending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    /// Requests to send, at most.
    pub requests: Option<u64>,
    /// Nothing scheduled after this many seconds is sent.
    pub duration_s: Option<f64>,
    /// Stop sending once this many requests have failed.
    pub max_errors: Option<u64>,
    /// Stop sending once the server is over-saturated, judged against this TTFT budget (ms):
    /// [`goodput_metrics::trend::OverSaturation`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_saturation_ms: Option<f64>,
    /// Multiplies the pauses between a session's calls (`--time-scale` outside a replay; a
    /// replay's own time scale does it otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_scale: Option<f64>,
}

/// What a driver sends and when it stops sending, whichever drives it (the real-time client and
/// the virtual-time simulator both take one): the load, its bounds, the seed, this process's
/// shard of the schedule, and whether requests run to `max_tokens`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sending {
    pub load: Load,
    pub bounds: Bounds,
    pub seed: u64,
    /// Send only this shard's slice of the schedule (`--shard I/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Requests run to `max_tokens` (otherwise each may stop at its natural length).
    pub ignore_eos: bool,
}

impl Sending {
    /// `load` with no bound but the workload's end, seed 0, unsharded, run to `max_tokens`.
    pub fn new(load: Load) -> Self {
        Sending { load, bounds: Bounds::default(), seed: 0, shard: None, ignore_eos: true }
    }

    /// At most `n` requests.
    pub fn with_requests(mut self, n: u64) -> Self {
        self.bounds.requests = Some(n);
        self
    }

    /// The machine that paces this sending over `source` (`text`: requests carry prompt text).
    pub fn machine(&self, source: Box<dyn SessionSource>, text: bool) -> LoadMachine {
        LoadMachine::sharded(&self.load, self.bounds, self.seed, source, text, self.shard)
    }
}

/// A request to send now.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Position in this process's send order (0-based, dense: drivers index by it).
    pub id: u64,
    /// A sub-agent's number within its session (1-based); `None` for the session's own agent.
    pub agent: Option<u32>,
    /// The id the record carries: `id` in an unsharded run, shard `I/N`'s `id·N + I` otherwise.
    pub global_id: u64,
    /// The shard that sends it (`None` in an unsharded run).
    pub shard: Option<u32>,
    pub session: u64,
    pub turn: u32,
    /// Part of a multi-turn workload (records then carry the session and turn).
    pub multi_turn: bool,
    /// The closed-loop user sending it.
    pub user: Option<u32>,
    /// When it was due, seconds.
    pub scheduled_s: f64,
    /// Time spent waiting for a concurrency slot after it was due.
    pub cap_wait_s: f64,
    /// Prompt tokens by the run's tokenizer (the whole conversation so far).
    pub input_tokens: u64,
    /// `max_tokens` of the answer.
    pub max_tokens: u32,
    /// Tokens to reason before the answer (the engine model's; 0: none). A server's
    /// `max_tokens` counts both: [`Request::total_tokens`].
    pub reasoning_tokens: u32,
    /// The request's own random stream (an engine's natural stop, generated words).
    pub seed: u64,
    /// The prompt's content, for prefix caching.
    pub segments: Vec<Segment>,
    /// The session has more turns: its reply is needed to compose the next prompt.
    pub more_turns: bool,
    /// The content id the reply will have in the session's later prompts.
    pub reply_segment: u64,
    /// The conversation's messages (empty when the machine keeps no text).
    pub messages: Vec<Message>,
}

impl Request {
    /// The request's record before it is sent: ids, schedule and requested length. The driver
    /// adds what it measures (or simulates).
    pub fn record(&self) -> goodput_metrics::RequestRecord {
        goodput_metrics::RequestRecord {
            id: self.global_id,
            shard: self.shard,
            session: self.multi_turn.then_some(self.session),
            turn: self.multi_turn.then_some(self.turn),
            agent: self.agent,
            user: self.user,
            scheduled_ms: self.scheduled_s * 1e3,
            cap_wait_ms: self.cap_wait_s * 1e3,
            requested_output_tokens: Some(self.total_tokens() as u64),
            requested_reasoning_tokens: (self.reasoning_tokens > 0).then_some(self.reasoning_tokens as u64),
            ..Default::default()
        }
    }

    /// The output a server is asked for: the reasoning and the answer.
    pub fn total_tokens(&self) -> u32 {
        self.max_tokens.saturating_add(self.reasoning_tokens)
    }
}

/// How a request ended.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    pub ok: bool,
    /// Output tokens (for the conversation's length).
    pub output_tokens: u64,
    /// The reply text (multi-turn sessions resend it); empty when the driver keeps no text.
    pub reply: String,
    /// When its first token arrived, seconds (the over-saturation check reads its TTFT).
    pub first_token_s: Option<f64>,
    /// When it was first sent less its wait for a `--max-concurrency` slot, seconds (`None`: when
    /// it was scheduled, as in the simulator): the over-saturation check reads TTFT from it and
    /// the client's own lag (its schedule lag) up to it. A slot's wait is left in TTFT: with a
    /// cap, an over-saturated server's queue grows in the client.
    pub sent_s: Option<f64>,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Send(Box<Request>),
    /// Nothing is due before this time (a request may still finish earlier).
    Wait(f64),
    /// Nothing is due until a request finishes.
    Idle,
    /// Nothing more will be sent and nothing is in flight.
    Done(StopReason),
}

enum Due {
    /// A closed-loop user starts its next session.
    User(u32),
    /// An open-loop arrival.
    Arrival(Box<SessionSpec>),
    /// A session's next turn.
    Turn(u64),
}

struct Timer {
    at: f64,
    order: u64,
    due: Due,
}

impl PartialEq for Timer {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timer {
    // a min-heap on (time, insertion order)
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.total_cmp(&self.at).then(o.order.cmp(&self.order))
    }
}

struct Active {
    spec: SessionSpec,
    conv: Conversation,
    turn: usize,
    user: Option<u32>,
    /// The session's id (records carry it; a sub-agent's is its parent's).
    root: u64,
    /// A sub-agent: the key of the agent it returns to.
    parent: Option<u64>,
    /// Sub-agents this agent waits for before its next turn.
    waiting: u32,
}

/// A sub-agent's key in the machine's map of active agents (apart from every session id).
fn sub_agent_key(session: u64, agent: u32) -> u64 {
    seed::mix(&[session, agent as u64, 0x7375_6261_6765_6e74]) | (1 << 63)
}

/// Hashes the machine's own ids (sequential integers): a multiply and a shift, instead of the
/// default DoS-resistant hash, which costs more than the rest of a request's bookkeeping.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A turn that is due, waiting to be sent.
struct Ready {
    session: u64,
    at: f64,
    /// It had to wait for a concurrency slot.
    capped: bool,
}

/// The load state machine (see the module documentation).
pub struct LoadMachine {
    source: Box<dyn SessionSource>,
    bounds: Bounds,
    seed: u64,
    text: bool,
    cap: Option<usize>,
    think: ThinkTime,
    arrivals: Option<(ArrivalClock, seed::Rng)>,
    /// Multiplies the pauses between a session's calls (a trace's think and tool times):
    /// [`Bounds::pause_scale`], else a replay's time scale (it stretches them as it stretches
    /// the arrivals), else 1.
    pause_scale: f64,
    users: Vec<seed::Rng>,
    /// This process's slice of a sharded schedule.
    shard: Option<Shard>,
    /// A closed loop's users in the whole (global) run.
    users_total: u64,

    timers: BinaryHeap<Timer>,
    order: u64,
    ready: VecDeque<Ready>,
    sessions: IdMap<Active>,
    /// Request id → session id and scheduled time, while in flight.
    requests: IdMap<(u64, f64)>,
    /// `--stop-over-saturated`.
    oversat: Option<goodput_metrics::trend::OverSaturation>,
    next_id: u64,
    /// Turns of the sessions started so far (sessions are cut to the request budget).
    planned: u64,
    failed: u64,
    in_flight: usize,
    stop: Option<StopReason>,
    /// Something due was not sent because the duration had passed.
    cut_by_duration: bool,
    /// The latest time the concurrency cap is known to have been full: a turn due no later than
    /// this waited for a slot (its delay is cap wait, not lag).
    cap_full_at: f64,
}

impl LoadMachine {
    /// A machine for `load` within `bounds`; `text`: keep messages' text (an HTTP driver sends
    /// it; the simulator needs only counts).
    pub fn new(load: &Load, bounds: Bounds, seed: u64, source: Box<dyn SessionSource>, text: bool) -> Self {
        Self::sharded(load, bounds, seed, source, text, None)
    }

    /// [`LoadMachine::new`] sending only `shard`'s slice of the global schedule (`None`: all of
    /// it). `bounds` are the global run's: the request budget counts every shard's sessions.
    pub fn sharded(
        load: &Load,
        bounds: Bounds,
        seed: u64,
        source: Box<dyn SessionSource>,
        text: bool,
        shard: Option<Shard>,
    ) -> Self {
        let mut m = LoadMachine {
            source,
            bounds,
            seed,
            text,
            cap: None,
            think: ThinkTime::default(),
            arrivals: None,
            pause_scale: bounds.pause_scale.unwrap_or(1.0),
            users: Vec::new(),
            shard,
            users_total: 0,
            timers: BinaryHeap::new(),
            order: 0,
            ready: VecDeque::new(),
            sessions: IdMap::default(),
            requests: IdMap::default(),
            next_id: 0,
            planned: 0,
            failed: 0,
            in_flight: 0,
            stop: None,
            oversat: bounds.over_saturation_ms.map(goodput_metrics::trend::OverSaturation::new),
            cut_by_duration: false,
            cap_full_at: f64::NEG_INFINITY,
        };
        match load {
            Load::Closed { think, .. } => {
                let users = load.users(bounds.requests).unwrap_or(1);
                m.think = think.clone();
                m.users_total = users as u64;
                for u in 0..users as u32 {
                    // every user's stream exists (indexed by user id); a shard starts only its own
                    m.users.push(seed::rng_for(seed, seed::USER_KEY | u as u64));
                    if shard.is_none_or(|s| s.owns_user(u as u64)) {
                        m.push(0.0, Due::User(u));
                    }
                }
            }
            Load::Open { arrivals, max_concurrency } => {
                m.cap = *max_concurrency;
                if let (Arrivals::Replay { time_scale }, None) = (arrivals, bounds.pause_scale) {
                    m.pause_scale = *time_scale;
                }
                m.arrivals = Some((ArrivalClock::new(arrivals.clone()), seed::rng(seed, seed::Stream::Arrivals)));
                m.schedule_arrival();
            }
        }
        m
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Requests sent so far.
    pub fn sent(&self) -> u64 {
        self.next_id
    }

    /// Requests that failed so far.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// Stops sending (an interruption, a saturated step); requests in flight still finish.
    pub fn stop(&mut self, reason: StopReason) {
        if self.stop.is_none() {
            self.stop = Some(reason);
        }
        self.timers.clear();
        self.ready.clear();
    }

    /// Why the run was called over-saturated (`--stop-over-saturated`), once it was.
    pub fn over_saturation(&self) -> Option<&str> {
        self.oversat.as_ref().and_then(|o| o.verdict())
    }

    /// Why the run stopped sending, if it has.
    pub fn stopped(&self) -> Option<StopReason> {
        self.stop
    }

    fn push(&mut self, at: f64, due: Due) {
        if self.stop.is_some() {
            return;
        }
        if !self.within_duration(at) {
            // due after the duration: never sent, and the run need not wait for it
            self.cut_by_duration = true;
            return;
        }
        self.order += 1;
        self.timers.push(Timer { at, order: self.order, due });
    }

    fn budget_left(&self) -> bool {
        self.bounds.requests.is_none_or(|n| self.planned < n)
    }

    fn within_duration(&self, t: f64) -> bool {
        self.bounds.duration_s.is_none_or(|d| t <= d + 1e-9)
    }

    /// The next session from the source, cut to the request budget.
    fn pull(&mut self) -> Option<SessionSpec> {
        if !self.budget_left() {
            return None;
        }
        let mut spec = self.source.next_session()?;
        if let Some(n) = self.bounds.requests {
            spec.truncate_requests((n - self.planned).max(1));
        }
        if spec.turns.is_empty() {
            return None;
        }
        self.planned += spec.requests();
        Some(spec)
    }

    /// The next session a closed-loop user of this shard sends: the global sequence's next one
    /// this shard owns (the others count against the budget, but another shard sends them).
    fn pull_own(&mut self) -> Option<SessionSpec> {
        loop {
            let spec = self.pull()?;
            if self.shard.is_none_or(|s| s.owns_closed_session(spec.id, self.users_total)) {
                return Some(spec);
            }
        }
    }

    /// Keeps one open-loop arrival ahead. A shard draws every global arrival (its time and its
    /// session) and keeps its own.
    fn schedule_arrival(&mut self) {
        loop {
            let Some(spec) = self.pull() else { return };
            let Some((clock, rng)) = &mut self.arrivals else { return };
            let at = clock.next(rng, spec.trace_time_s);
            if !self.within_duration(at) {
                self.cut_by_duration = true;
                return;
            }
            if self.shard.is_none_or(|s| s.owns_arrival(spec.id)) {
                self.push(at, Due::Arrival(Box::new(spec)));
                return;
            }
        }
    }

    fn start_session(&mut self, spec: SessionSpec, user: Option<u32>, at: f64) {
        let id = spec.id;
        let conv = Conversation::start(&spec, self.text);
        self.sessions.insert(id, Active { spec, conv, turn: 0, user, root: id, parent: None, waiting: 0 });
        self.ready.push_back(Ready { session: id, at, capped: false });
    }

    /// Starts the sub-agents turn `done` of agent `key` forks: each begins with the agent's
    /// conversation so far; the agent's next turn waits for them all.
    fn fork(&mut self, key: u64, done: usize, at: f64) -> bool {
        let Some(a) = self.sessions.get_mut(&key) else { return false };
        let forks = std::mem::take(&mut a.spec.turns[done].forks);
        if forks.is_empty() {
            return false;
        }
        a.waiting = forks.len() as u32;
        let (root, conv) = (a.root, a.conv.clone());
        for f in forks {
            let child = sub_agent_key(root, f.agent.unwrap_or(0));
            let conv = conv.fork(child);
            let first = f.turns.first().map_or(0.0, |t| t.think_s) * self.pause_scale;
            self.sessions
                .insert(child, Active { spec: f, conv, turn: 0, user: None, root, parent: Some(key), waiting: 0 });
            self.push(at + first, Due::Turn(child));
        }
        true
    }

    /// A session or sub-agent ended (all turns, or a failure): a sub-agent's parent goes on once
    /// its last sub-agent is back; a closed-loop user starts its next session.
    fn end_session(&mut self, session: u64, at: f64) {
        let Some(a) = self.sessions.remove(&session) else { return };
        if let Some(p) = a.parent {
            let Some(parent) = self.sessions.get_mut(&p) else { return };
            parent.waiting = parent.waiting.saturating_sub(1);
            if parent.waiting == 0 {
                if parent.turn < parent.spec.turns.len() {
                    let next_at = at + parent.spec.turns[parent.turn].think_s * self.pause_scale;
                    self.push(next_at, Due::Turn(p));
                } else {
                    self.end_session(p, at);
                }
            }
            return;
        }
        // a user with nothing left to send does not pause before it stops
        if let Some(u) = a.user
            && self.budget_left()
        {
            let pause = self.think.sample(&mut self.users[u as usize]);
            self.push(at + pause, Due::User(u));
        }
    }

    fn fire(&mut self, t: Timer) {
        match t.due {
            Due::User(u) => {
                // a user with no session left to send stops here
                if let Some(spec) = self.pull_own() {
                    self.start_session(spec, Some(u), t.at);
                }
            }
            Due::Arrival(spec) => {
                self.start_session(*spec, None, t.at);
                self.schedule_arrival();
            }
            Due::Turn(session) => self.ready.push_back(Ready { session, at: t.at, capped: false }),
        }
    }

    fn cap_full(&self) -> bool {
        self.cap.is_some_and(|c| self.in_flight >= c)
    }

    /// Fires due timers until one turn is ready (or none is due). Only what the next send needs
    /// is fired: an all-at-once load keeps one arrival ahead, not its whole budget, so the first
    /// request goes out after O(1) work and the driver's lock is held briefly.
    fn fire_due(&mut self, now: f64) {
        while self.ready.is_empty() && self.timers.peek().is_some_and(|t| t.at <= now) {
            let t = self.timers.pop().expect("peeked");
            if !self.within_duration(t.at) {
                self.cut_by_duration = true;
                continue;
            }
            let (at, start) = (t.at, self.ready.len());
            self.fire(t);
            // fired late because the cap held the turns before it: it waited for a slot too
            if at <= self.cap_full_at {
                for r in self.ready.iter_mut().skip(start) {
                    r.capped = true;
                }
            }
        }
    }

    /// What to do at `now`.
    pub fn next(&mut self, now: f64) -> Next {
        if self.stop.is_none() && self.bounds.duration_s.is_some_and(|d| now > d + 1e-9) {
            // the duration has passed: what is still due is not sent
            if !self.timers.is_empty() || !self.ready.is_empty() {
                self.cut_by_duration = true;
            }
            self.stop(StopReason::Duration);
        }
        if let Some(o) = &mut self.oversat
            && self.stop.is_none()
            && o.tick(now * 1e3, self.in_flight)
        {
            self.stop(StopReason::OverSaturated);
        }
        if self.stop.is_none() {
            self.fire_due(now);
        }
        if let Some(r) = self.ready.front() {
            if !self.cap_full() {
                let (session, at, capped) = (r.session, r.at, r.capped);
                self.ready.pop_front();
                let cap_wait = if capped { (now - at).max(0.0) } else { 0.0 };
                return Next::Send(Box::new(self.send(session, at, cap_wait)));
            }
            self.cap_full_at = now;
            for r in &mut self.ready {
                r.capped = true;
            }
        }
        if self.in_flight == 0 && self.ready.is_empty() && self.timers.is_empty() {
            let reason = match self.stop {
                Some(r) => r,
                None if self.cut_by_duration => StopReason::Duration,
                None => StopReason::Completed,
            };
            return Next::Done(reason);
        }
        match self.timers.peek() {
            // due but not fired: the cap holds the turns before it until a request finishes
            Some(t) if t.at <= now => Next::Idle,
            Some(t) => Next::Wait(t.at),
            None => Next::Idle,
        }
    }

    fn send(&mut self, session: u64, at: f64, cap_wait_s: f64) -> Request {
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight += 1;
        self.requests.insert(id, (session, at));
        let a = self.sessions.get_mut(&session).expect("a ready turn's session is active");
        let turn = &a.spec.turns[a.turn];
        a.conv.push_user(turn);
        let multi_turn = a.spec.multi_turn || a.spec.turns.len() > 1;
        Request {
            id,
            agent: a.spec.agent,
            global_id: self.shard.map_or(id, |s| s.global_id(id)),
            shard: self.shard.map(|s| s.index),
            session: a.root,
            turn: a.turn as u32,
            multi_turn,
            user: a.user,
            scheduled_s: at,
            cap_wait_s,
            input_tokens: a.conv.tokens,
            max_tokens: turn.output_tokens.max(1),
            reasoning_tokens: turn.reasoning_tokens,
            seed: seed::request_seed(self.seed, session, a.turn as u32),
            segments: a.conv.segments.clone(),
            // a sub-agent forked from this turn resends its reply too
            more_turns: a.turn + 1 < a.spec.turns.len() || !turn.forks.is_empty(),
            reply_segment: Conversation::reply_segment(session, a.turn as u32),
            messages: a.conv.messages.clone(),
        }
    }

    /// Request `id` ended at `at` (unknown ids are ignored).
    pub fn finished(&mut self, id: u64, at: f64, f: Finished) {
        let Some((session, scheduled)) = self.requests.remove(&id) else { return };
        if let Some(o) = &mut self.oversat
            && o.finished(
                at * 1e3,
                scheduled * 1e3,
                f.sent_s.unwrap_or(scheduled) * 1e3,
                f.first_token_s.filter(|_| f.ok).map(|t| t * 1e3),
                self.in_flight - 1,
            )
        {
            self.stop(StopReason::OverSaturated);
        }
        if self.cap_full() {
            // the cap was full until this request ended
            self.cap_full_at = self.cap_full_at.max(at);
        }
        self.in_flight -= 1;
        if !f.ok {
            self.failed += 1;
            if self.bounds.max_errors.is_some_and(|m| self.failed >= m) {
                self.stop(StopReason::MaxErrors);
            }
            // a broken conversation is not continued
            self.end_session(session, at);
            return;
        }
        let Some(a) = self.sessions.get_mut(&session) else { return };
        a.conv.push_reply(a.turn as u32, f.reply, f.output_tokens);
        let done = a.turn;
        a.turn += 1;
        if self.fork(session, done, at) {
            // the next turn waits for the sub-agents (`end_session`)
            return;
        }
        let Some(a) = self.sessions.get(&session) else { return };
        if a.turn < a.spec.turns.len() {
            let next_at = at + a.spec.turns[a.turn].think_s * self.pause_scale;
            self.push(next_at, Due::Turn(session));
        } else {
            self.end_session(session, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LengthDist, Turns, Workload, WorkloadSpec};

    fn machine(load: Load, bounds: Bounds, spec: WorkloadSpec) -> LoadMachine {
        let w = Workload::counts_only(spec).unwrap();
        LoadMachine::new(&load, bounds, 0, Box::new(w), false)
    }

    fn spec() -> WorkloadSpec {
        WorkloadSpec { input_tokens: LengthDist::Fixed(10), output_tokens: LengthDist::Fixed(4), ..Default::default() }
    }

    fn ok(n: u64) -> Finished {
        Finished { ok: true, output_tokens: n, reply: String::new(), first_token_s: None, sent_s: None }
    }

    fn send(n: Next) -> Request {
        match n {
            Next::Send(r) => *r,
            other => panic!("expected a send, got {other:?}"),
        }
    }

    #[test]
    fn an_agent_forks_sub_agents_and_waits_for_them() {
        // one user; 3 calls with 1 s of tool time, the first call's reply forks 2 sub-agents of 2
        // calls each; the root's second call takes their answers (4 tokens each) as its result
        let a = crate::AgenticSpec {
            calls: LengthDist::Fixed(3),
            tool_time: ThinkTime::Fixed(1.0),
            tool_output_tokens: LengthDist::Fixed(20),
            fan_out: 2,
            fan_out_at: 1,
            sub_agent_calls: LengthDist::Fixed(2),
        };
        let spec = WorkloadSpec { agentic: Some(a), ..spec() };
        let mut m = machine(Load::closed(1), Bounds { requests: Some(7), ..Default::default() }, spec);
        let r0 = send(m.next(0.0));
        assert_eq!((r0.agent, r0.turn, r0.input_tokens), (None, 0, 10));
        assert_eq!(m.next(0.0), Next::Idle);
        m.finished(r0.id, 1.0, ok(4));
        // both sub-agents start at once, from the root's context (10 + 4) plus their task (20)
        let (c1, c2) = (send(m.next(1.0)), send(m.next(1.0)));
        assert_eq!((c1.agent, c2.agent, c1.session, c2.session), (Some(1), Some(2), r0.session, r0.session));
        assert_eq!((c1.input_tokens, c1.turn), (34, 0));
        // a sub-agent shares its parent's context as prefix: its prompt, then its reply
        assert_eq!(c1.segments[0], r0.segments[0]);
        assert_eq!(c1.segments[1].id, r0.reply_segment);
        assert_eq!(m.next(1.0), Next::Idle);
        m.finished(c1.id, 2.0, ok(4));
        m.finished(c2.id, 2.5, ok(4));
        // each sub-agent's second call after its tool time; the root waits
        let c1b = send(m.next(3.0));
        assert_eq!(m.next(3.0), Next::Wait(3.5));
        let c2b = send(m.next(3.5));
        assert_eq!((c1b.agent, c1b.turn, c1b.input_tokens), (Some(1), 1, 34 + 4 + 20));
        m.finished(c1b.id, 4.0, ok(4));
        assert_eq!(m.next(10.0), Next::Idle, "the root waits for its last sub-agent");
        m.finished(c2b.id, 5.0, ok(4));
        // the root's second call: after its tool time, with both answers (8) and its own result (20)
        assert_eq!(m.next(5.0), Next::Wait(6.0));
        let r1 = send(m.next(6.0));
        assert_eq!((r1.agent, r1.turn, r1.input_tokens), (None, 1, 10 + 4 + 8 + 20));
        m.finished(r1.id, 7.0, ok(4));
        let r2 = send(m.next(8.0));
        assert_eq!(r2.turn, 2);
        m.finished(r2.id, 9.0, ok(4));
        assert_eq!(m.sent(), 7);
        assert_eq!(m.next(9.0), Next::Done(StopReason::Completed));
    }

    #[test]
    fn a_replays_time_scale_stretches_the_pauses_between_calls_as_it_stretches_arrivals() {
        // 2 calls 1 s of tool time apart; replayed at ×0.25 the pause is 0.25 s
        let a = crate::AgenticSpec {
            calls: LengthDist::Fixed(2),
            tool_time: ThinkTime::Fixed(1.0),
            tool_output_tokens: LengthDist::Fixed(20),
            ..Default::default()
        };
        let spec = WorkloadSpec { agentic: Some(a), ..spec() };
        let load = Load::Open { arrivals: Arrivals::Replay { time_scale: 0.25 }, max_concurrency: None };
        let mut m = machine(load, Bounds { requests: Some(2), ..Default::default() }, spec);
        let r0 = send(m.next(0.0));
        m.finished(r0.id, 2.0, ok(4));
        assert_eq!(m.next(2.0), Next::Wait(2.25));
        let r1 = send(m.next(2.25));
        assert_eq!((r1.session, r1.turn, r1.scheduled_s), (r0.session, 1, 2.25));
    }

    #[test]
    fn closed_loop_users_follow_each_other_with_think_time() {
        let load = Load::Closed { concurrency: 2, think: ThinkTime::Fixed(1.0) };
        let mut m = machine(load, Bounds { requests: Some(4), ..Default::default() }, spec());
        let a = send(m.next(0.0));
        let b = send(m.next(0.0));
        assert_eq!((a.id, a.user, b.id, b.user), (0, Some(0), 1, Some(1)));
        assert_eq!(m.next(0.0), Next::Idle);
        m.finished(1, 2.0, ok(4));
        // user 1 thinks for 1 s after its reply
        assert_eq!(m.next(2.0), Next::Wait(3.0));
        let c = send(m.next(3.0));
        assert_eq!((c.user, c.scheduled_s, c.session), (Some(1), 3.0, 2));
        m.finished(0, 3.5, ok(4));
        let d = send(m.next(4.5));
        assert_eq!((d.user, d.scheduled_s), (Some(0), 4.5));
        m.finished(2, 5.0, ok(4));
        m.finished(3, 6.0, ok(4));
        // the budget of 4 is spent
        assert_eq!(m.next(7.0), Next::Done(StopReason::Completed));
    }

    #[test]
    fn open_loop_arrivals_and_the_cap() {
        let load = Load::Open { arrivals: Arrivals::Constant { rate: 10.0 }, max_concurrency: Some(1) };
        let mut m = machine(load, Bounds { requests: Some(3), ..Default::default() }, spec());
        let a = send(m.next(0.0));
        assert_eq!((a.scheduled_s, a.cap_wait_s), (0.0, 0.0));
        assert_eq!(m.next(0.05), Next::Wait(0.1));
        // due at 0.1 but the one slot is taken
        assert_eq!(m.next(0.1), Next::Wait(0.2));
        assert_eq!(m.next(0.2), Next::Idle);
        m.finished(0, 0.25, ok(4));
        let b = send(m.next(0.25));
        assert_eq!(b.scheduled_s, 0.1);
        assert!((b.cap_wait_s - 0.15).abs() < 1e-12);
        m.finished(1, 0.3, ok(4));
        let c = send(m.next(0.3));
        assert!((c.cap_wait_s - 0.1).abs() < 1e-12);
        m.finished(2, 0.4, ok(4));
        assert_eq!(m.next(0.4), Next::Done(StopReason::Completed));
    }

    #[test]
    fn sessions_resend_the_conversation_after_think_time() {
        let w = WorkloadSpec { turns: Turns::Up(3), think_time: ThinkTime::Fixed(2.0), ..spec() };
        let mut m = machine(Load::closed(1), Bounds { requests: Some(3), ..Default::default() }, w);
        let t0 = send(m.next(0.0));
        assert_eq!((t0.turn, t0.input_tokens, t0.multi_turn), (0, 10, true));
        m.finished(0, 1.0, ok(4));
        assert_eq!(m.next(1.0), Next::Wait(3.0));
        let t1 = send(m.next(3.0));
        // 10 (turn 1) + 4 (reply) + 10 (turn 2)
        assert_eq!((t1.turn, t1.input_tokens, t1.session), (1, 24, t0.session));
        assert_eq!(t1.segments.len(), 3);
        assert_eq!(t1.segments[0], t0.segments[0], "the history is the first turn's prompt");
        assert_ne!(t1.seed, t0.seed);
    }

    #[test]
    fn a_failure_ends_the_session_and_max_errors_stops() {
        let w = WorkloadSpec { turns: Turns::Up(3), ..spec() };
        let mut m =
            machine(Load::closed(1), Bounds { requests: Some(10), max_errors: Some(2), ..Default::default() }, w);
        send(m.next(0.0));
        m.finished(0, 1.0, Finished::default());
        // the next session starts (a new session id, turn 0)
        let r = send(m.next(1.0));
        assert_eq!((r.turn, r.session), (0, 1));
        m.finished(1, 2.0, Finished::default());
        assert_eq!(m.next(2.0), Next::Done(StopReason::MaxErrors));
    }

    #[test]
    fn duration_cuts_the_schedule() {
        let load = Load::Open { arrivals: Arrivals::Constant { rate: 10.0 }, max_concurrency: None };
        let mut m = machine(load, Bounds { duration_s: Some(1.0), ..Default::default() }, spec());
        let mut t = 0.0;
        let mut sent = 0;
        loop {
            match m.next(t) {
                Next::Send(r) => {
                    sent += 1;
                    m.finished(r.id, t, ok(4));
                }
                Next::Wait(at) => t = at,
                Next::Idle => unreachable!(),
                Next::Done(reason) => {
                    assert_eq!(reason, StopReason::Duration);
                    break;
                }
            }
        }
        assert_eq!(sent, 11, "arrivals at 0, 0.1, …, 1.0 s");
    }

    /// Counts the sessions the machine pulls from its source.
    struct Counting(Workload, std::sync::Arc<std::sync::atomic::AtomicU64>);

    impl SessionSource for Counting {
        fn next_session(&mut self) -> Option<SessionSpec> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.next_session()
        }
    }

    #[test]
    fn all_at_once_sends_its_first_request_after_constant_work() {
        let pulled = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let source = Counting(Workload::counts_only(spec()).unwrap(), pulled.clone());
        let load = Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None };
        let bounds = Bounds { requests: Some(100_000), ..Default::default() };
        let mut m = LoadMachine::new(&load, bounds, 0, Box::new(source), false);
        let first = send(m.next(0.0));
        assert_eq!((first.id, first.scheduled_s), (0, 0.0));
        // one session sent, one arrival kept ahead: not the 100,000 of the budget
        assert!(pulled.load(std::sync::atomic::Ordering::Relaxed) <= 2);
        assert!(m.sessions.len() + m.ready.len() + m.timers.len() <= 3, "{} sessions", m.sessions.len());
        // and the rest go out one per call, all due at 0
        for id in 1..100_000 {
            let r = send(m.next(0.0));
            assert_eq!((r.id, r.scheduled_s, r.cap_wait_s), (id, 0.0, 0.0));
        }
        assert_eq!(m.next(0.0), Next::Idle);
    }

    #[test]
    fn all_at_once_under_a_cap_waits_for_slots_without_pulling_ahead() {
        let load = Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: Some(2) };
        let mut m = machine(load, Bounds { requests: Some(1000), ..Default::default() }, spec());
        send(m.next(0.0));
        send(m.next(0.0));
        // the cap is full: nothing to do until a request ends (no busy Wait on a past time)
        assert_eq!(m.next(0.5), Next::Idle);
        assert!(m.sessions.len() <= 3);
        m.finished(0, 1.0, ok(4));
        let r = send(m.next(1.2));
        assert_eq!((r.id, r.scheduled_s, r.cap_wait_s), (2, 0.0, 1.2));
        assert_eq!(m.next(1.2), Next::Idle);
        m.finished(1, 1.5, ok(4));
        // due at 0 and held by the cap since: all of its wait is cap wait
        let r = send(m.next(1.5));
        assert_eq!((r.id, r.cap_wait_s), (3, 1.5));
    }

    #[test]
    fn stop_lets_in_flight_finish() {
        let mut m = machine(Load::closed(2), Bounds::default(), spec());
        send(m.next(0.0));
        send(m.next(0.0));
        m.stop(StopReason::Interrupted);
        assert_eq!(m.next(0.5), Next::Idle);
        m.finished(0, 1.0, ok(4));
        m.finished(1, 1.0, ok(4));
        assert_eq!(m.next(1.0), Next::Done(StopReason::Interrupted));
    }

    /// (global id, session, turn, user, scheduled time, prompt tokens, max tokens, shard).
    type SentRequest = (u64, u64, u32, Option<u32>, f64, u64, u32, Option<u32>);
    type Sent = Vec<SentRequest>;
    /// A [`SentRequest`] less its shard.
    type UnshardedSend = (u64, u64, u32, Option<u32>, f64, u64, u32);
    type Unsharded = Vec<UnshardedSend>;

    /// Drives a machine with every request taking `service` seconds; returns what it sent as
    /// (global id, session, turn, user, scheduled time, prompt tokens, max tokens, shard).
    fn drive(load: &Load, bounds: Bounds, w: WorkloadSpec, shard: Option<Shard>, service: f64) -> Sent {
        let source = Workload::counts_only(w).unwrap();
        let mut m = LoadMachine::sharded(load, bounds, 5, Box::new(source), false, shard);
        let mut out = Vec::new();
        let mut ends: Vec<(f64, u64)> = Vec::new();
        let mut t = 0.0f64;
        loop {
            match m.next(t) {
                Next::Send(r) => {
                    out.push((
                        r.global_id,
                        r.session,
                        r.turn,
                        r.user,
                        r.scheduled_s,
                        r.input_tokens,
                        r.max_tokens,
                        r.shard,
                    ));
                    ends.push((t + service, r.id));
                }
                Next::Done(_) => break,
                next => {
                    let due = match next {
                        Next::Wait(at) => at,
                        _ => f64::INFINITY,
                    };
                    ends.sort_by(|a, b| b.0.total_cmp(&a.0));
                    match ends.last() {
                        Some(&(end, id)) if end <= due => {
                            ends.pop();
                            t = t.max(end);
                            m.finished(id, end, ok(4));
                        }
                        _ => t = due,
                    }
                }
            }
        }
        out.sort_by(|a, b| a.4.total_cmp(&b.4).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        out
    }

    /// The union of `n` shards' sends, with the shard field dropped.
    fn union(load: &Load, bounds: Bounds, w: &WorkloadSpec, n: u32, service: f64) -> Unsharded {
        let mut all = Vec::new();
        for i in 0..n {
            for s in drive(load, bounds, w.clone(), Some(Shard::new(i, n).unwrap()), service) {
                assert_eq!(s.7, Some(i), "records carry their shard");
                all.push((s.0, s.1, s.2, s.3, s.4, s.5, s.6));
            }
        }
        all.sort_by(|a, b| a.4.total_cmp(&b.4).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        all
    }

    fn strip(v: Sent) -> Unsharded {
        v.into_iter().map(|s| (s.0, s.1, s.2, s.3, s.4, s.5, s.6)).collect()
    }

    #[test]
    fn open_loop_shards_deal_the_global_arrivals_round_robin() {
        let load = Load::Open { arrivals: Arrivals::Poisson { rate: 20.0 }, max_concurrency: None };
        let bounds = Bounds { requests: Some(50), ..Default::default() };
        let w = WorkloadSpec { input_tokens: LengthDist::Uniform { lo: 5, hi: 50 }, ..spec() };
        let whole = strip(drive(&load, bounds, w.clone(), None, 0.01));
        assert_eq!(whole.len(), 50);
        for n in 1..=4 {
            assert_eq!(union(&load, bounds, &w, n, 0.01), whole, "{n} shards");
        }
        // request k is sent by shard k mod N, with the id one process gives it
        let s1 = drive(&load, bounds, w, Some(Shard::new(1, 3).unwrap()), 0.01);
        assert!(s1.iter().all(|s| s.0 % 3 == 1));
        assert_eq!(s1.len(), 17);
    }

    #[test]
    fn closed_loop_shards_split_users_and_keep_their_streams() {
        // a bound by duration: each user's schedule depends only on its own stream
        let load = Load::Closed { concurrency: 5, think: ThinkTime::Exponential { mean: 0.5 } };
        let bounds = Bounds { duration_s: Some(5.0), ..Default::default() };
        let whole = drive(&load, bounds, spec(), None, 0.2);
        for n in 1..=4 {
            let u = union(&load, bounds, &spec(), n, 0.2);
            // one process hands sessions to users in the order they come; a shard deals them:
            // compare everything but the ids and session ids
            let key = |v: &[UnshardedSend]| {
                let mut k: Vec<(Option<u32>, u64, u64, u32)> =
                    v.iter().map(|s| (s.3, (s.4 * 1e9).round() as u64, s.5, s.6)).collect();
                k.sort();
                k
            };
            assert_eq!(key(&u), key(&strip(whole.clone())), "{n} shards");
            // and every shard runs only its own users
            for i in 0..n {
                let sh = Shard::new(i, n).unwrap();
                assert!(drive(&load, bounds, spec(), Some(sh), 0.2).iter().all(|s| sh.owns_user(s.3.unwrap() as u64)));
            }
        }
    }

    #[test]
    fn sessions_stay_whole_on_one_shard() {
        let w = WorkloadSpec { turns: Turns::Up(3), think_time: ThinkTime::Fixed(0.5), ..spec() };
        let load = Load::Open { arrivals: Arrivals::Poisson { rate: 4.0 }, max_concurrency: None };
        let bounds = Bounds { requests: Some(40), ..Default::default() };
        let whole = strip(drive(&load, bounds, w.clone(), None, 0.1));
        assert_eq!(whole.len(), 40);
        for n in 1..=4 {
            let mut got = Vec::new();
            for i in 0..n {
                for s in drive(&load, bounds, w.clone(), Some(Shard::new(i, n).unwrap()), 0.1) {
                    assert_eq!(s.1 % n as u64, i as u64, "session {} on shard {i}/{n}", s.1);
                    // (session, turn, scheduled, prompt, max tokens): ids depend on send order
                    got.push((s.1, s.2, (s.4 * 1e9).round() as u64, s.5, s.6));
                }
            }
            got.sort();
            let mut want: Vec<_> = whole.iter().map(|s| (s.1, s.2, (s.4 * 1e9).round() as u64, s.5, s.6)).collect();
            want.sort();
            assert_eq!(got, want, "{n} shards");
        }
    }

    #[test]
    fn user_pauses_do_not_depend_on_which_user_finishes_first() {
        let load = Load::Closed { concurrency: 2, think: ThinkTime::Exponential { mean: 1.0 } };
        let pauses = |first: u64| {
            let mut m = machine(load.clone(), Bounds { requests: Some(4), ..Default::default() }, spec());
            send(m.next(0.0));
            send(m.next(0.0));
            m.finished(first, 1.0, ok(4));
            m.finished(1 - first, 1.0, ok(4));
            let mut at = Vec::new();
            let mut t = 1.0;
            for _ in 0..2 {
                match m.next(t) {
                    Next::Wait(w) => t = w,
                    _ => unreachable!(),
                }
                let r = send(m.next(t));
                at.push((r.user, r.scheduled_s));
            }
            at.sort_by_key(|a| a.0);
            at
        };
        assert_eq!(pauses(0), pauses(1));
    }
}
