#!/usr/bin/env python3
"""Chooses the values of crates/model/engine/data/efficiency.toml on the calibration set.

Coordinate descent over the table's numeric values: each value is multiplied by a few factors in
turn and kept where the calibration figures' summed |ln(predicted/published)| (firm-B figures at
half weight) falls. The held-out figures are never read. Prints the fitted table to stdout.

    cargo build --release -p goodput-sim --example fit_efficiency
    python3 scripts/fit-efficiency.py crates/model/engine/data/efficiency.toml > fitted.toml
"""
import concurrent.futures as cf
import math
import re
import subprocess
import sys
import tempfile

EXAMPLE = "target/release/examples/fit_efficiency"
# fields the search moves (others, and every `why`, stay as written)
FIELDS = {"mfu", "mfu_half_params", "mbu", "allreduce_latency_s", "alltoall_latency_s", "allreduce_bw_share", "moe_gemm",
          "moe_half_tokens", "fp4_mfu", "fp4_mbu", "step_overhead_s", "seq_overhead_s"}
BOUNDED = {"mfu", "mbu", "allreduce_bw_share", "moe_gemm", "fp4_mfu", "fp4_mbu"}  # at most 1


def values(text):
    """(line index, field, value) of every value the search may move."""
    out = []
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"\s*(\w+)\s*=\s*([0-9.eE+-]+)\s*(#.*)?$", line)
        if m and m.group(1) in FIELDS:
            out.append((i, m.group(1), float(m.group(2))))
    return out


def with_values(text, vals):
    lines = text.splitlines()
    for i, field, v in vals:
        lines[i] = f"{field} = {v:.6g}"
    return "\n".join(lines) + "\n"


def loss(text):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    out = subprocess.run([EXAMPLE, f.name, "cal"], capture_output=True, text=True, check=True).stdout
    total = 0.0
    for row in out.splitlines():
        _id, _set, _pub, _pred, ratio, firm, excluded = row.split("\t")
        if excluded:
            continue
        r = float(ratio)
        total += (0.5 if firm == "B" else 1.0) * (abs(math.log(r)) if r > 0 else 5.0)
    return total


def main():
    text = open(sys.argv[1]).read()
    vals = values(text)
    best = loss(text)
    print(f"start: {best:.3f}", file=sys.stderr)
    with cf.ThreadPoolExecutor(2) as pool:
        for step in (1.25, 1.1, 1.04):
            for k in range(len(vals)):
                i, field, v = vals[k]
                tries = []
                for f in (1 / step, step):
                    nv = v * f
                    if field in BOUNDED:
                        nv = min(nv, 1.0)
                    if nv != v:
                        tries.append(nv)
                cands = [vals[:k] + [(i, field, nv)] + vals[k + 1:] for nv in tries]
                losses = list(pool.map(lambda c: loss(with_values(text, c)), cands))
                for c, l in zip(cands, losses):
                    if l < best - 1e-9:
                        best, vals = l, c
                print(f"step {step} {field}@{i + 1}: {vals[k][2]:.6g}  loss {best:.3f}", file=sys.stderr)
    print(with_values(text, vals), end="")


if __name__ == "__main__":
    main()
