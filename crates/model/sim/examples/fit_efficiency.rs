//! Predicts the published figures with an efficiency table from a file, for choosing the values
//! of `crates/model/engine/data/efficiency.toml` (`scripts/fit-efficiency.py` drives it):
//!
//! `cargo run --release -p goodput-sim --example fit_efficiency -- TABLE.toml [cal|held|all] [ID,ID…]`
//!
//! Prints one line per figure: id, set, published, predicted, ratio, firmness, and `x` where the
//! figure is excluded (tab-separated).

use goodput_engine::EfficiencyTable;
use goodput_sim::calibration::{Set, figures_with};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: fit_efficiency TABLE.toml [cal|held|all] [ID,ID…]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let table: EfficiencyTable = toml::from_str(&text).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let set = match args.get(1).map(String::as_str) {
        Some("cal") => Some(Set::Calibration),
        Some("held") => Some(Set::HeldOut),
        _ => None,
    };
    let ids: Vec<String> = args.get(2).map(|s| s.split(',').map(str::to_string).collect()).unwrap_or_default();
    for f in figures_with(set, &table, |id| ids.is_empty() || ids.iter().any(|i| i == id)) {
        let set = if f.set == Set::Calibration { "cal" } else { "held" };
        let x = if f.excluded.is_some() { "x" } else { "" };
        println!(
            "{}\t{set}\t{}\t{}\t{:.4}\t{}\t{x}",
            f.id,
            f.published,
            f.predicted,
            f.predicted / f.published,
            f.firm
        );
    }
}
