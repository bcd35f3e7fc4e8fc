//! What the measuring client and the result document agree on, without the engine model: the
//! OpenAI endpoint a request goes to ([`api`]), how reasoning is told from the answer ([`reasoning`]), its timeouts ([`timeouts`]), and the server
//! metrics a run scrapes, as the document holds them ([`server_metrics`]; reading the Prometheus
//! text is the client's).

pub mod api;
pub mod reasoning;
pub mod server_metrics;
pub mod timeouts;

pub use api::Api;
pub use reasoning::ReasoningParser;
pub use timeouts::{Timeouts, secs};
