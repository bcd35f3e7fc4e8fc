//! What a measured run shows of the server's iterations. Under iteration-level batching every
//! sequence in an iteration receives its token when the iteration ends, so the token events of
//! all streams, sorted in time, fall into clusters: one per iteration end. Each cluster says
//! which sequences decoded in that iteration and which finished their prefill in it (a stream's
//! first token); the time between two clusters, while some stream was in flight across both, is
//! one iteration's duration. Those are the rows the step cost is fitted to.

use goodput_metrics::RequestRecord;

/// One stream event: when, which stream, whether it is the stream's first.
#[derive(Clone, Copy, Debug)]
struct Event {
    t_ms: f64,
    stream: usize,
    first: bool,
    /// Tokens it carried.
    tokens: u32,
}

/// One observed iteration: what it computed and how long it took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRow {
    /// Prompt tokens prefilled (the prompts of the streams whose first token ends it).
    pub prefill_tokens: f64,
    /// Sequences that decoded a token in it.
    pub decode_seqs: f64,
    /// Σ context (prompt + tokens so far) over the decoding sequences.
    pub context_tokens: f64,
    /// Its duration, seconds.
    pub seconds: f64,
}

/// A request that reached an idle server: its time to first token is the front end plus the
/// iteration that prefilled it (with whatever else that iteration held).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleArrival {
    /// Time to first token, seconds.
    pub ttft_s: f64,
    /// Time to the response's headers, seconds, when the record has it: a server that answers
    /// headers as soon as it has taken a streaming request shows its front end here.
    pub headers_s: Option<f64>,
    /// The iteration that produced its first token.
    pub step: StepRow,
}

/// Everything one run shows: the iterations, the requests that found the server idle, how
/// prefills met running decodes, the most sequences generating together and whether requests
/// queued at that number, and tokens per streamed event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub steps: Vec<StepRow>,
    pub idle_arrivals: Vec<IdleArrival>,
    /// First tokens that ended an iteration in which other sequences were running: with
    /// decode tokens of those sequences in the same cluster (prefill and decode share
    /// iterations), or without (prefills stall decodes).
    pub prefills_mixed: u32,
    pub prefills_alone: u32,
    /// The most sequences seen generating at one iteration end.
    pub max_running: u32,
    /// Iteration ends at which more requests were in flight than `max_running` allows: a
    /// request waited for a sequence slot.
    pub queued_at_max: u32,
    /// The most prompt tokens one iteration prefilled.
    pub max_prefill_tokens: u64,
    /// Tokens per streamed event (median over non-first events).
    pub tokens_per_event: f64,
    /// Streams used, and streams left out (failed, no events, no prompt length).
    pub streams: usize,
    pub left_out: usize,
}

/// The prompt as the client sent it, in the client's tokens (the server's count where the client
/// did not count): the twin prices what a plan asks for, so a server's chat template and its own
/// tokenizer fold into the fitted costs instead of being missed by a prediction made from the
/// plan's prompt lengths.
pub fn prompt_sent(r: &RequestRecord) -> Option<u64> {
    r.input_tokens_client.or(r.input_tokens)
}

/// The clustering window: events of one iteration end arrive within this of each other.
fn window_ms(records: &[&RequestRecord]) -> f64 {
    let mut gaps: Vec<f64> =
        records.iter().flat_map(|r| r.event_ms.windows(2).map(|w| w[1] - w[0])).filter(|g| *g > 0.0).collect();
    if gaps.is_empty() {
        return 0.5;
    }
    let mid = gaps.len() / 2;
    let (_, median, _) = gaps.select_nth_unstable_by(mid, f64::total_cmp);
    (*median * 0.25).clamp(0.05, 2.0)
}

