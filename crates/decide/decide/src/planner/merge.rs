//! Merging the shards of one plan search (`goodput plan --shard I/N`, then `goodput merge`): the
//! shards must be of one search, each once; their candidates are put back in grid order and
//! ranked as one process would.

use goodput_results::planning::{PlanCandidate, PlanReport};
use goodput_results::shards::MergeRefused;
use goodput_workload::Shard;

/// What a merge of plan-search shards produced: the merged report and what to say on stderr.
pub struct MergedPlan {
    pub report: PlanReport,
    /// Notes for stderr (what a partial merge is missing).
    pub notes: Vec<String>,
}

/// The fields that define a search, which every shard must share: (name, value as text).
fn search_fields(r: &PlanReport) -> [(&'static str, String); 9] {
    [
        ("model", r.model.clone()),
        ("preset", format!("{:?}", r.preset)),
        ("workload", r.workload.clone()),
        ("SLO", r.slo.clone()),
        ("attainment target", r.attainment_target.to_string()),
        ("target rate", format!("{:?}", r.target_rate)),
        ("budget", format!("{:?}", r.budget_per_hour)),
        ("seed", r.seed.to_string()),
        ("grid size", format!("{:?}", r.grid_size)),
    ]
}

/// Merges the shards of one plan search (`goodput plan --shard I/N`): every document must hold a
/// plan report that is a shard, all of one `N`, each index once, of one search (the fields that
/// define it: model, preset, workload, SLO, attainment target, target rate, budget, seed, grid
/// size, and each GPU's price); missing shards are refused unless `allow_partial`, which then says which candidates
/// are missing. The candidates of all shards are put back in grid order and ranked as one
/// process ranks them ([`super::rank_and_front`]); `elapsed_s` is the longest shard's.
pub fn merge_plan_shards(
    files: &[goodput_results::shards::ShardFile],
    allow_partial: bool,
) -> Result<MergedPlan, goodput_results::shards::MergeRefused> {
    let refuse = |m: String| Err(MergeRefused(m));
    let parts = shard_parts(files)?;
    let (first_name, base, first_shard) = parts[0];
    let n = first_shard.count;
    let Some(grid) = base.grid_size else {
        return refuse(format!("{first_name}: its search does not record its grid size"));
    };
    let seen = check_one_search(&parts, grid)?;
    check_one_price_per_gpu(&parts)?;
    let (missing_candidates, notes) = missing_shards(&seen, n, grid, allow_partial)?;
    let mut candidates: Vec<PlanCandidate> = parts.iter().flat_map(|(_, p, _)| p.candidates.iter().cloned()).collect();
    candidates.sort_by_key(|c| c.grid_index);
    let pareto = super::rank_and_front(&mut candidates, base.budget_per_hour);
    Ok(MergedPlan {
        report: PlanReport {
            shard: None,
            missing_candidates,
            candidates,
            pareto,
            elapsed_s: parts.iter().map(|(_, p, _)| p.elapsed_s).fold(0.0, f64::max),
            ..base.clone()
        },
        notes,
    })
}

/// One shard file's name, plan report and shard.
type ShardPart<'a> = (&'a str, &'a PlanReport, Shard);

/// Each file's name, plan report and shard, refusing a file that is not a valid shard of a plan search.
fn shard_parts(files: &[goodput_results::shards::ShardFile]) -> Result<Vec<ShardPart<'_>>, MergeRefused> {
    let refuse = |m: String| Err(MergeRefused(m));
    let Some(first) = files.first() else { return refuse("no shard files given".into()) };
    let mut parts: Vec<(&str, &PlanReport, Shard)> = Vec::with_capacity(files.len());
    for f in files {
        let Some(plan) = &f.doc.plan else {
            let plan = files.iter().find(|f| f.doc.plan.is_some()).map_or(&first.name, |f| &f.name);
            return refuse(format!("{}: not a plan search, but {plan} is", f.name));
        };
        let Some(s) = plan.shard else {
            return refuse(format!("{}: not a shard (written without --shard I/N)", f.name));
        };
        if s.count == 0 || s.index >= s.count {
            return refuse(format!("{}: shard {s} is not a valid shard", f.name));
        }
        parts.push((&f.name, plan, s));
    }
    Ok(parts)
}

