//! Run-level summary: counts, throughputs and latency distributions over the measurement window.
//!
//! The window defaults to first send → last completion. Warm-up and cool-down (in seconds or
//! requests) narrow it: requests that start in warm-up or end in cool-down stay in the records but
//! are left out of the latency distributions, while token throughput credits every token whose
//! content event falls inside the window, so requests straddling an edge count correctly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{ErrorClass, RequestRecord};
use crate::request::{RequestMetrics, chunk_gaps, itl_samples, itl_samples_between};
use crate::selfcheck::{AfterDone, Bookkeeping, RUNTIME_LAG_LIMIT_MS, RuntimeLag};
use crate::slo::{Slo, SloSummary, Smoothing};
use crate::stats::{Distribution, PercentileMethod, Samples};

/// A warm-up or cool-down boundary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Edge {
    #[default]
    None,
    Seconds(f64),
    Requests(u64),
}

/// How to summarize.
#[derive(Clone, Debug, Default)]
pub struct SummaryOptions {
    pub percentiles: PercentileMethod,
    pub warmup: Edge,
    pub cooldown: Edge,
    /// The rate the schedule asked for (req/s), for the client self-check; `None` for closed loops
    /// and all-at-once, and for open loops without one nominal rate (ramp, replay): see below.
    pub offered_rate: Option<f64>,
    /// A ramp or a replay: its offered rate is the drawn schedule's mean rate.
    pub offered_is_drawn: bool,
    /// Client and server prompt counts should agree (completions API: no chat template).
    pub compare_input_counts: bool,
    /// Output lengths were forced (`ignore_eos`): a different received length is worth a warning.
    pub expect_exact_output: bool,
    /// The floor of the schedule-lag limit (ms): an open-loop run is client-bound when schedule
    /// lag p99 exceeds the larger of this and [`LAG_SHARE_OF_TTFT`] of TTFT p50
    /// ([`schedule_lag_limit_ms`]).
    pub lag_limit_ms: f64,
    /// A closed loop: the self-check looks at the time each user spends between a reply's end
    /// and its next send (`worker_gap_ms`) and at the users kept busy, instead of schedule lag.
    pub closed_loop: Option<ClosedLoop>,
    /// A measured run: how late the client's async runtime woke (any loop).
    pub runtime_lag: Option<RuntimeLag>,
    /// A measured run: what the client's bookkeeping did.
    pub bookkeeping: Option<Bookkeeping>,
    /// A measured run: streams that went on after `[DONE]`.
    pub after_done: Option<AfterDone>,
    /// A measured run: requests resent on connections the server had given up, and keep-alive.
    /// When set, the summary counts every POST ([`Summary::sends`]).
    pub connections: Option<crate::sends::ConnectionReuse>,
    /// SLO to evaluate (attainment, goodput, percentile verdicts), with smoothed-goodput
    /// parameters when they can be set.
    pub slo: Option<(Slo, Option<Smoothing>)>,
}

impl SummaryOptions {
    pub fn new() -> Self {
        SummaryOptions { lag_limit_ms: 1.0, ..Default::default() }
    }
}

/// The users of a closed loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedLoop {
    /// Users asked for (`--concurrency`).
    pub requested: usize,
    /// Users that ran: never more than requests to send (`Load::users`).
    pub users: usize,
}

/// The measurement window, in ms from the run start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_ms: f64,
    pub end_ms: f64,
}

impl Window {
    pub fn seconds(&self) -> f64 {
        ((self.end_ms - self.start_ms) / 1000.0).max(0.0)
    }
    fn contains(&self, t: f64) -> bool {
        t >= self.start_ms && t <= self.end_ms
    }
}

/// Client-side vs server-side token counts over requests where both exist.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountCheck {
    /// Requests with both counts.
    pub requests: u64,
    pub client_total: u64,
    pub server_total: u64,
    /// `(client_total − server_total) / server_total · 100`; `None` without comparable requests.
    pub diff_pct: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenCounts {
    pub input: CountCheck,
    pub output: CountCheck,
    /// Successful requests whose output length differs from the requested `max_tokens`.
    pub output_len_mismatch: u64,
    /// Server counts that were not believed, by field and rule (the client's counts were used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distrusted: Vec<crate::plausible::DistrustTally>,
}

/// What a warning is about (serialized as its snake_case name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    /// The load generator did not apply the load asked for.
    ClientBound,
    /// The bookkeeping queue was full: records were finished without our counts.
    BookkeepingOverflow,
    /// Merged runs each had their own engine's statistics, which do not add up to one engine's.
    EngineStatsDropped,
    /// Our tokenizer's counts were skipped for some requests.
    CountsSkipped,
    /// Output token counts differ from the server's by more than 5%.
    TokenCountMismatch,
    /// Prompt token counts differ from the server's by more than 5%.
    InputTokenCountMismatch,
    /// With `ignore_eos`, some replies had another length than asked for.
    OutputLength,
    /// Percentiles resting on too few samples.
    FewSamples,
    /// Some requests failed.
    FailedRequests,
    /// Some scrapes of the server's metrics failed (`--scrape-metrics`; the run is unaffected).
    ScrapeFailed,
    /// The server's generated-token counter grew by more than 5% more or less than the client
    /// counted (`--scrape-metrics`).
    ServerTokenMismatch,
    /// The server kept streams open after `[DONE]` past the grace: their connections were dropped.
    StreamsLeftOpen,
    /// Merged shards started more than 1 ms apart (`goodput merge`).
    ShardStartSpread,
    /// A partial merge (`goodput merge --allow-partial`): some shards are missing.
    ShardsMissing,
    /// A digital twin predicted beyond the loads and lengths it was fitted on (`--twin`).
    Extrapolated,
    /// The server's `usage` broke a plausibility rule: its counts were not believed.
    ImplausibleServerCounts,
    /// A `<think>` was opened and never closed (`--reasoning-parser think-tags`).
    ThinkUnclosed,
    /// Reasoning token counts differ from the server's by more than 5%.
    ReasoningTokenCountMismatch,
    /// The run stopped once the server was over-saturated (`--stop-over-saturated`).
    OverSaturated,
}

impl WarningCode {
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::ClientBound => "client_bound",
            WarningCode::Extrapolated => "extrapolated",
            WarningCode::BookkeepingOverflow => "bookkeeping_overflow",
            WarningCode::EngineStatsDropped => "engine_stats_dropped",
            WarningCode::CountsSkipped => "counts_skipped",
            WarningCode::TokenCountMismatch => "token_count_mismatch",
            WarningCode::InputTokenCountMismatch => "input_token_count_mismatch",
            WarningCode::OutputLength => "output_length",
            WarningCode::FewSamples => "few_samples",
            WarningCode::FailedRequests => "failed_requests",
            WarningCode::ScrapeFailed => "scrape_failed",
            WarningCode::ServerTokenMismatch => "server_token_mismatch",
            WarningCode::StreamsLeftOpen => "streams_left_open",
            WarningCode::ShardStartSpread => "shard_start_spread",
            WarningCode::ShardsMissing => "shards_missing",
            WarningCode::ImplausibleServerCounts => "implausible_server_counts",
            WarningCode::ThinkUnclosed => "think_unclosed",
            WarningCode::ReasoningTokenCountMismatch => "reasoning_token_count_mismatch",
            WarningCode::OverSaturated => "over_saturated",
        }
    }
}

/// A condition the reader must know about to trust the numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub code: WarningCode,
    pub message: String,
}

/// Whether a closed loop kept its users busy (see `docs/metrics.md`, Client self-check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadCheck {
    /// Users asked for (`--concurrency`).
    pub requested_concurrency: u64,
    /// Users that ran (at most the requests to send; every shard's for a merged run): the
    /// number the means below are compared with.
    #[serde(default)]
    pub users: u64,
    /// Time-weighted mean of requests in flight while every user was active (from the last
    /// user's first send to the first user's last reply); `None` when that span is empty.
    pub mean_in_flight: Option<f64>,
    /// Time-weighted mean of users in their think time over the same span.
    pub mean_thinking: Option<f64>,
    /// Time-weighted mean of users whose request was between its first send and its last
    /// attempt's send (`--retries`: failed attempts and the waits the server asked for), over the
    /// same span; absent without retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_retrying: Option<f64>,
    /// Share of the users' time spent between one reply's end (plus think time) and the next
    /// send: the load the client failed to apply.
    pub gap_share: f64,
}

/// Above this share of their time in worker gaps, a closed loop's users were held back by the
/// client: the run is `client_bound`.
pub const GAP_SHARE_LIMIT: f64 = 0.05;

/// Below this share of a closed loop's users in flight or thinking (over the span in which all
/// were active), the client held the rest back: the run is `client_bound`.
pub const BUSY_USERS_MIN: f64 = 0.9;

impl LoadCheck {
    /// Users in flight, thinking or retrying, time-weighted: those the client did not hold back.
    pub fn busy_users(&self) -> Option<f64> {
        Some(self.mean_in_flight? + self.mean_thinking.unwrap_or(0.0) + self.mean_retrying.unwrap_or(0.0))
    }

    /// The client held the users back: too much of their time in worker gaps, or too few of
    /// them in flight or thinking.
    pub fn held_back(&self) -> bool {
        let idle = self.busy_users().is_some_and(|b| b < BUSY_USERS_MIN * self.users as f64);
        self.gap_share > GAP_SHARE_LIMIT || idle
    }
}

/// A run whose requests reasoned (`docs/metrics.md`, "Reasoning models"): the answer's latency,
/// each phase's pace, and the thinking's tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSummary {
    /// Successful measured requests that reasoned.
    pub requests: u64,
    /// Of those, the ones that never answered (the output was all reasoning).
    pub unanswered: u64,
    /// Of those, the ones whose `<think>` was never closed (`--reasoning-parser think-tags`).
    #[serde(default)]
    pub think_unclosed: u64,
    /// Σ reasoning tokens and Σ answer tokens (output less reasoning) of the successful
    /// measured requests.
    pub reasoning_tokens: u64,
    pub answer_tokens: u64,
    /// Time to the first answer token, every successful request (TTFT where one did not reason).
    pub ttfo_ms: Distribution,
    pub tpot_reasoning_ms: Distribution,
    pub tpot_answer_ms: Distribution,
    /// Token-level ITL inside each phase.
    pub itl_reasoning_ms: Distribution,
    pub itl_answer_ms: Distribution,
    /// Reasoning tokens per request that reasoned.
    pub reasoning_tokens_per_request: Distribution,
    /// Our count of the reasoning text against the server's `reasoning_tokens`.
    pub token_check: CountCheck,
}

