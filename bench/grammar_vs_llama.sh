#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# glint's grammar engine against llama.cpp's on the same MaskBench dev subset, same run, same
# 202,048-token vocabulary, one thread pinned to core 0 each (one after the other).
#   glint:     glint grammar check --every N --cpu-time (every position's mask timed)
#   llama.cpp: its json_schema_to_grammar (common/json-schema-to-grammar.cpp, the C++ converter
#              llama-server uses; bench/llama_grammar/schema2gbnf.cpp) and its grammar sampler
#              (llama_sampler_init_grammar / _apply / _accept over llama.h's C API;
#              bench/llama_grammar/llama_grammar.c), walking the token ids glint walks.
# Both builds come from bench/llama_build.sh's llama.cpp tree (~/.cache/glint/llama.cpp-<commit>).
# Prints a markdown table; raw outputs under build/bench/grammar_vs_llama/.
#
# usage: bench/grammar_vs_llama.sh [--every N] [--mask-every M] [--budget-s S] [--hard-s S]
#   --every N       every N-th case file, both engines (default 10: ~900 schemas)
#   --mask-every M  llama.cpp: time the full 202k-candidate mask at 1/M of the positions
#                   (default 20; 1 = every position, hours at every 10). The verdicts are taken
#                   at every position (see llama_grammar.c).
#   --budget-s S    llama.cpp: stop timing a schema's masks after S s of mask time (default 10)
#   --hard-s S      llama.cpp: a schema whose walk runs past S s wall fails as "timeout" (60)
# env: GLINT_BIN (default build/glint), LLAMA_BIN (folder with libllama.so; default
#      bench/llama_build.sh's), GLINT_BENCH_OUT (default build/bench).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/oracle/lib.sh
. tests/oracle/grammar_lib.sh
EVERY=10 MASK_EVERY=20 BUDGET=10 HARD=60
while [ $# -gt 0 ]; do
    case "$1" in
    --every) EVERY="$2"; shift 2 ;;
    --mask-every) MASK_EVERY="$2"; shift 2 ;;
    --budget-s) BUDGET="$2"; shift 2 ;;
    --hard-s) HARD="$2"; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "grammar_vs_llama: unknown option $1" >&2; exit 2 ;;
    esac
done
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
[ -x "$GLINT_BIN" ] || { echo "grammar_vs_llama: $GLINT_BIN not built" >&2; exit 1; }
LLAMA_BIN="${LLAMA_BIN:-$(bash bench/llama_build.sh | tail -1)}"
[ -f "$LLAMA_BIN/libllama.so" ] || { echo "grammar_vs_llama: no libllama.so in $LLAMA_BIN" >&2; exit 1; }
LLAMA_SRC="$(sed -n 's/^source: //p' "$LLAMA_BIN/build-info.txt")"
LLAMA_COMMIT="$(sed -n 's/^commit: //p' "$LLAMA_BIN/build-info.txt")"
[ -f "$LLAMA_SRC/include/llama.h" ] || { echo "grammar_vs_llama: no llama.h under $LLAMA_SRC" >&2; exit 1; }
[ -f "$LLAMA_BIN/libllama-common.so" ] ||
    { echo "grammar_vs_llama: no libllama-common.so in $LLAMA_BIN (json_schema_to_grammar)" >&2; exit 1; }

OUT="${GLINT_BENCH_OUT:-$GL_REPO_ROOT/build/bench}/grammar_vs_llama"
TOOLS="$OUT/tools"
RUN="$OUT/every$EVERY"
mkdir -p "$TOOLS" "$RUN"
RANKS="$(gl_grammar_ranks)"
MB="$(gl_grammar_extract maskbench-dev)/maskbench"

# The two llama.cpp-side tools, against this llama.cpp build (rebuilt when a source changes).
H=bench/llama_grammar
if [ ! -x "$TOOLS/schema2gbnf" ] || [ "$H/schema2gbnf.cpp" -nt "$TOOLS/schema2gbnf" ] ||
    [ "$LLAMA_BIN/build-info.txt" -nt "$TOOLS/schema2gbnf" ]; then
    g++ -std=c++17 -O2 -I"$LLAMA_SRC/common" -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
        "$H/schema2gbnf.cpp" -o "$TOOLS/schema2gbnf" \
        -L"$LLAMA_BIN" -lllama-common -lllama -Wl,-rpath,"$LLAMA_BIN"
