#!/usr/bin/env bash
# check_torch.sh: glint's forward pass vs an independent float64 PyTorch transcription of the
# arch spec (ref_forward.py, own GGUF reader) on the tiny F32 model, layer by layer: embed norm,
# the hidden state after each layer, and all-position logits, for a 30-token prompt (almost four
# 8-token windows, so the sliding mask, RoPE on SWA layers and NoPE on the full layer all matter).
# Tolerance: max|diff| <= 2e-5 * max|ref| per tensor; measured 1.1e-6 at most (fp32 summation
# order), while a sliding window off by one moves the logits by ~1e-1 relative: that negative
# control must fail the same tolerance.
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GLINT_TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
GLINT_BIN="${GLINT_BIN:-build/glint}"
[[ "$GLINT_BIN" = /* ]] || GLINT_BIN="$PWD/$GLINT_BIN"
export GLINT_BIN
mkdir -p "$GLINT_TEST_DIR"
[ -x "$GLINT_BIN" ] || { echo "check_torch: $GLINT_BIN not built"; exit 1; }
/usr/bin/python3 -c "import torch, numpy" ||
    { echo "check_torch: /usr/bin/python3 lacks torch/numpy"; exit 1; }

if [ -f tests/oracle/lib.sh ]; then
    # shellcheck source=/dev/null
    source tests/oracle/lib.sh
fi
if ! declare -F gl_tiny_model >/dev/null; then
    gl_tiny_model() {
        local out="$GLINT_TEST_DIR/tiny-$1.gguf"
        if [ ! -s "$out" ]; then
            "$GLINT_BIN" make-model --preset tiny --type "$1" --out "$out.tmp" >&2 &&
                mv "$out.tmp" "$out"
        fi
        echo "$out"
    }
fi
model="$(gl_tiny_model F32)"
tmp="$(mktemp -d /tmp/glint-torch.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

# 30 ids: BOS, then spread over the vocabulary, including a repeat (same token, other position)
ids="200000 13225 11 2375 0 1001 50000 123456 199999 7 7 42 99 100000 150000 5 6 8 9 10 \
300 4000 60000 70000 80000 90000 110000 130000 170000 198000"
mkdir -p "$tmp/dump"
"$GLINT_BIN" eval --model "$model" --prompt-ids "$ids" --logits "$tmp/eval.f32" \
    --dump-layers "$tmp/dump" >/dev/null
status=0
echo "== glint eval --dump-layers vs ref_forward.py (float64), $model"
echo "   (logits* = the --logits file of the same run; the control recomputes the reference with"
echo "    the sliding window one wider, a plausible off-by-one, and needs the logits to differ)"
/usr/bin/python3 tests/oracle/ref_forward.py "$model" --ids "$ids" --dump "$tmp/dump" \
    --logits "$tmp/eval.f32" --tol 2e-5 --control || status=1
[ "$status" = 0 ] && echo "torch parity PASSED" || echo "torch parity FAILED"
exit "$status"
