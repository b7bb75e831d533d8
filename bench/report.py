#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# report.py RUN_DIR DOC: turns one bench/bench.sh run (bench/out/run-<stamp>/) into
# docs/PERFORMANCE.md (DOC; "-" = stdout, no charts) plus docs/perf-batch.png and
# docs/perf-mask.png drawn with gnuplot. Every glint/llama.cpp figure is the median over the
# pairs of each side's value; the ratio column is the median (min-max) of the per-pair ratios
# glint / llama.cpp (each pair ran back to back). A section between the full-model markers
# (bench/full-model.sh) is kept as it is.
# report.py --full RUN_DIR DOC: (bench/full-model.sh) replaces only that section.
import json
import os
import re
import statistics
import subprocess
import sys

FULL_BEGIN = "<!-- full-model:begin -->"
FULL_END = "<!-- full-model:end -->"

# Goals per row (ratio glint / llama.cpp unless said). Placeholders until issue 11's are copied
# here: parity with llama.cpp everywhere, and constrained decode at >= 0.9 of free decode.
# Issue 11's goals (glint / llama.cpp unless said).
GOAL_RATIO = ">= 1.00"
GOAL_PP = ">= 1.5"
GOAL_TG1 = ">= 1.3"
GOAL_BATCH = ">= 2.5"
GOAL_BATCH_GAIN = ">= 4 (glint)"
GOAL_SERVE = ">= 2"
GOAL_CONSTRAINED_FREE = ">= 0.97"
GOAL_FULL = {"pp": ">= 1.5", "tg": ">= 1.3", "rss_gib": "<= file + KV + 1 GiB",
             "ttft_s": "<= 1.00", "ready_s": "-"}


def jload(path):
    with open(path) as f:
        return json.load(f)


