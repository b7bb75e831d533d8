#!/usr/bin/env bash
# Image preprocessing oracle: `glint image preprocess` against Pillow 9.4 (Debian python3-pil) on
# a fixed-seed set of 60+ PNG/JPEG files (every PNG colour type and depth, tRNS, Adam7, palette,
# 16-bit; baseline JPEG at 4:4:4/4:2:2/4:2:0, progressive, gray, CMYK; 1x1 to 3000x7 and a file
# over the token cap). Decoded pixels must be identical to transformers' convert_to_rgb, resized
# pixels to Image.resize(LANCZOS) (at most 1 level off on at most 1e-4 of the values), grids to
# the §6.2 search, patch vectors to HF's normalisation; broken files must be refused by both, and
# on every file of tests/fuzz/corpus/image Pillow and glint must agree (same pixels, or both fail).
# The work is in image_ref.py. Prints "image pillow: ..." with the counts; non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
WORK="${GLINT_TEST_DIR:-$PWD/build/testdata}/image-pillow"
mkdir -p "$WORK"

[ -x "$GLINT_BIN" ] || { echo "image pillow: $GLINT_BIN not built"; exit 1; }
/usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null ||
    { echo "image pillow: python3-pil or python3-numpy missing (apt-get install -y python3-pil)"; exit 1; }

exec /usr/bin/python3 tests/oracle/image_ref.py "$GLINT_BIN" "$WORK" tests/fuzz/corpus/image
