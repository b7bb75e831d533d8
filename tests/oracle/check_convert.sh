#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_convert: `glint convert` (src/convert/convert.h) on tiny HF folders written by
# `glint make-model --format safetensors` (tiny preset, seed 1; F32 and BF16):
#  (a) glint's all-position logits from the converted GGUF equal (byte-equal float32) glint's
#      logits from the HF folder itself: F32 folder -> F32 GGUF, BF16 folder -> BF16 GGUF;
#  (b) the converted GGUF against `glint make-model` writing the same weights directly as GGUF
#      (F32, Q8_0, Q4_K_M from the F32 folder; BF16 from the BF16 folder): identical logits, and
#      the tensor tables (name, type, shape) and every tensor's bytes compared (the files differ
#      only in metadata: convert writes the release's 32 keys, make-model its own set);
#  (c) the converted F32 / Q8_0 / Q4_K_M GGUFs load in llama.cpp (node-llama-cpp 3.22.1) with
#      healthy logits (writer_check.mjs), and the converted F32 agrees with glint under
#      check_parity.sh's tolerance (tests/oracle/parity_run.py: all-position logits within 1e-4
#      and the tokenizer battery, with its negative control). Parity on the converted F32 alone
#      is enough: what convert adds over make-model is its metadata (the 32 keys, the same key
#      set for every type), and the tight F32 tolerance shows llama.cpp reads that metadata as
#      glint does; the Q8_0 / Q4_K_M tensors are byte-identical to make-model's files (b), which
#      check_parity.sh runs through the full harness (logits and greedy battery). Q8_0 / Q4_K_M
#      parity here re-ran that on the same bytes (about 35 s).
#  (d) the vision GGUF (--vision-out) is llama.cpp's mmproj layout: its keys, every tensor, the
#      summed conv2d kernel [14, 14, 3, 64] = slab 0 + slab 1, q/k rows in llama.cpp's pair
#      order, and glint's full temporal kernel (ne [196, 3, 2, 64]) holding the HF bytes;
#  (e) the same file without the full kernel (as llama.cpp's converter writes it): image rows
#      equal the two-slab file's within F32 rounding (<= 1e-5 of the largest value), a video is
#      refused with the reason, and the two-slab file encodes the video;
#  (f) the DFlash assistant folder (make-model dflash-tiny --format safetensors): converted, it is
#      make-model's own dflash GGUF byte for byte (F32, Q4_K_M); loaded, it drafts the GGUF's
#      block logits bit for bit; without tokenizer.model it needs --target-model-dir;
#  plus CLI refusals (missing folder, unknown type) with exit codes 1 / 2.
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata),
#      GLINT_CONVERT_PARITY=0 skips (c)'s parity run (the llama.cpp load check still runs).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$GL_REPO_ROOT"
PY=/usr/bin/python3
DIR="$GLINT_TEST_DIR/convert"
[ -x "$GLINT_BIN" ] || { echo "check_convert: $GLINT_BIN not built"; exit 1; }
mkdir -p "$DIR"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

PROMPTS=(
    "200000 791 7290 315 2324 374 220 17 10 220 18 284 220 19 13 578 4062 14198 39935 35308 927"
    "200000 9906 11 1917 0"
    "200000 200022 882 200023 3923 374 220 1114 353 220 1419 30 200008 200022 78191 200023 271"
)

# Each model's logits are computed once per prompt and kept (the converted F32 and BF16 GGUFs
# are compared in both (a) and (b)); LOGITS[model:i] is the file.
declare -A LOGITS=()
logits() { # MODEL PROMPT_INDEX -> sets LOGIT_FILE
    LOGIT_FILE="${LOGITS[$1:$2]:-}"
    [ -n "$LOGIT_FILE" ] && return 0
    LOGIT_FILE="$DIR/logits.${#LOGITS[@]}"
    "$GLINT_BIN" eval --model "$1" --prompt-ids "${PROMPTS[$2]}" --logits "$LOGIT_FILE" \
        >/dev/null 2>"$LOGIT_FILE.log" || { fail "eval $1: $(tail -1 "$LOGIT_FILE.log")"; return 1; }
    LOGITS[$1:$2]="$LOGIT_FILE"
}

