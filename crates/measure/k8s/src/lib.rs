//! A load run spread over a Kubernetes cluster: one Indexed Job whose pods each send one shard
//! of the global schedule (`goodput bench --shard I/N`), all starting at one instant, with their
//! plan in a ConfigMap; how big each shard's pod must be ([`Resources`]); and how each pod hands
//! back its result document (in its log when it is small enough, else by `kubectl cp`). The
//! command line validates the flags into a [`K8sPlan`]; this crate writes the manifests
//! ([`yaml`]), with goodput's own YAML writer ([`to_yaml`]) in which every string stays a string.

mod yaml;

use std::fmt::Write;

use serde_json::{Value, json};

pub use yaml::to_yaml;

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
pub fn yaml(p: &K8sPlan) -> String {
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
    out
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
}
