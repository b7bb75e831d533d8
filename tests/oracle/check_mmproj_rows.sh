#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_mmproj_rows: glint's soft-token rows against llama.cpp's for the same F32 mmproj and image
# (issue 21). llama.cpp's side is tests/oracle/mtmd_rows/mtmd_rows.c, built here with cc against
# bench/llama_build.sh's build (libmtmd + libllama): mtmd_helper_bitmap_init_from_file,
# mtmd_tokenize_from_parts, mtmd_encode_chunk, mtmd_get_output_embd, i.e. exactly the rows
# llama.cpp's text graph receives; glint's side is `glint image preprocess --model --mmproj
# --rows`. llama.cpp's rows are before the weight-less RMS of arch doc §6.3 step 11 (its text
# graph applies it), glint's after, so the RMS (eps = text rms_norm_eps) is applied to llama.cpp's
# rows here. Metric: max|diff| / max|glint row| over an image's rows.
# Model: make-model tiny preset, F32, seed 1, converted by glint (text GGUF + mmproj in llama.cpp's
# layout); 12 images whose sides are multiples of 28 px, so neither side resizes: 8 whose patch
# grid fits the tiny tower's 4x4 position table (gated) and 4 larger ones (table upsampled;
# reported only).
# Two things in llama.cpp are not F32 and are measured apart:
#  * ggml_conv_2d (the patch embedding) builds its im2col in F16 for any non-BF16 kernel, so the
#    pixels and the patch kernel are rounded to F16 (~1.5e-4 relative in the rows). The gated arm
#    ("exact") therefore uses images whose channels are 0 or 255 (normalised to -1 / +1, exact in
#    F16) and a copy of the mmproj whose two temporal kernel slabs are both slab 0 rounded to F16
#    (the summed kernel 2 x slab 0 is then exact in F16): every other step is F32 on both sides,
#    tolerance 1e-5. The stock arm (the converted file, varied pixels) is gated at 1e-3.
#  * flash attention (llama-mtmd-cli's default on a CPU) casts K and V to F16: mtmd_rows runs with
#    it off; the same images with it on are reported.
# Upsampled tables: llama.cpp resizes the position table with ggml_interpolate bilinear, which
# clamps edge taps; §6.3 step 2 (HF's grid_sample) pads them with zeros, as glint does. The check
# compares llama.cpp's position embedding with both and reports where the rows part (the edge ring
# of patches): that is why 3 of 4 larger images split in check_mmproj_llama.sh's greedy tokens.
# Also gated: llama.cpp's pixel tensor (inp_raw after its preprocessing) equals glint's patch
# vectors (--patches, both temporal slabs) for all 12 stock images, and its position embedding
# equals §6.3 step 2 for the 8 in-table ones. Negative control: glint's rows for image k against
# llama.cpp's for image k+4 (same size) must fail the 1e-5 gate.
# Skips (exit 0) when llama.cpp's libmtmd is not built (bash bench/llama_build.sh).
# Env: LLAMA_BIN (folder with libmtmd.so and build-info.txt; default: the newest
#      <cache>/llama.cpp-*/build-glint/bin), GLINT_BIN, GLINT_TEST_DIR.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$GL_REPO_ROOT" || exit 1
PY=/usr/bin/python3
LBIN="$(gl_llama_bin)"
LSRC="$(sed -n 's/^source: //p' "$LBIN/build-info.txt" 2>/dev/null)"
if [ -z "$LBIN" ] || [ ! -f "$LBIN/libmtmd.so" ] || [ ! -f "$LSRC/tools/mtmd/mtmd.h" ]; then
    echo "SKIP: check_mmproj_rows: llama.cpp's libmtmd is not built (bash bench/llama_build.sh)"
    exit 0
fi
DIR="$GLINT_TEST_DIR/mmproj-rows"
rm -rf "$DIR" && mkdir -p "$DIR"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cc -std=c11 -O2 -Wall -Wextra -I"$LSRC/tools/mtmd" -I"$LSRC/include" -I"$LSRC/ggml/include" \
    "$HERE/mtmd_rows/mtmd_rows.c" -o "$DIR/mtmd_rows" -L"$LBIN" -lmtmd -lllama -lggml-base -lggml \
    -Wl,-rpath,"$LBIN" 2>"$DIR/cc.log" || { echo "FAIL: building mtmd_rows: $(head -3 "$DIR/cc.log")"; exit 1; }
"$GLINT_BIN" make-model --preset tiny --type F32 --seed 1 --format safetensors --out "$DIR/hf" \
    >/dev/null 2>"$DIR/mk.log" || { echo "FAIL: make-model: $(tail -1 "$DIR/mk.log")"; exit 1; }
"$GLINT_BIN" convert "$DIR/hf" --out "$DIR/text.gguf" --type F32 --vision-out "$DIR/mmproj.gguf" \
    --vision-type F32 >/dev/null 2>"$DIR/cv.log" || { echo "FAIL: convert: $(tail -1 "$DIR/cv.log")"; exit 1; }

