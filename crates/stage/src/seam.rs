//! The seam itself: a [`Stage`] (one bounded run of one load), what it needs loaded
//! ([`Resources`]), how it is controlled while it runs ([`Control`]), the [`Target`] that runs
//! it, and why it could not ([`StageError`]).

use std::sync::Arc;

use goodput_client::{Cancel, Observer};
use goodput_results::Run;
use goodput_results::plan::{RunPlan, WorkloadPlan};
use goodput_tokenizer::Tokenizer;
use goodput_workload::{Dataset, Load, Source, WorkloadSpec};

/// One bounded run of one load.
#[derive(Clone, Debug)]
pub struct Stage {
    /// `None` for a single-stage run; a sweep's or a capacity step's name otherwise.
    pub name: Option<String>,
    /// The plan this stage runs (a capacity step narrows the plan's bounds).
    pub plan: RunPlan,
    pub load: Load,
    pub seed: u64,
}

impl Stage {
    /// The plan's own single stage.
    pub fn single(plan: &RunPlan) -> Self {
        Stage { name: None, load: plan.load.load.clone(), seed: plan.load.seed, plan: plan.clone() }
    }
}

/// What a plan names and a run needs loaded: the tokenizer, the dataset's entries.
#[derive(Clone, Debug)]
pub struct Resources {
    pub tokenizer: Tokenizer,
    pub dataset: Option<Arc<Dataset>>,
}

impl Resources {
    /// The stage's workload: the plan's, with the stage's seed and the loaded dataset.
    pub fn workload_spec(&self, w: &WorkloadPlan, seed: u64) -> WorkloadSpec {
        let s = &w.spec;
        WorkloadSpec {
            source: self.dataset.clone().map_or(Source::Synthetic, Source::Dataset),
            input_tokens: s.input_tokens.clone(),
            output_tokens: s.output_tokens.clone(),
            reasoning_tokens: s.reasoning_tokens.clone(),
            prefix_groups: s.prefix_groups,
            prefix_tokens: s.prefix_tokens,
            turns: s.turns,
            agentic: s.agentic.clone(),
            think_time: s.think_time.clone(),
            cycle: s.cycle,
            seed,
        }
    }
}

/// How a stage is watched and stopped.
#[derive(Clone)]
pub struct Control {
    /// Stops the stage (Ctrl-C): no new requests; in-flight ones get the plan's grace period.
    pub interrupt: Cancel,
    /// Sees each request as it is sent and each record as it finishes (measured targets).
    pub observer: Arc<dyn Observer>,
    /// A capacity step stops early, saturated, once more than this many requests are in flight.
    pub saturation: Option<u64>,
    /// The run also carries its summary over the whole run (`summary_full`) when an edge
    /// narrowed its window. A caller that keeps only each step's verdict (a plan's searches)
    /// turns it off: that second summary is half of what summarizing a simulated step costs.
    pub whole_run: bool,
}

impl Control {
    /// Nothing watches, nothing stops the stage early.
    pub fn quiet() -> Self {
        Control { interrupt: Cancel::never(), observer: Arc::new(()), saturation: None, whole_run: true }
    }
}

/// Runs stages.
#[allow(async_fn_in_trait)]
pub trait Target {
    /// Runs one stage to its end (completed, duration, error budget, interrupted, saturated).
    async fn run(&mut self, stage: &Stage, ctl: &Control) -> Result<Run, StageError>;
    /// GPUs behind the target, when known (capacity per GPU).
    fn gpus(&self) -> Option<u32>;
    /// Words for where it runs, e.g. "on http://host:8000" or "on llama-3.1-8b on 1× h100
    /// (simulated)".
    fn describe(&self) -> String;
    /// Whether its clock is virtual (a simulation): long steps cost nothing.
    fn is_simulated(&self) -> bool;
}

/// Why a stage could not run.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Client(#[from] goodput_client::ClientError),
    #[error(transparent)]
    Embedded(#[from] goodput_server::EmbedError),
    #[error(transparent)]
    Engine(#[from] goodput_engine::EngineError),
    #[error(transparent)]
    Workload(#[from] goodput_workload::WorkloadError),
    #[error("cannot start a runtime: {0}")]
    Runtime(std::io::Error),
}
