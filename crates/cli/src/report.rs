//! `goodput report RESULTS.json [--html FILE] [--csv FILE] [--summary-csv FILE]`: a result
//! document rendered again: its console report, and on request the self-contained HTML report,
//! the per-request CSV and the per-run summary CSV (`goodput_render`). Every output path is
//! checked before anything is read or written.

use std::path::{Path, PathBuf};

use goodput_results::ResultDoc;

use crate::args::ReportArgs;
use crate::outcome::Outcome;
use crate::output::{write_file, write_html};
use crate::plan::{UsageError, same_file, writable};

/// The outputs asked for, with their flags.
fn outputs(a: &ReportArgs) -> [(&'static str, Option<&PathBuf>); 3] {
    [("--html", a.html.as_ref()), ("--csv", a.csv.as_ref()), ("--summary-csv", a.summary_csv.as_ref())]
}

/// Checks the flags: each output writable, none the input, no two the same.
fn validate(a: &ReportArgs) -> Result<(), UsageError> {
    if a.file.is_dir() {
        return Err(UsageError(format!("{}: is a directory, not a result file", a.file.display())));
    }
    if !a.file.is_file() {
        return Err(UsageError(format!("{}: no such result file", a.file.display())));
    }
    let given: Vec<(&str, &PathBuf)> = outputs(a).into_iter().filter_map(|(f, p)| Some((f, p?))).collect();
    for (i, (flag, path)) in given.iter().enumerate() {
        writable(flag, path)?;
        if same_file(path, &a.file) {
            return Err(UsageError(format!("{flag}: would overwrite the result file {}", a.file.display())));
        }
        if let Some((other, _)) = given[..i].iter().find(|(_, p)| same_file(p, path)) {
            return Err(UsageError(format!("{flag}: same file as {other}")));
        }
    }
    Ok(())
}

/// The console report of a whole document: each run, the sweep or capacity search, the plan.
pub fn console(doc: &ResultDoc) -> String {
    let mut o = String::new();
    for run in &doc.runs {
        o.push_str(&goodput_render::render_run("report", run));
        o.push('\n');
    }
    if let Some(c) = &doc.capacity {
        o.push_str(&goodput_render::render_capacity(c));
    } else if doc.runs.len() > 1 {
        o.push_str(&goodput_render::render_sweep(&doc.runs.iter().collect::<Vec<_>>()));
    }
    if let Some(p) = &doc.plan {
        o.push_str(&goodput_render::render_plan(p));
    }
    o
}

fn write_csv(path: &Path, csv: &str, what: &str) -> anyhow::Result<()> {
    write_file(path, csv.as_bytes())?;
    say!("  {what:<12} {}\n", path.display());
    Ok(())
}

pub fn run(a: ReportArgs) -> anyhow::Result<Outcome> {
    validate(&a)?;
    let doc = crate::plan::read_doc(&a.file)?;
    say!("{}", console(&doc));
    let source = a.file.file_name().map_or_else(|| a.file.display().to_string(), |n| n.to_string_lossy().into_owned());
    if let Some(path) = &a.html {
        write_html(path, &doc, &source)?;
    }
    if let Some(path) = &a.csv {
        write_csv(path, &goodput_render::requests_csv(&doc), "requests csv")?;
    }
    if let Some(path) = &a.summary_csv {
        write_csv(path, &goodput_render::summary_csv(&doc), "summary csv")?;
    }
    Ok(Outcome::Ok)
}
