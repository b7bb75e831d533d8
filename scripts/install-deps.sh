#!/usr/bin/env bash
# Installs the Debian and npm packages glint's build, tests and oracles need on a fresh Debian 12.
# Idempotent and quiet when everything is present.
# --list-build: prints the packages compiling the glint binary needs (the Containerfile's build
# stage installs them) and installs nothing.
# --bench: also what only `make bench` and bench/full-model.sh need: gnuplot-nox (the charts of
# docs/PERFORMANCE.md), time (/usr/bin/time -v: peak RSS); curl (server health polls) is always in.
set -euo pipefail
cd "$(dirname "$0")/.."

# What compiling the glint binary needs (--list-build): a C compiler only (gcc, not
# build-essential's g++ and dpkg-dev: 14 packages and 23 MB less in the image's build stage).
BUILD_PKGS="gcc libc6-dev make cmake pkg-config libpcre2-dev libjansson-dev libmicrohttpd-dev libpng-dev libjpeg62-turbo-dev
libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libcurl4-gnutls-dev"
if [ "${1:-}" = --list-build ]; then
    echo $BUILD_PKGS
    exit 0
fi
# podman, runc, mmdebstrap and curl: the container image test (scripts/image-test.sh; runc because
# crun fails on hybrid cgroup hierarchies; mmdebstrap makes the base image where no registry is;
# curl polls /health).
# Vulkan (src/vk, optional in the build): headers and glslc compile the shaders; the loader,
# Mesa's lavapipe (a Vulkan 1.3 device on the CPU) and the Khronos validation layer let
# build/test_vk run every shader under validation on machines without a GPU; vulkan-tools has
# vulkaninfo.
VK_PKGS="libvulkan-dev glslc libvulkan1 mesa-vulkan-drivers vulkan-validationlayers vulkan-tools"
DEB_PKGS="$BUILD_PKGS $VK_PKGS build-essential clang-14 libclang-rt-14-dev
clang-format python3 python3-numpy python3-torch python3-jsonschema python3-jinja2 python3-pil ffmpeg
openssl nginx python3-pydantic
podman runc mmdebstrap curl"
[ "${1:-}" = --bench ] && DEB_PKGS="$DEB_PKGS gnuplot-nox time"
# Node.js may come from another source than Debian (its npm then conflicts with Debian's npm
# package): install Debian's only when the commands are missing.
command -v node >/dev/null 2>&1 || DEB_PKGS="$DEB_PKGS nodejs"
command -v npm >/dev/null 2>&1 || DEB_PKGS="$DEB_PKGS npm"
missing=""
for p in $DEB_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-deps: apt-get install$missing"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# npm oracles (test-only): node-llama-cpp (llama.cpp), js-tiktoken, zod (the SDK's structured-output
# helpers), ajv + ajv-formats (JSON Schema
# validity), openai (the official SDK, client of the server suite tests/server/), kubernetes-models
# + @kubernetes-models/gateway-api (Kubernetes / Gateway API schemas, offline) and yaml (manifest
# parsing) for tests/deploy/. Pinned in tests/oracle/package.json.
npm_missing=0
for m in node-llama-cpp js-tiktoken ajv ajv-formats openai zod kubernetes-models @kubernetes-models/gateway-api yaml; do
    [ -d "tests/oracle/node_modules/$m" ] || npm_missing=1
done
if [ "$npm_missing" = 1 ]; then
    echo "install-deps: npm install (tests/oracle)"
    (cd tests/oracle && npm install --no-audit --no-fund --omit=optional --loglevel=error >/dev/null)
fi
