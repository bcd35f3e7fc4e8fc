//! Compact storage of a record's per-event times and token counts in result documents.
//!
//! A record's `event_ms` and `event_tokens` are written as plain arrays (exact), or, inside
//! [`compact_events`] (large result documents: see `goodput_results::ResultDoc::write`), compactly:
//!
//! - `event_ms`: `{"start": c1, "d_us": [k2, k3, …]}`: the first time exactly (ms), then each next
//!   time as the whole microseconds since the previous *decoded* time, so the decoded times are
//!   within 0.5 µs of the measured ones and the rounding never accumulates;
//! - `event_tokens`: `{"runs": [[m, count], …]}`: run-length pairs (a simulated stream is one
//!   pair, `[1, N]`).
//!
//! Reading accepts both forms, so documents of every version read the same way.

use std::cell::Cell;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

thread_local! {
    static COMPACT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with records serialized in the compact form (on this thread).
pub fn compact_events<T>(f: impl FnOnce() -> T) -> T {
    let was = COMPACT.with(|c| c.replace(true));
    let out = f();
    COMPACT.with(|c| c.set(was));
    out
}

fn compact() -> bool {
    COMPACT.with(|c| c.get())
}

/// The time after `prev` (ms) that `k` whole microseconds encode: the decoder's exact arithmetic.
fn step(prev: f64, k: i64) -> f64 {
    prev + k as f64 / 1000.0
}

/// The deltas of `rest` after `start`, in whole µs, each from the previous *decoded* time.
fn deltas(start: f64, rest: &[f64]) -> impl Iterator<Item = i64> + '_ {
    let mut prev = start;
    rest.iter().map(move |&t| {
        let k = round_i64((t - prev) * 1000.0);
        prev = step(prev, k);
        k
    })
}

/// `x` rounded half away from zero, as [`f64::round`] (saturating), without the library call the
/// baseline x86-64 target makes of it (a document writes hundreds of millions of deltas).
#[inline]
fn round_i64(x: f64) -> i64 {
    if x.abs() >= 4_503_599_627_370_496.0 {
        return x as i64; // 2^52 and up: already whole
    }
    let k = x as i64;
    // exact: x − trunc(x) has no rounding error
    let f = x - k as f64;
    k + i64::from(f >= 0.5) - i64::from(f <= -0.5)
}

/// Decodes the deltas written by [`serialize_times`] (see the module doc).
pub fn decode_times(start: f64, d_us: &[i64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(d_us.len() + 1);
    let mut prev = start;
    out.push(start);
    for &k in d_us {
        prev = step(prev, k);
        out.push(prev);
    }
    out
}

/// Run-length pairs `(value, count)`.
pub fn encode_runs(v: &[u32]) -> Vec<(u32, u64)> {
    let mut runs: Vec<(u32, u64)> = Vec::new();
    for &x in v {
        match runs.last_mut() {
            Some((y, n)) if *y == x => *n += 1,
            _ => runs.push((x, 1)),
        }
    }
    runs
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Times {
    Plain(Vec<f64>),
    Deltas { start: f64, d_us: Vec<i64> },
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Tokens {
    Plain(Vec<u32>),
    Runs { runs: Vec<(u32, u64)> },
}

/// Largest run a document may claim (a reply of more tokens than any model produces is corrupt).
const MAX_RUN: u64 = 1 << 32;

/// [`Times::Deltas`] as written: the deltas computed as they are serialized (a large document has
/// hundreds of millions of them: no vector of them is built).
#[derive(Serialize)]
struct DeltasOut<'a> {
    start: f64,
    d_us: DeltaSeq<'a>,
}

struct DeltaSeq<'a> {
    start: f64,
    rest: &'a [f64],
}

impl Serialize for DeltaSeq<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(deltas(self.start, self.rest))
    }
}

pub fn serialize_times<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
    match v.split_first() {
        Some((&start, rest)) if compact() && !rest.is_empty() => {
            DeltasOut { start, d_us: DeltaSeq { start, rest } }.serialize(s)
        }
        _ => v.serialize(s),
    }
}

pub fn deserialize_times<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(match Times::deserialize(d)? {
        Times::Plain(v) => v,
        Times::Deltas { start, d_us } => decode_times(start, &d_us),
    })
}

pub fn serialize_tokens<S: Serializer>(v: &[u32], s: S) -> Result<S::Ok, S::Error> {
    if compact() && v.len() > 1 { Tokens::Runs { runs: encode_runs(v) }.serialize(s) } else { v.serialize(s) }
}

