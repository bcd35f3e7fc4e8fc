//! Result files: the JSONL log written as records finish, the result document at the end, and
//! the progress bar.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use goodput_client::{Counters, Observer};
use goodput_metrics::RequestRecord;
use goodput_metrics::result::{ResultDoc, Run, rfc3339_utc};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Appends each finished record to the JSONL log (flushed per record) and advances the bar.
pub struct LiveLog {
    file: Option<Mutex<BufWriter<File>>>,
    pub bar: ProgressBar,
    started: std::time::Instant,
}

impl LiveLog {
    pub fn new(jsonl: Option<&Path>, total: Option<u64>, quiet: bool) -> anyhow::Result<Self> {
        let file = match jsonl {
            Some(p) => Some(Mutex::new(BufWriter::new(
                File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            ))),
            None => None,
        };
        let bar = match total {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::no_length(),
        };
        if quiet || !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        } else {
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
        }
        Ok(LiveLog { file, bar, started: std::time::Instant::now() })
    }
}

impl Observer for LiveLog {
    fn record(&self, r: &RequestRecord, c: &Counters) {
        if let Some(f) = &self.file {
            let mut f = f.lock().expect("log lock");
            // A failed write must not stop the run: the final document still has every record.
            if serde_json::to_writer(&mut *f, r).is_ok() {
                let _ = f.write_all(b"\n");
                let _ = f.flush();
            }
        }
        let done = c.done.load(Ordering::Relaxed);
        let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        self.bar.set_position(done);
        self.bar.set_message(format!(
            "{rate:.1} req/s · {} in flight · {} errors",
            c.in_flight.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed)
        ));
    }
}

pub fn now_rfc3339() -> String {
    let s = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    rfc3339_utc(s)
}

/// Writes the result document (to a temporary name first, so a crash never leaves half a file).
pub fn write_doc(path: &Path, runs: Vec<Run>, capacity: Option<serde_json::Value>) -> anyhow::Result<()> {
    let mut doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), now_rfc3339(), runs);
    doc.capacity = capacity;
    let tmp: PathBuf = path.with_extension("json.tmp");
    {
        let mut w = BufWriter::new(File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?);
        serde_json::to_writer_pretty(&mut w, &doc)?;
        w.write_all(b"\n")?;
        w.flush()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
