//! Raw arguments → a validated, serializable run plan, before anything runs.
//!
//! Every error names the flag (or file) and says what is expected; the binary prints it on one
//! line and exits with code 2.

mod bench;
mod engine;
mod load;
mod output;
mod sim;
mod slo;
mod workload;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use goodput_engine::{
    Batching, Catalog, Disaggregation, Dtype, EngineSpec, KvAlloc, Link, ModelArch, Named, Scheduling, Speculative,
};
use goodput_metrics::{Edge, Slo, Smoothing};
use goodput_results::plan::{
    DistinctPrompts, EnginePlan, LoadPlan, OutputPlan, RunPlan, ScrapePlan, SloPlan, TargetPlan, Timeouts, WorkloadPlan,
};
use goodput_stage::Resources;
use goodput_tokenizer::Tokenizer;
use goodput_workload::{
    Arrivals, Dataset, DatasetKind, LengthDist, Load, Profile, Rate, Source, ThinkTime, Turns, WorkloadSpec,
};

use crate::args::{BenchArgs, EngineArgs, LoadArgs, OutputArgs, SimArgs, SloArgs, TimeoutArgs, WorkloadArgs};

pub use bench::*;
pub use engine::*;
use load::*;
pub use output::*;
pub use sim::*;
pub use slo::*;
pub use workload::*;

/// Invalid usage: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(flag: &str, msg: impl std::fmt::Display) -> UsageError {
    UsageError(format!("{flag}: {msg}"))
}

/// Parses `10s`, `250ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(flag: &str, s: &str) -> Result<Duration, UsageError> {
    goodput_metrics::units::seconds(s, 1.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| usage(flag, format!("`{s}` is not a duration of at most 100 days (e.g. 30s, 250ms, 5m, 1h)")))
}

fn positive_duration(flag: &str, s: &str) -> Result<Duration, UsageError> {
    let d = parse_duration(flag, s)?;
    if d.is_zero() {
        return Err(usage(flag, "must be greater than zero"));
    }
    Ok(d)
}

/// A validated plan, with what it names loaded.
pub struct Planned {
    pub plan: RunPlan,
    pub res: Resources,
    /// `--ca-cert`'s contents.
    pub ca_pem: Option<Vec<u8>>,
    /// No progress bar (`-q`).
    pub quiet: bool,
    /// `--html`: the HTML report written after the run (not part of the run's plan).
    pub html: Option<std::path::PathBuf>,
    /// What a `--twin` prediction extrapolates beyond the twin's training runs.
    pub extrapolated: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Cli;
    use clap::Parser;

