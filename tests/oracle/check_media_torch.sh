#!/usr/bin/env bash
# Vision loading oracle (issue 12): a random tiny HF folder (glint make-model --format
# safetensors --preset tiny --type F32 --layers 2: vision hidden 64, 2 layers, 4x4 position table,
# adapter 128, text width 256), one generated 168x112 image (patch grid 8x12: 2x3 windows of 4x4,
# partial at the edges, wider than the table); glint's media/ path (decode, grid, resize,
# patchify, the tower bound from the folder) writes the soft-token rows; media_ref.py runs
# vision_ref.py's float64 encoder on glint's patches with the folder's tensors read by its own
# safetensors parser. Tolerance max|diff| <= 1e-5 * max|ref|. Negative controls: the same
# comparison with norm1/norm2 or q_proj/k_proj swapped must FAIL. Then a video clip through the
# same path (`glint video preprocess --model --rows`: three temporal groups of two different
# frames, each encoded on its own), against the reference per group; a control that feeds the
# reference each patch's first frame twice (a time-summed kernel) must FAIL. Last, the text tower
# fed those image rows (glint eval --image) against ref_forward.py (see the end).
# Env: GLINT_BUILD_DIR (default build), GLINT_TEST_DIR (default build/testdata).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${GLINT_BUILD_DIR:-$PWD/build}"
WORK="${GLINT_TEST_DIR:-$PWD/build/testdata}/media-torch"
GLINT="$BUILD/glint"
[ -x "$GLINT" ] || { echo "media torch: $GLINT not built"; exit 1; }
/usr/bin/python3 -c "import torch, numpy, PIL" ||
    { echo "media torch: /usr/bin/python3 lacks torch/numpy/PIL"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK"
"$GLINT" make-model --format safetensors --preset tiny --type F32 --layers 2 \
    --out "$WORK/hf" >/dev/null 2>&1
/usr/bin/python3 - "$WORK/img.png" <<'PY'
import sys
from PIL import Image
im = Image.new("RGB", (168, 112))
im.putdata([((x * 3 + y) % 256, (x * y) % 256, (255 - y * 2) % 256)
            for y in range(112) for x in range(168)])
im.save(sys.argv[1])
PY
geo=$("$GLINT" image preprocess "$WORK/img.png" --patches "$WORK/patches.f32" \
    --model "$WORK/hf" --rows "$WORK/rows.f32" 2>/dev/null)
read -r gh2 gw2 < <(echo "$geo" | /usr/bin/python3 -c \
    'import json,sys; g=json.load(sys.stdin)["grid_thw"]; print(g[1], g[2])')
status=0
/usr/bin/python3 tests/oracle/media_ref.py "$WORK/hf" "$WORK/patches.f32" "$WORK/rows.f32" \
    "$gh2" "$gw2" || status=1
for control in swap_norms swap_qk; do
    if out=$(/usr/bin/python3 tests/oracle/media_ref.py "$WORK/hf" "$WORK/patches.f32" \
        "$WORK/rows.f32" "$gh2" "$gw2" --control "$control"); then
        echo "not ok control $control: glint matched a wrong binding ($out)"
        status=1
    else
        echo "ok control $control: fails as it must (${out#*: })"
    fi
done
# Video (§6.5): a 3 s testsrc2 clip, 6 frames sampled at 2 fps, 3 temporal groups of a 4x6 patch
# grid whose two frames differ; each group encoded on its own. The "still" control (second
# temporal slab replaced by the first, what a time-summed patch kernel sees) must FAIL.
clip=tests/fuzz/corpus/video/testsrc2_96x64_25fps_3s.mp4
vgeo=$("$GLINT" video preprocess "$clip" --patches "$WORK/vpatches.f32" \
    --model "$WORK/hf" --rows "$WORK/vrows.f32" 2>/dev/null)
read -r vt vh2 vw2 < <(echo "$vgeo" | /usr/bin/python3 -c \
    'import json,sys; g=json.load(sys.stdin)["grid_thw"]; print(*g)')
/usr/bin/python3 tests/oracle/media_ref.py "$WORK/hf" "$WORK/vpatches.f32" "$WORK/vrows.f32" \
    "$vh2" "$vw2" --groups "$vt" || status=1
if out=$(/usr/bin/python3 tests/oracle/media_ref.py "$WORK/hf" "$WORK/vpatches.f32" \
    "$WORK/vrows.f32" "$vh2" "$vw2" --groups "$vt" --control still); then
    echo "not ok control still: glint's video rows match a time-summed patch kernel ($out)"
    status=1
else
    echo "ok control still: fails as it must (${out#*: })"
fi
# The text tower with image rows (§2.1 step 3, §6.4): the folder converted to a text GGUF plus
# glint's vision GGUF; `glint eval --image` expands one <|patch|> and runs the forward with the
# soft rows; ref_forward.py (float64 torch, its own GGUF reader) builds the expanded ids itself
# (<|image_start|> + N x <|patch|> + <|image_end|>, N from the grid), puts the rows glint's
# folder path wrote (checked above) in place of those N lookups, and compares every layer and
# the logits. Control: the same rows one position later must FAIL.
if "$GLINT" convert "$WORK/hf" --out "$WORK/text.gguf" --type F32 --vision-out "$WORK/vision.gguf" \
    --vision-type F32 >/dev/null 2>"$WORK/convert.log"; then
    n_img=$(( gh2 / 2 * (gw2 / 2) ))
    pre="200000 791 7290 315" post="13 578 4062 14198 39935 35308 927 220 17"
    soft=$(printf '200092 %.0s' $(seq "$n_img"))
    mkdir -p "$WORK/dump"
    if "$GLINT" eval --model "$WORK/text.gguf" --mmproj "$WORK/vision.gguf" \
        --prompt-ids "$pre 200092 $post" --image "$WORK/img.png" --dump-layers "$WORK/dump" \
        >/dev/null 2>"$WORK/eval.log"; then
        /usr/bin/python3 tests/oracle/ref_forward.py "$WORK/text.gguf" \
            --ids "$pre 200080 ${soft}200081 $post" --rows "$WORK/rows.f32" --rows-at 5 \
            --dump "$WORK/dump" --tol 2e-5 --rows-control | sed 's/^/  /' || status=1
    else
        echo "not ok glint eval --image: $(tail -1 "$WORK/eval.log")"
        status=1
    fi
else
    echo "not ok convert: $(tail -1 "$WORK/convert.log")"
    status=1
fi
rm -rf "$WORK/hf" "$WORK"/*.gguf "$WORK/dump"
[ "$status" = 0 ] && echo "media torch PASSED" || echo "media torch FAILED"
exit "$status"
