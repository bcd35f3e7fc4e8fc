//! A JSON Lines file written while a run goes on (the per-request log, the exported schedule),
//! so that whatever ends the run (Ctrl-C, SIGTERM, a crash, a full disk) leaves every record
//! finished so far on disk, whole.
//!
//! Lines are appended to a buffer; a flusher thread writes out every open log's buffer at
//! least every [`FLUSH_EVERY`] (so a finished record reaches the file within that, however the
//! records come), as do a full buffer, the run's end and [`flush_open_logs`] (before an exit
//! that does not unwind). A write that fails (a full disk, an I/O error) is said at once on
//! stderr, naming the file; the file is cut back to its last whole line (or, if even that
//! fails, the warning says where the cut line is), and the log stops: later records are only in
//! the result document, and the end of the run says how many the log misses.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::Context;

/// The longest a line waits in a log's buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// A buffer this full is written out at once.
const BUFFER_LIMIT: usize = 256 * 1024;

/// A JSON Lines file being written.
pub struct JsonlLog {
    path: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    file: Box<dyn Write + Send>,
    /// Lines not written yet.
    buf: Vec<u8>,
    /// Lines in `buf`.
    pending: u64,
    /// Lines in the file.
    written: u64,
    /// The file's length up to its last whole line.
    durable: u64,
    /// The file to cut back to `durable` after a failed write.
    truncate: Option<File>,
    /// The write failed: lines appended since are not written (counted here).
    broken: Option<u64>,
}

/// The JSONL logs being written, for the flusher thread and [`flush_open_logs`].
static OPEN_LOGS: Mutex<Vec<Weak<JsonlLog>>> = Mutex::new(Vec::new());

/// Writes out what every open log holds in its buffer: called before the process exits without
/// unwinding (a second Ctrl-C or SIGTERM), so that the log keeps every record finished.
pub fn flush_open_logs() {
    let logs: Vec<Arc<JsonlLog>> = {
        let mut l = OPEN_LOGS.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|w| w.strong_count() > 0);
        l.iter().filter_map(Weak::upgrade).collect()
    };
    for log in logs {
        log.flush();
    }
}

/// Starts the flusher thread once.
fn start_flusher() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new().name("goodput-jsonl".into()).spawn(|| {
            loop {
                std::thread::sleep(FLUSH_EVERY);
                flush_open_logs();
            }
        });
    });
}

impl JsonlLog {
    /// Creates (or, `append`, continues) the file.
    pub fn create(path: &Path, append: bool) -> anyhow::Result<Arc<Self>> {
        let f =
            if append { std::fs::OpenOptions::new().create(true).append(true).open(path) } else { File::create(path) };
        let f = f.with_context(|| format!("cannot create {}", path.display()))?;
        let durable = f.metadata().map(|m| m.len()).unwrap_or(0);
        let truncate = f.try_clone().ok();
        Ok(Self::with_writer(path, Box::new(f), truncate, durable))
    }

    /// A log over any writer (`truncate`: the file to cut back after a failed write).
    fn with_writer(path: &Path, file: Box<dyn Write + Send>, truncate: Option<File>, durable: u64) -> Arc<Self> {
        let log = Arc::new(JsonlLog {
            path: path.to_path_buf(),
            inner: Mutex::new(Inner {
                file,
                buf: Vec::with_capacity(64 * 1024),
                pending: 0,
                written: 0,
                durable,
                truncate,
                broken: None,
            }),
        });
        let mut logs = OPEN_LOGS.lock().unwrap_or_else(|e| e.into_inner());
        logs.retain(|w| w.strong_count() > 0);
        logs.push(Arc::downgrade(&log));
        drop(logs);
        start_flusher();
        log
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one value as a line.
    pub fn append<T: serde::Serialize>(&self, v: &T) {
        let mut line = Vec::with_capacity(512);
        if serde_json::to_writer(&mut line, v).is_err() {
            return;
        }
        line.push(b'\n');
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(missing) = &mut g.broken {
            *missing += 1;
            return;
        }
        g.buf.extend_from_slice(&line);
        g.pending += 1;
        if g.buf.len() >= BUFFER_LIMIT {
            self.write_out(&mut g);
        }
    }

    /// Writes out the buffer.
    pub fn flush(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.write_out(&mut g);
    }

    /// Lines the log could not keep (after a failed write); 0 while it is whole.
    pub fn missing(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).broken.unwrap_or(0)
    }

