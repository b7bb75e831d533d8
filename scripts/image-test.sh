#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The container image, end to end (run by `make test` as tests/deploy/check_container.sh):
#   1. `make image` in a clean clone of this checkout's HEAD (so the image is what the commit
#      builds: no build outputs, models or uncommitted files); the tags are glint:<version> and
#      glint:latest, and the version label and the commit label match;
#   2. the image as the Kubernetes manifest names it (deploy/kubernetes, one source: the test
#      fails if the name drifts), its size (fails over IMAGE_MAX_MB, default 300);
#   3. container A, the image's defaults (no --model, no volume): the entrypoint writes the tiny
#      random model, byte-identical to the one `make serve` and the suite use; it runs as uid
#      65532 (PID 1, /proc/1/status), the HEALTHCHECK passes, and tests/deploy/container.mjs
#      checks /health, a chat completion under a JSON schema (openai SDK, ajv) and /metrics;
#   4. container B as Kubernetes runs it: the model from a read-only volume at /models,
#      --read-only root filesystem, `glint serve` args after the image name; SIGTERM during a
#      streaming request: the stream finishes, the container exits 0, the logs (stderr) say so;
#      the control: a container whose PID 1 has no SIGTERM handler is still running after it.
# Skipped, with a line saying so, where neither podman nor docker is present and usable.
# Sandbox settings (this machine's, not the image's): with podman and runc present, a
# containers.conf in a temp dir (runc, cgroupfs, host network, no default ulimits); builds and
# containers always use the host network, and containers listen on loopback only.
#   IMAGE_TEST_PORT=N (default: a free port), CONTAINER_ENGINE, BASE, GLINT_VOCAB: as for make image
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
. tests/oracle/lib.sh
t_start=$(date +%s)
say() { echo "container: $*"; }

tmp="$(mktemp -d)"
engine=""
for e in ${CONTAINER_ENGINE:-podman docker}; do
    command -v "$e" >/dev/null 2>&1 || continue
    # This sandbox's podman: crun fails on its hybrid cgroups and rlimits may not be set.
    if [ "$(basename "$e")" = podman ] && [ -z "${CONTAINERS_CONF:-}" ] &&
        command -v runc >/dev/null 2>&1; then
        cat >"$tmp/containers.conf" <<'EOF'
[containers]
default_ulimits = []
netns = "host"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
        export CONTAINERS_CONF="$tmp/containers.conf"
    fi
    if "$e" info >/dev/null 2>&1; then
        engine="$e"
        break
    fi
done
if [ -z "$engine" ]; then
    rm -rf "$tmp"
    say "SKIP: no container engine is present and usable here (tried: ${CONTAINER_ENGINE:-podman" \
        "docker}; on Debian: apt-get install podman runc mmdebstrap)"
    exit 0
fi
export CONTAINER_ENGINE="$engine"
# Builds too: the build stages' apt-get reaches the Debian mirror over the host's network (this
# sandbox's containers have no other; a docker daemon may run without a bridge).
export IMAGE_BUILD_FLAGS="--network host ${IMAGE_BUILD_FLAGS:-}"
kind="$(basename "$engine")"

