//! GuideLLM report JSON (`guidellm benchmark --output-path x.json`): one run per entry of
//! `benchmarks`, one record per listed request (`requests.successful`, `.errored`,
//! `.incomplete`) from its epoch-second timings (`info.timings` from v0.4 on; the flat
//! `start_time`/`first_token_time`/`last_token_time` fields of v0.2–v0.3).
//!
//! GuideLLM keeps the first and last token times and the number of token iterations, not each
//! chunk's time: a record has those two events, so TTFT, E2E, TPOT and the token-level mean ITL
//! are exact, and chunk gaps and the worst stall are not available.

use goodput_metrics::{ErrorClass, RequestError, RequestRecord, TokenSource};
use goodput_workload::{Arrivals, Load, Profile};
use serde_json::Value;

use super::{Fields, ImportError, ImportFormat, ImportSource, RecordClock, RunInfo, ms_between, parse_values};
use crate::Run;

/// Every benchmark in a GuideLLM report.
pub fn import(path: &str, text: &str) -> Result<Vec<Run>, ImportError> {
    let values = parse_values(path, text)?;
    let f = Fields { path, line: None };
    let [(_, report)] = values.as_slice() else {
        return Err(f.err("(top level)", "expected one JSON object"));
    };
    let benchmarks = report
        .get("benchmarks")
        .and_then(Value::as_array)
        .ok_or_else(|| f.err("benchmarks", "missing or not an array"))?;
    let version = report.pointer("/metadata/guidellm_version").and_then(Value::as_str).map(str::to_string);
    let backend = report.pointer("/config/spec/backend").or(report.pointer("/args/backend"));
    benchmarks.iter().enumerate().map(|(i, b)| benchmark(&f, i, b, version.clone(), backend)).collect()
}

/// One request's times (epoch seconds) and counts, from either layout.
struct Req {
    targeted: Option<f64>,
    start: Option<f64>,
    first: Option<f64>,
    last: Option<f64>,
    end: Option<f64>,
    prompt: Option<u64>,
    output: Option<u64>,
    error: Option<String>,
}

