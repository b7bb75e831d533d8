#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Judges `glint grammar sample` output with python3-jsonschema (validator picked by the schema's
# $schema, Draft 2020-12 by default, with the format checker) and checks what the validators
# cannot see: strict JSON (no NaN/Infinity, no duplicate keys) and the whitespace policy (compact:
# no whitespace outside strings; ws:N: every run outside strings at most N bytes).
# Note: Debian's jsonschema 4.10 checks only date, email, ipv4, ipv6, uuid, regex formats without
# optional packages; ajv-formats (grammar_validate.mjs) covers the rest.
# usage: grammar_validate.py MANIFEST   (lines: schema_path TAB docs_path TAB compact|ws:N)
# Prints one line per (schema, mode) and exits 1 if any document fails.
import json
import sys

import jsonschema


class Dup(ValueError):
    pass


def no_dups(pairs):
    seen = set()
    for k, _ in pairs:
        if k in seen:
            raise Dup("duplicate key %r" % k)
        seen.add(k)
    return dict(pairs)


def reject_constant(c):
    raise ValueError("non-JSON constant " + c)


def ws_runs(text):
    """Longest whitespace run outside strings, and the total count of such bytes."""
    in_str = esc = False
    run = longest = total = 0
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch in " \t\n\r":
            run += 1
            total += 1
            longest = max(longest, run)
            continue
        run = 0
        if ch == '"':
            in_str = True
    return longest, total


def main():
    failed = 0
    for line in open(sys.argv[1], encoding="utf-8"):
        if not line.strip():
            continue
        schema_path, docs_path, mode = line.rstrip("\n").split("\t")
        schema = json.load(open(schema_path, encoding="utf-8"))
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        bound = 0 if mode == "compact" else int(mode.split(":")[1])
        n = bad = 0
        for raw in open(docs_path, encoding="utf-8", errors="surrogateescape"):
            raw = raw.rstrip("\n")
            if raw.startswith('{"finished"'):
                continue
            n += 1
            why = None
            try:
                text = json.loads(raw) if bound else raw
                doc = json.loads(text, object_pairs_hook=no_dups, parse_constant=reject_constant)
                errs = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
                if errs:
                    why = "schema: %s at %s" % (errs[0].message[:200], list(errs[0].path))
                else:
                    longest, total = ws_runs(text)
                    if bound == 0 and total:
                        why = "whitespace in compact mode"
                    elif longest > bound:
                        why = "whitespace run of %d > %d" % (longest, bound)
            except (ValueError, Dup) as e:
                why = "not strict JSON: %s" % e
            if why:
                bad += 1
                if bad <= 3:
                    print("  INVALID %s [%s]: %s\n    %s" % (schema_path, mode, why, raw[:300]))
        print("%-60s %-8s %3d docs, %d invalid" % (schema_path.split("/")[-1], mode, n, bad))
        failed += bad
    print("python3-jsonschema: %d invalid documents" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
