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
set -euo pipefail
cd "$(dirname "$0")/../.."
export GLINT_TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
GLINT_BIN="${GLINT_BIN:-build/glint}"
[[ "$GLINT_BIN" = /* ]] || GLINT_BIN="$PWD/$GLINT_BIN"
export GLINT_BIN
[ -x "$GLINT_BIN" ] || { echo "check_server_tokens: $GLINT_BIN not built"; exit 1; }
# shellcheck source=/dev/null
source tests/oracle/lib.sh
model="$(gl_tiny_model Q8_0)" || { echo "check_server_tokens: cannot make the tiny model"; exit 1; }
tmp="$(mktemp -d)"
trap '[ -n "${GLINT_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
export TMPDIR_TOK="$tmp"
timeout 600 /usr/bin/python3 tests/server/server_tokens.py "$GLINT_BIN" "$model"
