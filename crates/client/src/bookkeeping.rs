//! Finishing records off the load loop: token counting and handing each record on.
//!
//! A request's task hands its [`Exchange`] here as soon as its stream ends and goes on with its
//! next request at once: the load never waits for bookkeeping. One thread at normal priority (the
//! load generator's own threads run above it, so it cannot delay a timestamp, and nothing can
//! starve it for long) counts tokens with the run's tokenizer and passes each finished record to
//! the sink (the run's record list and its observer: the JSONL log, the progress bar).
//!
//! The queue is bounded. When it is full, the bookkeeping has fallen behind: the record is
//! finished on the spot without our tokenizer's counts (marked `counts_skipped`: the server's
//! counts when it gave them, one token per content event otherwise), so no tokenizer ever runs on
//! a runtime worker; overflows are counted and reported. When the run ends,
//! [`Bookkeeper::close`] waits for the queue to empty, up to a deadline after which the rest is
//! finished without counts, so counting never holds a run's end hostage.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goodput_metrics::RequestRecord;
use goodput_tokenizer::Tokenizer;

use crate::exchange::Exchange;

/// Receives every finished record, on the bookkeeping thread (or on a request's task when the
/// queue is full).
pub type Sink = Arc<dyn Fn(RequestRecord) + Send + Sync>;

/// Exchanges waiting to be finished, at most.
pub const QUEUE: usize = 16_384;

/// What the bookkeeping did (the result document's type: it goes into the summary).
pub type BookStats = goodput_metrics::Bookkeeping;

struct Shared {
    finished: AtomicU64,
    overflowed: AtomicU64,
    skipped: AtomicU64,
    /// Finish what is left without counting (the run's end deadline passed).
    hurry: AtomicBool,
}

/// The bookkeeping thread and its queue.
pub struct Bookkeeper {
    tx: Mutex<Option<SyncSender<Exchange>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    shared: Arc<Shared>,
    sink: Sink,
}

impl Bookkeeper {
    pub fn start(tokenizer: Tokenizer, sink: Sink) -> Self {
        let (tx, rx) = sync_channel::<Exchange>(QUEUE);
        let shared = Arc::new(Shared {
            finished: AtomicU64::new(0),
            overflowed: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            hurry: AtomicBool::new(false),
        });
        let (s, out) = (Arc::clone(&shared), Arc::clone(&sink));
        let thread = std::thread::Builder::new()
            .name("goodput-bookkeeping".into())
            .spawn(move || work(rx, s, tokenizer, out))
            .ok();
        // no thread: every record is finished on its task (the sender's receiver is gone)
        Bookkeeper { tx: Mutex::new(Some(tx)), thread: Mutex::new(thread), shared, sink }
    }

    /// Queues an exchange; never blocks.
    pub fn submit(&self, ex: Exchange) {
        let sent = match self.tx.lock().expect("bookkeeping lock").as_ref() {
            Some(tx) => tx.try_send(ex),
            None => Err(TrySendError::Disconnected(ex)),
        };
        let ex = match sent {
            Ok(()) => return,
            Err(TrySendError::Full(ex)) | Err(TrySendError::Disconnected(ex)) => ex,
        };
        // on a runtime worker: never count here, whatever the reply's length
        self.shared.overflowed.fetch_add(1, Ordering::Relaxed);
        self.shared.skipped.fetch_add(1, Ordering::Relaxed);
        (self.sink)(ex.finish_without_counts());
    }

    /// Waits for every queued record to be finished; after `deadline`, the rest are finished
    /// without counting.
    pub fn close(&self, deadline: Duration) -> BookStats {
        drop(self.tx.lock().expect("bookkeeping lock").take());
        if let Some(t) = self.thread.lock().expect("bookkeeping lock").take() {
            let until = Instant::now() + deadline;
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            self.shared.hurry.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
        self.stats()
    }

    pub fn stats(&self) -> BookStats {
        BookStats {
            finished: self.shared.finished.load(Ordering::Relaxed),
            overflowed: self.shared.overflowed.load(Ordering::Relaxed),
            skipped: self.shared.skipped.load(Ordering::Relaxed),
        }
    }
}

fn work(rx: Receiver<Exchange>, s: Arc<Shared>, tk: Tokenizer, sink: Sink) {
    while let Ok(ex) = rx.recv() {
        let rec = if s.hurry.load(Ordering::Relaxed) {
            s.skipped.fetch_add(1, Ordering::Relaxed);
            ex.finish_without_counts()
        } else {
            ex.finish(&tk)
        };
        s.finished.fetch_add(1, Ordering::Relaxed);
        sink(rec);
    }
}