fn req(f: &Fields, r: &Value, field: &str) -> Result<Req, ImportError> {
    let n = |o: &Value, k: &str, name: &str| {
        f.opt_num(o, k).map_err(|_| f.err(&format!("{field}.{name}"), "expected a number of epoch seconds"))
    };
    let count = |k: &str| r.get(k).and_then(Value::as_f64).map(|x| x as u64);
    let error = r
        .pointer("/info/error")
        .or(r.get("error"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    match r.pointer("/info/timings") {
        Some(t) => Ok(Req {
            targeted: n(t, "targeted_start", "info.timings.targeted_start")?,
            start: n(t, "request_start", "info.timings.request_start")?.or(n(
                t,
                "resolve_start",
                "info.timings.resolve_start",
            )?),
            first: n(t, "first_token_iteration", "info.timings.first_token_iteration")?,
            last: n(t, "last_token_iteration", "info.timings.last_token_iteration")?,
            end: n(t, "request_end", "info.timings.request_end")?.or(n(t, "resolve_end", "info.timings.resolve_end")?),
            prompt: count("prompt_tokens"),
            output: count("output_tokens"),
            error,
        }),
        None => Ok(Req {
            targeted: r
                .pointer("/scheduler_info/targeted_start_time")
                .map(|x| {
                    super::num(x).ok_or_else(|| {
                        f.err(&format!("{field}.scheduler_info.targeted_start_time"), "expected a number")
                    })
                })
                .transpose()?,
            start: n(r, "start_time", "start_time")?,
            first: n(r, "first_token_time", "first_token_time")?,
            last: n(r, "last_token_time", "last_token_time")?,
            end: n(r, "end_time", "end_time")?,
            prompt: count("prompt_tokens"),
            output: count("output_tokens"),
            error,
        }),
    }
}

/// Benchmark `i` of a report as a run: its listed requests as records, its strategy as the load.
fn benchmark(
    f: &Fields,
    i: usize,
    b: &Value,
    version: Option<String>,
    backend: Option<&Value>,
) -> Result<Run, ImportError> {
    let reqs = listed_requests(f, i, b)?;
    let t0 = reqs.iter().filter_map(|(r, _)| r.targeted.or(r.start)).reduce(f64::min);
    let cfg = b.get("config").or(b.get("args"));
    let mut notes = benchmark_notes(cfg);
    let (records, inputs, outputs) = request_records(&reqs, t0);
    notes.push(
        "token counts are GuideLLM's (the server's usage when given, else GuideLLM's own count; the file does \
         not say which)"
            .into(),
    );
    let (profile, load, name) = strategy_load(cfg, b, &mut notes);
    let backend = cfg.and_then(|c| c.get("backend")).filter(|x| x.is_object()).or(backend);
    let s = |k: &str| backend.and_then(|x| x.get(k)).and_then(Value::as_str).map(str::to_string);
    let info = RunInfo {
        name: Some(format!("benchmark {i}: {name}")),
        source: ImportSource {
            tool: ImportFormat::Guidellm,
            tool_version: version,
            file: f.path.into(),
            model: s("model"),
            url: s("target"),
            clock: RecordClock::Run,
            notes,
        },
        profile,
        load,
        requests: Some(records.len() as u64),
        input_lengths: inputs,
        output_lengths: outputs,
        started_at: t0.map(|t| crate::format_rfc3339_ns((t * 1e9).round() as i128)),
        duration_s: f.opt_num(b, "duration").ok().flatten(),
        schedule_known: true,
    };
    let mut run = super::run_from_records(info, records);
    // the one gap per record is not a chunk gap
    run.summary.chunk_itl_ms = Default::default();
    run.summary.itl_max_ms = Default::default();
    super::redo_few_samples(&mut run.summary);
    Ok(run)
}

/// Benchmark `i`'s requests of every status, each with the error class its status implies, in send order.
fn listed_requests(f: &Fields, i: usize, b: &Value) -> Result<Vec<(Req, Option<ErrorClass>)>, ImportError> {
    let field = |k: &str| format!("benchmarks[{i}].{k}");
    let requests = b.get("requests").ok_or_else(|| f.err(&field("requests"), "missing"))?;
    let mut reqs: Vec<(Req, Option<ErrorClass>)> = Vec::new();
    for (status, class) in
        [("successful", None), ("errored", Some(ErrorClass::HttpStatus)), ("incomplete", Some(ErrorClass::Cancelled))]
    {
        let list = match requests.get(status) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(a)) => a,
            Some(_) => return Err(f.err(&field(&format!("requests.{status}")), "expected an array")),
        };
        for (j, r) in list.iter().enumerate() {
            reqs.push((req(f, r, &field(&format!("requests.{status}[{j}]")))?, class));
        }
    }
    let key = |r: &Req| r.start.or(r.targeted).unwrap_or(f64::INFINITY);
    reqs.sort_by(|a, b| key(&a.0).total_cmp(&key(&b.0)));
    Ok(reqs)
}

/// The notes every GuideLLM benchmark carries, and the sample size when the requests are a sample.
fn benchmark_notes(cfg: Option<&Value>) -> Vec<String> {
    let mut notes = vec![
        "GuideLLM keeps only the first and last token times of each request: TTFT, E2E, TPOT and the mean \
         token-level ITL are exact; chunk ITL and the worst stall per request are not available"
            .to_string(),
        "GuideLLM's time_per_output_token_ms includes TTFT (our normalized latency, E2E/N); its \
         inter_token_latency_ms is our TPOT; its request_latency runs to the request's end (our stream close), \
         while our E2E ends at the last token"
            .into(),
        "every listed request is imported: GuideLLM's own statistics count only those inside its measurement \
         window (warm-up and cool-down left out)"
            .into(),
    ];
    if let Some(n) = cfg.and_then(|c| c.get("sample_size")).and_then(Value::as_u64) {
        notes.push(format!(
            "the requests are GuideLLM's reservoir sample of at most {n} per status: counts and throughputs \
             cover the sample, not the run (GuideLLM's metrics.request_totals has the true counts)"
        ));
    }
    notes
}

