#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_mmproj_llama: llama.cpp's llama-mtmd-cli loads the mmproj that `glint convert
# --vision-out` writes (llama.cpp's layout plus glint's full temporal kernel), and 16 greedy
# tokens after an image agree with `glint run --image` on the same tiny F32 text GGUF and mmproj
# (make-model tiny preset, seed 1, converted by glint) for 12 images whose sides are multiples
# of 28 px (the grid needs no resize, so Pillow's and llama.cpp's Lanczos never run): 8 whose
# patch grid fits the tiny tower's 4 x 4 position table (4 sizes x 2 pictures), which must agree,
# and 4 larger ones, reported only: there the table is upsampled, and the arch doc (§6.3 step 2)
# says HF pads the bilinear taps with zeros; on 2026-12-04 3 of them split from llama.cpp after
# 0-9 tokens. Cause (check_mmproj_rows.sh): llama.cpp's table resize (ggml_interpolate bilinear)
# clamps the edge taps, so the border patches' position embedding differs; with glint's taps
# clamped by hand, 3/4 agree and the 4th splits later, its first 60 characters equal
# (llama-mtmd-cli rounds pixels, the patch kernel and K/V to F16: rows within ~5e-4 of glint's,
# a near tie). Both sides see
# BOS, the image block and "Describe": llama-mtmd-cli with a template that prints the message
# content only (--jinja --chat-template), glint with <|patch|>Describe
# (--special). Negative control: glint's tokens for image k against llama.cpp's for image k+1
# must differ somewhere. Skips (exit 0) when llama-mtmd-cli is not built (bench/llama_build.sh).
# Env: LLAMA_MTMD_CLI (default: llama-mtmd-cli in lib.sh's gl_llama_bin),
#      GLINT_BIN, GLINT_TEST_DIR.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$GL_REPO_ROOT"
PY=/usr/bin/python3
LBIN="$(gl_llama_bin)"
MTMD="${LLAMA_MTMD_CLI:-${LBIN:+$LBIN/llama-mtmd-cli}}"
if [ -z "$MTMD" ] || [ ! -x "$MTMD" ]; then
    echo "SKIP: check_mmproj_llama: llama-mtmd-cli is not built (bash bench/llama_build.sh)"
    exit 0
fi
DIR="$GLINT_TEST_DIR/mmproj-llama"
rm -rf "$DIR" && mkdir -p "$DIR"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

"$GLINT_BIN" make-model --preset tiny --type F32 --seed 1 --format safetensors --out "$DIR/hf" \
    >/dev/null 2>"$DIR/mk.log" || { echo "FAIL: make-model: $(tail -1 "$DIR/mk.log")"; exit 1; }
"$GLINT_BIN" convert "$DIR/hf" --out "$DIR/text.gguf" --type F32 --vision-out "$DIR/mmproj.gguf" \
    --vision-type F32 >/dev/null 2>"$DIR/cv.log" || { echo "FAIL: convert: $(tail -1 "$DIR/cv.log")"; exit 1; }
# 12 images, sides multiples of 28 px (1 x 1 to 6 x 5 merged cells, portrait and landscape).
"$PY" - "$DIR" <<'EOF' || { echo "FAIL: writing the images"; exit 1; }
import sys
from PIL import Image
sizes = [(28, 28), (56, 28), (28, 56), (56, 56)] * 2 + [(84, 140), (168, 112), (196, 56), (168, 168)]
for k, (w, h) in enumerate(sizes):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * (5 + k) + y * 3) % 256, (x * y + 17 * k) % 256, (255 - 2 * y + x * k) % 256)
                for y in range(h) for x in range(w)])
    im.save(f"{sys.argv[1]}/img{k:02d}.png")
EOF
TPL="{% for m in messages %}{{ m['content'] }}{% endfor %}"
for k in $(seq -w 0 11); do
    img="$DIR/img$k.png"
    "$MTMD" -m "$DIR/text.gguf" --mmproj "$DIR/mmproj.gguf" --image "$img" --jinja \
        --chat-template "$TPL" -p "Describe" -n 16 --temp 0 -t 2 >"$DIR/l$k.txt" 2>"$DIR/l$k.err" ||
        { fail "llama-mtmd-cli on img$k: $(tail -1 "$DIR/l$k.err")"; continue; }
    "$GLINT_BIN" run --model "$DIR/text.gguf" --mmproj "$DIR/mmproj.gguf" --image "$img" \
        --prompt "<|patch|>Describe" --special -n 16 --threads 2 >"$DIR/g$k.txt" 2>"$DIR/g$k.err" ||
        { fail "glint run on img$k: $(tail -1 "$DIR/g$k.err")"; continue; }
done
if msg=$("$PY" - "$DIR" 2>&1 <<'EOF'
import sys
d = sys.argv[1]
def text(p):  # the generated text, stripped of the blank lines the CLIs add around it
    return open(p, encoding="utf-8", errors="replace").read().strip()
same, big, lines = 0, 0, []
for k in range(12):
    l, g = text(f"{d}/l{k:02d}.txt"), text(f"{d}/g{k:02d}.txt")
    if l == g and l:
        same += k < 8
        big += k >= 8
    else:
        lines.append(f"{'FAIL' if k < 8 else 'note'}: img{k:02d}: llama {l[:50]!r} vs glint {g[:50]!r}")
ctl = sum(text(f"{d}/g{k:02d}.txt") != text(f"{d}/l{(k + 1) % 8:02d}.txt") for k in range(8))
print(f"{same}/8 images inside the position table: llama-mtmd-cli and glint run generate the same "
      f"16 greedy tokens; negative control (image k vs k+1): {ctl}/8 differ; larger images (table "
      f"upsampled, reported only): {big}/4 the same")
for x in lines:
    print(x)
sys.exit(0 if same == 8 and ctl > 0 else 1)
EOF
); then ok "$msg"; else fail "$msg"; fi
grep -h "image slice encoded\|batch encoding done" "$DIR"/l00.err 2>/dev/null | head -1 | sed 's/^/note: llama.cpp: /'
[ "$fails" -eq 0 ] && echo "check_mmproj_llama: all passed" || echo "check_mmproj_llama: $fails failure(s)"
[ "$fails" -eq 0 ]
