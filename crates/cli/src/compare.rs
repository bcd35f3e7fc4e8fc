//! `goodput compare A.json B.json [C.json …]`: each later file against the first, metric by
//! metric, with absolute and relative deltas and whether each difference is significant
//! ([`goodput_decide::compare`]); runs of different workloads are refused (exit 2) with the
//! fields that differ, unless `--force`. `--out` writes the comparison data as JSON, `--html` a
//! self-contained page with the tables and the overlaid CDFs
//! ([`goodput_render::comparison_html`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use goodput_decide::compare::{CompareError, Subject, compare, compare_all};
use goodput_render::comparison::{render_comparison, render_differences};
use goodput_render::comparison_html::comparison_html;
use goodput_results::comparison::Comparison;
use goodput_results::{ResultDoc, Tool};
use serde::{Deserialize, Serialize};

use crate::args::CompareArgs;
use crate::outcome::Outcome;
use crate::output::write_file;
use crate::plan::{UsageError, same_file, writable};

/// The `--out` document's format version: bump it on any incompatible change.
pub const COMPARISON_VERSION: u32 = 1;

/// The `--out` document: `{"kind": "comparison", "version": 1, "tool": …, "comparisons": […]}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparisonDoc {
    pub kind: String,
    pub version: u32,
    pub tool: Tool,
    pub comparisons: Vec<Comparison>,
}

/// Reads one result file for comparing; an unreadable or mixed file is a usage error naming it.
pub fn subject(path: &Path) -> Result<Subject, UsageError> {
    Subject::read(path).map_err(|e| match e {
        CompareError::Result(r) => UsageError(r.to_string()),
        other => UsageError(other.to_string()),
    })
}

/// Every later file against the first (what the console table and a report draw). Refuses
/// different workloads unless `force`: the error is preceded by the differing fields on stderr.
pub fn comparisons(files: &[PathBuf], force: bool) -> Result<Vec<Comparison>, UsageError> {
    let subjects = files.iter().map(|p| subject(p)).collect::<Result<Vec<_>, _>>()?;
    let cmps = compare_all(&subjects);
    refuse_different(&cmps, force)?;
    Ok(cmps)
}

/// Prints the differing fields of each comparison and refuses, unless `force`.
pub fn refuse_different(cmps: &[Comparison], force: bool) -> Result<(), UsageError> {
    let different: Vec<&Comparison> = cmps.iter().filter(|c| !c.differences.is_empty()).collect();
    if force || different.is_empty() {
        return Ok(());
    }
    for c in &different {
        warn!("{}", render_differences(&c.base, &c.other, &c.differences).trim_end());
    }
    Err(UsageError("the runs are not comparable (the fields above differ); pass --force to compare them anyway".into()))
}

pub fn run(a: CompareArgs) -> anyhow::Result<Outcome> {
    if a.files.len() < 2 {
        return Err(UsageError("compare: give at least two result files (the first is the baseline)".into()).into());
    }
    for (flag, path) in [("--out", &a.out), ("--html", &a.html)] {
        let Some(path) = path else { continue };
        writable(flag, path)?;
        if let Some(input) = a.files.iter().find(|f| same_file(path, f)) {
            return Err(UsageError(format!("{flag}: would overwrite the result file {}", input.display())).into());
        }
    }
    if let (Some(o), Some(h)) = (&a.out, &a.html)
        && same_file(o, h)
    {
        return Err(UsageError("--out and --html name the same file".into()).into());
    }
    // each file read once: its subject for the table, its runs for the CDFs
    let docs: Vec<(String, ResultDoc)> = a
        .files
        .iter()
        .map(|p| {
            let doc = crate::plan::read_doc(p)?;
            Ok((p.display().to_string(), doc))
        })
        .collect::<Result<_, UsageError>>()?;
    let subjects = docs
        .iter()
        .map(|(label, doc)| {
            Subject::of(label, doc).map_err(|e| match e {
                CompareError::Result(r) => UsageError(r.to_string()),
                other => UsageError(other.to_string()),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cmps: Vec<Comparison> = subjects[1..].iter().map(|o| compare(&subjects[0], o)).collect();
    refuse_different(&cmps, a.force)?;
    for c in &cmps {
        say!("{}\n", render_comparison(c));
    }
    if let Some(path) = &a.out {
        let doc = ComparisonDoc {
            kind: "comparison".into(),
            version: COMPARISON_VERSION,
            tool: Tool { name: "goodput".into(), version: env!("CARGO_PKG_VERSION").into() },
            comparisons: cmps.clone(),
        };
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
        say!("wrote {}\n", path.display());
    }
    if let Some(path) = &a.html {
        let files: Vec<(String, &ResultDoc)> = docs.iter().map(|(l, d)| (l.clone(), d)).collect();
        write_file(path, comparison_html(&files, &cmps).as_bytes())?;
        say!("wrote {}\n", path.display());
    }
    Ok(Outcome::Ok)
}