/// The iterations `records` show (one run's: one clock). O(n log n) in the events.
pub fn observe(records: &[RequestRecord]) -> Observed {
    let usable: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.is_success() && !r.event_ms.is_empty() && r.sent_ms.is_some() && prompt_sent(r).is_some())
        .collect();
    let mut o = Observed { streams: usable.len(), left_out: records.len() - usable.len(), ..Default::default() };
    if usable.is_empty() {
        return o;
    }
    let eps = window_ms(&usable);
    let mut events: Vec<Event> = usable
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            r.event_ms.iter().enumerate().map(move |(k, &t)| Event {
                t_ms: t,
                stream: i,
                first: k == 0,
                tokens: r.event_tokens.get(k).copied().unwrap_or(1),
            })
        })
        .collect();
    events.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    let clusters = cluster(&events, eps);
    let s = Streams::of(&usable);
    let mut received = vec![0u64; usable.len()];
    let mut per_event: Vec<u32> = Vec::new();
    let mut prev_end: Option<f64> = None;
    let mut running = Sweep::new(&s.first_ms, &s.last_ms);
    let mut generating = Sweep::new(&s.first_ms, &s.last_ms);
    for c in &clusters {
        let end = events[c.start].t_ms;
        let mut step = StepRow { prefill_tokens: 0.0, decode_seqs: 0.0, context_tokens: 0.0, seconds: 0.0 };
        let mut firsts: Vec<usize> = Vec::new();
        let mut decoded: Vec<usize> = Vec::new();
        for e in &events[c.clone()] {
            if firsts.contains(&e.stream) || decoded.contains(&e.stream) {
                continue; // one iteration, one token event per stream
            }
            if e.first {
                step.prefill_tokens += s.prompt[e.stream];
                firsts.push(e.stream);
            } else {
                step.decode_seqs += 1.0;
                step.context_tokens += s.prompt[e.stream] + received[e.stream] as f64;
                decoded.push(e.stream);
            }
        }
        for e in &events[c.clone()] {
            received[e.stream] += e.tokens as u64;
            if !e.first {
                per_event.push(e.tokens);
            }
        }
        // streams in the middle of generating across this iteration end, and generating at it
        let across = running.count(end - eps, end + eps, false);
        let at = generating.count(end + eps, end - eps, true);
        o.max_running = o.max_running.max(at as u32);
        o.max_prefill_tokens = o.max_prefill_tokens.max(step.prefill_tokens as u64);
        if !firsts.is_empty() && across > 0 {
            if step.decode_seqs > 0.0 {
                o.prefills_mixed += 1;
            } else {
                o.prefills_alone += 1;
            }
        }
        if let Some(start) = prev_end
            && end > start
            && s.busy_between(start + eps, end - eps)
        {
            o.steps.push(StepRow { seconds: (end - start) / 1e3, ..step });
        }
        // a first token alone, with nothing generated since its request was sent, nor another
        // request sent meanwhile (whose intake would share the server's time): an idle server
        for &x in firsts.iter().filter(|_| firsts.len() == 1) {
            let sent = s.sent_ms[x];
            if prev_end.is_none_or(|p| p <= sent) && !s.busy_between(sent, end - eps) && !s.sent_within(sent, end) {
                let headers_s = s.headers_ms[x].map(|h| (h - sent) / 1e3);
                o.idle_arrivals.push(IdleArrival { ttft_s: (s.first_ms[x] - sent) / 1e3, headers_s, step });
            }
        }
        prev_end = Some(end);
    }
    o.queued_at_max = s.queued_at(&clusters, &events, o.max_running, eps);
    o.tokens_per_event = median_u32(&mut per_event).unwrap_or(1.0);
    o
}

/// Per stream: when it was sent, its first and last events, its prompt; and for the busy test,
/// streams sorted by first event with the latest last event among them so far.
struct Streams {
    sent_ms: Vec<f64>,
    /// `sent_ms`, sorted.
    sent_sorted: Vec<f64>,
    headers_ms: Vec<Option<f64>>,
    first_ms: Vec<f64>,
    last_ms: Vec<f64>,
    prompt: Vec<f64>,
    /// First events sorted, and the prefix maximum of last events in that order.
    by_first: Vec<f64>,
    latest_last: Vec<f64>,
}

impl Streams {
    fn of(usable: &[&RequestRecord]) -> Self {
        let first_ms: Vec<f64> = usable.iter().map(|r| r.event_ms[0]).collect();
        let last_ms: Vec<f64> = usable.iter().map(|r| *r.event_ms.last().expect("non-empty")).collect();
        let mut order: Vec<usize> = (0..usable.len()).collect();
        order.sort_by(|&a, &b| first_ms[a].total_cmp(&first_ms[b]));
        let by_first = order.iter().map(|&i| first_ms[i]).collect();
        let mut latest = f64::NEG_INFINITY;
        let latest_last = order
            .iter()
            .map(|&i| {
                latest = latest.max(last_ms[i]);
                latest
            })
            .collect();
        Streams {
            sent_ms: usable.iter().map(|r| r.sent_ms.expect("filtered")).collect(),
            headers_ms: usable.iter().map(|r| r.headers_ms).collect(),
            sent_sorted: {
                let mut v: Vec<f64> = usable.iter().map(|r| r.sent_ms.expect("filtered")).collect();
                v.sort_by(f64::total_cmp);
                v
            },
            prompt: usable.iter().map(|r| prompt_sent(r).expect("filtered") as f64).collect(),
            first_ms,
            last_ms,
            by_first,
            latest_last,
        }
    }

