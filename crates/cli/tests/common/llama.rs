//! llama.cpp's `llama-server` for the tests that run against it: SmolLM2-135M-Instruct, 4 slots
//! (`-np 4`), one thread, no prompt cache (built by `scripts/llama-server.sh build`). Skipped
//! (with a note) when the server is not built, unless `GOODPUT_REQUIRE_LLAMA=1` (CI sets it).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server, killed when dropped.
pub struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn paths() -> Option<(PathBuf, PathBuf)> {
    let cache = std::env::var("GOODPUT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/goodput"));
    let bin = std::env::var("GOODPUT_LLAMA_SERVER").map(PathBuf::from).unwrap_or(cache.join("llama-server"));
    let model = std::env::var("GOODPUT_LLAMA_MODEL")
        .map(PathBuf::from)
        .unwrap_or(cache.join("SmolLM2-135M-Instruct.Q4_1.gguf"));
    (bin.is_file() && model.is_file()).then_some((bin, model))
}

/// `GET /health` answers 200 (plain std I/O, no client dependency).
fn health_ok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200")
}

/// Starts llama-server with 4 slots on one thread on a free loopback port and waits until it
/// is healthy; `None` (with a note) when it is not built, unless CI requires it.
pub fn start() -> Option<(Server, String)> {
    start_with(false)
}

/// [`start`], its prompt cache on (`--cache-prompt`, llama.cpp's default: a slot reuses the
/// longest common prefix of its last prompt) or off.
pub fn start_with(prompt_cache: bool) -> Option<(Server, String)> {
    let Some((bin, model)) = paths() else {
        if std::env::var("GOODPUT_REQUIRE_LLAMA").as_deref() == Ok("1") {
            panic!(
                "llama-server is required (GOODPUT_REQUIRE_LLAMA=1) but not built: run scripts/llama-server.sh build"
            );
        }
        eprintln!("skipping: llama-server not built (scripts/llama-server.sh build)");
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(&bin)
        .args(["-m", model.to_str().unwrap(), "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-a", "SmolLM2-135M-Instruct", "--metrics", "--no-webui", "-c", "8192", "-np", "4", "-t", "1"])
        .args(if prompt_cache { &[][..] } else { &["--no-cache-prompt", "--cache-ram", "0"][..] })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start llama-server");
    let mut server = Server(child);
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    loop {
        if health_ok(port) {
            break;
        }
        // a server that died (a binary built for other CPU features crashes while loading) is
        // named at once rather than waited for
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!(
                "{} exited ({status}) before it was healthy: run it by hand to see why, or rebuild it \
                 (rm {0}; scripts/llama-server.sh build)",
                bin.display()
            );
        }
        assert!(start.elapsed() < Duration::from_secs(120), "llama-server did not become healthy");
        std::thread::sleep(Duration::from_millis(250));
    }
    Some((server, url))
}
