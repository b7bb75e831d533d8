#!/usr/bin/env bash
# Chat render oracle: for every request in tests/oracle/chat_corpus/*.json, `glint chat render`
# must print exactly the bytes that python3-jinja2 renders from the Muse Glimmer release template
# (chat_render_ref.py, Hugging Face's chat-template environment). Requests named err_*.json are
# ones the template rejects: both must fail. Prints "chat render: N/N identical"; exits non-zero
# on any difference. Uses $GLINT_BIN (default build/glint) and $GLINT_TEST_DIR for scratch files.
set -euo pipefail
cd "$(dirname "$0")/../.."
GLINT_BIN="${GLINT_BIN:-build/glint}"
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
TEMPLATE="${GLINT_CHAT_TEMPLATE:-$PWD/../shared/data/chat-template/muse-glimmer.jinja}"
WORK="${GLINT_TEST_DIR:-$PWD/build/testdata}/chat-render"
mkdir -p "$WORK"

[ -x "$GLINT_BIN" ] || { echo "chat render: $GLINT_BIN not built"; exit 1; }
[ -f "$TEMPLATE" ] || { echo "chat render: template not found ($TEMPLATE)"; exit 1; }
/usr/bin/python3 -c 'import jinja2' 2>/dev/null ||
    { echo "chat render: python3-jinja2 missing (apt-get install -y python3-jinja2)"; exit 1; }

# One python process renders the whole corpus (NAME.ref, or NAME.referr when jinja2 raised).
/usr/bin/python3 tests/oracle/chat_render_ref.py "$TEMPLATE" --out "$WORK" \
    tests/oracle/chat_corpus/*.json
total=0 same=0
for req in tests/oracle/chat_corpus/*.json; do
    name="$(basename "$req" .json)"
    total=$((total + 1))
    ref_rc=0 gl_rc=0
    if [ -f "$WORK/$name.referr" ]; then
        ref_rc=1
        cp "$WORK/$name.referr" "$WORK/$name.ref"
    fi
    "$GLINT_BIN" chat render "$req" >"$WORK/$name.out" 2>"$WORK/$name.err" || gl_rc=$?
    if [ "$ref_rc" -ne 0 ] || [ "$gl_rc" -ne 0 ]; then
        if [ "$ref_rc" -ne 0 ] && [ "$gl_rc" -eq 1 ] && [ -s "$WORK/$name.err" ] &&
            [ ! -s "$WORK/$name.out" ]; then
            same=$((same + 1))
        else
            echo "  $name: jinja2 exit $ref_rc ($(head -c 200 "$WORK/$name.ref")), glint exit" \
                "$gl_rc ($(head -c 200 "$WORK/$name.err"))"
        fi
    elif cmp -s "$WORK/$name.ref" "$WORK/$name.out"; then
        same=$((same + 1))
    else
        echo "  $name: differs at $(cmp "$WORK/$name.ref" "$WORK/$name.out" | sed 's/.*differ: //')"
        diff <(fold -w 100 "$WORK/$name.ref") <(fold -w 100 "$WORK/$name.out") | head -8 || true
    fi
done
echo "chat render: $same/$total identical"
[ "$total" -ge 60 ] && [ "$same" -eq "$total" ]
