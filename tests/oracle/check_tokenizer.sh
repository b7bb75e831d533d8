#!/usr/bin/env bash
# Tokenizer oracle check: glint's ids vs js-tiktoken on the same llama4 ranks file (valid UTF-8,
# invalid UTF-8 by segment, --special), glint's GGUF loader vs the same expectations, and
# llama.cpp (node-llama-cpp, vocab only) whose mismatches must all involve \p{M}. Uses the glint
# at $GLINT_BIN (default build/glint) and a vocab-only GGUF written by `glint make-model
# --header-only` under $GLINT_TEST_DIR. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
RANKS="${GLINT_VOCAB:-$PWD/../shared/data/tokenizer/llama4-tokenizer.model}"
TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
WORK="$TEST_DIR/tok-oracle"
mkdir -p "$WORK"

[ -x "$GLINT_BIN" ] || { echo "tokenizer: $GLINT_BIN not built"; exit 1; }
[ -f "$RANKS" ] || { echo "tokenizer: ranks file not found ($RANKS)"; exit 1; }

GGUF="$WORK/vocab-only.gguf"
"$GLINT_BIN" make-model --preset tiny --header-only --vocab "$RANKS" --out "$GGUF" >/dev/null

cd tests/oracle
node tok_oracle.mjs --glint "$GLINT_BIN" --ranks "$RANKS" --gguf "$GGUF" --workdir "$WORK"
