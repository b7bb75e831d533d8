#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The container image (Containerfile, `make image`): scripts/image-test.sh builds it from a clean
# clone and runs it (health, a schema-constrained chat validated by ajv, metrics, non-root,
# SIGTERM drain to exit 0, size). Skipped, with a line saying so, without podman or docker.
# Budget (2 cores, measured at load 10): ~1 min with the build cache, ~3 min after a source change
# (glint recompiled in the image), 3-9 min on a fresh machine, which also makes the Debian base
# (mmdebstrap) and installs the build packages in the image (docs/DEPLOY.md has the times).
exec bash "$(dirname "$0")/../../scripts/image-test.sh"
