//! Output while and after a run: the JSONL log written as records finish, the exported schedule,
//! the progress bar, and the result document at the end.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use goodput_client::{Counters, Observer};
use goodput_metrics::RequestRecord;
use goodput_results::{CapacityReport, ResultDoc, Run};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::jsonl::JsonlLog;

/// Appends each finished record to the JSONL log ([`JsonlLog`]: on disk within
/// [`crate::jsonl::FLUSH_EVERY`], whole lines only), each sent request to the exported schedule,
/// and advances the bar.
pub struct LiveLog {
    file: Option<Arc<JsonlLog>>,
    schedule: Option<Arc<JsonlLog>>,
    /// The sweep stage records belong to (written as `"stage"` on each JSONL line).
    stage: Option<String>,
    pub bar: ProgressBar,
    /// For the bar's current rate: when it was last updated, the count then, and the rate.
    recent: Mutex<(std::time::Instant, u64, f64)>,
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
        let file = jsonl.map(|p| JsonlLog::create(p, append)).transpose()?;
        let schedule = schedule.map(|p| JsonlLog::create(p, false)).transpose()?;
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
        Ok(LiveLog { file, schedule, stage, bar, recent: Mutex::new((now, 0, 0.0)) })
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
            f.flush();
        }
    }

    fn sent(&self, meta: &RequestRecord, body: &[u8], _c: &Counters) {
        if let Some(f) = &self.schedule
            && let Ok(b) = serde_json::from_slice::<serde_json::Value>(body)
        {
            f.append(&schedule_line(meta.scheduled_ms, meta.session, meta.turn, meta.input_tokens_client, &b));
        }
    }

    fn record(&self, r: &RequestRecord, c: &Counters) {
        if let Some(f) = &self.file {
            match &self.stage {
                Some(stage) => f.append(&Staged { stage, record: r }),
                None => f.append(r),
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
    write_result(&result_doc(runs, capacity), path)
}

/// Writes a result document at `path`; if that fails (a full disk, a directory gone read-only
/// during a long run), writes it to the system's temporary directory instead, and the error
/// says where it is.
pub fn write_result(doc: &ResultDoc, path: &Path) -> anyhow::Result<()> {
    let Err(e) = doc.write(path) else { return Ok(()) };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "results.json".into());
    let fallback = std::env::temp_dir().join(format!("goodput-{}-{name}", std::process::id()));
    match doc.write(&fallback) {
        Ok(()) => anyhow::bail!("{e}; the result document was written to {} instead", fallback.display()),
        Err(e2) => anyhow::bail!("{e}; writing it to {} failed too ({e2})", fallback.display()),
    }
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
    // a file written over an earlier one keeps that one's permissions
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
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