/// Whether the load generator kept up with its schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientVerdict {
    #[default]
    Ok,
    ClientBound,
}

/// Everything reported for one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Requests sent in the measured set.
    pub attempted: u64,
    pub completed: u64,
    pub failed: u64,
    pub failed_by_class: BTreeMap<ErrorClass, u64>,
    /// Records left out of the measured set (warm-up, cool-down, never sent, cancelled).
    pub excluded: u64,
    /// Requests we cancelled ourselves (Ctrl-C, `--max-errors`): incomplete measurements, not
    /// server failures, so they are left out of `attempted` (and counted in `excluded`).
    pub cancelled: u64,
    pub window: Window,
    pub duration_s: f64,
    /// Successful completions inside the window per second.
    pub request_throughput: f64,
    pub input_throughput: f64,
    pub output_throughput: f64,
    pub total_throughput: f64,
    /// Time-weighted mean number of requests in flight over the window.
    pub mean_concurrency: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Requests per second the schedule offered (open loop) and the send rate achieved.
    pub offered_rate: Option<f64>,
    pub achieved_rate: Option<f64>,
    pub verdict: ClientVerdict,
    pub ttft_ms: Distribution,
    pub ttft_sched_ms: Distribution,
    pub tpot_ms: Distribution,
    /// Token-level ITL (each chunk gap divided by its tokens, counted once per token).
    pub itl_ms: Distribution,
    /// Raw gaps between content events (vLLM's "ITL").
    pub chunk_itl_ms: Distribution,
    /// Per request: the longest gap between content events.
    pub itl_max_ms: Distribution,
    pub e2e_ms: Distribution,
    pub e2e_sched_ms: Distribution,
    /// `end − s'`: until the stream closed (after usage and `[DONE]`); E2E ends at the last token.
    #[serde(default)]
    pub stream_close_ms: Distribution,
    /// E2E / N (GuideLLM's "TPOT").
    pub normalized_ms: Distribution,
    /// `s − a`, whole client-side queueing (includes waiting for a concurrency cap).
    pub client_queue_ms: Distribution,
    /// `s − a − cap_wait`: the load generator's own lateness.
    pub schedule_lag_ms: Distribution,
    /// Requests retried (`--retries`), measured set: per request, the time spent waiting between
    /// attempts for the server's `Retry-After` or the backoff. The server's time, kept out of
    /// the schedule lag, the worker gap and the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_wait_ms: Option<Distribution>,
    /// Closed loops: per user, from one reply's end (plus think time) to the user's next send.
    #[serde(default)]
    pub worker_gap_ms: Distribution,
    /// Closed loops: whether the users were kept busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_check: Option<LoadCheck>,
    /// Measured runs: how late the client's async runtime woke (a probe every 10 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_lag_ms: Option<RuntimeLag>,
    /// Measured runs: what the client's bookkeeping did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bookkeeping: Option<Bookkeeping>,
    /// Measured runs: streams that went on after `[DONE]` (drained apart), and those the server
    /// kept open past the grace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams_after_done: Option<AfterDone>,
    /// Measured runs: every POST the server was sent, by cause (retries, stale-connection
    /// resends), over all records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sends: Option<crate::sends::Sends>,
    /// Multi-turn and agentic sessions as wholes (batch summaries; a run summarized in one pass
    /// past the record cap has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<crate::sessions::SessionSummary>,
    /// The steady-state window: where the requests in flight held their plateau, with throughput
    /// and latency over it (batch summaries, as `sessions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<crate::steady::SteadyWindow>,
    /// Reasoning models: present when some request reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningSummary>,
    /// Multi-turn sessions: TTFT of first turns and of later turns (which resend the conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_first_turn_ms: Option<Distribution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_later_turns_ms: Option<Distribution>,
    pub token_counts: TokenCounts,
    /// Measured requests whose client-side token counts were skipped (`counts_skipped`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub counts_skipped: u64,
    /// Present when the result document holds fewer records than the run produced
    /// (`--records`): the mode, records kept and records summarized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_kept: Option<crate::records::RecordsKept>,
    /// SLO attainment and goodput, when an SLO was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloSummary>,
    pub warnings: Vec<Warning>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Which records are measured, and the window they are measured over.
pub fn measurement_window(records: &[RequestRecord], opts: &SummaryOptions) -> (Window, Vec<bool>) {
    // a request starts when it was first sent (its retries are part of it)
    let start_of = |r: &RequestRecord| r.first_sent_ms().unwrap_or(r.scheduled_ms);
    let end_of = |r: &RequestRecord| r.end_ms.or(r.last_event_ms()).unwrap_or_else(|| start_of(r));
    let first = records.iter().map(start_of).reduce(f64::min).unwrap_or(0.0);
    let last = records.iter().map(end_of).reduce(f64::max).unwrap_or(first);

    let mut starts: Vec<f64> = records.iter().map(start_of).collect();
    starts.sort_unstable_by(f64::total_cmp);
    let mut ends: Vec<f64> = records.iter().map(end_of).collect();
    ends.sort_unstable_by(f64::total_cmp);

    let start = match opts.warmup {
        Edge::None => first,
        Edge::Seconds(s) => first + s * 1000.0,
        Edge::Requests(k) => starts.get(k as usize).copied().unwrap_or(last),
    };
    let end = match opts.cooldown {
        Edge::None => last,
        Edge::Seconds(s) => last - s * 1000.0,
        Edge::Requests(k) => {
            let keep = ends.len().saturating_sub(k as usize);
            if keep == 0 { start } else { ends[keep - 1] }
        }
    };
    let window = Window { start_ms: start, end_ms: end.max(start) };
    let measured = records
        .iter()
        .map(|r| {
            r.sent_ms.is_some() && !is_cancelled(r) && start_of(r) >= window.start_ms && end_of(r) <= window.end_ms
        })
        .collect();
    (window, measured)
}

pub(crate) fn is_cancelled(r: &RequestRecord) -> bool {
    r.error.as_ref().is_some_and(|e| e.class == ErrorClass::Cancelled)
}

/// Summarizes a run's records.
pub fn summarize(records: &[RequestRecord], opts: &SummaryOptions) -> Summary {
    let (window, measured) = measurement_window(records, opts);
    let mut s = Summary { window, duration_s: window.seconds(), ..Default::default() };

    let mut d = Dists::default();
    // (scheduled, sent, sent minus cap wait) of measured requests, for the self-check
    let mut sends: Vec<(f64, f64, f64)> = Vec::new();
    let mut posts = crate::sends::Sends::default();
    for (r, &m) in records.iter().zip(&measured) {
        posts.add(r);
        if !m {
            s.excluded += 1;
            s.cancelled += u64::from(is_cancelled(r));
            continue;
        }
        s.attempted += 1;
        if let Some(t) = r.first_sent_ms() {
            sends.push((r.scheduled_ms, t, t - r.cap_wait_ms));
        }
        d.add(&mut s, r);
    }

    // Throughput: tokens and completions inside the window, from every successful record.
    let mut in_flight_ms = 0.0;
    let mut completions = 0u64;
    for r in records {
        if let (Some(sent), Some(end)) = (r.sent_ms, r.end_ms.or(r.last_event_ms())) {
            let overlap = end.min(window.end_ms) - sent.max(window.start_ms);
            if overlap > 0.0 {
                in_flight_ms += overlap;
            }
        }
        if !r.is_success() {
            continue;
        }
        if let Some(end) = r.last_event_ms().or(r.end_ms)
            && window.contains(end)
        {
            completions += 1;
        }
        if let Some(c1) = r.first_event_ms()
            && window.contains(c1)
        {
            s.input_tokens += r.input_tokens.unwrap_or(0);
        }
        for (&t, &m) in r.event_ms.iter().zip(&r.event_tokens) {
            if window.contains(t) {
                s.output_tokens += m as u64;
            }
        }
    }
    let secs = s.duration_s;
    // Client self-check: achieved send rate over the span of sends (open loops: it compares
    // with the offered rate); for a closed loop, sends per second of the window (it compares
    // with the request throughput).
    let rate_of = |f: fn(&(f64, f64, f64)) -> f64| -> Option<f64> {
        let lo = sends.iter().map(f).reduce(f64::min)?;
        let hi = sends.iter().map(f).reduce(f64::max)?;
        (sends.len() >= 2 && hi > lo).then(|| (sends.len() - 1) as f64 / ((hi - lo) / 1000.0))
    };
    let counted = Counted {
        completions,
        in_flight_ms,
        achieved_rate: match opts.closed_loop {
            Some(_) => (secs > 0.0 && !sends.is_empty()).then(|| sends.len() as f64 / secs),
            None => rate_of(|x| x.1),
        },
        scheduled_rate: rate_of(|x| x.0),
        client_rate: rate_of(|x| x.2),
        posts,
        any_turn: records.iter().any(|r| r.turn.is_some()),
    };
    finish(s, d, opts, counted, |s| {
        let m = opts.percentiles;
        if let Some(users) = opts.closed_loop {
            let (mut gaps, check) = load_check(records, users);
            s.worker_gap_ms = gaps.describe(m);
            s.load_check = check;
        }
        if let Some((slo, smoothing)) = &opts.slo {
            s.slo = Some(crate::slo::evaluate(slo, *smoothing, records, &measured, s.duration_s, m));
        }
        s.sessions = crate::sessions::summarize_sessions(records, &measured, m);
        s.steady = crate::steady::steady_window(records, m);
    })
}

/// What a summary counted over its records, besides their distributions.
pub(crate) struct Counted {
    /// Successful requests that completed inside the window.
    pub completions: u64,
    /// Milliseconds of requests in flight inside the window, summed.
    pub in_flight_ms: f64,
    /// Sends per second as the client made them; and as scheduled, and as the client meant to
    /// make them (its own cap waits taken out), for the self-check.
    pub achieved_rate: Option<f64>,
    pub scheduled_rate: Option<f64>,
    pub client_rate: Option<f64>,
    /// What the server was sent.
    pub posts: crate::sends::Sends,
    /// Some record is a turn of a session.
    pub any_turn: bool,
}

