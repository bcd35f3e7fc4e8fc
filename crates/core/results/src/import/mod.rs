//! Results of other tools, read into goodput runs (`goodput import`): vLLM's `bench serve
//! --save-result` JSON ([`vllm`]), GuideLLM's report JSON ([`guidellm`]) and AIPerf's
//! `profile_export` JSONL and aggregate JSON ([`aiperf`]).
//!
//! Each becomes one [`Run`] per benchmark, mapped to goodput's definitions (`docs/metrics.md`,
//! Imported results) as far as the file's data allow. Where per-request data exist, every request
//! becomes a [`RequestRecord`] and the summary is computed from them exactly as for a measured
//! run; otherwise the file's own summary statistics are carried over. A quantity the file does not
//! hold is left empty and named in the run's [`ImportSource::notes`]: it is never guessed.
//!
//! Python's `json` writes `NaN`, `Infinity` and `-Infinity` literals, which strict JSON (and
//! serde_json) refuse: [`lenient_json`] turns them into strings first, and [`num`] reads numbers
//! and those strings alike.
//!
//! Pure: text in, runs out; the command (`cli::import`) reads and writes the files.

pub mod aiperf;
pub mod guidellm;
pub mod vllm;

use goodput_metrics::{Distribution, Edge, RequestRecord, Summary, SummaryOptions, summarize};
use goodput_workload::{LengthDist, Load, Profile, SourceInfo, ThinkTime, Turns, WorkloadSpec};
use serde_json::Value;

use crate::plan::{LoadPlan, OutputPlan, RunPlan, SloPlan, WorkloadPlan};
use crate::{Run, Target};

pub use crate::source::{ImportFormat, ImportSource, RecordClock, detect, lenient_json};

/// Why a file could not be imported; every variant names the file, and the field (and line, for
/// JSONL) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path}{}: not valid JSON: {message}", at_line(*.line))]
    Json { path: String, line: Option<usize>, message: String },
    #[error("{path}{}: field `{field}`: {message}", at_line(*.line))]
    Field { path: String, line: Option<usize>, field: String, message: String },
    #[error("{path}: {message}; name the tool with --from vllm|guidellm|aiperf")]
    Unknown { path: String, message: String },
}

fn at_line(line: Option<usize>) -> String {
    line.map_or(String::new(), |l| format!(", line {l}"))
}

/// Reads `text` (the contents of `path`) as `from`, or as the format it looks like.
pub fn import(path: &str, text: &str, from: Option<ImportFormat>) -> Result<Vec<Run>, ImportError> {
    let format = match from {
        Some(f) => f,
        None => detect(text).ok_or_else(|| ImportError::Unknown {
            path: path.into(),
            message: "not a vLLM, GuideLLM or AIPerf result file that goodput recognizes".into(),
        })?,
    };
    let runs = match format {
        ImportFormat::Vllm => vllm::import(path, text)?,
        ImportFormat::Guidellm => guidellm::import(path, text)?,
        ImportFormat::Aiperf => aiperf::import(path, text)?,
    };
    if runs.is_empty() {
        return Err(ImportError::Unknown {
            path: path.into(),
            message: format!("no runs in this {} file", format.name()),
        });
    }
    Ok(runs)
}

/// Evaluates an SLO over an imported run's records (the tools' own SLOs are not in their files):
/// attainment and goodput per second of the run's duration. Refused for a run without records,
/// and for predicates on times from the schedule when the run's records have no send times (or,
/// for `itl_max`, when the file had no chunk times).
pub fn apply_slo(run: &mut Run, slo: &SloPlan) -> Result<(), String> {
    use goodput_metrics::slo::Metric;
    let Some((predicates, smoothing)) = slo.slo() else { return Ok(()) };
    let Target::Imported(src) = &run.target else { return Err("not an imported run".into()) };
    let what = run.name.as_deref().unwrap_or("the run");
    if run.requests.is_empty() {
        return Err(format!(
            "{what} of {} has no per-request data: an SLO cannot be evaluated on summary statistics",
            src.file
        ));
    }
    for p in &predicates.predicates {
        let sched = matches!(p.metric, Metric::TtftSched | Metric::E2eSched);
        if sched && src.clock == RecordClock::PerRequest {
            return Err(format!("`{p}`: {} has no send times, so no times from the schedule", src.file));
        }
        if p.metric == Metric::ItlMax && src.tool == ImportFormat::Guidellm {
            return Err(format!("`{p}`: GuideLLM keeps no chunk times, so no worst stall"));
        }
    }
    let opts = SummaryOptions { slo: Some((predicates.clone(), smoothing)), ..SummaryOptions::new() };
    let (_, measured) = goodput_metrics::summary::measurement_window(&run.requests, &opts);
    run.summary.slo = Some(goodput_metrics::slo::evaluate(
        &predicates,
        smoothing,
        &run.requests,
        &measured,
        run.summary.duration_s,
        opts.percentiles,
    ));
    run.plan.slo = slo.clone();
    Ok(())
}

