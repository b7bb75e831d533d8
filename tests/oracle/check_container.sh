#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The container image (Containerfile, `make image`): scripts/image-test.sh builds it from a clean
# clone and runs it (health, a schema-constrained chat validated by ajv, metrics, non-root,
# SIGTERM drain to exit 0, size). Skipped, with a line saying so, without podman or docker.
# Budget: ~1 min with the build cache warm; a first run also makes the Debian base (mmdebstrap)
# and installs the build packages in the image (docs/DEPLOY.md has the measured times).
exec bash "$(dirname "$0")/../../scripts/image-test.sh"
