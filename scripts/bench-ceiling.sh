#!/usr/bin/env bash
# The ceiling of goodput's load generator, side by side with the peers (issue 14, part 4). The
# servers are crates/measure/testkit's: fast-sse-server (Rust, current-thread, TCP_NODELAY, zero delay,
# 16 tokens) and scripted-sse-server (first token at 50 ms, then one every 10 ms, 16 tokens, paced
# from absolute deadlines), each pinned to CPU 1; every client runs pinned to CPU 0. The fast
# server runs twice: writing each token's event as its own write (`per-token`, as a server
# streaming tokens does), and writing each response in one write (`one`). On a small host the
# first is the limit itself (its one core is saturated at about 12k req/s, whatever the client:
# see the floor rows); the second costs a quarter of that, so the client is the limit there.
#
#  1. closed loop against each fast server at 64 and 256 users, with the built-in tokenizer and a
#     Hugging Face tokenizer.json: max sustained req/s, mean requests in flight, the verdict, the
#     client's CPU time per request (user + system, from /usr/bin/time), and how busy the server's
#     core was; beside them the floor (testkit's floor-client: the same closed loop moving the
#     bytes and nothing else, no HTTP parsing, no JSON, no timestamps);
#  2. TTFT error against the scripted server's known timing (it counts from the kernel's receive
#     stamp of each request), at 64 and 256 users: measured TTFT p50 / p99 minus the scripted
#     50 ms, beside the server's own lateness (which it reports);
#  3. Poisson keep-up against the fast server at 1k, 2k, 5k and 10k req/s: achieved / offered and
#     the schedule lag p99 (how late requests left against their schedule), and the verdict;
#  4. the peers, against each fast server, when PEERS_VENV names a folder whose bin/ holds them (`python -m venv /tmp/peers
#     && /tmp/peers/bin/pip install guidellm aiperf`; `vllm` too where the disk allows, best in a
#     venv of its own, linked into bin/: 9.5 GB with its CUDA torch, and `vllm bench serve` runs
#     without a GPU, offline): the same closed loop against the same fast server, req/s and CPU
#     per request (their start-up included, so an upper bound).
# It ends with the goals (20k req/s on one core, 10× the best peer, TTFT p99 error ≤ 0.5 ms,
# Poisson 5k req/s with lag p99 ≤ 1 ms) beside what the sections that ran measured.
#
#   scripts/bench-ceiling.sh [SECONDS]      (default 10 s per run; SKIP_BUILD=1 uses the binaries
#                                            in target/release as they are; SECTIONS="1 2 3 4")
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
SECTIONS="${SECTIONS:-1 2 3 4}"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release -q -p goodput -p goodput-testkit --bins
BIN=target/release/goodput
HF=../shared/data/tokenizers/llama3/tokenizer.json
OUT=$(mktemp -d)
SERVERS=()
trap 'for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$OUT"' EXIT

# start_server NAME ARGS...: runs target/release/NAME ARGS in the background, sets URL
start_server() {
  local name=$1
  shift
  "target/release/$name" "$@" > "$OUT/$name.txt" &
  SERVERS+=($!)
  for _ in $(seq 50); do grep -q listening "$OUT/$name.txt" 2>/dev/null && break; sleep 0.1; done
  URL=$(sed -n 's/^listening on //p' "$OUT/$name.txt")
}
start_server fast-sse-server 0 16 1
FAST=$URL
FAST_PID=${SERVERS[-1]}
start_server fast-sse-server 0 16 1 one
FAST1=$URL
FAST1_PID=${SERVERS[-1]}
start_server scripted-sse-server 50 10 16 1
SCRIPTED=$URL

# bench ARGS...: goodput bench pinned to CPU 0, result in $OUT/r.json, CPU time in $OUT/time.txt
bench() {
  /usr/bin/time -f "%U %S" -o "$OUT/time.txt" taskset -c 0 "$BIN" bench --input-tokens 16 --output-tokens 16 \
    -q --out "$OUT/r.json" "$@" > /dev/null
}
# ticks PID: the process's CPU time so far, in clock ticks (user + system)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# busy PID BEFORE SECONDS: percent of one core the process used since BEFORE ticks
busy() { echo $(( ($(ticks "$1") - $2) * 100 / ($(getconf CLK_TCK) * $3) )); }

