//! The `goodput` command line: parse arguments, validate them into a plan, run it, report.
//!
//! Exit codes: 0 the run completed (failed requests are reported, not fatal); 1 no request
//! succeeded, `--max-errors` stopped the run, or the target could not be used; 2 invalid usage
//! (one line naming the flag or file); 130 interrupted with Ctrl-C, 143 with SIGTERM (results are
//! still written).

/// Prints to stdout, ignoring a closed pipe (`goodput … | head` must not panic).
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

/// Prints to stderr, ignoring errors.
macro_rules! warn {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod args;
pub mod bench;
pub mod capacity;
pub mod check;
pub mod compare;
pub mod fit;
pub mod import;
pub mod jsonl;
pub mod k8s;
pub mod merge;
pub mod outcome;
pub mod output;
pub mod plan;
pub mod planner;
pub mod report;
pub mod roofline;
pub mod run;
pub mod serve;
pub mod sim;

use clap::Parser;

pub fn main() -> i32 {
    let cli = match args::Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            // a value a flag's own type refused (`--rate fast`): one line naming the flag, as
            // every other usage error
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            warn!("goodput: {}", first.strip_prefix("error: ").unwrap_or(first));
            return 2;
        }
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    // Every connection is a file: the soft open-file limit goes up to the hard one (`bench`
    // also checks its connections fit before sending anything).
    goodput_client::limits::raise_fd_limit();
    // The load generator's workers get precedence over anything else on the machine (best effort).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if !matches!(cli.command, args::Command::Serve(_)) {
        builder.on_thread_start(goodput_client::priority::worker);
    }
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            warn!("goodput: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            args::Command::Bench(a) => bench::run(a).await,
            args::Command::Serve(a) => serve::run(a).await,
            args::Command::Sim(a) => sim::run(a).await,
            args::Command::Capacity(a) => capacity::run(a).await,
            args::Command::Roofline(a) => roofline::run(a),
            // on rayon's threads, outside this runtime: each candidate runs its own simulation
            args::Command::Plan(a) => planner::run(a),
            args::Command::Compare(a) => compare::run(a),
            args::Command::Check(a) => check::run(a),
            args::Command::Report(a) => report::run(a),
            args::Command::Import(a) => import::run(a),
            args::Command::Merge(a) => merge::run(a),
            args::Command::K8s(a) => k8s::run(a),
            // on a thread of its own, outside this runtime: each prediction runs its own simulation
            args::Command::Fit(a) => match std::thread::spawn(move || fit::run(a)).join() {
                Ok(r) => r,
                Err(_) => Err(anyhow::anyhow!("fit stopped unexpectedly")),
            },
        }
    });
    outcome::exit_code(result)
}
