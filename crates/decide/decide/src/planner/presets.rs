//! Workload presets for `goodput plan --preset`: the seed article's decision framework as
//! workloads (lengths, shared prefixes, SLO, attainment; sources in docs/plan.md).

/// A workload preset. Lengths and the SLO are in the command line's own forms, parsed by the
/// same parsers as the flags they stand in for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkloadPreset {
    pub name: &'static str,
    pub input: &'static str,
    pub output: &'static str,
    /// Reasoning tokens before each answer (a reasoning model), in `--reasoning-tokens`' form.
    pub reasoning: Option<&'static str>,
    /// Shared-prefix groups and their length in tokens.
    pub prefix: Option<(u32, u32)>,
    pub slo: &'static str,
    pub attainment: f64,
}

/// Every preset.
pub const PRESETS: &[WorkloadPreset] = &[
    // GuideLLM's chat applications target: TTFT ≤ 200 ms and ITL ≤ 50 ms for 99% of requests
    WorkloadPreset {
        name: "chat",
        input: "lognormal:256,200",
        output: "lognormal:256,150",
        reasoning: None,
        prefix: None,
        slo: "ttft<=200ms,tpot<=50ms",
        attainment: 0.99,
    },
    // many users behind shared system prompts, MLPerf's interactive targets (450 ms / 40 ms)
    WorkloadPreset {
        name: "enterprise",
        input: "uniform:100..500",
        output: "lognormal:300,200",
        reasoning: None,
        prefix: Some((8, 1000)),
        slo: "ttft<=450ms,tpot<=40ms",
        attainment: 0.99,
    },
    // long documents in, short summaries out; throughput first, TTFT relaxed
    WorkloadPreset {
        name: "summarize",
        input: "uniform:4000..8000",
        output: "uniform:200..400",
        reasoning: None,
        prefix: None,
        slo: "ttft<=10s,tpot<=100ms",
        attainment: 0.9,
    },
    // offline: only the cost of the tokens counts (a half-hour bound stands for "eventually")
    WorkloadPreset {
        name: "batch",
        input: "lognormal:512,300",
        output: "lognormal:512,300",
        reasoning: None,
        prefix: None,
        slo: "e2e<=30m",
        attainment: 0.99,
    },
    // a reasoning model behind a chat product: about a thousand thinking tokens before a chat
    // answer; the SLO binds the answer (TTFO within 30 s, then its tokens at reading pace), not
    // the first thinking token (docs/plan.md, "Reasoning")
    WorkloadPreset {
        name: "reasoning",
        input: "lognormal:512,300",
        output: "lognormal:256,150",
        reasoning: Some("lognormal:1024,512"),
        prefix: None,
        slo: "ttfo<=30s,tpot_answer<=50ms",
        attainment: 0.95,
    },
];

/// The preset called `name`, or the names of all of them.
pub fn preset(name: &str) -> Result<&'static WorkloadPreset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        format!("unknown preset `{name}`; known: {}", names.join(", "))
    })
}
