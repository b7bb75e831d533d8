#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Faults with nothing lost (tests/server/faults.mjs, official openai-compatible HTTP on loopback):
# KV exhaustion (64 concurrent requests on a 64-page pool: preemption happens and every reply is
# identical to the same request run alone; pages back to 0), requests the pool can never hold
# refused with 400 at once, SIGTERM with 32 streams queued (all finish as alone, a new
# connection is refused, exit 0), finish_reason "length" only at max_tokens / max_model_len, and
# an engine failure mid-generation surfacing as an SSE error event + [DONE] or an HTTP 500.
# About 40 s on 2 loaded cores. The ASan/LSan soak is bench/soak.sh (SOAK_ASAN=1), not run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
gl_need_glint "faults"
gl_need_npm
MODEL="$(gl_tiny_model Q8_0)"
rc=0
timeout -k 10 240 node tests/server/faults.mjs "$MODEL" || rc=1
[ "$rc" = 0 ] && echo "faults: OK" || echo "faults: FAILED"
exit "$rc"
