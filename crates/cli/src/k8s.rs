//! `goodput k8s --plan-from ARGS… --shards N --image IMAGE [--namespace NS]`: Kubernetes
//! manifests that run one bench plan as N shards (README, "Beyond one machine").
//!
//! Two documents, as YAML:
//!
//! - a ConfigMap holding the plan: `args`, the bench arguments one per line (what the pods run),
//!   and `plan.json`, the same list as JSON;
//! - an Indexed Job (`completionMode: Indexed`, `completions: N`, `parallelism: N`,
//!   `backoffLimit: 0`: a shard retried later would not line up with the others) whose pod `I`
//!   runs `goodput bench <args> --shard I/N --start-at T --out /results/shard-I.json` (`I` is
//!   Kubernetes' `JOB_COMPLETION_INDEX`; `/results` an `emptyDir`), then prints the result
//!   document to its log between the lines `=== goodput shard I begin ===` and
//!   `=== goodput shard I end ===`, where `kubectl logs` collects it for `goodput merge`.
//!
//! `T` is `--start-at`, or now plus `--start-delay` (default 120 s: time for the image to pull
//! and every pod to be scheduled). Resource requests follow the shard's share of the load (see
//! [`Resources::for_shard`]).

use std::fmt::Write as _;

use clap::Parser;
use serde_json::{Value, json};

use crate::args::K8sArgs;
use crate::args::{BenchArgs, Cli, Command};
use crate::outcome::Outcome;
use crate::plan::{UsageError, parse_duration};

/// The k8s command's own flags, which end `--plan-from`'s list.
const OWN_FLAGS: [&str; 6] = ["--shards", "--image", "--namespace", "--name", "--start-at", "--start-delay"];
/// Bench flags the manifests set per shard: refused in the plan.
const PER_SHARD: [&str; 5] = ["--shard", "--start-at", "--out", "--html", "--export-schedule"];

/// A validated request for manifests.
#[derive(Clone, Debug, PartialEq)]
pub struct K8sPlan {
    pub args: Vec<String>,
    pub shards: u32,
    pub image: String,
    pub namespace: Option<String>,
    pub name: String,
    /// RFC 3339 UTC.
    pub start_at: String,
    pub resources: Resources,
}

/// One shard's resource requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resources {
    /// Requested CPU, millicores.
    pub cpu_millis: u64,
    /// Requested (and, doubled, limited) memory, MiB.
    pub memory_mib: u64,
    /// The in-flight streams it was sized for.
    pub streams: u64,
}

/// Assumed longest typical request, seconds: an uncapped open loop at `r` req/s keeps about
/// `r × 10` streams in flight.
const ASSUMED_REQUEST_S: f64 = 10.0;

impl Resources {
    /// The rule: one shard's in-flight streams are its share of the closed loop's users (or of
    /// `--max-concurrency`; for an uncapped open loop, its rate × 10 s); it requests 1 CPU plus
    /// 1 per 10,000 req/s of its rate plus 1 per 2,000 streams (rounded up to 100 millicores),
    /// and 256 MiB plus 256 KiB per stream (rounded up to the MiB); the memory limit is twice
    /// the request, and no CPU limit is set (throttling would distort the pacing).
    pub fn for_shard(concurrency: Option<usize>, rate: Option<f64>, max_concurrency: Option<usize>, n: u32) -> Self {
        let n = n.max(1) as f64;
        let share = |x: f64| (x / n).ceil();
        let rate_per = rate.filter(|r| r.is_finite()).map(share).unwrap_or(0.0);
        let streams = match (concurrency, rate, max_concurrency) {
            (_, Some(_), Some(m)) => share(m as f64),
            (_, Some(r), None) if r.is_finite() => (rate_per * ASSUMED_REQUEST_S).ceil(),
            // --rate inf without a cap sends the whole budget at once: size for the cap
            (_, Some(_), None) => 1000.0,
            (Some(c), None, _) => share(c as f64),
            (None, None, _) => share(16.0),
        };
        let cpu = 1000.0 + rate_per / 10_000.0 * 1000.0 + streams / 2000.0 * 1000.0;
        let cpu_millis = ((cpu / 100.0).ceil() * 100.0) as u64;
        let memory_mib = 256 + (streams * 256.0 / 1024.0).ceil() as u64;
        Resources { cpu_millis, memory_mib, streams: streams as u64 }
    }
}

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

