//! The load runner: a pacer that releases sessions at absolute deadlines (open loop) or N workers
//! that each start the next session when the previous ends (closed loop), stop conditions, and
//! graceful interruption.
//!
//! The pacer runs on its own OS thread and never waits on the workers: it sleeps to just short of
//! each deadline, spins the last stretch (tokio's timer rounds up to 1 ms), then spawns the
//! session onto the runtime. A separate generator thread prepares prompts ahead of the pacer, so
//! building a long prompt never delays a send. Every record keeps its scheduled time, so lateness
//! is measured, not hidden.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use goodput_metrics::{ErrorClass, RequestRecord, units};
use goodput_workload::{ArrivalClock, Arrivals, Conversation, Load, SessionSpec, Workload, seed};
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc};

use crate::exchange::{Endpoint, RequestMeta, execute};
use crate::http::{Cancel, CancelHandle, cancel_pair};
use crate::openai::request_body;

/// When to stop, and how requests are shaped.
#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    pub load: Load,
    /// Stop after this many requests have been sent.
    pub requests: Option<u64>,
    /// Stop sending after this long (in-flight requests finish).
    #[serde(serialize_with = "opt_secs")]
    pub duration: Option<Duration>,
    /// Stop the run when this many requests have failed.
    pub max_errors: Option<u64>,
    /// After an interruption, how long in-flight requests may continue before they are cancelled.
    #[serde(serialize_with = "opt_secs")]
    pub grace: Option<Duration>,
    pub model: String,
    pub ignore_eos: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    pub seed: u64,
}

impl RunConfig {
    /// `load` for `model` with no stop condition but the workload's end, forced output lengths
    /// (`ignore_eos`), no extra body, seed 0.
    pub fn new(load: Load, model: impl Into<String>) -> Self {
        RunConfig {
            load,
            requests: None,
            duration: None,
            max_errors: None,
            grace: None,
            model: model.into(),
            ignore_eos: true,
            extra_body: None,
            seed: 0,
        }
    }
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Why the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The request count was reached (or the dataset ran out) and everything finished.
    Completed,
    /// `--duration` elapsed.
    Duration,
    /// `--max-errors` was reached.
    MaxErrors,
    /// Interrupted from outside (Ctrl-C).
    Interrupted,
}

/// Live counters, for progress display.
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub in_flight: AtomicU64,
}

/// Receives each record as soon as its request ends (for the JSONL log and progress), and each
/// request as it is sent (for `--export-schedule`).
pub trait Observer: Send + Sync {
    fn record(&self, record: &RequestRecord, counters: &Counters);
    fn sent(&self, _meta: &RequestMeta, _body: &[u8], _counters: &Counters) {}
}

impl Observer for () {
    fn record(&self, _: &RequestRecord, _: &Counters) {}
}

/// The outcome of a run.
#[derive(Debug)]
pub struct RunOutcome {
    /// Sorted by id (send order).
    pub records: Vec<RequestRecord>,
    pub stop: StopReason,
    /// True when in-flight requests were cancelled or sends were cut short by an interruption.
    pub interrupted: bool,
    /// Wall time from the run start to its end, seconds.
    pub elapsed_s: f64,
    /// The clock every record's times are on (started when the load began).
    pub clock: crate::http::Clock,
}

/// Sessions the generator thread prepares ahead of the load.
const GENERATOR_AHEAD: usize = 512;

struct Shared {
    ep: Endpoint,
    cfg: RunConfig,
    counters: Counters,
    records: Mutex<Vec<RequestRecord>>,
    observer: Arc<dyn Observer>,
    /// No new requests once set.
    stop: AtomicBool,
    stop_signal: CancelHandle,
    stop_reason: Mutex<Option<StopReason>>,
    /// In-flight requests are cancelled once set.
    abort: CancelHandle,
    tickets: AtomicU64,
    cap: Option<Arc<Semaphore>>,
}

impl Shared {
    fn stop_with(self: &Arc<Self>, reason: StopReason) {
        {
            let mut r = self.stop_reason.lock().expect("lock");
            if r.is_none() {
                *r = Some(reason);
            }
        }
        if !self.stop.swap(true, Ordering::SeqCst) {
            self.stop_signal.cancel();
            if matches!(reason, StopReason::Interrupted | StopReason::MaxErrors) {
                let me = Arc::clone(self);
                let grace = self.cfg.grace.unwrap_or(Duration::from_secs(5));
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    me.abort.cancel();
                });
            }
        }
    }

    /// Claims the next request id, or `None` when no more requests may be sent.
    fn ticket(&self) -> Option<u64> {
        if self.stop.load(Ordering::SeqCst) {
            return None;
        }
        let id = self.tickets.fetch_add(1, Ordering::SeqCst);
        match self.cfg.requests {
            Some(n) if id >= n => None,
            _ => Some(id),
        }
    }

    fn report(self: &Arc<Self>, rec: RequestRecord) {
        let c = &self.counters;
        c.done.fetch_add(1, Ordering::SeqCst);
        let failed = rec.error.as_ref().is_some_and(|e| e.class != ErrorClass::Cancelled);
        if failed {
            let n = c.failed.fetch_add(1, Ordering::SeqCst) + 1;
            if self.cfg.max_errors.is_some_and(|m| n >= m) {
                self.stop_with(StopReason::MaxErrors);
            }
        }
        self.observer.record(&rec, c);
        self.records.lock().expect("lock").push(rec);
    }
}

