#!/usr/bin/env bash
# llama_build.sh: build llama.cpp's llama-bench, llama-batched-bench, llama-server and
# llama-mtmd-cli (the vision anchor, issue 21) natively
# (CPU only, Release, GGML_NATIVE=ON) from the source bundle that node-llama-cpp ships
# (tests/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle), as a speed anchor for glint.
# The bundle is cloned into a cache folder outside the repository; a second run for the same
# commit and flags does nothing. Progress goes to stderr; the last stdout line is the bin folder,
# so `LLAMA_BIN=$(bash bench/llama_build.sh)` works. Takes ~10-15 min on 2 cores the first time.
# Env: LLAMA_CPP_SRC    use this llama.cpp source tree instead of cloning the bundle
#      LLAMA_BUNDLE     bundle to clone (default: the node-llama-cpp one above)
#      LLAMA_CACHE      cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/glint)
#      LLAMA_BUILD_DIR  build folder (default <source>/build-glint)
#      LLAMA_JOBS       parallel jobs (default 2)
#      LLAMA_VULKAN=1   the Vulkan variant instead (issue 20's second oracle): same commit and
#                       flags but -DGGML_VULKAN=ON, into <source>/build-glint-vk, and only
#                       libllama (with ggml-vulkan linked in) for tests/oracle/check_vk_llama.sh.
#                       Needs glslc, libvulkan-dev and spirv-headers (apt); applies
#                       bench/llama_vk_patch.py's two guards to the shared source first (files
#                       only the Vulkan backend compiles; no-ops with newer Vulkan tools).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
BUNDLE="${LLAMA_BUNDLE:-$REPO/tests/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle}"
CACHE="${LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/glint}"
JOBS="${LLAMA_JOBS:-2}"
TARGETS=(llama-bench llama-batched-bench llama-server llama-mtmd-cli)
VK="${LLAMA_VULKAN:-0}"
[ "$VK" = 1 ] && TARGETS=(llama)
log() { echo "llama_build: $*" >&2; }

if [ -n "${LLAMA_CPP_SRC:-}" ]; then
    SRC="$(cd "$LLAMA_CPP_SRC" && pwd)"
    COMMIT="$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
else
    [ -f "$BUNDLE" ] || { log "no bundle at $BUNDLE (npm install in tests/oracle, or set LLAMA_CPP_SRC)"; exit 1; }
    COMMIT="$(git bundle list-heads "$BUNDLE" | awk '$2 == "HEAD" {print $1; exit}')"
    [ -n "$COMMIT" ] || COMMIT="$(git bundle list-heads "$BUNDLE" | awk 'NR == 1 {print $1}')"
    [ -n "$COMMIT" ] || { log "cannot read a commit from $BUNDLE"; exit 1; }
    SRC="$CACHE/llama.cpp-$COMMIT"
    if [ ! -f "$SRC/CMakeLists.txt" ]; then
        log "cloning $BUNDLE -> $SRC"
        mkdir -p "$CACHE"
        rm -rf "$SRC.tmp"
        git -c advice.detachedHead=false clone -q "$BUNDLE" "$SRC.tmp"
        git -C "$SRC.tmp" -c advice.detachedHead=false checkout -q "$COMMIT"
        mv "$SRC.tmp" "$SRC"
    fi
fi
BUILD="${LLAMA_BUILD_DIR:-$SRC/build-glint}"
[ "$VK" = 1 ] && BUILD="${LLAMA_BUILD_DIR:-$SRC/build-glint-vk}"
BIN="$BUILD/bin"

FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON
       -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF
       -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
[ "$VK" = 1 ] && FLAGS=("${FLAGS[@]/-DGGML_VULKAN=OFF/-DGGML_VULKAN=ON}")
GEN=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/Makefile" ] && GEN=(-G Ninja)
CC_VER="$(${CC:-cc} --version 2>/dev/null | head -1 || echo unknown)"
log "commit $COMMIT"
log "source $SRC"
log "flags  ${FLAGS[*]}"

INFO="$BIN/build-info.txt"
artifact() { [ "$VK" = 1 ] && echo "$BIN/lib$1.so" || echo "$BIN/$1"; }
all_built() { for t in "${TARGETS[@]}"; do [ -x "$(artifact "$t")" ] || return 1; done; }
if all_built && [ -f "$INFO" ] && grep -qxF "commit: $COMMIT" "$INFO" \
        && grep -qxF "flags: ${FLAGS[*]}" "$INFO"; then
    log "up to date ($INFO); nothing to do"
    echo "$BIN"
    exit 0
fi

t0=$(date +%s)
if [ "$VK" = 1 ]; then
    /usr/bin/python3 "$REPO/bench/llama_vk_patch.py" "$SRC" || { log "patching ggml-vulkan failed"; exit 1; }
    FLAGS_NOTE="; patched: bench/llama_vk_patch.py"
fi
cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" "${FLAGS[@]}" >&2
cmake --build "$BUILD" --target "${TARGETS[@]}" -j"$JOBS" >&2
all_built || { log "build finished but binaries are missing in $BIN"; exit 1; }
secs=$(( $(date +%s) - t0 ))
{
    echo "commit: $COMMIT"
    echo "source: $SRC"
    echo "flags: ${FLAGS[*]}"
    [ -n "${FLAGS_NOTE:-}" ] && echo "note: ${FLAGS_NOTE#; }"
    echo "compiler: $CC_VER"
    echo "targets: ${TARGETS[*]}"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in ${secs}s, -j$JOBS"
} >"$INFO"
log "built in ${secs}s; wrote $INFO"
echo "$BIN"
