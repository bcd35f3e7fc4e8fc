//! `goodput roofline` from the command line: the seed's figures in the console, the SVG (parsed
//! for well-formedness and its labelled points) and the JSON document; bad usage exits 2 naming
//! the flag.

mod common;

use std::time::Duration;

use common::*;
use goodput_cli::roofline::{DocKind, RooflineDoc};

const LIMIT: Duration = Duration::from_secs(30);

/// Checks that `text` is well-formed XML as far as this SVG needs: every tag closed in order,
/// attributes quoted, no stray `<` or `&`; returns each element's name and raw attributes.
fn elements(text: &str) -> Vec<(String, String)> {
    let mut open: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = text.trim_start();
    assert!(rest.starts_with("<?xml"), "no XML declaration");
    rest = &rest[rest.find("?>").expect("declaration closes") + 2..];
    while let Some(lt) = rest.find('<') {
        let content = &rest[..lt];
        assert!(!open.is_empty() || content.trim().is_empty(), "text outside the root: {content:?}");
        for (i, _) in content.match_indices('&') {
            let entity = &content[i..content[i..].find(';').map_or(content.len(), |e| i + e + 1)];
            assert!(["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&entity), "bad entity {entity:?}");
        }
        rest = &rest[lt + 1..];
        let gt = rest.find('>').expect("tag closes");
        let tag = &rest[..gt];
        rest = &rest[gt + 1..];
        assert!(!tag.contains('<'), "`<` inside a tag: {tag:?}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag:?}");
        if let Some(name) = tag.strip_prefix('/') {
            let top = open.pop().unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name.trim(), "</{name}> closes <{top}>");
            if open.is_empty() {
                assert!(rest.trim().is_empty(), "content after the root element");
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name = tag.split_whitespace().next().expect("a tag name").to_string();
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':'), "bad name {name:?}");
        seen.push((name.clone(), tag[name.len()..].to_string()));
        if !self_closing {
            open.push(name);
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
    seen
}

/// The text of the group `<g id="{id}" …>…</g>` (groups in this SVG do not nest).
fn group<'a>(svg: &'a str, id: &str) -> &'a str {
    let start = svg.find(&format!("<g id=\"{id}\"")).unwrap_or_else(|| panic!("no group {id}"));
    let end = svg[start..].find("</g>").unwrap() + start;
    &svg[start..end]
}

#[test]
fn seventy_b_on_h100_reproduces_the_seeds_figures_and_draws_them() {
    let dir = temp_dir("roofline");
    let (svg_path, json_path) = (dir.join("r.svg"), dir.join("r.json"));
    let o = run(
        &[
            "roofline",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "h100",
            "--dtype",
            "fp16",
            "--svg",
            svg_path.to_str().unwrap(),
            "--out",
            json_path.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for needle in [
        "70.55B total, 70.55B active",
        "4096² = 16.8M scores per head per layer",
        "reads 139.0 GB",
        "ridge point       295 FLOP/byte",
        "decode crosses it, turning compute-bound, at batch 967",
        // the weights do not fit one H100: no throughput is claimed, and the table says so
        "the weights do not fit (KV: none; tok/s: -)",
        "operations per byte at typical batch sizes\": decode at batch 69–96",
        "KV capacity       none: llama-3.1-70b in bf16 needs 141 GB",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }

    // the SVG: well-formed, self-contained, every point labelled
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let els = elements(&svg);
    assert_eq!(els.first().map(|e| e.0.as_str()), Some("svg"));
    assert!(!svg.contains("href") && !svg.contains("url(") && !svg.contains("<image") && !svg.contains("<script"));
    assert_eq!(svg.matches("http").count(), 1, "only the SVG namespace");
    let circles = els.iter().filter(|(n, _)| n == "circle").count();
    assert_eq!(circles, 1 + 1 + 7, "ridge, prefill and seven decode points");
    let prefill = group(&svg, "prefill");
    assert!(prefill.contains("<circle") && prefill.contains(">prefill 4096 (4152)</text>"), "{prefill}");
    assert!(prefill.contains("compute-bound"));
    for (b, i) in [(1, "1.0"), (8, "8.0"), (32, "30.3"), (64, "56.5"), (128, "99.7"), (256, "161"), (512, "233")] {
        let g = group(&svg, &format!("decode-b{b}"));
        assert!(g.contains("<circle") && g.contains(&format!(">b={b} ({i})</text>")), "{g}");
        assert!(g.contains("memory-bound"), "{g}");
    }
    assert!(group(&svg, "ridge").contains("ridge 295 FLOP/B"));
    assert!(group(&svg, "roof").contains("<polyline"));
    assert!(svg.contains(">arithmetic intensity (FLOP/byte)</text>"));
    assert!(svg.contains(">attainable FLOP/s per GPU</text>"));
    assert!(svg.contains(">1 PFLOP/s</text>") && svg.contains(">1k</text>"));

    // the JSON: typed, and the figures
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(v["kind"], "roofline");
    assert_eq!(v["version"], 1);
    assert_eq!(v["tool"]["name"], "goodput");
    assert_eq!(v["model"], "llama-3.1-70b");
    assert_eq!(v["dtype"], "bf16");
    assert_eq!(v["attention_scores_per_head_per_layer"], 16_777_216);
    assert!((v["ridge_point"].as_f64().unwrap() - 295.3).abs() < 0.1);
    assert_eq!(v["prefill"]["bound"], "compute");
    assert!(v["prefill"]["intensity"].as_f64().unwrap() > 10.0 * 295.0);
    let b1 = &v["decode"][0];
    assert_eq!((b1["batch"].as_u64(), b1["bound"].as_str()), (Some(1), Some("memory")));
    assert!((b1["intensity"].as_f64().unwrap() - 1.0).abs() < 0.05);
    assert!((b1["weight_bytes"].as_f64().unwrap() / 1e9 - 140.0).abs() < 2.0);
    assert_eq!(v["seed_band"]["batches"], serde_json::json!([69, 96]));
    assert_eq!(v["compute_bound_batch"], 967);
    assert!(v["memory"]["does_not_fit"].as_str().unwrap().contains("--tp 2"));
    let doc: RooflineDoc = serde_json::from_value(v).unwrap();
    assert_eq!((doc.kind, doc.report.decode.len(), doc.report.spec.context), (DocKind::Roofline, 7, 1024));
}

#[test]
fn a_fitting_deployment_reports_kv_capacity() {
    let o = run(
        &[
            "roofline",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "h100",
            "--tp",
            "4",
            "--batch",
            "1,64,4096",
            "--context",
            "2048",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("sequences of 2048 tokens") && out.contains("fits") && out.contains("over"), "{out}");
    assert!(out.contains("tensor-parallel all-reduces") && out.contains("(each GPU does 1/4)"), "{out}");
}

#[test]
fn bad_usage_exits_2_naming_the_flag() {
    for (args, needle) in [
        (&["--model", "gpt-9", "--gpu", "h100"][..], "--model: unknown model `gpt-9`"),
        (&["--model", "llama-3.1-8b", "--gpu", "tpu-v9"][..], "--gpu: unknown GPU `tpu-v9`"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "8,lots"][..], "--batch: `lots`"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "0"][..], "--batch: 0"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--prompt", "4k"][..], "--prompt: `4k`"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--context", "-1"][..], "--context: `-1`"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--context", "999999"][..], "--context: 999999 tokens"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "3"][..], "--tp 3"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "int3"][..], "--dtype: `int3`"),
        (&["--model", "llama-3.1-8b", "--gpu", "h100", "--svg", "/nonexistent-dir/r.svg"][..], "--svg: directory"),
        (&["--model", "llama-3.1-8b"][..], "--gpu"),
    ] {
        let mut a = vec!["roofline"];
        a.extend_from_slice(args);
        let o = run(&a, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(needle), "{a:?}: {}", text(&o.stderr));
    }
}

#[test]
#[should_panic(expected = "closes <g>")]
fn the_well_formedness_check_catches_a_misnested_tag() {
    elements("<?xml version=\"1.0\"?>\n<svg><g><text>x</text></svg>");
}