/// The largest result document a pod prints to its log. The kubelet rotates container logs at
/// 10 MiB by default (`containerLogMaxSize`) and `kubectl logs` shows only the current file, so
/// a larger document (a 100k-record shard is about 150 MB) would reach the log cut; it stays in
/// the pod, which waits to be copied from ([`COLLECT_WAIT_S`]).
pub const LOG_LIMIT_BYTES: u64 = 8 * 1024 * 1024;

/// How long a pod whose document is too large for its log waits for `kubectl cp` (then for
/// `/results/collected`), seconds.
pub const COLLECT_WAIT_S: u64 = 3600;

/// The shell script each pod runs (`/bin/sh -c`): the plan's arguments from the ConfigMap, then
/// the shard's; then the result document between markers in the log when it is small enough for
/// the log ([`LOG_LIMIT_BYTES`]), else a line saying so, and the pod waits (up to
/// [`COLLECT_WAIT_S`]) for the file to be copied out and `/results/collected` to be touched.
fn script() -> String {
    let mut s = String::new();
    let _ = writeln!(s, "set -u");
    let _ = writeln!(s, "I=\"$JOB_COMPLETION_INDEX\"");
    let _ = writeln!(s, "OUT=\"/results/shard-$I.json\"");
    let _ = writeln!(s, "set --");
    let _ = writeln!(s, "while IFS= read -r a || [ -n \"$a\" ]; do set -- \"$@\" \"$a\"; done < /etc/goodput/args");
    let _ = writeln!(s, "goodput bench \"$@\" --shard \"$I/$SHARDS\" --start-at \"$START_AT\" --out \"$OUT\" -q");
    let _ = writeln!(s, "rc=$?");
    let _ = writeln!(s, "[ -f \"$OUT\" ] || exit $rc");
    let _ = writeln!(s, "size=$(wc -c < \"$OUT\")");
    let _ = writeln!(s, "if [ \"$size\" -le {LOG_LIMIT_BYTES} ]; then");
    let _ = writeln!(s, "  echo \"=== goodput shard $I begin ===\"");
    let _ = writeln!(s, "  cat \"$OUT\"");
    let _ = writeln!(s, "  echo \"=== goodput shard $I end ===\"");
    let _ = writeln!(s, "  exit $rc");
    let _ = writeln!(s, "fi");
    let _ = writeln!(
        s,
        "echo \"=== goodput shard $I in $OUT ($size bytes, over the log's {LOG_LIMIT_BYTES}): kubectl cp it, then touch /results/collected ===\""
    );
    let _ = writeln!(s, "waited=0");
    let _ = writeln!(
        s,
        "while [ ! -f /results/collected ] && [ \"$waited\" -lt {COLLECT_WAIT_S} ]; do sleep 5; waited=$((waited + 5)); done"
    );
    let _ = writeln!(s, "exit $rc");
    s
}