/// Finishes a summary whose window, counts and distributions are in (the batch summary and the
/// one-pass collector both end here): throughputs, rates, percentiles, what the client reports
/// about itself, then `measured` (what only the batch summary can add: the closed-loop check,
/// the SLO), then the client's verdict and the warnings.
pub(crate) fn finish(
    mut s: Summary,
    mut d: Dists,
    opts: &SummaryOptions,
    c: Counted,
    measured: impl FnOnce(&mut Summary),
) -> Summary {
    let secs = s.duration_s;
    if secs > 0.0 {
        s.request_throughput = c.completions as f64 / secs;
        s.input_throughput = s.input_tokens as f64 / secs;
        s.output_throughput = s.output_tokens as f64 / secs;
        s.total_throughput = (s.input_tokens + s.output_tokens) as f64 / secs;
        s.mean_concurrency = c.in_flight_ms / 1000.0 / secs;
    }
    s.achieved_rate = c.achieved_rate;
    // a ramp or a replay has no one nominal rate: its drawn schedule's mean rate is what it offered
    s.offered_rate = opts.offered_rate.filter(|r| r.is_finite()).or(c.scheduled_rate.filter(|_| opts.offered_is_drawn));
    d.describe_into(&mut s, opts.percentiles, c.any_turn);
    finish_client_side(&mut s, opts, c.posts);
    measured(&mut s);
    let bound = client_bound(&s, opts, c.scheduled_rate, c.client_rate);
    s.verdict = if bound.any() { ClientVerdict::ClientBound } else { ClientVerdict::Ok };
    s.warnings = warnings(&s, opts, &bound);
    s
}

/// What the client reports about itself beside the records (both summaries): its runtime lag,
/// bookkeeping, streams after `[DONE]`, what the server was sent; and the token-count
/// differences.
fn finish_client_side(s: &mut Summary, opts: &SummaryOptions, mut posts: crate::sends::Sends) {
    s.runtime_lag_ms = opts.runtime_lag;
    s.bookkeeping = opts.bookkeeping;
    s.streams_after_done = opts.after_done;
    s.sends = opts.connections.map(|c| {
        posts.connections = Some(c);
        posts
    });
    for c in [&mut s.token_counts.input, &mut s.token_counts.output] {
        if c.server_total > 0 {
            c.diff_pct = Some((c.client_total as f64 - c.server_total as f64) / c.server_total as f64 * 100.0);
        }
    }
}

/// Every latency distribution of a summary, fed one measured record at a time: the batch
/// summary and the one-pass collector (`stream`) share it.
#[derive(Default)]
pub(crate) struct Dists {
    ttft: Samples,
    ttft_sched: Samples,
    tpot: Samples,
    itl: Samples,
    /// Per-chunk gaps; only once `chunks_apart` (until then they are the per-token ones).
    chunk_itl: Samples,
    /// Some record had an event of other than one token. Until one has, every per-chunk gap is
    /// a per-token gap of weight one (`itl_samples` and `chunk_gaps` agree), so `itl` stands for
    /// both and `chunk_itl` is not fed (half the work per token, as a simulated run has it).
    chunks_apart: bool,
    itl_max: Samples,
    e2e: Samples,
    e2e_sched: Samples,
    stream_close: Samples,
    normalized: Samples,
    client_queue: Samples,
    schedule_lag: Samples,
    retry_wait: Samples,
    ttft_first: Samples,
    ttft_later: Samples,
    ttfo: Samples,
    /// Reasoning: the phases' distributions and counts, once a record reasoned.
    reasoning: Option<Box<ReasoningDists>>,
    limit: Option<usize>,
}

/// The distributions of a run's reasoning.
#[derive(Default)]
pub(crate) struct ReasoningDists {
    s: ReasoningSummary,
    tpot_reasoning: Samples,
    tpot_answer: Samples,
    itl_reasoning: Samples,
    itl_answer: Samples,
    tokens: Samples,
}

impl Dists {
    /// Exact up to `limit` samples per metric (then a sketch); `None`: the default limit.
    pub(crate) fn with_limit(limit: Option<usize>) -> Self {
        let mk = || limit.map_or_else(Samples::new, Samples::with_limit);
        Dists {
            ttft: mk(),
            ttft_sched: mk(),
            tpot: mk(),
            itl: mk(),
            chunk_itl: mk(),
            chunks_apart: false,
            itl_max: mk(),
            e2e: mk(),
            e2e_sched: mk(),
            stream_close: mk(),
            normalized: mk(),
            client_queue: mk(),
            schedule_lag: mk(),
            retry_wait: mk(),
            ttft_first: mk(),
            ttft_later: mk(),
            ttfo: mk(),
            reasoning: None,
            limit,
        }
    }

    /// One measured record: its latencies, and the summary's outcome counts and token-count
    /// checks.
    pub(crate) fn add(&mut self, s: &mut Summary, r: &RequestRecord) {
        let lat = RequestMetrics::of(r);
        if let Some(v) = lat.schedule_lag {
            self.schedule_lag.push(v);
        }
        if let Some(v) = lat.client_queue {
            self.client_queue.push(v);
        }
        if let Some(v) = lat.retry_wait {
            self.retry_wait.push(v);
        }
        if let Some(e) = &r.error {
            s.failed += 1;
            *s.failed_by_class.entry(e.class).or_default() += 1;
            return;
        }
        s.completed += 1;
        let push = |x: &mut Samples, v: Option<f64>| {
            if let Some(v) = v {
                x.push(v)
            }
        };
        push(&mut self.ttft, lat.ttft);
        match r.turn {
            Some(0) => push(&mut self.ttft_first, lat.ttft),
            Some(_) => push(&mut self.ttft_later, lat.ttft),
            None => {}
        }
        push(&mut self.ttft_sched, lat.ttft_sched);
        push(&mut self.tpot, lat.tpot);
        push(&mut self.itl_max, lat.itl_max);
        push(&mut self.e2e, lat.e2e);
        push(&mut self.e2e_sched, lat.e2e_sched);
        push(&mut self.stream_close, lat.stream_close);
        push(&mut self.normalized, lat.normalized);
        if !self.chunks_apart && !r.event_tokens.iter().take(r.event_ms.len()).all(|&m| m == 1) {
            self.chunk_itl = self.itl.clone();
            self.chunks_apart = true;
        }
        self.itl.extend_weighted(itl_samples(r));
        if self.chunks_apart {
            self.chunk_itl.extend_weighted(chunk_gaps(r).map(|g| (g, 1)));
        }
        push(&mut self.ttfo, lat.ttfo);
        if let Some(k) = r.reasoning_events {
            let limit = self.limit;
            let rd = self.reasoning.get_or_insert_with(|| {
                let mk = || limit.map_or_else(Samples::new, Samples::with_limit);
                Box::new(ReasoningDists {
                    tpot_reasoning: mk(),
                    tpot_answer: mk(),
                    itl_reasoning: mk(),
                    itl_answer: mk(),
                    tokens: mk(),
                    ..Default::default()
                })
            });
            let k = k as usize;
            rd.s.requests += 1;
            rd.s.unanswered += u64::from(k >= r.event_ms.len());
            rd.s.think_unclosed += u64::from(r.think_unclosed);
            let reasoning = r.reasoning_tokens.unwrap_or(0);
            rd.s.reasoning_tokens += reasoning;
            rd.s.answer_tokens += r.output_tokens.unwrap_or(0).saturating_sub(reasoning);
            rd.tokens.push(reasoning as f64);
            push(&mut rd.tpot_reasoning, lat.tpot_reasoning);
            push(&mut rd.tpot_answer, lat.tpot_answer);
            rd.itl_reasoning.extend_weighted(itl_samples_between(r, 0, k));
            rd.itl_answer.extend_weighted(itl_samples_between(r, k, r.event_ms.len()));
            if let (Some(a), Some(b)) = (r.reasoning_tokens_client, r.reasoning_tokens_server) {
                let c = &mut rd.s.token_check;
                c.requests += 1;
                c.client_total += a;
                c.server_total += b;
            }
        } else if let Some(rd) = &mut self.reasoning {
            // a request that did not reason in a run that did: all its output is the answer
            rd.s.answer_tokens += r.output_tokens.unwrap_or(0);
        }
        check_counts(&mut s.token_counts, r);
        s.counts_skipped += u64::from(r.counts_skipped);
    }

    /// Writes every distribution into the summary (per-turn TTFT when the run had turns).
    pub(crate) fn describe_into(&mut self, s: &mut Summary, m: PercentileMethod, turns: bool) {
        s.ttft_ms = self.ttft.describe(m);
        s.ttft_sched_ms = self.ttft_sched.describe(m);
        s.tpot_ms = self.tpot.describe(m);
        s.itl_ms = self.itl.describe(m);
        s.chunk_itl_ms = if self.chunks_apart { self.chunk_itl.describe(m) } else { s.itl_ms.clone() };
        s.itl_max_ms = self.itl_max.describe(m);
        s.e2e_ms = self.e2e.describe(m);
        s.e2e_sched_ms = self.e2e_sched.describe(m);
        s.stream_close_ms = self.stream_close.describe(m);
        s.normalized_ms = self.normalized.describe(m);
        s.client_queue_ms = self.client_queue.describe(m);
        s.schedule_lag_ms = self.schedule_lag.describe(m);
        let retried = self.retry_wait.describe(m);
        s.retry_wait_ms = (retried.n > 0).then_some(retried);
        if let Some(rd) = &mut self.reasoning {
            let mut r = std::mem::take(&mut rd.s);
            r.ttfo_ms = self.ttfo.describe(m);
            r.tpot_reasoning_ms = rd.tpot_reasoning.describe(m);
            r.tpot_answer_ms = rd.tpot_answer.describe(m);
            r.itl_reasoning_ms = rd.itl_reasoning.describe(m);
            r.itl_answer_ms = rd.itl_answer.describe(m);
            r.reasoning_tokens_per_request = rd.tokens.describe(m);
            let c = &mut r.token_check;
            if c.server_total > 0 {
                c.diff_pct = Some((c.client_total as f64 - c.server_total as f64) / c.server_total as f64 * 100.0);
            }
            s.reasoning = Some(r);
        }
        if turns {
            s.ttft_first_turn_ms = Some(self.ttft_first.describe(m));
            s.ttft_later_turns_ms = Some(self.ttft_later.describe(m));
        }
    }
}

