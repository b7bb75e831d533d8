#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make image`: builds the container image glint:<version> and glint:latest from the Containerfile
# with podman, or docker where that is what the machine has.
#   scripts/image.sh            build (prints the image's name and size at the end)
#   scripts/image.sh --name     print the versioned name, glint:<version>, and exit
# <version> is GL_VERSION in src/server/server.c (what GET /version answers): the one place it is
# written; deploy/kubernetes names the same image (tests/deploy/k8s_validate.mjs checks it).
# Environment:
#   CONTAINER_ENGINE=podman|docker   default: podman if it works here, else docker
#   BASE=IMAGE         the base of both stages; default: glint-base:bookworm if present, else that
#                      image made from Debian's mirror with mmdebstrap (where it is installed),
#                      else debian:bookworm-slim from a registry
#   MIRROR=URL         Debian mirror for mmdebstrap (default http://deb.debian.org/debian)
#   GLINT_VOCAB=PATH   the llama4 tokenizer file baked in for the default tiny model (default
#                      ../shared/data/tokenizer/llama4-tokenizer.model; its ../chat-template/
#                      muse-glimmer.jinja too, where present)
#   IMAGE_BUILD_FLAGS  more flags for `build` (e.g. --network host)
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(sed -n 's/^#define GL_VERSION *"\([^"]*\)".*/\1/p' src/server/server.c)"
[ -n "$version" ] || { echo "image: no GL_VERSION in src/server/server.c" >&2; exit 1; }
if [ "${1:-}" = --name ]; then
    echo "glint:$version"
    exit 0
fi

engine="${CONTAINER_ENGINE:-}"
if [ -z "$engine" ]; then
    for e in podman docker; do
        if command -v "$e" >/dev/null 2>&1 && "$e" info >/dev/null 2>&1; then
            engine="$e"
            break
        fi
    done
fi
[ -n "$engine" ] || {
    echo "image: neither podman nor docker works here (install podman: apt-get install podman)" >&2
    exit 1
}
image_exists() { "$engine" image inspect "$1" >/dev/null 2>&1; }

vocab="${GLINT_VOCAB:-../shared/data/tokenizer/llama4-tokenizer.model}"
[ -s "$vocab" ] || {
    echo "image: the tokenizer file $vocab is missing (set GLINT_VOCAB to the llama4 tiktoken" \
        ".model file): the image needs it for its default tiny model" >&2
    exit 1
}

# The base: Debian 12 either way. Without a registry, a minbase root filesystem from Debian's
# mirror, made once and kept as glint-base:bookworm (remove that image to refresh it). The dpkg
# and apt settings are bookworm-slim's: no man pages, docs or translations (copyright files
# stay), no fsync per unpacked file. The tarball is imported only once mmdebstrap succeeded.
base="${BASE:-}"
if [ -z "$base" ]; then
    if image_exists glint-base:bookworm; then
        base=glint-base:bookworm
    elif command -v mmdebstrap >/dev/null 2>&1; then
        mirror="${MIRROR:-http://deb.debian.org/debian}"
        echo "image: making the base glint-base:bookworm with mmdebstrap from $mirror"
        t0=$(date +%s)
        rootfs="$(mktemp --suffix=.tar)"
        trap 'rm -f "$rootfs"' EXIT
        mmdebstrap --quiet --variant=minbase --format=tar \
            --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
            --aptopt='Acquire::Languages "none"' \
            --dpkgopt=force-unsafe-io \
            --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
            --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            --dpkgopt='path-include=/usr/share/locale/locale.alias' \
            --dpkgopt='path-exclude=/usr/share/groff/*' \
            --dpkgopt='path-exclude=/usr/share/lintian/*' \
            bookworm - "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
            "deb ${mirror%/debian}/debian-security bookworm-security main" </dev/null >"$rootfs"
        "$engine" import \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["bash"]' "$rootfs" glint-base:bookworm >/dev/null
        rm -f "$rootfs"
        echo "image: base made in $(($(date +%s) - t0)) s"
        base=glint-base:bookworm
    else
        base=debian:bookworm-slim
    fi
fi

revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$revision" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
    revision="$revision-dirty"
fi

# The build context: only what the Containerfile copies (never build/, models or test data).
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/deploy/container"
cp -r Containerfile CMakeLists.txt src "$ctx/"
bash scripts/install-deps.sh --list-build >"$ctx/build-packages"
cp deploy/container/entrypoint.sh "$ctx/deploy/container/"
mkdir -p "$ctx/data/tokenizer"
cp "$vocab" "$ctx/data/tokenizer/llama4-tokenizer.model"
# make-model looks for the chat template at ../chat-template/ from the vocabulary, as in ../shared.
template="$(dirname "$vocab")/../chat-template/muse-glimmer.jinja"
if [ -f "$template" ]; then
    mkdir -p "$ctx/data/chat-template"
    cp "$template" "$ctx/data/chat-template/"
fi

format=()
# podman writes OCI images by default, and the OCI format has no HEALTHCHECK: use docker's.
[ "$(basename "$engine")" = podman ] && format=(--format docker)
echo "image: $engine build glint:$version (base $base, revision $revision)"
t0=$(date +%s)
# shellcheck disable=SC2086
"$engine" build "${format[@]}" ${IMAGE_BUILD_FLAGS:-} -f "$ctx/Containerfile" \
    --build-arg BASE="$base" --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.revision="$revision" \
    --label org.opencontainers.image.base.name="$base" \
    -t "glint:$version" -t glint:latest "$ctx"
size="$("$engine" image inspect --format '{{.Size}}' "glint:$version")"
echo "image: built glint:$version and glint:latest in $(($(date +%s) - t0)) s," \
    "$((size / 1000000)) MB (base $base)"
