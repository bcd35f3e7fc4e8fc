//! Regression tests for small defects a new user met (issue 14): each is refused up front with
//! exit 2 (usage) and a message naming the flag, instead of a different answer, exit 1 or a
//! misleading message later.

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs goodput and expects a usage error (exit 2) whose message holds every one of `wants`.
fn refused(args: &[&str], wants: &[&str]) -> String {
    let o = run(args, LIMIT);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}\nstdout: {}\nstderr: {err}", text(&o.stdout));
    for w in wants {
        assert!(err.contains(w), "{args:?}: expected {w:?} in:\n{err}");
    }
    err
}

#[test]
fn capacity_refuses_a_step_too_short_to_hold_the_minimum_arrivals() {
    for step in ["0s", "1ms"] {
        refused(
            &["capacity", "--url", "http://127.0.0.1:1", "--slo", "ttft_p99<1s", "--step-time", step],
            &["--step-time", "at least 20"],
        );
    }
    // 20 s at the default start rate of 1 req/s holds exactly the minimum; the check is relative
    // to --start-rate, so 1ms is fine at 100,000 req/s (it then fails later, unreachable: not 2)
    let o = run(
        &[
            "capacity",
            "--url",
            "http://127.0.0.1:1",
            "--slo",
            "ttft_p99<1s",
            "--step-time",
            "1ms",
            "--start-rate",
            "100000",
        ],
        LIMIT,
    );
    assert!(!text(&o.stderr).contains("--step-time"), "{}", text(&o.stderr));
}

#[test]
fn a_ca_cert_without_a_certificate_is_a_usage_error() {
    let dir = temp_dir("ca");
    let empty = dir.join("not-a-cert.pem");
    std::fs::write(&empty, "just some text\n").unwrap();
    refused(
        &["bench", "--url", "https://127.0.0.1:1", "--ca-cert", empty.to_str().unwrap(), "--requests", "1"],
        &["--ca-cert", "no PEM certificate", "not-a-cert.pem"],
    );
}

#[test]
fn a_tokenizer_directory_is_named_as_one() {
    let dir = temp_dir("tokdir");
    let err = refused(
        &["sim", "--tokenizer", dir.to_str().unwrap(), "--requests", "2"],
        &["--tokenizer", "is a directory", "tokenizer.json"],
    );
    assert!(!err.contains("no such file"), "{err}");
}

#[test]
fn a_warmup_longer_than_the_run_is_refused_up_front() {
    refused(&["sim", "--requests", "5", "--warmup", "1000"], &["--warmup", "--requests 5"]);
    refused(&["sim", "--requests", "5", "--warmup", "3", "--cooldown", "2"], &["--warmup", "--cooldown 2"]);
    refused(&["sim", "--requests", "5", "--cooldown", "5"], &["--cooldown", "--requests 5"]);
    // one request left to measure is fine
    let o =
        run(&["sim", "--requests", "5", "--warmup", "4", "-q", "--input-tokens", "8", "--output-tokens", "4"], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
}

#[test]
fn extra_body_cannot_override_fields_the_client_owns() {
    for (body, field, instead) in [
        (r#"{"stream": false}"#, "`stream`", "always streams"),
        (r#"{"max_tokens": 5}"#, "`max_tokens`", "--output-tokens"),
        (r#"{"model": "x"}"#, "`model`", "--model"),
        (r#"{"messages": []}"#, "`messages`", "--dataset"),
        (r#"{"prompt": "hi"}"#, "`prompt`", "--dataset"),
        (r#"{"stream_options": {"include_usage": false}}"#, "`stream_options`", "usage"),
        (r#"{"temperature": 0, "min_tokens": 3}"#, "`min_tokens`", "--no-ignore-eos"),
    ] {
        refused(
            &["bench", "--url", "http://127.0.0.1:1", "--extra-body", body, "--requests", "1"],
            &["--extra-body", field, instead],
        );
    }
    // fields the client does not set go through (the run then fails to connect: not a usage error)
    let o = run(
        &[
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--extra-body",
            r#"{"temperature": 0, "top_p": 0.9}"#,
            "--requests",
            "1",
            "-q",
        ],
        LIMIT,
    );
    assert_ne!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // with --no-ignore-eos, min_tokens is the user's
    let o = run(
        &[
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--no-ignore-eos",
            "--extra-body",
            r#"{"min_tokens": 3}"#,
            "--requests",
            "1",
            "-q",
        ],
        LIMIT,
    );
    assert_ne!(o.status.code(), Some(2), "{}", text(&o.stderr));
}
