#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spec_llama.sh: DFlash speculation through each server, glint against llama.cpp (issue 22's
# third goal: glint >= 1.3x at batch 1), on one target + drafter GGUF pair, interleaved
# (pair k: glint, then llama.cpp; each server started fresh, then stopped).
#
#   glint      glint serve -m T --speculative-config '{"method":"dflash","model":D,
#              "num_speculative_tokens":15}' (the engine's cost model picks 0..15 per step)
#   llama.cpp  llama-server -m T -md D --spec-type draft-dflash --spec-draft-n-max 15 -fa on
#              (the invocation of the bundle's docs/speculative.md; 15 = the block of 16 less
#              the anchor, the clamp it applies anyway)
#   both       2 threads, one slot, f16 KV, context 512; one untimed 2-token warm-up request,
#              then one streamed /v1/completions of a fixed 24-word prompt, temperature 0,
#              ignore_eos, max_tokens N. Decode t/s = (N - 1) / (last chunk - first chunk) at
#              the client (prefill excluded). With SPEC_LLAMA_OFF=1 each server also runs the
#              same request with speculation off (its own reference).
#
# The weights are random (make-model), so the drafter's real acceptance is about 0: this
# measures what each implementation pays for drafting that fails, which is what batch-1 users
# of a mismatched or weak drafter get. Acceptance is printed (glint: /metrics spec_decode
# counters; llama.cpp: the final chunk's timings.draft_n / draft_n_accepted) and not tuned to.
#
# Env: SPEC_LLAMA_MODEL (bench/out/30b52-q4km.gguf; the 4-layer file works for trying it)
#      SPEC_LLAMA_DRAFT (bench/out/dflash30-q4km.gguf, written on first use: make-model
#      --preset dflash-30b-shape --type Q4_K_M, 1.5 GB)  SPEC_LLAMA_PAIRS (2)  SPEC_LLAMA_N (32)
#      SPEC_LLAMA_OFF (0)  GLINT_BIN (build/glint)  LLAMA_BIN (bench/llama_build.sh's folder)
#      SPEC_LLAMA_RT (0; 1: both servers under SCHED_RR priority 50 and the client at 60, so that
#      other work on a shared machine cannot take their cores; needs root)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
MODEL="${SPEC_LLAMA_MODEL:-bench/out/30b52-q4km.gguf}"
DRAFT="${SPEC_LLAMA_DRAFT:-bench/out/dflash30-q4km.gguf}"
PAIRS="${SPEC_LLAMA_PAIRS:-2}" N="${SPEC_LLAMA_N:-32}" OFF="${SPEC_LLAMA_OFF:-0}"
THREADS=2 OUT=bench/out
srv_prio=() cli_prio=()
[ "${SPEC_LLAMA_RT:-0}" = 1 ] && srv_prio=(chrt -r 50) cli_prio=(chrt -r 60)
. bench/lib.sh
[ -x "$GLINT_BIN" ] || { echo "spec_llama: $GLINT_BIN not built" >&2; exit 1; }
[ -s "$MODEL" ] || { echo "spec_llama: $MODEL missing (bench/full-model.sh says how to write it)" >&2; exit 1; }
mkdir -p "$OUT"
if [ ! -s "$DRAFT" ]; then
    "$GLINT_BIN" make-model --preset dflash-30b-shape --type Q4_K_M --out "$DRAFT.tmp" >&2
    mv "$DRAFT.tmp" "$DRAFT"
fi
[ -n "${LLAMA_BIN:-}" ] || LLAMA_BIN="$(bash bench/llama_build.sh | tail -1)"
trap bl_stop_server EXIT

# client PORT: one warm-up, then the timed stream; prints "t/s drafted accepted".
client() {
    "${cli_prio[@]}" /usr/bin/python3 - "$1" "$N" <<'EOF'
import http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
prompt = ("The quarterly report lists revenue, costs and the names of the three regional "
          "managers, followed by a table of shipments for each warehouse and month.")
def post(body, stream):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"spec_llama: HTTP {r.status}: {r.read()[:300]!r}")
    return c, r
