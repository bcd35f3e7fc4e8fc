//! Per-request timeouts, and durations as seconds in documents.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Seconds as a float, both ways.
pub mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }

    /// The same for an optional duration (`null` when absent).
    pub mod opt {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_f64(d.as_secs_f64()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            match Option::<f64>::deserialize(d)? {
                Some(v) => Duration::try_from_secs_f64(v).map(Some).map_err(serde::de::Error::custom),
                None => Ok(None),
            }
        }
    }
}

/// Per-request timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timeouts {
    #[serde(with = "secs")]
    pub connect: Duration,
    #[serde(with = "secs")]
    pub first_token: Duration,
    /// The longest silence between stream events (dispatched SSE events: keep-alive comments
    /// and bytes that complete no event do not count) once content has started.
    #[serde(with = "secs")]
    pub idle: Duration,
    #[serde(with = "secs")]
    pub total: Duration,
    /// The longest silence in bytes once content has started (comments count); `None`: the
    /// idle timeout's.
    #[serde(with = "secs::opt", default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Duration>,
}

impl Timeouts {
    /// The byte-level stall guard.
    pub fn stall(&self) -> Duration {
        self.stall.unwrap_or(self.idle)
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_token: Duration::from_secs(300),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(1800),
            stall: None,
        }
    }
}
