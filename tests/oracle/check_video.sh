#!/usr/bin/env bash
# Video preprocessing oracle: `glint video preprocess` on clips generated here with the ffmpeg
# CLI (testsrc2: several sizes, frame rates and codecs, an odd frame count, a clip under 1 s, a
# 60 s clip over the 96-frame cap, odd dimensions, a one-frame clip, BT.709 and full-range tags),
# plus reruns with other --fps / --max-frames. Frame counts and fps come from ffprobe; sample
# indices and timestamps must equal a Python port of HF's sample_frames with torch's float32
# linspace kernel (emulated for torch 2.x; the model is checked against the installed torch) and
# HF's float32 timestamps; grids, token counts and the expanded prompt text HF's smart_resize and
# replace_video_token; every sampled frame the ffmpeg CLI's decode of the same frame number
# (select=eq(n,K), swscale bilinear, rgb24) resized with Pillow's Lanczos, byte for byte; patch
# vectors HF's patchify layout and fused normalisation; truncated, garbage and empty files must be
# refused. The work is in video_ref.py (about 30 s). Prints "video: ..." with the counts; non-zero
# on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
WORK="${GLINT_TEST_DIR:-$PWD/build/testdata}/video"
mkdir -p "$WORK"

[ -x "$GLINT_BIN" ] || { echo "video: $GLINT_BIN not built"; exit 1; }
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null ||
    { echo "video: the ffmpeg CLI is missing (apt-get install -y ffmpeg)"; exit 1; }
/usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null ||
    { echo "video: python3-pil or python3-numpy missing (apt-get install -y python3-pil)"; exit 1; }

exec /usr/bin/python3 tests/oracle/video_ref.py "$GLINT_BIN" "$WORK"
