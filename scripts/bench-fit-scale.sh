#!/usr/bin/env bash
# The digital twin's speed targets: `goodput fit` over 100k request records in ≤ 5 s on one core,
# and a twin that simulates as fast as the built-in model (≥ 100k requests/s).
#
# The records come from a simulated run of the built-in engine (100k requests, 64 users, 256/32
# tokens, a token per stream event), relabelled as a measurement of a URL (fit refuses simulated
# runs). Everything runs on one core (taskset -c 0).
#
#   scripts/bench-fit-scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p goodput
BIN=$PWD/target/release/goodput
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
N=${N:-100000}
W=(--concurrency 64 --requests "$N" --input-tokens 256 --output-tokens 32 --max-num-seqs 48 --seed 1)
taskset -c 0 "$BIN" sim "${W[@]}" -q --out "$OUT/sim.json" > /dev/null
python3 - "$OUT/sim.json" "$OUT/run.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    r["target"] = {"kind": "url", "url": "http://127.0.0.1:8000", "model": "bench-fit-scale"}
json.dump(d, open(sys.argv[2], "w"))
PY
t0=$(date +%s.%N)
taskset -c 0 "$BIN" fit "$OUT/run.json" --out "$OUT/twin.json" > "$OUT/fit.txt"
t1=$(date +%s.%N)
taskset -c 0 "$BIN" sim --twin "$OUT/twin.json" "${W[@]}" -q --out "$OUT/twin-sim.json" > /dev/null
t2=$(date +%s.%N)
taskset -c 0 "$BIN" sim "${W[@]}" -q --out "$OUT/sim2.json" > /dev/null
t3=$(date +%s.%N)
python3 - "$t0" "$t1" "$t2" "$t3" "$N" <<'PY'
import sys
t0, t1, t2, t3, n = (float(x) for x in sys.argv[1:])
fit, twin, built = t1 - t0, t2 - t1, t3 - t2
print(f"fit over {n:.0f} records        {fit:6.2f} s   target ≤ 5 s      ratio {fit / 5:.2f}")
print(f"sim --twin, {n:.0f} requests   {twin:6.2f} s   {n / twin:9.0f} req/s (target ≥ 100000)")
print(f"sim (built-in), {n:.0f} requests {built:6.2f} s   {n / built:9.0f} req/s")
print(f"twin ÷ built-in speed              {built / twin:.2f}")
PY
