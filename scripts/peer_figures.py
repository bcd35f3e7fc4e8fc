#!/usr/bin/env python3
"""Reads a peer benchmark's own result file and prints "REQ_PER_S REQUESTS" (successful ones).

    peer_figures.py guidellm RESULT.json   (guidellm run --output kind=json)
    peer_figures.py aiperf ARTIFACT_DIR    (aiperf profile --artifact-dir; its profile_export_aiperf.json)
    peer_figures.py vllm RESULT.json       (vllm bench serve --save-result)

Used by scripts/bench-ceiling.sh; prints "0 0" when the file is missing or has no figure.
"""
import glob
import json
import os
import sys


def guidellm(path):
    b = json.load(open(path))["benchmarks"][0]
    m = b["metrics"]
    n = m["request_totals"]["successful"]
    return n / b["duration"], n


def aiperf(folder):
    files = sorted(glob.glob(os.path.join(folder, "**", "profile_export_aiperf.json"), recursive=True))
    d = json.load(open(files[0]))
    recs = d.get("records", d)
    rps = recs["request_throughput"]["avg"]
    n = recs.get("request_count", {}).get("avg", 0)
    return rps, n


def vllm(path):
    d = json.load(open(path))
    return d["request_throughput"], d["completed"]


try:
    rps, n = {"guidellm": guidellm, "aiperf": aiperf, "vllm": vllm}[sys.argv[1]](sys.argv[2])
    print(f"{rps:.1f} {int(n)}")
except (OSError, IndexError, KeyError, ValueError, TypeError, ZeroDivisionError):
    print("0 0")
