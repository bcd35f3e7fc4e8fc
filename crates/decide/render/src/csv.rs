//! CSV exports of a result document (RFC 4180: a header line, CRLF line ends, fields holding a
//! comma, a quote or a line break quoted, quotes doubled; an absent value is an empty field).
//!
//! - [`requests_csv`]: one row per request, every scalar field of the record (lists as counts)
//!   and the derived per-request latencies;
//! - [`summary_csv`]: one row per run, its summary.

use goodput_metrics::{ClientVerdict, Distribution, RequestMetrics, RequestRecord, TokenSource};
use goodput_results::{ResultDoc, Run};

/// One field, quoted when it must be.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn line(o: &mut String, fields: &[String]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&field(f));
    }
    o.push_str("\r\n");
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |x| x.to_string())
}

fn src(s: Option<TokenSource>) -> String {
    match s {
        Some(TokenSource::Server) => "server".into(),
        Some(TokenSource::Tokenizer) => "tokenizer".into(),
        None => String::new(),
    }
}

/// The request CSV's columns.
pub const REQUEST_COLUMNS: [&str; 51] = [
    "run",
    "run_name",
    "id",
    "session",
    "turn",
    "user",
    "scheduled_ms",
    "cap_wait_ms",
    "sent_ms",
    "headers_ms",
    "first_event_ms",
    "last_event_ms",
    "end_ms",
    "events",
    "event_tokens_source",
    "other_events",
    "reconnects",
    "attempts",
    "stale_resends",
    "counts_skipped",
    "input_tokens",
    "input_tokens_source",
    "output_tokens",
    "output_tokens_source",
    "input_tokens_client",
    "input_tokens_server",
    "output_tokens_client",
    "output_tokens_server",
    "requested_output_tokens",
    "finish_reason",
    "response_id",
    "success",
    "error_class",
    "error_status",
    "error_message",
    "ttft_ms",
    "ttft_sched_ms",
    "tpot_ms",
    "itl_max_ms",
    "e2e_ms",
    "e2e_sched_ms",
    "stream_close_ms",
    "written_ms",
    "first_sent_ms",
    "retry_wait_ms",
    "reasoning_events",
    "reasoning_tokens",
    "reasoning_tokens_source",
    "ttfo_ms",
    "tpot_reasoning_ms",
    "tpot_answer_ms",
];

fn request_row(run: usize, name: &str, r: &RequestRecord) -> Vec<String> {
    let m = RequestMetrics::of(r);
    vec![
        run.to_string(),
        name.to_string(),
        r.id.to_string(),
        opt(r.session),
        opt(r.turn),
        opt(r.user),
        r.scheduled_ms.to_string(),
        r.cap_wait_ms.to_string(),
        opt(r.sent_ms),
        opt(r.headers_ms),
        opt(r.first_event_ms()),
        opt(r.last_event_ms()),
        opt(r.end_ms),
        r.event_ms.len().to_string(),
        src(r.event_tokens_source),
        r.other_events.to_string(),
        r.reconnects.to_string(),
        r.attempts.len().to_string(),
        r.stale_resends.to_string(),
        r.counts_skipped.to_string(),
        opt(r.input_tokens),
        src(r.input_tokens_source),
        opt(r.output_tokens),
        src(r.output_tokens_source),
        opt(r.input_tokens_client),
        opt(r.input_tokens_server),
        opt(r.output_tokens_client),
        opt(r.output_tokens_server),
        opt(r.requested_output_tokens),
        r.finish_reason.clone().unwrap_or_default(),
        r.response_id.clone().unwrap_or_default(),
        r.is_success().to_string(),
        r.error.as_ref().map_or(String::new(), |e| e.class.as_str().to_string()),
        opt(r.error.as_ref().and_then(|e| e.status)),
        r.error.as_ref().map_or(String::new(), |e| e.message.clone()),
        opt(m.ttft),
        opt(m.ttft_sched),
        opt(m.tpot),
        opt(m.itl_max),
        opt(m.e2e),
        opt(m.e2e_sched),
        opt(m.stream_close),
        opt(r.written_ms),
        opt(r.first_sent_ms()),
        r.retry_wait_ms().to_string(),
        opt(r.reasoning_events),
        opt(r.reasoning_tokens),
        src(r.reasoning_tokens_source),
        opt(m.ttfo),
        opt(m.tpot_reasoning),
        opt(m.tpot_answer.filter(|_| r.reasoning_events.is_some())),
    ]
}

