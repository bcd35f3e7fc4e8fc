//! Summaries in bounded memory: records fed one at a time as they finish, and the per-request
//! records a result document keeps (`--records all|sample:N|none`).
//!
//! A [`Collector`] takes every record of a run. While the run holds at most its record cap it
//! keeps them all and summarizes them with [`summarize`] at the end: results are exactly those of
//! a batch summary. Past the cap, when the summary can be computed in one pass (no warm-up or
//! cool-down edge, no SLO, an open loop: see [`streamable`]), it folds every record into running
//! sums and bounded [`Samples`] (exact up to their limit, then a sketch) and keeps a seeded uniform
//! sample of the records (reservoir sampling); otherwise it keeps every record, as a batch summary
//! needs them, and samples them only at the end. Either way the document says what it kept
//! ([`RecordsKept`]).
//!
//! In one pass the window is the whole run (first send to last completion), exactly as the batch
//! summary's without edges: every measured record is inside it.

use crate::record::RequestRecord;
use crate::records::{RecordsKept, RecordsMode};
use crate::summary::{Counted, Dists, Edge, Summary, SummaryOptions, Window, finish, is_cancelled, summarize};

/// Entries a one-pass summary keeps exactly per metric before it sketches them (1.6 MB each):
/// a run past the record cap is summarized in memory that no longer grows with it.
pub const ONE_PASS_EXACT_LIMIT: usize = 100_000;

/// Whether a summary can be computed in one pass: no warm-up or cool-down edge (the window is the
/// whole run), no SLO (its smoothed goodput needs every record in time order), an open loop (the
/// closed-loop check follows each user's requests).
pub fn streamable(opts: &SummaryOptions) -> bool {
    opts.warmup == Edge::None && opts.cooldown == Edge::None && opts.slo.is_none() && opts.closed_loop.is_none()
}

/// A tiny seeded generator (SplitMix64) for the reservoir: the sample depends only on the seed
/// and the order the records came in.
#[derive(Clone, Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n ≥ 1), by rejection (no modulo bias).
    fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// Running sums of a one-pass summary (the batch summary's loop, record by record).
#[derive(Default)]
struct Acc {
    s: Summary,
    d: Dists,
    any_turn: bool,
    first: Option<f64>,
    last: Option<f64>,
    in_flight_ms: f64,
    completions: u64,
    /// (min, max) of scheduled, sent, and sent less cap wait over measured sends, and their count.
    sends: u64,
    spans: [(f64, f64); 3],
    /// Every POST, by cause.
    posts: crate::sends::Sends,
}

impl Acc {
    fn new(limit: Option<usize>) -> Self {
        Acc { d: Dists::with_limit(limit), spans: [(f64::INFINITY, f64::NEG_INFINITY); 3], ..Default::default() }
    }

    fn add(&mut self, r: &RequestRecord) {
        let start = r.first_sent_ms().unwrap_or(r.scheduled_ms);
        let end = r.end_ms.or(r.last_event_ms()).unwrap_or(start);
        self.first = Some(self.first.map_or(start, |f| f.min(start)));
        self.last = Some(self.last.map_or(end, |l| l.max(end)));
        self.any_turn |= r.turn.is_some();
        self.posts.add(r);
        let s = &mut self.s;
        // the window is the whole run: every record sent and not cancelled is measured
        if r.sent_ms.is_none() || is_cancelled(r) {
            s.excluded += 1;
            s.cancelled += u64::from(is_cancelled(r));
        } else {
            s.attempted += 1;
            if let Some(t) = r.first_sent_ms() {
                self.sends += 1;
                for (k, v) in [r.scheduled_ms, t, t - r.cap_wait_ms].into_iter().enumerate() {
                    self.spans[k] = (self.spans[k].0.min(v), self.spans[k].1.max(v));
                }
            }
            self.d.add(s, r);
        }
        // throughput: the whole run is the window, so every token and completion counts
        if let (Some(sent), Some(end)) = (r.sent_ms, r.end_ms.or(r.last_event_ms())) {
            let overlap = end - sent;
            if overlap > 0.0 {
                self.in_flight_ms += overlap;
            }
        }
        if r.is_success() {
            if r.last_event_ms().or(r.end_ms).is_some() {
                self.completions += 1;
            }
            if r.first_event_ms().is_some() {
                s.input_tokens += r.input_tokens.unwrap_or(0);
            }
            s.output_tokens += r.event_tokens.iter().take(r.event_ms.len()).map(|&m| m as u64).sum::<u64>();
        }
    }

