//! NVIDIA AIPerf exports: `profile_export.jsonl` (one `MetricRecordInfo` per line: `metadata`
//! with epoch-ns credit, send, first-byte and end times; `metrics` as `{tag: {value, unit}}` in
//! display units, ms for times; `error`) becomes records on the run's clock;
//! `profile_export_aiperf.json` (aggregate statistics per metric tag) becomes a summary only.

use goodput_metrics::{ErrorClass, RequestError, RequestRecord, Summary, TokenSource, Window, tokens::apportion};
use goodput_workload::{Arrivals, Load, Profile};
use serde_json::Value;

use super::{Fields, ImportError, ImportFormat, ImportSource, RecordClock, RunInfo, dist, parse_values, round_ns};
use crate::Run;

/// The run in an AIPerf export (per-record JSONL or aggregate JSON).
pub fn import(path: &str, text: &str) -> Result<Vec<Run>, ImportError> {
    let values = parse_values(path, text)?;
    match values.as_slice() {
        [(_, v)] if v.get("metrics").is_none() && v.get("metadata").is_none() => {
            Ok(vec![aggregate(&Fields { path, line: None }, v)?])
        }
        _ => Ok(vec![records(path, &values)?]),
    }
}

/// A metric's value in a record (`metrics.TAG.value`), checking its unit.
fn metric(f: &Fields, m: &Value, tag: &str, unit: &str) -> Result<Option<f64>, ImportError> {
    let Some(x) = m.get(tag) else { return Ok(None) };
    let field = format!("metrics.{tag}");
    if let Some(u) = x.get("unit").and_then(Value::as_str)
        && u != unit
    {
        return Err(f.err(&field, format!("unit `{u}`, expected `{unit}`")));
    }
    f.opt_num(x, "value").map_err(|_| f.err(&format!("{field}.value"), "expected a number"))
}

fn metric_list(f: &Fields, m: &Value, tag: &str) -> Result<Option<Vec<f64>>, ImportError> {
    let Some(x) = m.get(tag) else { return Ok(None) };
    if let Some(u) = x.get("unit").and_then(Value::as_str)
        && u != "ms"
    {
        return Err(f.err(&format!("metrics.{tag}"), format!("unit `{u}`, expected `ms`")));
    }
    f.opt_nums(x, "value").map_err(|_| f.err(&format!("metrics.{tag}.value"), "expected an array of numbers"))
}

fn ns(f: &Fields, md: &Value, field: &str) -> Result<Option<i128>, ImportError> {
    match md.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(|x| Some(x as i128))
            .ok_or_else(|| f.err(&format!("metadata.{field}"), format!("expected integer nanoseconds, found {v}"))),
    }
}

/// One record per profiling-phase line, on one clock from the earliest credit (schedule) time.
fn records(path: &str, values: &[(usize, Value)]) -> Result<Run, ImportError> {
    let (lines, warmup) = profiling_lines(path, values)?;
    let t0 = earliest_schedule_ns(&lines)?;
    let mut notes = record_notes(warmup);
    let multi_turn = lines.iter().any(|l| l.md.get("turn_index").and_then(Value::as_u64).unwrap_or(0) > 0);
    let mut out = Vec::with_capacity(lines.len());
    let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
    for (i, l) in lines.iter().enumerate() {
        let r = record(i, l, t0, multi_turn)?;
        // a failed request's lengths are not the run's
        if l.err.is_none() {
            inputs.extend(r.input_tokens.map(|x| x as u32));
            outputs.extend(r.output_tokens.map(|x| x as u32));
        }
        out.push(r);
    }
    if out.iter().any(|r| r.is_success() && r.event_ms.len() == 2 && r.output_tokens.unwrap_or(0) > 2) {
        notes.push(
            "some records lack `inter_chunk_latency`: their decode is one gap from the first to the last token \
             (TPOT exact, chunk ITL not available)"
                .into(),
        );
    }
    let end_ns = lines.iter().filter_map(|l| l.md.get("request_end_ns").and_then(Value::as_i64)).max();
    let info = RunInfo {
        name: None,
        source: ImportSource {
            tool: ImportFormat::Aiperf,
            tool_version: None,
            file: path.into(),
            model: None,
            url: None,
            clock: RecordClock::Run,
            notes,
        },
        profile: Profile::Replay,
        load: Load::Open { arrivals: Arrivals::Replay { time_scale: 1.0 }, max_concurrency: None },
        requests: Some(out.len() as u64),
        input_lengths: inputs,
        output_lengths: outputs,
        started_at: (!lines.is_empty()).then(|| crate::format_rfc3339_ns(t0)),
        duration_s: end_ns.map(|e| (e as i128 - t0) as f64 / 1e9),
        schedule_known: true,
    };
    Ok(super::run_from_records(info, out))
}

