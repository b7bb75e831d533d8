#!/usr/bin/env bash
# `make serve`: runs glint on the embedded default model. Until the HTTP server lands (server
# issue), this generates from a prompt with `glint run`. The default model is a TINY RANDOM-WEIGHT
# Muse Glimmer (real 202,048-token vocabulary, random weights): its text is gibberish by design.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${GLINT_MODEL:-models/default-tiny-random-Q8_0.gguf}"
if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    echo "serve: writing the embedded default model (tiny, RANDOM weights) to $MODEL"
    build/glint make-model --preset tiny --type Q8_0 --seed 1 --out "$MODEL"
fi
PROMPT="${PROMPT:-The meaning of life is}"
echo "serve: glint run --model $MODEL (random weights: expect gibberish)"
exec build/glint run --model "$MODEL" --prompt "$PROMPT" -n "${N:-32}"
