#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spec_structured.sh: structured-output requests under ngram speculation give the same replies as
# without (tests/server/spec_structured.py says how), on a 3-layer all-sliding tiny Q8_0 model made
# here. By hand (~17 s; named outside check_*.sh so tests/run_all.sh does not run it: CI time).
# Env: GLINT_BIN (default build/glint).
set -euo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
[ -x "$GLINT_BIN" ] || { echo "spec_structured: $GLINT_BIN not built"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$GLINT_BIN" make-model --preset tiny --layers 3 --pattern period --type Q8_0 \
    --out "$tmp/tiny3.gguf" >/dev/null 2>&1 || { echo "spec_structured: make-model failed"; exit 1; }
timeout 600 /usr/bin/python3 tests/server/spec_structured.py "$GLINT_BIN" "$tmp/tiny3.gguf"
