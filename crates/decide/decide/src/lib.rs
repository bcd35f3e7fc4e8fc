//! The Decide half of goodput: what the measured or modelled runs mean for a deployment.
//!
//! - [`roofline`]: a model's prefill and decode steps against a GPU's roofline, and their floors.

pub mod roofline;
