#!/usr/bin/env bash
# The engine mechanisms' scenario tables (docs/engine.md, "Scenarios"): each mechanism on and
# off with `goodput sim`, on workloads chosen to show what it is known for. Every number comes
# from the engine model running; nothing here is computed from a formula. About 5 minutes.
#
#   scripts/bench-mechanisms.sh            # all scenarios
#   scripts/bench-mechanisms.sh prefix     # the ones whose name contains "prefix"
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p goodput
SHAREGPT=../shared/data/sharegpt/sharegpt_v3_first_prompt_1000.json
[ -f "$SHAREGPT" ] || SHAREGPT=fixtures/sharegpt_v3_first_prompt_200.json
python3 - target/release/goodput "$SHAREGPT" "${1:-}" <<'PY'
import json, os, subprocess, sys, tempfile

BIN, SHAREGPT, ONLY = sys.argv[1], sys.argv[2], sys.argv[3]
OUT = tempfile.mkdtemp()
n = 0

def sim(*flags, cmd="sim"):
    """Runs goodput and returns its result document."""
    global n
    n += 1
    path = os.path.join(OUT, f"{n}.json")
    args = [BIN, cmd, *map(str, flags), "-q", "--out", path]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)}\n{r.stderr}")
    return json.load(open(path))

def run(doc):
    return doc["runs"][0]

def s(doc, metric, stat):
    v = run(doc)["summary"][metric][stat]
    return float("nan") if v is None else v

def e(doc):
    return run(doc)["engine_stats"]

def table(title, head, rows):
    print(f"\n### {title}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")

def want(name):
    return ONLY in name

# 1. static vs continuous batching, at saturation (everything queued at once)
if want("batching"):
    base = ["--model", "llama-2-13b", "--gpu", "a100", "--rate", "inf", "--requests", "1000"]
    loads = [
        ("uniform outputs (512 in, 128 out)", ["--input-tokens", "512", "--output-tokens", "128"]),
        ("mixed outputs (uniform 50-800)", ["--input-tokens", "512", "--output-tokens", "uniform:50..800"]),
        ("interactive chat (ShareGPT)", ["--dataset", f"sharegpt:{SHAREGPT}"]),
        ("short answers (< 100 tokens)", ["--input-tokens", "512", "--output-tokens", "uniform:10..99"]),
        ("long outputs (> 500 tokens)", ["--input-tokens", "512", "--output-tokens", "uniform:501..1000"]),
    ]
    rows = []
    for name, w in loads:
        c = sim(*base, *w)
        st = sim(*base, *w, "--batching", "static")
        rc, rs = run(c)["summary"]["request_throughput"], run(st)["summary"]["request_throughput"]
        rows.append([name, f"{rc*60:.0f}", f"{rs*60:.0f}", f"{rc/rs:.2f}x",
                     f"{s(c,'ttft_ms','p99')/1e3:.1f}", f"{s(st,'ttft_ms','p99')/1e3:.1f}"])
    table("Batching: Llama-2-13B on one A100, 1,000 requests queued at once (max 256 sequences)",
          ["workload", "req/min continuous", "req/min static", "gain", "p99 TTFT continuous (s)", "p99 TTFT static (s)"], rows)

# 2. paged vs pre-allocated KV: the vLLM paper's setting (a 13B model on one A100, ShareGPT
#    lengths: prompts of mean 161 tokens, replies of mean 338, a 2,048-token context as OPT's),
#    then the ShareGPT sample's own lengths
if want("kv"):
    paper = ["--input-tokens", "lognormal:161,150", "--output-tokens", "lognormal:338,300"]
    sample = ["--dataset", f"sharegpt:{SHAREGPT}"]
    rows = []
    for lengths, lf in [("ShareGPT-like (mean 161 in, 338 out)", paper), ("ShareGPT sample", sample)]:
        base = ["--model", "llama-2-13b", "--gpu", "a100", "--rate", "inf", "--requests", "1000",
                "--max-model-len", "2048", *lf]
        for name, f in [("paged (16-token blocks)", []),
                        ("pre-allocated, max-model-len 2048", ["--kv-alloc", "prealloc"]),
                        ("pre-allocated, prompt + max_tokens", ["--kv-alloc", "prealloc", "--prealloc", "request"])]:
            d = sim(*base, *f)
            st = e(d)
            fit = st.get("kv_seq_capacity")
            rows.append([lengths, name, f"{st['mean_kv_used_share']*100:.1f}%", f"{st['mean_running']:.0f}",
                         f"{st['max_running']}", "-" if fit is None else str(fit),
                         f"{run(d)['summary']['request_throughput']:.2f}"])
    table("KV allocation: Llama-2-13B on one A100, 1,000 requests at once, 2,048-token context",
          ["lengths", "allocation", "reserved KV holding tokens", "mean running", "max running", "sequences that fit",
           "req/s"], rows)