# row KIND LABEL: one line from $OUT/r.json and $OUT/time.txt
row() {
  GOALS="$OUT/goals.txt" python3 - "$OUT/r.json" "$OUT/time.txt" "$@" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
s = doc["runs"][0]["summary"]
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
kind, label = sys.argv[3], sys.argv[4:]
n = max(s["attempted"], 1)
cpu = 1e6 * (user + sys_) / n
goals = open(os.environ["GOALS"], "a")
if kind == "closed":
    goals.write(f"closed {label[0]} {s['request_throughput']} {label[3]}\n")
    lc = s.get("load_check") or {}
    inf = lc.get("mean_in_flight")
    print(f"{label[0]:<10} {label[1]:<16} {label[2]:>6} {s['request_throughput']:>10.0f} "
          f"{('%.1f' % inf if inf is not None else '-'):>10} {s['verdict']:>12} {cpu:>12.1f} {label[3]:>9}%")
elif kind == "ttft":
    t = s["ttft_ms"]
    goals.write(f"ttft {label[0]} {t['p99'] - 50}\n")
    print(f"{label[0]:>6} {s['request_throughput']:>10.0f} {t['p50'] - 50:>+14.3f} {t['p99'] - 50:>+14.3f} {label[1]:>16} {cpu:>12.1f}")
else:
    offered = float(label[0])
    lag = (s.get("schedule_lag_ms") or {}).get("p99")
    ach = s.get("achieved_rate") or s["request_throughput"]
    goals.write(f"poisson {offered} {ach} {lag if lag is not None else 'nan'}\n")
    print(f"{offered:>10.0f} {ach:>10.0f} {ach / offered:>9.3f} {('%.3f' % lag if lag is not None else '-'):>12} "
          f"{s['verdict']:>14} {cpu:>12.1f}")
PY
}

if [[ " $SECTIONS " == *" 1 "* ]]; then
  echo "## 1. closed loop against the fast server (${SECS} s each): max sustained req/s"
  printf '%-10s %-16s %6s %10s %10s %12s %12s %10s\n' server client users "req/s" "in flight" verdict "CPU µs/req" \
    "server CPU"
  for mode in per-token one; do
    if [ "$mode" = one ]; then url=$FAST1 pid=$FAST1_PID; else url=$FAST pid=$FAST_PID; fi
    for c in 64 256; do
      t0=$(ticks "$pid")
      /usr/bin/time -f "%U %S" -o "$OUT/time.txt" taskset -c 0 target/release/floor-client "${url#http://}" "$c" \
        "$SECS" 16 > "$OUT/floor.txt"
      b=$(busy "$pid" "$t0" "$SECS")
      python3 - "$OUT/floor.txt" "$OUT/time.txt" "$mode" "$c" "$b" <<'PY'
import sys
n, secs = (float(x) for x in open(sys.argv[1]).read().split()[1:5:3])
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
mode, users, busy = sys.argv[3:6]
print(f"{mode:<10} {'floor':<16} {users:>6} {n / secs:>10.0f} {'-':>10} {'-':>12} {1e6 * (user + sys_) / n:>12.1f} {busy:>9}%")
PY
    done
    for tk in builtin hf; do
      for c in 64 256; do
        extra=()
        if [ "$tk" = hf ]; then
          [ -f "$HF" ] || { echo "($HF not found: skipping the HF tokenizer)"; continue; }
          extra=(--tokenizer "$HF")
        fi
        t0=$(ticks "$pid")
        bench --url "$url" --concurrency "$c" --duration "${SECS}s" "${extra[@]}"
        row closed "$mode" "goodput/$tk" "$c" "$(busy "$pid" "$t0" "$SECS")"
      done
    done
  done
  echo "(floor: testkit's floor-client, the least any client does per request; server CPU: of its one core)"
