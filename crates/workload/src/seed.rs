//! Independent random streams derived from one `--seed`, so that changing how lengths are drawn
//! never moves the arrival times (and vice versa).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Which stream.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    Arrivals = 1,
    Lengths = 2,
    Text = 3,
    Sessions = 4,
    Engine = 5,
}

pub type Rng = ChaCha8Rng;

pub fn rng(seed: u64, stream: Stream) -> Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream as u64);
    r
}

/// A generator seeded from one integer (a per-block or per-entry text seed).
pub fn rng_for(seed: u64, key: u64) -> Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.set_stream(Stream::Text as u64);
    r
}
