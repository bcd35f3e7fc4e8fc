//! The real-time driver: the engine model on its own OS thread, paced by the wall clock.
//!
//! The thread drives the engine through [`ServingEngine`], as the simulator does in virtual time:
//! it waits for the engine's next event (an iteration's end, a request's intake) with an OS sleep
//! to just short of the deadline and a short spin (tokio's timer rounds up to a millisecond; an 8B
//! model's iterations are a few ms), then releases the iteration's tokens and starts the next one
//! at that deadline (absolute pacing: no drift). Commands (submit, abort) are served while the
//! thread waits, so a request is taken in at once and joins the next iteration.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goodput_engine::{Emit, EngineRequest, EngineStats, Gauges, Reject, SeqId, ServingEngine};
use goodput_pacing::{self as pacing, Woken};
use tokio::sync::{mpsc, oneshot};

/// What a request's stream receives from the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenEvent {
    /// `n` tokens at the end of an iteration (the deadline it was paced to).
    Tokens { n: u32, at: Instant, finished: bool },
}

enum Cmd {
    Submit {
        id: SeqId,
        req: EngineRequest,
        /// When the request reached the server: its modelled intake starts there.
        arrived: Instant,
        sink: mpsc::UnboundedSender<TokenEvent>,
        reply: oneshot::Sender<Result<(), Reject>>,
    },
    Abort(SeqId),
    Stats(oneshot::Sender<EngineStats>),
    Stop,
}

/// A handle to the engine thread. Cloneable; the thread stops when `stop` is called or every
/// handle is dropped.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Cmd>,
    gauges: Arc<Mutex<Gauges>>,
    /// The block size the engine's prefix cache hashes at, when it has one.
    prefix_block_size: Option<u32>,
    /// Iterations that started later than their deadline by more than 5 ms (the host was busy).
    pub late_steps: Arc<std::sync::atomic::AtomicU64>,
}

impl EngineHandle {
    /// Starts the engine thread (one engine or a deployment of several).
    pub fn start(engine: Box<dyn ServingEngine>) -> Self {
        let (tx, rx) = channel();
        let gauges = Arc::new(Mutex::new(engine.gauges()));
        let late = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let prefix_block_size = engine.prefix_block_size();
        let (g, l) = (Arc::clone(&gauges), Arc::clone(&late));
        std::thread::Builder::new()
            .name("goodput-engine".into())
            .spawn(move || run(engine, rx, g, l))
            .expect("spawn engine thread");
        EngineHandle { tx, gauges, prefix_block_size, late_steps: late }
    }

    /// Queues a sequence that reached the server at `arrived` (the engine's modelled intake,
    /// which stands for parsing and tokenizing it, starts then); its tokens arrive on the
    /// returned channel.
    pub async fn submit(
        &self,
        id: SeqId,
        req: EngineRequest,
        arrived: Instant,
    ) -> Result<mpsc::UnboundedReceiver<TokenEvent>, SubmitError> {
        let (sink, tokens) = mpsc::unbounded_channel();
        let (reply, answer) = oneshot::channel();
        self.tx.send(Cmd::Submit { id, req, arrived, sink, reply }).map_err(|_| SubmitError::Stopped)?;
        match answer.await {
            Ok(Ok(())) => Ok(tokens),
            Ok(Err(r)) => Err(SubmitError::Rejected(r)),
            Err(_) => Err(SubmitError::Stopped),
        }
    }

    /// The block size requests' [`EngineRequest::block_hashes`] are computed at, when the engine
    /// reuses prefixes.
    pub fn prefix_block_size(&self) -> Option<u32> {
        self.prefix_block_size
    }

    pub fn abort(&self, id: SeqId) {
        let _ = self.tx.send(Cmd::Abort(id));
    }

    pub fn gauges(&self) -> Gauges {
        *self.gauges.lock().expect("gauges")
    }

    pub async fn stats(&self) -> Option<EngineStats> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Cmd::Stats(tx)).ok()?;
        rx.await.ok()
    }

    pub fn stop(&self) {
        let _ = self.tx.send(Cmd::Stop);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("{0}")]
    Rejected(Reject),
    #[error("the engine has stopped")]
    Stopped,
}

/// An iteration that starts more than this late (the host was busy) starts when it can, and is
/// counted; a smaller delay is absorbed (the next one starts at this one's deadline).
const LATE: Duration = Duration::from_millis(5);

type Sinks = HashMap<SeqId, mpsc::UnboundedSender<TokenEvent>>;