# The images (stock: check_mmproj_llama.sh's 12; exact: the same sizes, channels 0 or 255) and
# the exact arm's mmproj (a copy with both temporal slabs = slab 0 rounded to F16).
PYTHONPATH="$LSRC/gguf-py" "$PY" - "$DIR" <<'EOF' || { echo "FAIL: writing the inputs"; exit 1; }
import shutil, sys
import numpy as np
from PIL import Image
import gguf
d = sys.argv[1]
sizes = [(28, 28), (56, 28), (28, 56), (56, 56)] * 2 + [(84, 140), (168, 112), (196, 56), (168, 168)]
for k, (w, h) in enumerate(sizes):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * (5 + k) + y * 3) % 256, (x * y + 17 * k) % 256, (255 - 2 * y + x * k) % 256)
                for y in range(h) for x in range(w)])
    im.save(f"{d}/s{k:02d}.png")
    rng = np.random.default_rng(100 + k)
    Image.fromarray((rng.integers(0, 2, (h, w, 3)) * 255).astype(np.uint8)).save(f"{d}/e{k:02d}.png")
shutil.copy(f"{d}/mmproj.gguf", f"{d}/mmproj-exact.gguf")
r = gguf.GGUFReader(f"{d}/mmproj-exact.gguf", "r+")
t = {x.name: x.data for x in r.tensors}
summed, temporal = t["v.patch_embd.weight"], t["v.patch_embd_temporal.weight"]  # [o,3,14,14], [o,2,3,196]
o = summed.shape[0]
assert np.array_equal((temporal[:, 0] + temporal[:, 1]).reshape(o, -1), summed.reshape(o, -1))
s0 = temporal[:, 0].astype(np.float16).astype(np.float32)
temporal[:, 0] = s0
temporal[:, 1] = s0
summed[...] = (2 * s0).reshape(summed.shape)
r.data.flush()
EOF

# llama.cpp: stock (pixels, position embedding), exact, exact with flash attention.
args_s=() args_e=() args_f=()
for k in $(seq -w 0 11); do
    args_s+=(--image "$DIR/s$k.png" --rows "$DIR/ls$k.rows" --pixels "$DIR/ls$k.pix" --posemb "$DIR/ls$k.pos")
    args_e+=(--image "$DIR/e$k.png" --rows "$DIR/le$k.rows")
    [ "$k" -lt 8 ] && args_f+=(--image "$DIR/e$k.png" --rows "$DIR/lf$k.rows")
done
for arm in s e f; do
    mm="$DIR/mmproj-exact.gguf" fa=off
    [ $arm = s ] && mm="$DIR/mmproj.gguf"
    [ $arm = f ] && fa=on
    declare -n a="args_$arm"
    "$DIR/mtmd_rows" --model "$DIR/text.gguf" --mmproj "$mm" --threads 2 --flash-attn $fa "${a[@]}" \
        >"$DIR/l$arm.json" 2>"$DIR/l$arm.err" || fail "mtmd_rows ($arm): $(grep -v '^load' "$DIR/l$arm.err" | tail -1)"
done
# glint: the same images and files.
for k in $(seq -w 0 11); do
    "$GLINT_BIN" image preprocess "$DIR/s$k.png" --model "$DIR/text.gguf" --mmproj "$DIR/mmproj.gguf" \
        --rows "$DIR/gs$k.rows" --patches "$DIR/gs$k.patches" >"$DIR/gs$k.json" 2>"$DIR/g.err" ||
        fail "glint image s$k: $(tail -1 "$DIR/g.err")"
    "$GLINT_BIN" image preprocess "$DIR/e$k.png" --model "$DIR/text.gguf" \
        --mmproj "$DIR/mmproj-exact.gguf" --rows "$DIR/ge$k.rows" >/dev/null 2>"$DIR/g.err" ||
        fail "glint image e$k: $(tail -1 "$DIR/g.err")"
done
[ "$fails" -eq 0 ] || { echo "check_mmproj_rows: $fails failure(s)"; exit 1; }

PYTHONPATH="$LSRC/gguf-py" "$PY" - "$DIR" <<'EOF' || fails=$((fails + 1))
import json, sys
import numpy as np
import gguf
d = sys.argv[1]
cfg = json.load(open(f"{d}/hf/config.json"))
eps = cfg.get("text_config", cfg).get("rms_norm_eps", 1e-5)
r = gguf.GGUFReader(f"{d}/mmproj.gguf")
table = np.array([t.data for t in r.tensors if t.name == "v.position_embd.weight"][0], np.float64)
side = int(round(table.shape[0] ** 0.5))
H = table.shape[1]
table = table.reshape(side, side, H)
bad = 0

def f32(p, shape=None):
    a = np.fromfile(p, "<f4").astype(np.float64)
    return a.reshape(shape) if shape else a

def rel(a, b):  # max|a - b| / max|b|
    return float(np.abs(a - b).max() / np.abs(b).max())

def rms(x):
    return x / np.sqrt((x * x).mean(1, keepdims=True) + eps)

