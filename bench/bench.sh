#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench.sh (`make bench`): glint vs llama.cpp's own tools (llama-bench, llama-batched-bench,
# llama-server, built natively by bench/llama_build.sh) on the 30b-shape 4-layer Q4_K_M file,
# every figure an interleaved A/B ratio: for pair k = 1..PAIRS, each group runs glint, then
# llama.cpp, back to back; the memory-bandwidth probe (bench/bw.c) runs before the first pair,
# after every pair and at the end. Writes docs/PERFORMANCE.md (table: median and min-max of the
# per-pair ratios), docs/perf-batch.png and docs/perf-mask.png (bench/report.py). Raw output of
# every run stays in bench/out/run-<stamp>/. Rows and what exactly they time: bench/README.md.
#
# Env: GLINT_BIN (build/glint)  BENCH_MODEL (bench/out/30b4-q4km.gguf, written on first use)
#      BENCH_PAIRS (5)  BENCH_THREADS (2)  BENCH_P (512)  BENCH_N (128)  BENCH_P1 (128: pp at 1
#      thread)  BENCH_DEPTH (2048)  BENCH_BATCHES (1,8,16)  BENCH_BATCH_NPP (128)  BENCH_BATCH_NTG (32)
#      BENCH_SERVE_MAX_TOKENS (384: every value of bench/schema10.json is bounded, so a document
#      completes within it, escaped spellings included)  BENCH_SERVE_FREE_TOKENS (64)  BENCH_SERVE_CONC (8)
#      BENCH_GROUPS ("pp2 pp1 depth batch serve": the pair groups to run, a subset for tests)
#      BENCH_MASK_EVERY (40: every K-th MaskBench file timed for the mask chart; 0 = skip)
#      BENCH_DOC (docs/PERFORMANCE.md; "-" = print to stdout, no charts)  LLAMA_BIN (built
#      or found by bench/llama_build.sh when unset)
# The defaults (5 pairs) took 38 min here (bench/README.md "Run time": llama.cpp's side alone is
# ~24 min of it); the issue's sizes: BENCH_DEPTH=4096 BENCH_BATCH_NTG=128 BENCH_P1=512 (~15 min a pair).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
GLINT_BIN="${GLINT_BIN:-build/glint}"
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
MODEL="${BENCH_MODEL:-bench/out/30b4-q4km.gguf}"
PAIRS="${BENCH_PAIRS:-5}" THREADS="${BENCH_THREADS:-2}"
P="${BENCH_P:-512}" N="${BENCH_N:-128}" P1="${BENCH_P1:-128}" D="${BENCH_DEPTH:-2048}"
BATCHES="${BENCH_BATCHES:-1,8,16}" NPP="${BENCH_BATCH_NPP:-128}" NTG="${BENCH_BATCH_NTG:-32}"
SMAX="${BENCH_SERVE_MAX_TOKENS:-384}" SFREE="${BENCH_SERVE_FREE_TOKENS:-64}"
SCONC="${BENCH_SERVE_CONC:-8}"
BGROUPS="${BENCH_GROUPS:-pp2 pp1 depth batch serve}"
MASK_EVERY="${BENCH_MASK_EVERY:-40}"
DOC="${BENCH_DOC:-docs/PERFORMANCE.md}"
[ -x "$GLINT_BIN" ] || { echo "bench: $GLINT_BIN not built (make build)"; exit 1; }
[ "$PAIRS" -ge 1 ] || { echo "bench: BENCH_PAIRS must be >= 1"; exit 1; }
if [ -z "${LLAMA_BIN:-}" ]; then
    LLAMA_BIN="$(bash bench/llama_build.sh | tail -1)"
fi
for t in llama-bench llama-batched-bench llama-server; do
    [ -x "$LLAMA_BIN/$t" ] || { echo "bench: $LLAMA_BIN/$t missing (bash bench/llama_build.sh)"; exit 1; }
done
OUT=bench/out
mkdir -p "$OUT"
bl_ensure_model "$MODEL"
if [ ! -x "$OUT/bw" ] || [ bench/bw.c -nt "$OUT/bw" ]; then
    gcc -O2 -march=native -fopenmp -o "$OUT/bw" bench/bw.c
