//! The engine served in-process on an ephemeral loopback port: the default target of
//! `goodput bench`.

use std::net::SocketAddr;

use goodput_engine::EngineConfig;
use goodput_tokenizer::Tokenizer;
use tokio::net::TcpListener;

use crate::app::serve;
use crate::priority::lower_priority;
use crate::state::{AppState, ServerConfig};

/// The engine served in-process on an ephemeral loopback port (`goodput bench` without `--url`),
/// on a runtime and threads of its own, as a separate server would be.
pub struct Embedded {
    pub addr: SocketAddr,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Embedded {
    pub async fn start(engine_cfg: EngineConfig, tokenizer: Tokenizer, cfg: ServerConfig) -> Result<Self, EmbedError> {
        // checked here, so that a bad configuration is an error and not a dead server
        goodput_engine::build(&engine_cfg).map_err(|e| EmbedError::Engine(e.to_string()))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(EmbedError::Io)?;
        listener.set_nonblocking(true).map_err(EmbedError::Io)?;
        let addr = listener.local_addr().map_err(EmbedError::Io)?;
        let nice = cfg.nice;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("goodput-embedded")
            .on_thread_start(move || lower_priority(nice))
            .enable_all()
            .build()
            .map_err(EmbedError::Io)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, state_rx) = tokio::sync::oneshot::channel::<AppState>();
        // the state (and its engine thread) is made on the embedded runtime's thread, whose
        // priority the engine thread inherits
        let task = runtime.spawn(async move {
            let state = match AppState::new(&engine_cfg, tokenizer, cfg) {
                Ok(s) => s,
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            };
            let _ = ready.send(state.clone());
            serve(TcpListener::from_std(listener)?, state, async {
                let _ = stopped.await;
            })
            .await
        });
        let state = state_rx.await.map_err(|_| EmbedError::Engine("the embedded server did not start".into()))?;
        Ok(Embedded { addr, state, stop: Some(stop), task: Some(task), runtime: Some(runtime) })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets open streams finish, stops the engine thread.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.state.engine().stop();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{0}")]
    Engine(String),
    #[error("cannot listen on loopback: {0}")]
    Io(std::io::Error),
}
