#!/usr/bin/env bash
# vision_llama.sh: glint's vision encoder against llama.cpp's on the same mmproj file and the same
# image (issue 21's speed goals). One 30b-shape HF folder (the released tower: 50 blocks, hidden
# 1536, ffn 8960; the text part cut to 4 layers, since only the encoder is timed and llama.cpp
# asserts one sliding layer) is converted by `glint convert --vision-out` once per vision type;
# llama-mtmd-cli (built natively from the node-llama-cpp bundle by bench/llama_build.sh) loads
# that same file. Per type the two sides run
# interleaved A B A B on 2 threads, each a fresh process:
#   glint:     `glint image preprocess IMG --model text.gguf --mmproj F --rows` prints
#              "N rows encoded in X ms" (decode + resize + encode, after the model is open);
#   llama.cpp: `llama-mtmd-cli ... -n 1` prints "mtmd batch encoding done in X ms" (its encoder
#              alone). An image whose sides are multiples of 28 px is resized by neither side
#              (llama.cpp's limit for this projector is 4,096 merged tokens): the same 1,024 rows.
# Prints one line per run and a per-type summary (medians, ratio llama/glint).
# Usage: bench/vision_llama.sh [pairs=2]
# Env: VISION_TYPES (default "BF16 Q8_0"), VISION_SIDE (image side in px, default 896 = 64x64
#      patches), VISION_WORK (work folder, default /tmp/glint-vision-llama; ~11 GB), GLINT_BIN,
#      LLAMA_MTMD_CLI (default: llama-mtmd-cli in tests/oracle/lib.sh's gl_llama_bin).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS="${1:-2}"
TYPES="${VISION_TYPES:-BF16 Q8_0}"
SIDE="${VISION_SIDE:-896}"
W="${VISION_WORK:-/tmp/glint-vision-llama}"
GLINT="${GLINT_BIN:-build/glint}"
. tests/oracle/lib.sh
LBIN="$(gl_llama_bin 2>/dev/null || true)"
MTMD="${LLAMA_MTMD_CLI:-${LBIN:+$LBIN/llama-mtmd-cli}}"
[ -x "$GLINT" ] || { echo "vision_llama: no $GLINT (make build)"; exit 1; }
[ -n "$MTMD" ] && [ -x "$MTMD" ] || { echo "vision_llama: no llama-mtmd-cli (bash bench/llama_build.sh)"; exit 1; }
mkdir -p "$W"
if [ ! -f "$W/hf/config.json" ]; then
    echo "vision_llama: writing the 30b-shape folder (BF16, 4 text layers) to $W/hf" >&2
    "$GLINT" make-model --preset 30b-shape --format safetensors --layers 4 --out "$W/hf" >/dev/null
fi
[ -f "$W/text.gguf" ] || "$GLINT" convert "$W/hf" --out "$W/text.gguf" --type Q8_0 >/dev/null
for t in $TYPES; do
    [ -f "$W/mmproj-$t.gguf" ] && continue
    echo "vision_llama: converting the tower to $t" >&2
    "$GLINT" convert "$W/hf" --out "$W/scratch.gguf" --type Q8_0 --vision-out "$W/mmproj-$t.gguf" \
        --vision-type "$t" >/dev/null
    rm -f "$W/scratch.gguf"
done
/usr/bin/python3 - "$W/img.png" "$SIDE" <<'EOF'
import sys
from PIL import Image
s = int(sys.argv[2])
im = Image.new("RGB", (s, s))
im.putdata([((x * 7 + y * 3) % 256, (x * y) % 256, (255 - 2 * y + x) % 256)
            for y in range(s) for x in range(s)])
im.save(sys.argv[1])
EOF
TPL="{% for m in messages %}{{ m['content'] }}{% endfor %}"
run_side() { # side type -> "ms [rows]"
    local f="$W/mmproj-$2.gguf" log="$W/$1-$2.log"
    if [ "$1" = glint ]; then
        "$GLINT" image preprocess "$W/img.png" --model "$W/text.gguf" --mmproj "$f" \
            --rows "$W/rows.f32" >/dev/null 2>"$log" || { echo "fail fail"; return; }
        sed -nE 's/.* ([0-9]+) rows encoded in ([0-9]+) ms.*/\2 \1/p' "$log" | tail -1
    else
        "$MTMD" -m "$W/text.gguf" --mmproj "$f" --image "$W/img.png" --jinja --chat-template "$TPL" \
            -p "x" -n 1 --temp 0 -t 2 >/dev/null 2>"$log" || { echo "fail fail"; return; }
        local ms
        ms=$(sed -nE 's/.*(slice encoded|batch encoding done) in ([0-9]+) ms.*/\2/p' "$log" | tail -1)
        echo "${ms:-fail}"
    fi
}
for t in $TYPES; do
    G=() L=()
    for p in $(seq "$PAIRS"); do
        read -r gms gn < <(run_side glint "$t")
        echo "glint $t run=$p ${gms} ms ($gn rows)"
        read -r lms < <(run_side llama "$t")
        echo "llama $t run=$p ${lms} ms"
        G+=("$gms") L+=("$lms")
    done
    /usr/bin/python3 - "$t" "${G[*]}" "${L[*]}" <<'EOF'
import statistics, sys
t, g, l = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
try:
    gm, lm = statistics.median(map(float, g)), statistics.median(map(float, l))
    pairs = " ".join(f"{float(b) / float(a):.2f}" for a, b in zip(g, l))
    print(f"{t}: glint median {gm / 1e3:.1f} s, llama.cpp median {lm / 1e3:.1f} s, "
          f"llama/glint {lm / gm:.2f} (pairs: {pairs})")
except ValueError:
    print(f"{t}: a run failed (see the logs under the work folder)")
EOF
done
