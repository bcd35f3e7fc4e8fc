//! How load is offered: closed loop (N users back to back) or open loop (an arrival process).
//! Both the HTTP runner and the simulator read this one description.

use serde::Serialize;

use crate::arrivals::Arrivals;
use crate::think::ThinkTime;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Load {
    /// `concurrency` users, each starting its next session when the previous one ends, after a
    /// pause drawn from `think`.
    Closed { concurrency: usize, think: ThinkTime },
    /// Sessions arrive on their own schedule; at most `max_concurrency` requests in flight (an
    /// arrival over the cap waits for a slot, counted as client queue time, never dropped).
    Open { arrivals: Arrivals, max_concurrency: Option<usize> },
}

impl Load {
    /// `n` users back to back, no pause.
    pub fn closed(n: usize) -> Self {
        Load::Closed { concurrency: n, think: ThinkTime::default() }
    }

    /// Connections worth keeping in the pool.
    pub fn pool_size(&self) -> usize {
        match self {
            Load::Closed { concurrency, .. } => *concurrency,
            Load::Open { max_concurrency, .. } => max_concurrency.unwrap_or(256),
        }
    }

    /// The nominal offered rate of an open loop.
    pub fn offered_rate(&self) -> Option<f64> {
        match self {
            Load::Open { arrivals, .. } => arrivals.rate(),
            Load::Closed { .. } => None,
        }
    }
}
