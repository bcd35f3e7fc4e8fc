//! Helpers for the binary's integration tests: run `goodput` as a child process, temp dirs, and
//! JSON Schema validation of every result document.
#![allow(dead_code)]

pub mod browser;
pub mod llama;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_goodput"));
    c.env_remove("OPENAI_API_KEY");
    c
}

/// A fresh empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-test-{}-{name}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// Waits for a child with a deadline; kills it and fails the test if it overruns.
pub fn wait_with_deadline(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "goodput did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `goodput ARGS`, its output piped.
pub fn spawn(args: &[&str]) -> Child {
    bin().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Runs `goodput ARGS` to completion within `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    wait_with_deadline(spawn(args), limit)
}

/// Runs `bench` against `url` with four users on slow streams (100 requests of 200 tokens, a
/// 300 ms grace), sends it `kill -SIGNAL` (`INT`, `TERM`) 1.5 s in, and waits up to 10 s for it
/// to end: the run an interrupted user meets.
#[cfg(unix)]
pub fn bench_interrupted(url: &str, out: &Path, signal: &str) -> Output {
    let child = spawn(&[
        "bench",
        "--url",
        url,
        "--requests",
        "100",
        "--concurrency",
        "4",
        "--grace",
        "300ms",
        "--output-tokens",
        "200",
        "--input-tokens",
        "8",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    let st = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    wait_with_deadline(child, Duration::from_secs(10))
}

pub fn schema() -> serde_json::Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/results.schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Loads a result document and checks it against the checked-in JSON Schema.
pub fn load_valid(path: &Path) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| format!("{} at {}", e, e.instance_path())).take(10).collect();
    assert!(errors.is_empty(), "{} does not match the schema:\n{}", path.display(), errors.join("\n"));
    doc
}

/// Runs goodput with `--out` into a fresh directory and `-q`, expects exit 0; returns the
/// (schema-checked) document and stdout.
pub fn run_ok(name: &str, args: &[&str], limit: Duration) -> (serde_json::Value, String) {
    let dir = temp_dir(name);
    let out = dir.join("r.json");
    let mut a = args.to_vec();
    a.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
    let o = run(&a, limit);
    assert_eq!(o.status.code(), Some(0), "{a:?}\nstdout: {}\nstderr: {}", text(&o.stdout), text(&o.stderr));
    (load_valid(&out), text(&o.stdout))
}

pub fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}
