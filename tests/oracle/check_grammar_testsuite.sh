#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# JSON-Schema-Test-Suite, draft 2020-12: every test group becomes a case file
# (grammar_jsts_cases.py; the required keyword files plus the optional format files of the
# formats we claim) and goes through `glint grammar check`. The claim: a group either fails to
# compile (a keyword we do not enforce: reported by keyword) or every instance in it is classified
# right -- valid accepted, invalid rejected. Prints the per-keyword table; fails on any invalid
# instance accepted, any contract error, and any valid instance rejected in a compiled group that
# tests/oracle/grammar_jsts_known.txt does not list with its reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
. tests/oracle/grammar_lib.sh
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
[ -x "$GLINT_BIN" ] || { echo "testsuite: $GLINT_BIN not built"; exit 1; }
RANKS="$(gl_grammar_ranks)"
SUITE="$(gl_grammar_extract json-schema-test-suite)"
WORK="$GLINT_TEST_DIR/grammar-testsuite"
mkdir -p "$WORK"
/usr/bin/python3 tests/oracle/grammar_jsts_cases.py "$SUITE" "$WORK/cases" \
    date-time date time email uuid uri ipv4 ipv6 hostname
rc=0
"$GLINT_BIN" grammar check --tokenizer "$RANKS" --cases "$WORK/cases" --json \
    --per-file "$WORK/per-file.jsonl" >"$WORK/result.json" || rc=$?
/usr/bin/python3 tests/oracle/grammar_summary.py "$WORK/per-file.jsonl" --strict-valid \
    --known tests/oracle/grammar_jsts_known.txt || rc=1
jq -c '{schemas_total, schemas_compiled, schemas_passing, valid_rejected, invalid_accepted,
        errors, errors_by_keyword}' "$WORK/result.json" || rc=1
[ "$rc" = 0 ] && echo "testsuite: OK" || echo "testsuite: FAILED"
exit "$rc"
