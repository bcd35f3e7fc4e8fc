//! Output while and after a run: the JSONL log written as records finish, the exported schedule,
//! the progress bar, and the result document at the end.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use anyhow::Context;
use goodput_client::{Counters, Observer};
use goodput_metrics::RequestRecord;
use goodput_results::{CapacityReport, ResultDoc, Run};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Appends each finished record to the JSONL log (flushed whenever the bookkeeping has caught up,
/// at least every [`FLUSH_EVERY`] while records come, at the end, and by [`flush_open_logs`]
/// before a second Ctrl-C exits), each sent request to the exported schedule, and advances the bar.
pub struct LiveLog {
    file: Option<Arc<Mutex<BufWriter<File>>>>,
    /// When the JSONL log was last flushed.
    flushed: Mutex<std::time::Instant>,
    schedule: Option<Mutex<BufWriter<File>>>,
    /// The sweep stage records belong to (written as `"stage"` on each JSONL line).
    stage: Option<String>,
    pub bar: ProgressBar,
    /// For the bar's current rate: when it was last updated, the count then, and the rate.
    recent: Mutex<(std::time::Instant, u64, f64)>,
}

fn create(p: &Path, append: bool) -> anyhow::Result<Mutex<BufWriter<File>>> {
    let f = if append { std::fs::OpenOptions::new().create(true).append(true).open(p) } else { File::create(p) };
    Ok(Mutex::new(BufWriter::new(f.with_context(|| format!("cannot create {}", p.display()))?)))
}

/// The longest a finished record waits in the JSONL log's buffer while records keep coming (a
/// bookkeeping that never empties its queue never says it caught up).
pub const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The JSONL logs of the live runs, for [`flush_open_logs`].
static OPEN_LOGS: Mutex<Vec<Weak<Mutex<BufWriter<File>>>>> = Mutex::new(Vec::new());

/// Writes out what the live runs' JSONL logs hold in their buffers: called before the process
/// exits without unwinding (a second Ctrl-C), so that the log keeps every record finished.
pub fn flush_open_logs() {
    let logs = OPEN_LOGS.lock().unwrap_or_else(|e| e.into_inner());
    for f in logs.iter().filter_map(Weak::upgrade) {
        let _ = f.lock().unwrap_or_else(|e| e.into_inner()).flush();
    }
}

impl LiveLog {
    /// `append`: later stages of a sweep add to the same log.
    pub fn new(
        jsonl: Option<&Path>,
        schedule: Option<&Path>,
        stage: Option<String>,
        append: bool,
        total: Option<u64>,
        quiet: bool,
    ) -> anyhow::Result<Self> {
        let file = jsonl.map(|p| create(p, append).map(Arc::new)).transpose()?;
        if let Some(f) = &file {
            let mut logs = OPEN_LOGS.lock().unwrap_or_else(|e| e.into_inner());
            logs.retain(|w| w.strong_count() > 0);
            logs.push(Arc::downgrade(f));
        }
        let schedule = schedule.map(|p| create(p, false)).transpose()?;
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
        let now = std::time::Instant::now();
        Ok(LiveLog { file, flushed: Mutex::new(now), schedule, stage, bar, recent: Mutex::new((now, 0, 0.0)) })
    }
}

impl Drop for LiveLog {
    fn drop(&mut self) {
        // the stage is over: the bar leaves the terminal before the table prints
        self.bar.finish_and_clear();
    }
}

/// One line of an exported schedule: when a request was due, what it sent, what it asked for.
/// Replaying it (`--dataset jsonl:FILE --profile replay`) sends the same prompts at the same times.
pub fn schedule_line(
    scheduled_ms: f64,
    meta_session: Option<u64>,
    meta_turn: Option<u32>,
    input_tokens: Option<u64>,
    body: &serde_json::Value,
) -> serde_json::Value {
    let mut line = serde_json::json!({"timestamp": scheduled_ms / 1000.0});
    for k in ["prompt", "messages"] {
        if let Some(v) = body.get(k) {
            line[k] = v.clone();
        }
    }
    if line.get("prompt").is_none()
        && line.get("messages").is_none()
        && let Some(n) = input_tokens
    {
        line["input_tokens"] = n.into();
    }
    if let Some(n) = body.get("max_tokens") {
        line["output_tokens"] = n.clone();
    }
    if let Some(s) = meta_session {
        line["session"] = s.into();
    }
    if let Some(t) = meta_turn {
        line["turn"] = t.into();
    }
    line
}

fn write_line(f: &Mutex<BufWriter<File>>, v: &serde_json::Value) {
    let mut f = f.lock().expect("log lock");
    // A failed write must not stop the run: the final document still has every record.
    if serde_json::to_writer(&mut *f, v).is_ok() {
        let _ = f.write_all(b"\n");
        let _ = f.flush();
    }
}

/// A JSONL line of a sweep stage: the record's fields and the stage's name.
#[derive(serde::Serialize)]
struct Staged<'a> {
    stage: &'a str,
    #[serde(flatten)]
    record: &'a RequestRecord,
}

