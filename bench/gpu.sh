#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The device checks for a lent GPU machine (issue 20), one prepared run: the Vulkan layer's and
# the Vulkan backend's unit tests on the real driver, then bench/microbench_vk.c (parity of the
# device's logits with the CPU's on a random 30b-shape model, pp/tg on the device and on the
# CPU, aggregate engine decode at several batch sizes on the device).
# The device machine lacks glint's build dependencies, so the binaries travel pre-built in
# $GLINT_GPU_DIR (default .gpu/, ignored by git): microbench_vk, test_vk, test_backend_vk (they
# link only libc, libpcre2-8 and libjansson, copied there too) and the vocabulary as `vocab`;
# the Vulkan loader travels as .gl/libvulkan1_*.deb (../.library device notes). Prepare here:
#   mkdir -p .gpu && cp build/{microbench_vk,test_vk,test_backend_vk} .gpu/ &&
#   cp -L /lib/x86_64-linux-gnu/{libpcre2-8.so.0,libjansson.so.4} .gpu/ &&
#   cp ../shared/data/tokenizer/llama4-tokenizer.model .gpu/vocab
# then run `bash bench/gpu.sh` there with .gpu and .gl carried. GPU_LAYERS (default 8) sets the
# model's depth.
set -uo pipefail
cd "$(dirname "$0")/.."
G="${GLINT_GPU_DIR:-.gpu}"
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig 2>/dev/null
export LD_LIBRARY_PATH="$PWD/$G${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
    [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
done
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
export GLINT_VK_VALIDATION="${GLINT_VK_VALIDATION:-0}" GLINT_VK_REQUIRE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
nproc; grep -m1 'model name' /proc/cpuinfo
echo "== test_vk"
VK_LOADER_DEBUG="${VK_LOADER_DEBUG:-error,warn}" timeout 90 "$G/test_vk" 2>&1 | tail -25
echo "== test_backend_vk"
timeout 150 "$G/test_backend_vk" 2>&1 | tail -20
echo "== microbench_vk"
timeout "${GPU_BENCH_S:-330}" "$G/microbench_vk" /tmp/glint-gpu.gguf "$G/vocab" "${GPU_LAYERS:-8}" \
    Q4_K_M 512 64 3 "$(nproc)" 1,8,32 0 2>&1
echo "rc=$?"
