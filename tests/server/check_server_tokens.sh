#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_server_tokens.sh: `glint serve` gives the same tokens as the engine's reference path.
# On the tiny Q8_0 model, 8 seeded token-id-prompt requests (4 greedy, 4 at temperature 1 with
# distinct seeds, some with top_k / top_p / min_p; max_tokens 24, ignore_eos) to /v1/completions
# with return_token_ids, against `glint run --prompt-ids ... -n 24 --temp --seed --top-k --top-p
# --min-p --ids` with every sampling parameter passed explicitly on both sides. Run (a) alone, one
# after another, and (b) all 8 at once next to 8 unrelated n=2 temperature-1 requests (24
# sequences, chunked prefill, queueing, prefix-cache hits). All 16 must give run's ids exactly
# and its text (tests/server/server_tokens.py says how); a corrupted id must be caught.
# Loopback only, every wait bounded (HTTP timeouts, subprocess timeouts, a start deadline).
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata).
# GL_SERVE_EXTRA_ARGS='["--flag", "value"]' (a JSON array): appended to the server's arguments.
# GL_SERVE_DEVICE=vulkan[:N]: the server runs on that device, `glint run` (the reference) on the
# CPU, and the model is the tiny F32 file (GL_SERVE_TOKENS_TYPE overrides): device and CPU logits
# agree to ~2e-6 there, while on Q8_0 one Q8 activation rounding flip moves them by 2e-2 and
# greedy splits at a near tie (docs/STATUS.md). GL_TEST_TIMEOUT_SCALE=K multiplies every wait
# (lavapipe: K = 10; docs/STATUS.md has the run).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GLINT_TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
GLINT_BIN="${GLINT_BIN:-build/glint}"
[[ "$GLINT_BIN" = /* ]] || GLINT_BIN="$PWD/$GLINT_BIN"
export GLINT_BIN
[ -x "$GLINT_BIN" ] || { echo "check_server_tokens: $GLINT_BIN not built"; exit 1; }
# shellcheck source=/dev/null
source tests/oracle/lib.sh
type="${GL_SERVE_TOKENS_TYPE:-Q8_0}"
[ -z "${GL_SERVE_DEVICE:-}" ] || type="${GL_SERVE_TOKENS_TYPE:-F32}"
model="$(gl_tiny_model "$type")" || { echo "check_server_tokens: cannot make the tiny model"; exit 1; }
tmp="$(mktemp -d)"
trap '[ -n "${GLINT_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
export TMPDIR_TOK="$tmp"
scale="${GL_TEST_TIMEOUT_SCALE:-1}"
timeout "$(awk -v k="$scale" 'BEGIN { printf "%d", 600 * k }')" /usr/bin/python3 tests/server/server_tokens.py "$GLINT_BIN" "$model"
