//! Prints the engine model's predictions next to the published figures it is calibrated against
//! (`cargo bench -p goodput-sim --bench calibration`).

fn main() {
    let start = std::time::Instant::now();
    let figs = goodput_sim::calibration::figures();
    print!("{}", goodput_sim::calibration::table(&figs));
    let worst = figs.iter().map(|f| f.error().abs()).fold(0.0, f64::max);
    let outside = figs.iter().filter(|f| f.error().abs() > f.band).count();
    println!(
        "worst |error| {:.1}% · {outside} outside their band (±20% dense, ±25% MoE and FP4) · {:.1} s",
        worst * 100.0,
        start.elapsed().as_secs_f64()
    );
}