/// Runs the load and returns every record. `interrupt` stops it early (Ctrl-C).
pub async fn run(
    mut ep: Endpoint,
    cfg: RunConfig,
    workload: Workload,
    interrupt: Cancel,
    observer: Arc<dyn Observer>,
) -> RunOutcome {
    // Sessions are prepared ahead on their own thread. Let it fill its buffer before the clock
    // starts, so building prompts does not compete with the first sends for the CPU.
    let (gen_tx, gen_rx) = mpsc::channel::<SessionSpec>(GENERATOR_AHEAD);
    let budget = cfg.requests;
    let generator = std::thread::Builder::new()
        .name("goodput-workload".into())
        .spawn(move || generate(workload, gen_tx, budget))
        .expect("spawn workload thread");
    let ahead = budget.map_or(GENERATOR_AHEAD, |b| (b as usize).min(GENERATOR_AHEAD));
    while gen_rx.len() < ahead && !generator.is_finished() && !interrupt.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    ep.clock = crate::http::Clock::start();
    let (stop_signal, _) = cancel_pair();
    let (abort, _) = cancel_pair();
    let cap = match &cfg.load {
        Load::Open { max_concurrency: Some(n), .. } => Some(Arc::new(Semaphore::new(*n))),
        _ => None,
    };
    let shared = Arc::new(Shared {
        ep,
        cfg: cfg.clone(),
        counters: Counters::default(),
        records: Mutex::new(Vec::new()),
        observer,
        stop: AtomicBool::new(false),
        stop_signal,
        stop_reason: Mutex::new(None),
        abort,
        tickets: AtomicU64::new(0),
        cap,
    });
    let t0 = shared.ep.clock.t0();

    // Interruption and duration watchers.
    {
        let s = Arc::clone(&shared);
        tokio::spawn(async move {
            interrupt.cancelled().await;
            s.stop_with(StopReason::Interrupted);
        });
    }
    if let Some(d) = cfg.duration {
        let s = Arc::clone(&shared);
        tokio::spawn(async move {
            tokio::time::sleep_until((t0 + d).into()).await;
            s.stop_with(StopReason::Duration);
        });
    }

    // Every session task holds a clone of `alive`; the run is over when all are dropped.
    let (alive, mut all_done) = mpsc::channel::<()>(1);
    match cfg.load.clone() {
        Load::Closed { concurrency, think } => {
            let rx = Arc::new(tokio::sync::Mutex::new(gen_rx));
            // never more users than requests to send
            let users = cfg.requests.map_or(concurrency, |n| concurrency.min(n.max(1) as usize));
            for user in 0..users.max(1) {
                let (s, rx, alive, think) = (Arc::clone(&shared), Arc::clone(&rx), alive.clone(), think.clone());
                let mut rng = seed::rng_for(cfg.seed, 0x7573_6572_0000_0000 | user as u64);
                tokio::spawn(async move {
                    let _alive = alive;
                    let mut first = true;
                    loop {
                        let pause_s = if first { 0.0 } else { think.sample(&mut rng) };
                        if pause_s > 0.0 && !pause(&s, units::duration(pause_s)).await {
                            break;
                        }
                        first = false;
                        if s.stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Some(session) = rx.lock().await.recv().await else {
                            break;
                        };
                        run_session(&s, session, None).await;
                    }
                });
            }
        }
        Load::Open { arrivals, .. } => {
            let (s, alive) = (Arc::clone(&shared), alive.clone());
            let handle = tokio::runtime::Handle::current();
            std::thread::Builder::new()
                .name("goodput-pacer".into())
                .spawn(move || pace(s, arrivals, gen_rx, handle, alive))
                .expect("spawn pacer thread");
        }
    }
    drop(alive);
    let _ = all_done.recv().await;

    let stop = shared.stop_reason.lock().expect("lock").unwrap_or(StopReason::Completed);
    let mut records = std::mem::take(&mut *shared.records.lock().expect("lock"));
    records.sort_by_key(|r| r.id);
    let interrupted = matches!(stop, StopReason::Interrupted | StopReason::MaxErrors);
    RunOutcome { records, stop, interrupted, elapsed_s: t0.elapsed().as_secs_f64(), clock: shared.ep.clock }
}

/// Produces sessions until the request budget is covered or the dataset ends.
fn generate(mut w: Workload, tx: mpsc::Sender<SessionSpec>, budget: Option<u64>) {
    let mut planned = 0u64;
    while budget.is_none_or(|b| planned < b) {
        let Some(mut s) = w.next_session() else {
            return;
        };
        if let Some(b) = budget {
            let left = (b - planned) as usize;
            s.turns.truncate(left.max(1));
        }
        planned += s.turns.len() as u64;
        if tx.blocking_send(s).is_err() {
            return;
        }
    }
}