/// One profiling-phase line of a per-record export: its metadata, metrics and error, if any.
struct Line<'a> {
    f: Fields<'a>,
    md: &'a Value,
    m: &'a Value,
    err: Option<&'a Value>,
}

/// The profiling-phase lines of a per-record export, and how many warm-up lines were left out.
fn profiling_lines<'a>(path: &'a str, values: &'a [(usize, Value)]) -> Result<(Vec<Line<'a>>, usize), ImportError> {
    let mut lines = Vec::new();
    let mut warmup = 0usize;
    for (line, v) in values {
        let f = Fields { path, line: Some(*line) };
        let md = v.get("metadata").filter(|x| x.is_object()).ok_or_else(|| f.err("metadata", "missing"))?;
        let m = v.get("metrics").filter(|x| x.is_object()).ok_or_else(|| f.err("metrics", "missing"))?;
        if md.get("benchmark_phase").and_then(Value::as_str) == Some("warmup") {
            warmup += 1;
            continue;
        }
        lines.push(Line { f, md, m, err: v.get("error").filter(|e| !e.is_null()) });
    }
    Ok((lines, warmup))
}

/// The run's start: the earliest credit time (send time where a line has none), epoch ns; 0 without lines.
fn earliest_schedule_ns(lines: &[Line]) -> Result<i128, ImportError> {
    let mut t0: Option<i128> = None;
    for l in lines {
        let t = match ns(&l.f, l.md, "credit_issued_ns")? {
            Some(t) => t,
            None => {
                ns(&l.f, l.md, "request_start_ns")?.ok_or_else(|| l.f.err("metadata.request_start_ns", "missing"))?
            }
        };
        t0 = Some(t0.map_or(t, |x| x.min(t)));
    }
    Ok(t0.unwrap_or(0))
}

/// The notes every per-record import carries, and the count of warm-up records left out.
fn record_notes(warmup: usize) -> Vec<String> {
    let mut notes = vec![
        "the load profile is not in the per-record file: AIPerf's credit times are kept as the schedule \
         (shown as a replay); its aggregate profile_export_aiperf.json holds the phase settings"
            .to_string(),
        "AIPerf records one time per stream chunk: a chunk that carried several tokens has its tokens spread \
         evenly over it"
            .into(),
    ];
    notes.push(
        "scheduled time is AIPerf's credit time: schedule lag is its credit-to-send latency \
         (credit_to_start_latency)"
            .into(),
    );
    if warmup > 0 {
        notes.push(format!("{warmup} warm-up records left out"));
    }
    notes
}

/// Milliseconds from the run's start `t0` to `t` (both epoch ns), rounded to the nanosecond.
fn ms_since(t0: i128, t: i128) -> f64 {
    round_ns((t - t0) as f64 / 1e6)
}

/// Record `i` from its line: times on the run's clock, turn, token counts, and its error or token events.
fn record(i: usize, l: &Line, t0: i128, multi_turn: bool) -> Result<RequestRecord, ImportError> {
    let ms = |t: i128| ms_since(t0, t);
    let f = &l.f;
    let sched = ns(f, l.md, "credit_issued_ns")?;
    let sent = ns(f, l.md, "request_start_ns")?.ok_or_else(|| f.err("metadata.request_start_ns", "missing"))?;
    let end = ns(f, l.md, "request_end_ns")?;
    let mut r = RequestRecord {
        id: i as u64,
        scheduled_ms: ms(sched.unwrap_or(sent)),
        sent_ms: Some(ms(sent)),
        headers_ms: ns(f, l.md, "request_ack_ns")?.map(ms),
        end_ms: end.map(ms),
        ..Default::default()
    };
    if multi_turn {
        r.session = l.md.get("session_num").and_then(Value::as_u64);
        r.turn = l.md.get("turn_index").and_then(Value::as_u64).map(|t| t as u32);
    }
    let isl = metric(f, l.m, "input_sequence_length", "tokens")?.or(metric(f, l.m, "error_isl", "tokens")?);
    let usage_in = metric(f, l.m, "usage_prompt_tokens", "tokens")?;
    r.input_tokens_client = isl.map(|x| x as u64);
    r.input_tokens_server = usage_in.map(|x| x as u64);
    (r.input_tokens, r.input_tokens_source) = token_count(usage_in, isl);
    if let Some(e) = l.err {
        r.error = Some(request_error(e));
        return Ok(r);
    }
    if l.md.get("was_cancelled").and_then(Value::as_bool) == Some(true) {
        r.error =
            Some(RequestError { class: ErrorClass::Cancelled, message: "cancelled by AIPerf".into(), status: None });
    }
    let usage_out = metric(f, l.m, "usage_completion_tokens", "tokens")?;
    let osl = metric(f, l.m, "output_sequence_length", "tokens")?;
    r.output_tokens_server = usage_out.map(|x| x as u64);
    r.output_tokens_client = osl.map(|x| x as u64);
    (r.output_tokens, r.output_tokens_source) = token_count(usage_out, osl);
    add_token_events(f, l.m, ms(sent), &mut r)?;
    add_reasoning(f, l.m, ms(sent), &mut r)?;
    Ok(r)
}

