//! vLLM `benchmark_serving.py --save-result` and `vllm bench serve --save-result` JSON.
//!
//! One object per run (`--append-result` appends more, one after another). Per-request arrays
//! (`ttfts`, `itls` in seconds, `input_lens`, `output_lens`, `errors`; newer: `latencies`,
//! `start_times`, `queue_times`) become records; without them the `mean_/median_/std_/pNN_*_ms`
//! statistics are carried over. Quirks handled: `request_rate` as the string `"inf"`, the legacy
//! `"request_goodput:"` key, Python's `NaN`/`Infinity` literals.

use goodput_metrics::{ErrorClass, RequestError, RequestRecord, Summary, TokenSource, tokens::apportion};
use goodput_workload::{Arrivals, Load, Profile};
use serde_json::Value;

use super::{Fields, ImportError, ImportFormat, ImportSource, RecordClock, RunInfo, dist, parse_values};
use crate::Run;

/// Every run in a vLLM result file.
pub fn import(path: &str, text: &str) -> Result<Vec<Run>, ImportError> {
    let values = parse_values(path, text)?;
    let many = values.len() > 1;
    values
        .into_iter()
        .map(|(line, v)| {
            let f = Fields { path, line: many.then_some(line) };
            if !v.is_object() {
                return Err(f.err("(top level)", "expected a JSON object"));
            }
            one(&f, &v)
        })
        .collect()
}

fn one(f: &Fields, v: &Value) -> Result<Run, ImportError> {
    let mut notes = Vec::new();
    let rate = f.opt_num_or_inf(v, "request_rate")?;
    let burstiness = f.opt_num_or_inf(v, "burstiness")?.unwrap_or(1.0);
    let max_concurrency = f.opt_num(v, "max_concurrency")?.map(|c| c as usize);
    let (profile, arrivals) = match rate {
        None => {
            notes.push("request rate not in the file: the load is shown as all at once".into());
            (Profile::Throughput, Arrivals::AllAtOnce)
        }
        Some(r) if r.is_infinite() => (Profile::Throughput, Arrivals::AllAtOnce),
        Some(r) if burstiness == 1.0 => (Profile::Poisson, Arrivals::Poisson { rate: r }),
        // a gamma process of infinite shape is evenly spaced
        Some(r) if burstiness.is_infinite() => (Profile::Constant, Arrivals::Constant { rate: r }),
        Some(r) => (Profile::Gamma, Arrivals::Gamma { rate: r, burstiness }),
    };
    let goodput = f.opt_num(v, "request_goodput")?.or(f.opt_num(v, "request_goodput:")?);
    if let Some(g) = goodput {
        notes.push(format!(
            "vLLM's request goodput was {g:.4} req/s under its --goodput SLO, which the file does not record: \
             give goodput an --slo to compute attainment"
        ));
    }
    let duration_s = f.opt_num(v, "duration")?;
    let label = f.opt_str(v, "label").filter(|s| !s.is_empty());
    let date = f.opt_str(v, "date");
    if let Some(d) = &date {
        notes.push(format!("vLLM's date {d} is local time without a time zone: started_at is not set"));
    }
    let source = ImportSource {
        tool: ImportFormat::Vllm,
        tool_version: None,
        file: f.path.into(),
        model: f.opt_str(v, "model_id"),
        url: f.opt_str(v, "base_url"),
        clock: RecordClock::SummaryOnly,
        notes,
    };
    let mut info = RunInfo {
        name: label,
        source,
        profile,
        load: Load::Open { arrivals, max_concurrency },
        requests: f.opt_num(v, "num_prompts")?.map(|n| n as u64),
        input_lengths: Vec::new(),
        output_lengths: Vec::new(),
        started_at: None,
        duration_s,
        schedule_known: false,
    };
    match f.opt_nums(v, "ttfts")? {
        Some(ttfts) => {
            let records = records(f, v, &ttfts, &mut info)?;
            Ok(super::run_from_records(info, records))
        }
        None => {
            info.source.notes.push(
                "no per-request data (the run was saved without --save-detailed): only vLLM's summary statistics \
                 are imported; token-level ITL, TTFT and E2E from schedule, mean concurrency (shown as 0) and \
                 SLO attainment are not available"
                    .into(),
            );
            let summary = summary(f, v)?;
            Ok(super::run_from_summary(info, summary))
        }
    }
}

