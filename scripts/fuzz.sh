#!/usr/bin/env bash
# Fuzzes the parsers on stable Rust (issue 14, part 5): each target is a proptest file that feeds
# arbitrary and mutated inputs (seeds: fuzz/corpus/<target>/, also replayed by the tests) and
# checks that nothing panics, errors are typed and name what they refuse, and parsed values
# round-trip. CI runs each with proptest's default case count; this script runs each target for
# MINUTES minutes, in rounds of PROPTEST_CASES cases with a fresh random seed each round, and
# stops at the first failure (proptest prints the minimal failing input: make it a named
# regression test in the target's file, and add it to the corpus).
#
#   scripts/fuzz.sh [MINUTES]       (default 1 minute per target; CASES per round, default 20000;
#                                    TARGETS="sse server_request datasets slo" to pick)
#
# cargo-fuzz needs a nightly toolchain and cargo-afl LLVM plugins; CI runs stable only, so the
# targets are proptest's (no coverage feedback: byte-level mutations of real-shaped seeds instead).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-1}"
CASES="${CASES:-20000}"
TARGETS="${TARGETS:-sse server_request datasets slo}"

declare -A PKG=([sse]=goodput-client [server_request]=goodput-server [datasets]=goodput-workload [slo]=goodput-metrics)
declare -A TEST=([sse]=fuzz_sse [server_request]=fuzz_request [datasets]=fuzz_parsers [slo]=fuzz_slo)

for t in $TARGETS; do
  cargo test --release -q -p "${PKG[$t]}" --test "${TEST[$t]}" --no-run
done

status=0
for t in $TARGETS; do
  end=$(( $(date +%s) + MINUTES * 60 ))
  rounds=0
  start=$(date +%s)
  while [ "$(date +%s)" -lt "$end" ]; do
    # proptest draws a fresh seed per run unless told otherwise; failures are written to
    # proptest-regressions/ beside the test and replayed first next time
    if ! PROPTEST_CASES="$CASES" cargo test --release -q -p "${PKG[$t]}" --test "${TEST[$t]}" >"/tmp/fuzz-$t.log" 2>&1; then
      echo "FAIL  $t after $rounds rounds of $CASES cases: see /tmp/fuzz-$t.log"
      grep -E "minimal failing input|panicked" "/tmp/fuzz-$t.log" | head -5 || true
      status=1
      break
    fi
    rounds=$((rounds + 1))
  done
  [ "$status" -eq 0 ] && printf 'ok    %-15s %4d rounds × %d cases per property in %ds, no failure\n' \
    "$t" "$rounds" "$CASES" "$(( $(date +%s) - start ))"
done
exit "$status"
