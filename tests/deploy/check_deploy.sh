#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The deployment files (docs/DEPLOY.md):
#   1. deploy/kubernetes/*.yaml validated offline (tests/deploy/k8s_validate.mjs): built-in objects
#      and the HTTPRoute against the Kubernetes / Gateway API schemas of the npm packages
#      kubernetes-models and @kubernetes-models/gateway-api; the InferencePool and the endpoint
#      picker's config by structural rules (no packaged schema exists); cross references; every
#      `glint serve` flag against `glint serve --help`.
#   2. deploy/nginx/glint.conf in front of 3 `glint serve --threads 1` replicas of the tiny model
#      on loopback ports (tests/deploy/deploy.mjs, openai SDK): prefix-cache affinity >= 2x round
#      robin, SIGKILL under load (in-flight requests error, later ones succeed, the dead replica's
#      sessions answered elsewhere within 2 s), SIGTERM under load (no request lost).
# Needs nginx (Debian package `nginx`, scripts/install-deps.sh). Budget: 60 s wall on 2 loaded cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
gl_need_glint "deploy"
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$NGINX" ] || { echo "FAIL deploy: nginx not installed (scripts/install-deps.sh)"; exit 1; }
gl_need_npm kubernetes-models yaml @kubernetes-models/gateway-api
MODEL="$(gl_tiny_model Q8_0)"

rc=0
timeout -k 5 30 node tests/deploy/k8s_validate.mjs || rc=1
timeout -k 10 120 node tests/deploy/deploy.mjs --model "$MODEL" --nginx "$NGINX" || rc=1
[ "$rc" = 0 ] && echo "deploy: OK" || echo "deploy: FAILED"
exit "$rc"
