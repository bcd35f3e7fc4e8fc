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

/// Appends each finished record to the JSONL log (flushed per record), each sent request to the
/// exported schedule, and advances the bar; optionally stops a run that is clearly saturated.
pub struct LiveLog {
    /// In-flight requests beyond which the run is saturated, and how to stop it.
    pub saturation: Option<(u64, std::sync::Arc<goodput_client::CancelHandle>)>,
    pub saturated: std::sync::atomic::AtomicBool,
    file: Option<Mutex<BufWriter<File>>>,
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
        let file = jsonl.map(|p| create(p, append)).transpose()?;
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
        Ok(LiveLog {
            saturation: None,
            saturated: std::sync::atomic::AtomicBool::new(false),
            file,
            schedule,
            stage,
            bar,
            recent: Mutex::new((std::time::Instant::now(), 0, 0.0)),
        })
    }

    fn check_saturation(&self, c: &Counters) {
        if let Some((limit, stop)) = &self.saturation
            && c.in_flight.load(Ordering::Relaxed) > *limit
            && !self.saturated.swap(true, Ordering::SeqCst)
        {
            stop.cancel();
        }
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

impl Observer for LiveLog {
    fn sent(&self, meta: &RequestRecord, body: &[u8], c: &Counters) {
        self.check_saturation(c);
        if let Some(f) = &self.schedule
            && let Ok(b) = serde_json::from_slice::<serde_json::Value>(body)
        {
            write_line(f, &schedule_line(meta.scheduled_ms, meta.session, meta.turn, meta.input_tokens_client, &b));
        }
    }

    fn record(&self, r: &RequestRecord, c: &Counters) {
        self.check_saturation(c);
        if let Some(f) = &self.file
            && let Ok(mut v) = serde_json::to_value(r)
        {
            if let Some(stage) = &self.stage {
                v["stage"] = stage.clone().into();
            }
            write_line(f, &v);
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
