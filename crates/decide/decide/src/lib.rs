//! The Decide half of goodput: what the measured or modelled runs mean for a deployment.
//!
//! - [`capacity`]: the highest request rate that holds an SLO, on any target (budgets, the
//!   bracket-and-bisect search, its points; the words are the renderer's);
//! - [`planner`]: candidate deployments, the capacity of each in virtual time, their cost, the
//!   ranking and the Pareto front, and merging a sharded search;
//! - [`compare`]: result documents against each other: deltas, significance, regression bounds;
//! - [`roofline`]: a model's prefill and decode steps against a GPU's roofline, and their floors;
//! - [`twin`]: the digital twin: an engine model fitted to a measured server, and its validation.

pub mod capacity;
pub mod compare;
pub mod planner;
pub mod roofline;
pub mod twin;
