//! The load runner: drives the [`LoadMachine`] on the wall clock over real HTTP.
//!
//! The machine (in `goodput-workload`) decides every send; this module only does what it says.
//! A load thread at raised priority handles what is due at a time (open-loop arrivals, the end of
//! a think time): it sleeps to just short of the deadline, spins the last stretch (tokio's timer
//! rounds up to 1 ms), and spawns the request. A request's task, when its stream ends, tells the
//! machine and sends whatever is due next itself (a closed-loop user's next request goes out from
//! the same task, with no thread hop), then hands the exchange to the bookkeeping thread for
//! token counting: the load never waits for bookkeeping. A generator thread prepares sessions
//! (prompt text) ahead of the machine, so building a prompt never delays a send.
//!
//! Every record keeps its scheduled time, so lateness is measured, not hidden; a probe on the
//! runtime ([`crate::lag`]) measures how late the runtime itself ran, which delays reading
//! replies without delaying any send.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use goodput_metrics::{ErrorClass, RequestRecord, StopReason};
use goodput_workload::{Finished, Load, LoadMachine, Next, Request, Sending, SessionSource, SessionSpec, Workload};
use serde::Serialize;

use crate::bookkeeping::{BookStats, Bookkeeper};
use crate::exchange::{Endpoint, execute};
use crate::http::{Cancel, CancelHandle, cancel_pair};
use crate::lag::LagProbe;
use crate::openai::request_body;

/// When to stop, and how requests are shaped.
#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    /// The load, its bounds (`duration_s`: nothing scheduled later is sent; in-flight requests
    /// finish), the seed, the shard, and whether requests run to `max_tokens`.
    pub sending: Sending,
    /// After an interruption, how long in-flight requests may continue before they are cancelled.
    #[serde(serialize_with = "opt_secs")]
    pub grace: Option<Duration>,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Send each request's own seed (`"seed"`): the embedded engine draws its natural stop
    /// lengths and words from it, as the simulator does.
    #[serde(skip)]
    pub send_seed: bool,
}

impl RunConfig {
    /// `load` for `model` with no stop condition but the workload's end, forced output lengths
    /// (`ignore_eos`), no extra body, seed 0.
    pub fn new(load: Load, model: impl Into<String>) -> Self {
        RunConfig { sending: Sending::new(load), grace: None, model: model.into(), extra_body: None, send_seed: false }
    }
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Live counters, for progress display.
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub in_flight: AtomicU64,
}

/// Receives each record as soon as it is finished (for the JSONL log and progress), and each
/// request as it is sent (for `--export-schedule`: its record so far, and its body).
pub trait Observer: Send + Sync {
    fn record(&self, record: &RequestRecord, counters: &Counters);
    fn sent(&self, _request: &RequestRecord, _body: &[u8], _counters: &Counters) {}
    /// Every record finished so far has been passed to [`Observer::record`] (at least every
    /// [`crate::bookkeeping::PAUSE`] while records come, and at the run's end): a moment to flush.
    fn caught_up(&self) {}
}

impl Observer for () {
    fn record(&self, _: &RequestRecord, _: &Counters) {}
}

/// The outcome of a run.
#[derive(Debug)]
pub struct RunOutcome {
    /// Sorted by id (send order); empty from [`run_into`], whose sink took them.
    pub records: Vec<RequestRecord>,
    pub stop: StopReason,
    /// True when in-flight requests were cancelled or sends were cut short by an interruption.
    pub interrupted: bool,
    /// Wall time from the run start to its end, seconds.
    pub elapsed_s: f64,
    /// The clock every record's times are on (started when the load began).
    pub clock: crate::http::Clock,
    /// What the bookkeeping did (records finished late or without our counts).
    pub bookkeeping: BookStats,
    /// How late the runtime woke, every [`crate::lag::PERIOD`] of the load, ms.
    pub runtime_lag_ms: goodput_metrics::Samples,
    /// Streams whose body had not ended right after `[DONE]` (drained apart from the load), and
    /// of those the ones still open when the grace ran out ([`crate::exchange::AfterDone`]).
    pub streams_open_after_done: u64,
    pub streams_left_open: u64,
    /// Requests resent on connections the server had given up, and keep-alive.
    pub connections: goodput_metrics::ConnectionReuse,
    /// Why the run was called over-saturated (`--stop-over-saturated`), when it was.
    pub over_saturation: Option<String>,
}

/// Sessions the generator thread prepares ahead of the load.
const GENERATOR_AHEAD: usize = 512;

