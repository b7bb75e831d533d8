#!/usr/bin/env bash
# check_dflash_torch.sh: glint's DFlash drafter (src/model/dflash.c) vs ref_dflash.py, a float64
# PyTorch transcription of arch doc §7 with llama.cpp's dflash conventions (docs/dflash.md), on
# make-model's tiny F32 target and dflash-tiny drafter (window 8, block 16, targets 0,1,2). The
# context is the target's captured layer outputs for 99 ids (checked against ref_forward.py's
# target pass, 2e-5 like check_torch.sh); the anchor is the 100th id. Tolerance on the block's
# hidden states and logits: max|diff| <= 1e-5 * max|ref|. Negative control: the same run with a
# causal block (test_dflash --oracle --causal) must exceed it.
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/oracle/lib.sh
gl_need_glint check_dflash_torch
tdf="$(dirname "$GLINT_BIN")/test_dflash"
[ -x "$tdf" ] || { echo "check_dflash_torch: $tdf not built"; exit 1; }
/usr/bin/python3 -c "import torch, numpy" ||
    { echo "check_dflash_torch: /usr/bin/python3 lacks torch/numpy"; exit 1; }
target="$(gl_tiny_model F32)"
draft="$GLINT_TEST_DIR/dflash-tiny-F32.gguf"
params="make-model --preset dflash-tiny --type F32 --seed 1"
(
    flock 9
    if [ ! -s "$draft" ] || [ "$(cat "$draft.params" 2>/dev/null)" != "$params" ]; then
        "$GLINT_BIN" make-model --preset dflash-tiny --type F32 --seed 1 --out "$draft.tmp" >&2 &&
            mv -f "$draft.tmp" "$draft" && printf '%s\n' "$params" >"$draft.params"
    fi
) 9>"$draft.lock"
tmp="$(mktemp -d /tmp/glint-dflash.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ok" "$tmp/causal"
ids="200000 13225 11 2375 0 1001 50000 123456 199999 7 7 42 99 100000 150000 5 6 8 9 10 \
300 4000 60000 70000 80000 90000 110000 130000 170000 198000"
# 70 more: 99 context rows, more than the ring of window + 64 rows a sequence keeps, so the
# ring's wrap-around is inside the check.
for i in $(seq 1 70); do ids="$ids $(((i * 7919 + 11) % 200000))"; done
# shellcheck disable=SC2086
"$tdf" --oracle "$target" "$draft" "$tmp/ok" $ids
# shellcheck disable=SC2086
"$tdf" --oracle "$target" "$draft" "$tmp/causal" --causal $ids
echo "== test_dflash --oracle vs ref_dflash.py (float64): $target + $draft"
status=0
/usr/bin/python3 tests/oracle/ref_dflash.py "$target" "$draft" --ids "$ids" --dir "$tmp/ok" \
    --control "$tmp/causal" || status=1
[ "$status" = 0 ] && echo "dflash torch parity PASSED" || echo "dflash torch parity FAILED"
exit "$status"
