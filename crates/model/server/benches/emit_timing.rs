//! Client-measured token times against the embedded server's emit times at 200 concurrent streams
//! on loopback (target: p99 |difference| ≤ 1 ms). `cargo bench -p goodput-server --bench emit_timing`

#[path = "../tests/common/emit.rs"]
mod emit;

fn main() {
    let r = emit::measure(200, 1000);
    println!(
        "{} token events at 200 streams: |client − server| p50 {:.3} ms, p99 {:.3} ms (target p99 ≤ 1 ms: {})",
        r.events,
        r.p50_ms,
        r.p99_ms,
        if r.p99_ms <= 1.0 { "met" } else { "MISSED" }
    );
}
