#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# No absolute path of a build machine in the tree (issue 23): data comes from the sibling
# ../shared/ or an environment variable, and reports name paths relative to the repository.
# Fails on any tracked file naming /work/..., /root/... or /home/<user>/... (this file excepted).
set -uo pipefail
cd "$(dirname "$0")/../.."
hits="$(git grep -n -I -E '(^|[^A-Za-z0-9_.~$-])/(work|root|home/[A-Za-z0-9_.-]+)/' -- . ':!tests/structure/check_paths.sh')"
if [ -n "$hits" ]; then
    echo "machine paths in the tree:"
    echo "$hits" | head -n 40
    exit 1
fi
echo "check_paths: no machine paths in $(git ls-files | wc -l) tracked files"