/// A number, or one of the strings Python writes for non-finite ones (`"inf"`, `"Infinity"`,
/// `"-Infinity"`); `NaN` and anything else read as absent.
pub fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| !x.is_nan()),
        Value::String(s) => match s.trim() {
            "inf" | "Infinity" | "+inf" => Some(f64::INFINITY),
            "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// Every JSON value in a file of one or more (JSONL, or objects appended one after another),
/// each with the line it starts on.
fn parse_values(path: &str, text: &str) -> Result<Vec<(usize, Value)>, ImportError> {
    let clean = lenient_json(text);
    let mut out = Vec::new();
    let mut it = serde_json::Deserializer::from_str(&clean).into_iter::<Value>();
    loop {
        let start = it.byte_offset();
        match it.next() {
            None => break,
            Some(Ok(v)) => {
                let skipped = clean[start..].len() - clean[start..].trim_start().len();
                out.push((1 + clean[..start + skipped].matches('\n').count(), v));
            }
            Some(Err(e)) => {
                return Err(ImportError::Json { path: path.into(), line: Some(e.line()), message: e.to_string() });
            }
        }
    }
    Ok(out)
}

/// Field accessors that name the file, line and field in their errors.
struct Fields<'a> {
    path: &'a str,
    line: Option<usize>,
}