fi

if [[ " $SECTIONS " == *" 2 "* ]]; then
  echo
  echo "## 2. TTFT error against the scripted server (first token at 50 ms, then every 10 ms; ${SECS} s each)"
  printf '%6s %10s %14s %14s %16s %12s\n' users "req/s" "TTFT p50 err" "TTFT p99 err" "server late p99" "CPU µs/req"
  for c in 64 256; do
    before=$(wc -l < "$OUT/scripted-sse-server.txt")
    bench --url "$SCRIPTED" --concurrency "$c" --duration "${SECS}s"
    sleep 1.2 # the server's last lateness line
    # the server's own lateness over the run: the worst of its per-second p99s
    late=$(tail -n +"$((before + 1))" "$OUT/scripted-sse-server.txt" | sed -n 's/.*p99_ms=//p' | sort -g | tail -1)
    row ttft "$c" "${late:--}"
  done
  echo "(ms: measured TTFT − the scripted 50 ms; the error includes the server's own lateness, shown apart:"
  echo " the worst per-second p99 of its first-token write time minus the scripted time)"
fi

if [[ " $SECTIONS " == *" 3 "* ]]; then
  echo
  echo "## 3. Poisson keep-up against the fast server (${SECS} s each)"
  printf '%10s %10s %9s %12s %14s %12s\n' offered achieved ratio "lag p99 ms" verdict "CPU µs/req"
  for r in 1000 2000 5000 10000; do
    bench --url "$FAST" --rate "$r" --duration "${SECS}s"
    row poisson "$r"
  done
fi

