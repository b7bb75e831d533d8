#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_vk_llama: llama.cpp as a second oracle for glint's Vulkan backend (issue 20). On the tiny
# F32, Q8_0 and Q4_K_M models (gl_tiny_model), all-position prompt logits of
# `glint eval --device vulkan` against llama.cpp's Vulkan build on the same device (lavapipe here:
# GGML_VK_VISIBLE_DEVICES=0, since ggml-vulkan skips CPU-type devices unless named), -ngl 99,
# F32 KV, no flash attention. Gates: glint-vk vs llama.cpp-CPU within check_parity's per-type
# tolerances and tie rule (parity_run.TOL); glint-vk vs llama.cpp-Vulkan within 1.25x llama.cpp-
# Vulkan's own distance from its CPU build on the same prompt (its rounding differs: 4e-3 on F32,
# 8e-2 on Q8_0), or check_parity's tolerance if that is looser. Offload is verified from llama.cpp's
# log and the eval callback's per-buffer node count. Negative control (must fail): glint on a copy
# with blk.2.ffn_down.weight's first half of rows x 1.5 (the post-FFN norm cancels a uniform scale). Body: tests/oracle/vk_llama/vk_llama_run.py.
# Not part of `make test`: the Vulkan llama.cpp build takes over an hour on 2 cores
# (LLAMA_VULKAN=1 bash bench/llama_build.sh), and each lavapipe eval takes tens of seconds.
# Skips (exit 0) when that build or a Vulkan device is absent.
# Env: LLAMA_VK_BIN (folder with the Vulkan build's libllama.so and build-info.txt; default the
#      newest <cache>/llama.cpp-*/build-glint-vk/bin), LLAMA_BIN (the CPU build, for context),
#      GLINT_BIN, GLINT_TEST_DIR, GLINT_VK_LLAMA_TYPES (default "F32 Q8_0 Q4_K_M"),
#      GLINT_VK_LLAMA_PROMPTS (indices into parity_prompts.PROMPTS; default check_parity's
#      LOGIT_PROMPTS: 0 1, and 15 for F32; lavapipe takes ~10 s a token on a busy 2-core box).
set -uo pipefail
# By hand only (about 2 min with the build present, and the build itself takes over an hour):
# `make test` runs every tests/oracle/check_*.sh, so without GLINT_VK_LLAMA=1 this skips.
if [ "${GLINT_VK_LLAMA:-0}" != 1 ]; then
    echo "SKIP check_vk_llama: by hand, GLINT_VK_LLAMA=1 bash tests/oracle/check_vk_llama.sh"
    exit 0
fi
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$GL_REPO_ROOT" || exit 1
gl_need_glint check_vk_llama
cache="${LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/glint}"
VKBIN="${LLAMA_VK_BIN:-$(ls -td "$cache"/llama.cpp-*/build-glint-vk/bin 2>/dev/null | head -1)}"
LSRC="$(sed -n 's/^source: //p' "$VKBIN/build-info.txt" 2>/dev/null)"
if [ -z "$VKBIN" ] || [ ! -f "$VKBIN/libllama.so" ] || [ ! -f "$LSRC/include/llama.h" ]; then
    echo "SKIP: check_vk_llama: llama.cpp's Vulkan build is absent (LLAMA_VULKAN=1 bash bench/llama_build.sh)"
    exit 0
fi
if ! "$GLINT_BIN" devices >/dev/null 2>&1; then
    echo "SKIP: check_vk_llama: no Vulkan device (glint devices)"
    exit 0
fi
DIR="$GLINT_TEST_DIR/vk-llama"
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
build_harness() { # LIBDIR OUT
    cc -std=c11 -O2 -Wall -Wextra -I"$LSRC/include" -I"$LSRC/ggml/include" \
        "$HERE/vk_llama/llama_logits.c" -o "$2" -L"$1" -lllama -lggml-base -lggml \
        -Wl,-rpath,"$1" 2>"$DIR/cc.log" ||
        { echo "FAIL: building llama_logits against $1: $(head -3 "$DIR/cc.log")"; exit 1; }
}
build_harness "$VKBIN" "$DIR/llama_logits_vk"
cpu=()
CPUBIN="$(gl_llama_bin)"
if [ -n "$CPUBIN" ] && [ -f "$CPUBIN/libllama.so" ]; then
    build_harness "$CPUBIN" "$DIR/llama_logits_cpu"
    cpu=(--llama-cpu "$DIR/llama_logits_cpu")
fi
args=()
for t in ${GLINT_VK_LLAMA_TYPES:-F32 Q8_0 Q4_K_M}; do
    m="$(gl_tiny_model "$t")" || { echo "FAIL: check_vk_llama: cannot make the tiny $t model"; exit 1; }
    args+=(--model "$t=$m")
done
/usr/bin/python3 "$HERE/vk_llama/vk_llama_run.py" --glint "$GLINT_BIN" \
    --llama-vk "$DIR/llama_logits_vk" "${cpu[@]}" --gguf-py "$LSRC/gguf-py" --tmp "$DIR" "${args[@]}"
