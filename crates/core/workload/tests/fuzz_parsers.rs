//! Fuzzing the dataset parsers and length-distribution specs on stable (proptest;
//! `scripts/fuzz.sh` runs it with a large case count). Mutated real files (`fuzz/corpus/<kind>/`:
//! ShareGPT JSON, JSONL, Azure CSV, Mooncake JSONL) and arbitrary text either parse or fail with a
//! typed error that names the file, and the line when it gives one within the file; never a
//! panic. Length specs: arbitrary strings parse or fail with a message, and whatever parses
//! round-trips through its display form.

use goodput_workload::datasets::{Dataset, DatasetKind};
use goodput_workload::{LengthDist, WorkloadError};
use proptest::prelude::*;

include!("../../../../fuzz/mutate.rs");

const KINDS: [(&str, DatasetKind); 4] = [
    ("sharegpt", DatasetKind::ShareGpt),
    ("jsonl", DatasetKind::Jsonl),
    ("azure", DatasetKind::Azure),
    ("mooncake", DatasetKind::Mooncake),
];

fn check_dataset(kind: DatasetKind, bytes: &[u8]) -> Result<(), TestCaseError> {
    let text = String::from_utf8_lossy(bytes);
    let path = "fuzzed.input";
    match Dataset::parse(kind, path, &text) {
        Ok(d) => prop_assert!(!d.entries.is_empty()),
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(shown.contains(path), "{:?}: the error does not name the file: {}", kind, shown);
            if let WorkloadError::Data { line, .. } = e {
                // a line number is within the file (ShareGPT names the entry, fewer than bytes)
                let lines = text.split('\n').count().max(text.len());
                prop_assert!(line <= lines, "{:?}: line {} of {} lines: {}", kind, line, lines, shown);
            }
        }
    }
    Ok(())
}

fn check_length(s: &str) -> Result<(), TestCaseError> {
    if let Ok(d) = s.parse::<LengthDist>() {
        let shown = d.to_string();
        let again: LengthDist = shown.parse().map_err(|e| TestCaseError::fail(format!("{s:?} → {shown:?}: {e}")))?;
        prop_assert_eq!(again, d);
    }
    Ok(())
}

#[test]
fn corpus_replays() {
    for (target, kind) in KINDS {
        for (name, bytes) in corpus(target) {
            check_dataset(kind, &bytes).unwrap_or_else(|e| panic!("{target}/{name}: {e}"));
        }
        // the first seed of each kind is a real file's head: it parses
        let (name, bytes) = &corpus(target)[0];
        let parsed = Dataset::parse(kind, name, &String::from_utf8_lossy(bytes));
        assert!(parsed.is_ok(), "{target}/{name}: {parsed:?}");
    }
    for (name, bytes) in corpus("lengths") {
        let s = String::from_utf8(bytes).unwrap();
        assert!(s.parse::<LengthDist>().is_ok(), "lengths/{name}: {s}");
        check_length(&s).unwrap();
    }
}

/// Found by these targets' runs: none so far. A failing input goes here by name.
#[test]
fn regressions() {
    for s in ["normal:1e-320,0", "uniform:1..1", "lognormal:4294967295,1e308", "file: x", "0", "4294967296"] {
        check_length(s).unwrap();
    }
    check_dataset(DatasetKind::Azure, b"TIMESTAMP,ContextTokens,GeneratedTokens\n").unwrap();
    check_dataset(DatasetKind::Mooncake, b"\n\n{}").unwrap();
    check_dataset(DatasetKind::ShareGpt, b"[{\"conversations\": null}]").unwrap();
}

fn kind() -> impl Strategy<Value = (&'static str, DatasetKind)> {
    proptest::sample::select(KINDS.to_vec())
}

proptest! {
    #[test]
    fn mutated_datasets((target, kind) in kind(), edits in proptest::collection::vec(edit(), 0..10), pick in any::<usize>()) {
        let seeds = corpus(target);
        let bytes = mutate(&seeds[pick % seeds.len()].1, &edits);
        check_dataset(kind, &bytes)?;
    }

    #[test]
    fn arbitrary_text_as_every_kind(text in "[ -~\n\r\t\"{}\\[\\]:,.0-9é]{0,300}") {
        for (_, kind) in KINDS {
            check_dataset(kind, text.as_bytes())?;
        }
    }

    #[test]
    fn length_specs_parse_or_refuse(s in "(uniform|normal|lognormal|file|x)?:?[0-9.,e+-]{0,12}|[ -~]{0,20}") {
        check_length(&s)?;
    }

    #[test]
    fn mutated_length_specs(bytes in mutated("lengths", 4)) {
        check_length(&String::from_utf8_lossy(&bytes))?;
    }
}