/// How long the generator sleeps when its buffer is full. It never blocks on the full queue: a
/// blocked sender is woken by every request that takes a session (a futex wake and a context
/// switch on the send path: 3–5% of the client's CPU at 12k req/s, by perf); [`GENERATOR_AHEAD`]
/// sessions last far longer than this at any rate the client can send.
const GENERATOR_PAUSE: Duration = Duration::from_millis(2);

/// The machine and the deadline the load thread is sleeping toward (`f64::INFINITY`: until woken).
struct Driver {
    machine: LoadMachine,
    armed: f64,
}

/// Where the runner puts each finished record once the observer has seen it: a list of them all
/// ([`run`]), or a summary folded as the run goes ([`goodput_metrics::Collector`], which keeps memory
/// bounded however long the run).
pub trait RecordSink: Send {
    fn push(&mut self, record: RequestRecord);
}

impl RecordSink for Vec<RequestRecord> {
    fn push(&mut self, record: RequestRecord) {
        Vec::push(self, record);
    }
}

impl RecordSink for goodput_metrics::Collector {
    fn push(&mut self, record: RequestRecord) {
        goodput_metrics::Collector::push(self, record);
    }
}

/// Where finished records go: the run's sink, and the observer (JSONL log, progress).
struct Collector {
    counters: Counters,
    records: Arc<Mutex<dyn RecordSink>>,
    observer: Arc<dyn Observer>,
}

impl crate::bookkeeping::Sink for Collector {
    fn record(&self, rec: RequestRecord) {
        let c = &self.counters;
        c.done.fetch_add(1, Ordering::SeqCst);
        if rec.error.as_ref().is_some_and(|e| e.class != ErrorClass::Cancelled) {
            c.failed.fetch_add(1, Ordering::SeqCst);
        }
        self.observer.record(&rec, c);
        self.records.lock().expect("lock").push(rec);
    }

    fn caught_up(&self) {
        self.observer.caught_up();
    }
}

struct Shared {
    ep: Endpoint,
    cfg: RunConfig,
    out: Arc<Collector>,
    driver: Mutex<Driver>,
    load_thread: Mutex<Option<std::thread::Thread>>,
    books: Bookkeeper,
    /// In-flight requests are cancelled once set.
    abort: CancelHandle,
    grace_started: std::sync::atomic::AtomicBool,
    rt: tokio::runtime::Handle,
}

impl Shared {
    fn now_s(&self) -> f64 {
        self.ep.clock.now_ms() / 1000.0
    }

    fn wake_load_thread(&self) {
        if let Some(t) = self.load_thread.lock().expect("lock").as_ref() {
            t.unpark();
        }
    }

    /// Stops sending (`reason`); in-flight requests get the grace period when it is an
    /// interruption or the error budget.
    fn stop(self: &Arc<Self>, reason: StopReason) {
        self.driver.lock().expect("lock").machine.stop(reason);
        self.after_stop(reason);
        self.wake_load_thread();
    }

    fn after_stop(self: &Arc<Self>, reason: StopReason) {
        if matches!(reason, StopReason::Interrupted | StopReason::MaxErrors | StopReason::OverSaturated)
            && !self.grace_started.swap(true, Ordering::SeqCst)
        {
            let me = Arc::clone(self);
            let grace = self.cfg.grace.unwrap_or(Duration::from_secs(5));
            self.rt.spawn(async move {
                tokio::time::sleep(grace).await;
                me.abort.cancel();
            });
        }
    }

    /// Tells the machine that `id` ended and takes what is due next. Wakes the load thread when
    /// something is now due earlier than it expects, or when the run is over.
    fn finish_and_next(self: &Arc<Self>, id: u64, end_s: f64, f: Finished) -> Option<Request> {
        let (next, stopped) = {
            let mut d = self.driver.lock().expect("lock");
            let before = d.machine.stopped();
            d.machine.finished(id, end_s, f);
            let stopped = d.machine.stopped().filter(|_| before.is_none());
            let next = d.machine.next(self.now_s());
            let wake = match next {
                Next::Wait(t) if t < d.armed => {
                    d.armed = t;
                    true
                }
                Next::Done(_) => true,
                _ => false,
            };
            ((next, wake), stopped)
        };
        if let Some(reason) = stopped {
            self.after_stop(reason);
        }
        let (next, wake) = next;
        if wake {
            self.wake_load_thread();
        }
        match next {
            Next::Send(r) => Some(*r),
            _ => None,
        }
    }
}