    fn finish(mut self, opts: &SummaryOptions) -> Summary {
        let first = self.first.unwrap_or(0.0);
        let window = Window { start_ms: first, end_ms: self.last.unwrap_or(first).max(first) };
        let mut s = std::mem::take(&mut self.s);
        s.window = window;
        s.duration_s = window.seconds();
        let n = self.sends;
        let rate_of = |(lo, hi): (f64, f64)| (n >= 2 && hi > lo).then(|| (n - 1) as f64 / ((hi - lo) / 1000.0));
        let counted = Counted {
            completions: self.completions,
            in_flight_ms: self.in_flight_ms,
            achieved_rate: rate_of(self.spans[1]),
            scheduled_rate: rate_of(self.spans[0]),
            client_rate: rate_of(self.spans[2]),
            posts: self.posts,
            any_turn: self.any_turn,
        };
        finish(s, self.d, opts, counted, |_| {})
    }
}

/// Takes a run's records one at a time (in any order) and ends with its summary and the records
/// its document keeps. See the module doc.
pub struct Collector {
    opts: SummaryOptions,
    mode: RecordsMode,
    cap: u64,
    /// Every record (batch mode) or the reservoir (one-pass mode).
    records: Vec<RequestRecord>,
    acc: Option<Acc>,
    total: u64,
    rng: SplitMix,
    exact_limit: Option<usize>,
    /// Output tokens of every record, as the client counted them (for cross-checks against the
    /// server's counters).
    output_tokens: u64,
    /// [`Collector::finish`] also summarizes the whole run when an edge narrowed the window.
    whole_run: bool,
}

impl Collector {
    /// A collector for a run summarized with `opts`, keeping records per `mode`, its sample
    /// drawn with `seed`.
    pub fn new(opts: SummaryOptions, mode: RecordsMode, seed: u64) -> Self {
        Collector {
            opts,
            mode,
            cap: mode.cap().max(1),
            records: Vec::new(),
            acc: None,
            total: 0,
            rng: SplitMix(seed ^ 0x5EED_0F2E_C02D_5A17),
            exact_limit: None,
            output_tokens: 0,
            whole_run: true,
        }
    }

    /// Skips the summary over the whole run (`finish` then gives `None` for it): for a caller
    /// that keeps only the windowed summary.
    pub fn without_whole_run(mut self) -> Self {
        self.whole_run = false;
        self
    }

    /// The options the summary will be computed with: what is known only once the run has ended
    /// (the runtime's lag, the bookkeeping) is set here before [`Collector::finish`].
    pub fn options_mut(&mut self) -> &mut SummaryOptions {
        &mut self.opts
    }

    /// Output tokens of every record seen so far (`output_tokens`, as the client counted them).
    pub fn output_tokens(&self) -> u64 {
        self.output_tokens
    }

    /// Keeps at most `limit` exact samples per metric in a one-pass summary (default
    /// [`ONE_PASS_EXACT_LIMIT`]; tests lower it to exercise the sketch).
    pub fn with_exact_limit(mut self, limit: usize) -> Self {
        self.exact_limit = Some(limit);
        self
    }

    /// Keeps at most `cap` records before the one-pass summary takes over (tests lower it; the
    /// mode's own cap otherwise).
    pub fn with_record_cap(mut self, cap: u64) -> Self {
        self.cap = cap.max(1);
        self
    }

    /// Records seen so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether the summary is being computed in one pass (the run passed the record cap).
    pub fn is_streaming(&self) -> bool {
        self.acc.is_some()
    }

    /// Adds one finished record.
    pub fn push(&mut self, r: RequestRecord) {
        self.push_returning(r);
    }

