#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_dflash_llama: glint's DFlash draft blocks against llama.cpp's on the same GGUF pair, over
# the same contexts, greedy (issue 22, "the drafter is right"). llama.cpp's side is
# tests/oracle/dflash_llama/dflash_llama.cpp, built here with c++ against bench/llama_build.sh's
# build (libllama): the calls of common/speculative.cpp's common_speculative_impl_draft_dflash
# (target-layer input extraction, embd-batch injection into the drafter's KV, one block
# [id_last, mask x 15] with every row an output, draft i = argmax of row i). glint's side is
# `test_dflash --oracle` (the target's captured layer outputs -> gl_dflash_append ->
# gl_dflash_block), the same entry points the engine uses.
# Model pair: make-model tiny F32 seed 1 (target) + dflash-tiny F32 seed 1 (drafter: 5 blocks,
# window 8, block 16, targets stored 1,2,3), as check_dflash_torch.sh. 20 contexts of 1..299
# tokens (plus the anchor): most longer than the window (8) and 6 longer than the window + 64
# rows glint's per-sequence ring keeps. Both sides run the drafter's KV in F32 without flash
# attention (llama.cpp's defaults on a CPU would round K/V to F16).
# Gates: every draft token equal, except at a near tie (llama.cpp's top-2 logit gap below 1e-4 of
# the row's max |logit|; a split elsewhere fails); every row's top-10 candidate list (ids, in
# order) equal, unless two of llama.cpp's top 11 logits are that near; and the block logits of
# rows 1..15 agree to max|diff| <= 1e-5 * max|llama.cpp|. Reported: agreement per position, the gap at any split.
# Also gated: draft length 4 (n_max 4: a 5-row block on both sides) on the first 10 contexts.
# Negative controls (must fail the token and the top-10 gates): glint on a drafter copy whose dflash.target_layers
# are one higher (glint reads each target layer without the -1, llama.cpp the stock file), and
# on a copy with blk.2.ffn_down.weight x 1.5 (attn_q would not do: q_norm cancels a scale). The
# controls run on the first 10 contexts.
# Skips (exit 0) when llama.cpp is not built (bash bench/llama_build.sh).
# Env: LLAMA_BIN (folder with libllama.so and build-info.txt; default: the newest
#      <cache>/llama.cpp-*/build-glint/bin), GLINT_BIN, GLINT_TEST_DIR.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$GL_REPO_ROOT" || exit 1
gl_need_glint check_dflash_llama
PY=/usr/bin/python3
LBIN="$(gl_llama_bin)"
LSRC="$(sed -n 's/^source: //p' "$LBIN/build-info.txt" 2>/dev/null)"
if [ -z "$LBIN" ] || [ ! -f "$LBIN/libllama.so" ] || [ ! -f "$LSRC/src/llama-ext.h" ]; then
    echo "SKIP: check_dflash_llama: llama.cpp's libllama is not built (bash bench/llama_build.sh)"
    exit 0
fi
tdf="$(dirname "$GLINT_BIN")/test_dflash"
[ -x "$tdf" ] || { echo "FAIL: check_dflash_llama: $tdf not built"; exit 1; }
DIR="$GLINT_TEST_DIR/dflash-llama"
rm -rf "$DIR" && mkdir -p "$DIR/llama" "$DIR/llama4"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

c++ -std=c++17 -O2 -Wall -Wextra -I"$LSRC/src" -I"$LSRC/include" -I"$LSRC/ggml/include" \
    "$HERE/dflash_llama/dflash_llama.cpp" -o "$DIR/dflash_llama" -L"$LBIN" -lllama -lggml-base \
    -lggml -Wl,-rpath,"$LBIN" 2>"$DIR/cc.log" ||
    { echo "FAIL: building dflash_llama: $(head -3 "$DIR/cc.log")"; exit 1; }
target="$(gl_tiny_model F32)" || exit 1
draft="$DIR/dflash-tiny.gguf"
"$GLINT_BIN" make-model --preset dflash-tiny --type F32 --seed 1 --out "$draft" \
    >/dev/null 2>"$DIR/mk.log" || { echo "FAIL: make-model: $(tail -1 "$DIR/mk.log")"; exit 1; }