/// Sessions prepared by the generator thread.
struct Prepared(Receiver<SessionSpec>);

impl SessionSource for Prepared {
    fn next_session(&mut self) -> Option<SessionSpec> {
        self.0.recv().ok()
    }
}

/// Runs the load and returns every record, sorted by id. `interrupt` stops it early (Ctrl-C).
pub async fn run(
    ep: Endpoint,
    cfg: RunConfig,
    workload: Workload,
    interrupt: Cancel,
    observer: Arc<dyn Observer>,
) -> RunOutcome {
    let all = Arc::new(Mutex::new(Vec::new()));
    let mut outcome = run_into(ep, cfg, workload, interrupt, observer, all.clone()).await;
    let mut records = std::mem::take(&mut *all.lock().expect("lock"));
    records.sort_by_key(|r| r.id);
    outcome.records = records;
    outcome
}

/// Runs the load, handing each finished record to `sink` (in completion order; the outcome's
/// `records` stay empty). `interrupt` stops it early (Ctrl-C).
pub async fn run_into(
    mut ep: Endpoint,
    cfg: RunConfig,
    workload: Workload,
    interrupt: Cancel,
    observer: Arc<dyn Observer>,
    sink: Arc<Mutex<dyn RecordSink>>,
) -> RunOutcome {
    // Sessions are prepared ahead on their own thread. Let it fill its buffer before the clock
    // starts, so building prompts does not compete with the first sends for the CPU.
    let (gen_tx, gen_rx) = sync_channel::<SessionSpec>(GENERATOR_AHEAD);
    let budget = cfg.sending.bounds.requests;
    let filled = Arc::new(AtomicU64::new(0));
    let generator = {
        let filled = Arc::clone(&filled);
        std::thread::Builder::new()
            .name("goodput-workload".into())
            .spawn(move || generate(workload, gen_tx, budget, &filled))
            .expect("spawn workload thread")
    };
    let ahead = budget.map_or(GENERATOR_AHEAD, |b| (b as usize).min(GENERATOR_AHEAD)) as u64;
    while filled.load(Ordering::Relaxed) < ahead && !generator.is_finished() && !interrupt.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    ep.clock = crate::http::Clock::start();
    let (abort, _) = cancel_pair();
    let out = Arc::new(Collector { counters: Counters::default(), records: sink, observer });
    let books = Bookkeeper::start(ep.tokenizer.clone(), Arc::clone(&out) as Arc<dyn crate::bookkeeping::Sink>);
    let machine = cfg.sending.machine(Box::new(Prepared(gen_rx)), true);
    let shared = Arc::new(Shared {
        ep,
        cfg: cfg.clone(),
        out,
        driver: Mutex::new(Driver { machine, armed: f64::INFINITY }),
        load_thread: Mutex::new(None),
        books,
        abort,
        grace_started: std::sync::atomic::AtomicBool::new(false),
        rt: tokio::runtime::Handle::current(),
    });
    let t0 = shared.ep.clock.t0();
    let probe = LagProbe::start(t0);

    // Interruption watcher.
    let watcher = {
        let s = Arc::clone(&shared);
        tokio::spawn(async move {
            interrupt.cancelled().await;
            s.stop(StopReason::Interrupted);
        })
    };

    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<StopReason>();
    let load_thread = {
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("goodput-load".into())
            .spawn(move || {
                // registered before its first look at the machine, so no wake-up is lost
                *s.load_thread.lock().expect("lock") = Some(std::thread::current());
                let reason = drive(&s);
                let _ = done_tx.send(reason);
            })
            .expect("spawn load thread")
    };
    let stop = done_rx.await.unwrap_or(StopReason::Completed);
    let runtime_lag_ms = probe.stop();
    watcher.abort();
    let _ = tokio::task::spawn_blocking(move || load_thread.join()).await;

    // Counting never holds the run's end: after an interruption it gets the grace period, else
    // a minute, and what is left is finished without our counts.
    let interrupted = matches!(stop, StopReason::Interrupted | StopReason::MaxErrors | StopReason::OverSaturated);
    let deadline = if interrupted { cfg.grace.unwrap_or(Duration::from_secs(5)) } else { Duration::from_secs(60) };
    let s = Arc::clone(&shared);
    let bookkeeping = tokio::task::spawn_blocking(move || s.books.close(deadline)).await.unwrap_or_default();
    drop(generator);
    let over_saturation = shared.driver.lock().expect("lock").machine.over_saturation().map(str::to_string);

    RunOutcome {
        records: Vec::new(),
        stop,
        interrupted,
        elapsed_s: t0.elapsed().as_secs_f64(),
        clock: shared.ep.clock,
        bookkeeping,
        runtime_lag_ms,
        streams_open_after_done: shared.ep.after_done.drained(),
        streams_left_open: shared.ep.after_done.left_open(),
        connections: shared.ep.connections.stats(&shared.ep.client, shared.ep.clock),
        over_saturation,
    }
}

