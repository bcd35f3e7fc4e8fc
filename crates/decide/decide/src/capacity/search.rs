//! The search itself, without any I/O: which rate to try next given what passed and failed so
//! far. Bracket first (double from the start rate while steps pass, halve while they fail), then
//! bisect the bracket until it is narrower than the precision asked for or the steps run out.

/// Highest rate tried (requests per second).
pub const MAX_RATE: f64 = 1e6;

/// Lowest rate tried: the slowest open loop any command accepts.
pub use goodput_workload::MIN_RATE;

/// The bracket-and-bisect search over request rates, as a state machine: ask [`Search::next`]
/// for a rate, measure it, tell [`Search::record`] whether it held the SLO, repeat until `next`
/// says `None`. A rate that fails where one at or above it had passed (a longer run of the same
/// rate, which outweighs the shorter) withdraws those passes: the bracket reopens below it.
#[derive(Clone, Debug)]
pub struct Search {
    /// The rates that passed, below the lowest that failed.
    passes: Vec<f64>,
    /// The highest rate that passed and the lowest that failed, so far.
    pass: Option<f64>,
    fail: Option<f64>,
    /// The next rate while bracketing; `None` once the bracket is closed (or cannot close).
    bracketing: Option<f64>,
    steps: u32,
    max_steps: u32,
    precision: f64,
}

impl Search {
    /// A search from `start_rate` that stops bisecting when the bracket is narrower than
    /// `precision` of the passing rate, and after `max_steps` steps in all.
    pub fn new(start_rate: f64, precision: f64, max_steps: u32) -> Self {
        Search {
            passes: Vec::new(),
            pass: None,
            fail: None,
            bracketing: Some(start_rate),
            steps: 0,
            max_steps,
            precision,
        }
    }

    /// The next rate to measure, or `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.steps >= self.max_steps {
            return None;
        }
        if let Some(rate) = self.bracketing {
            return Some(rate);
        }
        let (l, h) = self.pass.zip(self.fail)?;
        ((h - l) / l > self.precision).then_some((l + h) / 2.0)
    }

    /// The step at `rate` held the SLO (`passed`) or did not.
    pub fn record(&mut self, rate: f64, passed: bool) {
        self.steps += 1;
        if passed {
            self.passes.push(rate);
        } else {
            let fail = self.fail.map_or(rate, |f| f.min(rate));
            self.fail = Some(fail);
            self.passes.retain(|&p| p < fail);
        }
        self.pass = self.passes.iter().copied().reduce(f64::max);
        let Some(current) = self.bracketing else { return };
        self.bracketing = match (passed, self.pass, self.fail) {
            // a failing rate is known above the passing one: the bracket is closed
            (_, Some(_), Some(_)) => None,
            (true, _, None) => Some(current * 2.0).filter(|r| *r <= MAX_RATE),
            (false, None, _) => Some(current / 2.0).filter(|r| *r >= MIN_RATE),
            _ => None,
        };
    }

    /// The highest rate that passed and the lowest that failed.
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        (self.pass, self.fail)
    }

    /// Steps recorded.
    pub fn steps(&self) -> u32 {
        self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates a search tries against a system whose capacity is `capacity`.
    fn tried(start: f64, capacity: f64, precision: f64, max_steps: u32) -> (Vec<f64>, Search) {
        let mut s = Search::new(start, precision, max_steps);
        let mut rates = Vec::new();
        while let Some(r) = s.next() {
            rates.push(r);
            s.record(r, r <= capacity);
        }
        (rates, s)
    }

    #[test]
    fn brackets_by_doubling_then_bisects() {
        // 1, 2, 4 pass; 8 fails; then 6 (pass), 7 (pass), 7.5 (fail), 7.25 (pass): the bracket
        // [7.25, 7.5] is 3.4% wide, under 5%
        let (rates, s) = tried(1.0, 7.3, 0.05, 20);
        assert_eq!(rates, vec![1.0, 2.0, 4.0, 8.0, 6.0, 7.0, 7.5, 7.25]);
        assert_eq!(s.bracket(), (Some(7.25), Some(7.5)));
    }

    #[test]
    fn brackets_by_halving_when_the_start_fails() {
        // 8 and 4 fail, 2 passes, then 3 passes, 3.5 fails, 3.25 fails, 3.125 passes (4% wide)
        let (rates, s) = tried(8.0, 3.2, 0.05, 20);
        assert_eq!(rates, vec![8.0, 4.0, 2.0, 3.0, 3.5, 3.25, 3.125]);
        assert_eq!(s.bracket(), (Some(3.125), Some(3.25)));
    }

    #[test]
    fn a_rate_that_fails_on_a_longer_run_reopens_the_bracket_below_it() {
        // converged on [7.25, 7.5]; a longer run at 7.25 fails: the bracket is [7, 7.25] (3.6%
        // wide), and the search is over again
        let (_, mut s) = tried(1.0, 7.3, 0.05, 20);
        assert_eq!(s.next(), None);
        s.record(7.25, false);
        assert_eq!(s.bracket(), (Some(7.0), Some(7.25)));
        assert_eq!(s.next(), None);
        // everything that passed fails on a longer run: nothing passes
        let mut s = Search::new(1.0, 0.05, 20);
        s.record(1.0, true);
        s.record(1.0, false);
        assert_eq!(s.bracket(), (None, Some(1.0)));
    }

    #[test]
    fn stops_at_the_step_limit_and_at_the_rate_bounds() {
        let (rates, s) = tried(1.0, 1e9, 0.05, 3);
        assert_eq!(rates, vec![1.0, 2.0, 4.0]);
        assert_eq!(s.bracket(), (Some(4.0), None));
        // everything passes: doubling stops at the highest rate
        let (rates, _) = tried(MAX_RATE / 2.0, f64::INFINITY, 0.05, 50);
        assert_eq!(rates, vec![MAX_RATE / 2.0, MAX_RATE]);
        // nothing passes: halving stops at the lowest
        let (rates, s) = tried(0.004, 0.0, 0.05, 50);
        assert_eq!(rates, vec![0.004, 0.002, 0.001]);
        assert_eq!(s.bracket(), (None, Some(0.001)));
        assert_eq!(s.steps(), 3);
    }
}