if [[ " $SECTIONS " == *" 4 "* ]]; then
  echo
  echo "## 4. peers against the same fast servers (${SECS} s each)"
  if [ -z "${PEERS_VENV:-}" ]; then
    echo "(PEERS_VENV not set: skipping; see the header for how to make one)"
  else
    TOK=$(mktemp -d)
    cp ../shared/data/tokenizers/gpt2/* "$TOK"/ 2>/dev/null || true
    printf '%-10s %-10s %6s %10s %12s\n' server peer users "req/s" "CPU µs/req"
    peer_row() { # NAME USERS RPS N: $OUT/time.txt holds the peer's CPU time; $mode the server
      GOALS="$OUT/goals.txt" python3 - "$OUT/time.txt" "$mode" "$@" <<'PY'
import json, os, sys
user, sys_ = map(float, open(sys.argv[1]).read().split()[-2:])
mode, name, users, rps, n = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
open(os.environ["GOALS"], "a").write(f"peer {mode} {name} {users} {rps}\n")
print(f"{mode:<10} {name:<10} {users:>6} {rps:>10.0f} {1e6 * (user + sys_) / max(n, 1):>12.1f}")
PY
    }
    for mode in per-token one; do
    if [ "$mode" = one ]; then FAST_URL=$FAST1; else FAST_URL=$FAST; fi
    for c in 64 256; do
      if [ -x "$PEERS_VENV/bin/guidellm" ]; then
        rm -f "$OUT/g.json"
        /usr/bin/time -f "%U %S" -o "$OUT/time.txt" taskset -c 0 "$PEERS_VENV/bin/guidellm" run \
          --backend "kind=openai_http,target=$FAST_URL" --profile "kind=concurrent,streams=$c" \
          --constraint "kind=max_duration,seconds=$SECS" --tokenizer "kind=hf_auto,model=$TOK" \
          --data kind=synthetic_text,prompt_tokens=16,output_tokens=16 --output "kind=json,path=$OUT/g.json" \
          --disable-console-interactive > "$OUT/guidellm.log" 2>&1 || true
        read -r rps n < <(python3 "scripts/peer_figures.py" guidellm "$OUT/g.json") || { rps=0; n=0; }
        peer_row guidellm "$c" "$rps" "$n"
      fi
      if [ -x "$PEERS_VENV/bin/aiperf" ]; then
        rm -rf "$OUT/aiperf"
        /usr/bin/time -f "%U %S" -o "$OUT/time.txt" taskset -c 0 "$PEERS_VENV/bin/aiperf" profile \
          --url "$FAST_URL" --model m --endpoint-type completions --streaming --concurrency "$c" \
          --benchmark-duration "$SECS" --synthetic-input-tokens-mean 16 --output-tokens-mean 16 \
          --tokenizer "$TOK" --artifact-dir "$OUT/aiperf" --ui-type none > "$OUT/aiperf.log" 2>&1 || true
        read -r rps n < <(python3 "scripts/peer_figures.py" aiperf "$OUT/aiperf") || { rps=0; n=0; }
        peer_row aiperf "$c" "$rps" "$n"
      fi
      if [ -x "$PEERS_VENV/bin/vllm" ]; then
        HF_HUB_OFFLINE=1 /usr/bin/time -f "%U %S" -o "$OUT/time.txt" taskset -c 0 "$PEERS_VENV/bin/vllm" bench serve \
          --base-url "$FAST_URL" --model m --tokenizer "$TOK" --dataset-name random --random-input-len 16 \
          --random-output-len 16 --num-prompts $((c * 50)) --max-concurrency "$c" --save-result \
          --result-dir "$OUT" --result-filename v.json > "$OUT/vllm.log" 2>&1 || true
        read -r rps n < <(python3 "scripts/peer_figures.py" vllm "$OUT/v.json") || { rps=0; n=0; }
        peer_row vllm "$c" "$rps" "$n"
      fi
    done
    done
    rm -rf "$TOK"
  fi
fi

# The goals of issue 14 beside what this run measured (from the sections that ran).
python3 - "$OUT/goals.txt" <<'PY'
import math, os, sys
rows = [l.split() for l in open(sys.argv[1])] if os.path.exists(sys.argv[1]) else []
closed = [(r[1], float(r[2]), float(r[3])) for r in rows if r[0] == "closed"]
ttft = [(r[1], float(r[2])) for r in rows if r[0] == "ttft"]
poisson = {float(r[1]): (float(r[2]), float(r[3])) for r in rows if r[0] == "poisson"}
peers = [(r[1], r[2], r[3], float(r[4])) for r in rows if r[0] == "peer" and float(r[4]) > 0]
out = []
verdict = lambda ok: "met" if ok else "MISSED"
for mode in ("per-token", "one"):
    ours = [(rps, busy) for m, rps, busy in closed if m == mode]
    if not ours:
        continue
    best, busy = max(ours)
    # a server whose core was saturated was the limit: the run says nothing of the client's own
    bound = busy >= 95 and best < 20000
    out.append((f"≥ 20,000 streaming req/s on one client core ({mode})",
                f"{best:,.0f} req/s (best closed loop; server core {busy:.0f}% busy)",
                "n/a: the server was the limit" if bound else verdict(best >= 20000)))
    theirs = [p for p in peers if p[0] == mode]
    if theirs:
        _, name, users, rps = max(theirs, key=lambda p: p[3])
        out.append((f"≥ 10× the best peer ({mode})", f"{best / rps:.1f}× ({name} {rps:,.0f} req/s at {users} users)",
                    verdict(best >= 10 * rps)))
for users, err in ttft:
    out.append((f"TTFT p99 error ≤ 0.5 ms ({users} users)", f"{err:+.3f} ms", verdict(abs(err) <= 0.5)))
if 5000.0 in poisson:
    ach, lag = poisson[5000.0]
    ok = ach >= 0.98 * 5000 and not math.isnan(lag) and lag <= 1.0
    out.append(("Poisson 5k req/s, lag p99 ≤ 1 ms", f"{ach:,.0f} achieved, lag p99 {lag:.3f} ms", verdict(ok)))
if out:
    print()
    print("## goals (issue 14) beside this run")
    for goal, got, v in out:
        print(f"{goal:<56} {got:<58} {v}")
PY