fi
if [ ! -x "$TOOLS/llama_grammar" ] || [ "$H/llama_grammar.c" -nt "$TOOLS/llama_grammar" ] ||
    [ "$LLAMA_BIN/build-info.txt" -nt "$TOOLS/llama_grammar" ]; then
    gcc -std=c11 -O2 -Wall -Wextra -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
        "$H/llama_grammar.c" -o "$TOOLS/llama_grammar" \
        -L"$LLAMA_BIN" -lllama -lggml-base -lm -Wl,-rpath,"$LLAMA_BIN"
fi
# The vocabulary for llama.cpp: a metadata-only Muse Glimmer GGUF with the same ranks file.
[ -s "$TOOLS/vocab.gguf" ] ||
    "$GLINT_BIN" make-model --preset tiny --vocab-only --vocab "$RANKS" --out "$TOOLS/vocab.gguf" >&2

GLINT_REV="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty')"
STAMP="$(date -u '+%Y-%m-%d %H:%M UTC')"
echo "glint $GLINT_REV vs llama.cpp ${LLAMA_COMMIT:0:10}, $STAMP, MaskBench dev every $EVERY," \
    "$(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)" >&2

# Inputs for the harness: the subset, llama.cpp's grammars, glint's serialization and token ids.
/usr/bin/python3 "$H/prep.py" "$GLINT_BIN" "$RANKS" "$TOOLS/schema2gbnf" "$MB" "$EVERY" "$RUN" >&2

# glint, single thread on core 0, thread CPU time.
t0=$(date +%s)
grc=0
taskset -c 0 "$GLINT_BIN" grammar check --tokenizer "$RANKS" --cases "$MB" --every "$EVERY" \
    --json --cpu-time --per-file "$RUN/glint-per-file.jsonl" >"$RUN/glint.json" || grc=$?
echo "glint: $(( $(date +%s) - t0 )) s wall, exit $grc" >&2

# llama.cpp, single thread on core 0, thread CPU time; restarted after a timeout or crash.
t0=$(date +%s)
: >"$RUN/llama.jsonl"
rm -f "$RUN/llama-times.bin"
total=$(grep -c '^S ' "$RUN/cases.txt")
while :; do
    done_n=$(wc -l <"$RUN/llama.jsonl")
    [ "$done_n" -lt "$total" ] || break
    lrc=0
    taskset -c 0 "$TOOLS/llama_grammar" --vocab "$TOOLS/vocab.gguf" --cases "$RUN/cases.txt" \
        --skip "$done_n" --mask-every "$MASK_EVERY" --budget-s "$BUDGET" --hard-s "$HARD" \
        --times "$RUN/llama-times.bin" >>"$RUN/llama.jsonl" 2>>"$RUN/llama.stderr" || lrc=$?
    if [ "$lrc" -ne 0 ] && [ "$lrc" -ne 3 ]; then
        echo "grammar_vs_llama: harness exit $lrc" >&2
        exit 1
    fi
    [ "$(wc -l <"$RUN/llama.jsonl")" -gt "$done_n" ] || { echo "grammar_vs_llama: harness made no progress" >&2; exit 1; }
done
echo "llama.cpp: $(( $(date +%s) - t0 )) s wall" >&2