/// The two manifests, as JSON values (YAML is written from them).
pub fn manifests(p: &K8sPlan) -> (Value, Value) {
    let meta = |name: String| {
        let mut m = json!({ "name": name, "labels": { "app.kubernetes.io/name": "goodput", "app.kubernetes.io/instance": p.name } });
        if let Some(ns) = &p.namespace {
            m["namespace"] = json!(ns);
        }
        m
    };
    let config = format!("{}-plan", p.name);
    let mut args_file = p.args.join("\n");
    args_file.push('\n');
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(config.clone()),
        "data": {
            "args": args_file,
            "plan.json": serde_json::to_string(&json!({ "command": "bench", "args": p.args, "shards": p.shards, "start_at": p.start_at })).expect("json"),
        }
    });
    let r = p.resources;
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(p.name.clone()),
        "spec": {
            "completionMode": "Indexed",
            "completions": p.shards,
            "parallelism": p.shards,
            // a shard retried later would not line up with the others: merge with --allow-partial
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": { "app.kubernetes.io/name": "goodput", "app.kubernetes.io/instance": p.name } },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "goodput",
                        "image": p.image,
                        "command": ["/bin/sh", "-c"],
                        "args": [script()],
                        "env": [
                            { "name": "SHARDS", "value": p.shards.to_string() },
                            { "name": "START_AT", "value": p.start_at },
                        ],
                        "resources": {
                            "requests": { "cpu": format!("{}m", r.cpu_millis), "memory": format!("{}Mi", r.memory_mib) },
                            "limits": { "memory": format!("{}Mi", r.memory_mib * 2) },
                        },
                        "volumeMounts": [
                            { "name": "plan", "mountPath": "/etc/goodput", "readOnly": true },
                            { "name": "results", "mountPath": "/results" },
                        ],
                    }],
                    "volumes": [
                        { "name": "plan", "configMap": { "name": config } },
                        { "name": "results", "emptyDir": {} },
                    ],
                }
            }
        }
    });
    (config_map, job)
}

/// The manifests as one YAML stream, with how to collect and merge the results in a comment.
pub fn yaml(p: &K8sPlan) -> anyhow::Result<String> {
    let (cm, job) = manifests(p);
    let ns = p.namespace.as_deref().map(|n| format!(" -n {n}")).unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "# goodput bench as {} shards, starting at {}", p.shards, p.start_at);
    let _ = writeln!(
        out,
        "# per shard: {} CPU (millicores), {} MiB, sized for {} in-flight streams",
        p.resources.cpu_millis, p.resources.memory_mib, p.resources.streams
    );
    let _ = writeln!(out, "# apply:   kubectl{ns} apply -f manifests.yaml");
    let _ =
        writeln!(out, "# wait:    every pod has printed its result line (a small shard completes; a large one waits)");
    let _ = writeln!(
        out,
        "# collect: a shard's document up to {} MiB is in its log; a larger one stays in the pod for up to {} h:",
        LOG_LIMIT_BYTES >> 20,
        COLLECT_WAIT_S / 3600
    );
    let _ = writeln!(out, "#   for i in $(seq 0 {}); do", p.shards - 1);
    let _ = writeln!(
        out,
        "#     pod=$(kubectl{ns} get pods -l job-name={},batch.kubernetes.io/job-completion-index=$i -o name)",
        p.name
    );
    let _ = writeln!(out, "#     if kubectl{ns} logs \"$pod\" | grep -q \"^=== goodput shard $i begin ===$\"; then");
    let _ = writeln!(
        out,
        "#       kubectl{ns} logs \"$pod\" | sed -n '/^=== goodput shard [0-9]* begin ===$/,/^=== goodput shard [0-9]* end ===$/p' | sed '1d;$d' > shard-$i.json"
    );
    let _ = writeln!(out, "#     else");
    let _ = writeln!(
        out,
        "#       kubectl{ns} cp \"${{pod#pod/}}:/results/shard-$i.json\" shard-$i.json && kubectl{ns} exec \"${{pod#pod/}}\" -- touch /results/collected"
    );
    let _ = writeln!(out, "#     fi");
    let _ = writeln!(out, "#   done");
    let _ = writeln!(out, "# merge:   goodput merge shard-*.json --out all.json");
    out.push_str("---\n");
    out.push_str(&to_yaml(&cm));
    out.push_str("---\n");
    out.push_str(&to_yaml(&job));
    Ok(out)
}

/// A JSON value as block YAML in which every string is quoted (or a literal block), so that no
/// YAML reader takes a timestamp, a number or `yes` for anything but a string.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    yaml_node(&mut out, v, 0);
    out
}

/// A mapping key as plain YAML where that is unambiguous, else quoted.
fn yaml_key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
        && k.starts_with(|c: char| c.is_ascii_alphabetic());
    if plain { k.to_string() } else { yaml_string(k) }
}

