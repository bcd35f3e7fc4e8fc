#!/usr/bin/env bash
# Scale of `goodput sim`: simulates N requests (Poisson 50 req/s, 200-token prompts and replies)
# with --out, under /usr/bin/time -v, and prints per size: wall time, user+system CPU, peak RSS,
# the result document's size and the records it keeps, next to the goals of issue 14
# (1M requests: ≤ 10 s, ≤ 1 GB RSS, document ≤ 200 MB at default settings; 10M: bounded memory,
# i.e. RSS does not grow with N past the 100k-record cap).
#
#   scripts/bench-sim-scale.sh [N ...]   (default: 100000 1000000; add 10000000 for the 10M check)
#   SKIP_BUILD=1 to use target/release/goodput as it is; EXTRA='--records none' to pass flags.
#
# Figures only: nothing here fails on a slow machine. Pin to one core with `taskset -c 0` in front
# for the one-core figure.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${SKIP_BUILD:-}" ] || cargo build --release -q -p goodput --bin goodput
BIN=target/release/goodput
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 1000000)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
printf '%-10s %9s %9s %10s %11s %s\n' requests wall_s cpu_s rss_MB doc_MB records
for n in "${SIZES[@]}"; do
    doc="$OUT/sim-$n.json"
    # shellcheck disable=SC2086
    /usr/bin/time -v "$BIN" sim --requests "$n" --rate 50 --input-tokens 200 --output-tokens 200 \
        --out "$doc" -q ${EXTRA:-} >"$OUT/stdout" 2>"$OUT/time"
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$OUT/time")
    cpu=$(awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {printf "%.2f", u + s}' "$OUT/time")
    rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$OUT/time")
    size=$(python3 -c "import os; print(f'{os.path.getsize(\"$doc\") / 1e6:.0f}')")
    kept=$(python3 - "$doc" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
k = run["summary"].get("records_kept")
n = len(run["requests"])
est = run["summary"]["itl_ms"].get("estimate")
print((f"{k['kept']} of {k['total']} ({k['mode']})" if k else f"{n} (all)")
      + (f"; ITL sketched ±{est['relative_error']:.4f}" if est else "; ITL exact"))
EOF
)
    printf '%-10s %9s %9s %10s %11s %s\n' "$n" "$wall" "$cpu" "$rss" "$size" "$kept"
    rm -f "$doc"
done
echo "goals (1M): wall ≤ 10 s on one core, RSS ≤ 1024 MB, document ≤ 200 MB; 10M: RSS as for 1M"
