//! The real-time driver: the engine model on its own OS thread, paced by the wall clock.
//!
//! Each iteration starts at the previous one's deadline (absolute pacing: no drift) and its tokens
//! are released at its end, after an OS sleep to just short of the deadline and a short spin
//! (tokio's timer rounds up to a millisecond; an 8B model's iterations are a few ms). Commands
//! (submit, abort) are served while the thread waits, so a request is accepted at once and joins
//! the next iteration, as in a real engine.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goodput_engine::{Engine, EngineRequest, EngineStats, Gauges, Reject, SeqId};
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
    /// Iterations that started later than their deadline by more than 5 ms (the host was busy).
    pub late_steps: Arc<std::sync::atomic::AtomicU64>,
}

impl EngineHandle {
    /// Starts the engine thread.
    pub fn start(engine: Engine) -> Self {
        let (tx, rx) = channel();
        let gauges = Arc::new(Mutex::new(engine.gauges()));
        let late = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (g, l) = (Arc::clone(&gauges), Arc::clone(&late));
        std::thread::Builder::new()
            .name("goodput-engine".into())
            .spawn(move || run(engine, rx, g, l))
            .expect("spawn engine thread");
        EngineHandle { tx, gauges, late_steps: late }
    }

    /// Queues a sequence; its tokens arrive on the returned channel.
    pub async fn submit(
        &self,
        id: SeqId,
        req: EngineRequest,
    ) -> Result<mpsc::UnboundedReceiver<TokenEvent>, SubmitError> {
        let (sink, tokens) = mpsc::unbounded_channel();
        let (reply, answer) = oneshot::channel();
        self.tx.send(Cmd::Submit { id, req, sink, reply }).map_err(|_| SubmitError::Stopped)?;
        match answer.await {
            Ok(Ok(())) => Ok(tokens),
            Ok(Err(r)) => Err(SubmitError::Rejected(r)),
            Err(_) => Err(SubmitError::Stopped),
        }
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

/// How long before a deadline the thread stops sleeping and starts spinning.
const SPIN: Duration = Duration::from_micros(100);

/// Wake within microseconds of a timed wait's end (Linux timer slack is 50 µs by default).
fn precise_timers() {
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

fn run(mut engine: Engine, rx: Receiver<Cmd>, gauges: Arc<Mutex<Gauges>>, late: Arc<std::sync::atomic::AtomicU64>) {
    precise_timers();
    let t0 = Instant::now();
    let mut sinks: HashMap<SeqId, mpsc::UnboundedSender<TokenEvent>> = HashMap::new();
    // the iteration in flight: its deadline and what it will deliver
    let mut pending: Option<(Instant, Vec<goodput_engine::Emit>)> = None;
    let handle =
        |cmd: Cmd, engine: &mut Engine, sinks: &mut HashMap<SeqId, mpsc::UnboundedSender<TokenEvent>>| -> bool {
            match cmd {
                Cmd::Submit { id, req, sink, reply } => {
                    let r = engine.submit(id, req);
                    if r.is_ok() {
                        sinks.insert(id, sink);
                    }
                    let _ = reply.send(r);
                }
                Cmd::Abort(id) => {
                    engine.abort(id);
                    sinks.remove(&id);
                }
                Cmd::Stats(tx) => {
                    let _ = tx.send(engine.stats());
                }
                Cmd::Stop => return false,
            }
            true
        };
    loop {
        match &pending {
            None => {
                // idle: wait for work
                match rx.recv() {
                    Ok(cmd) => {
                        if !handle(cmd, &mut engine, &mut sinks) {
                            return;
                        }
                    }
                    Err(_) => return,
                }
                while let Ok(cmd) = rx.try_recv() {
                    if !handle(cmd, &mut engine, &mut sinks) {
                        return;
                    }
                }
                if engine.has_work() {
                    pending = start_step(&mut engine, Instant::now(), t0);
                }
            }
            Some((deadline, _)) => {
                let deadline = *deadline;
                let now = Instant::now();
                if now + SPIN < deadline {
                    match rx.recv_timeout(deadline - SPIN - now) {
                        Ok(cmd) => {
                            if !handle(cmd, &mut engine, &mut sinks) {
                                return;
                            }
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                while Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                let (at, emits) = pending.take().expect("pending step");
                for e in emits {
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
                while let Ok(cmd) = rx.try_recv() {
                    if !handle(cmd, &mut engine, &mut sinks) {
                        return;
                    }
                }
                *gauges.lock().expect("gauges") = engine.gauges();
                if engine.has_work() {
                    // the next iteration starts at this one's deadline, unless the host fell behind
                    let now = Instant::now();
                    let start = if now.duration_since(at) > Duration::from_millis(5) {
                        late.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        now
                    } else {
                        at
                    };
                    pending = start_step(&mut engine, start, t0);
                }
            }
        }
    }
}

fn start_step(engine: &mut Engine, start: Instant, t0: Instant) -> Option<(Instant, Vec<goodput_engine::Emit>)> {
    let out = engine.step(start.duration_since(t0).as_secs_f64())?;
    let deadline = start + goodput_metrics::units::duration(out.time.total_s);
    Some((deadline, out.emitted.clone()))
}