fi
# The int8 peak probe is vpdpbusd zmm: on a CPU without AVX-512 VNNI (an AVX2 machine) it is not
# built, its readings stay empty and the report prints "-" for the peak.
HAVE_VNNI=0
grep -qw avx512_vnni /proc/cpuinfo && HAVE_VNNI=1
if [ "$HAVE_VNNI" = 1 ] && { [ ! -x "$OUT/vnni_peak" ] || [ bench/vnni_peak.c -nt "$OUT/vnni_peak" ]; }; then
    gcc -std=c11 -O2 -march=native -fopenmp -o "$OUT/vnni_peak" bench/vnni_peak.c
fi
vnni_probe() {
    if [ "$HAVE_VNNI" = 1 ]; then "$OUT/vnni_peak" 1 2; fi
}

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
RUN="$OUT/run-$stamp"
mkdir -p "$RUN"
log="$RUN/bench.log"
t_start=$(date +%s)
trap 'bl_stop_server' EXIT
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$log" >&2; }

# ---- what is measured with what ----
"$GLINT_BIN" inspect --json "$MODEL" 2>/dev/null >"$RUN/inspect.json"
/usr/bin/python3 - "$RUN/meta.json" <<EOF
import json, sys
json.dump({"stamp": "$stamp", "date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "model": "$MODEL",
           "pairs": $PAIRS, "threads": $THREADS, "p": $P, "n": $N, "p1": $P1, "depth": $D,
           "batches": "$BATCHES", "npp": $NPP, "ntg": $NTG, "serve_max_tokens": $SMAX, "serve_free_tokens": $SFREE,
           "serve_conc": $SCONC, "groups": "$BGROUPS".split(),
           "glint_commit": "$(bl_glint_commit)", "glint_flags": """$(bl_glint_flags)""",
           "glint_bin": "$GLINT_BIN", "llama_bin": "$LLAMA_BIN",
           "llama_build_info": open("$LLAMA_BIN/build-info.txt").read(),
           "cpu": """$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')""",
           "nproc": $(nproc), "mem_gib": round($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 2**20, 1),
           "kernel": "$(uname -r)"}, open(sys.argv[1], "w"), indent=1)
EOF
say "bench $stamp: $MODEL, $PAIRS pairs, groups: $BGROUPS; glint $(bl_glint_commit), llama.cpp $LLAMA_BIN"

say "vnni peak (1 and 2 threads)$([ "$HAVE_VNNI" = 1 ] || echo ': no AVX-512 VNNI here, skipped')"
vnni_probe >"$RUN/vnni.jsonl"
bl_probe >>"$RUN/probes.jsonl"

# One group, one side, pair k. Every command's stdout is the raw result file.
run_group() { # GROUP SIDE K
    local g="$1" s="$2" k="$3" f="$RUN/p$3-$1-$2" thr="$THREADS" p="$P"
    [ "$g" = pp1 ] && thr=1 p="$P1"
    say "pair $k/$PAIRS $g: $s (load $(bl_load1))"
    echo "{\"pair\": $k, \"group\": \"$g\", \"side\": \"$s\", \"load\": $(bl_load1), \"t0\": $(date +%s)}" >"$f.meta"
    case "$g/$s" in
    pp2/glint | pp1/glint) # pp2: BENCH_THREADS threads, pp1: 1 thread
        "$GLINT_BIN" bench --model "$MODEL" -p "$p" -n "$N" -t "$thr" -r 1 --json >"$f.json" 2>>"$log" ;;
    pp2/llama | pp1/llama)
        "$LLAMA_BIN/llama-bench" -m "$MODEL" -p "$p" -n "$N" -t "$thr" -r 1 -o json >"$f.json" 2>>"$log" ;;
    depth/glint)
        "$GLINT_BIN" bench --model "$MODEL" -p "$P" -n 0 -d "$D" -t "$THREADS" -r 1 --json >"$f.json" 2>>"$log" ;;
    depth/llama)
        "$LLAMA_BIN/llama-bench" -m "$MODEL" -p "$P" -n 0 -d "$D" -t "$THREADS" -r 1 -o json >"$f.json" 2>>"$log" ;;
    batch/glint)
        "$GLINT_BIN" bench --model "$MODEL" --batch "$BATCHES" -n "$NTG" -t "$THREADS" >"$f.txt" 2>>"$log" ;;
    batch/llama)
        local maxb ctx
        maxb="$(echo "$BATCHES" | tr ',' '\n' | sort -n | tail -1)"
        ctx=$((maxb * (NPP + NTG) + 16))
        "$LLAMA_BIN/llama-batched-bench" -m "$MODEL" -c "$ctx" -b 2048 -ub 512 -npp "$NPP" \
            -ntg "$NTG" -npl "$BATCHES" -pps -t "$THREADS" -tb "$THREADS" \
            --output-format jsonl >"$f.txt" 2>>"$log" ;;
    serve/glint)
        bl_start_glint "$f.server.log" "$SCONC" $((SMAX + 64))
        serve_runs "$s" constrained free >"$f.jsonl"
        bl_stop_server ;;
    serve/llama)
        bl_start_llama "$f.server.log" "$SCONC" $((SCONC * (SMAX + 64)))
        serve_runs "$s" constrained >"$f.jsonl"
        bl_stop_server ;;
    esac
    echo "{\"t1\": $(date +%s)}" >>"$f.meta"
    [ -s "$f.json" ] || [ -s "$f.txt" ] || [ -s "$f.jsonl" ] # else: no result (caller says FAILED)
}