/// Produces sessions until the request budget is covered or the workload ends.
fn generate(mut w: Workload, tx: SyncSender<SessionSpec>, budget: Option<u64>, filled: &AtomicU64) {
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
        loop {
            match tx.try_send(s) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    s = back;
                    std::thread::sleep(GENERATOR_PAUSE);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        filled.fetch_add(1, Ordering::Relaxed);
    }
}

/// The load thread: sends what is due, sleeps until the next deadline or until woken.
fn drive(s: &Arc<Shared>) -> StopReason {
    crate::priority::pacer();
    let clock = s.ep.clock;
    loop {
        let next = {
            let mut d = s.driver.lock().expect("lock");
            let before = d.machine.stopped();
            let next = d.machine.next(s.now_s());
            d.armed = match next {
                Next::Wait(t) => t,
                _ => f64::INFINITY,
            };
            if before.is_none()
                && let Some(reason) = d.machine.stopped()
            {
                drop(d);
                s.after_stop(reason);
            }
            next
        };
        match next {
            Next::Send(r) => {
                let s2 = Arc::clone(s);
                s.rt.spawn(async move { request_task(s2, *r).await });
            }
            Next::Wait(t) => {
                // woken early by a request task when something became due sooner
                let deadline = clock.instant(t * 1000.0);
                goodput_pacing::wait_until(deadline, |left| {
                    std::thread::park_timeout(left);
                    (Instant::now() + goodput_pacing::spin() < deadline).then_some(())
                });
            }
            Next::Idle => std::thread::park(),
            Next::Done(reason) => return reason,
        }
    }
}

/// Sends `r`, then whatever the machine says is due when it ends, until nothing is.
async fn request_task(s: Arc<Shared>, mut r: Request) {
    let abort = s.abort.token();
    loop {
        let clock = s.ep.clock;
        let meta = RequestRecord { input_tokens_client: Some(r.input_tokens), ..r.record() };
        let body = body_for(&s, &r);
        let c = &s.out.counters;
        c.sent.fetch_add(1, Ordering::SeqCst);
        c.in_flight.fetch_add(1, Ordering::SeqCst);
        s.out.observer.sent(&meta, &body, c);
        let ex = execute(&s.ep, &meta, body, &abort).await;
        c.in_flight.fetch_sub(1, Ordering::SeqCst);
        let rec = ex.record();
        // think time counts from when the reply ended
        let end_s = rec.end_ms.unwrap_or_else(|| clock.now_ms()) / 1000.0;
        let ok = ex.is_success();
        // no tokenizer runs here: the conversation's length comes from the server or the events
        let reply = if ok && r.more_turns { ex.reply() } else { String::new() };
        let first_token_s = rec.first_event_ms().map(|ms| ms / 1000.0);
        // a wait for a --max-concurrency slot is the server's queue, not the client's lag
        let sent_s = rec.first_sent_ms().map(|ms| (ms - rec.cap_wait_ms) / 1000.0);
        let finished = Finished { ok, output_tokens: ex.answer_tokens_estimate(), reply, first_token_s, sent_s };
        s.books.submit(ex);
        match s.finish_and_next(r.id, end_s, finished) {
            Some(next) => r = next,
            None => return,
        }
    }
}

fn body_for(s: &Shared, r: &Request) -> Bytes {
    let cfg = &s.cfg;
    let mut extra = cfg.extra_body.clone();
    if cfg.send_seed {
        let e = extra.get_or_insert_with(Default::default);
        e.insert("seed".into(), r.seed.into());
        // the engine model is told how long to think (a real reasoning model decides itself)
        if r.reasoning_tokens > 0 {
            e.insert("reasoning_tokens".into(), r.reasoning_tokens.into());
        }
    }
    let messages = &r.messages;
    let body = request_body(
        s.ep.api,
        &cfg.model,
        messages,
        || messages.iter().map(|m| m.content.as_str()).collect::<String>(),
        r.total_tokens(),
        cfg.sending.ignore_eos,
        extra.as_ref(),
    );
    Bytes::from(serde_json::to_vec(&body).expect("serializable body"))
}