/// The open-loop pacer (its own OS thread).
fn pace(
    s: Arc<Shared>,
    arrivals: Arrivals,
    mut rx: mpsc::Receiver<SessionSpec>,
    rt: tokio::runtime::Handle,
    alive: mpsc::Sender<()>,
) {
    crate::priority::pacer();
    let t0 = s.ep.clock.t0();
    let mut clock = ArrivalClock::new(arrivals);
    let mut rng = seed::rng(s.cfg.seed, seed::Stream::Arrivals);
    while let Some(session) = rx.blocking_recv() {
        let offset = clock.next(&mut rng, session.trace_time_s);
        if s.cfg.duration.is_some_and(|d| offset > d.as_secs_f64()) {
            break;
        }
        let deadline = t0 + units::duration(offset);
        if !sleep_until(deadline, &s.stop) {
            break;
        }
        let (s2, alive) = (Arc::clone(&s), alive.clone());
        rt.spawn(async move {
            let _alive = alive;
            run_session(&s2, session, Some(deadline)).await;
        });
    }
}

/// Sleeps to `deadline` with sub-millisecond precision: OS sleep to just short of it, then spin.
/// Returns false if `stop` was raised first.
pub fn sleep_until(deadline: Instant, stop: &AtomicBool) -> bool {
    const SPIN: Duration = Duration::from_micros(60);
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(Duration::from_millis(50)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Waits `d` unless the run stops first; returns false if it stopped.
async fn pause(s: &Shared, d: Duration) -> bool {
    let stop = s.stop_signal.token();
    tokio::select! {
        _ = tokio::time::sleep(d) => !s.stop.load(Ordering::SeqCst),
        _ = stop.cancelled() => false,
    }
}

/// Runs one session's turns in order. `first_at` is the scheduled start (open loop).
async fn run_session(s: &Arc<Shared>, session: SessionSpec, first_at: Option<Instant>) {
    let clock = s.ep.clock;
    let abort = s.abort.token();
    let mut conv = Conversation::start(&session);
    let multi = session.multi_turn || session.turns.len() > 1;
    let mut prev_end: Option<Instant> = None;
    for (k, turn) in session.turns.iter().enumerate() {
        let scheduled = match (prev_end, first_at) {
            (Some(end), _) => {
                let at = end + units::duration(turn.think_s);
                if at > Instant::now() && !pause(s, at - Instant::now()).await {
                    return;
                }
                at
            }
            (None, Some(at)) => at,
            (None, None) => Instant::now(),
        };
        let Some(id) = s.ticket() else { return };
        conv.push_user(turn);
        let body = body_for(s, &conv, turn.output_tokens);

        let mut cap_wait_ms = 0.0;
        let _permit = match &s.cap {
            Some(sem) => {
                let before = Instant::now();
                let permit = tokio::select! {
                    p = Arc::clone(sem).acquire_owned() => p.ok(),
                    _ = abort.cancelled() => None,
                };
                cap_wait_ms = clock.ms(Instant::now()) - clock.ms(before.max(scheduled));
                if permit.is_none() {
                    return;
                }
                permit
            }
            None => None,
        };
        let meta = RequestMeta {
            id,
            session: multi.then_some(session.id),
            turn: multi.then_some(k as u32),
            scheduled_ms: clock.ms(scheduled),
            cap_wait_ms: cap_wait_ms.max(0.0),
            input_tokens_client: Some(conv.tokens),
            requested_output_tokens: Some(turn.output_tokens as u64),
        };
        s.counters.sent.fetch_add(1, Ordering::SeqCst);
        s.counters.in_flight.fetch_add(1, Ordering::SeqCst);
        s.observer.sent(&meta, &body, &s.counters);
        let ex = execute(&s.ep, &meta, body, &abort).await;
        s.counters.in_flight.fetch_sub(1, Ordering::SeqCst);
        // think time counts from when the reply ended, not from when its bookkeeping did
        prev_end = Some(ex.record.end_ms.map_or_else(Instant::now, |ms| clock.instant(ms)));
        let ok = ex.record.is_success();
        let out_tokens = ex.record.output_tokens.unwrap_or(0);
        s.report(ex.record);
        if !ok {
            return; // a broken conversation is not continued
        }
        conv.push_reply(ex.reply, out_tokens);
    }
}

fn body_for(s: &Shared, conv: &Conversation, max_tokens: u32) -> Bytes {
    let cfg = &s.cfg;
    let body = request_body(
        s.ep.api,
        &cfg.model,
        &conv.messages,
        || conv.as_text(),
        max_tokens,
        cfg.ignore_eos,
        cfg.extra_body.as_ref(),
    );
    Bytes::from(serde_json::to_vec(&body).expect("serializable body"))
}