pub(crate) fn check_counts(tc: &mut TokenCounts, r: &RequestRecord) {
    use crate::plausible::UsageField;
    for d in &r.distrusted_counts {
        match tc.distrusted.iter_mut().find(|t| t.first.field == d.field && t.first.rule == d.rule) {
            Some(t) => t.requests += 1,
            None => tc.distrusted.push(crate::plausible::DistrustTally { requests: 1, first: *d }),
        }
    }
    let believed = |f: UsageField| !r.distrusted_counts.iter().any(|d| d.field == f);
    for (c, client, server) in [
        (&mut tc.input, r.input_tokens_client, r.input_tokens_server.filter(|_| believed(UsageField::PromptTokens))),
        (
            &mut tc.output,
            r.output_tokens_client,
            r.output_tokens_server.filter(|_| believed(UsageField::CompletionTokens)),
        ),
    ] {
        if let (Some(a), Some(b)) = (client, server) {
            c.requests += 1;
            c.client_total += a;
            c.server_total += b;
        }
    }
    if let (Some(got), Some(want)) = (r.output_tokens, r.requested_output_tokens)
        && got != want
    {
        tc.output_len_mismatch += 1;
    }
}

/// Per user of a closed loop, the gaps between consecutive requests (`s − a` of each follow-on
/// request: its user was ready at `a`), the share of the users' time they took, and the mean
/// load over the span in which every user was active.
fn load_check(records: &[RequestRecord], closed: ClosedLoop) -> (Samples, Option<LoadCheck>) {
    let users = closed.users;
    let mut by_user: BTreeMap<u32, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.sent_ms.is_some()) {
        if let Some(u) = r.user {
            by_user.entry(u).or_default().push(r);
        }
    }
    let mut gaps = Samples::default();
    let (mut gap_ms, mut span_ms) = (0.0, 0.0);
    let end_of = |r: &RequestRecord| r.end_ms.or(r.last_event_ms()).unwrap_or(r.sent_ms.unwrap_or(0.0));
    let (mut first_start, mut last_end) = (f64::NEG_INFINITY, f64::INFINITY);
    // a user's request leaves it at its first send: retries after it are the server's time
    let first_sent = |r: &RequestRecord| r.first_sent_ms().unwrap_or(0.0);
    for rs in by_user.values_mut() {
        rs.sort_by(|a, b| first_sent(a).total_cmp(&first_sent(b)));
        for w in rs.windows(2) {
            let (prev, next) = (w[0], w[1]);
            let sent = first_sent(next);
            let gap = (sent - next.scheduled_ms - next.cap_wait_ms).max(0.0);
            gaps.push(gap);
            gap_ms += gap;
            span_ms += sent - first_sent(prev);
        }
        if let (Some(f), Some(l)) = (rs.first(), rs.last()) {
            first_start = first_start.max(first_sent(f));
            last_end = last_end.min(end_of(l));
        }
    }
    if by_user.is_empty() {
        return (gaps, None);
    }
    // while every user was active, each is in flight, thinking, or in a gap
    let (mut in_flight, mut thinking, mut retrying) = (None, None, None);
    if by_user.len() == users && last_end > first_start {
        let (lo, hi) = (first_start, last_end);
        let overlap = |a: f64, b: f64| (b.min(hi) - a.max(lo)).max(0.0);
        let (mut busy, mut think, mut retry) = (0.0, 0.0, 0.0);
        for rs in by_user.values() {
            for (i, r) in rs.iter().enumerate() {
                let sent = r.sent_ms.unwrap_or(0.0);
                busy += overlap(sent, end_of(r));
                retry += overlap(first_sent(r), sent);
                if i > 0 {
                    think += overlap(end_of(rs[i - 1]), r.scheduled_ms);
                }
            }
        }
        in_flight = Some(busy / (hi - lo));
        thinking = Some(think / (hi - lo));
        let any_retried = by_user.values().flatten().any(|r| !r.attempts.is_empty());
        retrying = any_retried.then(|| retry / (hi - lo));
    }
    let check = LoadCheck {
        requested_concurrency: closed.requested as u64,
        users: users as u64,
        mean_in_flight: in_flight,
        mean_thinking: thinking,
        mean_retrying: retrying,
        gap_share: if span_ms > 0.0 { gap_ms / span_ms } else { 0.0 },
    };
    (gaps, Some(check))
}

/// The share of TTFT p50 that schedule lag p99 may reach before an open loop is client-bound:
/// below it, the lag shifts latencies measured from the schedule by less than 5% of a typical
/// TTFT, which is within the run-to-run noise of a served model.
pub const LAG_SHARE_OF_TTFT: f64 = 0.05;

/// The schedule-lag p99 limit (ms) of an open loop: the larger of `floor_ms` (the 1 ms default:
/// below it lag is the OS timer's, not the client's) and [`LAG_SHARE_OF_TTFT`] of `ttft_p50_ms`,
/// so the lag must distort what was measured, not merely exist. Without a TTFT, the floor.
pub fn schedule_lag_limit_ms(floor_ms: f64, ttft_p50_ms: Option<f64>) -> f64 {
    match ttft_p50_ms {
        Some(t) if t.is_finite() && t > 0.0 => floor_ms.max(LAG_SHARE_OF_TTFT * t),
        _ => floor_ms,
    }
}

/// `client_bound` when the generator did not apply the load asked for: an open loop that lagged
/// its schedule (p99 of `s − a − cap_wait` over [`schedule_lag_limit_ms`]) or sent at under 97% of the rate its
/// own schedule asked for; a closed loop whose users the client held back
/// ([`LoadCheck::held_back`]); or any measured run whose runtime woke too late
/// ([`RuntimeLag::too_late`]: responses were read late). The open-loop comparison uses the
/// schedule actually drawn (not the nominal rate, which a short random schedule misses by
/// chance) and send times less cap waits (a concurrency cap is the server's slowness showing,
/// not the client's).
pub(crate) fn client_bound(
    s: &Summary,
    opts: &SummaryOptions,
    scheduled_rate: Option<f64>,
    client_rate: Option<f64>,
) -> Bound {
    let open = opts.closed_loop.is_none();
    let lag_limit_ms = schedule_lag_limit_ms(opts.lag_limit_ms, s.ttft_ms.p50);
    let lagged = open && s.schedule_lag_ms.p99.is_some_and(|p| p > lag_limit_ms);
    let slow = if open { slow_rates(opts, scheduled_rate, client_rate) } else { None };
    Bound {
        held_back: !open && s.load_check.is_some_and(|c| c.held_back()),
        behind: lagged || slow.is_some(),
        lagged,
        lag_floor_ms: opts.lag_limit_ms,
        lag_limit_ms,
        slow,
        late_runtime: s.runtime_lag_ms.is_some_and(|l| l.too_late()),
        out_of_resources: s.failed_by_class.get(&ErrorClass::ClientLimit).copied().unwrap_or(0),
    }
}

/// Why a run is `client_bound` (any may hold).
#[derive(Default)]
pub(crate) struct Bound {
    /// A closed loop's users were held back.
    held_back: bool,
    /// An open loop fell behind its schedule: it lagged, or sent too slowly.
    behind: bool,
    /// Schedule lag p99 exceeded `lag_limit_ms`.
    lagged: bool,
    /// The limit applied, and its floor ([`schedule_lag_limit_ms`]).
    lag_limit_ms: f64,
    lag_floor_ms: f64,
    /// The rate the drawn schedule asked for and the rate sent, when under 97% of it.
    slow: Option<(f64, f64)>,
    /// The client's runtime woke too late.
    late_runtime: bool,
    /// Requests the client failed itself, out of a resource (`client_limit`).
    out_of_resources: u64,
}

impl Bound {
    pub(crate) fn any(&self) -> bool {
        self.held_back || self.behind || self.late_runtime || self.out_of_resources > 0
    }
}

/// An open loop sent at under 97% of its drawn schedule's rate: `(wanted, sent)` req/s.
fn slow_rates(opts: &SummaryOptions, scheduled_rate: Option<f64>, client_rate: Option<f64>) -> Option<(f64, f64)> {
    let scheduled = opts.offered_rate.is_some() || opts.offered_is_drawn;
    match (scheduled, scheduled_rate, client_rate) {
        (true, Some(want), Some(got)) if got < 0.97 * want => Some((want, got)),
        _ => None,
    }
}

/// Why an open loop is behind, in words that explain themselves: what was sent against what was
/// offered, how large the lag is against the latencies measured, and what it distorts.
fn behind_words(s: &Summary, bound: &Bound) -> String {
    let sent = match (s.offered_rate, s.achieved_rate) {
        (Some(o), Some(a)) => format!("sent {a:.2} of {o:.2} req/s offered; "),
        _ => String::new(),
    };
    let mut parts = Vec::new();
    if bound.lagged {
        let lag = s.schedule_lag_ms.p99.unwrap_or(0.0);
        let against = match s.ttft_ms.p50 {
            Some(t) if t > 0.0 => format!(" is {:.0}% of TTFT p50 ({t:.1} ms)", lag / t * 100.0),
            _ => String::new(),
        };
        let rule = if s.ttft_ms.p50.is_some() {
            format!(" (the larger of {} ms and {:.0}% of TTFT p50)", bound.lag_floor_ms, LAG_SHARE_OF_TTFT * 100.0)
        } else {
            String::new()
        };
        parts.push(format!(
            "{sent}p99 schedule lag {lag:.2} ms{against}, over the limit of {:.2} ms{rule}, so latencies measured \
             from the schedule are distorted by up to {lag:.2} ms and the server saw the requests later than planned",
            bound.lag_limit_ms,
        ));
    }
    if let Some((want, got)) = bound.slow {
        let lead = if bound.lagged { String::new() } else { sent };
        parts.push(format!(
            "{lead}the sends (less concurrency-cap waits) ran at {got:.2} req/s, under 97% of the {want:.2} req/s of \
             the schedule drawn, so the server saw a lighter load than asked for"
        ));
    }
    parts.join("; ")
}