    /// [`Collector::push`], handing back a record it does not keep (this one, or a kept one it
    /// replaced) so that its caller may reuse its buffers. Once the summary is one-pass, every
    /// record is either kept or handed back.
    pub fn push_returning(&mut self, r: RequestRecord) -> Option<RequestRecord> {
        self.total += 1;
        self.output_tokens += r.output_tokens.unwrap_or(0);
        if let Some(acc) = &mut self.acc {
            acc.add(&r);
            return self.offer(r);
        }
        if self.total <= self.cap || !streamable(&self.opts) {
            self.records.push(r);
            return None;
        }
        // past the cap: fold what was kept into a one-pass summary and sample from here on
        let mut acc = Acc::new(Some(self.exact_limit.unwrap_or(ONE_PASS_EXACT_LIMIT)));
        for k in &self.records {
            acc.add(k);
        }
        acc.add(&r);
        self.acc = Some(acc);
        if self.mode == RecordsMode::None {
            self.records = Vec::new();
        }
        self.offer(r)
    }

    /// Reservoir sampling (Algorithm R): record number `total` replaces a kept one with
    /// probability `keep / total`. Returns the record not kept (this one or the one replaced).
    fn offer(&mut self, r: RequestRecord) -> Option<RequestRecord> {
        let keep = self.mode.cap().min(self.cap);
        if keep == 0 {
            return Some(r);
        }
        if (self.records.len() as u64) < keep {
            self.records.push(r);
            return None;
        }
        let j = self.rng.below(self.total);
        if j < keep {
            return Some(std::mem::replace(&mut self.records[j as usize], r));
        }
        Some(r)
    }

