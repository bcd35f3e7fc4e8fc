//! How load is offered: closed loop (N users back to back) or open loop (an arrival process),
//! and the named profiles that choose one. Both the HTTP runner and the simulator read this one
//! description.

use serde::{Deserialize, Serialize};

use crate::arrivals::Arrivals;
use crate::think::ThinkTime;

/// A named load profile (`--profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    Synchronous,
    Concurrent,
    Constant,
    Poisson,
    Gamma,
    Throughput,
    Ramp,
    Sweep,
    Replay,
}

impl Profile {
    /// Every profile, its name and what it does.
    pub const ALL: [(Profile, &'static str, &'static str); 9] = [
        (Profile::Synchronous, "synchronous", "One request at a time."),
        (Profile::Concurrent, "concurrent", "N closed-loop users (--concurrency), optional --think-time."),
        (Profile::Constant, "constant", "Evenly spaced arrivals at --rate."),
        (Profile::Poisson, "poisson", "Poisson arrivals at --rate."),
        (Profile::Gamma, "gamma", "Gamma inter-arrival times at --rate with --burstiness."),
        (Profile::Throughput, "throughput", "Everything at once, bounded by --max-concurrency."),
        (Profile::Ramp, "ramp", "Rate rising linearly from --rate-start to --rate over --ramp-duration."),
        (Profile::Sweep, "sweep", "Synchronous, then throughput, then --sweep-points constant rates between them."),
        (Profile::Replay, "replay", "Arrival times from the dataset, scaled by --time-scale."),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, ..)| *p == self).map(|(_, n, _)| *n).unwrap_or("?")
    }

    /// Whether it is an open loop (arrivals on a schedule).
    pub fn is_open(self) -> bool {
        !matches!(self, Profile::Synchronous | Profile::Concurrent)
    }
}

impl std::str::FromStr for Profile {
    type Err = goodput_metrics::ParseError;

    fn from_str(s: &str) -> Result<Self, goodput_metrics::ParseError> {
        Self::parse_text(s).map_err(|m| goodput_metrics::ParseError::new(s, m))
    }
}

impl Profile {
    fn parse_text(s: &str) -> Result<Self, String> {
        Self::ALL.iter().find(|(_, n, _)| *n == s.trim()).map(|(p, ..)| *p).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|(_, n, _)| *n).collect();
            format!("unknown profile `{s}`; known: {}", names.join(", "))
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Load {
    /// `concurrency` users, each starting its next session when the previous one ends, after a
    /// pause drawn from `think`.
    Closed { concurrency: usize, think: ThinkTime },
    /// Sessions arrive on their own schedule; at most `max_concurrency` requests in flight (an
    /// arrival over the cap waits for a slot, counted as client queue time, never dropped).
    Open { arrivals: Arrivals, max_concurrency: Option<usize> },
}

/// Idle connections an uncapped open loop keeps. Its requests in flight are rate × latency, with
/// no bound: an idle connection costs a file descriptor, while closing one that a later request
/// needs puts a new connection (and a TLS handshake) into that request's TTFT, and once a client
/// falls behind, connecting and closing take the CPU it needs to catch up. (256 churned
/// connections at 5,000 req/s against a zero-delay server: connects were 47% of the client's CPU.)
pub const OPEN_LOOP_POOL: usize = 4096;

impl Load {
    /// `n` users back to back, no pause.
    pub fn closed(n: usize) -> Self {
        Load::Closed { concurrency: n, think: ThinkTime::default() }
    }

    /// Connections worth keeping in the pool: a closed loop's users; an open loop's cap, or
    /// [`OPEN_LOOP_POOL`] without one.
    pub fn pool_size(&self) -> usize {
        match self {
            Load::Closed { concurrency, .. } => *concurrency,
            Load::Open { max_concurrency, .. } => max_concurrency.unwrap_or(OPEN_LOOP_POOL),
        }
    }

    /// The users a closed loop runs within a budget of `requests`: never more users than requests
    /// to send (at least one); `None` for an open loop.
    pub fn users(&self, requests: Option<u64>) -> Option<usize> {
        match self {
            Load::Closed { concurrency, .. } => {
                Some(requests.map_or(*concurrency, |n| (*concurrency).min(n.max(1) as usize)).max(1))
            }
            Load::Open { .. } => None,
        }
    }

    /// Everything arrives at once (`--rate inf`, the throughput profile): without a request
    /// budget such a load never ends sending.
    pub fn is_all_at_once(&self) -> bool {
        matches!(self, Load::Open { arrivals: Arrivals::AllAtOnce, .. })
    }

    /// The nominal offered rate of an open loop.
    pub fn offered_rate(&self) -> Option<f64> {
        match self {
            Load::Open { arrivals, .. } => arrivals.rate(),
            Load::Closed { .. } => None,
        }
    }
}
