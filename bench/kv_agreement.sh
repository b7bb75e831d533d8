#!/usr/bin/env bash
# kv_agreement.sh: how far greedy decoding with a lossy KV cache (f16, bf16, fp8) follows the same
# run with an f32 KV cache, on a 30b-shape file (real head shape: 2 kv heads of 128, window 2048).
# Not a test: a measurement for docs/STATUS.md (issue 11).
#
# Method: the 16 prompts of the parity battery (tests/oracle/parity_prompts.py, 3..~100 tokens
# with BOS), greedy, `ignore_eos`, N tokens each (default 32), top-20 logprobs, all 16 running
# together through `glint run --batch` (the engine: paged KV pool, one batched forward per step).
# The f32 run is the reference (test_engine holds the f32 engine token-identical to the
# single-sequence path); every other dtype runs the same batch and is compared per prompt:
#   first divergence  index of the first generated token that differs (N if none),
#   prefix fraction   sum of first-divergence indices / (16 * N): tokens generated before any
#                     split (after a split the continuations are unrelated, so position-wise
#                     matches past it mean little; they are printed too, as "positional"),
#   gap               at each split, log p(f32 token) - log p(lossy token) under the f32 run's
#                     distribution at that position (same prefix), in nats, from its top-20
#                     logprobs ("> x" when the lossy token is not among them). A near tie (small
#                     gap) is rounding; a large gap would mean a broken cache,
#   |dlogprob|        at every position whose prefix is still identical (0..first divergence),
#                     the largest |log p_dtype(t) - log p_f32(t)| over tokens t in both top-20
#                     lists; mean and max over those positions. This measures the cache's error
#                     directly, also where the model is too flat for token agreement to say much.
# The bench file has random weights: its next-token distribution is nearly flat (top-1 gaps of
# a few millinats are common), so token agreement is a harsh test here; compare dtypes with each
# other and use |dlogprob| for the size of the error.
# Usage:  bash bench/kv_agreement.sh            (~4 min on 2 idle cores for the 4-layer 3 GB file)
# Env:    GLINT_BIN (default build/glint), KV_AGREE_MODEL (default bench/out/30b4-q4km.gguf,
#         written by bench/bench.sh), KV_AGREE_N (32), KV_AGREE_DTYPES ("f16 bf16 fp8"),
#         KV_AGREE_THREADS (2), KV_AGREE_REUSE=DIR (summarise an earlier run's output only).
#         Raw JSONL per dtype and the summary are kept in bench/out/kv-agreement-STAMP/.
set -euo pipefail
cd "$(dirname "$0")/.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
MODEL="${KV_AGREE_MODEL:-bench/out/30b4-q4km.gguf}"
N="${KV_AGREE_N:-32}"
DTYPES="${KV_AGREE_DTYPES:-f16 bf16 fp8}"
THREADS="${KV_AGREE_THREADS:-2}"

if [ -n "${KV_AGREE_REUSE:-}" ]; then
    out="$KV_AGREE_REUSE"
else
    [ -x "$GLINT_BIN" ] || { echo "kv_agreement: $GLINT_BIN not built" >&2; exit 1; }
    [ -s "$MODEL" ] ||
        { echo "kv_agreement: $MODEL missing (bash bench/bench.sh writes it)" >&2; exit 1; }
    out="bench/out/kv-agreement-$(date -u +%Y%m%dT%H%M%SZ)"
    mkdir -p "$out"
    /usr/bin/python3 - "$out/in.jsonl" "$N" <<'PY'
import json, sys
sys.path.insert(0, "tests/oracle")
from parity_prompts import PROMPTS
with open(sys.argv[1], "w") as f:
    for p in PROMPTS:
        f.write(json.dumps({"prompt": p, "max_tokens": int(sys.argv[2]), "temperature": 0,
                            "ignore_eos": True, "logprobs": 20}) + "\n")