/// The engine thread: paces the engine's iterations by the wall clock, serving commands as they come.
fn run(
    mut engine: Box<dyn ServingEngine>,
    rx: Receiver<Cmd>,
    gauges: Arc<Mutex<Gauges>>,
    late: Arc<std::sync::atomic::AtomicU64>,
) {
    pacing::precise_timers();
    let t0 = Instant::now();
    let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let mut sinks: Sinks = HashMap::new();
    let mut emits = Vec::new();
    // serves one command at `now`; false: stop
    let handle = |cmd: Cmd, engine: &mut dyn ServingEngine, sinks: &mut Sinks, now: f64| -> bool {
        serve_command(cmd, engine, sinks, now, t0, &late)
    };
    loop {
        // wait for the next event of the engine, serving commands meanwhile
        let event_s = engine.next_event();
        let event = event_s.map(|t| t0 + goodput_metrics::units::duration(t));
        let cmd = match wait_for_command(&rx, event) {
            Wake::Command(c) => Some(c),
            Wake::Due => None,
            Wake::Disconnected => return,
        };
        if let Some(cmd) = cmd {
            if !handle(cmd, engine.as_mut(), &mut sinks, secs(Instant::now())) {
                return;
            }
            while let Ok(cmd) = rx.try_recv() {
                if !handle(cmd, engine.as_mut(), &mut sinks, secs(Instant::now())) {
                    return;
                }
            }
            continue;
        }
        // the event is due: an iteration ends (its tokens go out) and the next one starts at its
        // deadline, unless the host fell behind
        // (on the engine's own clock value, not one rounded through an Instant)
        let (at, at_s) = (event.expect("a due event"), event_s.expect("a due event"));
        let now = Instant::now();
        let (at, t) = if now.duration_since(at) > LATE {
            late.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (now, secs(now))
        } else {
            (at, at_s)
        };
        end_iteration(engine.as_mut(), &mut sinks, &mut emits, t, at);
        while let Ok(cmd) = rx.try_recv() {
            if !handle(cmd, engine.as_mut(), &mut sinks, t) {
                return;
            }
        }
        engine.start(t);
        *gauges.lock().expect("gauges") = engine.gauges();
    }
}

/// Serves one command at `now` (seconds since `t0`, the engine's clock); false: stop.
fn serve_command(
    cmd: Cmd,
    engine: &mut dyn ServingEngine,
    sinks: &mut Sinks,
    now: f64,
    t0: Instant,
    late: &std::sync::atomic::AtomicU64,
) -> bool {
    let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    match cmd {
        Cmd::Submit { id, req, arrived, sink, reply } => {
            let r = engine.submit(id, req, secs(arrived).min(now));
            if r.is_ok() {
                sinks.insert(id, sink);
                engine.start(now);
            }
            let _ = reply.send(r);
        }
        Cmd::Abort(id) => {
            engine.abort(id);
            sinks.remove(&id);
        }
        Cmd::Stats(tx) => {
            let mut stats = engine.stats();
            stats.late_steps = late.load(std::sync::atomic::Ordering::Relaxed);
            let _ = tx.send(stats);
        }
        Cmd::Stop => return false,
    }
    true
}

/// Why the engine thread stopped waiting.
enum Wake {
    /// A command came in before the event.
    Command(Cmd),
    /// The engine's event is due.
    Due,
    /// Every handle is gone.
    Disconnected,
}

/// Waits until the engine's next event at `event` (without one, until a command), or a command before it.
fn wait_for_command(rx: &Receiver<Cmd>, event: Option<Instant>) -> Wake {
    match event {
        None => match rx.recv() {
            Ok(c) => Wake::Command(c),
            Err(_) => Wake::Disconnected,
        },
        Some(at) => {
            let woken = pacing::wait_until(at, |left| match rx.recv_timeout(left) {
                Err(RecvTimeoutError::Timeout) => None,
                other => Some(other),
            });
            match woken {
                Woken::Early(Ok(c)) => Wake::Command(c),
                Woken::Early(Err(_)) => Wake::Disconnected,
                Woken::Due => Wake::Due,
            }
        }
    }
}

/// Ends the iteration due at `t` (`at`): sends out its tokens, forgetting finished and abandoned sequences.
fn end_iteration(engine: &mut dyn ServingEngine, sinks: &mut Sinks, emits: &mut Vec<Emit>, t: f64, at: Instant) {
    emits.clear();
    engine.complete(t, emits);
    for e in emits.iter() {
        let gone = sinks
            .get(&e.seq)
            .is_some_and(|s| s.send(TokenEvent::Tokens { n: e.tokens, at, finished: e.finished }).is_err());
        if gone && !e.finished {
            // the client left before its abort could arrive (e.g. while submitting)
            engine.abort(e.seq);
        }
        if e.finished || gone {
            sinks.remove(&e.seq);
        }
    }
}