/// A reasoning record: AIPerf's `reasoning_token_count` (its tokenizer's count of the reasoning
/// text) and `time_to_first_output_token` (the first non-reasoning chunk): the reasoning events
/// are the chunks before that time.
fn add_reasoning(f: &Fields, m: &Value, sent_ms: f64, r: &mut RequestRecord) -> Result<(), ImportError> {
    let tokens = metric(f, m, "reasoning_token_count", "tokens")?.filter(|&n| n > 0.0);
    let ttfo = metric(f, m, "time_to_first_output_token", "ms")?;
    if tokens.is_none() && ttfo.is_none() {
        return Ok(());
    }
    let at = ttfo.map(|t| round_ns(sent_ms + t));
    // the first chunk at or after the first output token (a ns of rounding allowed)
    let k = match at {
        Some(t) => r.event_ms.iter().position(|&e| e >= t - 1e-6).unwrap_or(r.event_ms.len()),
        None => r.event_ms.len(),
    };
    if tokens.is_none() && k == 0 {
        return Ok(()); // TTFO is TTFT: no reasoning
    }
    r.reasoning_events = Some(k as u32);
    r.reasoning_tokens_client = tokens.map(|n| n as u64);
    (r.reasoning_tokens, r.reasoning_tokens_source) = match tokens {
        Some(n) => (Some(n as u64), Some(TokenSource::Tokenizer)),
        None => (Some(k as u64), Some(TokenSource::Tokenizer)),
    };
    Ok(())
}

/// A token count and where it came from: the server's usage when given, else the client's count.
fn token_count(server: Option<f64>, client: Option<f64>) -> (Option<u64>, Option<TokenSource>) {
    match (server, client) {
        (Some(u), _) => (Some(u as u64), Some(TokenSource::Server)),
        (None, Some(c)) => (Some(c as u64), Some(TokenSource::Tokenizer)),
        _ => (None, None),
    }
}

/// A record's `error` object as a request error, classed by its HTTP code or exception type.
fn request_error(e: &Value) -> RequestError {
    let code = e.get("code").and_then(Value::as_u64).map(|c| c as u16);
    let kind = e.get("type").and_then(Value::as_str).unwrap_or("");
    let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
    let class = match code {
        Some(_) => ErrorClass::HttpStatus,
        None if kind.contains("Timeout") => ErrorClass::TimeoutTotal,
        None if kind.contains("Connect") => ErrorClass::Connect,
        None => ErrorClass::MalformedStream,
    };
    RequestError {
        class,
        message: format!("{kind}: {msg}").trim_matches([' ', ':']).chars().take(500).collect(),
        status: code,
    }
}

/// Sets a record's chunk times (on the run's clock, from its send time `sent_ms`) and tokens, given a TTFT.
fn add_token_events(f: &Fields, m: &Value, sent_ms: f64, r: &mut RequestRecord) -> Result<(), ImportError> {
    let Some(ttft) = metric(f, m, "time_to_first_token", "ms")? else { return Ok(()) };
    let mut t = ttft;
    let mut ev = vec![round_ns(sent_ms + t)];
    match metric_list(f, m, "inter_chunk_latency")? {
        Some(gaps) => {
            for g in gaps {
                t += g;
                ev.push(round_ns(sent_ms + t));
            }
        }
        None => {
            if let Some(lat) = metric(f, m, "request_latency", "ms")?
                && lat > ttft
            {
                ev.push(round_ns(sent_ms + lat));
            }
        }
    }
    r.event_tokens = match r.output_tokens {
        Some(n) if n == ev.len() as u64 => vec![1; ev.len()],
        Some(n) => apportion(n, &vec![1; ev.len()]),
        None => vec![1; ev.len()],
    };
    r.event_ms = ev;
    Ok(())
}