impl Observer for LiveLog {
    fn caught_up(&self) {
        if let Some(f) = &self.file {
            let _ = f.lock().expect("log lock").flush();
            *self.flushed.lock().expect("log lock") = std::time::Instant::now();
        }
    }

    fn sent(&self, meta: &RequestRecord, body: &[u8], _c: &Counters) {
        if let Some(f) = &self.schedule
            && let Ok(b) = serde_json::from_slice::<serde_json::Value>(body)
        {
            write_line(f, &schedule_line(meta.scheduled_ms, meta.session, meta.turn, meta.input_tokens_client, &b));
        }
    }

    fn record(&self, r: &RequestRecord, c: &Counters) {
        if let Some(f) = &self.file {
            let mut f = f.lock().expect("log lock");
            // A failed write must not stop the run: the final document still has every record.
            let _ = match &self.stage {
                Some(stage) => serde_json::to_writer(&mut *f, &Staged { stage, record: r }),
                None => serde_json::to_writer(&mut *f, r),
            }
            .map(|()| f.write_all(b"\n"));
            let mut flushed = self.flushed.lock().expect("log lock");
            if flushed.elapsed() >= FLUSH_EVERY {
                let _ = f.flush();
                *flushed = std::time::Instant::now();
            }
        }
        let done = c.done.load(Ordering::Relaxed);
        // the current rate: completions over the last second or so, not the average since start
        let rate = match self.recent.lock() {
            Ok(mut g) => {
                let (at, then, _) = *g;
                let dt = at.elapsed().as_secs_f64();
                if dt >= 1.0 {
                    *g = (std::time::Instant::now(), done, done.saturating_sub(then) as f64 / dt);
                }
                g.2
            }
            Err(_) => 0.0,
        };
        self.bar.set_position(done);
        self.bar.set_message(format!(
            "{rate:.1} req/s · {} in flight · {} errors",
            c.in_flight.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed)
        ));
    }
}

/// The result document of a command's runs.
pub fn result_doc(runs: Vec<Run>, capacity: Option<CapacityReport>) -> ResultDoc {
    let mut doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), runs);
    doc.capacity = capacity;
    doc
}

/// Writes the result document.
pub fn write_doc(path: &Path, runs: Vec<Run>, capacity: Option<CapacityReport>) -> anyhow::Result<()> {
    result_doc(runs, capacity).write(path)?;
    Ok(())
}

/// Writes the HTML report of a document (`source` names it in the page's title) and says where.
pub fn write_html(path: &Path, doc: &ResultDoc, source: &str) -> anyhow::Result<()> {
    write_file(path, goodput_render::html_report(doc, source).as_bytes())?;
    say!("  report       {}\n", path.display());
    Ok(())
}

/// Writes a file whole: to a temporary name beside it first, so a failure never leaves half of
/// one.
pub fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// A simulated schedule: when each request arrived and its lengths (the simulator has no text;
/// replaying it sends synthetic prompts of those lengths).
pub fn export_schedule(path: &Path, run: &Run) -> anyhow::Result<()> {
    let mut f = BufWriter::new(File::create(path).with_context(|| format!("cannot create {}", path.display()))?);
    for r in &run.requests {
        let body = serde_json::json!({"max_tokens": r.requested_output_tokens});
        let line = schedule_line(r.scheduled_ms, r.session, r.turn, r.input_tokens, &body);
        serde_json::to_writer(&mut f, &line)?;
        f.write_all(b"\n")?;
    }
    f.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jsonl_log_is_written_out_while_records_come_and_before_an_exit() {
        let dir = std::env::temp_dir().join(format!("goodput-livelog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.requests.jsonl");
        let log = LiveLog::new(Some(&path), None, None, false, None, true).unwrap();
        let (c, lines) = (Counters::default(), || std::fs::read_to_string(&path).unwrap().lines().count());
        // a record in the buffer, the bookkeeping not caught up: nothing written yet
        log.record(&RequestRecord { id: 0, ..Default::default() }, &c);
        assert_eq!(lines(), 0);
        // what an exit without unwinding calls first writes it out
        flush_open_logs();
        assert_eq!(lines(), 1);
        // records that keep coming are written out at least every FLUSH_EVERY
        log.record(&RequestRecord { id: 1, ..Default::default() }, &c);
        assert_eq!(lines(), 1);
        std::thread::sleep(FLUSH_EVERY);
        log.record(&RequestRecord { id: 2, ..Default::default() }, &c);
        assert_eq!(lines(), 3);
        drop(log);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
