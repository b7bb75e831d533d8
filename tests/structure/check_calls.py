#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Files of one module do not call each other in circles (issue 23). check_layers.py holds the
# arrows between modules; inside a module the arrows are calls from one .c file to a function or
# object defined in another. Read from the built objects with nm (a call is an undefined symbol
# in one object that another object of the same module defines), so macros, static inlines and
# comments cannot fool it. Prints each circle with the calls that close it; exit 1 if any.
# usage: tests/structure/check_calls.py [--objs DIR] [--src DIR]
#        (defaults: build/CMakeFiles of the repository, objects of files still under src/: every
#        target's, glint_core's and the object library glint_mediasrc's alike)
#        tests/structure/check_calls.py --self-test: first compiles a planted module whose a.c and
#        b.c call each other (c.c calls a.c only) and checks that exactly that circle is reported.
import argparse
import collections
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def symbols(obj):
    """(defined global symbols, undefined symbols) of one object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defs, undef = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBRC":
            defs.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            undef.add(p[1])
    return defs, undef


def call_graph(objs, src):
    """{file: {(file it calls, symbol)}} between files of the same module; file = 'mod/x.c'."""
    defined, uses = {}, {}
    for o in objs:
        if "/src/" not in o:
            continue
        f = o.split("/src/", 1)[1][: -len(".o")]
        if not os.path.exists(os.path.join(src, f)):
            continue  # a stale object of a file that is gone
        d, u = symbols(o)
        for s in d:
            defined[s] = f
        uses[f] = u
    g = collections.defaultdict(set)
    for f, us in uses.items():
        for s in us:
            t = defined.get(s)
            if t and t != f and t.split("/")[0] == f.split("/")[0]:
                g[f].add((t, s))
    return g, sorted(uses)


def circles(g, nodes):
    """Strongly connected components with more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                w = nxt[0]
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check(objdir, src, quiet=False):
    objs = glob.glob(os.path.join(objdir, "**", "*.c.o"), recursive=True)
    if not objs:
        return [f"no objects under {objdir} (build first)"]
    g, nodes = call_graph(objs, src)
    bad = []
    for comp in circles(g, nodes):
        calls = [f"{a} -> {b} ({s})" for a in comp for b, s in sorted(g[a]) if b in comp]
        bad.append("circle: " + " ".join(comp) + "\n    " + "\n    ".join(calls))
    if not quiet:
        for b in bad:
            print(b)
        print(f"check_calls: {len(nodes)} files, {len(bad)} circle(s)")
    return bad


def self_test():
    plant = {"m/a.c": "int b1(void); int a1(void) { return b1(); } int a2(void) { return 2; }\n",
             "m/b.c": "int a1(void); int b1(void) { return 1; } int b2(void) { return a1(); }\n",
             "m/c.c": "int a2(void); int c1(void) { return a2(); }\n",
             "n/d.c": "int c1(void); int d1(void) { return c1(); }\n"}
    with tempfile.TemporaryDirectory() as d:
        for name, text in plant.items():
            path = os.path.join(d, "src", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            obj = os.path.join(d, "obj", "src", name + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run([os.environ.get("CC", "cc"), "-c", path, "-o", obj], check=True)
        bad = check(os.path.join(d, "obj"), os.path.join(d, "src"), quiet=True)
    ok = len(bad) == 1 and bad[0].startswith("circle: m/a.c m/b.c\n")
    print(f"check_calls self-test: {len(bad)} planted circle(s) found: {'ok' if ok else 'WRONG'}")
    for b in bad:
        print("    " + b.replace("\n", "\n    "))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objs", default=os.path.join(ROOT, "build", "CMakeFiles"))
    ap.add_argument("--src", default=os.path.join(ROOT, "src"))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test and not self_test():
        return 1
    return 1 if check(a.objs, a.src) else 0


if __name__ == "__main__":
    sys.exit(main())
