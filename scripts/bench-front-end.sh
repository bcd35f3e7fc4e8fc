#!/usr/bin/env bash
# The front end in the engine model (the digital-twin issue, item 4): under the default preset
# (vLLM V1, chunked prefill, prefix caching), `bench` against the embedded engine (real time, over
# HTTP) and `sim` of the same plan and seed, on the three workloads of that issue: a closed loop of
# 16 users, Poisson arrivals at 20 req/s, and multi-turn sessions with think time and shared
# prefixes. Each bench runs REPEAT times (default 3); the table gives the simulated mean, each
# measured mean, their mean as a ratio to the simulated one, and the measured runs' spread.
#
#   scripts/bench-front-end.sh
#   REPEAT=6 EXTRA="--frontend-jitter 0" scripts/bench-front-end.sh   # the engine without it
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p goodput
BIN=target/release/goodput
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
REPEAT=${REPEAT:-3}
# shellcheck disable=SC2206
EXTRA=(${EXTRA:-})
cases=(
  "closed c=16 256/128|--concurrency 16 --requests 160 --input-tokens 256 --output-tokens 128 --seed 7"
  "poisson 20 req/s 512/96|--rate 20 --requests 400 --input-tokens 512 --output-tokens 96 --seed 3"
  "sessions, think, prefixes|--sessions --turns 3 --think-time 200ms --concurrency 8 --requests 96 --input-tokens 128 --output-tokens 64 --prefix-groups 2 --prefix-tokens 256 --seed 5"
)
printf '%-26s %-5s %9s  %-32s %9s %7s  %s\n' case metric sim "bench runs" "mean" ratio spread
for c in "${cases[@]}"; do
  name="${c%%|*}"; flags="${c#*|}"
  # shellcheck disable=SC2086
  "$BIN" sim $flags "${EXTRA[@]}" -q --out "$OUT/s.json" > /dev/null
  for i in $(seq "$REPEAT"); do
    # shellcheck disable=SC2086
    "$BIN" bench $flags "${EXTRA[@]}" -q --out "$OUT/b$i.json" > /dev/null 2>&1
  done
  python3 - "$OUT" "$REPEAT" "$name" <<'PY'
import json, sys
out, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = json.load(open(f"{out}/s.json"))["runs"][0]["summary"]
bs = [json.load(open(f"{out}/b{i}.json"))["runs"][0]["summary"] for i in range(1, n + 1)]
for m in ["ttft_ms", "tpot_ms"]:
    xs = [b[m]["mean"] for b in bs]
    mean = sum(xs) / len(xs)
    sim = s[m]["mean"]
    runs = " ".join(f"{x:.2f}" for x in xs)
    print(f"{name:<26} {m[:4].upper():<5} {sim:9.2f}  {runs:<32} {mean:9.2f} ×{mean / sim:.3f}  ×{min(xs) / sim:.3f}–×{max(xs) / sim:.3f}")
PY
done