def jlines(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    out.append(json.loads(line))
    return out


def med(v):
    return statistics.median(v) if v else None


def fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def spread(r):
    if not r:
        return "-"
    return f"**{med(r):.2f}** ({min(r):.2f}-{max(r):.2f}, n={len(r)})"


def model_sizes(inspect):
    """Weights per token: parameters and bytes of every >= 2-D tensor but token_embd."""
    p_layers = p_head = b_all = 0
    for t in inspect["tensors"]:
        if t["name"] == "token_embd.weight" or len([d for d in t["ne"] if d > 1]) < 2:
            if t["name"] != "token_embd.weight":
                b_all += t["n_bytes"]  # norms: read per token too, tiny
            continue
        n = 1
        for d in t["ne"]:
            n *= d
        if t["name"] == "output.weight":
            p_head += n
        else:
            p_layers += n
        b_all += t["n_bytes"]
    return p_layers, p_head, b_all


class Run:
    def __init__(self, d):
        self.d = d
        self.meta = jload(f"{d}/meta.json")
        self.pairs = self.meta["pairs"]

    def f(self, k, g, s, ext):
        return f"{self.d}/p{k}-{g}-{s}.{ext}"

    def bench_ts(self, k, g, s, pp, ng, depth=0):
        """t/s of one llama-bench-like test (glint bench --json or llama-bench -o json)."""
        path = self.f(k, g, s, "json")
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            return None
        for x in jload(path):
            if x.get("n_prompt") == pp and x.get("n_gen") == ng and x.get("n_depth", 0) == depth:
                return x["avg_ts"]
        return None

    def batch_ts(self, k, s):
        """{B: aggregate decode t/s}"""
        res = {}
        for x in jlines(self.f(k, "batch", s, "txt")):
            if s == "glint" and x.get("test") == "batch_decode":
                res[x["batch"]] = x["aggregate_ts"]
            elif s == "llama" and "speed_tg" in x:
                res[x["pl"]] = x["speed_tg"]
        return res

    def serve(self, k, s):
        """{(mode, conc): result}"""
        return {(x["mode"], x["conc"]): x for x in jlines(self.f(k, "serve", s, "jsonl"))}


def rows_for(run):
    m = run.meta
    P, N, D, K = m["p"], m["n"], m["depth"], run.pairs
    g_set = set(m["groups"])
    rows = []  # (metric, glint str, llama str, ratio str, goal)
    series = {}  # metric -> (glint list, llama list, ratio list) for derived figures

    def pair_row(name, getter, goal=GOAL_RATIO, nd=2):
        gv, lv, rv = [], [], []
        for k in range(1, K + 1):
            g, l = getter(k, "glint"), getter(k, "llama")
            if g is not None:
                gv.append(g)
            if l is not None:
                lv.append(l)
            if g is not None and l:
                rv.append(g / l)
        series[name] = (gv, lv, rv)
        rows.append((name, fmt(med(gv), nd), fmt(med(lv), nd), spread(rv), goal))

    T = m["threads"]
    if "pp2" in g_set:
        pair_row(f"pp{P}, {T} threads (t/s)", lambda k, s: run.bench_ts(k, "pp2", s, P, 0),
                 goal=GOAL_PP)
    if "depth" in g_set:
        pair_row(f"pp{P} @ depth {D}, {T} threads (t/s)",
                 lambda k, s: run.bench_ts(k, "depth", s, P, 0, D),
                 goal=GOAL_PP if D == 4096 else GOAL_PP + " (issue: at depth 4096)")
    if "pp2" in g_set:
        pair_row(f"tg{N}, {T} threads (t/s)", lambda k, s: run.bench_ts(k, "pp2", s, 0, N))
    P1 = m.get("p1", P)
    if "pp1" in g_set:
        pair_row(f"tg{N}, 1 thread (t/s)", lambda k, s: run.bench_ts(k, "pp1", s, 0, N),
                 goal=GOAL_TG1)
        pair_row(f"pp{P1}, 1 thread (t/s)", lambda k, s: run.bench_ts(k, "pp1", s, P1, 0),
                 goal="-")
    if "pp1" in g_set and "pp2" in g_set:
        def scal(k, s):
            a, b = run.bench_ts(k, "pp2", s, P, 0), run.bench_ts(k, "pp1", s, P1, 0)
            return a / b if a and b else None
        pair_row(f"pp thread scaling: pp{P} at {T} threads / pp{P1} at 1 thread (x)", scal,
                 goal="-")
    if "batch" in g_set:
        sizes = [int(b) for b in m["batches"].split(",")]
        for B in sizes:
            if B == 1:
                continue
            pair_row(f"aggregate decode, {B} sequences, ntg {m['ntg']} (t/s)",
                     lambda k, s, B=B: run.batch_ts(k, s).get(B),
                     goal=GOAL_BATCH if m["ntg"] == 128 else GOAL_BATCH + " (issue: ntg 128)")
        if 1 in sizes:
            pair_row("decode, 1 sequence, same harness (t/s)",
                     lambda k, s: run.batch_ts(k, s).get(1))
            for B in sizes:
                if B == 1:
                    continue
                def gain(k, s, B=B):
                    t = run.batch_ts(k, s)
                    return t[B] / t[1] if t.get(B) and t.get(1) else None
                pair_row(f"batch gain: {B} sequences / 1 sequence (x)", gain,
                         goal=GOAL_BATCH_GAIN)
    if "serve" in g_set:
        C = m["serve_conc"]
        for c in (1, C):
            pair_row(f"JSON-schema constrained decode, concurrency {c} (t/s)",
                     lambda k, s, c=c: (run.serve(k, s).get(("constrained", c)) or {}).get("tps"),
                     goal=GOAL_SERVE)
        gv = []
        for k in range(1, K + 1):
            sv = run.serve(k, "glint")
            a, b = sv.get(("constrained", C)), sv.get(("free", C))
            if a and b:
                gv.append(a["tps"] / b["tps"])
        series["cf"] = (gv, [], [])
        rows.append((f"glint constrained / free decode, {C} streams (x)", spread(gv), "-", "-",
                     GOAL_CONSTRAINED_FREE))
    return rows, series


def validity(run):
    """Per side and concurrency: valid / complete / hit max_tokens over all pairs."""
    out = []
    C = run.meta["serve_conc"]
    for s in ("glint", "llama"):
        for c in (1, C):
            n = v = st = ln = 0
            sample = ""
            for k in range(1, run.pairs + 1):
                x = run.serve(k, s).get(("constrained", c))
                if x:
                    n += x["requests"]
                    v += x["valid"]
                    st += x["stop"]
                    ln += x["length"]
                    sample = sample or x.get("sample", "")
            if n:
                out.append((s, c, n, v, st, ln, sample))
    return out


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def charts(run, docdir):
    made = []
    m = run.meta
    if "batch" in m["groups"]:
        sizes = [int(b) for b in m["batches"].split(",")]
        dat = f"{run.d}/batch.dat"
        with open(dat, "w") as f:
            for B in sorted(set(sizes)):
                g = med([t[B] for k in range(1, run.pairs + 1)
                         for t in [run.batch_ts(k, "glint")] if B in t])
                l = med([t[B] for k in range(1, run.pairs + 1)
                         for t in [run.batch_ts(k, "llama")] if B in t])
                f.write(f"{B} {g if g is not None else 'NaN'} {l if l is not None else 'NaN'}\n")
        png = f"{docdir}/perf-batch.png"
        gnuplot(f"""set terminal pngcairo size 800,480 font ",10" noenhanced
set output "{png}"
set title "Aggregate decode t/s vs parallel sequences ({os.path.basename(m['model'])}, {m['threads']} threads, median of {run.pairs} pairs)"
set xlabel "parallel sequences"; set ylabel "decode tokens/s (all sequences)"
set key top left; set grid; set logscale x 2; set xrange [0.8:*]; set yrange [0:*]
plot "{dat}" using 1:2 with linespoints lw 2 pt 7 title "glint (glint bench --batch)", \\
     "{dat}" using 1:3 with linespoints lw 2 pt 5 title "llama.cpp (llama-batched-bench, S_TG)"
""")
        made.append(png)
    mask = f"{run.d}/mask_us.txt"
    if os.path.exists(mask) and os.path.getsize(mask) > 0:
        with open(mask) as f:
            v = sorted(float(x) for x in f if x.strip())
        n = len(v)
        cdf = f"{run.d}/mask_cdf.dat"
        with open(cdf, "w") as f:
            step = max(1, n // 2000)
            for i in range(0, n, step):
                f.write(f"{max(v[i], 0.05)} {(i + 1) / n}\n")
            f.write(f"{v[-1]} 1.0\n")
        # histogram on log-spaced bins
        import math
        lo, hi = math.log10(max(v[0], 0.05)), math.log10(max(v[-1], 0.1))
        nb = 40
        w = (hi - lo) / nb or 1.0
        counts = [0] * nb
        for x in v:
            i = min(nb - 1, max(0, int((math.log10(max(x, 0.05)) - lo) / w)))
            counts[i] += 1
        hist = f"{run.d}/mask_hist.dat"
        with open(hist, "w") as f:
            for i, c in enumerate(counts):
                f.write(f"{10 ** (lo + (i + 0.5) * w)} {c / n}\n")
        p50, p99 = v[n // 2], v[min(n - 1, n * 99 // 100)]
        png = f"{docdir}/perf-mask.png"
        gnuplot(f"""set terminal pngcairo size 800,480 font ",10" noenhanced
set output "{png}"
set title "Grammar mask time per token ({n} masks, MaskBench subset, 1 thread CPU time): p50 {p50:.1f} us, p99 {p99:.1f} us"
set xlabel "mask time (us, log scale)"; set logscale x; set grid
set ylabel "share of masks per bin"; set y2label "cumulative share"; set y2range [0:1]; set ytics nomirror; set y2tics
set key top left
set style fill solid 0.5
plot "{hist}" using 1:2 axes x1y1 with impulses lw 6 title "histogram (log-spaced bins)", \\
     "{cdf}" using 1:2 axes x1y2 with lines lw 2 title "CDF"
""")
        made.append(png)
    return made


def perf_section(run, rows, series):
    m = run.meta
    P, N, T = m["p"], m["n"], m["threads"]
    L = []
    ins = jload(f"{run.d}/inspect.json")
    p_layers, p_head, bytes_tok = model_sizes(ins)
    vn = {}
    for x in jlines(f"{run.d}/vnni.jsonl"):  # best reading (start and end of the run)
        vn[x["threads"]] = max(vn.get(x["threads"], 0.0), x["gops"])
    probes = jlines(f"{run.d}/probes.jsonl")
    full = (m["pairs"] >= 5 and P == 512 and N == 128 and m["npp"] == 128
            and set(m["groups"]) >= {"pp2", "pp1", "depth", "batch", "serve"})
    if not full:
        L.append(f"> **Harness test, not a measurement**: {m['pairs']} pair(s), -p {P} -n {N} "
                 f"-d {m['depth']}, batch npp/ntg {m['npp']}/{m['ntg']}, serve max_tokens "
                 f"{m['serve_max_tokens']}, groups {' '.join(m['groups'])}. Run `make bench` "
                 "(defaults) for the real table.\n")
    L.append(f"Measured {m['date']} by `make bench` (bench/bench.sh, run `{m['stamp']}`, "
             f"{int(open(run.d + '/wall_s').read()) // 60} min), {m['pairs']} interleaved pairs "
             f"(glint, llama.cpp, glint, llama.cpp, ...), 1 repetition per run, after each "
             f"side's own warm-up. Model `{m['model']}` ({ins['file_size'] / 1e9:.2f} GB, "
             f"{len(ins['tensors'])} tensors).\n")
    lc = next((ln.split(": ", 1)[1] for ln in m["llama_build_info"].splitlines()
               if ln.startswith("commit: ")), "?")
    L.append(f"Sides: **glint `{m['glint_commit']}`** (flags below) vs **llama.cpp `{lc[:12]}`** "
             f"(native build, `GGML_NATIVE=ON`, OpenMP; flags below); {T} threads unless the row "
             "says otherwise.\n")
    L.append("| metric | glint | llama.cpp | ratio glint / llama.cpp: median (min-max, pairs) | goal |")
    L.append("|---|---:|---:|---:|---:|")
    for r in rows:
        L.append("| " + " | ".join(r) + " |")
    L.append("")
    # derived: pp as a fraction of the VNNI peak, tg as GB/s
    L.append("**Against the machine's limits.** "
             f"Weights per token (all matrices but `token_embd`, which is only row-gathered): "
             f"{p_layers / 1e9:.3f} G parameters in the layers + {p_head / 1e9:.3f} G in the "
             f"output head, {bytes_tok / 1e9:.3f} GB read per decoded token. "
             f"pp GOPS = 2 x ({p_layers / 1e9:.3f} G x tokens + {p_head / 1e9:.3f} G x 1, the head "
             f"runs for the last token only) / seconds; in brackets the plain 2 x (all {(p_layers + p_head) / 1e9:.3f} G) x tokens / seconds, which overstates the work by counting the head per token; attention FLOPs not counted. int8 VNNI peak "
             f"(`bench/vnni_peak.c`, vpdpbusd zmm, 128 ops per instruction, best of many ~20 ms passes at the start and the end of the run): "
             f"{fmt(vn.get(1), 0)} GOPS with 1 thread, {fmt(vn.get(2), 0)} GOPS with 2.\n")
    L.append("| derived | glint | llama.cpp |")
    L.append("|---|---:|---:|")

    def gops(ts, tok):
        return 2 * (p_layers * tok + p_head) / (tok / ts) / 1e9 if ts else None

    for key, thr in ((f"pp{P}, {T} threads (t/s)", T), (f"pp{P}, 1 thread (t/s)", 1)):
        if key in series:
            gv, lv, _ = series[key]
            pk = vn.get(thr)
            cells = []
            for v in (med(gv), med(lv)):
                g = gops(v, P)
                lit = 2 * (p_layers + p_head) * v / 1e9 if v else None  # head counted per token
                cells.append("-" if g is None else
                             f"{g:.0f} GOPS" + (f" = {100 * g / pk:.0f} % of peak" if pk else "") +
                             f" ({lit:.0f} with the head per token)")
            L.append(f"| pp{P}, {thr} thread{'s' if thr > 1 else ''}: int8 GOPS, share of the "
                     f"VNNI peak | {cells[0]} | {cells[1]} |")
    for key, pk in ((f"tg{N}, {T} threads (t/s)", "mean"), (f"tg{N}, 1 thread (t/s)", "mean1")):
        pb = [p[pk] for p in probes if pk in p]
        what = "probe" if pk == "mean" else "1-thread probe"
        if key in series:
            gv, lv, _ = series[key]
            cells = [("-" if v is None else f"{bytes_tok * v / 1e9:.1f} GB/s" +
                      (f" = {100 * bytes_tok * v / 1e9 / med(pb):.0f} % of the {what}" if pb else ""))
                     for v in (med(gv), med(lv))]
            L.append(f"| {key.split(' (')[0]}: weight bytes read per second | {cells[0]} | {cells[1]} |")
    L.append("")
    if probes:
        L.append(f"**Memory bandwidth probe** (`bench/bw.c`, 2 threads, 2 GiB read-only vector sum (AVX-512 where the CPU has it), "
                 f"best / mean of 5 passes, GB/s): before {probes[0]['best']:.1f} / "
                 f"{probes[0]['mean']:.1f}; after {probes[-1]['best']:.1f} / {probes[-1]['mean']:.1f}; "
                 f"between pairs (mean): " + ", ".join(f"{p['mean']:.1f}" for p in probes[1:-1]) +
                 ("; 1 thread, mean: " + ", ".join(f"{p['mean1']:.1f}" for p in probes if "mean1" in p)
                  if any("mean1" in p for p in probes) else "") +
                 ". Load average (1 min) at the probes: " + ", ".join(f"{p['load']:.2f}" for p in probes) +
                 ". A pair run through a bandwidth shift or load above ~1 is noisy; compare ratios, "
                 "not absolute t/s across runs.\n")
    val = validity(run)
    if val:
        L.append("**Constrained outputs** (same 10-field schema `bench/schema10.json`: enums, a nested "
                 "object, an array of arrays, an array of objects; greedy, max_tokens "
                 f"{m['serve_max_tokens']}; random weights; an output that hits max_tokens is "
                 "incomplete JSON):\n")
        L.append("| side | concurrency | requests | valid (Ajv) | ended by the model | hit max_tokens |")
        L.append("|---|---:|---:|---:|---:|---:|")
        for s, c, n, v, st, ln, _ in val:
            L.append(f"| {'glint serve' if s == 'glint' else 'llama-server'} | {c} | {n} | {v} | {st} | {ln} |")
        L.append("")
        for s, c, n, v, st, ln, sample in val:
            if c == 1:
                L.append(f"First output of {s} at concurrency 1 (first 200 characters, as a JSON "
                         f"string): `{json.dumps(sample[:200]).replace('`', chr(39))}`  ")
        L.append("")
    ms = f"{run.d}/mask_summary.txt"
    if os.path.exists(ms):
        L.append("**Grammar mask times** (`bench/microbench_mask --dump` over a MaskBench subset, "
                 "real 202,048-token vocabulary, 1 thread, thread CPU time per mask; "
                 "![mask times](perf-mask.png)): " + " ".join(open(ms).read().split("\n")[:1]) + "\n")
    if "batch" in m["groups"]:
        L.append(f"![aggregate decode t/s against batch size](perf-batch.png)\n")
    # Reports name paths relative to the repository (no machine paths in docs/): the glint
    # binary by its path in the tree, llama.cpp's source by its directory name in the cache.
    bi = re.sub(r"source: \S*/", "source: $LLAMA_CACHE/", m["llama_build_info"].strip())
    bi = bi.replace("\n", "; ")
    gb = m["glint_bin"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gb = os.path.relpath(gb, root) if os.path.abspath(gb).startswith(root + "/") else os.path.basename(gb)
    L.append("**Versions and flags.**\n")
    L.append(f"- glint: commit `{m['glint_commit']}`, `{gb}`; {m['glint_flags']}")
    L.append(f"- llama.cpp (`bench/llama_build.sh`, build-info.txt): {bi}")
    L.append(f"- machine: {m['cpu']}, {m['nproc']} vCPUs, {m['mem_gib']} GiB, Linux {m['kernel']}")
    L.append("")
    return L


HEAD = """# glint performance (CPU)

Written by `make bench` (`bench/bench.sh` -> `bench/report.py`); the 52-layer section by
`bench/full-model.sh`. Do not edit by hand: rerun. What each row times, and what is not
comparable between the two sides: `bench/README.md`.

"""


def write_doc(doc, body_main, full_section):
    text = HEAD + "\n".join(body_main) + "\n"
    if full_section:
        text += "\n" + full_section.strip() + "\n"
    if doc == "-":
        sys.stdout.write(text)
    else:
        with open(doc, "w") as f:
            f.write(text)


VISION_BEGIN = "<!-- vision:begin -->"  # the vision encoder section (bench/README.md), by hand


def existing_full(doc):
    """The sections make bench does not write: the 52-layer one and the vision one, kept as they
    are (from the first of their markers to the end of the page)."""
    if doc == "-" or not os.path.exists(doc):
        return ""
    t = open(doc).read()
    at = [i for i in (t.find(FULL_BEGIN), t.find(VISION_BEGIN)) if i >= 0]
    return t[min(at):] if at else ""


def main_bench(rund, doc):
    run = Run(rund)
    rows, series = rows_for(run)
    if doc != "-":
        charts(run, os.path.dirname(os.path.abspath(doc)))
    body = ["## 4-layer file, glint vs llama.cpp\n"] + perf_section(run, rows, series)
    write_doc(doc, body, existing_full(doc))


def main_full(rund, doc):
    """bench/full-model.sh: replace the dated full-model section."""
    meta = jload(f"{rund}/meta.json")
    K = meta["pairs"]
    rows = []

    def get(k, s, key):
        p = f"{rund}/p{k}-{s}.json"
        if not os.path.exists(p):
            return None
        return jload(p).get(key)

    for key, name in (("pp", f"pp{meta['p']}, {meta['threads']} threads (t/s)"),
                      ("tg", f"tg{meta['n']}, {meta['threads']} threads (t/s)"),
                      ("rss_gib", "peak RSS of the pp/tg run (GiB)"),
                      ("ttft_s", "cold start to first token, server (s)"),
                      ("ready_s", "cold start to /health 200, server (s)")):
        gv = [v for k in range(1, K + 1) for v in [get(k, "glint", key)] if v is not None]
        lv = [v for k in range(1, K + 1) for v in [get(k, "llama", key)] if v is not None]
        rv = [a / b for k in range(1, K + 1)
              for a, b in [(get(k, "glint", key), get(k, "llama", key))] if a and b]
        goal = GOAL_FULL[key]
        rows.append((name, fmt(med(gv)), fmt(med(lv)), spread(rv), goal))
    probes = jlines(f"{rund}/probes.jsonl")
    bi = meta["llama_build_info"].strip().replace("\n", "; ")
    nl = "?"
    bj = f"{rund}/p1-glint.bench.json"
    if os.path.exists(bj) and os.path.getsize(bj):
        nl = jload(bj)[0].get("n_layer", "?")
    L = [FULL_BEGIN, f"## Full model: {nl} layers ({meta['date']})\n",
         f"`bench/full-model.sh` on `{meta['model']}` ({meta['file_gb']:.2f} GB), {K} interleaved "
         f"pairs. Cold start: {meta['cold']}.\n",
         "| metric | glint | llama.cpp | ratio glint / llama.cpp: median (min-max, pairs) | goal |",
         "|---|---:|---:|---:|---:|"]
    L += ["| " + " | ".join(r) + " |" for r in rows]
    if probes:
        L.append(f"\nBandwidth probe (GB/s, best / mean): before {probes[0]['best']:.1f} / "
                 f"{probes[0]['mean']:.1f}, after {probes[-1]['best']:.1f} / {probes[-1]['mean']:.1f}.")
    L.append(f"\nglint `{meta['glint_commit']}` ({meta['glint_flags']}); llama.cpp: {bi}.")
    L.append(FULL_END)
    section = "\n".join(L)
    if doc == "-":
        print(section)
        return
    if os.path.exists(doc):
        t = open(doc).read()
        a, b = t.find(FULL_BEGIN), t.find(FULL_END)
        if a >= 0 and b > a:
            t = t[:a] + section + t[b + len(FULL_END):]
        else:
            t = t.rstrip("\n") + "\n\n" + section + "\n"
    else:
        t = HEAD + section + "\n"
    with open(doc, "w") as f:
        f.write(t)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--full":
        main_full(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3:
        main_bench(sys.argv[1], sys.argv[2])
    else:
        sys.exit("usage: report.py RUN_DIR DOC | report.py --full RUN_DIR DOC")