body = {"prompt": prompt, "max_tokens": 2, "temperature": 0, "ignore_eos": True}
c, r = post(body, False); r.read(); c.close()
body.update(max_tokens=n, stream=True)
c, r = post(body, True)
first = last = None
timings = {}
for raw in r:
    line = raw.decode().strip()
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    ev = json.loads(line[6:])
    if any(ch.get("text") for ch in ev.get("choices", [])):
        last = time.monotonic()
        first = first or last
    timings = ev.get("timings", timings)
c.close()
print(f"{(n - 1) / (last - first):.4f} {timings.get('draft_n', '-')} {timings.get('draft_n_accepted', '-')}")
EOF
}

wait_health() { # PORT
    for _ in $(seq 3600); do
        curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
        kill -0 "$bl_srv_pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

run_glint() { # spec|off -> prints "t/s drafted accepted"
    local port log="$OUT/spec_llama_glint.log" spec=()
    port="$(bl_free_port)"
    [ "$1" = spec ] && spec=(--speculative-config \
        "{\"method\":\"dflash\",\"model\":\"$DRAFT\",\"num_speculative_tokens\":15}")
    "${srv_prio[@]}" "$GLINT_BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$port" --threads "$THREADS" \
        --max-num-seqs 1 --kv-cache-dtype f16 --max-model-len 512 --deep-health-interval 0 \
        "${spec[@]}" >"$log" 2>&1 &
    bl_srv_pid=$!
    wait_health "$port" || { cat "$log" >&2; exit 1; }
    local r drafted accepted
    r="$(client "$port")"
    drafted="$(curl -s "http://127.0.0.1:$port/metrics" | sed -nE 's/^vllm:spec_decode_num_draft_tokens_total(\{[^}]*\})? ([0-9.e+]+)$/\2/p' | head -1)"
    accepted="$(curl -s "http://127.0.0.1:$port/metrics" | sed -nE 's/^vllm:spec_decode_num_accepted_tokens_total(\{[^}]*\})? ([0-9.e+]+)$/\2/p' | head -1)"
    bl_stop_server
    echo "${r%% *} ${drafted:--} ${accepted:--}"
}

run_llama() { # spec|off
    local port log="$OUT/spec_llama_llama.log" spec=()
    port="$(bl_free_port)"
    [ "$1" = spec ] && spec=(-md "$DRAFT" --spec-type draft-dflash --spec-draft-n-max 15)
    "${srv_prio[@]}" "$LLAMA_BIN/llama-server" -m "$MODEL" --host 127.0.0.1 --port "$port" -t "$THREADS" \
        -tb "$THREADS" -np 1 -c 512 -fa on --no-webui "${spec[@]}" >"$log" 2>&1 &
    bl_srv_pid=$!
    wait_health "$port" || { cat "$log" >&2; exit 1; }
    client "$port"
    bl_stop_server
}

modes=(spec)
[ "$OFF" = 1 ] && modes+=(off)
echo "spec_llama: $MODEL + $DRAFT, N $N, $PAIRS pair(s), load $(bl_load1)"
gl_all=() ll_all=()
for k in $(seq "$PAIRS"); do
    for m in "${modes[@]}"; do
        g="$(run_glint "$m")"
        l="$(run_llama "$m")"
        echo "pair $k $m: glint $g | llama.cpp $l (each: decode t/s, draft tokens, accepted) load $(bl_load1)"
        echo "{\"test\": \"spec_llama\", \"pair\": $k, \"mode\": \"$m\", \"glint_tps\": ${g%% *}, \"llama_tps\": ${l%% *}, \"ratio\": $(awk -v a="${g%% *}" -v b="${l%% *}" 'BEGIN{printf "%.3f", a/b}')}"
        [ "$m" = spec ] && gl_all+=("${g%% *}") && ll_all+=("${l%% *}")
    done
done
awk -v g="${gl_all[*]}" -v l="${ll_all[*]}" 'BEGIN{n=split(g,a," "); split(l,b," ");
    for(i=1;i<=n;i++){sa+=a[i]; sb+=b[i]}
    printf "spec_llama: DFlash on, mean decode t/s glint %.3f, llama.cpp %.3f, ratio %.2fx\n", sa/n, sb/n, sa/sb}'
