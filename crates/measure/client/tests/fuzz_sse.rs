//! Fuzzing the SSE decoder on stable (proptest; `scripts/fuzz.sh` runs it with a large case
//! count): any bytes, fed in any split, never panic, decode to the same events as the whole input
//! fed at once, and the checked-in corpus (`fuzz/corpus/sse/`) replays clean.

use goodput_client::sse::{SseDecoder, SseEvent};
use proptest::prelude::*;

include!("../../../../fuzz/mutate.rs");

/// Decodes `bytes` cut at `cuts` (positions, clamped and sorted); the events and whether a
/// partial event was left.
fn decode(bytes: &[u8], cuts: &[usize]) -> (Vec<SseEvent>, bool) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort();
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    let mut last = 0;
    for c in cuts {
        d.feed(&bytes[last..c], &mut out);
        last = c;
    }
    d.feed(&bytes[last..], &mut out);
    (out, d.has_partial())
}

fn check(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let whole = decode(bytes, &[]);
    let split = decode(bytes, cuts);
    prop_assert_eq!(&split, &whole, "cuts {:?}", cuts);
    // one byte at a time: the smallest reads a socket can deliver
    let bytewise = {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for b in bytes {
            d.feed(std::slice::from_ref(b), &mut out);
        }
        (out, d.has_partial())
    };
    prop_assert_eq!(&bytewise, &whole);
    Ok(())
}

#[test]
fn corpus_replays() {
    for (name, bytes) in corpus("sse") {
        let (events, _) = decode(&bytes, &[]);
        assert!(!events.is_empty(), "{name}: no events");
        for cut in 0..=bytes.len() {
            let got = decode(&bytes, &[cut]);
            assert_eq!(got.0, events, "{name}: cut at {cut}");
        }
    }
}

/// Found by this target's first runs: none so far. A case that fails goes here by name.
#[test]
fn regressions() {
    for (bytes, cut) in [(&b"\r"[..], 1), (b"\r\n", 1), (b"\xef\xbb", 1), (b"\xef\xbb\xbf\r\n\r\ndata:\r", 2)] {
        check(bytes, &[cut]).unwrap();
    }
}

proptest! {
    #[test]
    fn any_bytes_any_split(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                           cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        check(&bytes, &cuts)?;
    }

    #[test]
    fn mutated_streams_any_split(bytes in mutated("sse", 8),
                                 cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        check(&bytes, &cuts)?;
    }
}
