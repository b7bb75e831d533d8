#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Images end to end through `glint serve` (tests/server/vision.mjs, the official openai npm SDK as
# the client) on a tiny random HF checkpoint with its vision tower, written by
# `glint make-model --format safetensors`: schema-valid replies, prefix-cache hits only for the
# same image, max_image_tokens, local files; a video under a JSON schema, its prefix-cache hits
# and its errors.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
gl_need_glint "server vision"
gl_need_npm
dir="$(gl_tiny_hf_vision)"
timeout -k 10 300 node tests/server/vision.mjs "$dir"
