//! Raw command-line arguments (clap derive). Nothing here is trusted: [`crate::plan`] turns these
//! into a validated plan, with errors that name the flag.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "goodput",
    version,
    about = "Measure, model and plan LLM inference serving: TTFT, TPOT, ITL, goodput and capacity."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Drive load at an OpenAI-compatible streaming endpoint and measure every token.
    Bench(BenchArgs),
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Base URL of an OpenAI-compatible server (http://HOST:PORT, with or without /v1).
    #[arg(long)]
    pub url: Option<String>,

    /// Which endpoint to call.
    #[arg(long, value_enum, default_value_t = ApiArg::Completions)]
    pub api: ApiArg,

    /// Model name to send (default: the first id from GET /v1/models).
    #[arg(long)]
    pub model: Option<String>,

    /// Environment variable holding the API key (sent as a bearer token when set).
    #[arg(long, default_value = "OPENAI_API_KEY", value_name = "VAR")]
    pub api_key_env: String,

    /// Do not send `ignore_eos: true` and `min_tokens` (let the model stop on its own).
    #[arg(long)]
    pub no_ignore_eos: bool,

    /// Extra JSON fields merged into every request body, e.g. '{"temperature": 0}'.
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub timeouts: TimeoutArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ApiArg {
    Completions,
    Chat,
}

/// How much load, for how long.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Closed loop: N users, each sending its next request when the previous one ends.
    #[arg(long, value_name = "N", conflicts_with = "rate")]
    pub concurrency: Option<usize>,

    /// Open loop: Poisson arrivals at R requests per second (`inf`: all at once).
    #[arg(long, value_name = "R")]
    pub rate: Option<String>,

    /// Stop after this many requests.
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,

    /// Stop sending after this long (e.g. 30s, 5m); in-flight requests finish.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Stop the run once this many requests have failed (exit code 1).
    #[arg(long, value_name = "N")]
    pub max_errors: Option<u64>,

    /// After Ctrl-C or --max-errors, how long in-flight requests may finish before cancellation.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub grace: String,

    /// Seed for arrivals, lengths and prompt text.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// What each request contains.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Prompt length in tokens: N, uniform:A..B, normal:MEAN,STD, lognormal:MEAN,STD, file:PATH.
    #[arg(long, value_name = "DIST", default_value = "512")]
    pub input_tokens: String,

    /// Requested output length (max_tokens), same forms as --input-tokens.
    #[arg(long, value_name = "DIST", default_value = "128")]
    pub output_tokens: String,

    /// A Hugging Face tokenizer.json for prompts and counting (default: built-in cl100k_base).
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
}

/// Per-request timeouts.
#[derive(Args, Debug, Clone)]
pub struct TimeoutArgs {
    /// Time allowed to open a connection.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub timeout_connect: String,
    /// Time allowed from sending until the first content event.
    #[arg(long, value_name = "DURATION", default_value = "300s")]
    pub timeout_first_token: String,
    /// Longest allowed silence between stream events once content has started.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub timeout_idle: String,
    /// Longest allowed request, end to end.
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub timeout_total: String,
}

/// Where results go.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the result document here (and each record, as it finishes, to STEM.requests.jsonl).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,

    /// How percentiles are computed.
    #[arg(long, value_enum, default_value_t = PercentileArg::Linear)]
    pub percentiles: PercentileArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PercentileArg {
    /// Linear interpolation between closest ranks (NumPy's default).
    Linear,
    /// The ceil(p·n)-th smallest sample.
    NearestRank,
}
