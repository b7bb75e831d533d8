# SPDX-License-Identifier: MIT
# Helpers for the grammar oracle checks and bench/maskbench.sh. Source after lib.sh.
#   gl_grammar_ranks          echoes the tiktoken ranks file (the real 202,048-token vocabulary)
#   gl_grammar_extract NAME   extracts ../shared/data/jsonschemabench/NAME.tar.gz (or
#                             $GLINT_JSB_DIR/NAME.tar.gz) under $GLINT_TEST_DIR/NAME once and
#                             echoes that directory; re-extracts when the tarball changes.

GL_SHARED_DIR="${GLINT_SHARED_DIR:-$GL_REPO_ROOT/../shared}"

gl_grammar_ranks() {
    local r="${GLINT_VOCAB:-$GL_SHARED_DIR/data/tokenizer/llama4-tokenizer.model}"
    [ -f "$r" ] || { echo "grammar: ranks file not found ($r)" >&2; return 1; }
    echo "$r"
}

gl_grammar_extract() { # NAME
    local name="$1"
    local tarball="${GLINT_JSB_DIR:-$GL_SHARED_DIR/data/jsonschemabench}/$name.tar.gz"
    local dir="$GLINT_TEST_DIR/$name"
    [ -f "$tarball" ] || { echo "grammar: $tarball not found" >&2; return 1; }
    local stamp
    stamp="$(stat -c '%s %Y' "$tarball")"
    mkdir -p "$GLINT_TEST_DIR" || return 1
    (
        flock 9
        if [ "$(cat "$dir.stamp" 2>/dev/null)" != "$stamp" ]; then
            rm -rf "$dir" "$dir.stamp" && mkdir -p "$dir" &&
                tar xzf "$tarball" -C "$dir" && printf '%s\n' "$stamp" >"$dir.stamp"
        fi
    ) 9>"$dir.lock" || { echo "grammar: extracting $tarball failed" >&2; return 1; }
    echo "$dir"
}
