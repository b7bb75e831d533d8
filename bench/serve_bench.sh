#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# serve_bench.sh: "HTTP costs almost nothing". Aggregate batch-8 decode tokens/s through
# `glint serve` (8 concurrent streaming HTTP clients) vs `glint bench --batch 8 -n 64` (the
# engine driven directly, no HTTP) on the same 30b-shape 4-layer Q4_K_M GGUF, interleaved
# server, bench, server, bench, ... because this VM's memory bandwidth and load drift within
# minutes (bench/README.md). Prints per-round numbers, means and the ratio server/bench (goal:
# >= 0.90). Not part of the test suite (takes minutes).
#
# What is compared, like with like:
#   bench  `glint bench --model F --batch 8 -n 64 -t 2` (src/cli/cmd_bench.c): a fresh engine
#          (max_num_seqs 8, max_num_batched_tokens 512, 256 MiB f16 KV, prefix cache on,
#          max_model_len 81) after a 1-sequence 4-token warm-up; 8 greedy sequences, each a
#          16-id prompt drawn from xoshiro256** seeded 99 (ids mod 200000), ignore_eos, 64
#          tokens. Clock starts after the engine step in which the last sequence got its first
#          token (so prefill is excluded) and stops after the last step; aggregate = tokens
#          generated after the start (8*64 - 8 = 504 when all prefill together) / that time.
#   server `glint serve` with the same engine settings (--threads 2 --max-num-seqs 8
#          --max-num-batched-tokens 512 --kv-cache-memory 256MiB --kv-cache-dtype f16
#          --max-model-len 81 --deep-health-interval 0: the default deep-health probe would run
#          a >= 384-token request right at start-up), started fresh each round, one untimed
#          4-token warm-up request (a different prompt, so the prefix cache holds nothing of the
#          measured prompts), then 8 concurrent clients (one thread and one connection each)
#          POST /v1/completions with exactly bench's 8 prompts as token ids, max_tokens 64,
#          temperature 0, ignore_eos, stream, return_token_ids (each SSE chunk says how many
#          ids it carries), stream_options.include_usage. The clock is the client's: every chunk
#          is stamped on arrival. T0 = arrival of the last stream's first token (every sequence
#          prefilled: bench's start), T1 = arrival of the last token of any stream (bench's
#          stop). Decode tokens = ids in chunks that arrive after T0 + eps, where eps = a quarter
#          of the median gap between a stream's chunks: chunks of the step that produced T0
#          reach the other streams a hair after T0 and belong before the start, as bench's
#          counter snapshot puts them. Aggregate = decode tokens / (T1 - T0). This includes
#          everything HTTP adds per token: the engine's callbacks, waking 8 connection
#          threads, JSON/SSE encoding, the socket writes and the client's reads, all on the same
#          2 cores (the client too).
#   Also shown (not the comparison): the server's end-to-end aggregate, all 512 tokens over
#   the time from the clients' send to T1 (includes prefill and request handling).
# Env: GLINT_BIN (default build/glint), SERVE_BENCH_MODEL (default bench/out/30b4-q4km.gguf,
#      written on first use as bench/bench.sh does), SERVE_BENCH_ROUNDS (4), SERVE_BENCH_THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
mkdir -p "$OUT"
GLINT_BIN="${GLINT_BIN:-build/glint}"
MODEL="${SERVE_BENCH_MODEL:-$OUT/30b4-q4km.gguf}"
ROUNDS="${SERVE_BENCH_ROUNDS:-4}" THREADS="${SERVE_BENCH_THREADS:-2}"
B=8 N=64
[ -x "$GLINT_BIN" ] || { echo "serve_bench: $GLINT_BIN not built"; exit 1; }
[ "$ROUNDS" -ge 1 ] || { echo "serve_bench: SERVE_BENCH_ROUNDS must be >= 1"; exit 1; }