    /// The summary, the summary over the whole run when an edge narrowed the window (as
    /// `goodput_results::summaries`), the kept records in send order, and what was kept.
    pub fn finish(mut self) -> (Summary, Option<Summary>, Vec<RequestRecord>, RecordsKept) {
        let (summary, full) = match self.acc.take() {
            Some(acc) => (acc.finish(&self.opts), None),
            None => {
                self.records.sort_by_key(|r| r.id);
                let s = summarize(&self.records, &self.opts);
                let edged = self.opts.warmup != Edge::None || self.opts.cooldown != Edge::None;
                let full = (self.whole_run && edged).then(|| {
                    summarize(
                        &self.records,
                        &SummaryOptions { warmup: Edge::None, cooldown: Edge::None, ..self.opts.clone() },
                    )
                });
                // batch mode held everything: sample now
                let keep = self.mode.cap();
                if (self.records.len() as u64) > keep {
                    let all = std::mem::take(&mut self.records);
                    self.total = 0;
                    for r in all {
                        self.total += 1;
                        self.offer(r);
                    }
                }
                (s, full)
            }
        };
        let mut records = self.records;
        records.sort_by_key(|r| r.id);
        let kept = RecordsKept { mode: self.mode.name().into(), kept: records.len() as u64, total: self.total };
        (summary, full, records, kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ErrorClass, RequestError, TokenSource};
    use crate::stats::PercentileMethod;

    /// A deterministic open-loop run: request `i` sent at 20·i ms, TTFT 50 + (i·37 mod 90) ms,
    /// then `1 + i mod 7` events carrying `1 + (i + k) mod 3` tokens each, 5 + (i·13 mod 11) ms
    /// apart; every 17th request fails.
    fn run(n: u64) -> Vec<RequestRecord> {
        (0..n)
            .map(|i| {
                let sent = 20.0 * i as f64;
                let mut t = sent + 50.0 + ((i * 37) % 90) as f64;
                let k = 1 + i % 7;
                let mut event_ms = Vec::new();
                let mut event_tokens = Vec::new();
                for j in 0..k {
                    event_ms.push(t);
                    event_tokens.push(1 + ((i + j) % 3) as u32);
                    t += 5.0 + ((i * 13) % 11) as f64;
                }
                let out: u64 = event_tokens.iter().map(|&m| m as u64).sum();
                let error = (i % 17 == 16).then(|| RequestError {
                    class: ErrorClass::HttpStatus,
                    message: "503".into(),
                    status: Some(503),
                });
                RequestRecord {
                    id: i,
                    scheduled_ms: sent,
                    sent_ms: Some(sent),
                    event_ms: if error.is_some() { vec![] } else { event_ms.clone() },
                    event_tokens: if error.is_some() { vec![] } else { event_tokens },
                    end_ms: Some(event_ms.last().copied().unwrap() + 1.0),
                    input_tokens: Some(100 + i % 5),
                    input_tokens_source: Some(TokenSource::Server),
                    output_tokens: Some(if error.is_some() { 0 } else { out }),
                    output_tokens_source: Some(TokenSource::Server),
                    error,
                    ..Default::default()
                }
            })
            .collect()
    }

    fn opts() -> SummaryOptions {
        SummaryOptions { offered_rate: Some(50.0), ..SummaryOptions::new() }
    }

    /// Feeds records in completion order (as a driver does), not send order.
    fn collect(c: &mut Collector, records: &[RequestRecord]) {
        let mut by_end: Vec<&RequestRecord> = records.iter().collect();
        by_end.sort_by(|a, b| a.end_ms.unwrap().total_cmp(&b.end_ms.unwrap()).then(a.id.cmp(&b.id)));
        for r in by_end {
            c.push(r.clone());
        }
    }

    fn same(a: &Summary, b: &Summary) {
        // float sums run in another order: compare throughputs to 1e-9 relative, the rest exactly
        let close = |x: f64, y: f64| assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{x} vs {y}");
        close(a.mean_concurrency, b.mean_concurrency);
        let mut a = a.clone();
        a.mean_concurrency = b.mean_concurrency;
        // the steady-state window is a batch summary's only (docs/metrics.md)
        let mut b = b.clone();
        if a.steady.is_none() || b.steady.is_none() {
            (a.steady, b.steady) = (None, None);
        }
        assert_eq!(a, b);
    }

    #[test]
    fn one_pass_equals_the_batch_summary() {
        let records = run(500);
        let batch = summarize(&records, &opts());
        // cap 50: the collector goes one-pass after 50 records
        let mut c = Collector::new(opts(), RecordsMode::All, 7).with_record_cap(50);
        collect(&mut c, &records);
        assert!(c.is_streaming());
        let (s, full, kept, info) = c.finish();
        same(&s, &batch);
        assert_eq!(full, None);
        assert_eq!(info, RecordsKept { mode: "all".into(), kept: 50, total: 500 });
        assert!(info.is_partial());
        assert_eq!(kept.len(), 50);
        assert!(kept.windows(2).all(|w| w[0].id < w[1].id), "kept records are in send order");
        // ITL is weighted per token: 3 tokens in a 9 ms gap count three 3 ms samples
        assert_eq!(s.itl_ms.n, batch.itl_ms.n);
    }

    #[test]
    fn under_the_cap_the_batch_summary_is_used() {
        let records = run(40);
        let mut c = Collector::new(opts(), RecordsMode::All, 1);
        collect(&mut c, &records);
        assert!(!c.is_streaming());
        let (s, _, kept, info) = c.finish();
        assert_eq!(s, summarize(&records, &opts()));
        assert_eq!(kept, records);
        assert_eq!(info, RecordsKept { mode: "all".into(), kept: 40, total: 40 });
    }

    #[test]
    fn sketch_switch_inside_a_one_pass_summary() {
        // exact limit 30 entries per metric: every distribution with more is sketched (1%)
        let records = run(300);
        let batch = summarize(&records, &opts());
        let mut c = Collector::new(opts(), RecordsMode::None, 3).with_record_cap(10).with_exact_limit(30);
        collect(&mut c, &records);
        let (s, _, kept, info) = c.finish();
        assert!(kept.is_empty());
        assert_eq!(info, RecordsKept { mode: "none".into(), kept: 0, total: 300 });
        assert_eq!(s.ttft_ms.estimate.map(|e| e.relative_error), Some(1.0 / 128.0));
        assert_eq!(s.ttft_ms.n, batch.ttft_ms.n);
        assert_eq!(s.ttft_ms.min, batch.ttft_ms.min);
        assert_eq!(s.ttft_ms.max, batch.ttft_ms.max);
        for (a, b) in
            [(s.ttft_ms.p50, batch.ttft_ms.p50), (s.itl_ms.p99, batch.itl_ms.p99), (s.e2e_ms.p90, batch.e2e_ms.p90)]
        {
            let (a, b) = (a.unwrap(), b.unwrap());
            assert!((a - b).abs() <= 0.01 * b + 1e-9, "{a} vs {b}");
        }
        assert_eq!(s.output_tokens, batch.output_tokens);
        assert_eq!(s.completed, batch.completed);
        assert_eq!(batch.ttft_ms.estimate, None);
    }

    #[test]
    fn sampling_is_deterministic_for_a_seed() {
        let records = run(1000);
        let sample = |seed| {
            let mut c = Collector::new(opts(), RecordsMode::Sample(25), seed);
            collect(&mut c, &records);
            let (_, _, kept, info) = c.finish();
            assert_eq!(info, RecordsKept { mode: "sample".into(), kept: 25, total: 1000 });
            kept.iter().map(|r| r.id).collect::<Vec<_>>()
        };
        assert_eq!(sample(5), sample(5));
        assert_ne!(sample(5), sample(6));
        // uniform: the sample spreads over the run, not only its start
        assert!(sample(5).iter().any(|&id| id >= 500));
    }

    #[test]
    fn every_record_pushed_is_kept_or_handed_back_once() {
        let records = run(300);
        for (mode, cap) in [(RecordsMode::Sample(25), 50), (RecordsMode::None, 10), (RecordsMode::All, 40)] {
            let mut c = Collector::new(opts(), mode, 2).with_record_cap(cap);
            let mut back: Vec<u64> = records.iter().filter_map(|r| c.push_returning(r.clone())).map(|r| r.id).collect();
            let (_, _, kept, _) = c.finish();
            back.extend(kept.iter().map(|r| r.id));
            back.sort();
            // none twice; past the switch to one pass (record `cap` on) none is lost
            assert!(back.windows(2).all(|w| w[0] < w[1]), "{mode:?}");
            assert!((cap..300).all(|id| back.binary_search(&id).is_ok()), "{mode:?}");
        }
    }

    #[test]
    fn edges_keep_every_record_for_the_batch_summary() {
        let records = run(200);
        let o = SummaryOptions { warmup: Edge::Requests(10), ..opts() };
        assert!(!streamable(&o));
        let mut c = Collector::new(o.clone(), RecordsMode::Sample(20), 9).with_record_cap(20);
        collect(&mut c, &records);
        assert!(!c.is_streaming());
        let (s, full, kept, info) = c.finish();
        assert_eq!(s, summarize(&records, &o));
        assert_eq!(full, Some(summarize(&records, &SummaryOptions { warmup: Edge::None, ..o.clone() })));
        assert_eq!(kept.len(), 20);
        assert_eq!(info.total, 200);
        // a caller that keeps only the windowed summary gets the same one, and no whole-run one
        let mut c = Collector::new(o.clone(), RecordsMode::Sample(20), 9).with_record_cap(20).without_whole_run();
        collect(&mut c, &records);
        let (lean, full, ..) = c.finish();
        assert_eq!((lean, full), (s, None));
    }

    #[test]
    fn samples_depend_only_on_the_seed_and_the_order() {
        let records = run(300);
        let keep = |mode, seed| {
            let mut c = Collector::new(opts(), mode, seed);
            collect(&mut c, &records);
            let (_, _, kept, info) = c.finish();
            (kept, info)
        };
        let (kept, info) = keep(RecordsMode::Sample(30), 4);
        assert_eq!(info, RecordsKept { mode: "sample".into(), kept: 30, total: 300 });
        assert_eq!(keep(RecordsMode::Sample(30), 4).0, kept);
        assert_ne!(keep(RecordsMode::Sample(30), 5).0, kept);
        let (all, info) = keep(RecordsMode::All, 4);
        assert_eq!((all.len(), info.is_partial()), (300, false));
        let (none, info) = keep(RecordsMode::None, 4);
        assert_eq!((none.len(), info.kept, info.total), (0, 0, 300));
    }

    #[test]
    fn records_mode_parses() {
        assert_eq!("all".parse::<RecordsMode>().unwrap(), RecordsMode::All);
        assert_eq!("none".parse::<RecordsMode>().unwrap(), RecordsMode::None);
        assert_eq!("sample:500".parse::<RecordsMode>().unwrap(), RecordsMode::Sample(500));
        let e = "sample:0".parse::<RecordsMode>().unwrap_err().to_string();
        assert!(e.contains("sample:N"), "{e}");
        assert!("some".parse::<RecordsMode>().is_err());
        // shown as the flag takes it
        for m in [RecordsMode::All, RecordsMode::None, RecordsMode::Sample(500)] {
            assert_eq!(m.to_string().parse::<RecordsMode>().unwrap(), m);
        }
        assert_eq!(RecordsMode::Sample(500).to_string(), "sample:500");
        let _ = PercentileMethod::Linear;
    }
}