# 3. prefill scheduling under Poisson load with long prompts
if want("scheduling"):
    base = ["--rate", "1.5", "--requests", "400", "--input-tokens", "uniform:2000..8000", "--output-tokens", "256",
            "--prefix-caching", "off"]
    rows = []
    for name, f in [("prefill-first", ["--scheduling", "prefill-first", "--max-batched-tokens", "8192"]),
                    ("decode-first", ["--scheduling", "decode-first", "--max-batched-tokens", "8192"]),
                    ("chunked, 8192-token budget", ["--scheduling", "chunked", "--max-batched-tokens", "8192"]),
                    ("chunked, 2048-token budget", ["--scheduling", "chunked", "--max-batched-tokens", "2048"])]:
        d = sim(*base, *f)
        rows.append([name, f"{s(d,'itl_ms','p50'):.1f}", f"{s(d,'itl_ms','p99'):.1f}", f"{s(d,'itl_max_ms','p99'):.0f}",
                     f"{s(d,'tpot_ms','mean'):.1f}", f"{s(d,'ttft_ms','p50'):.0f}", f"{s(d,'ttft_ms','p99'):.0f}"])
    table("Prefill scheduling: Llama-3.1-8B on one H100, Poisson 1.5 req/s, prompts of 2,000-8,000 tokens, 256 out",
          ["policy", "ITL p50 (ms)", "ITL p99 (ms)", "max ITL p99 (ms)", "TPOT mean (ms)", "TTFT p50 (ms)", "TTFT p99 (ms)"], rows)

# 4. prefix caching with a 1,000-token shared system prompt
if want("prefix"):
    rows = []
    for rate in [10, 40]:
        base = ["--rate", rate, "--requests", "2000", "--prefix-groups", "1", "--prefix-tokens", "1000",
                "--input-tokens", "uniform:20..100", "--output-tokens", "100"]
        for name, f in [("off", ["--prefix-caching", "off"]), ("on", ["--prefix-caching", "on"])]:
            d = sim(*base, *f)
            st = e(d)
            pc = st.get("prefix_cache") or {}
            hit = pc.get("hit_blocks", 0) / max(1, pc.get("queried_blocks", 0))
            rows.append([f"{rate} req/s", name, f"{st['prefill_tokens']/2000:.0f}", "-" if not pc else f"{hit*100:.0f}%",
                         f"{s(d,'ttft_ms','mean'):.1f}", f"{s(d,'ttft_ms','p99'):.1f}", f"{s(d,'tpot_ms','mean'):.2f}"])
    table("Prefix caching: Llama-3.1-8B on one H100, a 1,000-token system prompt + 20-100-token messages, 100 out",
          ["load", "prefix caching", "prompt tokens computed per request", "block hit rate", "TTFT mean (ms)",
           "TTFT p99 (ms)", "TPOT mean (ms)"], rows)

# 5. speculative decoding at low and high load
if want("spec"):
    base = ["--model", "llama-3.1-70b", "--tp", "4", "--dataset", f"sharegpt:{SHAREGPT}"]
    rows = []
    for load_name, load in [("QPS 1", ["--rate", "1", "--requests", "300"]),
                            ("QPS 8", ["--rate", "8", "--requests", "1500"]),
                            ("all at once", ["--rate", "inf", "--requests", "1000"])]:
        b = sim(*base, *load)
        for name, f in [("draft llama-3.2-1b, k=4, acceptance 0.7", ["--speculative", "draft=llama-3.2-1b,k=4,acceptance=0.7"]),
                        ("n-gram, k=4, acceptance 0.5", ["--speculative", "ngram,k=4,acceptance=0.5"])]:
            d = sim(*base, *load, *f)
            rows.append([load_name, name, f"{s(b,'tpot_ms','mean'):.1f}", f"{s(d,'tpot_ms','mean'):.1f}",
                         f"{s(b,'tpot_ms','mean')/s(d,'tpot_ms','mean'):.2f}x",
                         f"{run(d)['summary']['output_throughput']/run(b)['summary']['output_throughput']:.2f}x",
                         f"{e(d)['spec_accepted_tokens']/max(1,e(d)['spec_drafts'])+1:.2f}"])
    table("Speculative decoding: Llama-3.1-70B on 4 H100s, ShareGPT",
          ["load", "speculation", "TPOT off (ms)", "TPOT on (ms)", "TPOT speed-up", "output tok/s on/off",
           "tokens per verified step"], rows)

