#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spec_curve.sh: speculative decoding's cost curve (issue 22) with the replay drafter: per batch
# size, time per generated token with the replay drafter (the model's own greedy continuation,
# each draft token corrupted with probability 1 - alpha) at every alpha and k, against
# speculation off, interleaved off / on / off / on ... in one process (`glint bench
# --spec-curve`, src/cli/cmd_bench.c). Prints a markdown table and one JSON line per config.
#
# Env: GLINT_BIN (build/glint)  SPEC_MODEL (build/s30_4l_q4km.gguf, written on first use: the
#      30b-shape preset, 4 layers, Q4_K_M)  SPEC_BATCHES (1,8)  SPEC_ALPHAS (0,0.3,0.5,0.7,0.9)
#      SPEC_KS (2,4,8,16)  SPEC_N (16 tokens per sequence)  SPEC_ROUNDS (3)  SPEC_THREADS (2)
#      SPEC_COST_MODEL (0; 1: the engine's cost model chooses each step's draft length 0..k;
#      both: each k fixed and the cost model up to k, in the same rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
MODEL="${SPEC_MODEL:-build/s30_4l_q4km.gguf}"
if [ ! -f "$MODEL" ]; then
    "$GLINT_BIN" make-model --preset 30b-shape --layers 4 --type Q4_K_M --out "$MODEL"
fi
extra=()
case "${SPEC_COST_MODEL:-0}" in
1) extra+=(--spec-cost-model) ;;
both) extra+=(--spec-cost-model-vs-fixed) ;;
esac
exec "$GLINT_BIN" bench -m "$MODEL" --spec-curve --batch "${SPEC_BATCHES:-1,8}" \
    --alpha "${SPEC_ALPHAS:-0,0.3,0.5,0.7,0.9}" --spec-k "${SPEC_KS:-2,4,8,16}" \
    -n "${SPEC_N:-16}" -r "${SPEC_ROUNDS:-3}" -t "${SPEC_THREADS:-2}" "${extra[@]}"