same_logits() { # WHAT MODEL_A MODEL_B
    local what="$1" a="$2" b="$3" i n=0 fa
    for i in 0 1 2; do
        logits "$a" $i && fa="$LOGIT_FILE" && logits "$b" $i || return 1
        cmp -s "$fa" "$LOGIT_FILE" && n=$((n + 1)) || fail "$what: prompt $i logits differ"
    done
    [ $n -eq 3 ] && ok "$what: logits identical on 3 prompts"
}

# Tensor tables and tensor bytes of two GGUFs (glint inspect --json gives names, types, shapes,
# file offsets and sizes).
same_tensors() { # WHAT A B
    "$GLINT_BIN" inspect --json "$2" >"$DIR/ta.json" 2>/dev/null &&
        "$GLINT_BIN" inspect --json "$3" >"$DIR/tb.json" 2>/dev/null ||
        { fail "$1: glint inspect failed"; return 1; }
    local msg
    if msg=$("$PY" - "$2" "$DIR/ta.json" "$3" "$DIR/tb.json" 2>&1 <<'EOF'
import json, sys
fa, ja, fb, jb = sys.argv[1:5]
ta = json.load(open(ja))["tensors"]
tb = json.load(open(jb))["tensors"]
key = lambda t: (t["name"], t["type"], t["ne"], t["n_bytes"])
assert [key(t) for t in ta] == [key(t) for t in tb], "tensor tables differ"
total = 0
with open(fa, "rb") as a, open(fb, "rb") as b:
    for x, y in zip(ta, tb):
        a.seek(x["file_offset"]); b.seek(y["file_offset"])
        assert a.read(x["n_bytes"]) == b.read(y["n_bytes"]), f"bytes of {x['name']} differ"
        total += x["n_bytes"]
print(f"{len(ta)} tensors, {total} bytes of tensor data identical")
EOF
    ); then
        ok "$1: $msg"
    else
        fail "$1: $msg"
    fi
    cmp -s "$2" "$3" && echo "note: $1: whole files identical" ||
        echo "note: $1: whole files differ (metadata: convert writes the release's key set)"
}

# ---- inputs ----
for t in F32 BF16; do
    rm -rf "$DIR/hf-$t"
    "$GLINT_BIN" make-model --preset tiny --type "$t" --seed 1 --format safetensors \
        --out "$DIR/hf-$t" >/dev/null 2>"$DIR/hf-$t.log" ||
        { echo "FAIL: make-model safetensors $t: $(tail -1 "$DIR/hf-$t.log")"; exit 1; }
done
conv() { # SRC_TYPE OUT_TYPE [extra flags]
    local s="$1" t="$2" out="$DIR/conv-$1-$2.gguf"
    shift 2
    local t0=$SECONDS
    "$GLINT_BIN" convert "$DIR/hf-$s" --out "$out" --type "$t" "$@" >/dev/null 2>"$out.log" ||
        { fail "convert $s -> $t: $(tail -1 "$out.log")"; return 1; }
    echo "converted hf-$s -> $t in $((SECONDS - t0)) s ($(stat -c %s "$out") bytes)" >&2
}
conv F32 F32 --vision-out "$DIR/conv-F32-vision.gguf" --vision-type F32
conv F32 Q8_0
conv F32 Q4_K_M --threads 1 # one thread: the output must not depend on the thread count
conv BF16 BF16 --vision-out "$DIR/conv-BF16-vision.gguf"

direct() { # TYPE -> path of make-model's own GGUF (seed 1)
    case "$1" in
    F32 | Q8_0 | Q4_K_M) gl_tiny_model "$1" ;;
    *)
        local p="$DIR/direct-$1.gguf"
        "$GLINT_BIN" make-model --preset tiny --type "$1" --seed 1 --out "$p" >/dev/null 2>&1 &&
            echo "$p"
        ;;
    esac
}

# ---- (a) converted GGUF vs the HF folder ----
same_logits "(a) F32 folder vs converted F32 GGUF" "$DIR/hf-F32" "$DIR/conv-F32-F32.gguf"
same_logits "(a) BF16 folder vs converted BF16 GGUF" "$DIR/hf-BF16" "$DIR/conv-BF16-BF16.gguf"