/// Why the verdict is `client_bound`, in words (the closed loop's users, the open loop's
/// schedule, the runtime's lag).
fn client_bound_message(s: &Summary, bound: &Bound) -> String {
    let mut why = Vec::new();
    if let (true, Some(c)) = (bound.held_back, &s.load_check) {
        why.push(held_back_words(s, c));
    }
    if bound.behind {
        why.push(behind_words(s, bound));
    }
    if let (true, Some(l)) = (bound.late_runtime, s.runtime_lag_ms) {
        why.push(format!(
            "the client's async runtime woke {:.1} ms late at p99 (max {:.1} ms; limit {RUNTIME_LAG_LIMIT_MS} ms): \
             responses were read late, so TTFT and E2E include the client's own delay",
            l.p99, l.max
        ));
    }
    if bound.out_of_resources > 0 {
        why.push(format!(
            "{} requests failed in the client itself, out of file descriptors (`client_limit`: raise `ulimit -n` or \
             lower the concurrency): the server never saw them",
            bound.out_of_resources
        ));
    }
    why.join("; ")
}

/// A closed loop's held-back users, in words.
fn held_back_words(s: &Summary, c: &LoadCheck) -> String {
    let load = match (c.mean_in_flight, c.mean_thinking) {
        (Some(f), Some(t)) if t > 0.005 => format!("; mean in flight {f:.1}, thinking {t:.1}, of {} users", c.users),
        (Some(f), _) => format!("; mean in flight {f:.1} of {} users", c.users),
        _ => String::new(),
    };
    format!(
        "the load generator did not keep its {} users busy: they spent {:.1}% of their time waiting for the client \
         between a reply and their next send (worker gap p50 {:.3} ms, p99 {:.3} ms{load}): results describe a \
         lighter load than asked for",
        c.users,
        c.gap_share * 100.0,
        s.worker_gap_ms.p50.unwrap_or(0.0),
        s.worker_gap_ms.p99.unwrap_or(0.0),
    )
}

/// The relative half-width of a 95% interval that the `few_samples` advice aims for.
pub const FEW_SAMPLES_TARGET: f64 = 0.10;

/// A percentile of `d` and its 95% interval: `(value, [lower, upper])` for p = .5, .9, .95, .99.
fn percentile_of(d: &Distribution, p: f64) -> (Option<f64>, [Option<f64>; 2]) {
    let (v, ci) = match p {
        0.5 => (d.p50, d.p50_ci),
        0.9 => (d.p90, d.p90_ci),
        0.95 => (d.p95, d.p95_ci),
        _ => (d.p99, d.p99_ci),
    };
    (v, ci.unwrap_or([None, None]))
}

/// Samples a `p`-quantile needs: at least `10/(1 − p)`, and when every interval is bounded,
/// enough for the widest relative half-width to shrink to [`FEW_SAMPLES_TARGET`] (a half-width
/// shrinks as `1/√n`). Returns the samples and whether the ±10% estimate set them.
pub fn samples_needed(n: u64, p: f64, cis: &[(Option<f64>, [Option<f64>; 2])]) -> (u64, bool) {
    let floor = crate::confidence::min_samples(p);
    let mut worst = 0.0_f64;
    for &(v, [lo, hi]) in cis {
        match (v, lo, hi) {
            (Some(v), Some(lo), Some(hi)) if v > 0.0 && hi.is_finite() => {
                worst = worst.max((hi - v).max(v - lo) / v);
            }
            _ => return (floor, false),
        }
    }
    let want = (n as f64 * (worst / FEW_SAMPLES_TARGET).powi(2)).ceil() as u64;
    if want > floor { (want, true) } else { (floor, false) }
}

/// Rounds a count up to two significant digits (1234 → 1300, 667 → 670, 95 → 95).
fn round_up_2(x: u64) -> u64 {
    let mut unit = 1;
    while x / unit >= 100 {
        unit *= 10;
    }
    x.div_ceil(unit) * unit
}

