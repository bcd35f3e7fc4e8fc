//! Where results go: the output flags, and the checks that a file can be written before a run.

use super::*;

/// The output flags, validated (the result file can be written).
pub(super) fn output_plan(a: &OutputArgs) -> Result<OutputPlan, UsageError> {
    if let Some(p) = &a.out {
        writable("--out", p)?;
    }
    if let Some(h) = &a.html {
        writable("--html", h)?;
        if a.out.as_ref().is_some_and(|o| same_file(o, h)) {
            return Err(usage("--html", "must differ from --out"));
        }
    }
    Ok(OutputPlan { out: a.out.clone(), percentiles: a.percentiles, records: a.records })
}

/// `STEM.requests.jsonl` beside the result file.
pub fn jsonl_path(out: &OutputPlan) -> Option<std::path::PathBuf> {
    let p = out.out.as_ref()?;
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "results".into());
    Some(p.with_file_name(format!("{stem}.requests.jsonl")))
}

/// Reads a result document given as an argument: any file that cannot be read as one (missing,
/// a directory, not JSON, another tool's results) is a usage error (exit 2) naming the file.
pub fn read_doc(path: &Path) -> Result<goodput_results::ResultDoc, UsageError> {
    goodput_results::ResultDoc::read(path).map_err(|e| UsageError(e.to_string()))
}

/// Checks before a run that a file can be written at `path`, so a long run never ends in an error
/// about its output: its directory exists and takes new files (results are written to a temporary
/// file there and renamed), and `path` is absent or a regular file (not a directory, a FIFO or a
/// dangling link). Nothing existing is opened or changed; the probe file is removed.
pub fn writable(flag: &str, path: &Path) -> Result<(), UsageError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(usage(flag, format!("directory {} does not exist", dir.display())));
    }
    match (std::fs::symlink_metadata(path), std::fs::metadata(path)) {
        (Err(_), _) => {}
        (Ok(_), Ok(m)) if m.is_file() => read_only(flag, path, &m)?,
        (Ok(_), Ok(m)) if m.is_dir() => {
            return Err(usage(flag, format!("{} is a directory; give a file name", path.display())));
        }
        (Ok(_), Ok(_)) => return Err(usage(flag, format!("{} is not a regular file", path.display()))),
        (Ok(_), Err(_)) => return Err(usage(flag, format!("{} is a dangling symbolic link", path.display()))),
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let probe = dir.join(format!(".{name}.{}.goodput-probe", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| usage(flag, format!("cannot write in {}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// An existing file that may not be written is refused, not replaced: its mode has no write
/// permission (which even root, who may write anything, is refused on), or this user cannot
/// open it for writing. Opening it (without truncating) changes nothing.
fn read_only(flag: &str, path: &Path, m: &std::fs::Metadata) -> Result<(), UsageError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = m.permissions().mode() & 0o7777;
    let refuse = |why: String| {
        Err(usage(
            flag,
            format!(
                "{} is read-only ({why}): goodput would replace it; make it writable (chmod u+w) or give another file",
                path.display()
            ),
        ))
    };
    if mode & 0o222 == 0 {
        return refuse(format!("mode {mode:04o}"));
    }
    match std::fs::OpenOptions::new().write(true).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => refuse(format!("mode {mode:04o}, {e}")),
        _ => Ok(()),
    }
}

/// Whether two paths name one file (compared as absolute paths).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    abs(a) == abs(b)
}