impl Fields<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> ImportError {
        ImportError::Field { path: self.path.into(), line: self.line, field: field.into(), message: message.into() }
    }

    /// An optional finite number (absent, `null`, `NaN` and infinities read as `None`: a result
    /// document holds no non-finite numbers); anything else is an error.
    fn opt_num(&self, o: &Value, field: &str) -> Result<Option<f64>, ImportError> {
        Ok(self.opt_num_or_inf(o, field)?.filter(|x| x.is_finite()))
    }

    /// The same, keeping infinities (a rate of `"inf"`, a burstiness of `Infinity`).
    fn opt_num_or_inf(&self, o: &Value, field: &str) -> Result<Option<f64>, ImportError> {
        match o.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s == "NaN" => Ok(None),
            Some(v) => num(v).map(Some).ok_or_else(|| self.err(field, format!("expected a number, found {v}"))),
        }
    }

    fn opt_str(&self, o: &Value, field: &str) -> Option<String> {
        o.get(field).and_then(Value::as_str).map(str::to_string)
    }

    /// An optional array of numbers (ms or s as the file has them).
    fn opt_nums(&self, o: &Value, field: &str) -> Result<Option<Vec<f64>>, ImportError> {
        match o.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    num(v).filter(|x| x.is_finite()).ok_or_else(|| {
                        self.err(&format!("{field}[{i}]"), format!("expected a finite number, found {v}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(self.err(field, format!("expected an array, found {}", kind(v)))),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What an importer knows of the run beyond its records.
struct RunInfo {
    name: Option<String>,
    source: ImportSource,
    profile: Profile,
    load: Load,
    requests: Option<u64>,
    /// Prompt lengths the run sent, when the file has them.
    input_lengths: Vec<u32>,
    /// Output lengths it received.
    output_lengths: Vec<u32>,
    started_at: Option<String>,
    /// The run's length as the tool measured it, seconds.
    duration_s: Option<f64>,
    /// False when scheduled times were derived from send times (schedule lag 0 by construction).
    schedule_known: bool,
}

/// The plan of an imported run: only the load (profile, rate or concurrency, request count), the
/// model and the lengths seen come from the file; the rest of a goodput plan (API, timeouts,
/// `ignore_eos`, seed, tokenizer) is not known and keeps neutral values that the target's
/// `imported` kind tells readers to disregard.
fn imported_plan(info: &RunInfo) -> RunPlan {
    RunPlan {
        target: None,
        engine: None,
        api: None,
        model: info.source.model.clone(),
        api_key_env: None,
        ca_cert: None,
        ignore_eos: false,
        extra_body: None,
        retries: None,
        max_event_bytes: None,
        reasoning_parser: None,
        scrape: None,
        load: LoadPlan {
            profile: info.profile,
            load: info.load.clone(),
            sweep_points: None,
            max_concurrency: None,
            requests: info.requests,
            duration: None,
            warmup: Edge::None,
            cooldown: Edge::None,
            max_errors: None,
            stop_over_saturated: false,
            grace: std::time::Duration::ZERO,
            export_schedule: None,
            think_time: ThinkTime::default(),
            pause_scale: None,
            seed: 0,
            shard: None,
            start_at: None,
        },
        workload: WorkloadPlan {
            spec: WorkloadSpec {
                source: SourceInfo {
                    kind: format!("imported:{}", info.source.tool.name()),
                    // the file is the target's: two imports of one workload compare as equal
                    path: None,
                    entries: None,
                    skipped: None,
                },
                input_tokens: LengthDist::Empirical {
                    path: "imported: prompt lengths sent".into(),
                    values: info.input_lengths.clone(),
                },
                output_tokens: LengthDist::Empirical {
                    path: "imported: output lengths received".into(),
                    values: info.output_lengths.clone(),
                },
                reasoning_tokens: None,
                prefix_groups: 0,
                prefix_tokens: 0,
                turns: Turns::One,
                agentic: None,
                think_time: ThinkTime::default(),
                cycle: false,
                seed: 0,
            },
            tokenizer: String::from("unknown (imported)"),
            distinct_prompts: None,
        },
        timeouts: None,
        slo: SloPlan::default(),
        output: OutputPlan::default(),
    }
}

/// A run from records: summarized as goodput summarizes its own; for a per-request clock,
/// everything that needs send times is emptied and the window is the tool's own duration.
fn run_from_records(mut info: RunInfo, mut records: Vec<RequestRecord>) -> Run {
    // another tool's error strings may hold a server's echo of a key: never kept
    for e in records.iter_mut().filter_map(|r| r.error.as_mut()) {
        goodput_metrics::redact::redact_in_place(&mut e.message, &[]);
    }
    let plan = imported_plan(&info);
    let opts = SummaryOptions { offered_rate: info.load.offered_rate(), ..SummaryOptions::new() };
    let mut summary = summarize(&records, &opts);
    if !info.schedule_known {
        summary.schedule_lag_ms = Distribution::default();
        redo_few_samples(&mut summary);
    }
    if info.source.clock == RecordClock::PerRequest {
        per_request_clock(&mut summary, &records, info.duration_s);
        info.source.notes.insert(
            0,
            "send times unknown: each record's times count from its own send; TTFT, E2E, TPOT and ITL are \
             exact, but schedule lag, client queue, TTFT/E2E from schedule and throughput or concurrency over \
             time are not available"
                .into(),
        );
    }
    Run {
        name: info.name.clone(),
        started_at: info.started_at.clone(),
        elapsed_s: info.duration_s,
        ..Run::from_parts(plan, Target::Imported(Box::new(info.source.clone())), summary, records)
    }
}

/// Rewrites a summary computed on per-request clocks: the window is `[0, duration]` (the tool's
/// own measure), throughputs use it, mean concurrency is the requests' total time in flight over
/// it, and the distributions that need send times are emptied.
fn per_request_clock(s: &mut Summary, records: &[RequestRecord], duration_s: Option<f64>) {
    for d in [&mut s.ttft_sched_ms, &mut s.e2e_sched_ms, &mut s.client_queue_ms, &mut s.schedule_lag_ms] {
        *d = Distribution::default();
    }
    redo_few_samples(s);
    s.achieved_rate = None;
    let Some(secs) = duration_s.filter(|d| *d > 0.0) else {
        s.request_throughput = 0.0;
        s.input_throughput = 0.0;
        s.output_throughput = 0.0;
        s.total_throughput = 0.0;
        s.mean_concurrency = 0.0;
        return;
    };
    s.window = goodput_metrics::Window { start_ms: 0.0, end_ms: secs * 1000.0 };
    s.duration_s = secs;
    let ok = records.iter().filter(|r| r.is_success());
    s.input_tokens = ok.clone().map(|r| r.input_tokens.unwrap_or(0)).sum();
    s.output_tokens = ok.clone().map(|r| r.output_tokens.unwrap_or(0)).sum();
    s.request_throughput = ok.count() as f64 / secs;
    s.input_throughput = s.input_tokens as f64 / secs;
    s.output_throughput = s.output_tokens as f64 / secs;
    s.total_throughput = (s.input_tokens + s.output_tokens) as f64 / secs;
    let in_flight_ms: f64 =
        records.iter().filter_map(|r| Some(r.end_ms.or(r.last_event_ms())? - r.sent_ms?)).filter(|x| *x > 0.0).sum();
    s.mean_concurrency = in_flight_ms / 1000.0 / secs;
}

/// Redoes the summary's `few_samples` warning after distributions were emptied.
fn redo_few_samples(s: &mut Summary) {
    use goodput_metrics::{Warning, WarningCode};
    let at = s.warnings.iter().position(|w| w.code == WarningCode::FewSamples);
    match (at, goodput_metrics::summary::few_samples(s)) {
        (Some(i), Some(message)) => s.warnings[i].message = message,
        (Some(i), None) => {
            s.warnings.remove(i);
        }
        (None, Some(message)) => s.warnings.push(Warning { code: WarningCode::FewSamples, message }),
        (None, None) => {}
    }
}

/// A run that only has the tool's summary statistics.
fn run_from_summary(info: RunInfo, summary: Summary) -> Run {
    let plan = imported_plan(&info);
    Run {
        name: info.name.clone(),
        started_at: info.started_at.clone(),
        elapsed_s: info.duration_s,
        ..Run::from_parts(plan, Target::Imported(Box::new(info.source)), summary, Vec::new())
    }
}

/// A distribution from a tool's summary statistics (ms): the ones it gives, the rest empty.
fn dist(
    n: u64,
    mean: Option<f64>,
    std: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    p: [Option<f64>; 5],
) -> Distribution {
    Distribution {
        n,
        mean,
        std,
        min,
        max,
        p50: p[0],
        p90: p[1],
        p95: p[2],
        p99: p[3],
        p99_9: p[4],
        ..Default::default()
    }
}

/// Milliseconds between two epoch times in seconds, rounded to the nanosecond.
fn ms_between(t0: f64, t: f64) -> f64 {
    round_ns((t - t0) * 1000.0)
}

/// Milliseconds rounded to the nanosecond (what the tools' clocks resolve; drops float noise).
fn round_ns(ms: f64) -> f64 {
    (ms * 1e6).round() / 1e6
}

/// A fixture file of the importer tests: its path and text.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> (String, String) {
    let p = format!("{}/../../../fixtures/import/{name}", env!("CARGO_MANIFEST_DIR"));
    let t = std::fs::read_to_string(&p).unwrap();
    (p, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals_become_strings_outside_strings_only() {
        let t = r#"{"a": NaN, "b": [Infinity, -Infinity], "c": "NaN Infinity \" NaN", "d": 1.5}"#;
        let v: Value = serde_json::from_str(&lenient_json(t)).unwrap();
        assert_eq!(num(&v["a"]), None);
        assert_eq!(num(&v["b"][0]), Some(f64::INFINITY));
        assert_eq!(num(&v["b"][1]), Some(f64::NEG_INFINITY));
        assert_eq!(v["c"], "NaN Infinity \" NaN");
        assert_eq!(num(&v["d"]), Some(1.5));
        assert_eq!(num(&Value::String("inf".into())), Some(f64::INFINITY));
        assert!(matches!(lenient_json("{\"a\": 1}"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn values_report_their_lines() {
        let t = "{\"a\": 1}\n{\"b\": 2}\n\n{\"c\": NaN}\n";
        let v = parse_values("x.jsonl", t).unwrap();
        assert_eq!(v.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![1, 2, 4]);
        let e = parse_values("x.jsonl", "{\"a\": 1}\n{\"b\": }\n").unwrap_err().to_string();
        assert!(e.starts_with("x.jsonl, line 2: not valid JSON"), "{e}");
    }

    #[test]
    fn unknown_files_are_named() {
        let e = import("r.json", "{\"x\": 1}", None).unwrap_err().to_string();
        assert!(e.contains("r.json") && e.contains("--from"), "{e}");
        assert_eq!(detect("{\"ttfts\": []}"), Some(ImportFormat::Vllm));
    }
}
