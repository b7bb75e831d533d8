#!/usr/bin/env bash
# vision_ab: the vision encoder before/after, interleaved A B A B in one run (memory bandwidth and
# the shared machine's load drift; interleaving puts both under the same conditions).
# A = microbench_vision built from BASE_BUILD (an older build dir), B = this tree's build.
# Usage: bench/vision_ab.sh BASE_BUILD [pairs=2] [blocks...=1 2]   (64x64 patches, 2 threads)
# Prints one line per run: label blocks seconds; then the per-size medians and the ratio A/B.
# VISION_AB_TYPE=q8: Q8_0 matrices (microbench_vision's fifth argument). A microbench_vision
# older than that argument runs BF16 instead; the run stops then (link bench/microbench_vision.c
# against the older build's libglint_core.a to get an A that takes it).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${1:?usage: bench/vision_ab.sh BASE_BUILD [pairs] [blocks...]}"
PAIRS="${2:-2}"
shift $(($# >= 2 ? 2 : 1))
BLOCKS=("$@")
[ ${#BLOCKS[@]} -gt 0 ] || BLOCKS=(1 2)
A="$BASE/microbench_vision"
B="build/microbench_vision"
[ -x "$A" ] && [ -x "$B" ] || { echo "vision_ab: need $A and $B"; exit 1; }
TYPE="${VISION_AB_TYPE:-bf16}"
WANT=BF16
[ "$TYPE" = q8 ] && WANT=Q8_0
secs() { "$1" 64 64 "$2" 2 "$TYPE" 2>/dev/null | grep " $WANT weights" | grep -oE '[0-9.]+ s$' | grep -oE '[0-9.]+' | tail -1; }
declare -A runs
for n in "${BLOCKS[@]}"; do
    for p in $(seq "$PAIRS"); do
        for side in A B; do
            bin=$A
            [ "$side" = B ] && bin=$B
            s=$(secs "$bin" "$n" || true)
            [ -n "$s" ] || { echo "vision_ab: $bin gave no $WANT time"; exit 1; }
            echo "$side blocks=$n run=$p ${s}s"
            runs[$side$n]="${runs[$side$n]:-} $s"
        done
    done
done
for n in "${BLOCKS[@]}"; do
    python3 -c "import statistics as s,sys; a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]; print(f'blocks={sys.argv[3]} A median {s.median(a):.2f}s B median {s.median(b):.2f}s ratio A/B {s.median(a)/s.median(b):.2f}')" "${runs[A$n]}" "${runs[B$n]}" "$n"
done