/// Checks the shards are one search's, each index once with its own candidates; the file that gave each index.
fn check_one_search<'a>(parts: &[ShardPart<'a>], grid: u32) -> Result<Vec<Option<&'a str>>, MergeRefused> {
    let refuse = |m: String| Err(MergeRefused(m));
    let (first_name, base, first_shard) = parts[0];
    let n = first_shard.count;
    let mut seen: Vec<Option<&str>> = vec![None; n as usize];
    for &(name, plan, s) in parts {
        if s.count != n {
            return refuse(format!(
                "{name}: shard {s} does not go with {first_name} (shard {first_shard}): mixed shard counts"
            ));
        }
        if let Some(other) = seen[s.index as usize] {
            return refuse(format!("{name}: shard {s} is already given by {other}"));
        }
        seen[s.index as usize] = Some(name);
        for ((field, a), (_, b)) in search_fields(plan).iter().zip(search_fields(base).iter()) {
            if a != b {
                return refuse(format!(
                    "{name}: another search than {first_name} (the {field} differs: {a} against {b})"
                ));
            }
        }
        for c in &plan.candidates {
            match c.grid_index {
                Some(k) if k < grid && k % n == s.index => {}
                _ => {
                    return refuse(format!(
                        "{name}: candidate {:?} is not shard {s}'s of a grid of {grid}",
                        c.grid_index
                    ));
                }
            }
        }
    }
    Ok(seen)
}

/// Checks that each GPU has one price across the shards.
fn check_one_price_per_gpu(parts: &[ShardPart]) -> Result<(), MergeRefused> {
    let refuse = |m: String| Err(MergeRefused(m));
    // a price is an input of the search too (`--price`): one GPU, one price across the shards
    let mut prices: Vec<(&str, Option<f64>, &str)> = Vec::new();
    for &(name, plan, _) in parts {
        for c in &plan.candidates {
            match prices.iter().find(|(gpu, _, _)| *gpu == c.gpu) {
                Some(&(_, price, other)) if price != c.price_per_gpu_hour => {
                    let show = |p: Option<f64>| p.map_or("no price".to_string(), |p| format!("${p}/GPU-hour"));
                    return refuse(format!(
                        "{name}: another search than {other} (the {} is priced at {} against {}: --price differs)",
                        c.gpu,
                        show(c.price_per_gpu_hour),
                        show(price)
                    ));
                }
                Some(_) => {}
                None => prices.push((&c.gpu, c.price_per_gpu_hour, name)),
            }
        }
    }
    Ok(())
}

