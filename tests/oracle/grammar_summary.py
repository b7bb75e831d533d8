#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Summarises `glint grammar check --per-file` lines by group (the file-name part before "--", or
# the name without a trailing _N: the keyword file of the JSON-Schema-Test-Suite, the dataset of
# MaskBench) and enforces the soundness claims. Prints one table row per group: case files,
# compiled, passing, valid rejected, invalid accepted, contract errors, and the most common
# compile-error keywords.
# usage: grammar_summary.py PER_FILE.jsonl [--known FILE] [--strict-valid]
#   fails (exit 1) on any contract error or any invalid instance accepted; with --strict-valid
#   also on any valid instance rejected in a compiled group not listed in --known (one case-file
#   name per line, '#' comments: documented narrowings, each with its reason).
import collections
import json
import re
import sys


def group_of(name):
    stem = name[:-5] if name.endswith(".json") else name
    if "--" in stem:
        return stem.split("--")[0].rstrip("-")
    return re.sub(r"_[0-9]+$", "", stem)


def main():
    args = sys.argv[1:]
    path = args[0]
    known = set()
    if "--known" in args:
        with open(args[args.index("--known") + 1], encoding="utf-8") as f:
            for line in f:
                line = line.split("#")[0].strip()
                if line:
                    known.add(line)
    strict_valid = "--strict-valid" in args
    rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    groups = collections.OrderedDict()
    for r in sorted(rows, key=lambda r: r["file"]):
        g = groups.setdefault(group_of(r["file"]), collections.Counter())
        g["files"] += 1
        g["compiled"] += r["compiled"]
        g["passing"] += r["passing"]
        g["vr"] += r["valid_rejected"]
        g["ia"] += r["invalid_accepted"]
        g["err"] += r["errors"]
        if not r["compiled"]:
            g["kw:" + r.get("keyword", "?")] += 1
    print("%-28s %6s %8s %8s %6s %6s %5s  %s" % ("group", "files", "compiled", "passing",
                                                 "v_rej", "i_acc", "err", "compile errors"))
    tot = collections.Counter()
    for name, g in groups.items():
        kws = sorted(((k[3:], n) for k, n in g.items() if k.startswith("kw:")),
                     key=lambda x: -x[1])
        print("%-28s %6d %8d %8d %6d %6d %5d  %s" % (
            name, g["files"], g["compiled"], g["passing"], g["vr"], g["ia"], g["err"],
            ", ".join("%s %d" % kn for kn in kws[:4])))
        for k in ("files", "compiled", "passing", "vr", "ia", "err"):
            tot[k] += g[k]
    print("%-28s %6d %8d %8d %6d %6d %5d" % ("TOTAL", tot["files"], tot["compiled"],
                                             tot["passing"], tot["vr"], tot["ia"], tot["err"]))
    bad = []
    for r in rows:
        if r["errors"]:
            bad.append("%s: %d matcher contract errors" % (r["file"], r["errors"]))
        if r["invalid_accepted"]:
            bad.append("%s: %d invalid instances accepted" % (r["file"], r["invalid_accepted"]))
        if strict_valid and r["valid_rejected"] and r["file"] not in known:
            bad.append("%s: %d valid instances rejected" % (r["file"], r["valid_rejected"]))
    stale = [k for k in sorted(known)
             if not any(r["file"] == k and r["valid_rejected"] for r in rows)]
    for k in stale:
        print("note: %s is in the known list but no longer rejects a valid instance" % k)
    for b in bad:
        print("FAIL " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