# ---- (b) converted GGUF vs make-model's GGUF of the same weights ----
for pair in F32:F32 F32:Q8_0 F32:Q4_K_M BF16:BF16; do
    s=${pair%%:*} t=${pair##*:}
    d=$(direct "$t") || { fail "make-model $t"; continue; }
    same_logits "(b) $t: make-model GGUF vs converted ($s folder)" "$d" "$DIR/conv-$s-$t.gguf"
    same_tensors "(b) $t: make-model GGUF vs converted ($s folder)" "$d" "$DIR/conv-$s-$t.gguf"
done
rm -f "$DIR"/logits.*

# Metadata: the release's 32 keys (arch doc §3.1), chat template included, in every converted
# text GGUF ((c) runs parity on the F32 one only, relying on this).
want="general.architecture general.type general.name general.size_label general.quantization_version general.file_type muse-glimmer.context_length muse-glimmer.embedding_length muse-glimmer.block_count muse-glimmer.feed_forward_length muse-glimmer.attention.head_count muse-glimmer.attention.head_count_kv muse-glimmer.attention.key_length muse-glimmer.attention.value_length muse-glimmer.attention.layer_norm_rms_epsilon muse-glimmer.rope.freq_base muse-glimmer.final_logit_softcapping muse-glimmer.logit_scale muse-glimmer.attention.sliding_window muse-glimmer.attention.sliding_window_pattern tokenizer.ggml.model tokenizer.ggml.pre tokenizer.ggml.tokens tokenizer.ggml.token_type tokenizer.ggml.merges tokenizer.ggml.bos_token_id tokenizer.ggml.eos_token_id tokenizer.ggml.eot_token_id tokenizer.ggml.padding_token_id tokenizer.ggml.add_bos_token tokenizer.ggml.add_sep_token tokenizer.chat_template"
for t in F32-F32 F32-Q8_0 F32-Q4_K_M BF16-BF16; do
    keys=$("$GLINT_BIN" inspect --json "$DIR/conv-$t.gguf" 2>/dev/null |
        "$PY" -c 'import json,sys; print(" ".join(k["key"] for k in json.load(sys.stdin)["kv"]))')
    [ "$keys" = "$want" ] && ok "metadata of conv-$t: the release's 32 keys, in order" ||
        fail "metadata keys of conv-$t: got [$keys]"
done
"$GLINT_BIN" inspect "$DIR/conv-F32-Q4_K_M.gguf" 2>/dev/null |
    grep -E 'general\.(file_type|size_label|name)|^tensors:' | sed 's/^/   /'

# ---- (c) llama.cpp ----
if [ -d "$HERE/node_modules/node-llama-cpp" ]; then
    if out=$(cd "$HERE" && node writer_check.mjs logits 20 "$DIR/conv-F32-F32.gguf" \
        "$DIR/conv-F32-Q8_0.gguf:0.98" "$DIR/conv-F32-Q4_K_M.gguf:0.6"); then
        ok "(c) llama.cpp loads the converted F32 / Q8_0 / Q4_K_M GGUFs, healthy logits"
    else
        fail "(c) llama.cpp load / logit health of the converted GGUFs"
    fi
    echo "$out" | "$PY" -c '
import json, sys
for line in sys.stdin:
    o = json.loads(line)
    print("   %-22s std=%.2f p1=%.4f corr_min=%.3f argmax_agree=%d/%d" % (o["model"].rsplit("/", 1)[-1],
          o["std_median"], o["p1_median"], o["corr_min"], o["argmax_agree"], o["n_prompt"]))' 2>/dev/null
    if [ "${GLINT_CONVERT_PARITY:-1}" != 0 ]; then
        ctl="$GLINT_TEST_DIR/tiny-F32-seed77.gguf"
        [ -s "$ctl" ] || { "$GLINT_BIN" make-model --preset tiny --type F32 --seed 77 \
            --out "$ctl.tmp" >/dev/null 2>&1 && mv "$ctl.tmp" "$ctl"; }
        GLINT_ORACLE_THREADS="${GLINT_ORACLE_THREADS:-1}" "$PY" "$HERE/parity_run.py" \
            --glint "$GLINT_BIN" --control "$ctl" --model "F32=$DIR/conv-F32-F32.gguf" \
            --logits-only >"$DIR/parity.log" 2>&1
        rc=$?
        sed -n '/parity summary/,$p' "$DIR/parity.log" | sed 's/^/   /'
        [ $rc -eq 0 ] && ok "(c) converted F32 GGUF: glint vs llama.cpp parity passed" ||
            fail "(c) parity (see $DIR/parity.log)"
    fi
else
    echo "SKIP: (c) node-llama-cpp missing (cd tests/oracle && npm install)"
fi

# ---- (d) the vision GGUF: llama.cpp's mmproj layout ----
vis="$DIR/conv-F32-vision.gguf"
if info=$("$GLINT_BIN" inspect "$vis" 2>&1); then
    grep -q '"v.patch_embd.weight" F32   ne=\[14, 14, 3, 64\]' <<<"$info" &&
        grep -q '"v.patch_embd_temporal.weight" F32   ne=\[196, 3, 2, 64\]' <<<"$info" &&
        grep -q '^vision: llama.cpp mmproj (muse-glimmer).*images and video' <<<"$info" &&
        grep -q '^tensors: 42$' <<<"$info" &&
        ok "(d) mmproj: 42 tensors, v.patch_embd.weight ne [14, 14, 3, 64] (summed) + v.patch_embd_temporal.weight ne [196, 3, 2, 64]" ||
        fail "(d) mmproj layout: $(grep -E 'patch_embd|^tensors|^vision' <<<"$info")"
else
    fail "(d) glint inspect refused the mmproj: $info"
fi
"$GLINT_BIN" inspect --json "$vis" >"$DIR/vis.json" 2>/dev/null
if msg=$("$PY" - "$vis" "$DIR/vis.json" "$DIR/hf-F32/model.safetensors" 2>&1 <<'EOF'
import array, json, struct, sys
gg, js, st = sys.argv[1:4]
j = json.load(open(js))
kv = {k["key"]: k.get("value") for k in j["kv"]}
for k, v in [("general.architecture", "clip"), ("general.type", "mmproj"),
             ("clip.projector_type", "muse-glimmer"), ("clip.has_vision_encoder", True),
             ("clip.vision.spatial_merge_size", 2), ("clip.vision.patch_size", 14)]:
    assert kv.get(k) == v, (k, kv.get(k))
t = {x["name"]: x for x in j["tensors"]}
f = open(st, "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n))
def hf(name):
    e = h[name]; a, b = e["data_offsets"]; f.seek(8 + n + a); return e["shape"], f.read(b - a)
def gguf(name):
    x = t[name]; g = open(gg, "rb"); g.seek(x["file_offset"]); return x["ne"], g.read(x["n_bytes"])
P = "model.vision_tower.patch_embedder.patch_embedding.weight"
checks = [("v.patch_embd_temporal.weight", P),
          ("v.blk.1.attn_v.weight", "model.vision_tower.layers.1.attn.v_proj.weight"),
          ("v.blk.0.ffn_down.bias", "model.vision_tower.layers.0.mlp.fc2.bias"),
          ("mm.2.weight", "model.vision_projection.weight")]
for g, s in checks:
    (ne, gb), (shape, sb) = gguf(g), hf(s)
    assert gb == sb, f"{g} bytes differ from {s}"
# the summed kernel: slab 0 + slab 1 of HF's [hidden, 2 * 588] rows, in f32
(_, w), (_, sb) = gguf("v.patch_embd.weight"), hf(P)
sw, hw = array.array("f", w), array.array("f", sb)
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]  # the f32 sum, as convert forms it
assert all(sw[o * 588 + i] == f32(hw[o * 1176 + i] + hw[o * 1176 + 588 + i]) for o in range(64) for i in range(588))
# q/k in llama.cpp's pair order: row h*D + 2j + s = HF row h*D + s*D/2 + j (D = 64 / heads)
(ne, qb), (shape, hb) = gguf("v.blk.0.attn_q.weight"), hf("model.vision_tower.layers.0.attn.q_proj.weight")
D = 64 // kv["clip.vision.attention.head_count"]; row = 4 * ne[0]
for r in range(ne[1]):
    hh, i = divmod(r, D); src = hh * D + (i % 2) * (D // 2) + i // 2
    assert qb[r * row:(r + 1) * row] == hb[src * row:(src + 1) * row], r
print(f"{len(checks)} tensors byte-equal to the HF ones, the summed kernel = slab 0 + slab 1, "
      f"attn_q in pair order (D = {D}), llama.cpp's keys")
EOF
); then ok "(d) $msg"; else fail "(d) mmproj content: $msg"; fi
# Whole outputs first: `inspect | grep -q` under pipefail fails when grep quits early (SIGPIPE).
info=$("$GLINT_BIN" inspect "$DIR/conv-BF16-vision.gguf" 2>/dev/null)
grep -q '"v.blk.0.attn_q.weight" BF16' <<<"$info" &&
    ok "(d) BF16 mmproj: matrices BF16 (default --vision-type)" || fail "(d) BF16 mmproj types"

# ---- (e) the summed kernel alone (llama.cpp's own converter, the released files) ----
# The same file with the full temporal kernel's name changed (same length, so nothing moves): the
# loader sees only v.patch_embd.weight, the slab sum. Image rows must equal the two-slab file's
# within F32 rounding; a video must be refused with the reason.
mm="$DIR/mmproj-summed.gguf"
"$PY" - "$vis" "$mm" <<'EOF' || fail "(e) writing the summed-only file"
import sys
b = open(sys.argv[1], "rb").read()
old, new = b"v.patch_embd_temporal.weight", b"x.patch_embd_temporal.weight"
assert b.count(old) == 1
open(sys.argv[2], "wb").write(b.replace(old, new))
EOF
grep -q 'summed patch kernel (still images only)' <<<"$("$GLINT_BIN" inspect "$mm" 2>&1)" &&
    ok "(e) glint inspect: the summed-only mmproj serves still images only" ||
    fail "(e) inspect of the summed-only mmproj"
vimg="$DIR/vis.png" vclip=tests/fuzz/corpus/video/testsrc2_96x64_25fps_3s.mp4
"$PY" -c 'import sys; from PIL import Image; im = Image.new("RGB", (150, 97)); im.putdata([((x * 5 + y) % 256, (x * y) % 256, (255 - 2 * y) % 256) for y in range(97) for x in range(150)]); im.save(sys.argv[1])' "$vimg"
"$GLINT_BIN" image preprocess "$vimg" --model "$DIR/conv-F32-F32.gguf" --mmproj "$vis" --rows "$DIR/rows-two" >/dev/null 2>&1 &&
    "$GLINT_BIN" image preprocess "$vimg" --model "$DIR/conv-F32-F32.gguf" --mmproj "$mm" --rows "$DIR/rows-sum" >/dev/null 2>&1 ||
    fail "(e) image rows from the two mmprojs"
if msg=$("$PY" - "$DIR/rows-two" "$DIR/rows-sum" 2>&1 <<'EOF'
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
assert len(a) == len(b) > 0, (len(a), len(b))
scale = max(abs(x) for x in a)
err = max(abs(x - y) for x, y in zip(a, b)) / scale
assert err <= 1e-5, f"max |diff| / max |row| = {err:.3g}"
print(f"{len(a)} values, max |diff| / max |row| = {err:.2g} (tol 1e-5), identical: {a == b}")
EOF
); then ok "(e) image rows, summed-only vs two-slab mmproj: $msg"; else fail "(e) image rows: $msg"; fi
out=$("$GLINT_BIN" video preprocess "$vclip" --model "$DIR/conv-F32-F32.gguf" --mmproj "$mm" --rows "$DIR/rows-v" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "temporal slabs summed" <<<"$out" &&
    ok "(e) video with the summed-only mmproj refused: $(grep -m1 -o 'part 0 (video).\{0,90\}' <<<"$out")" ||
    fail "(e) video with the summed-only mmproj: exit $rc: $out"
"$GLINT_BIN" video preprocess "$vclip" --model "$DIR/conv-F32-F32.gguf" --mmproj "$vis" --rows "$DIR/rows-v" >/dev/null 2>&1 &&
    ok "(e) video with the two-slab mmproj encodes" || fail "(e) video with the two-slab mmproj"
rm -f "$DIR"/rows-* "$vimg"

# ---- (f) the DFlash assistant folder (docs/dflash.md) ----
# make-model writes the dflash-tiny drafter (seed 1) as GGUF and as the HF assistant folder
# (config.json + model.safetensors); convert of the folder is make-model's own GGUF byte for byte
# (F32 -> F32 and Q4_K_M, general.name given as make-model writes it), the drafter loaded from
# the folder gives the GGUF's block logits bit for bit (test_dflash --oracle on the tiny target),
# and a folder without tokenizer.model needs --target-model-dir (exit 2), which gives the same bytes.
DNAME="Muse-Glimmer assistant tiny (random DFlash drafter, glint make-model seed 1)"
rm -rf "$DIR/dflash-hf" "$DIR/dflash-tgt" "$DIR"/dflash-o?
"$GLINT_BIN" make-model --preset dflash-tiny --type F32 --seed 1 --format safetensors \
    --out "$DIR/dflash-hf" >/dev/null 2>&1 || fail "(f) make-model dflash-tiny --format safetensors"
for t in F32 Q4_K_M; do
    "$GLINT_BIN" make-model --preset dflash-tiny --type $t --seed 1 --out "$DIR/dflash-$t.gguf" \
        >/dev/null 2>&1 &&
        "$GLINT_BIN" convert "$DIR/dflash-hf" --out "$DIR/dflash-conv-$t.gguf" --type $t \
            --name "$DNAME" >/dev/null 2>"$DIR/dflash-conv.log" ||
        { fail "(f) $t: $(tail -1 "$DIR/dflash-conv.log")"; continue; }
    cmp -s "$DIR/dflash-conv-$t.gguf" "$DIR/dflash-$t.gguf" &&
        ok "(f) dflash-tiny folder -> $t: byte-identical to make-model's GGUF ($(stat -c %s "$DIR/dflash-$t.gguf") B)" ||
        fail "(f) dflash-tiny folder -> $t differs from make-model's GGUF"
done
DIDS="200000 791 7290 315 2324 374 220 17 10 220 18 284 220 19 13 578 4062"
mkdir -p "$DIR/dflash-oa" "$DIR/dflash-ob"
if build/test_dflash --oracle "$(gl_tiny_model F32)" "$DIR/dflash-F32.gguf" "$DIR/dflash-oa" $DIDS >/dev/null 2>&1 &&
    build/test_dflash --oracle "$(gl_tiny_model F32)" "$DIR/dflash-hf" "$DIR/dflash-ob" $DIDS >/dev/null 2>&1; then
    cmp -s "$DIR/dflash-oa/logits.f32" "$DIR/dflash-ob/logits.f32" &&
        ok "(f) drafter from the folder: block logits identical to the GGUF's (16 rows x 202048)" ||
        fail "(f) drafter from the folder: block logits differ from the GGUF's"
else
    fail "(f) test_dflash --oracle on the folder or the GGUF failed"
fi
mkdir -p "$DIR/dflash-tgt"
mv "$DIR/dflash-hf/tokenizer.model" "$DIR/dflash-hf/chat_template.jinja" "$DIR/dflash-tgt/"
"$GLINT_BIN" convert "$DIR/dflash-hf" --out "$DIR/x.gguf" --type F32 >/dev/null 2>"$DIR/x.log"
[ $? -eq 2 ] && [ ! -e "$DIR/x.gguf" ] && grep -q -- "--target-model-dir" "$DIR/x.log" &&
    ok "(f) a drafter folder without a vocabulary: exit 2 naming --target-model-dir" ||
    fail "(f) a drafter folder without a vocabulary: $(tail -1 "$DIR/x.log")"
"$GLINT_BIN" convert "$DIR/dflash-hf" --out "$DIR/dflash-conv-tgt.gguf" --type F32 --name "$DNAME" \
    --target-model-dir "$DIR/dflash-tgt" >/dev/null 2>&1 &&
    cmp -s "$DIR/dflash-conv-tgt.gguf" "$DIR/dflash-F32.gguf" &&
    ok "(f) --target-model-dir: the same bytes" || fail "(f) --target-model-dir"
rm -rf "$DIR/dflash-hf" "$DIR/dflash-tgt" "$DIR"/dflash-o? "$DIR"/dflash-*.gguf "$DIR/x.log"

# ---- CLI refusals ----
"$GLINT_BIN" convert "$DIR/no-such-folder" --out "$DIR/x.gguf" --type F32 >/dev/null 2>&1
[ $? -eq 1 ] && [ ! -e "$DIR/x.gguf" ] && ok "convert of a missing folder: exit 1, no output" ||
    fail "convert of a missing folder"
"$GLINT_BIN" convert "$DIR/hf-F32" --out "$DIR/x.gguf" --type Q3_K >/dev/null 2>&1
[ $? -eq 2 ] && [ ! -e "$DIR/x.gguf" ] && ok "convert --type Q3_K: exit 2" || fail "convert --type Q3_K"

[ "$fails" -eq 0 ] && echo "check_convert: all passed" || echo "check_convert: $fails failure(s)"
[ "$fails" -eq 0 ]
