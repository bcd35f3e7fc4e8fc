//! The front end's latency model (the HTTP server, tokenization and queueing before the
//! scheduler sees a request), shared by a preset's efficiency and a fitted twin: one draw per
//! request, from its own seed.

/// A front end's latency for one request, drawn with `seed`: log-normal with mean `mean` and
/// standard deviation `sd` (seconds), so that it is never negative and its mean is `mean` however
/// large the jitter; `mean` itself where either is not positive.
pub fn front_end_delay(mean: f64, sd: f64, seed: u64) -> f64 {
    let mean = mean.max(0.0);
    if sd <= 0.0 || mean <= 0.0 {
        return mean;
    }
    // two uniform draws from the request's own stream, a standard normal by Box–Muller
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6672_6f6e_7465_6e64);
    let mut u = || 1.0 - rng.random::<f64>();
    let normal = (-2.0 * u().ln()).sqrt() * (std::f64::consts::TAU * u()).cos();
    let var = (1.0 + (sd / mean).powi(2)).ln();
    mean * (var.sqrt() * normal - var / 2.0).exp()
}
