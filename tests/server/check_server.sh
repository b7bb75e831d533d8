#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End-to-end check of `glint serve` with the official openai npm SDK (pinned in
# tests/oracle/package.json): tests/server/suite.mjs starts servers on free loopback ports with
# the tiny random-weight Q8_0 model and runs its named checks (chat and completions, streaming
# vs not, tools, every structured-output spelling validated with ajv, logprobs, stop strings,
# usage vs /tokenize, every error code, auth, metrics, disconnect cancellation, the deep health
# probe, SIGTERM drain), then tests/server/ops.mjs (access log, request histograms, CORS, IPv6,
# memory fitting, vLLM flag spellings); tests/server/responses.mjs does the same for
# POST /v1/responses (the SDK's responses.create / parse with zodTextFormat / stream). Fails if
# build/glint has no `serve` command.
# Optional, slower: GL_SERVER_GUIDED=1 adds tests/server/guided200.mjs (200 MaskBench schemas
# through response_format); GL_SERVER_LOAD=1 adds tests/server/load.mjs (64 streaming clients for
# GL_SERVER_LOAD_S seconds, default 60, then 32 disconnects; RSS growth and page leaks).
# GL_SERVE_DEVICE=vulkan[:N]: every server runs on that device (`--device`); GL_TEST_TIMEOUT_SCALE=K
# multiplies every wait and deadline (lavapipe: K = 10; the run is in docs/STATUS.md).
# GL_SERVE_EXTRA_ARGS='["--flag", "value"]' (a JSON array) is appended to every server's arguments,
# e.g. a --speculative-config (docs/STATUS.md: the suite with ngram and DFlash speculation on).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
gl_need_glint "server"
if ! "$GLINT_BIN" serve --help >/dev/null 2>&1; then
    echo "FAIL server: '$GLINT_BIN serve --help' fails: no serve command"
    "$GLINT_BIN" serve --help 2>&1 | head -n 3 | sed 's/^/    /'
    exit 1
fi
gl_need_npm
MODEL="$(gl_tiny_model Q8_0)"
k="${GL_TEST_TIMEOUT_SCALE:-1}"
t() { awk -v k="$k" -v s="$1" 'BEGIN { printf "%d", s * k }'; }

rc=0
timeout -k 10 "$(t 300)" node tests/server/suite.mjs "$MODEL" || rc=1
# Server operations (issue 19): access log, vLLM's request histograms, CORS, IPv6, memory fitting,
# vLLM flag spellings, --generation-config (about 20 s).
timeout -k 10 "$(t 200)" node tests/server/ops.mjs "$MODEL" || rc=1
timeout -k 10 "$(t 120)" node tests/server/responses.mjs "$MODEL" || rc=1
# Drop-in (issue 19): the openai SDK's zod helpers, pydantic models, request fields, tracing and
# usage details (about 25 s).
timeout -k 10 "$(t 300)" node tests/server/dropin.mjs "$MODEL" || rc=1
if [ "${GL_SERVER_GUIDED:-0}" = 1 ]; then
    timeout -k 10 "$(t 900)" node tests/server/guided200.mjs --model "$MODEL" || rc=1
fi
if [ "${GL_SERVER_LOAD:-0}" = 1 ]; then
    timeout -k 10 $((${GL_SERVER_LOAD_S:-60} + 300)) \
        node tests/server/load.mjs --model "$MODEL" --duration "${GL_SERVER_LOAD_S:-60}" || rc=1
fi
[ "$rc" = 0 ] && echo "server: OK" || echo "server: FAILED"
exit "$rc"