/// The grid indices of the shards no file gave, and the note saying so; refused unless `allow_partial`.
fn missing_shards(
    seen: &[Option<&str>],
    n: u32,
    grid: u32,
    allow_partial: bool,
) -> Result<(Vec<u32>, Vec<String>), MergeRefused> {
    let refuse = |m: String| Err(MergeRefused(m));
    let missing: Vec<u32> = seen.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| i as u32).collect();
    let missing_candidates: Vec<u32> = (0..grid).filter(|k| missing.contains(&(k % n))).collect();
    let mut notes = Vec::new();
    if !missing.is_empty() {
        let shards: Vec<String> = missing.iter().map(|i| format!("{i}/{n}")).collect();
        let s = if missing.len() == 1 { "" } else { "s" };
        if !allow_partial {
            return refuse(format!("shard{s} {} missing (merge them too, or pass --allow-partial)", shards.join(", ")));
        }
        let ks: Vec<String> = missing_candidates.iter().map(u32::to_string).collect();
        notes.push(format!(
            "partial merge: shard{s} {} missing; the merged plan lacks the candidates at grid indices {} (of {grid})",
            shards.join(", "),
            ks.join(", ")
        ));
    }
    Ok((missing_candidates, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_engine::Dtype;
    use goodput_results::ResultDoc;
    use goodput_results::shards::ShardFile;

    fn candidate(k: u32, capacity: Option<f64>) -> PlanCandidate {
        PlanCandidate {
            grid_index: Some(k),
            gpu: "h100".into(),
            tp: 1,
            dtype: Dtype::Fp8,
            engine: "vllm".into(),
            mechanisms: "baseline".into(),
            gpus: 1,
            fits: capacity.is_some(),
            capacity,
            capacity_per_gpu: capacity,
            ..PlanCandidate::default()
        }
    }

    /// Shard `i` of `n` of a 5-candidate grid whose candidate k serves k req/s (0: none).
    fn shard(i: u32, n: u32, model: &str, elapsed_s: f64) -> ShardFile {
        let candidates = (0..5).filter(|k| k % n == i).map(|k| candidate(k, (k > 0).then_some(k as f64))).collect();
        let mut doc = ResultDoc::new("test", Vec::new());
        doc.plan = Some(PlanReport {
            model: model.into(),
            preset: None,
            workload: "w".into(),
            slo: "ttft<=1s".into(),
            attainment_target: 0.9,
            target_rate: None,
            budget_per_hour: None,
            seed: 7,
            grid_size: Some(5),
            shard: Some(Shard::new(i, n).unwrap()),
            missing_candidates: Vec::new(),
            candidates,
            pareto: Vec::new(),
            elapsed_s,
        });
        ShardFile { name: format!("s{i}.json"), doc }
    }

    #[test]
    fn merges_in_grid_order_with_the_given_ranking() {
        let files = [shard(1, 2, "m", 2.0), shard(0, 2, "m", 3.0)];
        let m = merge_plan_shards(&files, false).unwrap();
        let ks: Vec<Option<u32>> = m.report.candidates.iter().map(|c| c.grid_index).collect();
        assert_eq!(ks, [4, 3, 2, 1, 0].map(Some));
        assert_eq!((m.report.pareto.clone(), m.report.elapsed_s, m.report.shard), (Vec::<usize>::new(), 3.0, None));
        assert!(m.notes.is_empty() && m.report.missing_candidates.is_empty());
    }

    #[test]
    fn refuses_other_searches_duplicates_and_missing_shards() {
        let err = |files: &[ShardFile]| merge_plan_shards(files, false).err().unwrap().0;
        assert!(err(&[shard(0, 2, "m", 1.0), shard(1, 2, "x", 1.0)]).contains("the model differs"));
        assert!(err(&[shard(0, 2, "m", 1.0), shard(0, 2, "m", 1.0)]).contains("already given by s0.json"));
        assert!(err(&[shard(0, 2, "m", 1.0), shard(1, 3, "m", 1.0)]).contains("mixed shard counts"));
        assert!(err(&[shard(0, 3, "m", 1.0)]).contains("shards 1/3, 2/3 missing"));
        let mut priced = shard(1, 2, "m", 1.0);
        priced.doc.plan.as_mut().unwrap().candidates.iter_mut().for_each(|c| c.price_per_gpu_hour = Some(2.5));
        let e = err(&[shard(0, 2, "m", 1.0), priced]);
        assert!(
            e.contains("s1.json: another search than s0.json (the h100 is priced at $2.5/GPU-hour against no price"),
            "{e}"
        );
        let partial = merge_plan_shards(&[shard(0, 3, "m", 1.0)], true).unwrap();
        assert_eq!(partial.report.missing_candidates, vec![1, 2, 4]);
        assert!(partial.notes[0].contains("grid indices 1, 2, 4 (of 5)"), "{:?}", partial.notes);
    }
}
