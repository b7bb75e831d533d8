# SPDX-License-Identifier: MIT
# bench/lib.sh: helpers shared by bench/bench.sh and bench/full-model.sh (sourced, not run).
# Servers listen on 127.0.0.1 only; every server started here is stopped by bl_stop_server (and
# by the caller's EXIT trap, which must call bl_stop_server).
# Needs: GLINT_BIN, LLAMA_BIN, MODEL, THREADS, OUT (a folder for logs) set by the caller.

bl_srv_pid=""
bl_port=""

bl_load1() { cut -d' ' -f1 /proc/loadavg; }

bl_free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Writes the 4-layer file on first use (as bench/serve_bench.sh does).
bl_ensure_model() { # FILE
    local f="$1"
    [ -s "$f" ] && return 0
    echo "bench: writing $f (30b-shape, 4 layers, Q4_K_M; a few minutes, once)" >&2
    "$GLINT_BIN" make-model --preset 30b-shape --layers 4 --type Q4_K_M --out "$f.tmp" >&2
    mv "$f.tmp" "$f"
}

# Bandwidth probe: one JSON line {"best":GB/s,"mean":GB/s,"load":...} (2 threads, 2 GiB read).
bl_probe() { # one JSON line: 2-thread best/mean, 1-thread best/mean (best1/mean1), load
    local l2 l1 re='s/.*best ([0-9.]+) GB\/s mean ([0-9.]+) GB\/s.*/\1 \2/p'
    l2="$("$OUT/bw" 2 2 2>&1 | tail -1 | sed -nE "$re")"
    l1="$("$OUT/bw" 1 2 2>&1 | tail -1 | sed -nE "$re")"
    set -- $l2 $l1
    if [ $# = 4 ]; then
        echo "{\"best\": $1, \"mean\": $2, \"best1\": $3, \"mean1\": $4, \"load\": $(bl_load1), \"t\": $(date +%s)}"
    fi
}

bl_stop_server() {
    if [ -n "$bl_srv_pid" ] && kill -0 "$bl_srv_pid" 2>/dev/null; then
        kill -TERM "$bl_srv_pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$bl_srv_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$bl_srv_pid" 2>/dev/null || true
    fi
    [ -n "$bl_srv_pid" ] && wait "$bl_srv_pid" 2>/dev/null || true
    bl_srv_pid=""
}

# bl_start_glint LOG MAXSEQS MAXLEN [PORT]: glint serve in the background; sets bl_port (does
# not wait for readiness when PORT is given: the TTFT client polls /health itself).
bl_start_glint() {
    local log="$1" seqs="$2" maxlen="$3" port="${4:-0}"
    : >"$log"
    "$GLINT_BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$port" --threads "$THREADS" \
        --max-num-seqs "$seqs" --max-num-batched-tokens 512 --kv-cache-memory 256MiB \
        --kv-cache-dtype f16 --max-model-len "$maxlen" --deep-health-interval 0 \
        --shutdown-timeout 5 >"$log" 2>&1 &
    bl_srv_pid=$!
    if [ "$port" != 0 ]; then bl_port="$port"; return 0; fi
    bl_port=""
    for _ in $(seq 1200); do # up to 120 s
        bl_port="$(sed -nE 's/.*serving .* at http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$log")"
        [ -n "$bl_port" ] && return 0
        kill -0 "$bl_srv_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$log" >&2
    echo "bench: glint serve did not start" >&2
    return 1
}

# bl_start_llama LOG SLOTS CTX [PORT] [wait]: llama-server, -np SLOTS, total context CTX;
# with "wait" polls /health until 200 (model loaded).
bl_start_llama() {
    local log="$1" slots="$2" ctx="$3" port="${4:-}" wait="${5:-wait}"
    [ -n "$port" ] || port="$(bl_free_port)"
    : >"$log"
    "$LLAMA_BIN/llama-server" -m "$MODEL" --host 127.0.0.1 --port "$port" -t "$THREADS" \
        -tb "$THREADS" -np "$slots" -c "$ctx" --no-webui --log-disable >"$log" 2>&1 &
    bl_srv_pid=$!
    bl_port="$port"
    [ "$wait" = wait ] || return 0
    for _ in $(seq 1200); do # up to 120 s
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null)" = 200 ]; then
            return 0
        fi
        kill -0 "$bl_srv_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$log" >&2
    echo "bench: llama-server did not start" >&2
    return 1
}

# Commit of this tree (+dirty when the work tree differs), read-only git.
bl_glint_commit() {
    local c
    c="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    git diff --quiet HEAD -- src CMakeLists.txt 2>/dev/null || c="$c+dirty(src)"
    echo "$c"
}

# Build flags of GLINT_BIN's CMake tree (the folder above the binary).
bl_glint_flags() {
    local cache
    cache="$(dirname "$GLINT_BIN")/CMakeCache.txt"
    if [ -f "$cache" ]; then
        local bt cf cfr cc
        bt="$(sed -nE 's/^CMAKE_BUILD_TYPE:[A-Z]+=(.*)/\1/p' "$cache")"
        cf="$(sed -nE 's/^CMAKE_C_FLAGS:[A-Z]+=(.*)/\1/p' "$cache")"
        cfr="$(sed -nE 's/^CMAKE_C_FLAGS_RELEASE:[A-Z]+=(.*)/\1/p' "$cache")"
        cc="$(sed -nE 's/^CMAKE_C_COMPILER:[A-Z]+=(.*)/\1/p' "$cache")"
        echo "CMAKE_BUILD_TYPE=$bt; C flags: ${cf:-(none)} ${cfr}; compiler: $("$cc" --version 2>/dev/null | head -1); kernels chosen at run time (ref/AVX2/AVX-512)"
    else
        echo "unknown (no CMakeCache.txt next to $GLINT_BIN)"
    fi
}