    fn write_out(&self, g: &mut Inner) {
        if g.buf.is_empty() || g.broken.is_some() {
            return;
        }
        let buf = std::mem::take(&mut g.buf);
        let mut done = 0;
        let result = loop {
            if done == buf.len() {
                break g.file.flush();
            }
            match g.file.write(&buf[done..]) {
                Ok(0) => break Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "nothing written")),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(()) => {
                g.written += g.pending;
                g.durable += buf.len() as u64;
                g.pending = 0;
                g.buf = buf;
                g.buf.clear();
            }
            Err(e) => {
                // what reached the file of the lines written now ends in a cut line unless it
                // is cut back to the last whole one
                let cut = match &g.truncate {
                    _ if done == 0 => Ok(()),
                    Some(f) => f.set_len(g.durable),
                    None => Err(std::io::Error::other("not a file")),
                };
                let tail = match cut {
                    Ok(()) => "it holds every line before, whole".to_string(),
                    Err(_) => {
                        format!("its last line, from byte {}, is cut short (drop it when reading the file)", g.durable)
                    }
                };
                warn!(
                    "goodput: cannot write {} ({e}): from record {} on it is not written ({tail}); the result \
                     document keeps every record",
                    self.path.display(),
                    g.written + 1
                );
                g.broken = Some(g.pending);
                g.pending = 0;
            }
        }
    }
}

impl Drop for JsonlLog {
    fn drop(&mut self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let g = &mut *g;
        self.write_out(g);
        if let Some(missing) = g.broken {
            warn!(
                "goodput: {} holds {} records; {missing} more are only in the result document",
                self.path.display(),
                g.written
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("goodput-jsonl-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("r.requests.jsonl")
    }

    fn lines(p: &Path) -> usize {
        std::fs::read_to_string(p).unwrap().lines().count()
    }

    #[test]
    fn lines_reach_the_file_within_the_flush_period_however_they_come() {
        let path = temp("period");
        let log = JsonlLog::create(&path, false).unwrap();
        // four records at once, then nothing: all four are on disk within the period
        for id in 0..4 {
            log.append(&serde_json::json!({ "id": id }));
        }
        assert_eq!(lines(&path), 0, "buffered");
        std::thread::sleep(FLUSH_EVERY * 3);
        assert_eq!(lines(&path), 4);
        // what an exit without unwinding calls writes out the rest at once
        log.append(&serde_json::json!({ "id": 4 }));
        flush_open_logs();
        assert_eq!(lines(&path), 5);
        drop(log);
        // a later stage appends
        let log = JsonlLog::create(&path, true).unwrap();
        log.append(&serde_json::json!({ "id": 5 }));
        drop(log);
        assert_eq!(lines(&path), 6);
    }

    /// A writer that takes `room` bytes, then fails as a full disk does.
    struct Full {
        file: File,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.file.write(&b[..n])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.file.flush()
        }
    }

    #[test]
    fn a_full_disk_leaves_whole_lines_and_says_how_many_are_missing() {
        let path = temp("full");
        let file = File::create(&path).unwrap();
        let truncate = file.try_clone().ok();
        // room for two lines and a half
        let line = |id: u32| format!("{}\n", serde_json::json!({ "id": id, "pad": "xxxxxxxx" }));
        let room = line(0).len() * 2 + line(0).len() / 2;
        let log = JsonlLog::with_writer(&path, Box::new(Full { file, room }), truncate, 0);
        for id in 0..2 {
            log.append(&serde_json::json!({ "id": id, "pad": "xxxxxxxx" }));
        }
        log.flush();
        for id in 2..5 {
            log.append(&serde_json::json!({ "id": id, "pad": "xxxxxxxx" }));
        }
        log.flush();
        // the half line written before the failure is cut away: two whole lines
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}{}", line(0), line(1)));
        assert_eq!(log.missing(), 3);
        log.append(&serde_json::json!({ "id": 5 }));
        assert_eq!(log.missing(), 4, "later records are counted, not written");
    }
}