/// The aggregate file: AIPerf's statistics per metric, and its phase settings as the load.
fn aggregate(f: &Fields, v: &Value) -> Result<Run, ImportError> {
    let (s, concurrency_avg) = aggregate_summary(f, v)?;
    let phase = v
        .pointer("/input_config/phases")
        .and_then(Value::as_array)
        .and_then(|p| p.iter().find(|x| x.get("kind").and_then(Value::as_str) == Some("profiling")));
    let mut notes = vec![
        "aggregate file only: AIPerf's statistics are carried over (TTFT, TPOT from its inter_token_latency, \
         chunk ITL, E2E, throughputs); token-level ITL, TTFT from schedule, schedule lag and SLO attainment are \
         not available: import profile_export.jsonl for per-request records"
            .to_string(),
    ];
    notes.push(match concurrency_avg {
        Some(_) => "mean concurrency is AIPerf's effective_concurrency (time-weighted requests in flight)".into(),
        None => "mean concurrency not in the file (shown as 0)".into(),
    });
    let (profile, load) = phase_load(phase, &mut notes);
    notes.push("AIPerf's start_time is local time without a time zone: started_at is not set".into());
    let duration = s.duration_s;
    let info = RunInfo {
        name: None,
        source: ImportSource {
            tool: ImportFormat::Aiperf,
            tool_version: f.opt_str(v, "aiperf_version"),
            file: f.path.into(),
            model: v.pointer("/input_config/models/items/0/name").and_then(Value::as_str).map(str::to_string),
            url: v.pointer("/input_config/endpoint/urls/0").and_then(Value::as_str).map(str::to_string),
            clock: RecordClock::SummaryOnly,
            notes,
        },
        profile,
        load,
        requests: phase.and_then(|p| p.get("requests")).and_then(Value::as_u64),
        input_lengths: Vec::new(),
        output_lengths: Vec::new(),
        started_at: None,
        duration_s: Some(duration),
        schedule_known: true,
    };
    Ok(super::run_from_summary(info, s))
}

/// The summary from AIPerf's statistics, and its effective concurrency when the file has it.
fn aggregate_summary(f: &Fields, v: &Value) -> Result<(Summary, Option<f64>), ImportError> {
    let avg = |tag: &str| stat_avg(f, v, tag);
    let d = |tag: &str| stat_dist(f, v, tag);
    let completed = avg("request_count")?.unwrap_or(0.0) as u64;
    let failed = avg("error_request_count")?.unwrap_or(0.0) as u64;
    let duration = avg("benchmark_duration")?.unwrap_or(0.0);
    let mut s = Summary {
        attempted: completed + failed,
        completed,
        failed,
        duration_s: duration,
        window: Window { start_ms: 0.0, end_ms: duration * 1000.0 },
        request_throughput: avg("request_throughput")?.unwrap_or(0.0),
        input_throughput: avg("input_token_throughput")?.unwrap_or(0.0),
        output_throughput: avg("output_token_throughput")?.unwrap_or(0.0),
        total_throughput: avg("total_token_throughput")?.unwrap_or(0.0),
        input_tokens: avg("total_isl")?.unwrap_or(0.0) as u64,
        output_tokens: avg("total_osl")?.unwrap_or(0.0) as u64,
        ttft_ms: d("time_to_first_token")?,
        // AIPerf's per-request inter_token_latency is (latency − TTFT)/(OSL − 1): our TPOT
        tpot_ms: d("inter_token_latency")?,
        chunk_itl_ms: d("inter_chunk_latency")?,
        e2e_ms: d("request_latency")?,
        ..Default::default()
    };
    // a reasoning run (AIPerf reports TTFO for every streamed run: it is TTFT where nothing reasoned)
    let ttfo = d("time_to_first_output_token")?;
    let reasoning = avg("total_reasoning_tokens")?;
    if reasoning.is_some_and(|n| n > 0.0) {
        let reasoning_tokens = reasoning.unwrap_or(0.0) as u64;
        s.reasoning = Some(goodput_metrics::summary::ReasoningSummary {
            requests: ttfo.n,
            reasoning_tokens,
            answer_tokens: s.output_tokens.saturating_sub(reasoning_tokens),
            ttfo_ms: ttfo,
            reasoning_tokens_per_request: d("reasoning_token_count")?,
            ..Default::default()
        });
    }
    let concurrency_avg = avg("effective_concurrency")?;
    s.mean_concurrency = concurrency_avg.unwrap_or(0.0);
    if let Some(errors) = v.get("error_summary").and_then(Value::as_array) {
        for e in errors {
            let n = e.get("count").and_then(Value::as_u64).unwrap_or(0);
            let class = if e.pointer("/error_details/code").and_then(Value::as_u64).is_some() {
                ErrorClass::HttpStatus
            } else {
                ErrorClass::MalformedStream
            };
            *s.failed_by_class.entry(class).or_default() += n;
        }
    }
    Ok((s, concurrency_avg))
}

