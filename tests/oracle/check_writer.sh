#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_writer: models from `glint make-model` against llama.cpp (node-llama-cpp 3.22.1).
#  1. tiny F32 / Q8_0 / Q4_K_M / Q5_K_M (seed 1, shared via lib.sh) load in llama.cpp, have healthy
#     logits over a 19-token prompt (longer than the 8-token window) and greedy text that moves
#     on, and the quantized files' logits track the F32 file's (same weights before quantization).
#  2. llama.cpp's ids for a fixed text equal `glint tokenize` on the same file.
#  3. The header-only 52-layer 30B Q4_K_M file opens in our reader (glint inspect) with 731
#     tensors, and llama.cpp accepts its tensor table and vocabulary (vocab-only load of a sparse
#     copy) with the same ids as the tiny model.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$HERE"
PY=/usr/bin/python3
TEXT="Hello, world!"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

f32=$(gl_tiny_model F32) && q8=$(gl_tiny_model Q8_0) && q4km=$(gl_tiny_model Q4_K_M) &&
    q5km=$(gl_tiny_model Q5_K_M) || { echo "FAIL: could not write the tiny models"; exit 1; }

# Minimum per-position correlation with the F32 logits (measured: Q8_0 0.994, Q5_K_M 0.92,
# Q4_K_M 0.76; random weights amplify quantization noise layer by layer).
out=$(node writer_check.mjs logits 20 "$f32" "$q8:0.98" "$q4km:0.6" "$q5km:0.8") ||
    fail "llama.cpp logits check (see above)"
echo "$out" | $PY -c '
import json, sys
for line in sys.stdin:
    o = json.loads(line)
    print("%-16s ok=%s std=%.2f p1=%.4f greedy_distinct=%d corr_min=%.3f argmax_agree=%d/%d ids=%s" % (
        o["model"].rsplit("/", 1)[-1], o["ok"], o["std_median"], o["p1_median"],
        o["greedy_distinct"], o["corr_min"], o["argmax_agree"], o["n_prompt"], o["ids"]))'

lcpp_ids=$(echo "$out" | head -n 1 | $PY -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))')
glint_ids=$("$GLINT_BIN" tokenize --model "$f32" --no-bos "$TEXT" 2>/dev/null)
if [ $? -ne 0 ]; then
    echo "SKIP: glint tokenize not available"
elif [ "$(echo $glint_ids)" != "$lcpp_ids" ]; then
    fail "tokenize '$TEXT': glint [$glint_ids] vs llama.cpp [$lcpp_ids]"
else
    echo "tokenize '$TEXT': glint = llama.cpp = [$lcpp_ids]"
fi

hdr="$GLINT_TEST_DIR/30b-shape-Q4_K_M-header.gguf"
"$GLINT_BIN" make-model --preset 30b-shape --type Q4_K_M --header-only --out "$hdr" 2>/dev/null ||
    fail "header-only 30b-shape write"
if ! info=$("$GLINT_BIN" inspect "$hdr" --allow-no-data 2>&1); then
    fail "glint inspect refused the header-only file: $(echo "$info" | tail -n 2)"
elif ! grep -q '^tensors: 731$' <<<"$info"; then
    fail "header-only file: expected 731 tensors: $(echo "$info" | grep '^tensors')"
else
    echo "header-only 30b-shape: opens in glint inspect, 731 tensors"
fi
# llama.cpp refuses tensor data past EOF even for a vocab-only load, so give it a sparse copy
# extended to the declared data end (no disk blocks): this also checks that every tensor's
# offset and size agree with llama.cpp's own size rules. Expected: 16,930,646,880 bytes.
end=$(echo "$info" | grep -o 'file=\[[0-9]*, [0-9]*)' | tail -n 1 | sed 's/.*, \([0-9]*\))/\1/')
sparse="$GLINT_TEST_DIR/30b-shape-header-sparse.$$.gguf"
if [ -n "$end" ] && cp "$hdr" "$sparse" && truncate -s "$end" "$sparse"; then
    hdr_ids=$(node writer_check.mjs vocab "$sparse" "$TEXT" 2>/dev/null |
        $PY -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))' 2>/dev/null)
    [ "$hdr_ids" = "$lcpp_ids" ] || fail "header-only 30B in llama.cpp (vocab-only): ids [$hdr_ids] vs tiny [$lcpp_ids]"
    [ "$hdr_ids" = "$lcpp_ids" ] && echo "header-only 30b-shape ($end bytes declared): llama.cpp vocab-only load, same ids"
else
    fail "could not make the sparse copy of $hdr (data end '$end')"
fi
rm -f "$sparse"

echo "check_writer: $fails failure(s)"
[ "$fails" = 0 ]