/// A string scalar, double-quoted (JSON's escapes are YAML's).
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A scalar, or `None` for a mapping or sequence.
fn yaml_scalar(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(yaml_string(s)),
        Value::Array(a) if a.is_empty() => Some("[]".into()),
        Value::Object(o) if o.is_empty() => Some("{}".into()),
        _ => None,
    }
}

/// A multi-line string as a literal block (`|`, `|-` or `|+` by its trailing line breaks), when
/// every line can stand in one: no leading blank, no tab, no carriage return.
fn literal_block(s: &str, indent: usize) -> Option<String> {
    if !s.contains('\n') || s.contains('\r') || s.contains('\t') || s.starts_with([' ', '\n']) {
        return None;
    }
    let body = s.trim_end_matches('\n');
    let chomp = match s.len() - body.len() {
        0 => "-",
        1 => "",
        _ => "+",
    };
    let pad = " ".repeat(indent);
    let mut out = format!("|{chomp}\n");
    for line in s.strip_suffix('\n').unwrap_or(s).split('\n') {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&pad);
            out.push_str(line);
            out.push('\n');
        }
    }
    Some(out)
}

fn yaml_node(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, x) in o {
                out.push_str(&pad);
                out.push_str(&yaml_key(k));
                out.push(':');
                yaml_child(out, x, indent);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for x in a {
                out.push_str(&pad);
                out.push('-');
                yaml_child(out, x, indent);
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&yaml_scalar(v).unwrap_or_default());
            out.push('\n');
        }
    }
}

/// What follows `key:` or `-` at `indent`.
fn yaml_child(out: &mut String, x: &Value, indent: usize) {
    if let Some(block) = x.as_str().and_then(|s| literal_block(s, indent + 2)) {
        out.push(' ');
        out.push_str(&block);
    } else if let Some(scalar) = yaml_scalar(x) {
        out.push(' ');
        out.push_str(&scalar);
        out.push('\n');
    } else {
        out.push('\n');
        yaml_node(out, x, indent + 2);
    }
}

pub fn run(a: K8sArgs) -> anyhow::Result<Outcome> {
    let p = plan(&a, goodput_results::unix_ns())?;
    say!("{}", yaml(&p)?);
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_follow_the_shards_share() {
        // 20,000 users over 4 shards: 5,000 streams each: 1 + 2.5 CPU, 256 MiB + 5000 × 256 KiB
        let r = Resources::for_shard(Some(20_000), None, None, 4);
        assert_eq!(r, Resources { cpu_millis: 3500, memory_mib: 256 + 1250, streams: 5000 });
        // 40,000 req/s over 4 shards: 10,000 req/s each (1 CPU), 100,000 streams (50 CPU)
        let r = Resources::for_shard(None, Some(40_000.0), None, 4);
        assert_eq!(r.cpu_millis, 1000 + 1000 + 50_000);
        // capped: 8,000 / 2 = 4,000 streams: 1 + 0.05 + 2 CPU → 3,100 m (rounded up)
        let r = Resources::for_shard(None, Some(1000.0), Some(8000), 2);
        assert_eq!((r.streams, r.cpu_millis, r.memory_mib), (4000, 3100, 256 + 1000));
    }

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
    fn yaml_strings_stay_strings() {
        let v = serde_json::json!({
            "a": "2026-12-05T09:04:35.379860176Z",
            "b": ["yes", "no", "null", "1e3", "", "0x10", "a: b", "# not a comment", "~"],
            "c": { "script": "set -u\nline two\n", "no-newline": "x\ny", "two": "x\n\n", "lead": " x\ny" },
            "n": 4, "t": true, "e": {}, "l": [],
            "app.kubernetes.io/name": "goodput", "9lives": 1,
        });
        let text = to_yaml(&v);
        assert!(text.contains("a: \"2026-12-05T09:04:35.379860176Z\"\n"), "{text}");
        assert!(text.contains("  script: |\n    set -u\n    line two\n"), "{text}");
        let back: serde_norway::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(back).unwrap(), v, "{text}");
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