/// The `few_samples` warning's text, when a percentile of a distribution the console's latency
/// table shows (TTFT, TPOT, ITL per token and per chunk, E2E) rests on fewer than `10/(1 − p)`
/// samples: for each group of distributions of one sample count, the highest such percentile's
/// value and 95% interval, and how many requests would bound it (or bring it to about ±10%).
/// Public so a summary changed after `summarize`, such as an imported one, can redo it.
pub fn few_samples(s: &Summary) -> Option<String> {
    let dists = [
        ("TTFT", &s.ttft_ms),
        ("TPOT", &s.tpot_ms),
        ("ITL per token", &s.itl_ms),
        ("ITL per chunk", &s.chunk_itl_ms),
        ("E2E", &s.e2e_ms),
    ];
    // distributions with the same n are thin at the same percentiles: one group each
    let ps = [0.5, 0.9, 0.95, 0.99];
    let mut groups: Vec<(u64, Vec<(&str, &Distribution)>)> = Vec::new();
    for (name, d) in dists {
        if d.n == 0 || d.n >= crate::confidence::min_samples(0.99) {
            continue;
        }
        match groups.iter_mut().find(|g| g.0 == d.n) {
            Some(g) => g.1.push((name, d)),
            None => groups.push((d.n, vec![(name, d)])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    let num = |x: Option<f64>, none: &str| x.map_or(none.to_string(), |v| format!("{v:.2}"));
    let parts: Vec<String> = groups
        .iter()
        .map(|(n, ds)| {
            let thin: Vec<f64> = ps.iter().copied().filter(|&p| *n < crate::confidence::min_samples(p)).collect();
            let p = *thin.last().expect("n is under 10/(1 − 0.99)");
            let label = |p: f64| format!("p{}", p * 100.0);
            let cis: Vec<_> = ds.iter().map(|(_, d)| percentile_of(d, p)).collect();
            let values: Vec<String> = ds
                .iter()
                .zip(&cis)
                .map(|((name, _), (v, [lo, hi]))| {
                    format!(
                        "{name} {} {} ms, 95% CI [{}, {}",
                        label(p),
                        num(*v, "-"),
                        num(*lo, "0"),
                        hi.map_or("∞)".to_string(), |h| format!("{h:.2}]"))
                    )
                })
                .collect();
            let (need, ten_pct) = samples_needed(*n, p, &cis);
            // requests, from samples: ITL has several samples per request
            let requests = if s.completed > 0 { (need * s.completed).div_ceil(*n) } else { need };
            let advice = if ten_pct {
                format!("run ≥ {} requests for {} within about ±10%", round_up_2(requests), label(p))
            } else {
                format!("run ≥ {} requests to bound {} (10/(1 − p) samples)", round_up_2(requests), label(p))
            };
            format!(
                "{} of {} rest on {n} samples: {}; {advice}",
                thin.iter().map(|&p| label(p)).collect::<Vec<_>>().join(", "),
                ds.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", "),
                values.join("; ")
            )
        })
        .collect();
    Some(format!("few samples: {}", parts.join(". ")))
}

pub(crate) fn warnings(s: &Summary, opts: &SummaryOptions, bound: &Bound) -> Vec<Warning> {
    let mut w = Vec::new();
    let mut add = |code: WarningCode, message: String| w.push(Warning { code, message });
    if bound.any() {
        add(WarningCode::ClientBound, client_bound_message(s, bound));
    }
    if let Some(b) = s.bookkeeping.filter(|b| b.overflowed > 0) {
        add(
            WarningCode::BookkeepingOverflow,
            format!(
                "the bookkeeping fell behind: {} records were finished on their request's task without our token \
                 counts (its queue was full)",
                b.overflowed
            ),
        );
    }
    if let Some(a) = s.streams_after_done.filter(|a| a.left_open > 0) {
        add(
            WarningCode::StreamsLeftOpen,
            format!(
                "the server kept {} streams open for more than 2 s after [DONE]: their connections were dropped, so \
                 keep-alive was lost and later requests paid for new connections (in their TTFT); the requests \
                 themselves ended at [DONE] and their figures are unaffected",
                a.left_open
            ),
        );
    }
    if !s.token_counts.distrusted.is_empty() {
        let parts: Vec<String> = s
            .token_counts
            .distrusted
            .iter()
            .map(|t| format!("{} requests, first {}", t.requests, t.first.describe()))
            .collect();
        add(
            WarningCode::ImplausibleServerCounts,
            format!(
                "the server's usage was not believed: {}; our tokenizer's counts were used instead (each record's \
                 distrusted_counts names the figure and the rule)",
                parts.join("; ")
            ),
        );
    }
    if let Some(r) = s.reasoning.as_ref().filter(|r| r.think_unclosed > 0) {
        add(
            WarningCode::ThinkUnclosed,
            format!(
                "{} of {} reasoning requests opened <think> and never closed it: their whole output counts as \
                 reasoning and they have no TTFO (was the reply cut at max_tokens? or, if the server parses \
                 reasoning itself, drop --reasoning-parser think-tags)",
                r.think_unclosed, r.requests
            ),
        );
    }
    if let Some(p) = s.reasoning.as_ref().and_then(|r| r.token_check.diff_pct)
        && p.abs() > 5.0
    {
        add(
            WarningCode::ReasoningTokenCountMismatch,
            format!(
                "our tokenizer counts {p:+.1}% reasoning tokens vs the server's reasoning_tokens over {} requests: \
                 pass --tokenizer with the served model's tokenizer.json",
                s.reasoning.as_ref().map_or(0, |r| r.token_check.requests)
            ),
        );
    }
    if let Some(p) = s.token_counts.output.diff_pct
        && p.abs() > 5.0
    {
        add(
            WarningCode::TokenCountMismatch,
            format!(
                "our tokenizer counts {:+.1}% output tokens vs the server's usage over {} requests: \
                 pass --tokenizer with the served model's tokenizer.json",
                p, s.token_counts.output.requests
            ),
        );
    }
    if let Some(p) = s.token_counts.input.diff_pct
        && p.abs() > 5.0
        && opts.compare_input_counts
    {
        add(
            WarningCode::InputTokenCountMismatch,
            format!(
                "our tokenizer counts {:+.1}% prompt tokens vs the server's usage over {} requests: pass --tokenizer \
                 with the served model's tokenizer.json",
                p, s.token_counts.input.requests
            ),
        );
    }
    if opts.expect_exact_output && s.token_counts.output_len_mismatch > 0 {
        add(
            WarningCode::OutputLength,
            format!(
                "{} successful requests received a different number of output tokens than requested \
                 (does the server honour ignore_eos / min_tokens?)",
                s.token_counts.output_len_mismatch
            ),
        );
    }
    if let Some(m) = few_samples(s) {
        add(WarningCode::FewSamples, m);
    }
    if s.counts_skipped > 0 {
        add(
            WarningCode::CountsSkipped,
            format!(
                "our tokenizer's counts were skipped for {} requests (the client's bookkeeping fell behind, or the run \
                 ended first): those use the server's usage counts, and one token per event where it gave none",
                s.counts_skipped
            ),
        );
    }
    if s.failed > 0 {
        let classes: Vec<String> = s.failed_by_class.iter().map(|(k, v)| format!("{}: {v}", k.as_str())).collect();
        add(
            WarningCode::FailedRequests,
            format!("{} of {} requests failed ({})", s.failed, s.attempted, classes.join(", ")),
        );
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RequestError, TokenSource};

    fn ok(id: u64, a: f64, s: f64, events: &[f64], input: u64) -> RequestRecord {
        RequestRecord {
            id,
            scheduled_ms: a,
            sent_ms: Some(s),
            event_ms: events.to_vec(),
            event_tokens: vec![1; events.len()],
            end_ms: events.last().copied(),
            input_tokens: Some(input),
            input_tokens_source: Some(TokenSource::Server),
            output_tokens: Some(events.len() as u64),
            output_tokens_source: Some(TokenSource::Server),
            ..Default::default()
        }
    }

    #[test]
    fn hand_computed_run() {
        // Two successes and one failure over a window from 0 to 1000 ms.
        let r0 = ok(0, 0.0, 0.0, &[100.0, 200.0, 300.0], 10); // TTFT 100, TPOT 100, E2E 300
        let r1 = ok(1, 500.0, 500.0, &[700.0, 1000.0], 20); // TTFT 200, TPOT 300, E2E 500
        let r2 = RequestRecord {
            id: 2,
            scheduled_ms: 100.0,
            sent_ms: Some(100.0),
            end_ms: Some(600.0),
            error: Some(RequestError { class: ErrorClass::HttpStatus, message: "500".into(), status: Some(500) }),
            ..Default::default()
        };
        let s = summarize(&[r0, r1, r2], &SummaryOptions::new());
        assert_eq!((s.attempted, s.completed, s.failed), (3, 2, 1));
        assert_eq!(s.failed_by_class.get(&ErrorClass::HttpStatus), Some(&1));
        assert_eq!(s.window, Window { start_ms: 0.0, end_ms: 1000.0 });
        assert_eq!(s.duration_s, 1.0);
        assert_eq!(s.request_throughput, 2.0);
        assert_eq!(s.input_tokens, 30);
        assert_eq!(s.output_tokens, 5);
        assert_eq!(s.input_throughput, 30.0);
        assert_eq!(s.output_throughput, 5.0);
        assert_eq!(s.total_throughput, 35.0);
        // in flight: 300 + 500 + 500 ms over 1000 ms
        assert!((s.mean_concurrency - 1.3).abs() < 1e-12, "{}", s.mean_concurrency);
        assert_eq!(s.ttft_ms.mean, Some(150.0));
        assert_eq!(s.ttft_ms.p50, Some(150.0));
        assert_eq!(s.tpot_ms.mean, Some(200.0));
        assert_eq!(s.e2e_ms.max, Some(500.0));
        // token-level ITL samples: 100, 100, 300 -> p50 100
        assert_eq!(s.itl_ms.n, 3);
        assert_eq!(s.itl_ms.p50, Some(100.0));
        assert_eq!(
            s.warnings.iter().map(|w| w.code.as_str()).collect::<Vec<_>>(),
            vec!["few_samples", "failed_requests"]
        );
        assert_eq!(
            s.warnings[0].message,
            // p99 from 2 requests (linear: 100 + 0.99 · (200 − 100) = 199) cannot be bounded above:
            // 10/(1 − 0.99) = 1000 samples, which for ITL's 3 samples from 2 requests is
            // 1000 · 2 / 3 = 667 requests, 670 rounded up
            "few samples: p50, p90, p95, p99 of TTFT, TPOT, E2E rest on 2 samples: TTFT p99 199.00 ms, 95% CI \
             [200.00, ∞); TPOT p99 298.00 ms, 95% CI [300.00, ∞); E2E p99 498.00 ms, 95% CI [500.00, ∞); run ≥ 1000 \
             requests to bound p99 (10/(1 − p) samples). p50, p90, p95, p99 of ITL per token, ITL per chunk rest on 3 \
             samples: ITL per token p99 296.00 ms, 95% CI [100.00, ∞); ITL per chunk p99 296.00 ms, 95% CI [100.00, \
             ∞); run ≥ 670 requests to bound p99 (10/(1 − p) samples)"
        );
        assert_eq!(s.verdict, ClientVerdict::Ok);
    }

    #[test]
    fn chunk_itl_parts_from_token_itl_at_the_first_multi_token_event() {
        // two one-token streams (per-chunk gaps = per-token gaps), then one whose second event
        // carries 3 tokens: per token 10, 10 | 30 | 20/3 ×3, 5; per chunk 10, 10 | 30 | 20, 5
        let a = ok(0, 0.0, 0.0, &[10.0, 20.0, 30.0], 1);
        let b = ok(1, 0.0, 0.0, &[40.0, 70.0], 1);
        let mut c = ok(2, 0.0, 0.0, &[100.0, 120.0, 125.0], 1);
        c.event_tokens = vec![1, 3, 1];
        c.output_tokens = Some(5);
        for order in [[&a, &b, &c], [&c, &a, &b]] {
            let s = summarize(&order.map(|r| r.clone()), &SummaryOptions::new());
            assert_eq!((s.chunk_itl_ms.n, s.chunk_itl_ms.max, s.chunk_itl_ms.min), (5, Some(30.0), Some(5.0)));
            assert_eq!(s.chunk_itl_ms.mean, Some(75.0 / 5.0));
            assert_eq!((s.itl_ms.n, s.itl_ms.max, s.itl_ms.min), (7, Some(30.0), Some(5.0)));
            assert!((s.itl_ms.mean.unwrap() - 75.0 / 7.0).abs() < 1e-12);
        }
        // one-token streams only: the two are the same distribution
        let s = summarize(&[a, b], &SummaryOptions::new());
        assert_eq!(s.chunk_itl_ms, s.itl_ms);
        assert_eq!((s.itl_ms.n, s.itl_ms.mean), (3, Some(50.0 / 3.0)));
    }

    #[test]
    fn stream_close_is_apart_from_e2e() {
        // the stream closes 4 ms after the last token (usage chunk and [DONE])
        let mut r0 = ok(0, 0.0, 0.0, &[100.0, 200.0, 300.0], 10);
        r0.end_ms = Some(304.0);
        let r1 = ok(1, 0.0, 0.0, &[50.0, 100.0], 10); // closes with its last token
        let s = summarize(&[r0, r1], &SummaryOptions::new());
        assert_eq!(s.e2e_ms.mean, Some(200.0)); // (300 + 100) / 2
        assert_eq!(s.stream_close_ms.n, 2);
        assert_eq!(s.stream_close_ms.mean, Some(202.0)); // (304 + 100) / 2
        assert_eq!(s.stream_close_ms.max, Some(304.0));
    }

    #[test]
    fn warmup_and_cooldown_by_requests() {
        // sends at 0, 100, 200, 300; each lasts 1000 ms with events every 250 ms
        let recs: Vec<_> = (0..4)
            .map(|i| {
                let s = i as f64 * 100.0;
                ok(i, s, s, &[s + 250.0, s + 500.0, s + 750.0, s + 1000.0], 1)
            })
            .collect();
        let opts = SummaryOptions { warmup: Edge::Requests(1), cooldown: Edge::Requests(1), ..SummaryOptions::new() };
        let s = summarize(&recs, &opts);
        // window: second send (100) to third-to-finish end (1200)
        assert_eq!(s.window, Window { start_ms: 100.0, end_ms: 1200.0 });
        assert_eq!(s.attempted, 2);
        assert_eq!(s.excluded, 2);
        // tokens with event times in [100, 1200]: r0 250..1000 all 4, r1 350..1100 all 4,
        // r2 450..1200 all 4 (edges inclusive), r3 550, 800, 1050 (1300 is out) -> 3
        assert_eq!(s.output_tokens, 4 + 4 + 4 + 3);
    }

    #[test]
    fn cancelled_requests_are_not_failures() {
        let mut r = ok(0, 0.0, 0.0, &[10.0], 1);
        r.error = Some(RequestError { class: ErrorClass::Cancelled, message: "ctrl-c".into(), status: None });
        let s = summarize(&[r, ok(1, 0.0, 0.0, &[10.0, 20.0], 1)], &SummaryOptions::new());
        assert_eq!((s.attempted, s.failed, s.cancelled, s.excluded), (1, 0, 1, 1));
    }

    #[test]
    fn multi_turn_ttft_is_split() {
        let mut a = ok(0, 0.0, 0.0, &[100.0, 110.0], 1);
        a.session = Some(7);
        a.turn = Some(0);
        let mut b = ok(1, 200.0, 200.0, &[500.0, 510.0], 1);
        b.session = Some(7);
        b.turn = Some(1);
        let s = summarize(&[a, b], &SummaryOptions::new());
        assert_eq!(s.ttft_first_turn_ms.unwrap().mean, Some(100.0));
        assert_eq!(s.ttft_later_turns_ms.unwrap().mean, Some(300.0));
        let plain = summarize(&[ok(0, 0.0, 0.0, &[1.0], 1)], &SummaryOptions::new());
        assert!(plain.ttft_first_turn_ms.is_none());
    }

    #[test]
    fn the_lag_limit_is_relative_to_ttft() {
        // 5% of a 50 ms TTFT p50 is 2.5 ms; of 10 ms, 0.5 ms (the 1 ms floor wins)
        assert_eq!(schedule_lag_limit_ms(1.0, Some(50.0)), 2.5);
        assert_eq!(schedule_lag_limit_ms(1.0, Some(10.0)), 1.0);
        assert_eq!(schedule_lag_limit_ms(1.0, None), 1.0);
        assert_eq!(schedule_lag_limit_ms(1.0, Some(f64::NAN)), 1.0);
    }

    /// Ten requests at 4 req/s (every 250 ms), each sent 1.5 ms late, answered `ttft` ms after
    /// its send (then a second token 10 ms later).
    fn four_per_second(ttft: f64) -> Vec<RequestRecord> {
        (0..10)
            .map(|i| {
                let a = i as f64 * 250.0;
                let s = a + 1.5;
                ok(i, a, s, &[s + ttft, s + ttft + 10.0], 1)
            })
            .collect()
    }

    #[test]
    fn a_busy_host_lag_small_against_ttft_is_not_client_bound() {
        let opts = SummaryOptions { offered_rate: Some(4.0), ..SummaryOptions::new() };
        // lag p99 1.5 ms against TTFT p50 50 ms: 3%, under the 2.5 ms limit
        let s = summarize(&four_per_second(50.0), &opts);
        assert_eq!(s.schedule_lag_ms.p99, Some(1.5));
        assert_eq!(s.verdict, ClientVerdict::Ok);
        assert!(s.warnings.iter().all(|w| w.code != WarningCode::ClientBound));
        // the same lag against a 20 ms TTFT: 7.5%, over max(1 ms, 1 ms)
        let s = summarize(&four_per_second(20.0), &opts);
        assert_eq!(s.verdict, ClientVerdict::ClientBound);
        let w = s.warnings.iter().find(|w| w.code == WarningCode::ClientBound).unwrap();
        assert_eq!(
            w.message,
            "sent 4.00 of 4.00 req/s offered; p99 schedule lag 1.50 ms is 8% of TTFT p50 (20.0 ms), over the limit \
             of 1.00 ms (the larger of 1 ms and 5% of TTFT p50), so latencies measured from the schedule are \
             distorted by up to 1.50 ms and the server saw the requests later than planned"
        );
    }

    #[test]
    fn few_samples_advice_is_hand_computed() {
        // p99 50 ms with CI [40, 70] from 100 samples: half-width 20 ms = 40%; (0.4 / 0.1)² = 16
        // times the samples for ±10%: 1600
        assert_eq!(samples_needed(100, 0.99, &[(Some(50.0), [Some(40.0), Some(70.0)])]), (1600, true));
        // already ±4%: 10/(1 − p) = 1000 samples still bound it better
        assert_eq!(samples_needed(100, 0.99, &[(Some(50.0), [Some(48.0), Some(52.0)])]), (1000, false));
        // an open side: the 10/(1 − p) floor
        assert_eq!(samples_needed(100, 0.99, &[(Some(50.0), [Some(40.0), None])]), (1000, false));
        assert_eq!(samples_needed(10, 0.9, &[(Some(5.0), [None, None])]), (100, false));
        assert_eq!([round_up_2(1234), round_up_2(667), round_up_2(95), round_up_2(1000)], [1300, 670, 95, 1000]);
        // a summary of 100 requests: TTFT's p99 CI bounded, TPOT's and E2E's too; the advice
        // follows the widest (TTFT: (70 − 50) / 50)
        let d = |v: f64, lo: f64, hi: f64| Distribution {
            n: 100,
            p50: Some(v / 2.0),
            p90: Some(v * 0.9),
            p95: Some(v * 0.95),
            p99: Some(v),
            p99_ci: Some([Some(lo), Some(hi)]),
            ..Default::default()
        };
        let s = Summary {
            completed: 100,
            ttft_ms: d(50.0, 40.0, 70.0),
            tpot_ms: d(10.0, 9.0, 11.0),
            e2e_ms: d(500.0, 450.0, 550.0),
            ..Default::default()
        };
        assert_eq!(
            few_samples(&s).unwrap(),
            "few samples: p95, p99 of TTFT, TPOT, E2E rest on 100 samples: TTFT p99 50.00 ms, 95% CI [40.00, \
             70.00]; TPOT p99 10.00 ms, 95% CI [9.00, 11.00]; E2E p99 500.00 ms, 95% CI [450.00, 550.00]; run ≥ \
             1600 requests for p99 within about ±10%"
        );
    }

    #[test]
    fn lag_marks_client_bound() {
        let mut recs = Vec::new();
        for i in 0..10 {
            let a = i as f64 * 10.0;
            recs.push(ok(i, a, a + 5.0, &[a + 20.0, a + 30.0], 1));
        }
        let s = summarize(&recs, &SummaryOptions::new());
        assert_eq!(s.schedule_lag_ms.p99, Some(5.0));
        assert_eq!(s.verdict, ClientVerdict::ClientBound);
        assert_eq!(s.warnings[0].code, WarningCode::ClientBound);
    }

    #[test]
    fn closed_loop_gaps_mark_client_bound() {
        // two users, back to back: user 0 waits 1 ms for the client before its second send,
        // user 1 waits 0.5 ms
        let mut recs = vec![
            ok(0, 0.0, 0.0, &[4.0, 10.0], 1),
            ok(1, 0.0, 0.0, &[2.0, 5.0], 1),
            ok(2, 10.0, 11.0, &[15.0, 20.0], 1),
            ok(3, 5.0, 5.5, &[12.0, 20.0], 1),
        ];
        for (r, u) in recs.iter_mut().zip([0, 1, 0, 1]) {
            r.user = Some(u);
        }
        let opts = SummaryOptions { closed_loop: Some(ClosedLoop { requested: 2, users: 2 }), ..SummaryOptions::new() };
        let s = summarize(&recs, &opts);
        let c = s.load_check.unwrap();
        // gaps 1 + 0.5 over the users' spans between sends 11 + 5.5
        assert!((c.gap_share - 1.5 / 16.5).abs() < 1e-12, "{}", c.gap_share);
        assert_eq!(s.worker_gap_ms.n, 2);
        assert_eq!(s.worker_gap_ms.max, Some(1.0));
        // both users active from 0 to 20 ms: in flight 10 + 9 and 5 + 14.5 ms
        assert!((c.mean_in_flight.unwrap() - 38.5 / 20.0).abs() < 1e-12);
        assert_eq!(c.mean_thinking, Some(0.0));
        assert_eq!(s.verdict, ClientVerdict::ClientBound);
        assert!(s.warnings[0].message.contains("did not keep its 2 users busy"), "{}", s.warnings[0].message);
        // a closed loop's achieved rate is sends per second of the window: 4 over 20 ms
        assert_eq!(s.achieved_rate, Some(200.0));
        // the same with 10 µs gaps is fine
        recs[2].sent_ms = Some(10.01);
        recs[3].sent_ms = Some(5.01);
        let s = summarize(&recs, &opts);
        assert_eq!(s.verdict, ClientVerdict::Ok);
        assert!(s.load_check.unwrap().gap_share < 0.002);
    }

    #[test]
    fn distrusted_server_counts_are_tallied_and_left_out_of_the_comparison() {
        use crate::plausible::judge_usage;
        // two requests whose usage says 3 completion tokens for 16 events; one also 999,999
        // prompt tokens for 212 bytes; a third whose counts are honest
        let mut recs: Vec<RequestRecord> = (0..3).map(|i| ok(i, 0.0, 0.0, &[1.0; 16], 16)).collect();
        for (i, r) in recs.iter_mut().enumerate() {
            let (p, c) = if i == 2 { (16, 16) } else { (if i == 0 { 999_999 } else { 16 }, 3) };
            r.input_tokens_server = Some(p);
            r.output_tokens_server = Some(c);
            r.input_tokens_client = Some(16);
            r.output_tokens_client = Some(16);
            r.distrusted_counts = judge_usage(Some(p), Some(c), 16, 212);
        }
        let s = summarize(&recs, &SummaryOptions::new());
        let t = &s.token_counts.distrusted;
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].first.field.as_str(), t[0].requests), ("completion_tokens", 2));
        assert_eq!((t[1].first.field.as_str(), t[1].requests, t[1].first.server), ("prompt_tokens", 1, 999_999));
        // only the believed counts are compared: outputs of request 2 alone, prompts of 1 and 2
        assert_eq!((s.token_counts.output.requests, s.token_counts.output.diff_pct), (1, Some(0.0)));
        assert_eq!((s.token_counts.input.requests, s.token_counts.input.server_total), (2, 32));
        let w = s.warnings.iter().find(|w| w.code == WarningCode::ImplausibleServerCounts).expect("warned");
        assert!(
            w.message.contains("2 requests, first completion_tokens 3 for a stream of 16 content events"),
            "{}",
            w.message
        );
        assert!(w.message.contains("prompt_tokens 999999 for a request of 212 bytes"), "{}", w.message);
    }

    #[test]
    fn waits_the_server_asked_for_are_not_the_clients() {
        use crate::record::{Attempt, RequestError};
        // two busy users; user 0's second request (ready at 10) was first sent at 10.01, got a
        // 429 at 11 and was resent at 1011 after `Retry-After: 1`; its stream ends at 1020
        let mut recs = two_busy_users();
        recs[2].attempts = vec![Attempt {
            sent_ms: 10.01,
            end_ms: 11.0,
            error: RequestError { class: ErrorClass::HttpStatus, message: "HTTP 429".into(), status: Some(429) },
        }];
        recs[2].reconnects = 1;
        recs[2].sent_ms = Some(1011.0);
        recs[2].event_ms = vec![1015.0, 1020.0];
        recs[2].end_ms = Some(1020.0);
        let opts = SummaryOptions { closed_loop: Some(ClosedLoop { requested: 2, users: 2 }), ..SummaryOptions::new() };
        let s = summarize(&recs, &opts);
        let c = s.load_check.unwrap();
        // worker gaps 0.01 and 0.01 ms over the spans between first sends 10.01 + 5.01
        assert!((c.gap_share - 0.02 / 15.02).abs() < 1e-12, "{}", c.gap_share);
        assert_eq!(s.worker_gap_ms.max.map(|m| (m * 1e6).round() / 1e6), Some(0.01));
        // both users active from 0 to 20 ms (user 1's last end): user 0 retrying from 10.01 on
        // (9.99 ms of it in the span), in flight 10 ms; user 1 in flight 5 + 14.99 ms
        let retrying = c.mean_retrying.expect("a request was retried");
        assert!((retrying - 9.99 / 20.0).abs() < 1e-9, "{retrying}");
        assert!((c.mean_in_flight.unwrap() - 29.99 / 20.0).abs() < 1e-9, "{c:?}");
        assert!((c.busy_users().unwrap() - 39.98 / 20.0).abs() < 1e-9, "{c:?}");
        assert_eq!(s.verdict, ClientVerdict::Ok);
        // the wait itself is reported: 1011 − 11 = 1000 ms for the one request retried
        let w = s.retry_wait_ms.as_ref().expect("retry waits");
        assert_eq!((w.n, w.max), (1, Some(1000.0)));
        // and the schedule lag counts to the first send
        assert!(s.schedule_lag_ms.max.unwrap() < 0.02, "{:?}", s.schedule_lag_ms.max);
    }

    #[test]
    fn an_open_loop_retried_by_the_server_is_not_behind_its_schedule() {
        use crate::record::{Attempt, RequestError};
        // 1 req/s for 10 s, each sent on time; every other one meets a 429 and waits 2 s
        let recs: Vec<RequestRecord> = (0..10)
            .map(|i| {
                let a = i as f64 * 1000.0;
                let mut r = ok(i, a, a, &[a + 50.0, a + 60.0], 1);
                if i % 2 == 1 {
                    r.attempts = vec![Attempt {
                        sent_ms: a,
                        end_ms: a + 1.0,
                        error: RequestError {
                            class: ErrorClass::HttpStatus,
                            message: String::new(),
                            status: Some(429),
                        },
                    }];
                    r.reconnects = 1;
                    r.sent_ms = Some(a + 2001.0);
                    r.event_ms = vec![a + 2051.0, a + 2061.0];
                    r.end_ms = Some(a + 2061.0);
                }
                r
            })
            .collect();
        let opts = SummaryOptions { offered_rate: Some(1.0), ..SummaryOptions::new() };
        let s = summarize(&recs, &opts);
        assert_eq!(s.schedule_lag_ms.p99, Some(0.0));
        assert_eq!(s.achieved_rate, Some(1.0));
        assert_eq!(s.verdict, ClientVerdict::Ok, "{:?}", s.warnings);
        assert_eq!(s.retry_wait_ms.as_ref().map(|d| (d.n, d.mean)), Some((5, Some(2000.0))));
    }

    /// Two users back to back from 0 to 20 ms, sends 10 µs after each reply: no worker gap.
    fn two_busy_users() -> Vec<RequestRecord> {
        let mut recs = vec![
            ok(0, 0.0, 0.0, &[4.0, 10.0], 1),
            ok(1, 0.0, 0.0, &[2.0, 5.0], 1),
            ok(2, 10.0, 10.01, &[15.0, 20.0], 1),
            ok(3, 5.0, 5.01, &[12.0, 20.0], 1),
        ];
        for (r, u) in recs.iter_mut().zip([0, 1, 0, 1]) {
            r.user = Some(u);
        }
        recs
    }

    #[test]
    fn the_load_check_counts_the_users_that_ran() {
        // 16 users asked for, but 2 requests' worth of sessions per user: 2 users ran
        let opts =
            SummaryOptions { closed_loop: Some(ClosedLoop { requested: 16, users: 2 }), ..SummaryOptions::new() };
        let s = summarize(&two_busy_users(), &opts);
        let c = s.load_check.unwrap();
        assert_eq!((c.requested_concurrency, c.users), (16, 2));
        // both users active from 0 to 20 ms: in flight (10 + 9.99) + (5 + 14.99) ms over 20 ms
        let f = c.mean_in_flight.expect("every user that ran was active");
        assert!((f - 39.98 / 20.0).abs() < 1e-9, "{f}");
        assert_eq!(s.verdict, ClientVerdict::Ok);
        // compared with the 16 asked for, 2 in flight would read as held back
        let wrong = SummaryOptions { closed_loop: Some(ClosedLoop { requested: 16, users: 16 }), ..opts };
        assert_eq!(summarize(&two_busy_users(), &wrong).load_check.unwrap().mean_in_flight, None);
    }

    #[test]
    fn users_neither_in_flight_nor_thinking_mark_client_bound() {
        let check = |gap_share, in_flight, thinking| LoadCheck {
            requested_concurrency: 10,
            users: 10,
            mean_in_flight: in_flight,
            mean_thinking: thinking,
            mean_retrying: None,
            gap_share,
        };
        // 8.5 in flight + 0.4 thinking = 8.9 < 0.9 · 10, though only 2% of time is in gaps
        assert!(check(0.02, Some(8.5), Some(0.4)).held_back());
        // 8.7 + 0.4 = 9.1: kept busy
        assert!(!check(0.02, Some(8.7), Some(0.4)).held_back());
        // no span with every user active: the gap share decides alone
        assert!(!check(0.02, None, None).held_back());
        assert!(check(0.06, None, None).held_back());
        // think time is not the client's doing: 3 in flight and 6.5 thinking of 10 is busy
        assert!(!check(0.01, Some(3.0), Some(6.5)).held_back());
    }

    #[test]
    fn a_late_runtime_marks_client_bound_with_the_reason() {
        let opts = SummaryOptions { closed_loop: Some(ClosedLoop { requested: 2, users: 2 }), ..SummaryOptions::new() };
        let calm = RuntimeLag { n: 400, p50: 0.6, p99: 1.2, max: 3.0 };
        let s = summarize(&two_busy_users(), &SummaryOptions { runtime_lag: Some(calm), ..opts.clone() });
        assert_eq!((s.verdict, s.runtime_lag_ms), (ClientVerdict::Ok, Some(calm)));
        // p99 6 ms > 5 ms: the users were busy, but their replies were read late
        let starved = RuntimeLag { n: 400, p50: 1.0, p99: 6.0, max: 31.0 };
        let s = summarize(&two_busy_users(), &SummaryOptions { runtime_lag: Some(starved), ..opts });
        assert_eq!(s.verdict, ClientVerdict::ClientBound);
        let w = &s.warnings[0];
        assert_eq!(w.code, WarningCode::ClientBound);
        assert!(w.message.starts_with("the client's async runtime woke 6.0 ms late at p99"), "{}", w.message);
        // an open loop too
        let recs: Vec<_> =
            (0..10).map(|i| ok(i, i as f64 * 10.0, i as f64 * 10.0, &[i as f64 * 10.0 + 5.0], 1)).collect();
        let open = SummaryOptions { runtime_lag: Some(starved), ..SummaryOptions::new() };
        assert_eq!(summarize(&recs, &open).verdict, ClientVerdict::ClientBound);
    }

    #[test]
    fn bookkeeping_overflow_warns() {
        let b = Bookkeeping { finished: 90, overflowed: 10, skipped: 10 };
        let s = summarize(&two_busy_users(), &SummaryOptions { bookkeeping: Some(b), ..SummaryOptions::new() });
        assert_eq!(s.bookkeeping, Some(b));
        let w = s.warnings.iter().find(|w| w.code == WarningCode::BookkeepingOverflow).expect("a warning");
        assert!(w.message.contains("10 records"), "{}", w.message);
        let fine = Bookkeeping { overflowed: 0, skipped: 0, ..b };
        let s = summarize(&two_busy_users(), &SummaryOptions { bookkeeping: Some(fine), ..SummaryOptions::new() });
        assert!(!s.warnings.iter().any(|w| w.code == WarningCode::BookkeepingOverflow));
    }

    #[test]
    fn streams_left_open_after_done_warn() {
        let a = AfterDone { drained: 7, left_open: 3 };
        let s = summarize(&two_busy_users(), &SummaryOptions { after_done: Some(a), ..SummaryOptions::new() });
        assert_eq!(s.streams_after_done, Some(a));
        let w = s.warnings.iter().find(|w| w.code == WarningCode::StreamsLeftOpen).expect("a warning");
        assert!(w.message.starts_with("the server kept 3 streams open"), "{}", w.message);
        // drained at once: nothing to say
        let a = AfterDone { drained: 7, left_open: 0 };
        let s = summarize(&two_busy_users(), &SummaryOptions { after_done: Some(a), ..SummaryOptions::new() });
        assert!(!s.warnings.iter().any(|w| w.code == WarningCode::StreamsLeftOpen));
        assert_eq!(AfterDone { drained: 1, left_open: 1 } + a, AfterDone { drained: 8, left_open: 1 });
    }

    #[test]
    fn token_count_disagreement_warns() {
        let mut r = ok(0, 0.0, 0.0, &[1.0, 2.0], 1);
        r.output_tokens_client = Some(110);
        r.output_tokens_server = Some(100);
        let s = summarize(&[r], &SummaryOptions::new());
        assert_eq!(s.token_counts.output.diff_pct, Some(10.0));
        assert!(s.warnings.iter().any(|w| w.code == WarningCode::TokenCountMismatch));
        assert!(!s.warnings.iter().any(|w| w.code == WarningCode::InputTokenCountMismatch));
        // prompts: 80 counted here vs 100 by the server is −20%
        let mut r = ok(0, 0.0, 0.0, &[1.0, 2.0], 1);
        r.input_tokens_client = Some(80);
        r.input_tokens_server = Some(100);
        let s = summarize(&[r.clone()], &SummaryOptions::new());
        assert_eq!(s.token_counts.input.diff_pct, Some(-20.0));
        assert!(
            !s.warnings.iter().any(|w| w.code == WarningCode::InputTokenCountMismatch),
            "chat: the template differs"
        );
        let s = summarize(&[r], &SummaryOptions { compare_input_counts: true, ..SummaryOptions::new() });
        assert!(s.warnings.iter().any(|w| w.code == WarningCode::InputTokenCountMismatch));
    }
}
