//! `goodput serve`: the engine model behind an OpenAI-compatible server, in real time.

use anyhow::Context;
use goodput_server::{AppState, ServerConfig, serve};
use goodput_tokenizer::Tokenizer;
use tokio::net::TcpListener;

use crate::args::ServeArgs;
use crate::outcome::Outcome;
use crate::plan::{UsageError, engine_plan};

pub async fn run(args: ServeArgs) -> anyhow::Result<Outcome> {
    let plan = engine_plan(args.model.as_deref(), &args.engine)?;
    let tk = Tokenizer::load(args.tokenizer.as_deref()).map_err(|e| UsageError(format!("--tokenizer: {e}")))?;
    if args.max_body_bytes == 0 {
        return Err(UsageError("--max-body-bytes: must be at least 1".into()).into());
    }
    let reasoning_tokens = match args.reasoning_tokens.as_deref() {
        Some(d) => Some(crate::plan::reasoning_length(d)?),
        None => None,
    };
    let addr = format!("{}:{}", args.host, args.port);
    let listener = TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let name = plan.config.model.name.clone();
    let state = AppState::new(
        &plan.config,
        tk,
        ServerConfig {
            max_body_bytes: args.max_body_bytes,
            seed: args.seed,
            reasoning_tokens,
            ..ServerConfig::new(&name)
        },
    )?;
    say!("goodput serve · {}\n", plan.describe());
    say!("  OpenAI API at http://{local}/v1 (model `{name}`) · /health · /metrics · Ctrl-C stops\n");
    serve(listener, state, async {
        crate::run::stop_signal().await;
    })
    .await?;
    Ok(Outcome::Ok)
}
