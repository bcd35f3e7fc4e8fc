#!/usr/bin/env bash
# How long the issue's 32-candidate plan takes on this machine (target: at most 10 s on 2 cores).
# A benchmark, not a test: it prints the time and its ratio to the target.
#
#   scripts/bench-plan.sh            # release build, then three timed runs
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p goodput
bin=target/release/goodput
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "goodput plan --preset chat --model llama-3.1-70b --gpus h100,h200,b200,mi300x --tp 1,2,4,8 --dtype bf16,fp8 ($(nproc) cores)"
for i in 1 2 3; do
  start=$(date +%s.%N)
  "$bin" plan --preset chat --model llama-3.1-70b --gpus h100,h200,b200,mi300x --tp 1,2,4,8 --dtype bf16,fp8 \
    --out "$out/plan.json" > "$out/plan.txt"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v i="$i" 'BEGIN { t = e - s; printf "run %d: %.2f s  (×%.2f of the 10 s target)\n", i, t, t / 10 }'
done
tail -n 3 "$out/plan.txt"
