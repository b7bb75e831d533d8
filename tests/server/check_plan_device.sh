#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_plan_device.sh: `glint plan --device vulkan` predicts the device memory `glint serve
# --device vulkan` allocates, byte for byte: serve's start-up line "device buffers: D bytes
# device-local, H bytes host-visible" (the allocator's sums) against plan's device_local_total
# and host_visible, on the tiny Q4_K_M model, with every layer and with --n-gpu-layers 2 (the
# head on the CPU); then plan refuses, with the numbers, a KV pool wider than the device's
# binding and a model larger than its heap (the 30b-shape header), and serve names
# --n-gpu-layers out of range; first (no device needed) --n-gpu-layers on the CPU warns. SKIP
# (exit 0) where there is no Vulkan device (GLINT_VK_REQUIRE=1: fail). Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GLINT_TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
GLINT_BIN="${GLINT_BIN:-build/glint}"
[[ "$GLINT_BIN" = /* ]] || GLINT_BIN="$PWD/$GLINT_BIN"
export GLINT_BIN
[ -x "$GLINT_BIN" ] || { echo "check_plan_device: $GLINT_BIN not built"; exit 1; }
# shellcheck source=/dev/null
source tests/oracle/lib.sh
# --n-gpu-layers without --device (the CPU) is accepted and ignored with a warning (llama.cpp's
# CPU builds do the same); the default (-1) says nothing. No device needed.
hdr="$(mktemp)"
"$GLINT_BIN" make-model --preset tiny --header-only --out "$hdr" >/dev/null 2>&1
for c in "plan -ngl 2:1" "plan --device cpu --n-gpu-layers 0:1" "plan:0" "plan -ngl -1:0"; do
    read -r -a a <<<"${c%:*}"
    n="$("$GLINT_BIN" "${a[@]}" --model "$hdr" 2>&1 >/dev/null | grep -c "n-gpu-layers .* ignored: no --device" || true)"
    if [ "$n" != "${c##*:}" ]; then
        echo "FAIL check_plan_device: 'glint ${a[*]}' gave $n warnings about --n-gpu-layers, want ${c##*:}"
        rm -f "$hdr"
        exit 1
    fi
done
rm -f "$hdr"
echo "  --n-gpu-layers on the CPU: one warning, none by default"
if ! "$GLINT_BIN" devices >/dev/null 2>&1; then
    echo "SKIP check_plan_device: no Vulkan device"
    [ "${GLINT_VK_REQUIRE:-0}" = 1 ] && exit 1
    exit 0
fi
model="$(gl_tiny_model Q4_K_M)" || { echo "check_plan_device: cannot make the tiny model"; exit 1; }
tmp="$(mktemp -d)"
srv=""
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
args=(--kv-cache-memory 64MiB --max-model-len 1024)
for ngl in -1 2; do
    "$GLINT_BIN" plan --model "$model" --device vulkan -ngl "$ngl" "${args[@]}" >"$tmp/plan.json"
    want="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["device"]; print(d["device_local_total"], d["host_visible"])' "$tmp/plan.json")"
    "$GLINT_BIN" serve --model "$model" --device vulkan -ngl "$ngl" "${args[@]}" --host 127.0.0.1 \
        --port 0 >"$tmp/serve.log" 2>&1 &
    srv=$!
    for _ in $(seq 120); do
        grep -q "device buffers\|rror" "$tmp/serve.log" && break
        kill -0 "$srv" 2>/dev/null || break
        sleep 0.5
    done
    kill "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    srv=""
    got="$(sed -n 's/.*device buffers: \([0-9]*\) bytes device-local, \([0-9]*\) bytes host-visible.*/\1 \2/p' "$tmp/serve.log")"
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
        echo "  -ngl $ngl: plan = serve: $got (device-local, host-visible bytes)"
    else
        echo "  FAIL -ngl $ngl: plan '$want', serve '${got:-no line}'"; tail -3 "$tmp/serve.log"; fail=1
    fi
done
# Refusals, with the numbers: a pool wider than one binding (lavapipe: 128 MiB), a model larger
# than the heap, and --n-gpu-layers out of range.
expect_refusal() { # WHAT PATTERN CMD...
    local what="$1" pat="$2"; shift 2
    if "$@" >/dev/null 2>"$tmp/err.txt"; then
        echo "  FAIL $what: accepted"; fail=1
    elif grep -q -- "$pat" "$tmp/err.txt"; then
        echo "  $what refused: $(grep -m1 -- "$pat" "$tmp/err.txt" | head -c 240)"
    else
        echo "  FAIL $what: $(cat "$tmp/err.txt")"; fail=1
    fi
}
bind_mib="$("$GLINT_BIN" devices | sed -n 's/.*storage binding \([0-9]*\) MiB.*/\1/p' | head -1)"
bind=$((${bind_mib:-0} * 1048576))
if [ "$bind" -gt 0 ] && [ "$bind" -lt $((1 << 34)) ]; then
    expect_refusal "a KV pool over the binding" "storage binding" "$GLINT_BIN" plan --model "$model" \
        --device vulkan --kv-cache-memory $((bind * 2)) --max-model-len 1024
fi
"$GLINT_BIN" make-model --preset 30b-shape --header-only --out "$tmp/big.gguf" >/dev/null 2>&1
expect_refusal "the 30b-shape model" "but its memory heap has" "$GLINT_BIN" plan \
    --model "$tmp/big.gguf" --device vulkan --kv-cache-memory 64MiB --max-model-len 4096
expect_refusal "--n-gpu-layers 9 of 4" "--n-gpu-layers 9" "$GLINT_BIN" serve --model "$model" \
    --device vulkan -ngl 9 "${args[@]}" --host 127.0.0.1 --port 0
if [ "$fail" != 0 ]; then
    echo "check_plan_device: FAILED"
    exit 1
fi
echo "check_plan_device: ok"