gl_need_glint "container"
gl_need_npm
vocab="${GLINT_VOCAB:-$ROOT/../shared/data/tokenizer/llama4-tokenizer.model}"
case "$vocab" in /*) ;; *) vocab="$ROOT/$vocab" ;; esac
export GLINT_VOCAB="$vocab"
HOST_MODEL="$(gl_tiny_model Q8_0)"
port="${IMAGE_TEST_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
ctr_a="glint-image-test-$$-a"
ctr_b="glint-image-test-$$-b"
ctr_c="glint-image-test-$$-c"
rm_now=(-f -v) # at once (SIGKILL), whatever runs, with its anonymous /models volume
[ "$kind" = podman ] && rm_now=(-f -v -t 0)
cleanup() {
    local c # one at a time: podman 4.3 removes none of a list that names a missing one
    for c in "$ctr_a" "$ctr_b" "$ctr_c"; do
        "$engine" rm "${rm_now[@]}" "$c" >/dev/null 2>&1 || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
check() { # CONDITION-STATUS MESSAGE
    if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi
}
logs_tail() { "$engine" logs "$1" 2>&1 | tail -n 15 | sed 's/^/    | /'; }
# (Into a file first: `grep -q` in a pipe would stop the reader early, failing under pipefail.)
logs_have() { "$engine" logs "$1" >"$tmp/logs" 2>&1; grep -q "$2" "$tmp/logs"; echo $?; }

# ---- 1. build from a clean clone ----------------------------------------------------------------
head="$(git rev-parse HEAD)"
git clone --quiet --no-checkout "$ROOT" "$tmp/src"
git -C "$tmp/src" checkout --quiet --detach "$head"
src="$tmp/src" # the commit's own files from here on: its version, its manifest
name="$(bash "$src/scripts/image.sh" --name)"
old_id="$("$engine" image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)"
t0=$(date +%s)
if ! (cd "$src" && timeout -k 10 900 make image) >"$tmp/build.log" 2>&1; then
    tail -n 30 "$tmp/build.log"
    say "FAILED: make image in a clean clone of $head"
    exit 1
fi
grep '^image:' "$tmp/build.log" | sed 's/^/    /'
say "make image in a clean clone: $(($(date +%s) - t0)) s"
new_id="$("$engine" image inspect --format '{{.Id}}' "$name")"
# The image this replaced, when nothing else uses it (keeps a CI machine's storage bounded).
[ -n "$old_id" ] && [ "$old_id" != "$new_id" ] && "$engine" rmi "$old_id" >/dev/null 2>&1 || true

# ---- 2. name, labels, size ---------------------------------------------------------------------
k8s_image="$(sed -n 's/^ *image: *\([^ #]*\).*/\1/p' "$src/deploy/kubernetes/glint.yaml" | head -n 1)"
check "$([ "$k8s_image" = "$name" ]; echo $?)" "deploy/kubernetes/glint.yaml runs $k8s_image, the image make image tags ($name)"
latest_id="$("$engine" image inspect --format '{{.Id}}' glint:latest 2>/dev/null || true)"
check "$([ "$latest_id" = "$new_id" ]; echo $?)" "glint:latest is the same image as $name"
label() { "$engine" image inspect --format "{{index .Config.Labels \"org.opencontainers.image.$1\"}}" "$name"; }
check "$([ "$(label version)" = "${name#glint:}" ] && [ "$(label revision)" = "$head" ]; echo $?)" \
    "labels: version $(label version), revision $(label revision) (HEAD $head)"
size="$("$engine" image inspect --format '{{.Size}}' "$name")"
max_mb="${IMAGE_MAX_MB:-300}"
check "$([ "$size" -le $((max_mb * 1000000)) ]; echo $?)" \
    "image size $((size / 1000000)) MB ($size bytes; at most $max_mb MB)"

# ---- 3. the defaults: tiny model written by the entrypoint, non-root, healthcheck, HTTP ----------
wait_health() { # CONTAINER: /health 200 within 60 s while the container runs
    local _
    for _ in $(seq 1 300); do
        curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && return 0
        [ "$("$engine" inspect --format '{{.State.Running}}' "$1" 2>/dev/null)" = true ] || return 1
        sleep 0.2
    done
    return 1
}
base="http://127.0.0.1:$port"
# GLINT_PORT (not --port) keeps the HEALTHCHECK on the right port. podman runs health checks
# from systemd timers, which this sandbox lacks: none here; the test runs the check itself.
health=()
[ "$kind" = podman ] && health=(--health-interval disable)
"$engine" run -d --name "$ctr_a" --network host "${health[@]}" -e GLINT_PORT="$port" "$name" \
    --host 127.0.0.1 --threads 1 >/dev/null 2>"$tmp/run-a.err" || cat "$tmp/run-a.err"
if wait_health "$ctr_a"; then
    check 0 "container A (no --model, no volume) answers /health on $base"
    sum_in="$("$engine" exec "$ctr_a" sha256sum /tmp/glint-tiny-random-Q8_0.gguf | cut -d' ' -f1 || true)"
    sum_host="$(sha256sum "$HOST_MODEL" | cut -d' ' -f1)"
    check "$([ "$sum_in" = "$sum_host" ]; echo $?)" \
        "the default model written in the container is byte-identical to make-model's tiny Q8_0 (${sum_in:0:12})"
    uid_line="$("$engine" exec "$ctr_a" grep '^Uid:' /proc/1/status | tr -s '\t ' ' ' || true)"
    comm="$("$engine" exec "$ctr_a" cat /proc/1/comm || true)"
    check "$([ "$uid_line" = "Uid: 65532 65532 65532 65532" ] && [ "$comm" = glint ]; echo $?)" \
        "PID 1 is $comm, not root ($uid_line)"
    if [ "$kind" = podman ]; then
        rc=0
        "$engine" healthcheck run "$ctr_a" >/dev/null 2>&1 || rc=$?
        check "$rc" "the image's HEALTHCHECK passes (podman healthcheck run)"
    else
        hc="$("$engine" inspect --format '{{join .Config.Healthcheck.Test " "}}' "$ctr_a" || true)"
        rc=0
        "$engine" exec "$ctr_a" sh -c "${hc#CMD-SHELL }" >/dev/null 2>&1 || rc=$?
        check "$rc" "the image's HEALTHCHECK passes ($hc)"
    fi
    timeout -k 5 180 node tests/deploy/container.mjs serve --base "$base" || fail=1
    check "$(logs_have "$ctr_a" "serving 'glint-tiny-random'")" \
        "glint's log is on the container's stderr ($engine logs)"
else
    check 1 "container A answers /health on $base"
    logs_tail "$ctr_a"
fi
"$engine" rm "${rm_now[@]}" "$ctr_a" >/dev/null 2>&1 || true

# ---- 4. as Kubernetes runs it: volume, read-only root, SIGTERM drain -----------------------------
"$engine" run -d --name "$ctr_b" --network host "${health[@]}" --read-only --user 65532:65532 \
    -v "$(dirname "$HOST_MODEL"):/models:ro" "$name" --model "/models/$(basename "$HOST_MODEL")" \
    --served-model-name glint-tiny-random --host 127.0.0.1 --port "$port" --threads 1 \
    --shutdown-timeout 60 >/dev/null 2>"$tmp/run-b.err" || cat "$tmp/run-b.err"
if wait_health "$ctr_b"; then
    check 0 "container B (read-only root, model from a read-only volume) answers /health"
    timeout -k 5 180 node tests/deploy/container.mjs sigterm --base "$base" --engine "$engine" \
        --name "$ctr_b" || fail=1
    code="$(timeout -k 5 90 "$engine" wait "$ctr_b" 2>/dev/null | tail -n 1 || echo none)"
    check "$([ "$code" = 0 ]; echo $?)" "container B exit code after SIGTERM: $code (want 0)"
    check "$(logs_have "$ctr_b" 'SIGTERM: draining')" \
        "its log says glint drained on SIGTERM"
    [ "$code" = 0 ] || logs_tail "$ctr_b"
else
    check 1 "container B answers /health"
    logs_tail "$ctr_b"
fi

# Negative control: PID 1 of a container ignores a signal it has no handler for (what a shell
# entrypoint without `exec` would do), so the exit 0 above is glint's drain, not the engine's.
"$engine" run -d --name "$ctr_c" --network host "${health[@]}" --entrypoint /bin/sleep "$name" 600 \
    >/dev/null 2>"$tmp/run-c.err" || cat "$tmp/run-c.err"
"$engine" kill --signal TERM "$ctr_c" >/dev/null 2>&1 || true
sleep 2
check "$([ "$("$engine" inspect --format '{{.State.Running}}' "$ctr_c" 2>/dev/null)" = true ]; echo $?)" \
    "negative control: a PID 1 without a SIGTERM handler (sleep) still runs 2 s after SIGTERM"

say "$(($(date +%s) - t_start)) s in all ($engine, image $((size / 1000000)) MB)"
[ "$fail" = 0 ] && say OK || say FAILED
exit "$fail"
