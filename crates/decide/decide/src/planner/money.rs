//! The money of a plan: cost per million tokens, deployments for a target rate, buy-vs-rent
//! break-even, default prices and power, and the cost-vs-latency Pareto front.

/// Dollars per million tokens from a deployment's price per hour and its tokens per second.
pub fn cost_per_million(dollars_per_hour: f64, tokens_per_s: f64) -> Option<f64> {
    (tokens_per_s > 0.0).then(|| dollars_per_hour / (tokens_per_s * 3600.0) * 1e6)
}

/// Deployments needed to serve `target` req/s when one serves `capacity`.
pub fn deployments_for(target: f64, capacity: f64) -> Option<u32> {
    (capacity > 0.0 && target > 0.0).then(|| (target / capacity - 1e-9).ceil().max(1.0) as u32)
}

/// Hours after which buying a GPU at `purchase` costs less than renting it at `rent` per hour,
/// when owning it costs `running` per hour: purchase ÷ (rent − running); `None` when renting is
/// never dearer.
pub fn break_even_hours(purchase: f64, rent: f64, running: f64) -> Option<f64> {
    (rent > running).then(|| purchase / (rent - running))
}

/// The Pareto front of `(cost, latency)` points (lower is better in both): indices of the
/// points no other point beats in both, cheapest first.
pub fn pareto(points: &[(usize, f64, f64)]) -> Vec<usize> {
    let mut sorted: Vec<&(usize, f64, f64)> = points.iter().collect();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.2.total_cmp(&b.2)));
    let mut front = Vec::new();
    let mut best = f64::INFINITY;
    for &&(i, _, latency) in &sorted {
        if latency < best {
            front.push(i);
            best = latency;
        }
    }
    front
}

/// Default rental prices, $ per GPU-hour, on demand, with where each comes from (the dates the
/// sources were read; docs/plan.md has the table and the alternatives). Never fetched: pass
/// `--price GPU=DOLLARS/h` for your own.
pub const DEFAULT_PRICES: &[(&str, f64, &str)] = &[
    ("h100", 3.99, "Lambda 8x H100 SXM, RunPod Secure, Together AI average (Sep-Nov 2026)"),
    ("h200", 4.59, "RunPod H200 (2026-10-07)"),
    ("b200", 6.69, "Lambda 8x B200 SXM6 (2026-09-20)"),
    ("mi300x", 2.59, "DigitalOcean gpu-mi300x1-192gb (2026-10-07)"),
    ("a100", 1.79, "RunPod Secure A100 80GB SXM (2026-11-09)"),
    ("l40s", 2.25, "CoreWeave 8x L40S / 8 (Feb 2026)"),
    ("rtx5090", 0.69, "RunPod RTX 5090, via deploybase.ai's RTX 5090 cloud page (read 2026-12-05)"),
    // no one rents one: an owned machine's cost, $6,999 (M2 Ultra, 76-core GPU, 192 GB, 2 TB;
    // June 2023) over three years of use, plus its 295 W at the wall (Apple, support 102027)
    ("m2-ultra", 0.31, "owned: $6,999 over 3 years (26,280 h) = 0.27, plus 295 W x 1.3 x $0.12/kWh = 0.05"),
];

/// Board power, watts, for the running cost of an owned GPU.
pub const BOARD_POWER_W: &[(&str, f64)] = &[
    ("h100", 700.0),
    ("h200", 700.0),
    ("b200", 1000.0),
    ("mi300x", 750.0),
    ("a100", 400.0),
    ("l40s", 350.0),
    ("rtx5090", 575.0),
    ("m2-ultra", 295.0),
];

/// Electricity for an owned GPU: $ per kWh, and the data centre's power usage effectiveness.
pub const POWER_PRICE_PER_KWH: f64 = 0.12;
pub const PUE: f64 = 1.3;

/// An owned GPU's running cost per hour: board power × PUE × electricity price.
pub fn running_cost_per_hour(gpu: &str) -> Option<f64> {
    BOARD_POWER_W.iter().find(|(g, _)| *g == gpu).map(|(_, w)| w / 1000.0 * PUE * POWER_PRICE_PER_KWH)
}

/// The default price of a catalog GPU.
pub fn default_price(gpu: &str) -> Option<f64> {
    DEFAULT_PRICES.iter().find(|(g, _, _)| *g == gpu).map(|(_, p, _)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_per_million_tokens_by_hand() {
        // 2 GPUs at $3.99/h = $7.98/h; 5,000 tok/s = 18M tok/h: $0.4433 per million
        let c = cost_per_million(2.0 * 3.99, 5000.0).unwrap();
        assert!((c - 7.98 / 18.0).abs() < 1e-12, "{c}");
        assert_eq!(cost_per_million(3.99, 0.0), None);
    }

    #[test]
    fn every_gpu_of_the_catalog_is_priced() {
        let c = goodput_engine::Catalog::builtin();
        for g in c.gpus.keys() {
            assert!(default_price(g).is_some(), "{g} has no default price");
            assert!(running_cost_per_hour(g).is_some(), "{g} has no board power");
        }
        // the owned workstation by hand: 6999 / 26280 + 0.295 kW x 1.3 x $0.12
        let owned = 6999.0 / 26280.0 + 0.295 * 1.3 * 0.12;
        assert!((default_price("m2-ultra").unwrap() - owned).abs() < 0.005, "{owned}");
    }

    #[test]
    fn deployments_for_a_target_rate() {
        assert_eq!(deployments_for(10.0, 4.0), Some(3));
        assert_eq!(deployments_for(8.0, 4.0), Some(2), "exactly two");
        assert_eq!(deployments_for(0.5, 4.0), Some(1));
        assert_eq!(deployments_for(1.0, 0.0), None);
    }

    #[test]
    fn break_even_by_hand() {
        // $15,000 ÷ ($1.99/h − $0.33/h) = 9,036 h
        let h = break_even_hours(15_000.0, 1.99, 0.33).unwrap();
        assert!((h - 15_000.0 / 1.66).abs() < 1e-9);
        assert_eq!(break_even_hours(15_000.0, 0.2, 0.33), None);
        // an H100's own running cost: 0.7 kW × 1.3 × $0.12 = $0.1092/h
        assert!((running_cost_per_hour("h100").unwrap() - 0.1092).abs() < 1e-12);
    }

    #[test]
    fn pareto_front_keeps_what_nothing_beats() {
        // (index, cost, latency): 1 is beaten by 0 in both; 3 by 2
        let pts = [(0, 1.0, 100.0), (1, 2.0, 150.0), (2, 3.0, 50.0), (3, 4.0, 60.0), (4, 0.5, 300.0)];
        assert_eq!(pareto(&pts), vec![4, 0, 2]);
        assert_eq!(pareto(&[]), Vec::<usize>::new());
    }

    #[test]
    fn every_catalog_gpu_has_a_default_price_and_power() {
        for (g, p, source) in DEFAULT_PRICES {
            assert!(*p > 0.0 && !source.is_empty());
            assert!(running_cost_per_hour(g).is_some(), "{g}");
        }
    }
}