/usr/bin/python3 - "$RUN" "$GLINT_REV" "${LLAMA_COMMIT:0:10}" "$STAMP" "$EVERY" "$MASK_EVERY" "$BUDGET" "$HARD" <<'PY'
import json, math, struct, sys
run, grev, lrev, stamp, every, mevery, budget, hard = sys.argv[1:9]
g = json.load(open(run + "/glint.json"))
L = [json.loads(l) for l in open(run + "/llama.jsonl")]
conv = {c["file"]: c for c in map(json.loads, open(run + "/convert.jsonl"))}
raw = open(run + "/llama-times.bin", "rb").read()
t = sorted(struct.unpack("%dd" % (len(raw) // 8), raw))

def pct(v, p):  # nearest rank, as glint's checker
    if not v:
        return 0.0
    i = max(0, math.ceil(p * len(v)) - 1)
    return v[min(i, len(v) - 1)]

n = len(L)
comp = [x for x in L if x["status"] != "not_compiled"]
lm = {"mean": sum(t) / len(t) if t else 0, "p50": pct(t, .5), "p99": pct(t, .99), "max": t[-1] if t else 0}
gm = g["mask_us"]
ltests = sum(x["tests"] for x in comp)
def pc(k, tot):
    return "%d (%.1f%%)" % (k, 100.0 * k / max(1, tot))
rows = [
    ("schemas", "%d" % g["schemas_total"], "%d" % n),
    ("compiled", pc(g["schemas_compiled"], g["schemas_total"]), pc(len(comp), n)),
    ("passing (every instance right)", pc(g["schemas_passing"], g["schemas_total"]),
     pc(sum(x["passing"] for x in L), n)),
    ("instances walked (of compiled schemas)", "%d" % (g["instances"]), "%d" % ltests),
    ("valid instances rejected", "%d" % g["valid_rejected"], "%d" % sum(x["valid_rejected"] for x in L)),
    ("invalid instances accepted", "%d" % g["invalid_accepted"], "%d" % sum(x["invalid_accepted"] for x in L)),
    ("masks timed", "%d (every position)" % g["masks"], "%d (1/%s of positions)" % (len(t), mevery)),
    ("mask µs mean", "%.1f" % gm["mean"], "%.1f" % lm["mean"]),
    ("mask µs p50", "%.1f" % gm["p50"], "%.1f" % lm["p50"]),
    ("mask µs p99", "%.1f" % gm["p99"], "%.1f" % lm["p99"]),
    ("mask µs max", "%.1f" % gm["max"], "%.1f" % lm["max"]),
    ("commit", grev, lrev),
]
gp = {json.loads(l)["file"]: json.loads(l) for l in open(run + "/glint-per-file.jsonl")}
bp = [x for x in L if x["passing"] and gp.get(x["file"], {}).get("passing")]
gs, gn = sum(gp[x["file"]].get("mask_us_sum", 0) for x in bp), sum(gp[x["file"]].get("masks", 0) for x in bp)
ls, ln = sum(x["mask_us_sum"] for x in bp), sum(x["masks"] for x in bp)
rows.insert(-1, ("mask µs mean, the %d schemas both pass" % len(bp),
                 "%.1f" % (gs / max(1, gn)), "%.1f" % (ls / max(1, ln))))
print("MaskBench dev, every %s-th case file, %s; one thread on core 0 each, thread CPU time;"
      " real 202,048-token vocabulary.\n" % (every, stamp))
print("| | glint | llama.cpp |\n|---|---:|---:|")
for a, b, c in rows:
    print("| %s | %s | %s |" % (a, b, c))
ratio = lm["mean"] / gm["mean"] if gm["mean"] else float("inf")
print("\nmean mask: glint %.0fx faster (p50 %.0fx, p99 %.0fx)" % (
    ratio, lm["p50"] / max(gm["p50"], 1e-9), lm["p99"] / max(gm["p99"], 1e-9)))
both = sum(1 for x in L if x["status"] != "not_compiled")
widened = sum(1 for c in conv.values() if c["convert"] == "warn")
print("\nllama.cpp side: %d converter failures, %d grammar-parse failures, %d schemas converted"
      " with a widening warning; %d timeout (> %s s wall), %d crash; %d schemas hit the %s s"
      " mask-timing budget; %d timed masks allow a non-EOG control token; %d instances that"
      " llama_tokenize would split differently; %d full-mask vs single-candidate disagreements."
      % (sum(1 for c in conv.values() if c["convert"] == "err"),
         sum(1 for x in L if x["status"] == "not_compiled" and x["reason"].startswith("grammar:")),
         widened, sum(1 for x in L if x["status"] == "timeout"), hard,
         sum(1 for x in L if x["status"] == "crash"), sum(1 for x in L if x["budget_hit"]), budget,
         sum(x["ctrl_leak_masks"] for x in L), sum(x["tok_mismatch"] for x in L),
         sum(x["full_vs_single"] for x in L)))
print("glint side: %d contract errors, compile ms p50 %.3f / p99 %.3f." % (
    g["errors"], g["compile_ms"]["p50"], g["compile_ms"]["p99"]))
lp = {x["file"]: x["passing"] for x in L}
a = sum(1 for f in lp if lp[f] and gp.get(f, {}).get("passing"))
print("per schema: both pass %d, only glint %d, only llama.cpp %d, neither %d." % (
    a, sum(1 for f in lp if not lp[f] and gp.get(f, {}).get("passing")),
    sum(1 for f in lp if lp[f] and not gp.get(f, {}).get("passing")),
    sum(1 for f in lp if not lp[f] and not gp.get(f, {}).get("passing"))))
PY
echo "raw: $RUN/{glint.json,glint-per-file.jsonl,llama.jsonl,llama-times.bin,convert.jsonl,cases.txt}" >&2