/// A metric's statistics object (`TAG`) in the aggregate file, if it has one.
fn stat<'a>(f: &Fields, v: &'a Value, tag: &str) -> Result<Option<&'a Value>, ImportError> {
    match v.get(tag) {
        None | Some(Value::Null) => Ok(None),
        Some(x) if x.is_object() => Ok(Some(x)),
        Some(x) => Err(f.err(tag, format!("expected an object, found {}", super::kind(x)))),
    }
}

/// A metric's mean (`TAG.avg`) in the aggregate file.
fn stat_avg(f: &Fields, v: &Value, tag: &str) -> Result<Option<f64>, ImportError> {
    match stat(f, v, tag)? {
        Some(x) => f.opt_num(x, "avg").map_err(|_| f.err(&format!("{tag}.avg"), "expected a number")),
        None => Ok(None),
    }
}

/// A metric's distribution (count, mean, spread and percentiles, in ms) in the aggregate file.
fn stat_dist(f: &Fields, v: &Value, tag: &str) -> Result<goodput_metrics::Distribution, ImportError> {
    let Some(x) = stat(f, v, tag)? else { return Ok(Default::default()) };
    let g = |k: &str| f.opt_num(x, k).map_err(|_| f.err(&format!("{tag}.{k}"), "expected a number"));
    if let Some(u) = x.get("unit").and_then(Value::as_str)
        && u != "ms"
    {
        return Err(f.err(&format!("{tag}.unit"), format!("`{u}`, expected `ms`")));
    }
    Ok(dist(
        g("count")?.unwrap_or(0.0) as u64,
        g("avg")?,
        g("std")?,
        g("min")?,
        g("max")?,
        [g("p50")?, g("p90")?, g("p95")?, g("p99")?, None],
    ))
}

/// The profiling phase's load (its request rate, else its concurrency, else all at once), noting what was assumed.
fn phase_load(phase: Option<&Value>, notes: &mut Vec<String>) -> (Profile, Load) {
    let concurrency = phase.and_then(|p| p.get("concurrency")).and_then(Value::as_u64).map(|c| c as usize);
    let rate = phase.and_then(|p| p.get("rate")).and_then(num_opt);
    let (profile, load) = match (rate, concurrency) {
        (Some(r), c) => (Profile::Poisson, Load::Open { arrivals: Arrivals::Poisson { rate: r }, max_concurrency: c }),
        (None, Some(c)) => (Profile::Concurrent, Load::closed(c)),
        (None, None) => {
            notes.push("the phase's load settings are not in the file: the load is shown as all at once".into());
            (Profile::Throughput, Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: None })
        }
    };
    if rate.is_some() {
        notes.push("AIPerf's request-rate phases are shown as Poisson arrivals at that rate".into());
    }
    (profile, load)
}

fn num_opt(v: &Value) -> Option<f64> {
    super::num(v)
}

#[cfg(test)]
mod tests {
    use goodput_metrics::RequestMetrics;

    use super::*;
    use crate::import::fixture;

