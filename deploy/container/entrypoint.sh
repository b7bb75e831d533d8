#!/bin/sh
# SPDX-License-Identifier: MIT
# The image's entrypoint (Containerfile): `glint serve` on 0.0.0.0:$GLINT_PORT with the arguments
# given after the image name appended, vLLM style (`podman run glint:latest --model /models/F.gguf
# --max-model-len 8192`); a flag given twice takes its last value, so these override the defaults.
# Without --model it serves the default model: the tiny RANDOM-weight Muse Glimmer (real
# vocabulary, gibberish text) that `make serve` uses, written to /tmp on first start (0.1 GB, 1 s).
# `exec` makes glint PID 1: its SIGTERM handler drains and exits 0, and it starts no children.
set -eu
for a in "$@"; do
    case "$a" in
    --model) exec glint serve --host 0.0.0.0 --port "${GLINT_PORT:-8000}" "$@" ;;
    --help | -h) exec glint serve --help ;;
    esac
done
model="${GLINT_DEFAULT_MODEL:-/tmp/glint-tiny-random-Q8_0.gguf}"
if [ ! -s "$model" ]; then
    echo "glint-entrypoint: no --model given: writing the tiny RANDOM-weight default model to" \
        "$model (serve a real one: -v DIR:/models:ro ... --model /models/F.gguf)" >&2
    glint make-model --preset tiny --type Q8_0 --seed 1 --out "$model.tmp"
    mv "$model.tmp" "$model"
fi
exec glint serve --host 0.0.0.0 --port "${GLINT_PORT:-8000}" --model "$model" \
    --served-model-name glint-tiny-random "$@"
