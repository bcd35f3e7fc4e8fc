//! Raw command-line arguments (clap derive). Nothing here is trusted: the `plan` module turns these
//! into a validated plan, with errors that name the flag.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use goodput_metrics::PercentileMethod;
use goodput_results::Api;
use goodput_workload::Profile;

/// `--profile`: the names of `Profile::ALL`, each with its help.
fn profile_parser() -> impl TypedValueParser<Value = Profile> {
    PossibleValuesParser::new(Profile::ALL.iter().map(|(_, name, help)| PossibleValue::new(*name).help(*help)))
        .map(|s| s.parse::<Profile>().expect("a listed profile"))
}

/// `--percentiles`: linear or nearest-rank.
fn percentile_parser() -> impl TypedValueParser<Value = PercentileMethod> {
    PossibleValuesParser::new(PercentileMethod::ALL.iter().map(|(_, name, help)| PossibleValue::new(*name).help(*help)))
        .map(|s| s.parse::<PercentileMethod>().expect("a listed method"))
}

/// `--api`: completions or chat.
fn api_parser() -> impl TypedValueParser<Value = Api> {
    PossibleValuesParser::new(Api::NAMES).map(|s| s.parse::<Api>().expect("a listed API"))
}

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
    /// Drive load at an OpenAI-compatible streaming endpoint and measure every token
    /// (without --url: the embedded engine model, started on a loopback port).
    #[command(allow_negative_numbers = true)]
    Bench(BenchArgs),
    /// Serve the engine model over an OpenAI-compatible HTTP API, in real time.
    #[command(allow_negative_numbers = true)]
    Serve(ServeArgs),
    /// Predict a run in virtual time with the engine model (same workload and load flags as bench).
    #[command(allow_negative_numbers = true)]
    Sim(SimArgs),
    /// Find the highest Poisson rate at which SLO attainment stays at or above a target.
    #[command(allow_negative_numbers = true)]
    Capacity(CapacityArgs),
    /// Place a model's prefill and decode steps on a GPU's roofline: FLOPs, bytes, arithmetic
    /// intensity, the ridge point, and the TTFT and TPOT floors they imply.
    #[command(allow_negative_numbers = true)]
    Roofline(RooflineArgs),
    /// Rank deployments (GPU × tensor parallelism × weight format × engine × mechanisms) by cost
    /// per million tokens at their simulated capacity under an SLO.
    #[command(allow_negative_numbers = true)]
    Plan(PlanArgs),
    /// Compare result files against the first (the baseline): the main metrics' deltas and
    /// whether each is significant; runs of different workloads are refused unless --force.
    Compare(CompareArgs),
    /// A CI gate: exit 1 when RESULTS regressed past a bound against --baseline (one line per
    /// violated bound), 0 when every bound holds, 2 for bad usage.
    Check(CheckArgs),
    /// Render a result file: the console report, and on request a self-contained HTML report
    /// with charts, a CSV of every request and a CSV of each run's summary.
    Report(ReportArgs),
    /// Import another tool's results (vLLM `bench serve --save-result` JSON, GuideLLM report JSON,
    /// AIPerf `profile_export` JSONL or JSON) as a goodput result document, for report, compare
    /// and check; what the file does not hold is left empty and noted, never guessed.
    Import(ImportArgs),
    /// Merge the result files of the shards of one run (`--shard I/N`) into one run: records
    /// with their shard, distributions recomputed from every sample; refuses shards of different
    /// plans or seeds, duplicate or missing shards (unless --allow-partial). The shards of a
    /// plan search (`plan --shard I/N`) merge into one ranked plan.
    Merge(MergeArgs),
    /// Print Kubernetes manifests that run a bench as N shards: a ConfigMap with the plan and an
    /// Indexed Job whose pods print their results to the log between marker lines.
    K8s(K8sArgs),
    /// Fit a digital twin of the server that runs measured (goodput bench result files): its
    /// step cost, scheduler and front end, every parameter with its uncertainty; --validate
    /// predicts held-out runs with it and prints measured against predicted. Use the twin with
    /// sim, serve and capacity --sim (--twin twin.json).
    Fit(FitArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    /// The other tool's result file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The tool that wrote it: vllm, guidellm or aiperf (default: recognized from its fields).
    #[arg(long, value_name = "TOOL")]
    pub from: Option<String>,
    /// Where to write the goodput result document.
    #[arg(long, value_name = "FILE.json")]
    pub out: PathBuf,
    /// An SLO to evaluate over the imported requests (the tools' own SLOs are not in their files).
    #[command(flatten)]
    pub slo: SloArgs,
    /// No console report.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// A result document (`--out` of bench, sim, capacity or plan).
    #[arg(value_name = "RESULTS.json")]
    pub file: PathBuf,
    /// Write a self-contained HTML report (inline SVG charts; loads nothing, opens offline).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Write one CSV row per request (every scalar field of the record, and its latencies).
    #[arg(long, value_name = "FILE.csv")]
    pub csv: Option<PathBuf>,
    /// Write one CSV row per run with its summary.
    #[arg(long, value_name = "FILE.csv")]
    pub summary_csv: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Result files (`--out` of bench, sim, …); the first is the baseline. A file with several
    /// runs of one workload counts as repeats (run-to-run noise for throughputs).
    #[arg(value_name = "RESULTS.json", num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,
    /// Compare even when the workloads differ (the differing fields are listed).
    #[arg(long)]
    pub force: bool,
    /// Write the comparison data as JSON (`"kind": "comparison"`).
    #[arg(long, value_name = "FILE.json")]
    pub out: Option<PathBuf>,
    /// Write a self-contained HTML page (works offline, prints cleanly): the comparison tables
    /// and the CDFs of TTFT, TPOT, ITL and E2E overlaid, one series per file.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The result file under test.
    #[arg(value_name = "RESULTS.json")]
    pub results: PathBuf,
    /// The result file it must not regress against.
    #[arg(long, value_name = "BASE.json")]
    pub baseline: PathBuf,
    /// Bounds, comma-separated: `p99(ttft)=10%,output_throughput=-5%,attainment=-1pt,p50(tpot)=+2ms`
    /// (the worse direction comes from the metric: latencies up, throughputs and attainment down).
    #[arg(long, value_name = "BOUNDS", allow_hyphen_values = true)]
    pub max_regress: Option<String>,
    /// Bounds from a file: one or more per line, `#` comments.
    #[arg(long, value_name = "FILE")]
    pub bounds_file: Option<PathBuf>,
    /// Fail a bound only when its regression is significant (95% interval of the difference
    /// excludes 0).
    #[arg(long)]
    pub require_significant: bool,
    /// Check even when the workloads differ.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// Model from the catalog (default llama-3.1-8b; with --model-config: its name).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// A Hugging Face config.json describing the model's architecture.
    #[arg(long, value_name = "PATH")]
    pub model_config: Option<PathBuf>,
    /// Extra GPUs from a TOML file (same format as crates/model/engine/data/gpus.toml).
    #[arg(long, value_name = "FILE.toml")]
    pub gpu_spec: Option<PathBuf>,
    /// GPUs to consider, comma-separated (a100, h100, h200, b200, mi300x, l40s, rtx5090, m2-ultra,
    /// or --gpu-spec's; those without a default price need --price).
    #[arg(long, value_name = "LIST", default_value = "h100")]
    pub gpus: String,
    /// Tensor-parallel sizes to consider, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "1")]
    pub tp: String,
    /// Weight formats to consider, comma-separated (bf16, fp8, fp4).
    #[arg(long, value_name = "LIST", default_value = "bf16")]
    pub dtype: String,
    /// Engines whose defaults to consider, comma-separated (vllm, sglang, trtllm).
    #[arg(long, value_name = "LIST", default_value = "vllm")]
    pub engines: String,
    /// Mechanism sets to consider, comma-separated: baseline (the engine's defaults), spec (a
    /// draft model, k=4, acceptance 0.7), ngram (k=4, acceptance 0.5), disagg (one prefill and
    /// one decode instance over NVLink), no-prefix-caching, prefill-first.
    #[arg(long, value_name = "LIST", default_value = "baseline")]
    pub mechanisms: String,
    /// The draft model of the spec mechanism, a catalog name (default: the smallest catalog model
    /// sharing the target's tokenizer, e.g. llama-3.2-1b for Llama 3).
    #[arg(long, value_name = "MODEL")]
    pub draft: Option<String>,
    /// Workload and SLO preset: chat, enterprise, summarize, batch (explicit flags override it).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Hourly price per GPU, repeatable or comma-separated: h100=2.99/h (defaults: docs/plan.md).
    #[arg(long, value_name = "GPU=PRICE/h")]
    pub price: Vec<String>,
    /// Purchase price per GPU, for the buy-vs-rent break-even: h100=30000.
    #[arg(long, value_name = "GPU=PRICE")]
    pub purchase: Vec<String>,
    /// An owned GPU's running cost per hour (default: board power × 1.3 PUE × $0.12/kWh).
    #[arg(long, value_name = "GPU=PRICE/h")]
    pub running_cost: Vec<String>,
    /// Requests per second the deployment must serve: how many GPUs each candidate needs.
    #[arg(long, value_name = "R")]
    pub target_rate: Option<f64>,
    /// Most dollars per hour for the deployment serving --target-rate (others are marked over
    /// budget).
    #[arg(long, value_name = "DOLLARS")]
    pub budget: Option<f64>,
    /// Share of requests that must meet the SLO (default: the preset's, else 0.99).
    #[arg(long, value_name = "F")]
    pub attainment: Option<f64>,
    /// Virtual seconds of arrivals per capacity step.
    #[arg(long, value_name = "DURATION", default_value = "120s")]
    pub step_time: String,
    /// Stop the capacity search once the bracket is this narrow (a share of the rate).
    #[arg(long, value_name = "F", default_value = "0.1")]
    pub precision: f64,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub slo: SloArgs,
    /// Write the plan (a result document with a `plan` section) here.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Write the plan as a self-contained HTML report (cost vs p99 latency chart) here.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
    /// Seed of arrivals and lengths.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Evaluate only shard I of N of the candidate grid (0 <= I < N): candidate k, in the grid's
    /// order, goes to shard k mod N; `goodput merge` combines the shards' results into one plan.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct RooflineArgs {
    /// Model from the catalog (with --model-config: its name).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// A Hugging Face config.json describing the model's architecture (instead of a catalog name).
    #[arg(long, value_name = "PATH")]
    pub model_config: Option<PathBuf>,
    /// GPU: a100, h100, h200, b200, mi300x, l40s, rtx5090, m2-ultra, or one from
    /// --gpu-spec.
    #[arg(long, value_name = "NAME")]
    pub gpu: String,
    /// Extra GPUs from a TOML file (same format as crates/model/engine/data/gpus.toml).
    #[arg(long, value_name = "FILE.toml")]
    pub gpu_spec: Option<PathBuf>,
    /// Tensor-parallel degree (default 1).
    #[arg(long, value_name = "N")]
    pub tp: Option<u32>,
    /// Weight format: bf16 (or fp16), fp8, fp4 (default bf16).
    #[arg(long, value_name = "DTYPE")]
    pub dtype: Option<String>,
    /// KV cache format: bf16, fp8, fp4 (default bf16).
    #[arg(long, value_name = "DTYPE")]
    pub kv_dtype: Option<String>,
    /// Decode batch sizes, comma-separated (default 1,8,32,64,128,256,512).
    #[arg(long, value_name = "B,...")]
    pub batch: Option<String>,
    /// Tokens each decoding sequence attends: its prompt plus the output so far (default 1024).
    #[arg(long, value_name = "C")]
    pub context: Option<String>,
    /// Tokens of the prompt whose prefill is placed (default 4096).
    #[arg(long, value_name = "P")]
    pub prompt: Option<String>,
    /// Draw the roofline with its points as a self-contained log-log SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub svg: Option<PathBuf>,
    /// Write the numbers as JSON (`"kind": "roofline"`).
    #[arg(long, value_name = "FILE.json")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CapacityArgs {
    /// Search in virtual time with the engine model (seconds) instead of measuring.
    #[arg(long)]
    pub sim: bool,
    /// Share of requests that must meet the SLO (DistServe uses 0.9).
    #[arg(long, default_value_t = 0.99, value_name = "F")]
    pub attainment: f64,
    /// First rate tried, req/s; it is doubled or halved until the capacity is bracketed.
    #[arg(long, default_value_t = 1.0, value_name = "R")]
    pub start_rate: f64,
    /// Most search steps (a step run again longer because its trend was unclear counts once).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub max_steps: u32,
    /// Stop bisecting when the bracket is narrower than this share of the rate: the capacity is
    /// printed ± half of it (default 0.04: ±2%).
    #[arg(long, default_value_t = 0.04, value_name = "F")]
    pub precision: f64,
    /// Each step sends at least rate × this many seconds of arrivals (and at least --requests),
    /// so that a step reaches its steady state [default: 10s measured, 600s with --sim].
    #[arg(long, value_name = "DURATION")]
    pub step_time: Option<String>,
    /// Everything `bench` takes (target, engine, workload, SLO, output); per step, --requests is
    /// the fewest arrivals (200) and --duration the longest (60 s when measuring); the first tenth
    /// of each step is warm-up.
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// The engine model (for `serve`, `sim`, and `bench` without `--url`).
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct EngineArgs {
    /// A digital twin (`goodput fit --out twin.json`): the engine is the measured server's fitted
    /// model; engine flags given with it are what-ifs on top of it.
    #[arg(long, value_name = "twin.json")]
    pub twin: Option<PathBuf>,
    /// Whose defaults to start from: vllm (V1, default), sglang or trtllm; other flags override
    /// them.
    #[arg(long = "engine", value_name = "NAME")]
    pub preset: Option<String>,
    /// GPU: a100, h100, h200, b200, mi300x, l40s, rtx5090, m2-ultra, or one from
    /// --gpu-spec.
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// Extra GPUs from a TOML file (same format as crates/model/engine/data/gpus.toml).
    #[arg(long, value_name = "FILE.toml")]
    pub gpu_spec: Option<PathBuf>,
    /// A Hugging Face config.json describing the model's architecture (instead of a catalog name).
    #[arg(long, value_name = "PATH")]
    pub model_config: Option<PathBuf>,
    /// Tensor-parallel degree.
    #[arg(long, value_name = "N")]
    pub tp: Option<u32>,
    /// Weight format: bf16, fp8, fp4.
    #[arg(long, value_name = "DTYPE")]
    pub dtype: Option<String>,
    /// KV cache format: bf16, fp8, fp4 (default: bf16; fp8 with `--engine trtllm` and fp8 or fp4
    /// weights).
    #[arg(long, value_name = "DTYPE")]
    pub kv_dtype: Option<String>,
    /// Most sequences in the running batch (default: the preset's; vLLM 1024 on 80 GB GPUs).
    #[arg(long, value_name = "N")]
    pub max_num_seqs: Option<u32>,
    /// Most tokens per iteration, the chunk budget of chunked prefill (default: the preset's).
    #[arg(long, value_name = "N")]
    pub max_batched_tokens: Option<u32>,
    /// Share of GPU memory the engine may use (default: the preset's; vLLM 0.9).
    #[arg(long, value_name = "F")]
    pub gpu_memory_utilization: Option<f64>,
    /// KV cache block size in tokens (default: the preset's; vLLM 16).
    #[arg(long, value_name = "N")]
    pub block_size: Option<u32>,
    /// Chunked prefill: long prompts share iterations with decodes (same as --scheduling chunked).
    #[arg(long)]
    pub chunked_prefill: bool,
    /// When prompts are prefilled: prefill-first (a prefill iteration ahead of the decodes),
    /// decode-first (decodes every iteration, whole prompts in the budget left), chunked.
    #[arg(long, value_name = "POLICY")]
    pub scheduling: Option<String>,
    /// continuous (iteration-level, default) or static (a batch runs to its longest sequence).
    #[arg(long, value_name = "MODE")]
    pub batching: Option<String>,
    /// Static batching: the longest a batch waits to fill (default 0: it starts with what waits).
    #[arg(long, value_name = "DURATION")]
    pub batch_timeout: Option<String>,
    /// paged (blocks as a sequence grows, default) or prealloc (a reservation at admission).
    #[arg(long, value_name = "MODE")]
    pub kv_alloc: Option<String>,
    /// What a pre-allocated sequence reserves: max-model-len (default) or request (prompt +
    /// max_tokens).
    #[arg(long, value_name = "RULE")]
    pub prealloc: Option<String>,
    /// The longest sequence served, prompt plus output (default: the model's context).
    #[arg(long, value_name = "N")]
    pub max_model_len: Option<u64>,
    /// Weights to keep in host memory per GPU, GB (vLLM's --cpu-offload-gb): a model larger than
    /// the GPU runs, streaming them over the host link (PCIe) at every step.
    #[arg(long, value_name = "GB")]
    pub cpu_offload_gb: Option<f64>,
    /// Expert parallelism with data-parallel attention for a mixture of experts (TensorRT-LLM's
    /// --ep with attention DP, SGLang's --enable-dp-attention): each of the --tp GPUs holds whole
    /// experts and the whole attention for its own sequences; tokens reach their experts by
    /// all-to-all over the link.
    #[arg(long)]
    pub expert_parallel: bool,
    /// Prefix caching: keep computed KV blocks by content and reuse them for requests sharing a
    /// prefix: on or off (default: the preset's; vLLM V1 on). Alone, the flag means on.
    #[arg(long, value_name = "on|off", num_args = 0..=1, default_missing_value = "on")]
    pub prefix_caching: Option<String>,
    /// Speculative decoding: draft=MODEL,k=4,acceptance=0.7 (a catalog model drafts) or
    /// ngram,k=4,acceptance=0.5 (prompt lookup, no draft cost).
    #[arg(long, value_name = "SPEC")]
    pub speculative: Option<String>,
    /// Replicas of the engine behind a router (each with --tp GPUs).
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// How replicas are picked: round-robin (default), least-loaded, prefix-aware.
    #[arg(long, value_name = "POLICY")]
    pub router: Option<String>,
    /// Prefill/decode disaggregation: prefill=P,decode=D instances (each with --tp GPUs).
    #[arg(long, value_name = "prefill=P,decode=D")]
    pub disaggregate: Option<String>,
    /// The link that moves KV from prefill to decode instances: 25gbps, 100gbps, 400gbps,
    /// nvlink or <N>gbps (default 100gbps).
    #[arg(long, value_name = "LINK")]
    pub link: Option<String>,
    /// Append-prefill: a conversation's later turns prefill on the decode instance holding their
    /// history, moving no KV.
    #[arg(long)]
    pub ppd: bool,
    /// Most requests waiting for admission before new ones get HTTP 429 (default 100000; `sim`
    /// with `--rate inf` or a sweep: unbounded, so an offline run queues every request).
    #[arg(long, value_name = "N")]
    pub max_waiting: Option<usize>,
    /// Model FLOPs utilization of the step-time model, at its largest GEMMs (default: calibrated
    /// for the GPU, engine and format, crates/model/engine/data/efficiency.toml; FP4 weights use
    /// their own).
    #[arg(long, value_name = "F")]
    pub mfu: Option<f64>,
    /// Model bandwidth utilization of the step-time model (default: calibrated for the GPU,
    /// engine and format; FP4 weights use their own).
    #[arg(long, value_name = "F")]
    pub mbu: Option<f64>,
    /// Fixed time added to every iteration (default 2ms, calibrated).
    #[arg(long, value_name = "DURATION")]
    pub step_overhead: Option<String>,
    /// Host time per sequence per iteration (default 0).
    #[arg(long, value_name = "DURATION")]
    pub seq_overhead: Option<String>,
    /// Intake time of one request (the API server parsing and handing it to the scheduler; one
    /// request at a time) (default 500us).
    #[arg(long, value_name = "DURATION")]
    pub ingest_overhead: Option<String>,
    /// Intake time per prompt token (tokenization) (default 0.5us).
    #[arg(long, value_name = "DURATION")]
    pub ingest_per_token: Option<String>,
    /// Mean latency between the API server and the scheduler, passed by requests side by side
    /// (default 2ms).
    #[arg(long, value_name = "DURATION")]
    pub frontend_latency: Option<String>,
    /// Standard deviation of that latency, per request (default 2ms; 0 sends a burst into the
    /// engine in lockstep).
    #[arg(long, value_name = "DURATION")]
    pub frontend_jitter: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to bind (loopback unless you say otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Model from the catalog: llama-2-7b, llama-2-13b, llama-2-70b, llama-3.1-8b, llama-3.1-70b,
    /// llama-3.1-405b, mixtral-8x7b, qwen2.5-7b, llama-4-scout.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Tokenizer for counting prompts and making output text (default: built-in cl100k_base).
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Largest accepted request body in bytes (larger: HTTP 413).
    #[arg(long, default_value_t = 16 << 20)]
    pub max_body_bytes: usize,
    /// Seeds output lengths (requests without ignore_eos) and generated words.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A reasoning model: tokens it thinks before each answer (drawn per request; a request's
    /// own `reasoning_tokens` first), streamed as `reasoning_content` on the chat API and
    /// between `<think>` tags on completions: N, uniform:A..B, normal:M,S, lognormal:M,S.
    #[arg(long, value_name = "DIST")]
    pub reasoning_tokens: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// Model from the catalog (default llama-3.1-8b).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Let requests stop before max_tokens (lengths drawn uniformly from 1..=max_tokens).
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// (bench only: a simulation has no HTTP API; refused with a message)
    #[arg(long, hide = true, value_name = "API")]
    pub api: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub slo: SloArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Base URL of an OpenAI-compatible server (http://HOST:PORT, with or without /v1; a full
    /// endpoint URL such as http://HOST:PORT/v1/chat/completions also picks --api).
    #[arg(long)]
    pub url: Option<String>,

    /// Which endpoint to call [default: completions, or the one --url names].
    #[arg(long, value_parser = api_parser())]
    pub api: Option<Api>,

    /// With --url: the model name to request (default: the first id from GET /v1/models).
    /// Without: the catalog model the embedded engine serves (default llama-3.1-8b).
    #[arg(long)]
    pub model: Option<String>,

    /// Environment variable holding the API key (sent as a bearer token when set).
    #[arg(long, default_value = "OPENAI_API_KEY", value_name = "VAR")]
    pub api_key_env: String,

    /// Also trust the CA certificate(s) in this PEM file for https (a private CA).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,

    /// Do not send `ignore_eos: true` and `min_tokens` (let the model stop on its own).
    #[arg(long)]
    pub no_ignore_eos: bool,

    /// Extra JSON fields merged into every request body, e.g. '{"temperature": 0}'.
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,

    /// Resend a request that failed before any content arrived (connection failure, 408, 429,
    /// 5xx, stream closed early) up to N times; every failed attempt is kept in the record.
    /// Default 0: each request is sent exactly once.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub retries: u32,

    /// The largest one stream event may be (e.g. 16MiB, 512KiB, 1000000): a larger one fails
    /// its request (`event_too_large`) instead of being counted as tokens.
    #[arg(long, value_name = "SIZE", default_value = "16MiB")]
    pub max_event_size: String,

    /// How a reasoning model's thinking is told from its answer: fields (`reasoning_content` /
    /// `reasoning`, as vLLM, SGLang and DeepSeek stream it), think-tags (also content between
    /// `<think>` and `</think>`: a server without a reasoning parser), or none (all answer).
    #[arg(long, value_name = "PARSER", default_value = "fields")]
    pub reasoning_parser: String,

    /// Scrape the server's Prometheus metrics during the run (running, waiting, KV usage, prefix
    /// cache, preemptions, generated tokens; vLLM, SGLang, TGI and llama.cpp names), store them
    /// in the result document and chart them; default URL: the target's /metrics. Always on for
    /// the embedded engine. A failing scrape is counted and warned about, never fatal.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub scrape_metrics: Option<String>,

    /// How often to scrape the server's metrics.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub scrape_interval: String,

    #[command(flatten)]
    pub engine: EngineArgs,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub timeouts: TimeoutArgs,

    #[command(flatten)]
    pub slo: SloArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// How much load, for how long.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Load profile (default: concurrent with --concurrency, poisson with --rate, throughput with
    /// --rate inf, else concurrent 16 users).
    #[arg(long, value_parser = profile_parser())]
    pub profile: Option<Profile>,

    /// Users for `concurrent` (closed loop: each sends its next request when the previous ends).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// Requests per second for `constant`, `poisson`, `gamma`, and the end rate of `ramp`
    /// (`inf`: the `throughput` profile).
    #[arg(long, value_name = "R")]
    pub rate: Option<goodput_workload::Rate>,

    /// `ramp`: the rate at the start (default 0).
    #[arg(long, value_name = "R")]
    pub rate_start: Option<f64>,

    /// `ramp`: how long the rate takes to rise (default: --duration).
    #[arg(long, value_name = "DURATION")]
    pub ramp_duration: Option<String>,

    /// `gamma`: shape of the inter-arrival times as vLLM's --burstiness (1 is Poisson; below 1
    /// burstier; the coefficient of variation is 1/√B).
    #[arg(long, value_name = "B")]
    pub burstiness: Option<f64>,

    /// Open-loop profiles: most requests in flight; an arrival over the cap waits for a slot
    /// (counted as client queue time), it is never dropped.
    #[arg(long, value_name = "N")]
    pub max_concurrency: Option<usize>,

    /// `sweep`: rates measured between the synchronous and the throughput stages (default 5).
    #[arg(long, value_name = "K")]
    pub sweep_points: Option<u32>,

    /// `replay`: multiply the dataset's arrival times, and the pauses between a session's
    /// calls (a trace's think and tool times), by F (0.5 = twice as fast). Other profiles: the
    /// pauses only (a session trace's, `--think-time`'s, `--tool-time`'s).
    #[arg(long, value_name = "F")]
    pub time_scale: Option<f64>,

    /// Pause between a user's requests (turns of a session; sessions of a closed-loop user):
    /// 2s, 500ms, uniform:A..B, exp:MEAN, normal:MEAN,STD.
    #[arg(long, value_name = "DIST")]
    pub think_time: Option<String>,

    /// Stop after this many requests (per stage for `sweep`; default 100 unless --duration).
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,

    /// Stop sending after this long (e.g. 30s, 5m); in-flight requests finish. Per stage for
    /// `sweep` (default 30s there).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Leave the start out of the summary: a duration (30s) or a number of requests (20).
    #[arg(long, value_name = "DURATION|N")]
    pub warmup: Option<String>,

    /// Leave the end out of the summary: a duration (30s) or a number of requests (20).
    #[arg(long, value_name = "DURATION|N")]
    pub cooldown: Option<String>,

    /// Stop the run once this many requests have failed (exit code 1).
    #[arg(long, value_name = "N")]
    pub max_errors: Option<u64>,

    /// Stop the run (or a sweep stage) once the server is over-saturated: TTFT from the schedule
    /// grows faster than the SLO's TTFT budget (1 s without one) allows over ten minutes, at two
    /// checks in a row (stop reason `over_saturated`).
    #[arg(long)]
    pub stop_over_saturated: bool,

    /// After Ctrl-C or --max-errors, how long in-flight requests may finish before cancellation.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub grace: String,

    /// Write every request's arrival time, lengths and prompt as JSONL (replay it with
    /// --dataset jsonl:FILE --profile replay).
    #[arg(long, value_name = "FILE.jsonl")]
    pub export_schedule: Option<PathBuf>,

    /// Seed for arrivals, lengths, prompt text and think times.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Send only shard I of N of the global schedule (0 <= I < N): N processes with the same
    /// plan and seed send exactly the schedule one would; merge their results with `goodput merge`.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,

    /// Start at this wall-clock instant (RFC 3339, or Unix milliseconds), so shards on several
    /// machines start together (bench only; at most 5 s past, at most 24 h ahead).
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

/// What each request contains.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Where prompts come from: synthetic, sharegpt:PATH, jsonl:PATH, azure:PATH, mooncake:PATH,
    /// weka:PATH (agentic traces: a file, JSONL, or a directory of traces), bailian:PATH.
    #[arg(long, value_name = "KIND:PATH")]
    pub dataset: Option<String>,

    /// Prompt length in tokens: N, uniform:A..B, normal:MEAN,STD, lognormal:MEAN,STD, file:PATH.
    /// [default: 512]
    #[arg(long, value_name = "DIST")]
    pub input_tokens: Option<String>,

    /// Requested output length (max_tokens) when the dataset gives none, same forms.
    /// [default: 128]
    #[arg(long, value_name = "DIST")]
    pub output_tokens: Option<String>,

    /// Reasoning models: tokens the engine model thinks before each answer (streamed as
    /// `reasoning_content`; a dataset's `reasoning_tokens` first), same forms. The embedded
    /// engine, serve, sim, capacity and plan; a real server's model decides for itself.
    #[arg(long, value_name = "DIST")]
    pub reasoning_tokens: Option<String>,

    /// Multi-turn sessions: each turn resends the conversation so far plus a new user message.
    #[arg(long)]
    pub sessions: bool,

    /// Turns per session: N (synthetic; ShareGPT keeps up to N) or `all` (whole ShareGPT
    /// conversations). Implies --sessions when above 1.
    #[arg(long, value_name = "N|all")]
    pub turns: Option<String>,

    /// Agentic sessions: each session is an agent whose calls resend the whole context so far
    /// plus a tool result, after a tool's latency; with --fan-out, sub-agents fork from a call.
    #[arg(long)]
    pub agentic: bool,

    /// Agentic: calls per session, a length distribution (N, uniform:A..B, …) [default: 8].
    #[arg(long, value_name = "DIST")]
    pub calls: Option<String>,

    /// Agentic: the tool's latency before each call after the first: 2s, exp:1s, uniform:0.5s..3s
    /// [default: exp:1s].
    #[arg(long, value_name = "DIST")]
    pub tool_time: Option<String>,

    /// Agentic: tokens each tool result adds to the context, a length distribution [default: 512].
    #[arg(long, value_name = "DIST")]
    pub tool_output_tokens: Option<String>,

    /// Agentic: sub-agents forked together from one call; they share its context as prefix, run
    /// in parallel, and their answers are the parent's next tool result [default: 0].
    #[arg(long, value_name = "N")]
    pub fan_out: Option<u32>,

    /// Agentic: the call (1-based) whose reply forks the sub-agents [default: 1].
    #[arg(long, value_name = "K")]
    pub fan_out_at: Option<u32>,

    /// Agentic: calls per sub-agent, a length distribution [default: 4].
    #[arg(long, value_name = "DIST")]
    pub sub_agent_calls: Option<String>,

    /// Shared system prompts: requests are spread over G groups, each with its own prompt.
    #[arg(long, value_name = "G")]
    pub prefix_groups: Option<u32>,

    /// Length of each group's shared system prompt in tokens.
    #[arg(long, value_name = "P")]
    pub prefix_tokens: Option<u32>,

    /// A Hugging Face tokenizer.json for prompts and counting (default: built-in cl100k_base).
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
}

/// Service-level objectives: attainment, goodput and percentile verdicts.
#[derive(Args, Debug, Clone, Default)]
pub struct SloArgs {
    /// SLO predicates, repeatable or comma-separated: per request (ttft<=200ms, tpot<=40ms,
    /// itl_max<=100ms, e2e<=5s, ttft_sched<=…, e2e_sched<=…) or over the run (p99(ttft)<=200ms).
    #[arg(long, value_name = "PREDICATES")]
    pub slo: Vec<String>,

    /// A named SLO: mlperf-llama2-70b, mlperf-interactive, mlperf-llama3.1-8b, chat, seed-online.
    #[arg(long, value_name = "NAME")]
    pub slo_preset: Vec<String>,

    /// Smoothed goodput: the TTFT budget T0 (default: the SLO's TTFT bound).
    #[arg(long, value_name = "DURATION")]
    pub ttft_budget: Option<String>,

    /// Smoothed goodput: the reading pace τ per token (default: the SLO's TPOT bound).
    #[arg(long, value_name = "DURATION")]
    pub reading_pace: Option<String>,

    /// Smoothed goodput: excess delay still fully acceptable (default T0).
    #[arg(long, value_name = "DURATION")]
    pub delay_ok: Option<String>,

    /// Smoothed goodput: excess delay at which a request is worth nothing (default 5·T0).
    #[arg(long, value_name = "DURATION")]
    pub delay_max: Option<String>,
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
    /// Longest allowed silence between stream events once content has started (keep-alive
    /// comments and bytes that complete no event do not end a silence).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub timeout_idle: String,
    /// Longest allowed silence in bytes once content has started (comments count) [default:
    /// --timeout-idle].
    #[arg(long, value_name = "DURATION")]
    pub timeout_stall: Option<String>,
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

    /// Write a self-contained HTML report of the results (charts; opens offline) here.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,

    /// How percentiles are computed.
    #[arg(long, value_parser = percentile_parser(), default_value = "linear")]
    pub percentiles: PercentileMethod,

    /// Per-request records the result document holds: all (every record up to 100000, then a
    /// sample of 100000 drawn with the run's seed), sample:N (a seeded sample of at most N) or
    /// none. The summary, and the JSONL log, always see every record.
    #[arg(long, value_name = "all|sample:N|none", default_value = "all")]
    pub records: goodput_metrics::RecordsMode,
}

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// The shards' result files (`bench --shard I/N --out …`), any order.
    #[arg(value_name = "SHARD.json", required = true)]
    pub files: Vec<PathBuf>,
    /// Where to write the merged result document.
    #[arg(long, value_name = "FILE.json")]
    pub out: PathBuf,
    /// Merge even when some shards are missing (the merged run says which, in a warning).
    #[arg(long)]
    pub allow_partial: bool,
    /// Print only the summary line, not the merged run's report.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct K8sArgs {
    /// The bench arguments every shard runs (everything up to the next k8s flag; or one quoted
    /// string), e.g. `--plan-from --url http://vllm:8000 --rate 2000 --duration 5m`.
    #[arg(long, value_name = "ARGS", num_args = 1.., allow_hyphen_values = true, required = true)]
    pub plan_from: Vec<String>,
    /// Shards (pods), each sending 1/N of the schedule.
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// The container image (built from the repository's Dockerfile).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// The namespace of the ConfigMap and the Job.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// The Job's name (the ConfigMap is NAME-plan).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// When the shards start (RFC 3339 or Unix ms; default: now + --start-delay).
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// How far ahead the default start is (time to pull the image and schedule every pod).
    #[arg(long, value_name = "DURATION")]
    pub start_delay: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct FitArgs {
    /// Result files measured by `goodput bench` against one server (with their records).
    #[arg(value_name = "RUN.json")]
    pub runs: Vec<PathBuf>,
    /// Where to write the twin.
    #[arg(long, value_name = "twin.json")]
    pub out: Option<PathBuf>,
    /// Check an existing twin instead of fitting one (with --validate).
    #[arg(long, value_name = "twin.json")]
    pub twin: Option<PathBuf>,
    /// Held-out result files: each run's plan and seed simulated with the twin, measured against
    /// predicted.
    #[arg(long, value_name = "HELD_OUT.json", num_args = 1..)]
    pub validate: Vec<PathBuf>,
    /// Write the validation as a result document (the predictions as its runs).
    #[arg(long, value_name = "FILE.json")]
    pub report: Option<PathBuf>,
    /// Write the validation as an HTML page with predicted-vs-measured charts.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// The server's sequence limit, when you know it (llama.cpp's -np, vLLM's --max-num-seqs):
    /// recorded as given, for runs that never queued to show it.
    #[arg(long, value_name = "N")]
    pub max_num_seqs: Option<u32>,
}