/// One record per request from the per-request arrays.
fn records(f: &Fields, v: &Value, ttfts: &[f64], info: &mut RunInfo) -> Result<Vec<RequestRecord>, ImportError> {
    let n = ttfts.len();
    let a = per_request_arrays(f, v, n)?;
    if v.get("itls").is_none() {
        info.source.notes.push("no `itls`: ITL, TPOT and the chunks after the first are not available".into());
    }
    let t0 = a.starts.as_ref().and_then(|s| s.iter().copied().reduce(f64::min));
    info.source.clock = if t0.is_some() { RecordClock::Run } else { RecordClock::PerRequest };
    let sources = token_sources(info, &a, t0);
    let mut out = Vec::with_capacity(n);
    let mut spread = 0usize;
    for (i, &ttft) in ttfts.iter().enumerate() {
        let (r, spread_out) = request_record(i, &a, ttft, t0, sources);
        if spread_out {
            spread += 1;
        }
        out.push(r);
    }
    if spread > 0 {
        info.source.notes.push(format!("{spread} of {n} requests had fewer chunks than output tokens"));
    }
    if a.latencies.is_none() {
        info.source.notes.push("no `latencies`: E2E is TTFT plus the sum of the request's ITLs".into());
    }
    let lens = |a: &Option<Vec<f64>>| a.as_ref().map_or(Vec::new(), |x| x.iter().map(|&t| t as u32).collect());
    info.input_lengths = lens(&a.input);
    info.output_lengths = lens(&a.output);
    Ok(out)
}

/// vLLM's per-request arrays besides `ttfts`, each of one entry per request when present.
struct PerRequest {
    input: Option<Vec<f64>>,
    output: Option<Vec<f64>>,
    latencies: Option<Vec<f64>>,
    starts: Option<Vec<f64>>,
    queues: Option<Vec<f64>>,
    /// Each request's chunk gaps (empty without `itls`).
    itls: Vec<Vec<f64>>,
    /// Each request's error text (empty: none).
    errors: Vec<String>,
}

/// Reads the per-request arrays, checking that each has one entry for each of the `n` requests.
fn per_request_arrays(f: &Fields, v: &Value, n: usize) -> Result<PerRequest, ImportError> {
    let sized = |field: &str, len: usize| {
        if len == n { Ok(()) } else { Err(f.err(field, format!("has {len} entries, `ttfts` has {n}"))) }
    };
    let input = f.opt_nums(v, "input_lens")?;
    let output = f.opt_nums(v, "output_lens")?;
    let latencies = f.opt_nums(v, "latencies")?;
    let starts = f.opt_nums(v, "start_times")?;
    let queues = f.opt_nums(v, "queue_times")?;
    for (field, a) in [
        ("input_lens", &input),
        ("output_lens", &output),
        ("latencies", &latencies),
        ("start_times", &starts),
        ("queue_times", &queues),
    ] {
        if let Some(a) = a {
            sized(field, a.len())?;
        }
    }
    let itls: Vec<Vec<f64>> = match v.get("itls") {
        None | Some(Value::Null) => vec![Vec::new(); n],
        Some(Value::Array(a)) => {
            sized("itls", a.len())?;
            a.iter()
                .enumerate()
                .map(|(i, x)| {
                    let g = Fields { path: f.path, line: f.line };
                    let w = serde_json::json!({ "x": x });
                    g.opt_nums(&w, "x")
                        .map_err(|_| f.err(&format!("itls[{i}]"), "expected an array of numbers"))
                        .map(Option::unwrap_or_default)
                })
                .collect::<Result<_, _>>()?
        }
        Some(x) => return Err(f.err("itls", format!("expected an array, found {}", super::kind(x)))),
    };
    let errors: Vec<String> = match v.get("errors") {
        Some(Value::Array(a)) => {
            sized("errors", a.len())?;
            a.iter().map(|e| e.as_str().unwrap_or_default().to_string()).collect()
        }
        _ => vec![String::new(); n],
    };
    Ok(PerRequest { input, output, latencies, starts, queues, itls, errors })
}