# 6. disaggregation: goodput at the same GPU count, and append-prefill on multi-turn sessions
if want("disagg"):
    slo = ["--slo", "ttft<=250ms", "--slo", "tpot<=15ms", "--attainment", "0.9", "--step-time", "120s"]
    w = ["--input-tokens", "uniform:1000..3000", "--output-tokens", "uniform:100..300"]
    rows = []
    for name, f in [("colocated, 2 replicas (least-loaded)", ["--replicas", "2", "--router", "least-loaded"]),
                    ("disaggregated, 1 prefill + 1 decode, nvlink", ["--disaggregate", "prefill=1,decode=1", "--link", "nvlink"]),
                    ("disaggregated, 1 prefill + 1 decode, 100gbps", ["--disaggregate", "prefill=1,decode=1", "--link", "100gbps"])]:
        d = sim("--sim", *slo, *w, *f, cmd="capacity")
        c = d["capacity"]
        rows.append([name, f"{c['rate']:.2f}", f"{c['per_gpu']:.2f}"])
    table("Disaggregation: Llama-3.1-8B, 2 H100s, 1,000-3,000-token prompts, 100-300 out; "
          "goodput = the highest Poisson rate at which 90% of requests meet TTFT <= 250 ms and TPOT <= 15 ms",
          ["deployment", "goodput (req/s)", "per GPU"], rows)
    # a tight TPOT target, where prefills interfering with decodes decide
    slo = ["--slo", "ttft<=250ms", "--slo", "tpot<=10ms", "--attainment", "0.9", "--step-time", "120s"]
    rows = []
    for name, f in [("colocated, 4 replicas (least-loaded)", ["--replicas", "4", "--router", "least-loaded"]),
                    ("disaggregated, 3 prefill + 1 decode, nvlink", ["--disaggregate", "prefill=3,decode=1", "--link", "nvlink"]),
                    ("disaggregated, 2 prefill + 2 decode, nvlink", ["--disaggregate", "prefill=2,decode=2", "--link", "nvlink"])]:
        d = sim("--sim", *slo, *w, *f, cmd="capacity")
        c = d["capacity"]
        rows.append([name, f"{c['rate']:.2f}", f"{c['per_gpu']:.2f}"])
    table("Disaggregation under a tight TPOT target: the same workload on 4 H100s, TTFT <= 250 ms and TPOT <= 10 ms",
          ["deployment", "goodput (req/s)", "per GPU"], rows)
    rows = []
    base = ["--sessions", "--turns", "4", "--think-time", "2s", "--concurrency", "32", "--requests", "1600",
            "--input-tokens", "uniform:200..600", "--output-tokens", "uniform:100..300",
            "--disaggregate", "prefill=1,decode=1", "--link", "100gbps"]
    for name, f in [("PD", []), ("PD + append-prefill (--ppd)", ["--ppd"])]:
        d = sim(*base, *f)
        recs = run(d)["requests"]
        def ttft(first):
            v = [r["event_ms"][0] - r["sent_ms"] for r in recs if r.get("event_ms") and ((r.get("turn") or 0) == 0) == first]
            return sum(v) / max(1, len(v))
        t = e(d).get("transfers") or {}
        rows.append([name, f"{ttft(True):.1f}", f"{ttft(False):.1f}", str(t.get("transfers", 0)),
                     str(t.get("append_prefills", 0))])
    table("Append-prefill: 4-turn conversations (200-600 new tokens a turn), 32 users, 2 s think time, 1 prefill + 1 decode H100 over 100 Gb/s",
          ["deployment", "turn-1 TTFT mean (ms)", "turn-2+ TTFT mean (ms)", "KV transfers", "append-prefills"], rows)

# 7. replicas and routing with shared prefixes
if want("replicas"):
    base = ["--replicas", "4", "--rate", "60", "--requests", "4000", "--prefix-groups", "16", "--prefix-tokens", "2000",
            "--input-tokens", "uniform:50..200", "--output-tokens", "128"]
    rows = []
    for router in ["round-robin", "least-loaded", "prefix-aware"]:
        d = sim(*base, "--router", router)
        pc = e(d).get("prefix_cache") or {}
        busy = [p.get("utilization") or 0 for p in e(d).get("parts", [])]
        rows.append([router, f"{pc.get('hit_blocks',0)/max(1,pc.get('queried_blocks',0))*100:.0f}%",
                     f"{s(d,'ttft_ms','mean'):.0f}", f"{s(d,'ttft_ms','p99'):.0f}", f"{s(d,'tpot_ms','mean'):.1f}",
                     " / ".join(f"{b*100:.0f}%" for b in busy)])
    table("Replicas and routing: 4 replicas of Llama-3.1-8B on H100, 16 groups of 2,000-token shared prefixes, 60 req/s",
          ["router", "prefix hit rate", "TTFT mean (ms)", "TTFT p99 (ms)", "TPOT mean (ms)", "replica busy"], rows)
PY
