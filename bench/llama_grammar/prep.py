# SPDX-License-Identifier: MIT
"""Input for bench/llama_grammar/llama_grammar.c: the same MaskBench subset glint's checker walks
(`glint grammar check --every N`: case files sorted by name, every N-th from the first), each
schema converted by llama.cpp's json_schema_to_grammar (schema2gbnf), each instance as glint
serializes it (`glint grammar check --dump-instances`) and the token ids glint walks
(`glint tokenize --tiktoken RANKS --hex-lines`, no BOS, no special-token parsing: what
gl_tokenizer_encode(..., 0, 0) gives the checker).

usage: prep.py GLINT RANKS SCHEMA2GBNF CASES_DIR EVERY OUT_DIR   -> OUT_DIR/cases.txt
"""
import json
import os
import subprocess
import sys

glint, ranks, s2g, cases_dir, every, out = sys.argv[1:7]
every = int(every)
os.makedirs(os.path.join(out, "schemas"), exist_ok=True)

names = sorted(n for n in os.listdir(cases_dir) if len(n) >= 6 and n.endswith(".json"))
names = [n for n in names]  # byte order == glint's strcmp order for these names
subset = names[::every]

# The subset alone, in a folder of links, so glint's --dump-instances covers exactly it.
sub_dir = os.path.join(out, "subset")
if os.path.isdir(sub_dir):
    for n in os.listdir(sub_dir):
        os.unlink(os.path.join(sub_dir, n))
os.makedirs(sub_dir, exist_ok=True)
for n in subset:
    os.symlink(os.path.abspath(os.path.join(cases_dir, n)), os.path.join(sub_dir, n))

records = []  # (name, schema_path or None, [valid...], reason)
n_inst = 0
for i, n in enumerate(subset):
    try:
        with open(os.path.join(cases_dir, n), "rb") as f:
            d = json.loads(f.read().decode("utf-8"))
        schema = d["schema"]
        tests = d.get("tests", [])
        valids = [bool(t.get("valid")) for t in tests]
    except Exception as e:  # glint counts these as not compiled ("bad case file")
        records.append((n, None, [], "bad case file: %s" % type(e).__name__))
        continue
    sp = os.path.join(out, "schemas", "%05d" % i)
    with open(sp + ".json", "w", encoding="utf-8") as f:
        json.dump(schema, f, ensure_ascii=False)
    records.append((n, sp, valids, ""))
    n_inst += len(valids)

# Instances exactly as glint's checker serializes them (one line each, in file and test order).
dump = subprocess.run([glint, "grammar", "check", "--cases", sub_dir, "--dump-instances"],
                      check=True, capture_output=True).stdout
lines = dump.split(b"\n")
if lines and lines[-1] == b"":
    lines.pop()
if len(lines) != n_inst:
    sys.exit("prep: glint dumped %d instances, the case files hold %d" % (len(lines), n_inst))

# glint's token ids for each instance.
hex_path = os.path.join(out, "instances.hex")
with open(hex_path, "w") as f:
    for ln in lines:
        f.write(ln.hex() + "\n")
ids_out = subprocess.run([glint, "tokenize", "--tiktoken", ranks, "--hex-lines", hex_path],
                         check=True, capture_output=True, text=True).stdout.split("\n")
if ids_out and ids_out[-1] == "":
    ids_out.pop()
if len(ids_out) != n_inst:
    sys.exit("prep: glint tokenize gave %d lines for %d instances" % (len(ids_out), n_inst))

# llama.cpp's conversion of every schema. The converter can crash (a stack overflow on deep
# schemas): that schema is "not compiled" (converter crashed) and the rest is converted again.
todo = [sp for _, sp, _, _ in records if sp]
conv = {}
lst = os.path.join(out, "schemas.list")
while todo:
    with open(lst, "w") as f:
        for sp in todo:
            f.write("%s.json\t%s\n" % (sp, sp))
    r = subprocess.run([s2g, lst], capture_output=True, text=True)
    for row in r.stdout.splitlines():
        p, st, ms = row.split("\t")
        conv[p] = (st, float(ms))
    todo = [sp for sp in todo if sp not in conv]
    if r.returncode != 0 and todo:
        bad = todo.pop(0)
        conv[bad] = ("err", 0.0)
        with open(bad + ".err", "w") as f:
            f.write("converter crashed (%s)" % (
                "signal %d" % -r.returncode if r.returncode < 0 else "exit %d" % r.returncode))
    elif r.returncode != 0 or todo:
        sys.exit("prep: schema2gbnf failed: %s" % r.stderr[-500:])

def one_line(s):
    return " ".join(s.split())[:400] or "-"

k = 0
with open(os.path.join(out, "cases.txt"), "w") as f, \
        open(os.path.join(out, "convert.jsonl"), "w") as cj:
    for n, sp, valids, reason in records:
        gbnf = "-"
        if sp:
            st, ms = conv.get(sp, ("err", 0.0))
            if st == "err":
                try:
                    reason = one_line(open(sp + ".err", encoding="utf-8", errors="replace").read())
                except OSError:
                    reason = "converter did not report"
            else:
                gbnf = sp + ".gbnf"
                if st == "warn":
                    reason = "widened: " + one_line(
                        open(sp + ".warn", encoding="utf-8", errors="replace").read())
            cj.write(json.dumps({"file": n, "convert": st, "ms": ms, "reason": reason}) + "\n")
        f.write("S %s %s %d %s\n" % (n, gbnf, len(valids), reason or "-"))
        for v in valids:
            f.write("X %s\n" % lines[k].hex())
            ids = ids_out[k].split()
            f.write("T %d %d %s\n" % (1 if v else 0, len(ids), " ".join(ids)))
            k += 1
print("prep: %d schemas, %d instances, %d converted (%d with warnings)" % (
    len(subset), n_inst, sum(1 for v in conv.values() if v[0] != "err"),
    sum(1 for v in conv.values() if v[0] == "warn")))
