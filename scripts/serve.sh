#!/usr/bin/env bash
# `make serve`: runs the OpenAI-compatible server on the embedded default model. The default
# model is a TINY RANDOM-WEIGHT Muse Glimmer (real 202,048-token vocabulary, random weights): it
# exercises every code path, and its text is gibberish by design. Nothing downloads weights.
#   GLINT_MODEL=F.gguf  serve another file;  PORT=8000;  HOST=127.0.0.1;  extra flags: SERVE_ARGS
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${GLINT_MODEL:-models/default-tiny-random-Q8_0.gguf}"
PORT="${PORT:-8000}"
HOST="${HOST:-127.0.0.1}"
if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    echo "serve: writing the embedded default model (tiny, RANDOM weights) to $MODEL"
    build/glint make-model --preset tiny --type Q8_0 --seed 1 --out "$MODEL"
fi
cat <<MSG
serve: glint serve on $MODEL (random weights: expect gibberish). Try, once it says "serving":
  curl http://$HOST:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "glint-tiny-random", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 32}'
MSG
# shellcheck disable=SC2086
exec build/glint serve --model "$MODEL" --served-model-name glint-tiny-random --host "$HOST" \
    --port "$PORT" ${SERVE_ARGS:-}