pub fn deserialize_tokens<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
    Ok(match Tokens::deserialize(d)? {
        Tokens::Plain(v) => v,
        Tokens::Runs { runs } => {
            let n: u64 = runs.iter().map(|&(_, c)| c).sum();
            if n > MAX_RUN || runs.iter().any(|&(_, c)| c == 0) {
                return Err(D::Error::custom("event_tokens: runs must count 1 to 2^32 events in all"));
            }
            runs.iter().flat_map(|&(m, c)| std::iter::repeat_n(m, c as usize)).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RequestRecord;

    #[test]
    fn deltas_round_as_f64_round_does() {
        for x in [0.0, 0.4999999999999999, 0.5, 1.5, 2.5, -0.5, -1.5, -2.4999, 1e-300, -7.0, 123456.5, 1e15 + 0.5] {
            assert_eq!(round_i64(x), x.round() as i64, "{x}");
        }
        assert_eq!(round_i64(f64::NAN), 0);
        assert_eq!(round_i64(1e300), i64::MAX);
    }

    fn rec() -> RequestRecord {
        RequestRecord {
            id: 3,
            scheduled_ms: 1.0,
            sent_ms: Some(2.0),
            event_ms: vec![49.666320710691224, 57.3305904659151, 64.99534929576585, 64.99534929576585, 80.0],
            event_tokens: vec![1, 1, 2, 2, 1],
            end_ms: Some(81.0),
            ..Default::default()
        }
    }

    #[test]
    fn times_by_hand() {
        // 10, 10.0004, 10.0016, 12: deltas 0.4 µs → 0, 1.6 µs → 2 (from 10.0, not 10.0004), 1998.4 → 1998
        let rest = [10.0004, 10.0016, 12.0];
        let d: Vec<i64> = deltas(10.0, &rest).collect();
        assert_eq!(d, [0, 2, 1998]);
        let json = |start, rest: &[f64]| serde_json::to_string(&DeltaSeq { start, rest }).unwrap();
        assert_eq!(json(10.0, &rest), "[0,2,1998]");
        assert_eq!(json(10.0, &[9.5]), "[-500]");
        assert_eq!(json(0.0, &[0.0, 1000.0, 1000.5]), "[0,1000000,500]");
        let back = decode_times(10.0, &d);
        assert_eq!(back[0], 10.0);
        for (a, b) in back.iter().zip([10.0, 10.0004, 10.0016, 12.0]) {
            assert!((a - b).abs() <= 0.0005 + 1e-12, "{a} vs {b}");
        }
        assert_eq!(encode_runs(&[1, 1, 1, 2, 1]), vec![(1, 3), (2, 1), (1, 1)]);
    }

    #[test]
    fn plain_form_is_exact_and_default() {
        let r = rec();
        let j = serde_json::to_value(&r).unwrap();
        assert!(j["event_ms"].is_array() && j["event_tokens"].is_array());
        let back: RequestRecord = serde_json::from_value(j).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn compact_round_trip_within_half_a_microsecond() {
        let r = rec();
        let j = compact_events(|| serde_json::to_value(&r).unwrap());
        assert_eq!(j["event_ms"]["start"], 49.666320710691224);
        assert_eq!(j["event_ms"]["d_us"], serde_json::json!([7664, 7665, 0, 15005]));
        assert_eq!(j["event_tokens"]["runs"], serde_json::json!([[1, 2], [2, 2], [1, 1]]));
        // the flag is scoped
        assert!(serde_json::to_value(&r).unwrap()["event_ms"].is_array());
        let back: RequestRecord = serde_json::from_value(j).unwrap();
        assert_eq!(back.event_tokens, r.event_tokens);
        assert_eq!(back.event_ms.len(), r.event_ms.len());
        for (a, b) in back.event_ms.iter().zip(&r.event_ms) {
            assert!((a - b).abs() <= 0.0005 + 1e-9, "{a} vs {b}");
        }
        // the document's text: the deltas as written by hand
        let text = compact_events(|| serde_json::to_string(&r).unwrap());
        assert!(text.contains(r#""event_ms":{"start":49.666320710691224,"d_us":[7664,7665,0,15005]}"#), "{text}");
        // compact twice: the same text (decoding then encoding is stable)
        let again = compact_events(|| serde_json::to_value(&back).unwrap());
        assert_eq!(again["event_ms"], compact_events(|| serde_json::to_value(&r).unwrap())["event_ms"]);
    }

    #[test]
    fn corrupt_runs_are_refused() {
        let mut j = serde_json::to_value(rec()).unwrap();
        j["event_tokens"] = serde_json::json!({ "runs": [[1, 0]] });
        assert!(serde_json::from_value::<RequestRecord>(j).is_err());
    }
}
