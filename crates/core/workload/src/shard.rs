//! Shards: one seeded schedule dealt out to `N` processes (`--shard I/N`).
//!
//! Every shard runs the same plan and seed and generates the same global schedule; each sends
//! only its own deterministic slice of it, and the `N` slices together are the schedule one
//! process would send:
//!
//! - open loop: the global arrival process is generated once from the seed (every shard draws
//!   every arrival time and every session, in order) and session `s` is sent by shard `s mod N`;
//!   for single-turn workloads a session is one request, so request `k` goes to shard `k mod N`;
//! - closed loop with `U` users: user `u` runs on shard `u mod N` with its own random stream;
//!   the sessions the users send are dealt by session id: session `s` goes to shard
//!   `(s mod U) mod N` (so each shard's share of the sessions follows its share of the users);
//! - sessions (multi-turn): a whole session goes to one shard (the rules above are by session).
//!
//! The request budget (`--requests`) stays the global count: every shard counts every session of
//! the global sequence against it, so the union of the shards' sessions is exactly the sessions
//! one process would send. Records keep global ids: shard `I`'s `k`-th request is `k·N + I`,
//! which for a single-turn open loop is exactly the id one process gives it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One of `count` processes that share one schedule: `index` in `0..count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// Why a `--shard` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("expected I/N (e.g. 0/4), got {0:?}")]
    Syntax(String),
    #[error("N must be at least 1, got {0}")]
    ZeroCount(u32),
    #[error("I must be in 0..N ({index} is not below {count})")]
    IndexOutOfRange { index: u32, count: u32 },
}

impl Shard {
    /// `index` of `count`, validated.
    pub fn new(index: u32, count: u32) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError::ZeroCount(count));
        }
        if index >= count {
            return Err(ShardError::IndexOutOfRange { index, count });
        }
        Ok(Shard { index, count })
    }

    /// Whether this shard sends open-loop session `session`.
    pub fn owns_arrival(&self, session: u64) -> bool {
        session % self.count as u64 == self.index as u64
    }

    /// Whether this shard runs closed-loop user `user`.
    pub fn owns_user(&self, user: u64) -> bool {
        user % self.count as u64 == self.index as u64
    }

    /// Whether this shard sends closed-loop session `session` among `users` users.
    pub fn owns_closed_session(&self, session: u64, users: u64) -> bool {
        self.owns_user(session % users.max(1))
    }

    /// The global id of this shard's `local`-th request (`local·N + I`).
    pub fn global_id(&self, local: u64) -> u64 {
        local * self.count as u64 + self.index as u64
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, ShardError> {
        let (i, n) = s.trim().split_once('/').ok_or_else(|| ShardError::Syntax(s.into()))?;
        let i: u32 = i.trim().parse().map_err(|_| ShardError::Syntax(s.into()))?;
        let n: u32 = n.trim().parse().map_err(|_| ShardError::Syntax(s.into()))?;
        Shard::new(i, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard { index: 0, count: 1 }));
        assert_eq!("4/4".parse::<Shard>(), Err(ShardError::IndexOutOfRange { index: 4, count: 4 }));
        assert_eq!("0/0".parse::<Shard>(), Err(ShardError::ZeroCount(0)));
        assert!(matches!("x/2".parse::<Shard>(), Err(ShardError::Syntax(_))));
        assert!(matches!("3".parse::<Shard>(), Err(ShardError::Syntax(_))));
        assert_eq!(Shard { index: 1, count: 3 }.to_string(), "1/3");
    }

    #[test]
    fn every_session_and_user_has_exactly_one_owner() {
        for n in 1..=5u32 {
            let shards: Vec<Shard> = (0..n).map(|i| Shard::new(i, n).unwrap()).collect();
            for s in 0..100u64 {
                assert_eq!(shards.iter().filter(|sh| sh.owns_arrival(s)).count(), 1);
                assert_eq!(shards.iter().filter(|sh| sh.owns_user(s)).count(), 1);
                for users in 1..7u64 {
                    assert_eq!(shards.iter().filter(|sh| sh.owns_closed_session(s, users)).count(), 1);
                }
            }
        }
    }

    #[test]
    fn global_ids_interleave() {
        // 3 shards: shard 0 sends 0, 3, 6; shard 1 sends 1, 4, 7; shard 2 sends 2, 5, 8
        let s1 = Shard::new(1, 3).unwrap();
        assert_eq!((0..3).map(|k| s1.global_id(k)).collect::<Vec<_>>(), vec![1, 4, 7]);
        // closed loop, 4 users over 3 shards: shard 0 runs users 0 and 3, and gets sessions
        // 0, 3, 4, 7, 8, 11, … (session s belongs to user slot s mod 4)
        let s0 = Shard::new(0, 3).unwrap();
        let owned: Vec<u64> = (0..12).filter(|&s| s0.owns_closed_session(s, 4)).collect();
        assert_eq!(owned, vec![0, 3, 4, 7, 8, 11]);
    }
}
