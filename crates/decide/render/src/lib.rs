//! Result documents rendered for people. Everything here reads only the result document
//! (`goodput-results`): the console report of a run (latency table, throughputs and counts, the
//! client's self-check, goodput, warnings, engine statistics), of a sweep and of a capacity
//! search. [`roofline`] renders `goodput roofline`'s report: its console lines and its SVG.
//! [`html`] renders a whole document as one self-contained HTML page with inline SVG charts
//! ([`charts`], [`svg`]); [`csv`] exports its requests and summaries. [`console`] holds the
//! console text of runs and sweeps, [`capacity`] the capacity search's.

pub mod capacity;
pub mod charts;
pub mod comparison;
pub mod comparison_html;
pub mod console;
pub mod csv;
pub mod html;
mod page;
pub mod planning;
pub mod roofline;
pub mod server_charts;
pub mod svg;
pub mod twin;

pub use capacity::{render_capacity, render_capacity_curve};
pub use console::{
    ITL_NOTE, ITL_PER_CHUNK, ITL_PER_TOKEN, describe, render, render_engine, render_run, render_slo, render_summary,
    render_sweep, stage_line, title,
};
pub use csv::{requests_csv, summary_csv};
pub use html::html_report;
pub use planning::render_plan;
