#!/usr/bin/env bash
# check_parity.sh: glint vs llama.cpp (node-llama-cpp 3.22.1) on tiny random muse-glimmer models
# at F32, Q8_0, Q4_K_M and Q5_K_M: all-position prompt logits within a per-type tolerance, the
# tokenizer on a 16-prompt battery, and 16 x 32 greedy tokens where every divergence must be a
# near tie (<= 0.5 nats) of llama.cpp. Tolerances and their justification: parity_run.py.
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata),
#      GLINT_PARITY_TYPES (default "F32 Q8_0 Q4_K_M Q5_K_M"), GLINT_ORACLE_THREADS (llama.cpp
#      threads, default 1: ggml computes each output element on one thread, so results do not
#      depend on it, and on the shared 2-core box a 2-thread ggml pool spin-waits 2-5x slower).
# Exit status 0 iff everything passed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GLINT_TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
GLINT_BIN="${GLINT_BIN:-build/glint}"
[[ "$GLINT_BIN" = /* ]] || GLINT_BIN="$PWD/$GLINT_BIN"
export GLINT_BIN
export GLINT_ORACLE_THREADS="${GLINT_ORACLE_THREADS:-1}"
mkdir -p "$GLINT_TEST_DIR"
[ -x "$GLINT_BIN" ] || { echo "check_parity: $GLINT_BIN not built"; exit 1; }
[ -d tests/oracle/node_modules/node-llama-cpp ] ||
    { echo "check_parity: node-llama-cpp missing (make test installs it)"; exit 1; }

if [ -f tests/oracle/lib.sh ]; then
    # shellcheck source=/dev/null
    source tests/oracle/lib.sh
fi
if ! declare -F gl_tiny_model >/dev/null; then
    gl_tiny_model() { # TYPE -> path of the cached tiny model of that type
        local out="$GLINT_TEST_DIR/tiny-$1.gguf"
        if [ ! -s "$out" ]; then
            "$GLINT_BIN" make-model --preset tiny --type "$1" --out "$out.tmp" >&2 &&
                mv "$out.tmp" "$out"
        fi
        echo "$out"
    }
fi

args=()
for t in ${GLINT_PARITY_TYPES:-F32 Q8_0 Q4_K_M Q5_K_M}; do
    m="$(gl_tiny_model "$t")" || { echo "check_parity: cannot make the tiny $t model"; exit 1; }
    args+=(--model "$t=$m")
done
# negative control: same preset and type as the first model, other weights
ctl="$GLINT_TEST_DIR/tiny-F32-seed77.gguf"
if [ ! -s "$ctl" ]; then
    "$GLINT_BIN" make-model --preset tiny --type F32 --seed 77 --out "$ctl.tmp" >/dev/null &&
        mv "$ctl.tmp" "$ctl"
fi
exec /usr/bin/python3 tests/oracle/parity_run.py --glint "$GLINT_BIN" --control "$ctl" "${args[@]}"
