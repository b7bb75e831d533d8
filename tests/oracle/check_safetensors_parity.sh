#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_safetensors_parity: the same random weights (make-model, tiny preset, seed 1) written as
# GGUF and as an HF safetensors folder give IDENTICAL all-position logits from `glint eval`
# (byte-equal float32) on three prompts, for F32, BF16 and F16. The HF layout differs from the
# GGUF one (Q/K rows in rotate-half order, centered norms stored as w - 1, no QK-norm tensors),
# so a slip in the loader's Q/K permutation or norm handling shows up here (an unpermuted Q/K
# changes logits by up to ~14 from position 1 on; the prompts are longer than the 8-token window).
# Also: the BF16 folder is sharded (index + 4 shards); every shard passes the HF reader's own
# layout rules (contiguous offsets covering the data area); a copy renamed to the legacy
# `model.layers.N.*` names loads to the same logits; `glint run` greedy ids match (tokenizer.model
# + BOS); a seed-77 folder (negative control) differs. The vision tower loaded from glint's vision
# GGUF (convert --vision-out, then --mmproj) gives the folder's soft-token rows byte for byte.
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata/st-parity).
set -uo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
DIR="${GLINT_TEST_DIR:-build/testdata}/st-parity"
PY=/usr/bin/python3
[ -x "$GLINT_BIN" ] || { echo "check_safetensors_parity: $GLINT_BIN not built"; exit 1; }
mkdir -p "$DIR"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

PROMPTS=(
    "200000 791 7290 315 2324 374 220 17 10 220 18 284 220 19 13 578 4062 14198 39935 35308 927"
    "200000 9906 11 1917 0"
    "200000 200022 882 200023 3923 374 220 1114 353 220 1419 30 200008 200022 78191 200023 271"
)

mk() { # TYPE FORMAT OUT [extra flags]
    local t="$1" f="$2" out="$3"
    shift 3
    rm -rf "$out"
    "$GLINT_BIN" make-model --preset tiny --type "$t" --seed 1 --format "$f" --out "$out" "$@" \
        >/dev/null 2>"$out.log" || { fail "make-model $t $f: $(tail -1 "$out.log")"; return 1; }
}

logits() { # MODEL PROMPT_INDEX OUT
    "$GLINT_BIN" eval --model "$1" --prompt-ids "${PROMPTS[$2]}" --logits "$3" >/dev/null 2>"$3.log" ||
        { fail "eval $1: $(tail -1 "$3.log")"; return 1; }
}

# HF's Rust reader (safetensors::SafeTensors::deserialize) rules: header JSON, offsets sorted
# back to back from 0, the last one ending at the end of the file, sizes = shape x dtype size.
hf_validate() { # FILE...
    "$PY" - "$@" <<'EOF'
import json, struct, sys
sz = {"F32": 4, "F16": 2, "BF16": 2}
for path in sys.argv[1:]:
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    ts = sorted(h.items(), key=lambda kv: kv[1]["data_offsets"])
    end = 0
    for name, t in ts:
        s, e = t["data_offsets"]
        count = 1
        for d in t["shape"]:
            count *= d
        assert s == end, f"{path}: {name} starts at {s}, previous ended at {end}"
        assert e - s == count * sz[t["dtype"]], f"{path}: {name} size"
        end = e
    assert 8 + n + end == len(b), f"{path}: data area {len(b) - 8 - n} != {end}"
    assert (8 + n) % 8 == 0, f"{path}: data area not 8-byte aligned"
EOF
}