# Contexts (one a line, the last id is the anchor) and the two control drafters.
PYTHONPATH="$LSRC/gguf-py" "$PY" - "$DIR" "$draft" <<'EOF' || { echo "FAIL: writing the inputs"; exit 1; }
import shutil, sys
import numpy as np
import gguf
d, draft = sys.argv[1], sys.argv[2]
V = 200000  # ordinary ids (the tiny vocabulary is 202048; 201818 is the mask token)
lens = [2, 3, 5, 8, 9, 10, 13, 17, 24, 33, 48, 64, 72, 73, 74, 80, 99, 128, 200, 300]
lines = []
for k, n in enumerate(lens):
    rng = np.random.default_rng(1000 + k)
    if k % 5 == 3:
        ids = [int(x) for x in rng.integers(0, 64, n)]  # small ids, many repeats
    elif k % 5 == 4:
        ids = [(i * 7919 + 11 * k) % V for i in range(n)]  # arithmetic walk
    else:
        ids = [int(x) for x in rng.integers(0, V, n)]
    if k == 6:
        ids = [200000, 13225, 11, 2375, 0, 1001, 50000, 123456, 199999, 7, 7, 42, 99][:n]
    if k == 9:
        ids[5:] = [ids[4]] * (n - 5)  # one id repeated
    lines.append(" ".join(map(str, ids)))
open(f"{d}/contexts.txt", "w").write("\n".join(lines) + "\n")
for name in ("ctl-layers", "ctl-tensor"):
    shutil.copy(draft, f"{d}/{name}.gguf")
r = gguf.GGUFReader(f"{d}/ctl-layers.gguf", "r+")
f = r.fields["dflash.target_layers"]
for i in f.data:
    f.parts[i][...] += 1
r.data.flush()
r = gguf.GGUFReader(f"{d}/ctl-tensor.gguf", "r+")
t = [x for x in r.tensors if x.name == "blk.2.ffn_down.weight"][0]
t.data[...] *= 1.5
r.data.flush()
EOF

"$DIR/dflash_llama" --model "$target" --draft "$draft" --contexts "$DIR/contexts.txt" \
    --out "$DIR/llama" --threads 2 >"$DIR/llama.txt" 2>"$DIR/llama.err" ||
    { echo "FAIL: dflash_llama: $(grep -v '^load' "$DIR/llama.err" | tail -1)"; exit 1; }
head -10 "$DIR/contexts.txt" >"$DIR/contexts10.txt"
"$DIR/dflash_llama" --model "$target" --draft "$draft" --contexts "$DIR/contexts10.txt" \
    --out "$DIR/llama4" --threads 2 --n-max 4 >"$DIR/llama4.txt" 2>"$DIR/llama4.err" ||
    { echo "FAIL: dflash_llama --n-max 4: $(grep -v '^load' "$DIR/llama4.err" | tail -1)"; exit 1; }
k=0
while read -r line; do
    for arm in ok ctl-layers ctl-tensor k4; do
        [ $arm != ok ] && [ $k -ge 10 ] && continue
        dr="$draft" blk=()
        [ "${arm#ctl}" != $arm ] && dr="$DIR/$arm.gguf"
        [ $arm = k4 ] && blk=(--block 5)
        mkdir -p "$DIR/$arm/$k"
        # shellcheck disable=SC2086
        "$tdf" --oracle "$target" "$dr" "$DIR/$arm/$k" "${blk[@]}" $line >/dev/null 2>"$DIR/g.err" ||
            fail "test_dflash --oracle ($arm, context $k): $(tail -1 "$DIR/g.err")"
    done
    k=$((k + 1))
done <"$DIR/contexts.txt"
[ "$fails" -eq 0 ] || { echo "check_dflash_llama: $fails failure(s)"; exit 1; }

"$PY" - "$DIR" <<'EOF' || fails=$((fails + 1))
import sys
import numpy as np
d = sys.argv[1]
info = open(f"{d}/llama.txt").read().split("\n")
head = info[0].split()
n_max, V = int(head[head.index("n_max") + 1]), int(head[head.index("n_vocab") + 1])
lens = [len(l.split()) - 1 for l in open(f"{d}/contexts.txt").read().split("\n") if l.strip()]
print(f"note: llama.cpp: {info[0]}")

