//! Large result documents: the compact form written past 10,000 records reads back (event times
//! within 0.5 µs, everything else exact), old documents still read, and runs that kept a sample of
//! their records refuse to merge, saying why.

use std::path::Path;

use goodput_metrics::RecordsKept;
use goodput_results::{COMPACT_ABOVE_RECORDS, ResultDoc, Run};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/results").join(name)
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("goodput-scale-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("r.json")
}

#[test]
fn a_large_document_is_written_compactly_and_reads_back() {
    let mut doc = ResultDoc::read(&fixture("v1-sim-before-run-ids.json")).unwrap();
    // repeat the fixture's records past the compact threshold
    let base = doc.runs[0].requests.clone();
    let mut records = Vec::new();
    while records.len() <= COMPACT_ABOVE_RECORDS {
        for r in &base {
            let mut r = r.clone();
            r.id = records.len() as u64;
            records.push(r);
        }
    }
    doc.runs[0].requests = records;
    let path = tmp("compact");
    doc.write(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("\n  "), "no indentation");
    assert!(text.contains("\"d_us\":[") && text.contains("\"runs\":[["), "compact events");
    let back = ResultDoc::read(&path).unwrap();
    assert_eq!(back.runs[0].summary, doc.runs[0].summary);
    for (a, b) in back.runs[0].requests.iter().zip(&doc.runs[0].requests) {
        assert_eq!(a.event_tokens, b.event_tokens);
        assert_eq!(a.event_ms.len(), b.event_ms.len());
        assert!(a.event_ms.iter().zip(&b.event_ms).all(|(x, y)| (x - y).abs() <= 0.0005 + 1e-9));
        assert_eq!((a.id, a.sent_ms, a.end_ms), (b.id, b.sent_ms, b.end_ms));
    }
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_small_document_stays_exact() {
    let doc = ResultDoc::read(&fixture("v1-bench-before-run-ids.json")).unwrap();
    let path = tmp("small");
    doc.write(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("d_us"));
    assert_eq!(ResultDoc::read(&path).unwrap(), doc);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn runs_with_sampled_records_refuse_to_merge() {
    let doc = ResultDoc::read(&fixture("v1-sim-before-run-ids.json")).unwrap();
    let mut sampled = doc.runs[0].clone();
    sampled.summary.records_kept = Some(RecordsKept { mode: "sample".into(), kept: 3, total: 500 });
    assert_eq!(sampled.record_count(), 500);
    let e = Run::merge(&[doc.runs[0].clone(), sampled]).unwrap_err().to_string();
    assert!(e.contains("holds 3 of its 500 records") && e.contains("--records all"), "{e}");
}