/// The requests as records on the run's clock (from `t0`), with the prompt and output lengths of the run.
fn request_records(reqs: &[(Req, Option<ErrorClass>)], t0: Option<f64>) -> (Vec<RequestRecord>, Vec<u32>, Vec<u32>) {
    let mut records = Vec::with_capacity(reqs.len());
    let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
    let ms = |t: f64| ms_between(t0.unwrap_or(t), t);
    for (id, (r, class)) in reqs.iter().enumerate() {
        let sent = r.start.map(ms);
        let mut rec = RequestRecord {
            id: id as u64,
            scheduled_ms: r.targeted.or(r.start).map(ms).unwrap_or(0.0),
            sent_ms: sent,
            end_ms: r.end.map(ms),
            input_tokens: r.prompt,
            input_tokens_source: r.prompt.map(|_| TokenSource::Server),
            ..Default::default()
        };
        inputs.extend(r.prompt.map(|x| x as u32));
        if let Some(class) = class {
            let message = r.error.clone().unwrap_or_else(|| {
                if *class == ErrorClass::Cancelled { "cancelled by GuideLLM".into() } else { "errored".into() }
            });
            rec.error = Some(classify(*class, message));
        }
        if rec.error.as_ref().is_some_and(|e| e.class != ErrorClass::Cancelled) {
            records.push(rec);
            continue;
        }
        if let Some(first) = r.first {
            let n = r.output.unwrap_or(1);
            let mut ev = vec![ms(first)];
            let mut toks = vec![n.min(1) as u32];
            match r.last {
                Some(last) if last > first && n >= 2 => {
                    ev.push(ms(last));
                    toks.push((n - 1) as u32);
                }
                _ => toks[0] = n as u32,
            }
            rec.event_ms = ev;
            rec.event_tokens = toks;
        }
        rec.output_tokens = r.output;
        rec.output_tokens_source = r.output.map(|_| TokenSource::Server);
        outputs.extend(r.output.map(|x| x as u32));
        records.push(rec);
    }
    (records, inputs, outputs)
}

/// The benchmark's strategy as a profile, a load and a name (a replay, noted, for a strategy goodput lacks).
fn strategy_load(cfg: Option<&Value>, b: &Value, notes: &mut Vec<String>) -> (Profile, Load, String) {
    let strategy = cfg.and_then(|c| c.get("strategy")).or(b.get("strategy"));
    let kind = strategy.and_then(|s| s.get("type_")).and_then(Value::as_str).unwrap_or("");
    let rate = strategy.and_then(|s| s.get("rate")).and_then(super::num);
    let streams = strategy.and_then(|s| s.get("streams")).and_then(Value::as_u64).map(|s| s as usize);
    let cap = strategy.and_then(|s| s.get("max_concurrency")).and_then(Value::as_u64).map(|s| s as usize);
    match (kind, rate, streams) {
        ("synchronous", _, _) => (Profile::Synchronous, Load::closed(1), "synchronous".to_string()),
        ("concurrent", _, Some(s)) => (Profile::Concurrent, Load::closed(s), format!("concurrent {s}")),
        ("constant", Some(r), _) => (
            Profile::Constant,
            Load::Open { arrivals: Arrivals::Constant { rate: r }, max_concurrency: cap },
            format!("constant {r} req/s"),
        ),
        ("poisson", Some(r), _) => (
            Profile::Poisson,
            Load::Open { arrivals: Arrivals::Poisson { rate: r }, max_concurrency: cap },
            format!("poisson {r} req/s"),
        ),
        ("throughput", _, _) => (
            Profile::Throughput,
            Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: cap },
            "throughput".into(),
        ),
        (other, _, _) => {
            notes.push(format!(
                "GuideLLM strategy `{other}` has no goodput profile: its scheduled (targeted) times are kept, \
                 shown as a replay"
            ));
            (
                Profile::Replay,
                Load::Open { arrivals: Arrivals::Replay { time_scale: 1.0 }, max_concurrency: None },
                other.to_string(),
            )
        }
    }
}

/// GuideLLM keeps the exception's text: `HTTPStatusError: Server error '500 …'` and the like.
fn classify(class: ErrorClass, message: String) -> RequestError {
    if class == ErrorClass::Cancelled {
        return RequestError { class, message, status: None };
    }
    let status = message
        .split('\'')
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..600).contains(s));
    let class = if status.is_some() || message.contains("HTTPStatusError") {
        ErrorClass::HttpStatus
    } else if message.contains("Timeout") {
        ErrorClass::TimeoutTotal
    } else if message.contains("Connect") {
        ErrorClass::Connect
    } else {
        ErrorClass::MalformedStream
    };
    RequestError { class, message: message.chars().take(500).collect(), status }
}

#[cfg(test)]
mod tests {
    use goodput_metrics::RequestMetrics;

    use super::*;