def top(row, k=10):  # the k largest ids, largest first
    i = np.argpartition(-row, k)[:k]
    return i[np.argsort(-row[i], kind="stable")]

def compare(arm, n_ctx, ldir="llama", n_max=n_max):
    per_pos = np.zeros(n_max, int)
    splits, hard, worst, top10, top10_hard = [], 0, 0.0, 0, 0
    for k in range(n_ctx):
        l = np.fromfile(f"{d}/{ldir}/l{k}.logits", "<f4").reshape(n_max, V).astype(np.float64)
        g = np.fromfile(f"{d}/{arm}/{k}/logits.f32", "<f4").reshape(-1, V)[1:n_max + 1].astype(np.float64)
        worst = max(worst, float(np.abs(g - l).max() / np.abs(l).max()))
        lt, gt = l.argmax(1), g.argmax(1)
        # the sampler's top-k 10 candidate list, in order
        for i in range(n_max):
            if np.array_equal(top(l[i]), top(g[i])):
                top10 += 1
            else:  # excused only when two of llama.cpp's top 11 logits are a near tie
                v = l[i][top(l[i], 11)]
                top10_hard += bool((v[:-1] - v[1:]).min() >= 1e-4 * np.abs(l[i]).max())
        for i in range(n_max):
            if lt[i] == gt[i]:
                per_pos[i] += 1
                continue
            top2 = np.sort(l[i])[-2:]
            gap = (top2[1] - top2[0]) / np.abs(l[i]).max()
            near = gap < 1e-4
            hard += not near
            splits.append(f"ctx {k} (n {lens[k]}) pos {i + 1}: llama.cpp {lt[i]} glint {gt[i]}, "
                          f"llama.cpp top-2 gap {gap:.1e} of max|logit|{' (near tie)' if near else ''}")
    return per_pos, splits, hard, worst, (top10, top10_hard)

bad = 0
n = len(lens)
per_pos, splits, hard, worst, top10 = compare("ok", n)
ok = hard == 0
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: draft tokens, {n} contexts (n_ctx {min(lens)}..{max(lens)}) x "
      f"{n_max} positions: {int(per_pos.sum())}/{n * n_max} equal, {hard} split(s) not at a near tie")
print("      equal per position 1..%d: %s" % (n_max, " ".join(f"{x}/{n}" for x in per_pos)))
for s in splits:
    print(f"      split: {s}")
ok = top10[1] == 0
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: rows whose top-10 candidates (llama.cpp's top-k 10 sampler) are the "
      f"same ids in the same order: {top10[0]}/{n * n_max}, {top10[1]} differing without a near tie")
print(f"note: distinct draft tokens over all blocks: "
      f"{len({t for l in info[1:] if ' tokens ' in l for t in l.split(' tokens ')[1].split()})} "
      f"(a random drafter: a few lm_head rows dominate)")
ok = worst <= 1e-5
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: block logits rows 1..{n_max}: max rel {worst:.1e} (tolerance 1e-5)")
pp, sp, hd, w, t4 = compare("k4", 10, "llama4", 4)
ok = hd == 0 and w <= 1e-5 and t4[1] == 0
bad += not ok
print(f"{'ok' if ok else 'FAIL'}: draft length 4 (the engine's default k; block = 5 rows on both sides), "
      f"10 contexts: {int(pp.sum())}/40 equal, {hd} split(s) not at a near tie, logits rel {w:.1e}, "
      f"top-10 lists equal {t4[0]}/40")
for s in sp:
    print(f"      split: {s}")
for arm, what in (("ctl-layers", "target layers read without the -1"),
                  ("ctl-tensor", "blk.2.ffn_down.weight x 1.5 on glint's side")):
    pp, sp, hd, w, t = compare(arm, 10)
    ok = hd > 0 and t[1] > 0
    bad += not ok
    print(f"{'ok' if ok else 'FAIL'}: negative control ({what}): {int(pp.sum())}/{10 * n_max} equal, "
          f"{hd} split(s) not at a near tie (must be > 0), top-10 lists equal {t[0]}/150, logits rel {w:.1e}")
sys.exit(1 if bad else 0)
EOF
[ "$fails" -eq 0 ] && echo "check_dflash_llama: all passed" || echo "check_dflash_llama: $fails failure(s)"
[ "$fails" -eq 0 ]