for t in F32 BF16 F16; do
    g="$DIR/tiny-$t.gguf" h="$DIR/tiny-$t-hf"
    extra=()
    [ "$t" = BF16 ] && extra=(--shard-mb 64)
    mk "$t" gguf "$g" && mk "$t" safetensors "$h" "${extra[@]}" || continue
    hf_validate "$h"/*.safetensors || fail "$t: shards break HF's layout rules"
    for i in 0 1 2; do
        logits "$g" $i "$DIR/g.$t.$i" && logits "$h" $i "$DIR/h.$t.$i" || continue
        if cmp -s "$DIR/g.$t.$i" "$DIR/h.$t.$i"; then
            echo "ok: $t prompt $i: GGUF and safetensors logits identical"
        else
            fail "$t prompt $i: GGUF and safetensors logits differ"
        fi
    done
done
[ -f "$DIR/tiny-BF16-hf/model.safetensors.index.json" ] || fail "BF16 folder was not sharded"

# Legacy names: rewrite the F32 folder's header with the model.layers.N.* names (arch doc §3.3).
leg="$DIR/tiny-F32-legacy"
rm -rf "$leg" && mkdir -p "$leg" && cp "$DIR/tiny-F32-hf"/*.json "$DIR/tiny-F32-hf/tokenizer.model" "$leg/" &&
    "$PY" - "$DIR/tiny-F32-hf/model.safetensors" "$leg/model.safetensors" <<'EOF' || fail "legacy rewrite"
import json, re, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
f = open(src, "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n))
ren = {"post_attention_layernorm": "post_attn_norm", "pre_feedforward_layernorm":
       "post_attention_layernorm", "post_feedforward_layernorm": "post_ffn_norm",
       "self_attn.gate_proj": "output_gate_proj"}
out = {}
for k, v in h.items():
    k2 = k.replace("model.language_model.", "model.")
    m = re.match(r"(model\.layers\.\d+\.)(.*)(\.weight)$", k2)
    if m and m.group(2) in ren:
        role = ren[m.group(2)]
        k2 = m.group(1) + ("self_attn." + role if role == "output_gate_proj" else role) + m.group(3)
    out[k2] = v
hb = json.dumps(out).encode()
hb += b" " * ((8 - (8 + len(hb)) % 8) % 8)
with open(dst, "wb") as o:
    o.write(struct.pack("<Q", len(hb)) + hb)
    shutil.copyfileobj(f, o)
EOF
if logits "$leg" 0 "$DIR/l.0"; then
    cmp -s "$DIR/g.F32.0" "$DIR/l.0" && echo "ok: legacy model.layers.N.* names: identical logits" ||
        fail "legacy names: logits differ"
fi

# Text generation through the folder's tokenizer.model (BOS added like the GGUF's add_bos).
ids() { "$GLINT_BIN" run --model "$1" -n 8 --temp 0 --ids --prompt "The capital of France is" 2>/dev/null; }
a=$(ids "$DIR/tiny-F32.gguf") b=$(ids "$DIR/tiny-F32-hf")
[ -n "$a" ] && [ "$a" = "$b" ] && echo "ok: glint run greedy ids equal ($a)" ||
    fail "glint run ids differ: gguf '$a' vs safetensors '$b'"

# The vision tower from GGUF: each folder converted to a text GGUF plus glint's vision GGUF
# (matrices in the folder's own type) gives byte-identical soft-token rows for an image and for a
# video (3 temporal groups) as the folder itself (the vision GGUF is llama.cpp's mmproj layout
# with glint's full temporal kernel); a text GGUF as --mmproj and --mmproj on a folder that has
# its own tower are refused.
vclip=tests/fuzz/corpus/video/testsrc2_96x64_25fps_3s.mp4
vimg="$DIR/vis.png"
"$PY" -c 'import sys; from PIL import Image; im = Image.new("RGB", (150, 97)); im.putdata([((x * 5 + y) % 256, (x * y) % 256, (255 - 2 * y) % 256) for y in range(97) for x in range(150)]); im.save(sys.argv[1])' "$vimg" || fail "cannot write $vimg"
for t in F32 BF16; do
    h="$DIR/tiny-$t-hf" tg="$DIR/vis-$t-text.gguf" vg="$DIR/vis-$t-vision.gguf"
    if ! "$GLINT_BIN" convert "$h" --out "$tg" --type Q8_0 --vision-out "$vg" --vision-type "$t" \
        >/dev/null 2>"$DIR/vis-$t.log"; then
        fail "convert --vision-out $t: $(tail -1 "$DIR/vis-$t.log")"
        continue
    fi
    for kind in image video; do
        src=$vimg
        [ "$kind" = video ] && src=$vclip
        "$GLINT_BIN" "$kind" preprocess "$src" --model "$h" --rows "$DIR/vr-hf" >/dev/null 2>&1 &&
            "$GLINT_BIN" "$kind" preprocess "$src" --model "$tg" --mmproj "$vg" --rows "$DIR/vr-gg" \
                >/dev/null 2>"$DIR/vr.log" ||
            { fail "$t $kind rows: $(tail -1 "$DIR/vr.log")"; continue; }
        [ -s "$DIR/vr-hf" ] && cmp -s "$DIR/vr-hf" "$DIR/vr-gg" &&
            echo "ok: $t $kind soft-token rows identical from the folder and from GGUF + vision GGUF ($(stat -c %s "$DIR/vr-hf") bytes)" ||
            fail "$t $kind rows differ between the folder and GGUF + vision GGUF"
    done
done
refused() { # WHAT EXPECTED_TEXT MODEL MMPROJ
    local out
    if out=$("$GLINT_BIN" video preprocess "$vclip" --model "$3" --mmproj "$4" --rows "$DIR/vr-x" 2>&1); then
        fail "$1: accepted"
    elif grep -q -- "$2" <<<"$out"; then
        echo "ok: $1 refused ($(grep -m1 -o -- "$2.\{0,60\}" <<<"$out"))"
    else
        fail "$1: refused without '$2': $(tail -1 <<<"$out")"
    fi
}
refused "a text GGUF as --mmproj" "not a vision GGUF" "$DIR/vis-F32-text.gguf" "$DIR/vis-F32-text.gguf"
refused "--mmproj on a folder with a tower" "already has a vision tower" "$DIR/tiny-F32-hf" "$DIR/vis-F32-vision.gguf"
rm -f "$DIR"/vis-*.gguf "$DIR"/vr-* "$vimg"

# Negative control: other weights must not compare equal.
ctl="$DIR/tiny-F32-seed77-hf"
rm -rf "$ctl"
"$GLINT_BIN" make-model --preset tiny --type F32 --seed 77 --format safetensors --out "$ctl" \
    >/dev/null 2>&1 && logits "$ctl" 0 "$DIR/c.0" &&
    { cmp -s "$DIR/g.F32.0" "$DIR/c.0" && fail "negative control: seed 77 gives the same logits" ||
        echo "ok: negative control (seed 77) differs"; }

[ "$fails" -eq 0 ] && echo "check_safetensors_parity: all passed" ||
    echo "check_safetensors_parity: $fails failure(s)"
[ "$fails" -eq 0 ]
