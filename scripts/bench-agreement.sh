#!/usr/bin/env bash
# bench (the embedded engine, real time, over HTTP) against sim (the same engine model, virtual
# time) on the same plan and seed: mean and p90 of TTFT and TPOT side by side, on a matrix of
# closed loops (1, 16, 64 users), Poisson at about 50% and 90% of the engine's capacity, and
# multi-turn sessions with think time and shared prefixes. Goal: means within 3%, p90 within 5%.
#
#   scripts/bench-agreement.sh             # vLLM V0's policy (prefill-first, no prefix caching)
#   POLICY=default scripts/bench-agreement.sh   # the default preset (vLLM V1: chunked prefill)
#
# The goal holds for prefill-first scheduling. With chunked prefill, fixed-length closed loops keep
# their users in lockstep: the sim's bursts stay synchronized forever, while real-time jitter
# splits a burst's prefills over two iterations now and then (docs/engine.md, Bench against sim).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p goodput
BIN=target/release/goodput
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# the engine's capacity on this workload: everything at once, in virtual time
if [ "${POLICY:-v0}" = "v0" ]; then
  P=(--scheduling prefill-first --prefix-caching off --max-num-seqs 256 --max-batched-tokens 8192)
else
  P=()
fi
W=(--input-tokens 512 --output-tokens 128 "${P[@]}")
"$BIN" sim --rate inf --requests 2000 "${W[@]}" -q --out "$OUT/cap.json" > /dev/null
CAP=$(python3 -c "import json;print(json.load(open('$OUT/cap.json'))['runs'][0]['summary']['request_throughput'])")
R50=$(python3 -c "print(round($CAP*0.5,2))")
R90=$(python3 -c "print(round($CAP*0.9,2))")
echo "capacity (sim, all at once): $CAP req/s → Poisson at $R50 and $R90 req/s"

cases=(
  "closed c=1|--concurrency 1 --requests 60 ${W[*]}"
  "closed c=16|--concurrency 16 --requests 320 ${W[*]}"
  "closed c=16 256/128 seed 7|--concurrency 16 --requests 160 --input-tokens 256 --output-tokens 128 --seed 7 ${P[*]}"
  "closed c=64|--concurrency 64 --requests 640 ${W[*]}"
  "poisson 50%|--rate $R50 --requests 600 ${W[*]}"
  "poisson 90%|--rate $R90 --requests 900 ${W[*]}"
  "sessions, think, prefixes|--sessions --turns 4 --think-time 500ms --prefix-groups 4 --prefix-tokens 1000 --concurrency 16 --requests 400 ${W[*]}"
)
printf '%-28s %-6s %10s %10s %8s   %10s %10s %8s\n' case metric "bench" "sim" "err" "p90 bench" "p90 sim" "err"
for c in "${cases[@]}"; do
  name="${c%%|*}"; flags="${c#*|}"
  # shellcheck disable=SC2086
  "$BIN" bench $flags -q --out "$OUT/b.json" > /dev/null 2>&1
  # shellcheck disable=SC2086
  "$BIN" sim $flags -q --out "$OUT/s.json" > /dev/null
  python3 - "$OUT/b.json" "$OUT/s.json" "$name" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["runs"][0]["summary"]
s = json.load(open(sys.argv[2]))["runs"][0]["summary"]
for m in ["ttft_ms", "tpot_ms"]:
    bm, sm, bp, sp = b[m]["mean"], s[m]["mean"], b[m]["p90"], s[m]["p90"]
    e = (bm / sm - 1) * 100
    ep = (bp / sp - 1) * 100
    flag = "" if abs(e) <= 3 and abs(ep) <= 5 else "  <-- outside 3%/5%"
    print(f"{sys.argv[3]:<28} {m[:4].upper():<6} {bm:10.2f} {sm:10.2f} {e:+7.1f}%   {bp:10.2f} {sp:10.2f} {ep:+7.1f}%{flag}")
PY
done
