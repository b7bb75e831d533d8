#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The layer table of docs/ARCHITECTURE.md, enforced (issue 23): every `#include "M/..."` in
# src/ must name the including file's own module or a module of a LOWER layer, and every folder
# of src/ must be in the table. The libraries that read files, sockets or untrusted encodings
# (OWNED below) are each included by one module only, the one linked with them, so that I/O
# cannot creep back into a module whose header says it has none (api/: issue 23).
# Prints each violation as file:line: what and why; exit 1 if any.
# usage: tests/structure/check_layers.py [--src DIR] [--doc FILE]   (defaults: the repository's)
#        tests/structure/check_layers.py --self-test: first shows on a planted tree that an upward
#        include, a same-layer include, a module missing from the table and an owned library
#        included by another module each fail, then checks the repository (what `make test` runs).
import argparse
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# `#include <prefix...>` -> the only module that may include it (docs/ARCHITECTURE.md's rows).
OWNED = {"curl/": "mediasrc", "microhttpd.h": "server", "png.h": "image", "jpeglib.h": "image",
         "libavformat/": "video", "libavcodec/": "video", "libavutil/": "video",
         "libswscale/": "video"}


def layers(doc):
    """{module: layer number} from the table rows `| L<n> | `module/` | ... |`."""
    out = {}
    for line in open(doc, encoding="utf-8"):
        m = re.match(r"\|\s*L(\d+)\s*\|\s*`([a-z0-9_]+)/`\s*\|", line)
        if m:
            out[m.group(2)] = int(m.group(1))
    return out


def check(src, doc, quiet=False, owned=None):
    """The violations of the tree src against the table in doc (a list of lines)."""
    owned = OWNED if owned is None else owned
    table = layers(doc)
    if not table:
        return [f"no layer table in {doc}"]
    bad = []
    mods = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for mod in mods:
        if mod not in table:
            bad.append(f"src/{mod}/: module not in the layer table of docs/ARCHITECTURE.md")
            continue
        for dirpath, _, files in os.walk(os.path.join(src, mod)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(src))
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = re.match(r"\s*#\s*include\s+<([^>]+)>", line)
                    for lib, owner in owned.items() if m else ():
                        if m.group(1).startswith(lib) and mod != owner:
                            bad.append(f"{rel}:{n}: {mod}/ includes <{m.group(1)}>, which only "
                                       f"{owner}/ may use (the module linked with it)")
                    m = re.match(r'\s*#\s*include\s+"([a-z0-9_]+)/', line)
                    if not m or m.group(1) == mod:
                        continue
                    to = m.group(1)
                    if to not in table:
                        bad.append(f"{rel}:{n}: includes {to}/, not a module in the table")
                    elif table[to] >= table[mod]:
                        bad.append(f"{rel}:{n}: {mod}/ (L{table[mod]}) includes {to}/ "
                                   f"(L{table[to]}): arrows must run down to a lower layer")
    if not quiet:
        for b in bad:
            print(b)
        print(f"check_layers: {len(mods)} modules, {len(bad)} violation(s)")
    return bad


def self_test():
    """A planted tree: low/ (L0) includes high/ (L1), peer/ (L1) includes high/, and stray/ is
    not in the table, and high/ includes <net.h>, owned by low/; each must be reported, and
    nothing else."""
    with tempfile.TemporaryDirectory() as d:
        doc = os.path.join(d, "ARCH.md")
        with open(doc, "w") as f:
            f.write("| L0 | `low/` | x |\n| L1 | `high/` | x |\n| L1 | `peer/` | x |\n")
        files = {"low/a.c": '#include "high/h.h"\n#include "low/a.h"\n',
                 "high/h.c": '#include "low/a.h"\n#include <net.h>\n',
                 "peer/p.c": '#include "high/h.h"\n', "low/n.c": "#include <net.h>\n",
                 "stray/s.c": "\n"}
        for name, text in files.items():
            os.makedirs(os.path.join(d, "src", os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(d, "src", name), "w") as f:
                f.write(text)
        bad = check(os.path.join(d, "src"), doc, quiet=True, owned={"net.h": "low"})
        want = ["src/low/a.c:1: low/ (L0) includes high/", "src/peer/p.c:1: peer/ (L1) includes high/",
                "src/stray/: module not in the layer table", "src/high/h.c:2: high/ includes <net.h>"]
        ok = len(bad) == len(want) and all(any(b.startswith(w) for b in bad) for w in want)
        print(f"check_layers self-test: {len(bad)} planted violation(s) found: {'ok' if ok else 'WRONG'}")
        for b in bad:
            print("    " + b)
        return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(ROOT, "src"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "ARCHITECTURE.md"))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test and not self_test():
        return 1
    return 1 if check(a.src, a.doc) else 0


if __name__ == "__main__":
    sys.exit(main())
