//! How a command ended, and the process's exit code for it.

/// The signal that interrupted the run (SIGINT by default): the exit code is 128 plus it.
pub static INTERRUPT_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(2);

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    Interrupted,
}

/// The process's exit code for a command's result (printing the error, if any).
pub fn exit_code(result: anyhow::Result<Outcome>) -> i32 {
    match result {
        Ok(Outcome::Ok) => 0,
        Ok(Outcome::Failed) => 1,
        // 130 after Ctrl-C, 143 after SIGTERM
        Ok(Outcome::Interrupted) => 128 + INTERRUPT_SIGNAL.load(std::sync::atomic::Ordering::Relaxed),
        Err(e) => {
            if let Some(u) = e.downcast_ref::<crate::plan::UsageError>() {
                warn!("goodput: {u}");
                2
            } else {
                warn!("goodput: {e:#}");
                1
            }
        }
    }
}
