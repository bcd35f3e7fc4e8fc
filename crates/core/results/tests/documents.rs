//! Result documents read back: files written before run ids and start times existed, and the
//! schema; merging the pieces of one run gives the whole run's numbers.

use std::path::Path;

use goodput_results::{ResultDoc, Run, summaries, summary_options};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/results").join(name)
}

#[test]
fn documents_written_before_this_version_read() {
    for name in ["v1-bench-before-run-ids.json", "v1-sim-before-run-ids.json"] {
        let doc = ResultDoc::read(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = &doc.runs[0];
        assert!(run.id.is_empty() && run.started_at.is_none(), "{name}: no id or start time then");
        assert!(run.summary.completed > 0);
        assert_eq!(run.requests.len() as u64, run.summary.attempted + run.summary.excluded);
        assert!(run.plan.slo.slo().is_some(), "{name}: the SLO reads back as predicates");
        assert!(run.target.engine().is_some());
    }
    let bench = ResultDoc::read(&fixture("v1-bench-before-run-ids.json")).unwrap();
    assert_eq!(bench.runs[0].target.kind(), "embedded");
    assert_eq!(bench.runs[0].plan.api, Some(goodput_results::Api::Completions));
}

#[test]
fn a_document_round_trips() {
    let doc = ResultDoc::read(&fixture("v1-sim-before-run-ids.json")).unwrap();
    let dir = std::env::temp_dir().join(format!("goodput-results-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r.json");
    doc.write(&path).unwrap();
    let back = ResultDoc::read(&path).unwrap();
    assert_eq!(back, doc);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn merging_the_halves_of_a_run_gives_the_whole_run() {
    for name in ["v1-bench-before-run-ids.json", "v1-sim-before-run-ids.json"] {
        let doc = ResultDoc::read(&fixture(name)).unwrap();
        let whole = &doc.runs[0];
        let half = |keep: fn(u64) -> bool| Run {
            requests: whole.requests.iter().filter(|r| keep(r.id)).cloned().collect(),
            ..whole.clone()
        };
        let merged = Run::merge(&[half(|id| id % 2 == 0), half(|id| id % 2 == 1)]).unwrap();
        assert_eq!(merged.requests.len(), whole.requests.len());
        let load = whole.load.clone().unwrap_or_else(|| whole.plan.load.load.clone());
        let (expect, _) = summaries(&whole.requests, &summary_options(&whole.plan, &load));
        let got = &merged.summary;
        assert_eq!((got.attempted, got.completed, got.failed), (expect.attempted, expect.completed, expect.failed));
        assert_eq!(got.output_tokens, expect.output_tokens);
        assert_eq!(got.ttft_ms, expect.ttft_ms, "{name}: percentiles recomputed from every sample");
        assert_eq!(got.itl_ms, expect.itl_ms);
        assert_eq!(got.slo, expect.slo);
        // ids are renumbered in send order, without gaps
        let ids: Vec<u64> = merged.requests.iter().map(|r| r.id).collect();
        assert_eq!(ids, (0..ids.len() as u64).collect::<Vec<_>>());
    }
}

#[test]
fn merge_refuses_runs_of_other_plans() {
    let doc = ResultDoc::read(&fixture("v1-sim-before-run-ids.json")).unwrap();
    let a = doc.runs[0].clone();
    let mut b = a.clone();
    b.plan.load.seed += 1;
    let e = Run::merge(&[a, b]).unwrap_err().to_string();
    assert!(e.contains("another plan"), "{e}");
}

#[test]
fn every_document_matches_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../schema/results.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    for name in ["v1-bench-before-run-ids.json", "v1-sim-before-run-ids.json"] {
        let doc = ResultDoc::read(&fixture(name)).unwrap();
        let value = serde_json::to_value(&doc).unwrap();
        let errors: Vec<String> = v.iter_errors(&value).map(|e| format!("{e} at {}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
    }
}
