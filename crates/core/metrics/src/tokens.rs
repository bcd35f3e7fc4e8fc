//! How many tokens each content event carried, when the server does not say.
//!
//! Rule (docs/metrics.md, "Tokens per content event"): with `N` output tokens over `K` content
//! events, the first event carries one token and the rest are spread over later events in
//! proportion to our tokenizer's count of each delta, rounded by largest remainder so the counts
//! sum to `N`. A content event carried non-empty text, so when `N ≥ K` every event gets at least
//! one token and only the surplus `N − K` is apportioned (by each delta's count beyond one).

/// Splits `total` across weights by largest remainder (ties go to the earlier index).
/// All-zero weights split evenly. The result sums to `total`.
pub fn largest_remainder(total: u64, weights: &[f64]) -> Vec<u64> {
    let n = weights.len();
    if n == 0 {
        return Vec::new();
    }
    let sum: f64 = weights.iter().map(|w| w.max(0.0)).sum();
    let shares: Vec<f64> = if sum > 0.0 {
        weights.iter().map(|w| w.max(0.0) / sum * total as f64).collect()
    } else {
        vec![total as f64 / n as f64; n]
    };
    let mut out: Vec<u64> = shares.iter().map(|s| s.floor() as u64).collect();
    let assigned: u64 = out.iter().sum();
    let mut left = total.saturating_sub(assigned);
    if left > 0 {
        let mut order: Vec<usize> = (0..n).collect();
        // larger fractional part first; stable sort keeps earlier index first on ties
        order.sort_by(|&a, &b| {
            let fa = shares[a] - shares[a].floor();
            let fb = shares[b] - shares[b].floor();
            fb.total_cmp(&fa)
        });
        for &i in order.iter().cycle() {
            if left == 0 {
                break;
            }
            out[i] += 1;
            left -= 1;
        }
    }
    out
}

/// Tokens per content event from the total `n` and the tokenizer's count of each delta.
pub fn apportion(n: u64, delta_counts: &[u64]) -> Vec<u32> {
    let k = delta_counts.len();
    if k == 0 {
        return Vec::new();
    }
    if n == 0 {
        return vec![0; k];
    }
    if k == 1 {
        return vec![n.min(u32::MAX as u64) as u32];
    }
    let rest = &delta_counts[1..];
    let mut out = Vec::with_capacity(k);
    out.push(1u32);
    if n >= k as u64 {
        // every later event gets one token; the surplus follows each delta's count beyond one
        let surplus = n - k as u64;
        let extra: Vec<f64> = rest.iter().map(|&c| c.saturating_sub(1) as f64).collect();
        let extra = if extra.iter().all(|&e| e == 0.0) { rest.iter().map(|&c| c as f64).collect() } else { extra };
        for e in largest_remainder(surplus, &extra) {
            out.push((1 + e).min(u32::MAX as u64) as u32);
        }
    } else {
        // fewer tokens than events (the server's count disagrees with the stream): plain shares
        let w: Vec<f64> = rest.iter().map(|&c| c as f64).collect();
        for e in largest_remainder(n - 1, &w) {
            out.push(e as u32);
        }
    }
    out
}

/// Tokens per content event from cumulative per-chunk usage (`usage.completion_tokens` on each
/// content event). The first event carries its cumulative count; later ones the increase.
pub fn from_cumulative(cumulative: &[u64]) -> Vec<u32> {
    let mut prev = 0u64;
    cumulative
        .iter()
        .map(|&c| {
            let m = c.saturating_sub(prev);
            prev = prev.max(c);
            m.min(u32::MAX as u64) as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_token_per_event() {
        assert_eq!(apportion(4, &[1, 1, 1, 1]), vec![1, 1, 1, 1]);
    }

    #[test]
    fn surplus_follows_delta_counts() {
        // N = 7, K = 3, deltas counted [2, 3, 1]: base [1, 1, 1], surplus 4 over extras [2, 0]
        // -> [1, 1 + 4, 1] = [1, 5, 1]
        assert_eq!(apportion(7, &[2, 3, 1]), vec![1, 5, 1]);
        // N = 10, K = 4, deltas [1, 2, 3, 2]: surplus 6 over extras [1, 2, 1] -> 1.5, 3, 1.5
        // floors [1, 3, 1] (5), one left: remainders .5, 0, .5 -> earlier index wins
        // -> [1, 1+2, 1+3, 1+1] = [1, 3, 4, 2]
        assert_eq!(apportion(10, &[1, 2, 3, 2]), vec![1, 3, 4, 2]);
    }

    #[test]
    fn all_single_deltas_with_surplus_spread_evenly() {
        // server says 5 tokens, 3 events each counted 1: surplus 2 over weights [1, 1] -> [1, 1]
        assert_eq!(apportion(5, &[1, 1, 1]), vec![1, 2, 2]);
    }

    #[test]
    fn fewer_tokens_than_events() {
        // N = 2 over 4 events: first gets 1, one left over weights [1, 1, 1] -> first of them
        assert_eq!(apportion(2, &[1, 1, 1, 1]), vec![1, 1, 0, 0]);
    }

    #[test]
    fn single_event_takes_all() {
        assert_eq!(apportion(9, &[4]), vec![9]);
        assert_eq!(apportion(0, &[1, 1]), vec![0, 0]);
    }

    #[test]
    fn cumulative_usage() {
        assert_eq!(from_cumulative(&[1, 2, 4, 5]), vec![1, 1, 2, 1]);
    }

    proptest::proptest! {
        #[test]
        fn apportion_sums_to_n(n in 0u64..500, d in proptest::collection::vec(0u64..6, 1..60)) {
            let m = apportion(n, &d);
            proptest::prop_assert_eq!(m.len(), d.len());
            proptest::prop_assert_eq!(m.iter().map(|&x| x as u64).sum::<u64>(), n);
            if n >= d.len() as u64 {
                proptest::prop_assert!(m.iter().all(|&x| x >= 1));
                if d.len() > 1 {
                    proptest::prop_assert_eq!(m[0], 1);
                }
            }
        }
    }
}
