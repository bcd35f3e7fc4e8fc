//! `goodput k8s --plan-from ARGS… --shards N --image IMAGE [--namespace NS]`: Kubernetes
//! manifests that run one bench plan as N shards (README, "Beyond one machine").
//!
//! The flags are checked here (the plan is parsed as `bench` parses it, the per-shard flags
//! refused); the manifests are `goodput_k8s`'s.

use clap::Parser;
use goodput_k8s::{K8sPlan, Resources, yaml};

use crate::args::{BenchArgs, Cli, Command, K8sArgs};
use crate::outcome::Outcome;
use crate::plan::{UsageError, parse_duration};

/// The k8s command's own flags, which end `--plan-from`'s list.
const OWN_FLAGS: [&str; 6] = ["--shards", "--image", "--namespace", "--name", "--start-at", "--start-delay"];
/// Bench flags the manifests set per shard: refused in the plan.
const PER_SHARD: [&str; 5] = ["--shard", "--start-at", "--out", "--html", "--export-schedule"];

/// Splits `--plan-from`'s list from the k8s flags that follow it, and validates everything.
pub fn plan(a: &K8sArgs, now_ns: i128) -> Result<K8sPlan, UsageError> {
    let usage = |flag: &str, m: String| UsageError(format!("{flag}: {m}"));
    let mut a = a.clone();
    let mut args: Vec<String> = Vec::new();
    let mut it = std::mem::take(&mut a.plan_from).into_iter();
    while let Some(x) = it.next() {
        let (flag, inline) = match x.split_once('=') {
            Some((f, v)) if OWN_FLAGS.contains(&f) => (f.to_string(), Some(v.to_string())),
            _ => (x.clone(), None),
        };
        if OWN_FLAGS.contains(&flag.as_str()) {
            let v = match inline {
                Some(v) => v,
                None => it.next().ok_or_else(|| usage(&flag, "needs a value".into()))?,
            };
            match flag.as_str() {
                "--shards" => a.shards = Some(v.parse().map_err(|_| usage("--shards", format!("not a count: {v}")))?),
                "--image" => a.image = Some(v),
                "--namespace" => a.namespace = Some(v),
                "--name" => a.name = Some(v),
                "--start-at" => a.start_at = Some(v),
                _ => a.start_delay = Some(v),
            }
        } else {
            args.push(x);
        }
    }
    // one quoted string: split on whitespace
    if args.len() == 1 && args[0].contains(char::is_whitespace) {
        args = args[0].split_whitespace().map(String::from).collect();
    }
    if args.first().is_some_and(|x| x == "bench") {
        args.remove(0);
    }
    for x in &args {
        let f = x.split_once('=').map_or(x.as_str(), |(f, _)| f);
        if PER_SHARD.contains(&f) {
            return Err(usage("--plan-from", format!("{f} is set per shard by the manifests: drop it")));
        }
        if x.contains('\n') {
            return Err(usage("--plan-from", "an argument holds a line break".into()));
        }
    }
    let bench = parse_bench(&args)?;
    let shards = a.shards.ok_or_else(|| usage("--shards", "required (how many pods share the load)".into()))?;
    if shards == 0 || shards > 10_000 {
        return Err(usage("--shards", format!("must be in 1..=10000, got {shards}")));
    }
    let image = a.image.filter(|i| !i.is_empty()).ok_or_else(|| usage("--image", "required".into()))?;
    let name = a.name.unwrap_or_else(|| "goodput-bench".into());
    let dns = |s: &str| {
        !s.is_empty()
            && s.len() <= 52
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    if !dns(&name) {
        return Err(usage("--name", format!("{name:?} is not a DNS label (a-z, 0-9, -; at most 52)")));
    }
    if let Some(ns) = &a.namespace
        && !dns(ns)
    {
        return Err(usage("--namespace", format!("{ns:?} is not a DNS label")));
    }
    let start_ns = match (&a.start_at, &a.start_delay) {
        (Some(_), Some(_)) => return Err(usage("--start-delay", "not with --start-at".into())),
        (Some(s), None) => {
            use goodput_results::shards::{check_start_at, parse_start_at};
            let ns = parse_start_at(s).map_err(|e| usage("--start-at", e.to_string()))?;
            check_start_at(s, ns, now_ns).map_err(|e| usage("--start-at", e.to_string()))?;
            ns
        }
        (None, d) => {
            let d = parse_duration("--start-delay", d.as_deref().unwrap_or("120s"))?;
            if d > goodput_results::shards::START_FUTURE_LIMIT {
                return Err(usage("--start-delay", "at most 24h".into()));
            }
            now_ns + d.as_nanos() as i128
        }
    };
    let l = &bench.load;
    let rate = l.rate.map(goodput_workload::Rate::value);
    Ok(K8sPlan {
        args,
        shards,
        image,
        namespace: a.namespace,
        name,
        start_at: goodput_results::format_rfc3339_ns(start_ns),
        resources: Resources::for_shard(l.concurrency, rate, l.max_concurrency, shards),
    })
}

/// The plan's arguments as `goodput bench` reads them (syntax only: files are the pod's).
fn parse_bench(args: &[String]) -> Result<BenchArgs, UsageError> {
    let argv = ["goodput", "bench"].into_iter().map(String::from).chain(args.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(Cli { command: Command::Bench(b) }) => Ok(b),
        Ok(_) => unreachable!("parsed as bench"),
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_string();
            Err(UsageError(format!("--plan-from: {first}")))
        }
    }
}

pub fn run(a: K8sArgs) -> anyhow::Result<Outcome> {
    let p = plan(&a, goodput_results::unix_ns())?;
    say!("{}", yaml(&p));
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> K8sArgs {
        let argv = ["goodput", "k8s"].iter().chain(v.iter()).map(|s| s.to_string());
        match Cli::try_parse_from(argv).unwrap().command {
            Command::K8s(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_plan_ends_at_the_first_k8s_flag() {
        let a = args(&["--plan-from", "--url", "http://vllm:8000", "--rate", "100", "--shards", "4", "--image", "g:1"]);
        let p = plan(&a, 0).unwrap();
        assert_eq!(p.args, ["--url", "http://vllm:8000", "--rate", "100"]);
        assert_eq!((p.shards, p.image.as_str(), p.name.as_str()), (4, "g:1", "goodput-bench"));
        assert_eq!(p.start_at, "1970-01-01T00:02:00.000000000Z");
        let a = args(&["--shards", "2", "--image", "g", "--plan-from", "--concurrency 8 --requests 100"]);
        assert_eq!(plan(&a, 0).unwrap().args, ["--concurrency", "8", "--requests", "100"]);
    }

    #[test]
    fn refusals_name_the_flag() {
        let e = |v: &[&str]| plan(&args(v), 0).unwrap_err().to_string();
        assert!(e(&["--plan-from", "--rate", "1", "--image", "g"]).starts_with("--shards: required"));
        assert!(e(&["--plan-from", "--rate", "1", "--shards", "2"]).starts_with("--image: required"));
        assert!(
            e(&["--plan-from", "--shard", "0/2", "--shards", "2", "--image", "g"]).starts_with("--plan-from: --shard")
        );
        assert!(e(&["--plan-from", "--no-such-flag", "--shards", "2", "--image", "g"]).starts_with("--plan-from: "));
        assert!(e(&["--plan-from", "--rate", "1", "--shards", "0", "--image", "g"]).starts_with("--shards: must be"));
    }
}
