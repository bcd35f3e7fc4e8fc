//! The Decide half of goodput: what the measured or modelled runs mean for a deployment.
//!
//! - [`compare`]: result documents against each other: deltas, significance, regression bounds;
//! - [`roofline`]: a model's prefill and decode steps against a GPU's roofline, and their floors.

pub mod compare;
pub mod roofline;
