//! `goodput import FILE [--from vllm|guidellm|aiperf] --out goodput.json`: another tool's results
//! as a goodput result document ([`goodput_results::import`] does the mapping), so `report`,
//! `compare` and `check` read them like goodput's own. Prints each run's console report and what
//! the file could not give.

use goodput_results::import::{ImportFormat, apply_slo, import};
use goodput_results::{ResultDoc, Target};

use crate::args::ImportArgs;
use crate::outcome::Outcome;
use crate::plan::{UsageError, same_file, slo_plan, writable};

pub fn run(a: ImportArgs) -> anyhow::Result<Outcome> {
    let from = match &a.from {
        Some(f) => Some(f.parse::<ImportFormat>().map_err(|e| UsageError(format!("--from: {e}")))?),
        None => None,
    };
    if !a.file.is_file() {
        return Err(UsageError(format!("{}: no such file", a.file.display())).into());
    }
    writable("--out", &a.out)?;
    if same_file(&a.out, &a.file) {
        return Err(UsageError(format!("--out: would overwrite the imported file {}", a.file.display())).into());
    }
    let path = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file).map_err(|e| UsageError(format!("{path}: cannot read: {e}")))?;
    let slo = slo_plan(&a.slo)?;
    let mut runs = import(&path, &text, from).map_err(|e| UsageError(e.to_string()))?;
    for r in &mut runs {
        apply_slo(r, &slo).map_err(|e| UsageError(format!("--slo: {e}")))?;
    }
    let doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), runs);
    crate::output::write_result(&doc, &a.out)?;
    if !a.quiet {
        for run in &doc.runs {
            say!("{}\n", goodput_render::render_run("import", run));
            if let Target::Imported(s) = &run.target {
                for n in &s.notes {
                    say!("note: {n}\n");
                }
                say!("\n");
            }
        }
    }
    say!(
        "wrote {} ({} run{} from {path})\n",
        a.out.display(),
        doc.runs.len(),
        if doc.runs.len() == 1 { "" } else { "s" }
    );
    Ok(Outcome::Ok)
}