/// One row per request of every run (`run` is the run's index in the document).
pub fn requests_csv(doc: &ResultDoc) -> String {
    let n: usize = doc.runs.iter().map(|r| r.requests.len()).sum();
    let mut o = String::with_capacity(256 * (n + 1));
    line(&mut o, &REQUEST_COLUMNS.map(String::from));
    for (i, run) in doc.runs.iter().enumerate() {
        let name = run.name.as_deref().unwrap_or("");
        for r in &run.requests {
            line(&mut o, &request_row(i, name, r));
        }
    }
    o
}

const DISTS: [&str; 6] = ["ttft", "ttft_sched", "tpot", "itl", "e2e", "e2e_sched"];
const STATS: [&str; 9] = ["n", "mean", "min", "p50", "p90", "p95", "p99", "p99_9", "max"];

fn dist(d: &Distribution) -> [String; 9] {
    [d.n.to_string(), opt(d.mean), opt(d.min), opt(d.p50), opt(d.p90), opt(d.p95), opt(d.p99), opt(d.p99_9), opt(d.max)]
}

/// The summary CSV's columns.
pub fn summary_columns() -> Vec<String> {
    let mut c: Vec<String> = [
        "run",
        "run_name",
        "run_id",
        "started_at",
        "target",
        "model",
        "stop",
        "interrupted",
        "attempted",
        "completed",
        "failed",
        "excluded",
        "duration_s",
        "request_throughput",
        "input_throughput",
        "output_throughput",
        "total_throughput",
        "mean_concurrency",
        "input_tokens",
        "output_tokens",
        "offered_rate",
        "achieved_rate",
        "client_verdict",
    ]
    .map(String::from)
    .to_vec();
    for d in DISTS {
        for s in STATS {
            c.push(format!("{d}_ms_{s}"));
        }
    }
    c.extend(["slo", "attainment", "request_goodput", "token_goodput", "binding"].map(String::from));
    // reasoning models (empty without reasoning)
    for d in REASONING_DISTS {
        for s in STATS {
            c.push(format!("{d}_ms_{s}"));
        }
    }
    c.extend(["reasoning_tokens", "answer_tokens"].map(String::from));
    c
}

const REASONING_DISTS: [&str; 3] = ["ttfo", "tpot_reasoning", "tpot_answer"];

fn summary_row(i: usize, run: &Run) -> Vec<String> {
    let s = &run.summary;
    let stop = serde_json::to_value(run.stop).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    let mut row = vec![
        i.to_string(),
        run.name.clone().unwrap_or_default(),
        run.id.clone(),
        run.started_at.clone().unwrap_or_default(),
        run.target.label(),
        run.target.model().unwrap_or("").to_string(),
        stop,
        run.interrupted.to_string(),
        s.attempted.to_string(),
        s.completed.to_string(),
        s.failed.to_string(),
        s.excluded.to_string(),
        s.duration_s.to_string(),
        s.request_throughput.to_string(),
        s.input_throughput.to_string(),
        s.output_throughput.to_string(),
        s.total_throughput.to_string(),
        s.mean_concurrency.to_string(),
        s.input_tokens.to_string(),
        s.output_tokens.to_string(),
        opt(s.offered_rate),
        opt(s.achieved_rate),
        match s.verdict {
            ClientVerdict::Ok => "ok".into(),
            ClientVerdict::ClientBound => "client_bound".into(),
        },
    ];
    for d in [&s.ttft_ms, &s.ttft_sched_ms, &s.tpot_ms, &s.itl_ms, &s.e2e_ms, &s.e2e_sched_ms] {
        row.extend(dist(d));
    }
    match &s.slo {
        Some(g) => row.extend([
            g.predicates.join(","),
            g.attainment.to_string(),
            g.request_goodput.to_string(),
            g.token_goodput.to_string(),
            g.binding.clone().unwrap_or_default(),
        ]),
        None => row.extend(std::iter::repeat_n(String::new(), 5)),
    }
    match &s.reasoning {
        Some(r) => {
            for d in [&r.ttfo_ms, &r.tpot_reasoning_ms, &r.tpot_answer_ms] {
                row.extend(dist(d));
            }
            row.extend([r.reasoning_tokens.to_string(), r.answer_tokens.to_string()]);
        }
        None => row.extend(std::iter::repeat_n(String::new(), REASONING_DISTS.len() * STATS.len() + 2)),
    }
    row
}

/// One row per run: its summary (over its measurement window).
pub fn summary_csv(doc: &ResultDoc) -> String {
    let mut o = String::new();
    line(&mut o, &summary_columns());
    for (i, run) in doc.runs.iter().enumerate() {
        line(&mut o, &summary_row(i, run));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }
}