def taps(n_out, n_in, clamp):  # §6.3 step 2: (i + 0.5) n_in / n_out - 0.5, 2 taps
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        y = (i + 0.5) * n_in / n_out - 0.5
        y0 = int(np.floor(y))
        for j, w in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
            if clamp:
                j = min(max(j, 0), n_in - 1)
            if 0 <= j < n_in:
                m[i, j] += w
    return m

def posemb(gh, gw, clamp):
    if clamp and gh == side and gw == side:
        return table.reshape(-1, H)
    return np.einsum("ia,jb,abh->ijh", taps(gh, side, clamp), taps(gw, side, clamp), table).reshape(-1, H)

def grid(k):
    g = json.load(open(f"{d}/gs{k:02d}.json"))
    return g["grid_thw"][1], g["grid_thw"][2]

n_embd = json.loads(open(f"{d}/ls.json").readline())["n_embd"]
def lrows(arm, k):
    return rms(f32(f"{d}/l{arm}{k:02d}.rows").reshape(-1, n_embd))
def grows(arm, k):
    return f32(f"{d}/g{arm}{k:02d}.rows").reshape(-1, n_embd)

# Pixels: llama.cpp's inp_raw [3][ny][nx] against glint's patch vectors [n][2][3][14][14].
pix_worst = 0.0
for k in range(12):
    gh, gw = grid(k)
    lp = f32(f"{d}/ls{k:02d}.pix", (3, gh, 14, gw, 14)).transpose(1, 3, 0, 2, 4).reshape(-1, 3, 14, 14)
    gp = f32(f"{d}/gs{k:02d}.patches", (gh * gw, 2, 3, 14, 14))
    pix_worst = max(pix_worst, float(np.abs(gp[:, 0] - lp).max()), float(np.abs(gp[:, 1] - lp).max()))
ok = pix_worst == 0.0
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: pixels: llama.cpp's encoder input equals glint's patch vectors "
      f"for 12/12 images: max |diff| {pix_worst:.1e}")

# Position embedding: in-table = §6.3 step 2; larger = clamped taps, not the zero padding.
pos_in, notes = 0.0, []
for k in range(12):
    gh, gw = grid(k)
    lpos = f32(f"{d}/ls{k:02d}.pos", (gh * gw, H))
    spec, clamp = posemb(gh, gw, False), posemb(gh, gw, True)
    if k < 8:
        pos_in = max(pos_in, rel(lpos, spec))
    else:
        diff = np.abs(lpos - spec).max(1).reshape(gh, gw) > 1e-6 * np.abs(spec).max()
        rr, cc = np.nonzero(diff)
        depth = int(np.minimum(np.minimum(rr, gh - 1 - rr), np.minimum(cc, gw - 1 - cc)).max()) + 1
        notes.append(f"s{k:02d} {gh}x{gw} patches: vs §6.3 {rel(lpos, spec):.2f}, vs clamped taps "
                     f"{rel(lpos, clamp):.1e}; differing patches {int(diff.sum())}/{gh * gw}, all "
                     f"within {depth} of the border")
ok = pos_in <= 1e-5
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: position embedding, 8 in-table grids: llama.cpp = §6.3 step 2 "
      f"within {pos_in:.1e}")
for n in notes:
    print(f"note: position table upsampled: llama.cpp {n}")

def arm(name, a, lim, idx, gate=True):
    global bad
    rs = [rel(lrows(a, k), grows("s" if a == "s" else "e", k)) for k in idx]
    ok = max(rs) <= lim
    if gate:
        bad += not ok
    tag = ("ok" if ok else "FAIL") if gate else "note"
    print(f"{tag}: rows, {name}: max rel {max(rs):.1e} (per image {' '.join(f'{x:.1e}' for x in rs)})"
          f"{f', tolerance {lim:g}' if gate else ''}")
    return rs

arm("exact arm (0/255 pixels, F16-exact patch kernel, F32 attention), 8 in-table images", "e", 1e-5, range(8))
arm("stock file and pixels (llama.cpp's F16 im2col), 8 in-table images", "s", 1e-3, range(8))
arm("exact arm with flash attention on (K, V in F16; llama-mtmd-cli's default), 8 in-table",
    "f", 0, range(8), gate=False)
arm("exact arm, 4 images with the table upsampled (edge taps clamped vs zero-padded)", "e", 0,
    range(8, 12), gate=False)
arm("stock, 4 images with the table upsampled", "s", 0, range(8, 12), gate=False)
ctl = min(rel(lrows("e", (k + 4) % 8), grows("e", k)) for k in range(8))
ok = ctl > 1e-5
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: negative control: glint image k vs llama.cpp image k+4 (same size): "
      f"min rel {ctl:.1e} > 1e-5")
sys.exit(1 if bad else 0)
EOF
[ "$fails" -eq 0 ] && echo "check_mmproj_rows: all passed" || echo "check_mmproj_rows: $fails failure(s)"
[ "$fails" -eq 0 ]