if [ ! -s "$MODEL" ]; then
    echo "serve_bench: writing $MODEL (30b-shape, 4 layers, Q4_K_M; once)" >&2
    "$GLINT_BIN" make-model --preset 30b-shape --layers 4 --type Q4_K_M --out "$MODEL.tmp" >&2
    mv "$MODEL.tmp" "$MODEL"
fi

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
log="$OUT/serve-bench-$stamp.log"
tmp="$(mktemp -d)"
srv_pid=""
stop_server() {
    if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
        kill -TERM "$srv_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$srv_pid" 2>/dev/null || true
        wait "$srv_pid" 2>/dev/null || true
    fi
    srv_pid=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT
load1() { cut -d' ' -f1 /proc/loadavg; }

# The client: prints one JSON line {agg, decode_tokens, window_s, e2e, ...}.
cat >"$tmp/client.py" <<'PY'
import http.client, json, statistics, sys, threading, time
port, B, N = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
M = (1 << 64) - 1
def splitmix(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return x, z ^ (z >> 31)
def rng(seed):  # gl_rng_seed + gl_rng_next (xoshiro256**), src/sampling/sampling.c
    s, x = [], seed
    for _ in range(4):
        x, v = splitmix(x)
        s.append(v)
    rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M
    while True:
        out = (rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
        s[3] = rotl(s[3], 45)
        yield out
g = rng(99)
prompts = [[next(g) % 200000 for _ in range(16)] for _ in range(B)]  # cmd_bench.c's prompts

def post(body, stamps):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
        usage = None
        for raw in r:
            t = time.perf_counter()
            line = raw.strip()
            if not line:
                continue
            data = line[6:]
            if data == b"[DONE]":
                return usage
            o = json.loads(data)
            if "error" in o:
                raise RuntimeError(data)
            if o.get("usage"):
                usage = o["usage"]
            for ch in o["choices"]:
                k = len(ch.get("token_ids") or [])
                if k:
                    stamps.append((t, k))
        raise RuntimeError("stream ended without [DONE]")
    finally:
        c.close()

def body(prompt, n):
    return {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
            "stream": True, "return_token_ids": True, "stream_options": {"include_usage": True}}

post(body([(7 + 13 * k) % 200000 for k in range(16)], 4), [])  # warm-up, untimed
stamps = [[] for _ in range(B)]
usage = [None] * B
errors = []
barrier = threading.Barrier(B + 1, timeout=30)
t_send = [0.0]
def go(i):
    try:
        barrier.wait()
        usage[i] = post(body(prompts[i], N), stamps[i])
    except Exception as e:
        errors.append(f"client {i}: {e}")
threads = [threading.Thread(target=go, args=(i,)) for i in range(B)]
for t in threads:
    t.start()
barrier.wait()
t_send[0] = time.perf_counter()
for t in threads:
    t.join(600)
if errors or any(t.is_alive() for t in threads):
    sys.exit("serve_bench client: " + "; ".join(errors or ["a client did not finish"]))
for i in range(B):
    n = sum(k for _, k in stamps[i])
    if n != N or (usage[i] or {}).get("completion_tokens") != N:
        sys.exit(f"serve_bench client: stream {i} got {n} ids, usage {usage[i]}")
T0 = max(s[0][0] for s in stamps)
T1 = max(s[-1][0] for s in stamps)
gaps = [b[0] - a[0] for s in stamps for a, b in zip(s, s[1:])]
eps = 0.25 * statistics.median(gaps)
dec = sum(k for s in stamps for t, k in s if t > T0 + eps)
near = sum(k for s in stamps for t, k in s if T0 < t <= T0 + eps)
chunks = sum(len(s) for s in stamps)
firsts = sorted(s[0][0] - t_send[0] for s in stamps)
print(json.dumps({"agg": dec / (T1 - T0), "decode_tokens": dec, "window_s": T1 - T0,
                  "eps_ms": eps * 1e3, "tokens_near_T0": near, "chunks": chunks,
                  "e2e": B * N / (T1 - t_send[0]),
                  "first_token_s": [round(x, 3) for x in firsts]}))
PY

start_server() {
    : >"$tmp/serve.log" # truncated here, not by the background child: no stale port
    "$GLINT_BIN" serve --model "$MODEL" --host 127.0.0.1 --port 0 --threads "$THREADS" \
        --max-num-seqs "$B" --max-num-batched-tokens 512 --kv-cache-memory 256MiB \
        --kv-cache-dtype f16 --max-model-len $((16 + N + 1)) --deep-health-interval 0 \
        --shutdown-timeout 5 >"$tmp/serve.log" 2>&1 &
    srv_pid=$!
    port=""
    for _ in $(seq 600); do # up to 60 s
        port="$(sed -nE 's/.*serving .* at http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$tmp/serve.log")"
        [ -n "$port" ] && break
        kill -0 "$srv_pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$port" ] || { cat "$tmp/serve.log"; echo "serve_bench: server did not start"; exit 1; }
}

echo "# serve_bench $stamp: $MODEL, batch $B, -n $N, $THREADS threads, $ROUNDS rounds" | tee "$log" >&2
loads=()
for r in $(seq 1 "$ROUNDS"); do
    loads+=("$(load1)")
    echo "round $r: server (load average $(load1))" >&2
    start_server
    timeout 900 /usr/bin/python3 "$tmp/client.py" "$port" "$B" "$N" >"$OUT/serve-$stamp-r$r.json"
    stop_server
    cat "$tmp/serve.log" >>"$log"
    loads+=("$(load1)")
    echo "round $r: bench (load average ${loads[-1]})" >&2
    timeout 900 "$GLINT_BIN" bench --model "$MODEL" --batch "$B" -n "$N" -t "$THREADS" \
        >"$OUT/bench-$stamp-r$r.txt" 2>>"$log"
done

exec /usr/bin/python3 - "$OUT" "$stamp" "$ROUNDS" "$MODEL" "${loads[*]}" <<'EOF'
import json, os, statistics, sys
out, stamp, rounds, model, loads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
rows, S, Bn, R = [], [], [], []
for r in range(1, rounds + 1):
    s = json.loads(open(f"{out}/serve-{stamp}-r{r}.json").read())
    b = next(json.loads(l) for l in open(f"{out}/bench-{stamp}-r{r}.txt") if l.startswith("{"))
    S.append(s["agg"]); Bn.append(b["aggregate_ts"]); R.append(s["agg"] / b["aggregate_ts"])
    rows.append(f"| {r} | {loads[2*r-2]} / {loads[2*r-1]} | {s['agg']:.2f} ({s['decode_tokens']} tok / "
                f"{s['window_s']:.2f} s) | {b['aggregate_ts']:.2f} ({b['decode_tokens']} tok) | "
                f"{R[-1]:.3f} | {s['e2e']:.2f} | {s['tokens_near_T0']} / {s['eps_ms']:.0f} ms |")
sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
print(f"\n### glint serve vs glint bench, batch 8 decode, {os.path.basename(model)}, {stamp}\n")
print("| round | load avg (server / bench start) | server aggregate t/s | bench aggregate t/s | "
      "server/bench | server end-to-end t/s | ids in (T0, T0+eps] / eps |")
print("|---:|---:|---:|---:|---:|---:|---:|")
print("\n".join(rows))
print(f"\nmean server {statistics.mean(S):.2f} ± {sd(S):.2f} t/s, bench {statistics.mean(Bn):.2f} "
      f"± {sd(Bn):.2f} t/s; ratio of means {statistics.mean(S) / statistics.mean(Bn):.3f}, "
      f"mean of per-round ratios {statistics.mean(R):.3f} (min {min(R):.3f}, max {max(R):.3f}); "
      f"goal >= 0.90: {'met' if statistics.mean(R) >= 0.90 else 'NOT met'}")
EOF