    /// Some stream had generated by `from` and generated again at or after `to`: the server
    /// iterated throughout.
    fn busy_between(&self, from: f64, to: f64) -> bool {
        let n = self.by_first.partition_point(|&f| f <= from);
        n > 0 && self.latest_last[n - 1] >= to
    }

    /// Some request was sent after `from` and before `to`.
    fn sent_within(&self, from: f64, to: f64) -> bool {
        let i = self.sent_sorted.partition_point(|&t| t <= from);
        self.sent_sorted.get(i).is_some_and(|&t| t < to)
    }

    /// Iteration ends at which a request had waited long for its first token while the most
    /// sequences ever seen together were generating: it queued for a sequence slot.
    fn queued_at(&self, clusters: &[std::ops::Range<usize>], events: &[Event], max_running: u32, eps: f64) -> u32 {
        let sent = &self.sent_sorted;
        let mut first = self.first_ms.clone();
        first.sort_by(f64::total_cmp);
        let mut generating = Sweep::new(&self.first_ms, &self.last_ms);
        let mut n = 0;
        for c in clusters {
            let t = events[c.start].t_ms;
            let waiting =
                sent.partition_point(|&x| x < t - 10.0 * eps).saturating_sub(first.partition_point(|&x| x <= t + eps));
            let at = generating.count(t + eps, t + eps, false);
            if waiting > 0 && at as u32 >= max_running {
                n += 1;
            }
        }
        n
    }
}

/// Counts streams with first event before a moving bound and last event after another, as the
/// bounds only grow: each stream enters and leaves once.
struct Sweep {
    by_first: Vec<(f64, usize)>,
    by_last: Vec<(f64, usize)>,
    entered: usize,
    left: usize,
    is_in: Vec<bool>,
    is_out: Vec<bool>,
    count: usize,
}

impl Sweep {
    fn new(first_ms: &[f64], last_ms: &[f64]) -> Self {
        let mut by_first: Vec<(f64, usize)> = first_ms.iter().copied().zip(0..).collect();
        let mut by_last: Vec<(f64, usize)> = last_ms.iter().copied().zip(0..).collect();
        by_first.sort_by(|a, b| a.0.total_cmp(&b.0));
        by_last.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n = first_ms.len();
        Sweep { by_first, by_last, entered: 0, left: 0, is_in: vec![false; n], is_out: vec![false; n], count: 0 }
    }

    /// Streams whose first event is before `first_before` (or at it, with `inclusive`) and
    /// whose last is after `last_after` (or at it, with `inclusive`).
    fn count(&mut self, first_before: f64, last_after: f64, inclusive: bool) -> usize {
        let enters = |f: f64| if inclusive { f <= first_before } else { f < first_before };
        let leaves = |l: f64| if inclusive { l < last_after } else { l <= last_after };
        while self.entered < self.by_first.len() && enters(self.by_first[self.entered].0) {
            let s = self.by_first[self.entered].1;
            self.is_in[s] = true;
            if !self.is_out[s] {
                self.count += 1;
            }
            self.entered += 1;
        }
        while self.left < self.by_last.len() && leaves(self.by_last[self.left].0) {
            let s = self.by_last[self.left].1;
            self.is_out[s] = true;
            if self.is_in[s] {
                self.count -= 1;
            }
            self.left += 1;
        }
        self.count
    }
}

/// Consecutive events within `eps` of the cluster's first are one iteration end.
fn cluster(events: &[Event], eps: f64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=events.len() {
        if i == events.len() || events[i].t_ms - events[start].t_ms > eps {
            out.push(start..i);
            start = i;
        }
    }
    out
}

fn median_u32(v: &mut [u32]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable(mid);
    Some(*m as f64)
}
