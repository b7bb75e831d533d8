#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# JSON-Schema-Test-Suite (draft 2020-12) -> MaskBench-style case files for `glint grammar check`.
# Each test group {description, schema, tests:[{description, data, valid}]} of tests/draft2020-12/
# KEYWORD.json becomes OUT/KEYWORD--NN.json = {"schema":..., "tests":[{"data","valid"}]}; the
# optional/format/FORMAT.json groups become OUT/format-FORMAT--NN.json (format as an assertion,
# which is what a generator must do). Output is deterministic (sorted inputs, sorted names).
# usage: grammar_jsts_cases.py SUITE_ROOT OUT_DIR [FORMAT ...]
import json
import os
import sys


def convert(path, prefix, out, counts):
    with open(path, encoding="utf-8") as f:
        groups = json.load(f)
    for i, g in enumerate(groups):
        case = {
            "description": g.get("description", ""),
            "schema": g["schema"],
            "tests": [{"data": t["data"], "valid": t["valid"]} for t in g["tests"]],
        }
        name = os.path.join(out, "%s--%02d.json" % (prefix, i))
        with open(name, "w", encoding="utf-8") as f:
            json.dump(case, f, ensure_ascii=False)
        counts[prefix] = counts.get(prefix, 0) + 1


def main():
    root, out = sys.argv[1], sys.argv[2]
    formats = sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".json"):
            os.unlink(os.path.join(out, f))
    base = os.path.join(root, "tests", "draft2020-12")
    counts = {}
    for f in sorted(os.listdir(base)):
        if f.endswith(".json"):
            convert(os.path.join(base, f), f[:-5], out, counts)
    for fmt in formats:
        p = os.path.join(base, "optional", "format", fmt + ".json")
        if os.path.exists(p):
            convert(p, "format-" + fmt, out, counts)
    print("%d groups from %d files" % (sum(counts.values()), len(counts)))


if __name__ == "__main__":
    main()
