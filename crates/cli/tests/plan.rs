//! `goodput plan` from the command line: a small plan ranks its candidates by cost, lists one
//! that does not fit with why, prices them, and writes a schema-valid document; bad flags exit 2
//! naming the flag.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_small_plan_ranks_prices_and_explains() {
    let dir = temp_dir("plan");
    let out = dir.join("plan.json");
    let o = run(
        &[
            "plan",
            "--model",
            "llama-3.1-70b",
            "--gpus",
            "h100,h200",
            "--tp",
            "1,4",
            "--dtype",
            "fp8",
            "--input-tokens",
            "256",
            "--output-tokens",
            "64",
            "--slo",
            "ttft<=1s,tpot<=100ms",
            "--attainment",
            "0.9",
            "--step-time",
            "20s",
            "--precision",
            "0.25",
            "--price",
            "h100=2.99/h",
            "--purchase",
            "h100=30000",
            "--target-rate",
            "20",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("goodput plan · llama-3.1-70b") && stdout.contains("$/M out"), "{stdout}");
    let doc = load_valid(&out);
    let plan = &doc["plan"];
    let c = plan["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 4);
    // fp8 70B (~70 GB) fits one H200 (141 GB) but not one H100 (80 GB at 0.9): it is listed last
    let unfit: Vec<_> = c.iter().filter(|x| x["fits"] == false).collect();
    assert_eq!(unfit.len(), 1, "{plan}");
    assert_eq!((unfit[0]["gpu"].as_str(), unfit[0]["tp"].as_u64()), (Some("h100"), Some(1)));
    assert!(unfit[0]["reason"].as_str().unwrap().starts_with("cannot run: llama-3.1-70b"), "{}", unfit[0]["reason"]);
    // it is already fp8: the reason does not tell it to use fp8, and no break-even is priced under it
    assert!(!unfit[0]["reason"].as_str().unwrap().contains("--dtype fp8"), "{}", unfit[0]["reason"]);
    assert!(unfit[0]["break_even_hours"].is_null(), "{}", unfit[0]);
    assert!(!unfit[0]["reason"].as_str().unwrap().contains("--dtype fp4"), "h100 has no FP4: {}", unfit[0]["reason"]);
    assert_eq!(c.last().unwrap()["fits"], false);
    // the others serve, ranked by cost per million output tokens, each priced and explained
    let serving: Vec<_> = c.iter().filter(|x| x["capacity"].is_number()).collect();
    assert_eq!(serving.len(), 3, "{plan}");
    let costs: Vec<f64> = serving.iter().map(|x| x["cost_per_m_output"].as_f64().unwrap()).collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    for x in &serving {
        let price = x["price_per_gpu_hour"].as_f64().unwrap();
        let gpus = x["gpus"].as_f64().unwrap();
        let tok = x["output_tokens_per_s"].as_f64().unwrap();
        // $/M output tokens = GPUs × $/GPU-h ÷ (tokens/s × 3600) × 1e6
        let want = gpus * price / (tok * 3600.0) * 1e6;
        assert!((x["cost_per_m_output"].as_f64().unwrap() - want).abs() < 1e-9 * want.max(1.0));
        let need = (20.0 / x["capacity"].as_f64().unwrap()).ceil();
        assert_eq!(x["replicas_for_target"].as_f64().unwrap(), need);
        assert!(x["reason"].as_str().unwrap().starts_with("capacity "));
        // what it served, and its output per GPU
        assert!(x["served_requests_per_s"].as_f64().unwrap() >= 0.95 * x["capacity"].as_f64().unwrap(), "{x}");
        let per_gpu = x["output_tokens_per_s_per_gpu"].as_f64().unwrap();
        assert!((per_gpu * gpus - tok).abs() < 1e-9 * tok, "{x}");
        if x["gpu"] == "h100" {
            assert_eq!(price, 2.99, "--price overrides the default");
            // $30,000 ÷ ($2.99 − 0.7 kW × 1.3 × $0.12) per hour
            let h = 30000.0 / (2.99 - 0.1092);
            assert!((x["break_even_hours"].as_f64().unwrap() - h).abs() < 1e-6);
        } else {
            assert_eq!(price, 4.59, "the documented default");
        }
    }
    assert!(!plan["pareto"].as_array().unwrap().is_empty());
}

#[test]
fn bad_plan_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (&["--gpus", "tpu-v9", "--preset", "chat"][..], "--gpus"),
        (&["--mechanisms", "warp", "--preset", "chat"][..], "--mechanisms"),
        (&["--preset", "nope"][..], "--preset"),
        (&["--price", "h100=cheap", "--preset", "chat"][..], "--price"),
        (&["--tp", "0", "--preset", "chat"][..], "--tp"),
        (&["--engines", "tgi", "--preset", "chat"][..], "--engines"),
        (&["--gpus", "h100"][..], "--slo"),
    ] {
        let mut argv = vec!["plan"];
        argv.extend_from_slice(args);
        let o = run(&argv, Duration::from_secs(20));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(text(&o.stderr).starts_with(&format!("goodput: {flag}:")), "{args:?}: {}", text(&o.stderr));
    }
}
