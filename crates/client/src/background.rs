//! One background thread at idle priority for bookkeeping that must not compete with timestamping
//! (counting the tokens of finished responses). Jobs run in order; the thread starts on first use.

use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

type Job = Box<dyn FnOnce() + Send>;

static QUEUE: OnceLock<std::sync::Mutex<Sender<Job>>> = OnceLock::new();

/// Runs `job` on the background thread (inline if the thread cannot be started).
pub fn run(job: Job) {
    let q = QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let spawned = std::thread::Builder::new().name("goodput-bookkeeping".into()).spawn(move || {
            lower_priority();
            while let Ok(job) = rx.recv() {
                job();
            }
        });
        if spawned.is_err() {
            // no thread: jobs run on the caller (the receiver is gone, so `send` fails below)
        }
        std::sync::Mutex::new(tx)
    });
    let sent = q.lock().map(|tx| tx.send(job));
    match sent {
        Ok(Ok(())) => {}
        Ok(Err(e)) => (e.0)(),
        Err(_) => {}
    }
}

/// The kernel runs this thread only when nothing else wants the CPU (Linux `SCHED_IDLE`).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
}
