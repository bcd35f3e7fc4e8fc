//! Prints the engine model's predictions next to the published figures, the calibration set and
//! the held-out set apart (`cargo bench -p goodput-sim --bench calibration`).

use goodput_sim::calibration::{Set, figures, table};

fn main() {
    let start = std::time::Instant::now();
    for (set, title) in
        [(Set::Calibration, "calibration set"), (Set::HeldOut, "held-out set (never used to choose the efficiencies)")]
    {
        let figs = figures(Some(set));
        println!("## {title}\n{}", table(&figs));
        if set == Set::Calibration {
            let outside: Vec<&str> = figs
                .iter()
                .filter(|f| f.excluded.is_none() && f.band.is_some_and(|b| f.error().abs() > b))
                .map(|f| f.id.as_str())
                .collect();
            let outside = if outside.is_empty() { "none".to_string() } else { outside.join(", ") };
            println!("reference figures outside their band: {outside}\n");
        }
    }
    println!("{:.1} s", start.elapsed().as_secs_f64());
}
