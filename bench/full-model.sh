#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# full-model.sh: the 52-layer rows of docs/PERFORMANCE.md, glint vs llama.cpp interleaved
# (pair k: glint, then llama.cpp), on a 52-layer 30b-shape Q4_K_M written beforehand by
#   build/glint make-model --preset 30b-shape --type Q4_K_M --out bench/out/30b52-q4km.gguf
# (~17 GB: check `df -h bench/out` first; this script never writes it). Per pair and side:
#   1. pp512 + tg128, default flags but 2 threads on both (`glint bench -r 1`, `llama-bench -r 1
#      -t 2`), under /usr/bin/time -v: t/s and the peak RSS ("Maximum resident set size"; glint's
#      RSS counts the touched mmap pages of the file, llama.cpp's counts its mapped pages plus the
#      anonymous copy it repacks Q4_K into).
#   2. cold start to first token through the server: the file's pages are evicted from the page
#      cache (FULL_COLD=fadvise, default: posix_fadvise DONTNEED on this one file, checked with
#      fincore; =drop_caches: `echo 3 > /proc/sys/vm/drop_caches`, whole machine, needs root;
#      =none: warm), the server is launched on a fixed loopback port, the client polls /health
#      every 50 ms and, once it answers 200, streams a 16-token prompt with max_tokens 1;
#      TTFT = first streamed token - launch (load + first prefill + first token).
# Replaces the dated full-model section of docs/PERFORMANCE.md (bench/report.py --full).
# Env: FULL_MODEL (bench/out/30b52-q4km.gguf; the 4-layer file works for testing)
#      FULL_PAIRS (5)  FULL_THREADS (2)  FULL_P (512)  FULL_N (128)  FULL_COLD (fadvise)
#      FULL_GROUPS ("bench ttft")  GLINT_BIN (build/glint)  LLAMA_BIN  BENCH_DOC (docs/PERFORMANCE.md)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
GLINT_BIN="${GLINT_BIN:-build/glint}"
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
MODEL="${FULL_MODEL:-bench/out/30b52-q4km.gguf}"
PAIRS="${FULL_PAIRS:-5}" THREADS="${FULL_THREADS:-2}" P="${FULL_P:-512}" N="${FULL_N:-128}"
COLD="${FULL_COLD:-fadvise}" FGROUPS="${FULL_GROUPS:-bench ttft}"
DOC="${BENCH_DOC:-docs/PERFORMANCE.md}"
[ -x "$GLINT_BIN" ] || { echo "full-model: $GLINT_BIN not built"; exit 1; }
if [ ! -s "$MODEL" ]; then
    echo "full-model: $MODEL does not exist. Write it first (~17 GB, long):" >&2
    echo "  df -h bench/out && $GLINT_BIN make-model --preset 30b-shape --type Q4_K_M --out $MODEL" >&2
    exit 1
fi
[ -n "${LLAMA_BIN:-}" ] || LLAMA_BIN="$(bash bench/llama_build.sh | tail -1)"
OUT=bench/out
mkdir -p "$OUT"
if [ ! -x "$OUT/bw" ] || [ bench/bw.c -nt "$OUT/bw" ]; then
    gcc -O2 -march=native -fopenmp -o "$OUT/bw" bench/bw.c
fi
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
RUN="$OUT/full-$stamp"
mkdir -p "$RUN"
log="$RUN/full.log"
trap 'bl_stop_server' EXIT
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$log" >&2; }

evict() { # drop MODEL's pages from the page cache; prints the resident share afterwards
    case "$COLD" in
    fadvise) /usr/bin/python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)' "$MODEL" ;;
    drop_caches) sync && echo 3 >/proc/sys/vm/drop_caches ;;
    none) ;;
    *) echo "full-model: FULL_COLD must be fadvise, drop_caches or none" >&2; exit 1 ;;
    esac
    fincore -b -n -o RES "$MODEL" 2>/dev/null | awk -v s="$(stat -c %s "$MODEL")" '{printf "%.3f", $1 / s}' || echo "null"
}
case "$COLD" in
fadvise) cold_desc="the model file's pages evicted before each server launch (posix_fadvise DONTNEED on the file; other files stay cached)" ;;
drop_caches) cold_desc="echo 3 > /proc/sys/vm/drop_caches before each server launch" ;;
*) cold_desc="none: warm page cache (FULL_COLD=none)" ;;
esac