    fn bench(args: &[&str]) -> Result<RunPlan, UsageError> {
        let mut v = vec!["goodput", "bench"];
        v.extend_from_slice(args);
        let cli = Cli::try_parse_from(v).expect("clap parse");
        let crate::args::Command::Bench(b) = cli.command else { panic!("bench") };
        super::bench(&b).map(|p| p.plan)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("f", "250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("f", "2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("f", "1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("f", "soon").is_err());
        assert!(parse_duration("f", "-1s").is_err());
    }

    #[test]
    fn defaults() {
        let p = bench(&["--url", "http://127.0.0.1:9/v1/"]).unwrap();
        assert!(matches!(&p.target, Some(TargetPlan::Url { url }) if url == "http://127.0.0.1:9"));
        assert_eq!(p.load.requests, Some(100));
        assert!(p.ignore_eos);
        assert_eq!(p.workload.spec.input_tokens, LengthDist::Fixed(512));
        assert!(matches!(p.load.load, Load::Closed { concurrency: 16, .. }));
    }

    #[test]
    fn a_bad_rate_is_refused_where_the_flags_are_read_naming_the_flag() {
        for bad in ["--rate=-3", "--rate=1e-300", "--rate=fast"] {
            let e = Cli::try_parse_from(["goodput", "bench", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let text = e.to_string();
            assert!(text.contains("--rate") && text.contains("requests per second of at least 0.001"), "{text}");
        }
    }

    #[test]
    fn rate_and_duration() {
        let p = bench(&["--url", "http://h:1", "--rate", "2.5", "--duration", "30s"]).unwrap();
        assert_eq!(p.load.requests, None);
        assert_eq!(p.load.load.offered_rate(), Some(2.5));
        let p = bench(&["--url", "http://h:1", "--rate", "inf"]).unwrap();
        assert!(matches!(p.load.load, Load::Open { arrivals: Arrivals::AllAtOnce, .. }));
    }

    #[test]
    fn all_at_once_needs_a_request_count() {
        for args in [["--profile", "throughput"], ["--rate", "inf"]] {
            let mut v = vec!["--url", "http://h:1", "--duration", "10s"];
            v.extend_from_slice(&args);
            let e = bench(&v).unwrap_err().to_string();
            assert!(e.starts_with("--requests:") && e.contains("--rate inf"), "{e}");
            v.extend_from_slice(&["--requests", "1000"]);
            assert_eq!(bench(&v).unwrap().load.requests, Some(1000));
        }
        let cli = Cli::try_parse_from(["goodput", "sim", "--rate", "inf", "--duration", "60s"]).expect("clap parse");
        let crate::args::Command::Sim(a) = cli.command else { panic!("sim") };
        let e = super::sim(&a).err().expect("refused").to_string();
        assert!(e.starts_with("--requests:"), "{e}");
    }

    #[test]
    fn offline_sim_queues_without_bound_unless_told() {
        let sim = |args: &[&str]| {
            let mut v = vec!["goodput", "sim"];
            v.extend_from_slice(args);
            let cli = Cli::try_parse_from(v).expect("clap parse");
            let crate::args::Command::Sim(a) = cli.command else { panic!("sim") };
            super::sim(&a).map(|p| p.plan.engine.expect("engine").config.max_waiting).expect("plan")
        };
        assert_eq!(sim(&["--rate", "inf", "--requests", "10"]), UNBOUNDED_WAITING);
        assert_eq!(sim(&["--profile", "throughput", "--requests", "10"]), UNBOUNDED_WAITING);
        // asked for: kept
        assert_eq!(sim(&["--rate", "inf", "--requests", "10", "--max-waiting", "7"]), 7);
        // a rate keeps the server's default bound
        assert_eq!(sim(&["--rate", "5", "--requests", "10"]), 100_000);
    }

    #[test]
    fn errors_name_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--url", "ftp://x"], "--url"),
            (&["--url", "http://h:1", "--concurrency", "0"], "--concurrency"),
            (&["--url", "http://h:1", "--input-tokens", "uniform:9..1"], "--input-tokens"),
            (&["--url", "http://h:1", "--output-tokens", "file:/nonexistent"], "--output-tokens"),
            (&["--url", "http://h:1", "--tokenizer", "/nonexistent.json"], "--tokenizer"),
            (&["--url", "http://h:1", "--timeout-idle", "0s"], "--timeout-idle"),
            (&["--url", "http://h:1", "--extra-body", "[1]"], "--extra-body"),
            (&["--url", "http://h:1", "--out", "/nonexistent/dir/r.json"], "--out"),
            (&["--url", "http://h:1", "--out", "/proc/r.json"], "--out"),
            (&["--url", "http://h:1", "--export-schedule", "/nonexistent/s.jsonl"], "--export-schedule"),
            (&["--url", "http://h:1", "--export-schedule", "/tmp/x.json", "--out", "/tmp/x.json"], "--export-schedule"),
            (
                &["--url", "http://h:1", "--export-schedule", "/tmp/x.requests.jsonl", "--out", "/tmp/x.json"],
                "--export-schedule",
            ),
            (&["--url", "http://h:1", "--out", "/dev/null"], "--out"),
            (
                &["--url", "http://h:1", "--dataset", "jsonl:/tmp/goodput-d.json", "--out", "/tmp/goodput-d.json"],
                "--dataset",
            ),
            // values so large they would overflow a timer or an allocation
            (&["--url", "http://h:1", "--duration", "1e30"], "--duration"),
            (&["--url", "http://h:1", "--timeout-total", "1e30s"], "--timeout-total"),
            (&["--url", "http://h:1", "--grace", "1e300"], "--grace"),
            (&["--url", "http://h:1", "--concurrency", "2", "--think-time", "1e30s"], "--think-time"),
            (&["--url", "http://h:1", "--input-tokens", "4000000000"], "--input-tokens"),
            (&["--url", "http://h:1", "--concurrency", "100000000"], "--concurrency"),
            // the embedded engine would refuse every request
            (
                &["--scheduling", "prefill-first", "--max-batched-tokens", "256", "--input-tokens", "512"],
                "--input-tokens",
            ),
            (&["--engine", "tgi"], "--engine"),
            (&["--router", "least-loaded"], "--router"),
            (&["--replicas", "0"], "--replicas"),
            (&["--ppd"], "--ppd"),
            (&["--disaggregate", "prefill=1"], "--disaggregate"),
            (&["--disaggregate", "prefill=1,decode=1", "--link", "fast"], "--link"),
            (&["--prefix-caching", "maybe"], "--prefix-caching"),
            (&["--mbu", "1e-300"], "--mbu"),
            (&["--input-tokens", "131000", "--output-tokens", "1000", "--chunked-prefill"], "--input-tokens"),
        ];
        for (args, flag) in cases {
            let e = bench(args).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn outputs_must_not_overwrite_the_dataset() {
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/replay_small.jsonl");
        let dataset = format!("jsonl:{fixture}");
        let e = bench(&["--url", "http://h:1", "--dataset", &dataset, "--out", fixture]).unwrap_err().to_string();
        assert!(e.starts_with("--out") && e.contains("is also --dataset"), "{e}");
        let e = bench(&["--url", "http://h:1", "--dataset", &dataset, "--export-schedule", fixture])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--export-schedule") && e.contains("is also --dataset"), "{e}");
    }

    #[test]
    fn writable_checks_without_touching() {
        let dir = std::env::temp_dir().join(format!("goodput-writable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // an existing file is neither truncated nor removed; a new one is not left behind
        let existing = dir.join("r.json");
        std::fs::write(&existing, "keep").unwrap();
        writable("--out", &existing).unwrap();
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep");
        let fresh = dir.join("new.json");
        writable("--out", &fresh).unwrap();
        assert!(!fresh.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no probe left");
        // a dangling link and a directory are refused
        let link = dir.join("dangling.json");
        std::os::unix::fs::symlink(dir.join("nowhere/x"), &link).unwrap();
        assert!(writable("--out", &link).unwrap_err().to_string().contains("dangling"));
        assert!(writable("--out", &dir).unwrap_err().to_string().contains("directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn embedded_engine_by_default() {
        let p = bench(&[]).unwrap();
        let Some(TargetPlan::Embedded { engine }) = &p.target else { panic!("embedded") };
        assert_eq!(engine.config.model.name, "llama-3.1-8b");
        assert_eq!(engine.config.gpu.name, "h100");
        assert!(engine.memory.kv_blocks > 0);
        let p = bench(&["--model", "llama-2-70b", "--gpu", "h100", "--tp", "2", "--dtype", "fp8"]).unwrap();
        let Some(TargetPlan::Embedded { engine }) = &p.target else { panic!("embedded") };
        assert_eq!((engine.config.tp, engine.config.dtype), (2, Dtype::Fp8));
    }

    #[test]
    fn a_model_that_does_not_fit_is_refused_with_the_fix() {
        let e = bench(&["--model", "llama-2-70b"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "llama-2-70b in bf16 needs 138 GB of weights; one h100 offers 72 GB at 0.9 utilization: use --tp 2 or more, or --dtype fp8"
        );
    }

    #[test]
    fn plan_serializes_without_secrets() {
        let p = bench(&["--url", "http://h:1", "--api-key-env", "MY_KEY"]).unwrap();
        let j = serde_json::to_string(&p).unwrap();
        assert!(j.contains("\"api_key_env\":\"MY_KEY\""));
    }
}
