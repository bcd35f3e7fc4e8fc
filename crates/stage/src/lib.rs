//! The stage seam: every command runs stages, and a stage runs on a [`Target`].
//!
//! A [`Stage`] is one bounded run of one load (its plan, load and seed); a [`Target`] runs it and
//! returns a typed [`Run`] with its stop reason, printing nothing. Three targets implement it:
//! [`UrlTarget`] (a server over HTTP), [`EmbeddedTarget`] (the engine model behind goodput's own
//! server, in real time) and [`SimTarget`] (the engine model in virtual time). Sweeps
//! ([`sweep::run`]) are library functions over the trait, as is the Decide half's capacity
//! search (`goodput_decide::capacity`), so the planner can call it with a simulated target and
//! the command line with any.
//!
//! Commands stay thin: plan → target → stages → render → write.

mod seam;
pub mod sweep;
mod targets;

pub use seam::{Control, Resources, Stage, StageError, Target};
pub use targets::{AnyTarget, EmbeddedTarget, MAX_SIM_REQUESTS, SimTarget, UrlTarget};
