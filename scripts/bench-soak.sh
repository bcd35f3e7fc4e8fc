#!/usr/bin/env bash
# The soak: `goodput bench` against the embedded engine at a steady open-loop rate for MINUTES
# (default 60), the process's resident memory (VmRSS from /proc/PID/status) sampled every
# SAMPLE_S seconds (default 10) together with the number of records already streamed to the JSONL
# log. After the warm-up (WARMUP_S, default 60 s, never more than a third of the run) it fits a
# least-squares line to RSS over time and prints:
#   - RSS at the end of the warm-up, at the end, and the peak;
#   - the slope (MB/min) and the growth per finished request (bytes/request);
#   - whether the records and the summary are complete (JSONL lines == attempted == completed,
#     no failures, the result document written and non-empty).
# Records are summarized as they finish: the result document keeps every record up to 100,000 (the
# default `--records all`), then a uniform sample of 100,000, and past that cap the summary is
# computed in one pass, each metric exact up to 100,000 entries, then sketched. So RSS grows for
# the first 100k requests (500 s at 200 req/s: the records held and the exact samples) and is flat
# after them: the default warm-up (WARMUP_S=600) covers that. The growth per request after the
# warm-up is what tells a leak from noise. Extra bench flags go in SOAK_ARGS (e.g.
# SOAK_ARGS='--records sample:1000' for a shorter warm-up). The same check, 2 minutes long, is the
# CI test crates/cli/tests/soak.rs.
#
#   scripts/bench-soak.sh [MINUTES]   (RATE=200 SAMPLE_S=10 WARMUP_S=600 MODEL=llama-3.2-1b,
#                                      SKIP_BUILD=1 to use target/release/goodput as it is)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-60}"
RATE="${RATE:-200}"
SAMPLE_S="${SAMPLE_S:-10}"
WARMUP_S="${WARMUP_S:-600}"
MODEL="${MODEL:-llama-3.2-1b}"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release -q -p goodput --bin goodput
BIN=target/release/goodput
OUT=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$OUT"' EXIT
SECS=$(python3 -c "print(max(1, round(float('$MINUTES') * 60)))")

# shellcheck disable=SC2086
"$BIN" bench --model "$MODEL" --rate "$RATE" --duration "${SECS}s" --input-tokens 32 --output-tokens 16 \
  --seed 1 -q --out "$OUT/r.json" ${SOAK_ARGS:-} > "$OUT/console.txt" 2>&1 &
PID=$!
echo "soak: goodput bench (pid $PID) on the embedded $MODEL at $RATE req/s for ${SECS} s; RSS every ${SAMPLE_S} s"
python3 - "$PID" "$OUT" "$SAMPLE_S" <<'PY' > "$OUT/samples.txt"
import os, sys, time
pid, out, every = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
log = os.path.join(out, "r.requests.jsonl")
t0 = time.monotonic()
next_t = t0
while True:
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        break
    try:
        with open(log, "rb") as f:
            n = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        n = 0
    print(f"{time.monotonic() - t0:.1f} {rss} {n}", flush=True)
    next_t += every
    time.sleep(max(0.0, next_t - time.monotonic()))
PY
set +e
wait "$PID"
RC=$?
set -e
python3 - "$OUT" "$RC" "$WARMUP_S" "$SECS" <<'PY'
import json, os, sys
out, rc, warmup, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
warmup = min(warmup, secs / 3)
rows = [tuple(float(x) for x in l.split()) for l in open(os.path.join(out, "samples.txt")) if l.strip()]
after = [r for r in rows if r[0] >= warmup]
print(f"exit status {rc}; {len(rows)} RSS samples, {len(after)} after the {warmup:.0f} s warm-up")
if len(after) >= 3:
    ts = [r[0] / 60 for r in after]
    ms = [r[1] / 1024 for r in after]
    mt, mm = sum(ts) / len(ts), sum(ms) / len(ms)
    slope = sum((t - mt) * (m - mm) for t, m in zip(ts, ms)) / sum((t - mt) ** 2 for t in ts)
    first, last = after[0], after[-1]
    reqs = last[2] - first[2]
    per_req = (last[1] - first[1]) * 1024 / reqs if reqs > 0 else float("nan")
    print(f"RSS  start (after warm-up) {first[1] / 1024:.1f} MB   end {last[1] / 1024:.1f} MB   "
          f"peak {max(r[1] for r in rows) / 1024:.1f} MB")
    print(f"slope {slope:+.2f} MB/min   growth {per_req:.0f} bytes per finished request "
          f"({reqs:.0f} requests after warm-up)")
else:
    print("too few samples after the warm-up to fit a slope")
try:
    doc = json.load(open(os.path.join(out, "r.json")))
    s = doc["runs"][0]["summary"]
    lines = sum(1 for _ in open(os.path.join(out, "r.requests.jsonl")))
    held = len(doc["runs"][0].get("requests") or [])
    ok = lines == s["attempted"] and s["completed"] == s["attempted"] and s["failed"] == 0
    print(f"records: {lines} in the JSONL log, {held} in the document; summary attempted {s['attempted']}, "
          f"completed {s['completed']}, failed {s['failed']}, {s['request_throughput']:.1f} req/s "
          f"-> {'complete' if ok else 'INCOMPLETE'}")
    lag = s.get("runtime_lag_ms")
    if lag:
        print(f"runtime lag: {lag['n']} ticks, p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, "
              f"max {lag['max']:.2f} ms; verdict {s.get('verdict')}")
except (OSError, ValueError, KeyError, IndexError) as e:
    print(f"records/summary: INCOMPLETE ({e})")
    print(open(os.path.join(out, "console.txt")).read()[-2000:])
PY
