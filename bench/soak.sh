#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# soak.sh: `glint serve` under SOAK_MIN minutes (default 30) of mixed load on the tiny model --
# streamed chat, n=2 completions (streamed and not), guided json_schema, tool calls, client
# cancels and disconnects -- driven by tests/server/soak.mjs (8 clients; a 256 KiB KV pool, 128
# pages of the tiny model, and 64-token steps, so that preemption happens too). Samples the server's RSS and /metrics
# KV pages every 10 s and prints the RSS series after the warm-up (min, max, largest deviation,
# end drift) and the pages still held once idle; then SIGTERM, exit code 0 required. Exits non-zero on any failed request, an
# RSS deviation over 5% after the warm-up, leaked pages or a bad exit. A script, not a test.
#   bench/soak.sh                                      Release build (build/glint), 30 min
#   SOAK_MIN=5 SOAK_ASAN=1 bench/soak.sh               the ASan+LSan build (build-asan/glint):
#       build it with  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGLINT_SANITIZE=ON
#       -DGLINT_WERROR=ON && cmake --build build-asan --target glint. Requires 0 sanitizer
#       reports (LSan runs at the server's normal exit); the RSS bound is not applied (ASan's
#       quarantine grows the heap by design), pages and failures are.
# Extra arguments go to soak.mjs (e.g. --clients 4 --out samples.json --server-log log.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SOAK_ASAN:-0}" = 1 ]; then
    export GLINT_BIN="${GLINT_BIN:-build-asan/glint}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
    san=(--sanitizer --no-rss-check)
else
    san=()
fi
. tests/oracle/lib.sh
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
export GLINT_BIN
[ -x "$GLINT_BIN" ] || { echo "soak: $GLINT_BIN not built"; exit 1; }
[ -d tests/oracle/node_modules/openai ] && [ -d tests/oracle/node_modules/ajv-formats ] ||
    (cd tests/oracle && npm install --no-audit --no-fund --omit=optional --loglevel=error >/dev/null)
# The tiny model is written by the Release binary when there is one (faster than a sanitizer build).
maker="$GLINT_BIN"
[ -x build/glint ] && maker="$PWD/build/glint"
MODEL="$(GLINT_BIN="$maker" gl_tiny_model Q8_0)"
min="${SOAK_MIN:-30}"
exec timeout -k 10 $((min * 60 + 900)) node tests/server/soak.mjs --model "$MODEL" --minutes "$min" "${san[@]}" "$@"
