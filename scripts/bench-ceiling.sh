#!/usr/bin/env bash
# The closed-loop ceiling of goodput's load generator: goodput bench against a minimal fast SSE
# server (crates/testkit fast-sse-server: Rust, current-thread, TCP_NODELAY, zero delay, 16
# tokens), the server pinned to CPU 1 and the client to CPU 0. Prints, per run: requests per
# second, mean requests in flight against the users asked for, the verdict, and the client's CPU
# time per request; with the built-in tokenizer and with a Hugging Face tokenizer.json.
#
#   scripts/bench-ceiling.sh [SECONDS]      (default 10 s per run)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
cargo build --release -q -p goodput -p goodput-testkit --bins
BIN=target/release/goodput
HF=../shared/data/tokenizers/llama3/tokenizer.json
OUT=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$OUT"' EXIT

target/release/fast-sse-server 0 16 1 > "$OUT/server.txt" &
SERVER=$!
for _ in $(seq 50); do grep -q listening "$OUT/server.txt" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^listening on //p' "$OUT/server.txt")

printf '%-12s %6s %10s %14s %12s %14s\n' tokenizer users "req/s" "in flight" verdict "CPU µs/req"
for tk in builtin hf; do
  for c in 64 256; do
    args=(bench --url "$URL" --concurrency "$c" --duration "${SECS}s" --input-tokens 16 --output-tokens 16 -q --out "$OUT/r.json")
    if [ "$tk" = hf ]; then
      [ -f "$HF" ] || { echo "($HF not found: skipping the HF tokenizer)"; continue; }
      args+=(--tokenizer "$HF")
    fi
    /usr/bin/time -f "%U %S" -o "$OUT/time.txt" taskset -c 0 "$BIN" "${args[@]}" > /dev/null
    python3 - "$OUT/r.json" "$OUT/time.txt" "$tk" "$c" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc["runs"][0]["summary"]
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
n = s["attempted"]
lc = s.get("load_check") or {}
inf = lc.get("mean_in_flight")
print(f"{sys.argv[3]:<12} {sys.argv[4]:>6} {s['request_throughput']:>10.0f} {('%.1f' % inf if inf is not None else '-'):>8} of {sys.argv[4]:<3} {s['verdict']:>12} {1e6 * (user + sys_) / max(n, 1):>14.1f}")
PY
  done
done
