//! Golden outputs of `plan`, `capacity --sim` and `k8s`: the same inputs give the same console
//! text and the same document, byte for byte, whatever the code's layout (the architecture issue
//! moved their logic between crates). Times that vary from run to run (elapsed seconds, the
//! creation and start instants) are masked first. `UPDATE_GOLDEN=1` rewrites the files.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

fn check_golden(name: &str, got: &str) {
    let p = golden(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, got).expect("write golden");
    }
    let want = std::fs::read_to_string(&p).expect("golden file (UPDATE_GOLDEN=1 writes it)");
    if got != want {
        let at = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{name} differs from its golden file at line {} (UPDATE_GOLDEN=1 rewrites it)\n--- got\n{}\n--- want\n{}",
            at + 1,
            got.lines().nth(at).unwrap_or(""),
            want.lines().nth(at).unwrap_or("")
        );
    }
}

/// `text` with every match of the patterns' value part replaced by `…`: a key followed by a
/// number or a timestamp.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut l = line.to_string();
        for key in ["\"elapsed_s\": ", "\"created_at\": ", "\"version\": ", "\"started_at\": ", "\"elapsed_s\":"] {
            if let Some(i) = l.find(key) {
                let rest = &l[i + key.len()..];
                let end = rest.find([',', '}']).unwrap_or(rest.len());
                l = format!("{}{key}…{}", &l[..i], &rest[end..]);
            }
        }
        // "in 12.3 s" / "(0.41 s to simulate)" / "… s elapsed"
        l = mask_seconds(&l);
        // RFC 3339 instants (k8s start times, document times)
        l = mask_instants(&l);
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Masks wall-clock seconds in the plan's and capacity's console lines ("in 12.34 s").
fn mask_seconds(l: &str) -> String {
    let mut s = l.to_string();
    for pat in [" in ", "(", "elapsed "] {
        let mut from = 0;
        while let Some(i) = s[from..].find(pat).map(|i| i + from + pat.len()) {
            let digits = s[i..].find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len() - i);
            let after = &s[i + digits..];
            let seconds = after == " s" || [" s to simulate", " s ·", " s)"].iter().any(|p| after.starts_with(p));
            if digits > 0 && seconds {
                s = format!("{}…{}", &s[..i], after);
                from = i + "…".len();
            } else {
                from = i;
            }
        }
    }
    s
}

/// Masks `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, and the per-test temporary directory.
fn mask_instants(l: &str) -> String {
    let tmp = std::env::temp_dir();
    let tmp = tmp.to_str().unwrap_or("/tmp");
    let l = match l.find(tmp).filter(|_| l.contains("/goodput-test-")) {
        Some(t) => {
            let end = l[t..].find(char::is_whitespace).map_or(l.len(), |e| t + e);
            let name = l[t..end].rsplit('/').next().unwrap_or("");
            format!("{}<dir>/{name}{}", &l[..t], &l[end..])
        }
        None => l.to_string(),
    };
    let b = l.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let is_instant = b.len() >= i + 20
            && b[i..i + 4].iter().all(u8::is_ascii_digit)
            && b[i + 4] == b'-'
            && b[i + 10] == b'T'
            && b[i + 13] == b':';
        if is_instant {
            let end = l[i..].find('Z').map_or(b.len(), |z| i + z + 1);
            out.push_str("<instant>");
            i = end;
        } else {
            let c = l[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

#[test]
fn plan_console_and_document() {
    let dir = temp_dir("golden-plan");
    let out = dir.join("plan.json");
    let o = run(
        &[
            "plan",
            "--preset",
            "chat",
            "--model",
            "llama-3.1-8b",
            "--gpus",
            "h100,a100",
            "--tp",
            "1",
            "--dtype",
            "bf16,fp8",
            "--mechanisms",
            "baseline,spec",
            "--step-time",
            "60s",
            "--price",
            "h100=2.99/h",
            "--purchase",
            "h100=30000",
            "--target-rate",
            "50",
            "--seed",
            "3",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(600),
    );
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    check_golden("plan.txt", &mask(&text(&o.stdout)));
    let doc: serde_json::Value = load_valid(&out);
    check_golden("plan.json", &mask(&serde_json::to_string_pretty(&doc["plan"]).unwrap()));
}

#[test]
fn capacity_console_and_report() {
    let dir = temp_dir("golden-capacity");
    let out = dir.join("cap.json");
    let o = run(
        &[
            "capacity",
            "--sim",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--slo",
            "ttft<=200ms,tpot<=40ms",
            "--input-tokens",
            "512",
            "--output-tokens",
            "128",
            "--step-time",
            "60s",
            "--seed",
            "5",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(600),
    );
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    check_golden("capacity.txt", &mask(&text(&o.stdout)));
    let doc: serde_json::Value = load_valid(&out);
    check_golden("capacity.json", &mask(&serde_json::to_string_pretty(&doc["capacity"]).unwrap()));
    // each step's summary and plan: what the search ran, as data
    let steps: Vec<serde_json::Value> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::json!({ "name": r["name"], "plan": r["plan"], "summary": r["summary"] }))
        .collect();
    check_golden("capacity-steps.json", &mask(&serde_json::to_string_pretty(&steps).unwrap()));
}

#[test]
fn k8s_manifests() {
    let o = run(
        &[
            "k8s",
            "--plan-from",
            "--url",
            "http://vllm.serving:8000",
            "--rate",
            "4000",
            "--duration",
            "10m",
            "--seed",
            "7",
            "--shards",
            "8",
            "--image",
            "registry.example/goodput:1",
            "--namespace",
            "load",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    check_golden("k8s.yaml", &mask(&text(&o.stdout)));
}
