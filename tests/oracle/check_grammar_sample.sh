#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Property check of `glint grammar sample`: random walks under the mask must give documents that
# two independent validators accept -- ajv 8 with ajv-formats (grammar_validate.mjs) and
# python3-jsonschema with its format checker (grammar_validate.py, which also rejects non-strict
# JSON and duplicate keys and checks whitespace: none in compact mode, runs <= 16 with --ws 16).
# Schemas: the hand-written set in tests/oracle/grammar_schemas/ (required/any order,
# additionalProperties false/schema, patternProperties, enums, formats, numeric ranges, nested
# arrays, $ref recursion, anyOf/oneOf/allOf, escaped keys, ...) -- all must compile -- and every
# 900th MaskBench schema (skipped if it does not compile). glint sample itself fails on any
# breach of the matcher contract it polices on every step (special or stop tokens leaking, empty
# masks, rollback not restoring the state, mask/accept disagreement).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
. tests/oracle/grammar_lib.sh
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
[ -x "$GLINT_BIN" ] || { echo "sample: $GLINT_BIN not built"; exit 1; }
[ -d tests/oracle/node_modules/ajv-formats ] ||
    (cd tests/oracle && npm install --no-audit --no-fund --omit=optional --loglevel=error >/dev/null)
RANKS="$(gl_grammar_ranks)"
MB="$(gl_grammar_extract maskbench-dev)/maskbench"
WORK="$GLINT_TEST_DIR/grammar-sample"
rm -rf "$WORK"
mkdir -p "$WORK/schemas"
N="${GL_SAMPLE_N:-6}" # walks per schema compact (half with --ws 16); 20 once masks are fast
MIN_FINISHED_PCT="${GL_SAMPLE_MIN_FINISHED_PCT:-70}"

cp tests/oracle/grammar_schemas/*.json "$WORK/schemas/"
/usr/bin/python3 - "$MB" "$WORK/schemas" <<'PY'
import json, os, sys
d, out = sys.argv[1], sys.argv[2]
for f in sorted(x for x in os.listdir(d) if x.endswith(".json"))[::900]:
    schema = json.load(open(os.path.join(d, f), encoding="utf-8"))["schema"]
    json.dump(schema, open(os.path.join(out, "mb-" + f), "w", encoding="utf-8"))
PY

rc=0
fin=0
tot=0
: >"$WORK/manifest.tsv"
for s in "$WORK"/schemas/*.json; do
    name="$(basename "$s" .json)"
    for mode in compact ws:16; do
        out="$WORK/$name.${mode/:/}.txt"
        args=(--n "$N" --seed 7 --max-tokens 400)
        [ "$mode" = compact ] || args=(--n $((N / 2)) --seed 8 --max-tokens 400 --ws 16)
        if ! "$GLINT_BIN" grammar sample --tokenizer "$RANKS" --schema "$s" "${args[@]}" \
            >"$out" 2>"$out.err"; then
            if [[ "$name" == mb-* ]] && grep -q "does not compile" "$out.err"; then
                echo "skip $name (does not compile: $(head -c 150 "$out.err"))"
                break
            fi
            echo "FAIL $name [$mode]: glint grammar sample failed:"
            head -n 5 "$out.err" | sed 's/^/    /'
            rc=1
            continue
        fi
        last="$(tail -n 1 "$out")"
        f="$(jq -r .finished <<<"$last")"
        u="$(jq -r .unfinished <<<"$last")"
        fin=$((fin + f))
        tot=$((tot + f + u))
        printf '%-44s %-8s finished %3d of %3d\n' "$name" "$mode" "$f" $((f + u))
        [[ "$name" == mb-* ]] || [ "$f" -gt 0 ] || { echo "FAIL $name [$mode]: no walk finished"; rc=1; }
        printf '%s\t%s\t%s\n' "$s" "$out" "$mode" >>"$WORK/manifest.tsv"
    done
done
echo "walks: $fin of $tot finished (floor $MIN_FINISHED_PCT%)"
[ "$tot" -gt 0 ] && [ $((100 * fin)) -ge $((MIN_FINISHED_PCT * tot)) ] || { echo "FAIL too few walks finished"; rc=1; }
# additionalProperties (issue 19): the server closes objects whose schema says nothing about it
# (vLLM's xgrammar default; --closed-objects here). The seed's extraction shape, compact: closed
# walks must validate against the schema with additionalProperties false added to every object
# (python3-jsonschema) -- so no "" key; the same walks with JSON Schema semantics must produce at
# least one undeclared key (the negative control: the check can see one).
SEED="$WORK/seed_extraction.json"
cat >"$SEED" <<'J'
{"type":"object","properties":{"answer":{"type":"string"},"figures":{"type":"array","items":{"type":"object","properties":{"label":{"type":"string"},"value":{"type":"number"}},"required":["label"]}}},"required":["answer"]}
J
for m in closed open; do
    flag=(); [ "$m" = closed ] && flag=(--closed-objects)
    "$GLINT_BIN" grammar sample --tokenizer "$RANKS" --schema "$SEED" --n 24 --seed 11 \
        --max-tokens 200 "${flag[@]}" >"$WORK/seed.$m.txt" 2>"$WORK/seed.$m.err" ||
        { echo "FAIL seed [$m]: glint grammar sample failed"; head -n 3 "$WORK/seed.$m.err"; rc=1; }
done
/usr/bin/python3 - "$SEED" "$WORK/seed.closed.txt" "$WORK/seed.open.txt" <<'PY' || rc=1
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
def close(s):
    if isinstance(s, dict):
        if "properties" in s and "additionalProperties" not in s:
            s["additionalProperties"] = False
        for v in s.values(): close(v)
    return s
closed = jsonschema.Draft202012Validator(close(json.loads(json.dumps(schema))))
plain = jsonschema.Draft202012Validator(schema)
def docs(path):
    return [json.loads(l) for l in open(path, encoding="utf-8") if l.strip() and not l.startswith('{"finished"')]
c, o = docs(sys.argv[2]), docs(sys.argv[3])
bad = [d for d in c if not closed.is_valid(d)]
extra = [d for d in o if plain.is_valid(d) and not closed.is_valid(d)]
invalid = [d for d in o if not plain.is_valid(d)]
print("closed objects: %d walks, %d with an undeclared key; JSON Schema semantics: %d walks, %d with one (control)" % (len(c), len(bad), len(o), len(extra)))
ok = c and not bad and extra and not invalid
if not ok: print("FAIL closed objects:", (bad or invalid or ["control: no undeclared key"])[:2])
sys.exit(0 if ok else 1)
PY
(cd tests/oracle && node grammar_validate.mjs "$WORK/manifest.tsv") || rc=1
/usr/bin/python3 tests/oracle/grammar_validate.py "$WORK/manifest.tsv" || rc=1
[ "$rc" = 0 ] && echo "sample: OK" || echo "sample: FAILED"
exit "$rc"