/usr/bin/python3 - "$RUN/meta.json" <<EOF
import json, os, sys
json.dump({"stamp": "$stamp", "date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "model": "$MODEL",
           "file_gb": os.path.getsize("$MODEL") / 1e9, "pairs": $PAIRS, "threads": $THREADS,
           "p": $P, "n": $N, "cold": "$cold_desc",
           "glint_commit": "$(bl_glint_commit)", "glint_flags": """$(bl_glint_flags)""",
           "llama_build_info": open("$LLAMA_BIN/build-info.txt").read()}, open(sys.argv[1], "w"), indent=1)
EOF
say "full-model $stamp: $MODEL, $PAIRS pairs, groups: $FGROUPS, cold: $COLD; free disk: $(df -h --output=avail "$OUT" | tail -1)"
bl_probe >>"$RUN/probes.jsonl"

rss_gib() { sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+).*/\1/p' "$1" | awk '{printf "%.3f", $1 / 1048576}'; }

side_run() { # SIDE K -> $RUN/pK-SIDE.json {pp, tg, rss_gib, ttft_s, ready_s, resident_before}
    local s="$1" k="$2" f="$RUN/p$2-$1"
    local pp=null tg=null rss=null ttft=null ready=null res=null
    if [[ " $FGROUPS " == *" bench "* ]]; then
        say "pair $k/$PAIRS: $s pp$P/tg$N (load $(bl_load1))"
        if [ "$s" = glint ]; then
            /usr/bin/time -v -o "$f.time" "$GLINT_BIN" bench --model "$MODEL" -p "$P" -n "$N" \
                -t "$THREADS" -r 1 --json >"$f.bench.json" 2>>"$log"
        else
            /usr/bin/time -v -o "$f.time" "$LLAMA_BIN/llama-bench" -m "$MODEL" -p "$P" -n "$N" \
                -t "$THREADS" -r 1 -o json >"$f.bench.json" 2>>"$log"
        fi
        read -r pp tg < <(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
pp = [x["avg_ts"] for x in d if x["n_prompt"] > 0 and x["n_gen"] == 0]
tg = [x["avg_ts"] for x in d if x["n_gen"] > 0 and x["n_prompt"] == 0]
print(pp[0] if pp else "null", tg[0] if tg else "null")' "$f.bench.json")
        rss="$(rss_gib "$f.time")"
    fi
    if [[ " $FGROUPS " == *" ttft "* ]]; then
        local port launch
        port="$(bl_free_port)"
        res="$(evict)"
        say "pair $k/$PAIRS: $s cold start (resident before launch: $res of the file)"
        launch="$(date +%s%3N)"
        if [ "$s" = glint ]; then
            bl_start_glint "$f.server.log" 1 512 "$port"
        else
            bl_start_llama "$f.server.log" 1 512 "$port" nowait
        fi
        node bench/serve_client.mjs --ttft --url "http://127.0.0.1:$port" --side "$s" \
            --launch-ms "$launch" >"$f.ttft.json"
        bl_stop_server
        read -r ttft ready < <(/usr/bin/python3 -c '
import json, sys; d = json.load(open(sys.argv[1])); print(d["ttft_s"], d["ready_s"])' "$f.ttft.json")
    fi
    echo "{\"pp\": $pp, \"tg\": $tg, \"rss_gib\": ${rss:-null}, \"ttft_s\": $ttft, \"ready_s\": $ready, \"resident_before\": $res}" >"$f.json"
    say "pair $k/$PAIRS: $s $(cat "$f.json")"
}

for k in $(seq 1 "$PAIRS"); do
    side_run glint "$k"
    side_run llama "$k"
    bl_probe >>"$RUN/probes.jsonl"
done
/usr/bin/python3 bench/report.py --full "$RUN" "$DOC"
say "wrote the full-model section of $DOC; raw: $RUN"