    #[test]
    fn per_record_export() {
        let (p, t) = fixture("aiperf_profile_export.jsonl");
        let runs = import(&p, &t).unwrap();
        let r = &runs[0];
        assert_eq!(r.requests.len(), 3);
        let s = &r.summary;
        assert_eq!((s.attempted, s.completed, s.failed), (3, 2, 1));
        let e = r.requests[2].error.as_ref().unwrap();
        assert_eq!((e.class, e.status), (ErrorClass::HttpStatus, Some(503)));
        // record 0: TTFT 41.956822 ms, E2E = request_latency 137.05189 ms (= TTFT + Σ ICL)
        let m = RequestMetrics::of(&r.requests[0]);
        assert!((m.ttft.unwrap() - 41.956822).abs() < 1e-5, "{m:?}");
        assert!((m.e2e.unwrap() - 137.05189).abs() < 1e-5, "{m:?}");
        assert_eq!(r.requests[0].event_ms.len(), 8);
        assert_eq!(r.requests[0].output_tokens, Some(8));
        assert_eq!(r.requests[0].input_tokens, Some(29));
        assert_eq!(r.requests[0].input_tokens_client, Some(32));
        // the aggregate file's mean TTFT over the two successes is 37.602986 ms
        assert!((s.ttft_ms.mean.unwrap() - 37.602986).abs() < 1e-5, "{:?}", s.ttft_ms.mean);
        // and its mean request latency 130.7635235 ms
        assert!((s.e2e_ms.mean.unwrap() - 130.7635235).abs() < 1e-5);
        // scheduled (credit) before sent: client queue known
        assert!(s.client_queue_ms.n == 3 && s.client_queue_ms.min.unwrap() > 0.0);
        assert!(r.started_at.as_deref().unwrap().starts_with("2026-12-03T10:09:49"));
    }

    #[test]
    fn reasoning_records_map_their_ttfo_and_tokens() {
        let (p, t) = fixture("aiperf_profile_export.jsonl");
        // record 0 as a reasoning record: its first answer chunk is its fourth (TTFT 41.956822
        // + 14.499201 + 14.619517 + 11.486738 ms), 3 of its 8 tokens reasoning
        let first = t.lines().next().unwrap();
        let mut v: serde_json::Value = serde_json::from_str(first).unwrap();
        let ttfo = 41.956822 + 14.499201 + 14.619517 + 11.486738;
        v["metrics"]["time_to_first_output_token"] = serde_json::json!({"value": ttfo, "unit": "ms"});
        v["metrics"]["reasoning_token_count"] = serde_json::json!({"value": 3, "unit": "tokens"});
        let runs = import(&p, &v.to_string()).unwrap();
        let r = &runs[0].requests[0];
        assert_eq!((r.reasoning_events, r.reasoning_tokens), (Some(3), Some(3)));
        let m = RequestMetrics::of(r);
        assert!((m.ttfo.unwrap() - ttfo).abs() < 1e-5, "{m:?}");
        let s = runs[0].summary.reasoning.as_ref().expect("a reasoning summary");
        assert_eq!((s.requests, s.reasoning_tokens, s.answer_tokens), (1, 3, 5));
        // the fixture's own records: TTFO equal to TTFT, no reasoning
        let runs = import(&p, &t).unwrap();
        assert!(runs[0].requests.iter().all(|r| r.reasoning_events.is_none()));
        assert!(runs[0].summary.reasoning.is_none());
    }

    #[test]
    fn aggregate_export() {
        let (p, t) = fixture("aiperf_profile_export_aiperf.json");
        let runs = import(&p, &t).unwrap();
        let r = &runs[0];
        assert!(r.requests.is_empty());
        let s = &r.summary;
        assert_eq!((s.completed, s.failed), (2, 1));
        assert_eq!(s.ttft_ms.mean, Some(37.602986));
        assert_eq!(s.e2e_ms.mean, Some(130.7635235));
        assert_eq!(s.failed_by_class.get(&ErrorClass::HttpStatus), Some(&1));
        assert!((s.mean_concurrency - 0.8593954393382524).abs() < 1e-12);
        assert_eq!(r.plan.load.load, Load::closed(1));
        let crate::Target::Imported(src) = &r.target else { panic!() };
        assert_eq!(src.tool_version.as_deref(), Some("0.13.0"));
        assert_eq!(src.url.as_deref(), Some("http://127.0.0.1:18777"));
    }

    #[test]
    fn bad_lines_are_named() {
        let t = "{\"metadata\": {\"request_start_ns\": 1}, \"metrics\": {}}\n{\"metadata\": {\"request_start_ns\": \"x\"}, \"metrics\": {}}\n";
        let e = import("a.jsonl", t).unwrap_err().to_string();
        assert!(e.contains("a.jsonl, line 2") && e.contains("metadata.request_start_ns"), "{e}");
    }
}
