#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spec_equal.sh [structured] [logprobs]: requests under ngram speculation give the same replies as
# without, on a 3-layer all-sliding tiny Q8_0 model made here: tests/server/spec_structured.py
# (every structured-output kind, ~17 s) and tests/server/spec_logprobs.py (logprobs, ~13 s) say
# how; both by default. By hand (named outside check_*.sh so tests/run_all.sh does not run it: CI
# time). Env: GLINT_BIN (default build/glint).
set -euo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
[ -x "$GLINT_BIN" ] || { echo "spec_equal: $GLINT_BIN not built"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$GLINT_BIN" make-model --preset tiny --layers 3 --pattern period --type Q8_0 \
    --out "$tmp/tiny3.gguf" >/dev/null 2>&1 || { echo "spec_equal: make-model failed"; exit 1; }
checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(structured logprobs)
for n in "${checks[@]}"; do
    [ -f "tests/server/spec_$n.py" ] || { echo "spec_equal: no check '$n'"; exit 2; }
    timeout 600 /usr/bin/python3 "tests/server/spec_$n.py" "$GLINT_BIN" "$tmp/tiny3.gguf"
done
