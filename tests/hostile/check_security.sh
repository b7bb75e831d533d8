#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Security checks (docs/SECURITY.md): the unit tests of the constant-time key comparison, of the
# keyed hash of the prefix cache (SipHash reference vectors) and of the local-media path checks
# (.., symlinks, %2e%2e, absolute paths, prefix siblings, directories, FIFOs, devices), then
# tests/server/security.mjs against `glint serve` over HTTPS with a self-signed certificate made
# here by the openssl CLI: the official openai SDK (chat, streamed chat, completions), plain HTTP
# and an untrusting client refused, TLS flag errors, API key refusals, cache_salt isolation,
# a passphrase-protected key, and no request content in the server's log.
# About 5 s on 2 loaded cores (budget 30 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
gl_need_glint "security"
command -v openssl >/dev/null || { echo "FAIL security: the openssl CLI is missing (scripts/install-deps.sh)"; exit 1; }
gl_need_npm

rc=0
for t in test_secret_equal test_siphash test_mediasrc; do
    if [ -x "build/$t" ]; then
        timeout -k 5 60 "build/$t" >/dev/null 2>&1 && echo "PASS unit.$t" || { echo "FAIL unit.$t"; rc=1; }
    else
        echo "FAIL unit.$t: build/$t not built"; rc=1
    fi
done

DIR="$(mktemp -d "${TMPDIR:-/tmp}/glint-security.XXXXXX")"
trap 'rm -rf "$DIR"' EXIT
# P-256 keys: generated in milliseconds (RSA-2048 takes seconds on a loaded core).
mkcert() { # KEY CERT CN
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1" \
        -out "$2" -days 2 -subj "/CN=$3" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        >/dev/null 2>&1
}
export GL_TLS_PASSWORD="glint-pass-$$"
mkcert "$DIR/key.pem" "$DIR/cert.pem" glint-test &&
    mkcert "$DIR/other-key.pem" "$DIR/other-cert.pem" glint-other &&
    openssl pkcs8 -topk8 -v2 aes-256-cbc -in "$DIR/key.pem" -out "$DIR/enc-key.pem" \
        -passout "pass:$GL_TLS_PASSWORD" >/dev/null 2>&1 &&
    chmod 600 "$DIR"/*.pem || { echo "FAIL security: openssl could not make the test certificate"; exit 1; }

MODEL="$(gl_tiny_model Q8_0)"
NODE_EXTRA_CA_CERTS="$DIR/cert.pem" timeout -k 10 90 node tests/server/security.mjs "$MODEL" "$DIR" || rc=1
[ "$rc" = 0 ] && echo "security: OK" || echo "security: FAILED"
exit "$rc"