    fn fixture() -> (String, String) {
        let p = format!("{}/../../../fixtures/import/guidellm_small.json", env!("CARGO_MANIFEST_DIR"));
        let t = std::fs::read_to_string(&p).unwrap();
        (p, t)
    }

    #[test]
    fn flat_requests_of_older_versions() {
        // v0.2–v0.3: flat epoch-second fields, the scheduler's targeted start apart
        let t = r#"{"benchmarks": [{"type_": "generative_benchmark", "args": {"strategy": {"type_": "poisson", "rate": 2.0}},
            "requests": {"successful": [{"request_id": "a", "prompt_tokens": 10, "output_tokens": 5,
                "start_time": 100.0, "first_token_time": 100.05, "last_token_time": 100.09, "end_time": 100.1,
                "scheduler_info": {"targeted_start_time": 99.999}}],
              "errored": [{"request_id": "b", "prompt_tokens": 10, "output_tokens": 0, "start_time": 100.2,
                "end_time": 100.21, "error": "ConnectError: refused"}], "incomplete": []}}], "args": {}}"#;
        let r = import("g.json", t).unwrap().remove(0);
        assert_eq!(r.plan.load.load, Load::Open { arrivals: Arrivals::Poisson { rate: 2.0 }, max_concurrency: None });
        let m = RequestMetrics::of(&r.requests[0]);
        assert!((m.ttft.unwrap() - 50.0).abs() < 1e-6 && (m.tpot.unwrap() - 10.0).abs() < 1e-6, "{m:?}");
        assert!((m.client_queue.unwrap() - 1.0).abs() < 1e-6);
        assert_eq!(r.requests[1].error.as_ref().unwrap().class, ErrorClass::Connect);
        assert_eq!((r.summary.completed, r.summary.failed), (1, 1));
    }

    #[test]
    fn report_benchmarks_become_runs() {
        let (p, t) = fixture();
        let runs = import(&p, &t).unwrap();
        assert_eq!(runs.len(), 2);
        let (a, b) = (&runs[0], &runs[1]);
        assert_eq!(a.plan.load.load, Load::closed(1));
        assert_eq!(b.plan.load.load, Load::closed(2));
        assert_eq!((a.summary.attempted, a.summary.completed, a.summary.failed), (3, 3, 0));
        // errored counts as failed, incomplete (cancelled) is excluded
        assert_eq!((b.summary.attempted, b.summary.completed, b.summary.failed, b.summary.cancelled), (2, 1, 1, 1));
        let e = b.requests.iter().find_map(|r| r.error.as_ref().filter(|e| e.class == ErrorClass::HttpStatus)).unwrap();
        assert_eq!(e.status, Some(500));
        // GuideLLM's own means: TTFT 40.4999 ms, ITL (our TPOT) 11.9999 ms, latency 0.2215 s
        let s = &a.summary;
        assert!((s.ttft_ms.mean.unwrap() - 40.49992561340332).abs() < 1e-3, "{:?}", s.ttft_ms.mean);
        assert!((s.tpot_ms.mean.unwrap() - 11.999999152289496).abs() < 1e-3, "{:?}", s.tpot_ms.mean);
        // GuideLLM's request_latency runs to the request's end: our stream close (E2E ends at the last token)
        assert!((s.stream_close_ms.mean.unwrap() - 221.4998404184977).abs() < 1e-3, "{:?}", s.stream_close_ms.mean);
        assert!((s.e2e_ms.mean.unwrap() - 220.4999123).abs() < 1e-3, "{:?}", s.e2e_ms.mean);
        assert!((s.itl_ms.mean.unwrap() - s.tpot_ms.mean.unwrap()).abs() < 1e-9);
        assert_eq!(s.chunk_itl_ms.n, 0);
        // per request: GuideLLM's time_to_first_token_ms of the first request of benchmark 1
        let m = RequestMetrics::of(&b.requests[0]);
        assert!((m.ttft.unwrap() - 56.099891662597656).abs() < 1e-3, "{m:?}");
        assert_eq!(b.requests[0].output_tokens, Some(16));
        let crate::Target::Imported(src) = &a.target else { panic!() };
        assert_eq!(src.tool_version.as_deref(), Some("0.8.1"));
        assert_eq!(src.model.as_deref(), Some("meta-llama/Llama-3.1-8B-Instruct"));
        assert!(a.started_at.is_some());
    }
}