/// The input and output token counts' sources, as far as the file tells, noting them and how times are read.
fn token_sources(info: &mut RunInfo, a: &PerRequest, t0: Option<f64>) -> (Option<TokenSource>, Option<TokenSource>) {
    let legacy = a.latencies.is_none() && a.starts.is_none();
    let (input_source, output_source) = if legacy {
        info.source.notes.push(
            "prompt lengths are the client tokenizer's count (vLLM's input_lens); output lengths are the \
             server's usage count when the stream gave one, else the client's re-tokenization (the file does \
             not say which)"
                .into(),
        );
        (Some(TokenSource::Tokenizer), None)
    } else {
        info.source.notes.push(
            "token counts are the server's usage when the stream gave one, else the client tokenizer's \
             (the file does not say which)"
                .into(),
        );
        (None, None)
    };
    info.source.notes.push(
        "vLLM records one time per stream chunk: a chunk that carried several tokens has its tokens spread \
         evenly over it (chunk ITL exact, token-level ITL approximate for those requests)"
            .into(),
    );
    if t0.is_some() {
        info.source.notes.push(
            "vLLM stores send times but not the arrival schedule: scheduled time is send time minus client \
             queue time, so schedule lag is not available"
                .into(),
        );
    }
    (input_source, output_source)
}

/// Request `i` as a record, and whether its output tokens were spread over fewer chunks.
fn request_record(
    i: usize,
    a: &PerRequest,
    ttft: f64,
    t0: Option<f64>,
    (input_source, output_source): (Option<TokenSource>, Option<TokenSource>),
) -> (RequestRecord, bool) {
    let sent = match (&a.starts, t0) {
        (Some(s), Some(t0)) => ((s[i] - t0) * 1e9).round() / 1e6,
        _ => 0.0,
    };
    let queue_ms = a.queues.as_ref().map_or(0.0, |q| q[i] * 1000.0);
    let mut r = RequestRecord {
        id: i as u64,
        scheduled_ms: sent - queue_ms,
        cap_wait_ms: queue_ms,
        sent_ms: Some(sent),
        input_tokens: a.input.as_ref().map(|x| x[i] as u64),
        input_tokens_source: a.input.as_ref().and(input_source),
        ..Default::default()
    };
    if !a.errors[i].is_empty() {
        r.error = Some(classify(&a.errors[i]));
        if let Some(l) = &a.latencies
            && l[i] > 0.0
        {
            r.end_ms = Some(sent + l[i] * 1000.0);
        }
        return (r, false);
    }
    let mut spread = false;
    let mut t = ttft;
    let mut events = vec![super::round_ns(sent + t * 1000.0)];
    for g in &a.itls[i] {
        t += g;
        events.push(super::round_ns(sent + t * 1000.0));
    }
    let tokens = a.output.as_ref().map(|x| x[i] as u64);
    r.event_tokens = match tokens {
        Some(k) if k == events.len() as u64 => vec![1; events.len()],
        Some(k) => {
            spread = true;
            apportion(k, &vec![1; events.len()])
        }
        None => vec![1; events.len()],
    };
    r.end_ms = Some(match &a.latencies {
        Some(l) => super::round_ns(sent + l[i] * 1000.0),
        None => *events.last().unwrap_or(&sent),
    });
    r.event_ms = events;
    r.output_tokens = tokens;
    r.output_tokens_source = tokens.and(output_source);
    (r, spread)
}

/// vLLM keeps only a string: an HTTP reason phrase, or a Python traceback.
fn classify(e: &str) -> RequestError {
    let class = if !e.contains("Traceback") && !e.contains('\n') {
        ErrorClass::HttpStatus
    } else if e.contains("Connect") || e.contains("Connection refused") {
        ErrorClass::Connect
    } else if e.contains("Timeout") {
        ErrorClass::TimeoutTotal
    } else {
        ErrorClass::MalformedStream
    };
    let message: String = e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(e).chars().take(500).collect();
    RequestError { class, message, status: None }
}

