#!/usr/bin/env bash
# Vision encoder oracle: gl_vision_encode (f32 activations and weights) against vision_ref.py, an
# independent float64 PyTorch transcription of arch doc §6.3, on a tiny config (hidden 64, 4 heads
# of 16, 3 layers with layer 2 full, 4x4 position table = 4x4-patch windows, adapter 48, out 32)
# and two grids: 2x4 patches (inside one window) and 6x10 (2x3 windows with partial edge windows,
# wider than the table, so bilinear taps fall into the zero padding). Tolerance: max|diff| <= 1e-5
# * max|ref| over the whole output of each case (measured ~3e-7). Negative controls: the reference
# of five plausible mistakes (clamped position taps, no windows, no full layer, RoPE row/col
# swapped, spatial-major pixel shuffle) must each FAIL the same tolerance. At the released widths:
# vision_ref.py --preset real2 (one-off, ~0.6 GB; see there).
# Env: GLINT_BUILD_DIR (default build), GLINT_TEST_DIR (default build/testdata).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${GLINT_BUILD_DIR:-$PWD/build}"
WORK="${GLINT_TEST_DIR:-$PWD/build/testdata}/vision-torch"
TEST_BIN="$BUILD/test_vision_oracle"
[ -x "$TEST_BIN" ] || { echo "vision torch: $TEST_BIN not built"; exit 1; }
/usr/bin/python3 -c "import torch, numpy" ||
    { echo "vision torch: /usr/bin/python3 lacks torch/numpy"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK"

status=0
/usr/bin/python3 tests/oracle/vision_ref.py "$WORK/ref"
GLINT_VISION_REF="$WORK/ref" "$TEST_BIN" || status=1
for control in clamp nowindow nofull rope_swap shuffle; do
    /usr/bin/python3 tests/oracle/vision_ref.py "$WORK/$control" --control "$control" >/dev/null
    if GLINT_VISION_REF="$WORK/$control" "$TEST_BIN" >"$WORK/$control.log" 2>&1; then
        echo "not ok control $control: glint matched a wrong reference"
        status=1
    else
        echo "ok control $control: fails as it must ($(grep -m1 'not ok' "$WORK/$control.log" |
            sed 's/.*max rel/max rel/'))"
    fi
done
[ "$status" = 0 ] && echo "vision torch PASSED" || echo "vision torch FAILED"
exit "$status"
