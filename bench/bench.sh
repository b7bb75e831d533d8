#!/usr/bin/env bash
# bench.sh: glint vs llama.cpp speed on the same 30b-shape 4-layer Q4_K_M GGUF (real layer dims,
# 202,048-token vocab), interleaved A/B/A/B and bracketed by a memory-bandwidth probe, because
# this VM's bandwidth drifts by 2x within minutes (/work/shared/docs/perf-anchor.md §5).
# Prints a markdown table: per round pp512/tg128 t/s of each side, glint/llama.cpp ratios, and
# the probe's GB/s; raw JSON stays in bench/out/. Not part of the test suite (takes minutes).
# Env: GLINT_BIN (default build/glint), BENCH_MODEL (default bench/out/30b4-q4km.gguf, created
#      on first use), BENCH_ROUNDS (2), BENCH_REPS (3), BENCH_THREADS (2), BENCH_P (512),
#      BENCH_N (128).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
mkdir -p "$OUT"
GLINT_BIN="${GLINT_BIN:-build/glint}"
MODEL="${BENCH_MODEL:-$OUT/30b4-q4km.gguf}"
ROUNDS="${BENCH_ROUNDS:-2}" REPS="${BENCH_REPS:-3}" THREADS="${BENCH_THREADS:-2}"
P="${BENCH_P:-512}" N="${BENCH_N:-128}"
[ -x "$GLINT_BIN" ] || { echo "bench: $GLINT_BIN not built"; exit 1; }

if [ ! -s "$MODEL" ]; then
    echo "bench: writing $MODEL (30b-shape, 4 layers, Q4_K_M; a few minutes, once)" >&2
    "$GLINT_BIN" make-model --preset 30b-shape --layers 4 --type Q4_K_M --out "$MODEL.tmp" >&2
    mv "$MODEL.tmp" "$MODEL"
fi
if [ ! -x "$OUT/bw" ] || [ bench/bw.c -nt "$OUT/bw" ]; then
    gcc -O2 -march=native -fopenmp -o "$OUT/bw" bench/bw.c
fi

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
log="$OUT/bench-$stamp.log"
probe() { # -> "best mean" GB/s of a 2-thread read-only sum over 2 GiB
    "$OUT/bw" 2 2 | tee -a "$log" | sed -E 's/.*best ([0-9.]+) GB\/s mean ([0-9.]+) GB\/s.*/\1 \2/'
}
probes=() loads=()
load1() { cut -d' ' -f1 /proc/loadavg; }
echo "# bench $stamp: $MODEL, -p $P -n $N -t $THREADS -r $REPS, $ROUNDS rounds" | tee "$log" >&2
probes+=("$(probe)")
for r in $(seq 1 "$ROUNDS"); do
    loads+=("$(load1)")
    echo "round $r: glint (load average $(load1))" >&2
    "$GLINT_BIN" bench --model "$MODEL" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" --json \
        >"$OUT/glint-$stamp-r$r.json" 2>>"$log"
    echo "round $r: llama.cpp" >&2
    node bench/llama_bench.mjs "$MODEL" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" \
        >"$OUT/llama-$stamp-r$r.json" 2>>"$log"
    probes+=("$(probe)")
done

/usr/bin/python3 - "$OUT" "$stamp" "$ROUNDS" "$MODEL" "$P" "$N" "${loads[*]}" "${probes[@]}" <<'EOF'
import json, os, sys
out, stamp, rounds, model, p, n = sys.argv[1:7]
rounds = int(rounds)
loads = sys.argv[7].split()
probes = [tuple(map(float, s.split())) for s in sys.argv[8:]]

def load(side, r):
    with open(f"{out}/{side}-{stamp}-r{r}.json") as f:
        return {x["test"]: x for x in json.load(f)}

fmt = lambda x: f"{x['avg_ts']:.2f} ± {x['stddev_ts']:.2f}"  # noqa: E731
pp, tg = f"pp{p}", f"tg{n}"
size = os.path.getsize(model) / 2**30
print(f"\n### glint vs llama.cpp, {os.path.basename(model)} ({size:.2f} GiB), {stamp}\n")
print(f"| round | load avg | probe before GB/s (best/mean) | glint {pp} | llama.cpp {pp} | ratio | "
      f"glint {tg} | llama.cpp {tg} | ratio | probe after GB/s |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
ratios = {pp: [], tg: []}
for r in range(1, rounds + 1):
    g, l = load("glint", r), load("llama", r)
    cells = []
    for t in (pp, tg):
        if t in g and t in l:
            q = g[t]["avg_ts"] / l[t]["avg_ts"]
            ratios[t].append(q)
            cells += [fmt(g[t]), fmt(l[t]), f"{q:.2f}"]
        else:
            cells += ["-", "-", "-"]
    b0, b1 = probes[r - 1], probes[r]
    print(f"| {r} | {loads[r - 1]} | {b0[0]:.1f} / {b0[1]:.1f} | " + " | ".join(cells) +
          f" | {b1[0]:.1f} / {b1[1]:.1f} |")
for t in (pp, tg):
    if ratios[t]:
        print(f"\nglint/llama.cpp {t}: " + ", ".join(f"{q:.2f}" for q in ratios[t]) +
              f" (mean {sum(ratios[t]) / len(ratios[t]):.2f})")
EOF
echo "raw: $OUT/{glint,llama}-$stamp-r*.json, log $log" >&2
