//! `results::shards::merge_shards` on a measured run cut into two shards by hand: the records
//! come back on one clock, the distributions are the whole run's, warnings are kept per shard,
//! and shards started 2 ms apart are warned about.

use std::path::Path;

use goodput_metrics::{Warning, WarningCode};
use goodput_results::shards::{ShardFile, merge_shards};
use goodput_results::{ResultDoc, Run, summaries, summary_options};
use goodput_workload::Shard;

fn whole() -> ResultDoc {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/results/v1-bench-before-run-ids.json");
    ResultDoc::read(&p).unwrap()
}

/// Shard `index` of 2: the records with `id mod 2 = index`, its clock started `late_ms` after
/// the whole run's (its record times moved back by as much).
fn shard(doc: &ResultDoc, index: u32, late_ms: f64) -> ShardFile {
    let w = &doc.runs[0];
    let mut run = Run {
        id: format!("shard{index}"),
        started_at: Some(format!("2026-01-01T00:00:00.{:09}Z", (late_ms * 1e6) as u64)),
        requests: w.requests.iter().filter(|r| r.id % 2 == index as u64).cloned().collect(),
        ..w.clone()
    };
    run.plan.load.shard = Some(Shard { index, count: 2 });
    for r in &mut run.requests {
        r.scheduled_ms -= late_ms;
        for t in [&mut r.sent_ms, &mut r.headers_ms, &mut r.end_ms].into_iter().flatten() {
            *t -= late_ms;
        }
        for t in &mut r.event_ms {
            *t -= late_ms;
        }
    }
    run.summary.warnings = vec![Warning { code: WarningCode::FewSamples, message: format!("note {index}") }];
    ShardFile { name: format!("shard-{index}.json"), doc: ResultDoc { runs: vec![run], ..doc.clone() } }
}

#[test]
fn two_shards_merge_into_the_whole_run() {
    let doc = whole();
    let w = &doc.runs[0];
    let merged = merge_shards(&[shard(&doc, 1, 2.0), shard(&doc, 0, 0.0)], false).unwrap();
    let m = &merged.runs[0];
    assert_eq!(m.requests.len(), w.requests.len());
    assert_eq!(m.started_at.as_deref(), Some("2026-01-01T00:00:00.000000000Z"));
    let mut by_id = m.requests.clone();
    by_id.sort_by_key(|r| r.id);
    for (a, b) in by_id.iter().zip(&w.requests) {
        assert_eq!((a.id, a.shard), (b.id, Some((b.id % 2) as u32)));
        assert!((a.scheduled_ms - b.scheduled_ms).abs() < 1e-9, "one clock: {} vs {}", a.scheduled_ms, b.scheduled_ms);
        assert!((a.end_ms.unwrap() - b.end_ms.unwrap()).abs() < 1e-9);
    }
    let load = w.load.clone().unwrap_or_else(|| w.plan.load.load.clone());
    let (expect, _) = summaries(&w.requests, &summary_options(&w.plan, &load));
    let s = &m.summary;
    assert_eq!((s.completed, s.output_tokens), (expect.completed, expect.output_tokens));
    assert_eq!(s.ttft_ms.p99, expect.ttft_ms.p99);
    assert_eq!(s.e2e_ms.p50, expect.e2e_ms.p50);
    assert!((s.output_throughput - expect.output_throughput).abs() < 1e-6, "over the union window");
    let messages: Vec<&str> = s.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(messages.contains(&"shard 0/2: note 0") && messages.contains(&"shard 1/2: note 1"), "{messages:?}");
    // 2 ms apart: more than 1 ms
    let spread = s.warnings.iter().find(|w| w.code == WarningCode::ShardStartSpread).expect("a spread warning");
    assert!(spread.message.starts_with("the shards' actual starts differ by 2.000 ms"), "{}", spread.message);
    assert_eq!(merged.notes.len(), 1);
}

#[test]
fn shards_half_a_millisecond_apart_are_not_warned_about() {
    let doc = whole();
    let merged = merge_shards(&[shard(&doc, 0, 0.0), shard(&doc, 1, 0.5)], false).unwrap();
    assert!(!merged.runs[0].summary.warnings.iter().any(|w| w.code == WarningCode::ShardStartSpread));
    assert!(merged.notes.is_empty());
}
