#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""spec_chart.py: draw speculative decoding's cost curve (issue 22) as an SVG.

Reads the JSON lines that `glint bench --spec-curve` prints (bench/spec_curve.sh), one file per
model, and draws one panel per (file, batch size): the speed-up (1 / ratio_on_off, the median
over rounds) against alpha, one line per draft length k, with each point's min-max over rounds as
a bar and the break-even line at 1. Plain SVG text, no plotting library (gnuplot and matplotlib
are not among the project's dependencies).

Usage: spec_chart.py OUT.svg LABEL=FILE [LABEL=FILE ...]
"""
import json
import sys

W, H = 360, 260  # one panel, px
ML, MR, MT, MB = 48, 12, 30, 40  # margins: left, right, top, bottom
COLORS = ["#1b6ca8", "#d1495b", "#2e933c", "#edae49", "#6a4c93", "#444444"]


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("test") == "spec_curve":
                rows.append(r)
    if not rows:
        sys.exit(f"spec_chart: no spec_curve lines in {path}")
    return rows


def panel(out, x0, y0, title, rows):
    ks = sorted({(r["k"], r.get("adaptive", 0)) for r in rows})  # a line per (k, fixed or model)
    alphas = sorted({r["alpha"] for r in rows})
    speed = [1.0 / r["ratio_on_off"] for r in rows]
    lo = [1.0 / r["ratio_max"] for r in rows]
    hi = [1.0 / r["ratio_min"] for r in rows]
    ymax = max(2.0, max(hi) * 1.05)
    pw, ph = W - ML - MR, H - MT - MB

    def px(a):
        span = (alphas[-1] - alphas[0]) or 1.0
        return x0 + ML + (a - alphas[0]) / span * pw

    def py(v):
        return y0 + MT + ph - v / ymax * ph

    out.append(f'<text x="{x0 + W / 2}" y="{y0 + 18}" text-anchor="middle" '
               f'font-size="13">{title}</text>')
    out.append(f'<rect x="{x0 + ML}" y="{y0 + MT}" width="{pw}" height="{ph}" '
               'fill="none" stroke="#999"/>')
    step = 0.5 if ymax <= 4 else 1.0
    v = 0.0
    while v <= ymax + 1e-9:
        out.append(f'<line x1="{x0 + ML - 4}" x2="{x0 + ML}" y1="{py(v):.1f}" y2="{py(v):.1f}" '
                   'stroke="#999"/>')
        out.append(f'<text x="{x0 + ML - 6}" y="{py(v) + 4:.1f}" text-anchor="end" '
                   f'font-size="10">{v:g}x</text>')
        v += step
    for a in alphas:
        out.append(f'<text x="{px(a):.1f}" y="{y0 + MT + ph + 14}" text-anchor="middle" '
                   f'font-size="10">{a:g}</text>')
    out.append(f'<text x="{x0 + ML + pw / 2}" y="{y0 + H - 8}" text-anchor="middle" '
               'font-size="11">alpha (replay acceptance)</text>')
    out.append(f'<line x1="{x0 + ML}" x2="{x0 + ML + pw}" y1="{py(1):.1f}" y2="{py(1):.1f}" '
               'stroke="#000" stroke-dasharray="4 3"/>')
    for i, (k, adaptive) in enumerate(ks):
        c = COLORS[i % len(COLORS)]
        pts = sorted((r["alpha"], s, l, h) for r, s, l, h in zip(rows, speed, lo, hi)
                     if (r["k"], r.get("adaptive", 0)) == (k, adaptive))
        path = " ".join(f"{px(a):.1f},{py(s):.1f}" for a, s, _, _ in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="1.8"/>')
        for a, s, l, h in pts:
            out.append(f'<line x1="{px(a):.1f}" x2="{px(a):.1f}" y1="{py(l):.1f}" '
                       f'y2="{py(h):.1f}" stroke="{c}" stroke-opacity="0.5"/>')
            out.append(f'<circle cx="{px(a):.1f}" cy="{py(s):.1f}" r="2.5" fill="{c}"/>')
        label = f"cost model, k <= {k}" if adaptive else f"k {k}"
        out.append(f'<text x="{x0 + ML + 8}" y="{y0 + MT + 14 + 13 * i}" font-size="10" '
                   f'fill="{c}">{label}</text>')


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    panels = []
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        rows = load(path)
        for b in sorted({r["batch"] for r in rows}):
            sel = [r for r in rows if r["batch"] == b]
            panels.append((f"{label}, batch {b}", sel))
    cols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + cols - 1) // cols
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * cols}" height="{H * nrows}" '
           'font-family="sans-serif">', '<rect width="100%" height="100%" fill="#fff"/>']
    for i, (title, rows) in enumerate(panels):
        panel(out, (i % cols) * W, (i // cols) * H, title, rows)
    out.append("</svg>")
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv)
