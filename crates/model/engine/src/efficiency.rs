//! Efficiencies by GPU family, engine and number format (`data/efficiency.toml`): the step-time
//! model's factors for a configuration, starting from [`Efficiency::default`] and overridden by
//! every rule that matches it, in file order (a later, narrower rule wins). Chosen on the
//! calibration set of published figures and checked on a held-out set (docs/engine.md,
//! "Published figures"; `cargo bench -p goodput-sim --bench calibration`).
//!
//! The command line's `--mfu`, `--mbu` and overhead flags override what a rule set, and a digital
//! twin (`--twin`) replaces the roofline altogether with the server's fitted step times.

use serde::Deserialize;

use crate::catalog::Dtype;
use crate::config::{Efficiency, EngineConfig, Preset};

const BUILTIN: &str = include_str!("../data/efficiency.toml");

/// The rules, in file order.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EfficiencyTable {
    pub rule: Vec<Rule>,
}

/// Factors for the configurations a rule matches: every list given must contain the
/// configuration's value (GPU name, engine preset, weight format), and `moe`, when given, whether
/// the model is a mixture of experts.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub engines: Vec<Preset>,
    #[serde(default)]
    pub dtypes: Vec<Dtype>,
    pub moe: Option<bool>,
    pub mfu: Option<f64>,
    pub mfu_half_params: Option<f64>,
    pub mbu: Option<f64>,
    pub step_overhead_s: Option<f64>,
    pub seq_overhead_s: Option<f64>,
    pub allreduce_latency_s: Option<f64>,
    pub alltoall_latency_s: Option<f64>,
    pub allreduce_bw_share: Option<f64>,
    pub moe_gemm: Option<f64>,
    pub moe_half_tokens: Option<f64>,
    pub fp4_mfu: Option<f64>,
    pub fp4_mbu: Option<f64>,
    pub ingest_s: Option<f64>,
    pub ingest_per_token_s: Option<f64>,
    pub frontend_s: Option<f64>,
    pub frontend_jitter_s: Option<f64>,
    /// Which published figures the values were chosen on (docs only).
    #[serde(default)]
    pub why: String,
}

impl Rule {
    fn matches(&self, c: &EngineConfig) -> bool {
        (self.gpus.is_empty() || self.gpus.iter().any(|g| g.eq_ignore_ascii_case(&c.gpu.name)))
            && (self.engines.is_empty() || c.preset.is_some_and(|p| self.engines.contains(&p)))
            && (self.dtypes.is_empty() || self.dtypes.contains(&c.dtype))
            && self.moe.is_none_or(|m| m == c.model.is_moe())
    }

    /// Sets every value the rule gives (the command line's efficiency flags are one such rule,
    /// applied last: `EngineSpec::build`).
    pub fn apply(&self, e: &mut Efficiency) {
        let set = [
            (self.mfu, &mut e.mfu),
            (self.mfu_half_params, &mut e.mfu_half_params),
            (self.mbu, &mut e.mbu),
            (self.step_overhead_s, &mut e.step_overhead_s),
            (self.seq_overhead_s, &mut e.seq_overhead_s),
            (self.allreduce_latency_s, &mut e.allreduce_latency_s),
            (self.alltoall_latency_s, &mut e.alltoall_latency_s),
            (self.allreduce_bw_share, &mut e.allreduce_bw_share),
            (self.moe_gemm, &mut e.moe_gemm),
            (self.moe_half_tokens, &mut e.moe_half_tokens),
            (self.fp4_mfu, &mut e.fp4_mfu),
            (self.fp4_mbu, &mut e.fp4_mbu),
            (self.ingest_s, &mut e.ingest_s),
            (self.ingest_per_token_s, &mut e.ingest_per_token_s),
            (self.frontend_s, &mut e.frontend_s),
            (self.frontend_jitter_s, &mut e.frontend_jitter_s),
        ];
        for (v, field) in set {
            if let Some(v) = v {
                *field = v;
            }
        }
    }
}

impl EfficiencyTable {
    /// The table shipped with goodput.
    pub fn builtin() -> &'static EfficiencyTable {
        static TABLE: std::sync::OnceLock<EfficiencyTable> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| toml::from_str(BUILTIN).expect("data/efficiency.toml parses (tested)"))
    }

    /// The efficiencies of `c`'s GPU, engine and format: the defaults, then every matching rule.
    pub fn for_config(&self, c: &EngineConfig) -> Efficiency {
        let mut e = Efficiency::default();
        for r in self.rule.iter().filter(|r| r.matches(c)) {
            r.apply(&mut e);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn config(model: &str, gpu: &str, preset: Option<Preset>, dtype: Dtype) -> EngineConfig {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model(model).unwrap().clone(), c.gpu(gpu).unwrap().clone());
        cfg.preset = preset;
        cfg.dtype = dtype;
        cfg
    }

    #[test]
    fn the_builtin_table_parses_and_every_rule_names_real_things() {
        let t = EfficiencyTable::builtin();
        let c = Catalog::builtin();
        for r in &t.rule {
            for g in &r.gpus {
                assert!(c.gpu(g).is_ok(), "rule names unknown gpu {g}");
            }
            assert!(!r.why.is_empty(), "every rule says what it was chosen on");
        }
    }

    #[test]
    fn a_later_narrower_rule_wins_and_others_keep_the_defaults() {
        let t: EfficiencyTable = toml::from_str(
            "[[rule]]\nmfu = 0.5\nwhy = \"all\"\n[[rule]]\ngpus = [\"mi300x\"]\nengines = [\"vllm\"]\nmfu = 0.2\nwhy = \"amd\"\n\
             [[rule]]\nmoe = true\nmoe_gemm = 0.3\nwhy = \"moe\"\n",
        )
        .unwrap();
        let amd = t.for_config(&config("llama-3.1-70b", "mi300x", Some(Preset::Vllm), Dtype::Fp8));
        assert_eq!((amd.mfu, amd.mbu, amd.moe_gemm), (0.2, Efficiency::default().mbu, Efficiency::default().moe_gemm));
        let h100 = t.for_config(&config("llama-3.1-70b", "h100", Some(Preset::Vllm), Dtype::Fp8));
        assert_eq!(h100.mfu, 0.5);
        // a rule naming an engine does not match a configuration without a preset
        assert_eq!(t.for_config(&config("llama-3.1-70b", "mi300x", None, Dtype::Fp8)).mfu, 0.5);
        assert_eq!(t.for_config(&config("mixtral-8x7b", "h100", None, Dtype::Bf16)).moe_gemm, 0.3);
    }
}