PY
    for dt in f32 $DTYPES; do
        t0=$EPOCHREALTIME
        # 16 sequences at once, each prompt in one chunk; 1 GiB of KV is far more than 16 x 132
        # positions need, so no preemption changes the schedule between dtypes.
        "$GLINT_BIN" run --model "$MODEL" --batch "$out/in.jsonl" --out "$out/$dt.jsonl" \
            --kv-cache-dtype "$dt" --kv-cache-memory 1073741824 --max-num-seqs 16 \
            --max-num-batched-tokens 2048 --threads "$THREADS" 2>"$out/$dt.log" ||
            { cat "$out/$dt.log" >&2; echo "kv_agreement: run with $dt KV failed" >&2; exit 1; }
        printf '%s KV: %.1f s (%s)\n' "$dt" \
            "$(/usr/bin/python3 -c "print($EPOCHREALTIME - $t0)")" \
            "$(grep -o 'batch: .*' "$out/$dt.log" | head -1)"
    done
fi

/usr/bin/python3 - "$out" "$MODEL" "$GLINT_BIN" "$DTYPES" <<'PY' | tee "$out/summary.txt"
import json, sys
d, model, binary = sys.argv[1], sys.argv[2], sys.argv[3]
dtypes = sys.argv[4].split()
def load(dt):
    return [json.loads(l) for l in open(f"{d}/{dt}.jsonl")]
ref = load("f32")
n = len(ref[0]["token_ids"])
assert all(len(r["token_ids"]) == n for r in ref)
print(f"{model}: {len(ref)} prompts x {n} greedy tokens, reference f32 KV ({binary})")
print(f"| KV | identical sequences | first divergence per prompt ({n} = none) | prefix fraction "
      "| positional | gap at split, mnats (median / max) | \\|dlogprob\\| on shared prefix, "
      "mnats (mean / max) |")
print("|---|---|---|---|---|---|---|")
for dt in dtypes:
    rows = load(dt)
    assert len(rows) == len(ref) and all(len(r["token_ids"]) == n for r in rows), dt
    firsts, gaps, dlp, pos_same = [], [], [], 0
    for a, b in zip(ref, rows):
        ta, tb = a["token_ids"], b["token_ids"]
        k = next((i for i in range(n) if ta[i] != tb[i]), n)
        firsts.append(k)
        pos_same += sum(x == y for x, y in zip(ta, tb))
        for i in range(min(k + 1, n)):  # positions whose prefix is identical
            ra, rb = a["top_logprobs"][i], b["top_logprobs"][i]
            common = ra.keys() & rb.keys()
            if common:
                dlp.append(max(abs(ra[t] - rb[t]) for t in common))
        if k < n:
            top = a["top_logprobs"][k]
            lp_alt = top.get(str(tb[k]))
            gaps.append((a["logprobs"][k] - lp_alt, False) if lp_alt is not None
                        else (a["logprobs"][k] - min(top.values()), True))
    same = sum(k == n for k in firsts)
    if gaps:
        med = sorted(g for g, _ in gaps)[len(gaps) // 2]
        mx, mx_over = max(gaps)
        gtxt = f"{med * 1000:.1f} / {'> ' if mx_over else ''}{mx * 1000:.1f}"
        n_over = sum(o for _, o in gaps)
        if n_over:
            gtxt += f" ({n_over} outside top-20)"
    else:
        gtxt = "-"
    dtxt = f"{sum(dlp) / len(dlp) * 1000:.2f} / {max(dlp) * 1000:.2f} ({len(dlp)} pos)"
    print(f"| {dt} | {same}/{len(ref)} | {' '.join(map(str, firsts))} | "
          f"{sum(firsts) / (len(ref) * n):.3f} | {pos_same / (len(ref) * n):.3f} | {gtxt} | "
          f"{dtxt} |")
print("(mnats = millinats; prefix fraction = tokens before the first split / all tokens)")
PY
echo "kv_agreement: output in $out"
