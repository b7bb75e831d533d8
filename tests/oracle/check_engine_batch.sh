#!/usr/bin/env bash
# check_engine_batch.sh: `glint run --batch` (the engine: continuous batching, chunked prefill,
# prefix cache, f32 KV) against llama.cpp (node-llama-cpp 3.22.1) greedy, one sequence at a time.
# 12 prompts (3..60 ids, window-8 tiny model, half sharing a 40-id prefix) x 16 greedy tokens
# on the tiny F32 model, 4 running sequences and a 16-token step budget so prompts are chunked
# and requests wait. Every sequence must equal llama.cpp's ids exactly, and `glint run` (the
# single-sequence path, which stops at EOS) up to its length; a token id is corrupted in one
# copy to prove the comparison fails.
# Env: GLINT_BIN (default build/glint), GLINT_TEST_DIR (default build/testdata).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GLINT_TEST_DIR="${GLINT_TEST_DIR:-$PWD/build/testdata}"
GLINT_BIN="${GLINT_BIN:-build/glint}"
[[ "$GLINT_BIN" = /* ]] || GLINT_BIN="$PWD/$GLINT_BIN"
export GLINT_BIN
[ -x "$GLINT_BIN" ] || { echo "check_engine_batch: $GLINT_BIN not built"; exit 1; }
[ -d tests/oracle/node_modules/node-llama-cpp ] ||
    { echo "check_engine_batch: node-llama-cpp missing (make test installs it)"; exit 1; }
# shellcheck source=/dev/null
source tests/oracle/lib.sh
model="$(gl_tiny_model F32)" || { echo "check_engine_batch: cannot make the tiny model"; exit 1; }
tmp="$(mktemp -d)"
trap '[ -n "${GLINT_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
with open(f"{d}/in.jsonl", "w") as f, open(f"{d}/ids.txt", "w") as g:
    for i in range(12):
        n = 3 + (i * 23) % 58
        ids = [((7 + k * 13) if (i % 2 == 0 and k < 40) else (i * 1009 + k * 2903 + 17)) % 199000
               for k in range(n)]
        f.write(json.dumps({"prompt_token_ids": ids, "max_tokens": 16, "temperature": 0,
                            "ignore_eos": True}) + "\n")
        g.write(" ".join(map(str, ids)) + "\n")
PY
"$GLINT_BIN" run --model "$model" --batch "$tmp/in.jsonl" --out "$tmp/out.jsonl" \
    --kv-cache-dtype f32 --max-num-seqs 4 --max-num-batched-tokens 16 2>"$tmp/batch.log" ||
    { cat "$tmp/batch.log"; echo "check_engine_batch: glint run --batch failed"; exit 1; }
GLINT_ORACLE_THREADS="${GLINT_ORACLE_THREADS:-1}" node tests/oracle/llama_oracle.mjs greedy \
    "$model" "$tmp/ids.txt" 16 >"$tmp/llama.txt"
i=0
while read -r line; do
    "$GLINT_BIN" run --model "$model" --prompt-ids "$line" -n 16 --ids 2>/dev/null | tail -1 \
        >>"$tmp/single.txt"
    i=$((i + 1))
done <"$tmp/ids.txt"

exec /usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
batch = [json.loads(l)["token_ids"] for l in open(f"{d}/out.jsonl")]
llama = [list(map(int, l.split())) for l in open(f"{d}/llama.txt")]
single = [list(map(int, l.split())) for l in open(f"{d}/single.txt")]
def compare(a, b):
    return sum(1 for x, y in zip(a, b) if x == y) if len(a) == len(b) else -1
ok = len(batch) == len(llama) == len(single) == 12
same_llama = sum(1 for a, b in zip(batch, llama) if a == b)
# `glint run` stops at EOS/EOT (the batch lines set ignore_eos): compare up to its length
same_single = sum(1 for a, c in zip(batch, single)
                  if c and a[:len(c)] == c and (len(c) == len(a) or c[-1] in (200001, 200008)))
# negative control: one corrupted id must be caught by the same comparison
bad = [list(x) for x in batch]
bad[5][7] ^= 1
caught = sum(1 for a, b in zip(bad, llama) if a == b) < same_llama
print(f"engine batch vs llama.cpp greedy: {same_llama}/12 sequences identical; "
      f"vs glint single-sequence: {same_single}/12; control caught: {caught}")
for i, (a, b, c) in enumerate(zip(batch, llama, single)):
    if a != b or a[:len(c)] != c:
        print(f"  prompt {i}: engine {a}\n            llama  {b}\n            single {c}")
sys.exit(0 if ok and same_llama == 12 and same_single == 12 and caught else 1)
PY
