//! `goodput fit RUN.json… [--out twin.json] [--validate HELD.json…]` fits a digital twin of the
//! server those runs measured (`goodput_decide::twin`); `goodput fit --twin twin.json --validate
//! HELD.json…` checks an existing one. The twin is printed and written; a validation is printed,
//! and with `--report`/`--html` written as a result document (the held-out runs' predictions as
//! its runs) and an HTML page with the predicted-vs-measured charts.

use goodput_decide::twin::{NamedRun, fit_twin, validate};
use goodput_results::ResultDoc;
use goodput_results::validation::TwinValidation;

use crate::args::FitArgs;
use crate::outcome::Outcome;
use crate::output::{write_file, write_html, write_result};
use crate::plan::{UsageError, read_doc, same_file, writable};

fn usage(m: impl std::fmt::Display) -> anyhow::Error {
    UsageError(m.to_string()).into()
}

/// Every run of every document, named by its file.
fn documents(files: &[std::path::PathBuf]) -> anyhow::Result<Vec<(String, ResultDoc)>> {
    files.iter().map(|f| Ok((f.display().to_string(), read_doc(f)?))).collect()
}

fn check_outputs(a: &FitArgs) -> anyhow::Result<()> {
    let outs = [("--out", a.out.as_ref()), ("--report", a.report.as_ref()), ("--html", a.html.as_ref())];
    for (i, (flag, path)) in outs.iter().enumerate() {
        let Some(path) = path else { continue };
        writable(flag, path)?;
        if let Some(f) = a.runs.iter().chain(&a.validate).find(|f| same_file(path, f)) {
            return Err(usage(format!("{flag}: would overwrite the input {}", f.display())));
        }
        if let Some((other, _)) = outs[..i].iter().find(|(_, p)| p.is_some_and(|p| same_file(p, path))) {
            return Err(usage(format!("{flag}: same file as {other}")));
        }
    }
    if (a.report.is_some() || a.html.is_some()) && a.validate.is_empty() {
        return Err(usage("--report and --html write a validation: give --validate HELD_OUT.json"));
    }
    Ok(())
}

pub fn run(a: FitArgs) -> anyhow::Result<Outcome> {
    check_outputs(&a)?;
    let twin = match (&a.twin, a.runs.is_empty()) {
        (Some(_), false) => return Err(usage("give runs to fit, or --twin to check an existing twin, not both")),
        (None, true) => return Err(usage("fit needs runs measured by goodput bench (RUN.json …), or --twin FILE")),
        (Some(p), true) => crate::plan::read_twin(p)?,
        (None, false) => {
            let docs = documents(&a.runs)?;
            let named: Vec<NamedRun> =
                docs.iter().flat_map(|(f, d)| d.runs.iter().map(move |run| NamedRun { file: f, run })).collect();
            let mut twin = fit_twin(&named, env!("CARGO_PKG_VERSION")).map_err(usage)?;
            if let Some(n) = a.max_num_seqs {
                if n == 0 {
                    return Err(usage("--max-num-seqs: must be at least 1"));
                }
                goodput_decide::twin::give_max_num_seqs(&mut twin, n, &named);
            }
            say!("{}", goodput_render::twin::render_twin(&twin));
            if let Some(out) = &a.out {
                let text = serde_json::to_string_pretty(&twin)?;
                write_file(out, format!("{text}\n").as_bytes())?;
                say!("\n  twin         {}\n", out.display());
            }
            twin
        }
    };
    if a.validate.is_empty() {
        return Ok(Outcome::Ok);
    }
    let held = documents(&a.validate)?;
    let mut v =
        TwinValidation { twin: a.twin.as_ref().map_or("fitted".into(), |p| p.display().to_string()), runs: Vec::new() };
    let mut predicted = Vec::new();
    for (file, doc) in &held {
        for run in &doc.runs {
            let (check, p) = validate::check(&twin, file, run).map_err(|e| usage(format!("{file}: {e}")))?;
            v.runs.push(check);
            predicted.push(p);
        }
    }
    say!("{}", goodput_render::twin::render_validation(&v));
    let mut doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), predicted);
    doc.validation = Some(v);
    if let Some(path) = &a.report {
        write_result(&doc, path)?;
        say!("\n  validation   {}\n", path.display());
    }
    if let Some(path) = &a.html {
        write_html(path, &doc, "goodput fit --validate")?;
    }
    Ok(Outcome::Ok)
}
