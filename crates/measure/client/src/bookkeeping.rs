//! Finishing records off the load loop: token counting and handing each record on.
//!
//! A request's task hands its [`Exchange`] here as soon as its stream ends and goes on with its
//! next request at once: the load never waits for bookkeeping. One thread at normal priority (the
//! load generator's own threads run above it, so it cannot delay a timestamp, and nothing can
//! starve it for long) counts tokens with the run's tokenizer and passes each finished record to
//! the sink (the run's record list and its observer: the JSONL log, the progress bar).
//!
//! The thread does not wait on the queue while work keeps coming: when the queue is empty it tells
//! the sink it has caught up (the JSONL log flushes then), sleeps [`PAUSE`] and looks again, and
//! blocks only if there is still nothing. A request's task then hands its exchange over without
//! waking a thread (a futex wake and a context switch per request, which on a client confined to
//! one CPU is a tenth of the cost of a request), and records reach the sink within [`PAUSE`].
//! Working through a backlog, it gives way to any runnable thread every [`BURST`], so that on a
//! shared CPU a runtime worker never waits a whole scheduler slice to read its replies.
//!
//! The queue is bounded. When it is full, the bookkeeping has fallen behind: the record is
//! finished on the spot without our tokenizer's counts (marked `counts_skipped`: the server's
//! counts when it gave them, one token per content event otherwise), so no tokenizer ever runs on
//! a runtime worker; overflows are counted and reported. When the run ends,
//! [`Bookkeeper::close`] waits for the queue to empty, up to a deadline after which the rest is
//! finished without counts, so counting never holds a run's end hostage.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goodput_metrics::RequestRecord;
use goodput_tokenizer::Tokenizer;

use crate::exchange::Exchange;

/// Receives every finished record, on the bookkeeping thread (or on a request's task when the
/// queue is full).
pub trait Sink: Send + Sync {
    fn record(&self, record: RequestRecord);
    /// Every record handed over so far has been passed on (a moment to flush buffered output).
    fn caught_up(&self) {}
}

impl<F: Fn(RequestRecord) + Send + Sync> Sink for F {
    fn record(&self, record: RequestRecord) {
        self(record)
    }
}

/// How long the bookkeeping thread sleeps when its queue runs empty before it looks again.
pub const PAUSE: Duration = Duration::from_millis(2);

/// The longest the bookkeeping thread works through a backlog before it gives way to any runnable
/// thread (a yield): woken after a [`PAUSE`] with a backlog, it would otherwise hold a shared CPU
/// for the scheduler's whole slice (3 ms), and a runtime worker waiting for it reads its replies
/// that much late.
pub const BURST: Duration = Duration::from_micros(100);

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
    sink: Arc<dyn Sink>,
}

impl Bookkeeper {
    pub fn start(tokenizer: Tokenizer, sink: Arc<dyn Sink>) -> Self {
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
        self.sink.record(ex.finish_without_counts());
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
        self.sink.caught_up();
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

fn work(rx: Receiver<Exchange>, s: Arc<Shared>, tk: Tokenizer, sink: Arc<dyn Sink>) {
    let mut since = Instant::now();
    loop {
        if since.elapsed() > BURST {
            std::thread::yield_now();
            since = Instant::now();
        }
        let ex = match rx.try_recv() {
            Ok(ex) => ex,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                sink.caught_up();
                std::thread::sleep(PAUSE);
                since = Instant::now();
                match rx.try_recv() {
                    Ok(ex) => ex,
                    Err(TryRecvError::Empty) => match rx.recv() {
                        Ok(ex) => ex,
                        Err(_) => break,
                    },
                    Err(TryRecvError::Disconnected) => break,
                }
            }
        };
        let rec = if s.hurry.load(Ordering::Relaxed) {
            s.skipped.fetch_add(1, Ordering::Relaxed);
            ex.finish_without_counts()
        } else {
            ex.finish(&tk)
        };
        s.finished.fetch_add(1, Ordering::Relaxed);
        sink.record(rec);
    }
    sink.caught_up();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counting {
        records: Mutex<Vec<u64>>,
        caught_up: AtomicU64,
    }

    impl Sink for Counting {
        fn record(&self, record: RequestRecord) {
            self.records.lock().unwrap().push(record.id);
        }
        fn caught_up(&self) {
            self.caught_up.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn every_record_reaches_the_sink_and_the_sink_hears_when_it_caught_up() {
        let sink = Arc::new(Counting::default());
        let books = Bookkeeper::start(Tokenizer::cl100k().unwrap(), Arc::clone(&sink) as Arc<dyn Sink>);
        for id in 0..100 {
            books.submit(Exchange::of_record(RequestRecord { id, ..Default::default() }));
        }
        // the thread drains the queue, then says it caught up before it pauses
        let until = Instant::now() + Duration::from_secs(10);
        while sink.caught_up.load(Ordering::SeqCst) == 0 || sink.records.lock().unwrap().len() < 100 {
            assert!(Instant::now() < until, "the bookkeeping did not catch up");
            std::thread::sleep(PAUSE);
        }
        // a record handed over after a pause (the thread sleeping, then blocked) still arrives
        std::thread::sleep(PAUSE * 3);
        books.submit(Exchange::of_record(RequestRecord { id: 100, ..Default::default() }));
        let before = sink.caught_up.load(Ordering::SeqCst);
        let stats = books.close(Duration::from_secs(10));
        assert_eq!(stats.finished, 101);
        assert_eq!(*sink.records.lock().unwrap(), (0..101).collect::<Vec<_>>());
        // and closing says so once more, after the last record
        assert!(sink.caught_up.load(Ordering::SeqCst) > before);
    }
}
