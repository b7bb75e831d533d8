# SPDX-License-Identifier: MIT
# Shared helpers for the check_*.sh of tests/oracle, tests/server, tests/hostile and
# tests/deploy. Source it from the repository root:  . tests/oracle/lib.sh
#   gl_tiny_model TYPE   echoes the path of $GLINT_TEST_DIR/tiny-TYPE.gguf (tiny preset, seed 1),
#                        writing it first if it is missing or was made by other parameters.
# Models are shared between suites, so a sidecar TYPE.gguf.params records what made each file,
# an flock serialises concurrent writers, and files appear atomically (write to .tmp, rename).
# GL_TINY_GEN is bumped whenever make-model's output for the same flags changes.
#   gl_need_glint NAME   makes $GLINT_BIN absolute and exported (node drivers start it from other
#                        directories); exits 1 with "NAME: ... not built" when it is missing.
#   gl_need_npm [MOD...] installs tests/oracle's pinned npm packages when openai, ajv, ajv-formats
#                        or one of MOD is missing.

GL_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
GLINT_BIN="${GLINT_BIN:-$GL_REPO_ROOT/build/glint}"
GLINT_TEST_DIR="${GLINT_TEST_DIR:-$GL_REPO_ROOT/build/testdata}"
GL_TINY_GEN=1

gl_tiny_model() { # TYPE
    local type="$1"
    local path="$GLINT_TEST_DIR/tiny-$type.gguf"
    local params="gen=$GL_TINY_GEN make-model --preset tiny --type $type --seed 1"
    mkdir -p "$GLINT_TEST_DIR" || return 1
    (
        flock 9
        if [ ! -s "$path" ] || [ "$(cat "$path.params" 2>/dev/null)" != "$params" ]; then
            rm -f "$path.params"
            "$GLINT_BIN" make-model --preset tiny --type "$type" --seed 1 --out "$path.tmp" >&2 &&
                mv -f "$path.tmp" "$path" && printf '%s\n' "$params" >"$path.params"
        fi
    ) 9>"$path.lock" || { echo "gl_tiny_model: writing $path failed" >&2; return 1; }
    echo "$path"
}

gl_tiny_hf_vision() { # the tiny random HF folder with a vision tower (make-model --format safetensors)
    local dir="$GLINT_TEST_DIR/tiny-hf-vision"
    mkdir -p "$GLINT_TEST_DIR" || return 1
    (
        flock 9
        if [ ! -f "$dir/config.json" ]; then
            rm -rf "$dir"
            "$GLINT_BIN" make-model --preset tiny --format safetensors --out "$dir" >/dev/null
        fi
    ) 9>"$dir.lock" || { echo "gl_tiny_hf_vision: writing $dir failed" >&2; return 1; }
    echo "$dir"
}

gl_need_glint() { # NAME
    case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
    export GLINT_BIN
    [ -x "$GLINT_BIN" ] || { echo "$1: $GLINT_BIN not built"; exit 1; }
}

gl_need_npm() { # [MODULE...]
    local m
    for m in openai ajv ajv-formats "$@"; do
        [ -d "$GL_REPO_ROOT/tests/oracle/node_modules/$m" ] && continue
        (cd "$GL_REPO_ROOT/tests/oracle" &&
            npm install --no-audit --no-fund --omit=optional --loglevel=error >/dev/null)
        return
    done
}

# The bin/ folder of the newest native llama.cpp build (bench/llama_build.sh puts it under
# <cache>/llama.cpp-<commit>/build-glint/bin; cache: LLAMA_CACHE, else XDG_CACHE_HOME/glint or
# ~/.cache/glint), or $LLAMA_BIN. Prints nothing where there is none: the caller skips.
gl_llama_bin() {
    local cache="${LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/glint}"
    echo "${LLAMA_BIN:-$(ls -td "$cache"/llama.cpp-*/build-glint/bin 2>/dev/null | head -1)}"
}