serve_runs() { # SIDE MODES...: constrained at concurrency 1 (1 request) and SCONC (SCONC
    # requests); free (no schema, SFREE tokens each) at SCONC only
    local s="$1" m
    shift
    for m in "$@"; do
        if [ "$m" = constrained ]; then
            serve_client "$s" "$m" 1 1 "$SMAX"
            serve_client "$s" "$m" "$SCONC" "$SCONC" "$SMAX"
        else
            serve_client "$s" "$m" "$SCONC" "$SCONC" "$SFREE"
        fi
    done
}

serve_client() { # SIDE MODE CONC REQUESTS MAX_TOKENS
    node bench/serve_client.mjs --url "http://127.0.0.1:$bl_port" --side "$1" --mode "$2" \
        --conc "$3" --requests "$4" --max-tokens "$5" --schema bench/schema10.json
}

for k in $(seq 1 "$PAIRS"); do
    for g in $BGROUPS; do
        # A failed command leaves its cell empty ("-") instead of ending a long run.
        run_group "$g" glint "$k" || { say "pair $k $g glint FAILED (log: $log)"; bl_stop_server; }
        run_group "$g" llama "$k" || { say "pair $k $g llama FAILED (log: $log)"; bl_stop_server; }
    done
    bl_probe >>"$RUN/probes.jsonl"
    say "pair $k done ($(( $(date +%s) - t_start )) s so far)"
done

# Mask-time distribution of the grammar engine: bench/microbench_mask over every MASK_EVERY-th
# MaskBench file (real 202k vocabulary, thread CPU time per mask), all times dumped.
if [ "$MASK_EVERY" -gt 0 ]; then
    mb="$(dirname "$GLINT_BIN")/microbench_mask"
    if [ -x "$mb" ]; then
        (
            . tests/oracle/lib.sh
            . tests/oracle/grammar_lib.sh
            ranks="$(gl_grammar_ranks)"
            dir="$(gl_grammar_extract maskbench-dev)/maskbench"
            mapfile -t files < <(find "$dir" -name '*.json' | sort | awk -v k="$MASK_EVERY" 'NR % k == 1')
            say "mask times: ${#files[@]} MaskBench files (every $MASK_EVERY-th)"
            taskset -c 0 "$mb" "$ranks" "${files[@]}" --dump "$RUN/mask_us.txt" >"$RUN/mask_summary.txt" 2>>"$log"
        ) || say "mask times: skipped (microbench_mask or MaskBench data unavailable)"
    else
        say "mask times: skipped ($mb not built)"
    fi
fi
vnni_probe >>"$RUN/vnni.jsonl" # again at the end: the report keeps the best reading
bl_probe >>"$RUN/probes.jsonl"
echo "$(( $(date +%s) - t_start ))" >"$RUN/wall_s"
say "measured in $(cat "$RUN/wall_s") s; writing $DOC"
/usr/bin/python3 bench/report.py "$RUN" "$DOC"
say "raw: $RUN"