/// A summary from vLLM's own statistics (no per-request data).
fn summary(f: &Fields, v: &Value) -> Result<Summary, ImportError> {
    let completed = f.opt_num(v, "completed")?.unwrap_or(0.0) as u64;
    let failed = f.opt_num(v, "failed")?.unwrap_or(0.0) as u64;
    let duration = f.opt_num(v, "duration")?.unwrap_or(0.0);
    let stat = |m: &str| -> Result<goodput_metrics::Distribution, ImportError> {
        let g = |k: String| f.opt_num(v, &k);
        let n = if m == "itl" { 0 } else { completed };
        Ok(dist(
            n,
            g(format!("mean_{m}_ms"))?,
            g(format!("std_{m}_ms"))?,
            None,
            None,
            [
                g(format!("median_{m}_ms"))?.or(g(format!("p50_{m}_ms"))?),
                g(format!("p90_{m}_ms"))?,
                g(format!("p95_{m}_ms"))?,
                g(format!("p99_{m}_ms"))?,
                g(format!("p99.9_{m}_ms"))?,
            ],
        ))
    };
    let mut s = Summary {
        attempted: completed + failed,
        completed,
        failed,
        duration_s: duration,
        window: goodput_metrics::Window { start_ms: 0.0, end_ms: duration * 1000.0 },
        request_throughput: f.opt_num(v, "request_throughput")?.unwrap_or(0.0),
        output_throughput: f.opt_num(v, "output_throughput")?.unwrap_or(0.0),
        total_throughput: f.opt_num(v, "total_token_throughput")?.unwrap_or(0.0),
        input_tokens: f.opt_num(v, "total_input_tokens")?.unwrap_or(0.0) as u64,
        output_tokens: f.opt_num(v, "total_output_tokens")?.unwrap_or(0.0) as u64,
        ttft_ms: stat("ttft")?,
        tpot_ms: stat("tpot")?,
        chunk_itl_ms: stat("itl")?,
        e2e_ms: stat("e2el")?,
        ..Default::default()
    };
    if failed > 0 {
        s.failed_by_class.insert(ErrorClass::HttpStatus, failed);
    }
    if duration > 0.0 {
        s.input_throughput = s.input_tokens as f64 / duration;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use goodput_metrics::RequestMetrics;

    use super::*;
    use crate::import::fixture;

    #[test]
    fn small_legacy_file_maps_every_request() {
        let (p, t) = fixture("vllm_small.json");
        let runs = import(&p, &t).unwrap();
        assert_eq!(runs.len(), 1);
        let r = &runs[0];
        assert_eq!(r.requests.len(), 4);
        let s = &r.summary;
        assert_eq!((s.attempted, s.completed, s.failed), (4, 3, 1));
        // request 0: ttft 0.1 s, itls 0.02, 0.03 → events 100, 120, 150 ms
        assert_eq!(r.requests[0].event_ms, vec![100.0, 120.0, 150.0]);
        let m = RequestMetrics::of(&r.requests[0]);
        assert_eq!(m.ttft, Some(100.0));
        assert_eq!(m.e2e, Some(150.0));
        assert_eq!(m.tpot, Some(25.0));
        // the file's mean TTFT (ms) from the records
        assert!((s.ttft_ms.mean.unwrap() - 120.0).abs() < 1e-9, "{:?}", s.ttft_ms.mean);
        // no send times: nothing that needs them
        assert_eq!(s.schedule_lag_ms.n, 0);
        assert_eq!(s.ttft_sched_ms.n, 0);
        assert_eq!(s.duration_s, 2.0);
        assert!((s.request_throughput - 1.5).abs() < 1e-12);
        let crate::Target::Imported(src) = &r.target else { panic!("imported") };
        assert_eq!(src.clock, RecordClock::PerRequest);
        assert!(src.notes.iter().any(|n| n.starts_with("send times unknown")));
        assert_eq!(r.requests[3].error.as_ref().unwrap().class, ErrorClass::HttpStatus);
        assert!(matches!(r.plan.load.load, Load::Open { arrivals: Arrivals::AllAtOnce, .. }));
        assert!(src.notes.iter().any(|n| n.contains("request goodput was 1.0000")), "{:?}", src.notes);
    }

    #[test]
    fn an_slo_is_evaluated_over_the_records() {
        let (p, t) = fixture("vllm_small.json");
        let mut r = import(&p, &t).unwrap().remove(0);
        let slo = |text: &str| crate::plan::SloPlan {
            predicates: goodput_metrics::Slo::parse(text).unwrap(),
            smoothing: None,
        };
        super::super::apply_slo(&mut r, &slo("ttft<=130ms")).unwrap();
        let s = r.summary.slo.as_ref().unwrap();
        // TTFTs 100, 120, 140 ms and one failure: 2 of 4 good, over vLLM's 2 s
        assert_eq!((s.attempted, s.good), (4, 2));
        assert_eq!(s.attainment, 0.5);
        assert_eq!(s.request_goodput, 1.0);
        let e = super::super::apply_slo(&mut r, &slo("ttft_sched<=1s")).unwrap_err();
        assert!(e.contains("no send times"), "{e}");
    }

    #[test]
    fn newer_files_with_send_times_are_on_one_clock() {
        // vllm bench serve --save-detailed: perf_counter start times, latencies, queue times
        let t = r#"{"request_rate": 2.0, "burstiness": Infinity, "max_concurrency": 1, "duration": 1.5,
            "completed": 2, "failed": 0, "request_goodput": null,
            "input_lens": [5, 6], "output_lens": [2, 1], "ttfts": [0.05, 0.04], "itls": [[0.01], []],
            "latencies": [0.07, 0.04], "start_times": [1000.25, 1000.75], "queue_times": [0.0, 0.1],
            "errors": ["", ""]}"#;
        let r = import("n.json", t).unwrap().remove(0);
        let crate::Target::Imported(src) = &r.target else { panic!() };
        assert_eq!(src.clock, RecordClock::Run);
        let b = &r.requests[1];
        assert_eq!((b.sent_ms, b.scheduled_ms, b.cap_wait_ms), (Some(500.0), 400.0, 100.0));
        assert_eq!(b.event_ms, vec![540.0]);
        // E2E ends at the last chunk; `latencies` is when the stream ended
        assert_eq!(r.requests[0].event_ms, vec![50.0, 60.0]);
        assert_eq!(r.requests[0].end_ms, Some(70.0));
        assert_eq!(r.summary.client_queue_ms.n, 2);
        assert_eq!(r.summary.schedule_lag_ms.n, 0);
        // burstiness inf: gamma with an infinite shape, evenly spaced
        assert!(matches!(
            r.plan.load.load,
            Load::Open { arrivals: Arrivals::Constant { rate: 2.0 }, max_concurrency: Some(1) }
        ));
        // and the document reads back
        let doc = crate::ResultDoc::new("test", vec![r]);
        let text = serde_json::to_string(&doc).unwrap();
        crate::ResultDoc::parse("n.json", &text).unwrap();
    }

    #[test]
    fn appended_results_are_runs() {
        // --append-result: objects one after another
        let t = "{\"request_rate\": 1.0, \"ttfts\": [0.1], \"itls\": [[]], \"output_lens\": [1], \"errors\": [\"\"], \"label\": \"a\"}\n\
                 {\"request_rate\": 2.0, \"ttfts\": [0.2], \"itls\": [[]], \"output_lens\": [1], \"errors\": [\"\"]}\n";
        let runs = import("a.json", t).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].name.as_deref(), Some("a"));
        assert_eq!(runs[1].summary.ttft_ms.mean, Some(200.0));
    }

    #[test]
    fn bad_fields_are_named() {
        let e = import("v.json", r#"{"ttfts": [0.1, "x"]}"#).unwrap_err().to_string();
        assert!(e.contains("v.json") && e.contains("ttfts[1]"), "{e}");
        let e = import("v.json", r#"{"ttfts": [0.1], "itls": [[0.1], []]}"#).unwrap_err().to_string();
        assert!(e.contains("`itls`") && e.contains("has 2 entries"), "{e}");
        let e = import("v.json", "{\"ttfts\": [0.1]}\n{\"ttfts\": 3}\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("`ttfts`"), "{e}");
    }

    #[test]
    fn summary_only_files_keep_vllms_statistics() {
        let t = r#"{"request_rate": 4.0, "burstiness": 0.5, "duration": 10.0, "completed": 20, "failed": 1,
            "mean_ttft_ms": 50.0, "median_ttft_ms": 45.0, "p99_ttft_ms": NaN, "mean_itl_ms": 9.0,
            "std_ttft_ms": Infinity, "request_throughput": -Infinity,
            "latencies": [1.0, 2.0], "burstiness_note": Infinity}"#;
        let runs = import("s.json", t).unwrap();
        let r = &runs[0];
        assert!(r.requests.is_empty());
        assert_eq!(r.summary.ttft_ms.mean, Some(50.0));
        assert_eq!(r.summary.ttft_ms.p50, Some(45.0));
        assert_eq!(r.summary.ttft_ms.p99, None);
        assert_eq!(r.summary.ttft_ms.std, None);
        assert_eq!(r.summary.request_throughput, 0.0);
        assert_eq!(r.summary.chunk_itl_ms.mean, Some(9.0));
        assert_eq!(r.summary.itl_ms.mean, None);
        assert_eq!(r.summary.attempted, 21);
        assert!(matches!(
            r.plan.load.load,
            Load::Open { arrivals: Arrivals::Gamma { rate: 4.0, burstiness: 0.5 }, .. }
        ));
    }
}
