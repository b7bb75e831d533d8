# SPDX-License-Identifier: MIT
# Image preprocessing oracle (run by check_image_pillow.sh with Debian's /usr/bin/python3, which
# has Pillow 9.4 and numpy). Writes a fixed-seed set of PNG/JPEG files covering every pixel format
# the decoder handles, runs `glint image preprocess` on each, and compares with the reference:
#   decoded  == transformers' convert_to_rgb(Image.open(f)) (RGB kept; other modes -> RGBA ->
#               alpha_composite onto white -> RGB), byte for byte
#   resized  == converted.resize((gw*28, gh*28), Image.LANCZOS): values may differ by at most 1,
#               and at most MAX_DIFF_FRACTION of them (Pillow's fixed point is reproduced
#               exactly, so 0 is expected)
#   grid     == the §6.2 search written here independently; 640x480 must give [1, 34, 46], 391
#   patches  == HF rescale/normalize (float64 x 1/255 -> float32, (x - 0.5) / 0.5 in float32)
#               and the (t, c, row, col) patch layout, exactly, on a subset
# Broken files (truncated, garbage) must make both Pillow and glint fail. Every file of the fuzz
# seed corpus (CORPUS_DIR; valid, truncated and fuzzer-mutated files) must be accepted by both
# with identical pixels, or refused by both.
# Usage: image_ref.py GLINT_BIN WORKDIR [CORPUS_DIR]. Prints failures and one summary line.
import io
import json
import math
import os
import random
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

MAX_DIFF_FRACTION = 1e-4
UNIT = 28


# ---- a small PNG writer for what Pillow cannot save (bit depths, tRNS keys, Adam7) ----


def _chunk(tag, data):
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def _pack_row(samples, depth):
    if depth == 8:
        return bytes(samples)
    if depth == 16:
        return b"".join(struct.pack(">H", v) for v in samples)
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(samples), per):
        b = 0
        for j, v in enumerate(samples[i : i + per]):
            b |= v << (8 - depth * (j + 1))
        out.append(b)
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(w, h, color, depth, pixels, plte=None, trns=None, interlace=False):
    """pixels: h rows of w tuples of samples (channels per colour type)."""
    raw = bytearray()
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    for x0, y0, dx, dy in passes:
        xs = range(x0, w, dx)
        for y in range(y0, h, dy):
            if not xs:
                continue
            samples = [s for x in xs for s in pixels[y][x]]
            raw += b"\0" + _pack_row(samples, depth)
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, int(interlace)))
    if plte is not None:
        out += _chunk(b"PLTE", bytes(c for rgb in plte for c in rgb))
    if trns is not None:
        out += _chunk(b"tRNS", trns)
    return out + _chunk(b"IDAT", zlib.compress(bytes(raw))) + _chunk(b"IEND", b"")


# ---- the image set ----


def content(rng, w, h, ch, maxv=255):
    """Smooth gradients plus noise (resampling sees both edges and flat areas)."""
    fx, fy = rng.uniform(0.01, 0.3), rng.uniform(0.01, 0.3)
    rows = []
    for y in range(h):
        row = []
        for x in range(w):
            px = []
            for c in range(ch):
                base = 0.5 + 0.5 * math.sin(fx * x * (c + 1) + fy * y + c)
                v = int(base * maxv * 0.8 + rng.random() * maxv * 0.2)
                px.append(max(0, min(maxv, v)))
            row.append(tuple(px))
        rows.append(row)
    return rows


def pil_image(rng, mode, w, h):
    ch = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}[mode]
    arr = np.array(content(rng, w, h, ch), dtype=np.uint8).reshape(h, w, ch)
    if mode == "RGBA" or mode == "LA":  # exercise alpha 0, 255 and everything between
        a = arr[..., -1]
        a[::5] = 0
        a[1::7] = 255
    return Image.fromarray(arr[..., 0] if ch == 1 else arr, mode)


def saved(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def build_cases(rng):
    cases = []  # (name, bytes)
    for w, h in [(1, 1), (2, 3), (13, 7), (27, 29), (28, 28), (29, 57), (101, 67), (333, 211),
                 (640, 480), (3000, 7), (7, 3000), (1000, 1), (1, 1000), (2400, 1800), (56, 2000)]:
        cases.append((f"rgb_{w}x{h}.png", saved(pil_image(rng, "RGB", w, h), "PNG")))
    for w, h in [(1, 1), (64, 48), (257, 129)]:
        cases.append((f"gray_{w}x{h}.png", saved(pil_image(rng, "L", w, h), "PNG")))
    for w, h in [(1, 1), (77, 51), (300, 200)]:
        cases.append((f"rgba_{w}x{h}.png", saved(pil_image(rng, "RGBA", w, h), "PNG")))
    cases.append(("la_90x61.png", saved(pil_image(rng, "LA", 90, 61), "PNG")))
    q = pil_image(rng, "RGB", 120, 80).quantize(colors=40, method=Image.Quantize.MEDIANCUT)
    cases.append(("palette_120x80.png", saved(q, "PNG")))
    q.info["transparency"] = 3
    cases.append(("palette_trns1_120x80.png", saved(q, "PNG", transparency=3)))
    for depth in (1, 2, 4, 8):  # palette files with per-entry alphas, some indices past PLTE
        n = 1 << depth
        plte = [tuple(rng.randrange(256) for _ in range(3)) for _ in range(max(1, n - 1))]
        trns = bytes(rng.choice([0, 255, rng.randrange(256)]) for _ in range(len(plte) // 2 + 1))
        px = [[(rng.randrange(n),) for _ in range(37)] for _ in range(23)]
        cases.append((f"pal{depth}_alpha.png", write_png(37, 23, 3, depth, px, plte, trns)))
    for depth in (1, 2, 4, 8, 16):  # gray at every depth, with and without a tRNS key
        maxv = (1 << depth) - 1
        px = [[(rng.randrange(maxv + 1),) for _ in range(41)] for _ in range(19)]
        cases.append((f"gray{depth}.png", write_png(41, 19, 0, depth, px)))
        key = px[0][0][0]
        cases.append((f"gray{depth}_trns.png", write_png(41, 19, 0, depth, px, trns=struct.pack(">H", key))))
    px = [[(rng.randrange(300),) for _ in range(50)] for _ in range(30)]  # 16-bit gray near 255
    cases.append(("gray16_low.png", write_png(50, 30, 0, 16, px, trns=struct.pack(">H", 200))))
    for color, ch, name in ((2, 3, "rgb"), (6, 4, "rgba"), (4, 2, "la")):
        px = [[tuple(rng.randrange(65536) for _ in range(ch)) for _ in range(45)] for _ in range(33)]
        cases.append((f"{name}16.png", write_png(45, 33, color, 16, px)))
    px = [[tuple(rng.randrange(256) for _ in range(3)) for _ in range(31)] for _ in range(17)]
    cases.append(("rgb8_trns.png", write_png(31, 17, 2, 8, px, trns=struct.pack(">HHH", *px[0][0]))))
    px = [[tuple(rng.randrange(256) for _ in range(4)) for _ in range(29)] for _ in range(21)]
    cases.append(("rgba8_adam7.png", write_png(29, 21, 6, 8, px, interlace=True)))
    px = [[(rng.randrange(4),) for _ in range(19)] for _ in range(11)]
    cases.append(("gray2_adam7.png", write_png(19, 11, 0, 2, px, interlace=True)))
    for w, h in [(1, 1), (33, 17), (640, 480), (1001, 999), (3000, 7)]:
        im = pil_image(rng, "RGB", w, h)
        for sub in (0, 1, 2):
            cases.append((f"jpeg_{w}x{h}_sub{sub}.jpg", saved(im, "JPEG", quality=85, subsampling=sub)))
    cases.append(("jpeg_prog_333x211.jpg", saved(pil_image(rng, "RGB", 333, 211), "JPEG", progressive=True)))
    cases.append(("jpeg_prog_opt_64x1000.jpg",
                  saved(pil_image(rng, "RGB", 64, 1000), "JPEG", progressive=True, optimize=True, quality=60)))
    cases.append(("jpeg_gray_99x77.jpg", saved(pil_image(rng, "L", 99, 77), "JPEG")))
    cases.append(("jpeg_cmyk_50x40.jpg", saved(pil_image(rng, "CMYK", 50, 40), "JPEG")))
    return cases


# ---- references ----


def convert_to_rgb(im):
    """transformers.image_transforms.convert_to_rgb."""
    if im.mode == "RGB":
        return im
    rgba = im.convert("RGBA")
    bg = Image.new("RGBA", rgba.size, (255, 255, 255))
    return Image.alpha_composite(bg, rgba).convert("RGB")


def grid(width, height, max_tokens=4096):
    h, w = height / UNIT, width / UNIT
    if h * w > max_tokens:
        s = math.sqrt(max_tokens / (h * w))
        h, w = h * s, w * s
    best = None
    for gh in (math.floor(h), math.ceil(h)):
        for gw in (math.floor(w), math.ceil(w)):
            if gh < 1 or gw < 1 or gh * gw > max_tokens:
                continue
            d = abs(gh / gw - height / width)
            if best is None or d < best[0]:
                best = (d, gh, gw)
    if best is None:  # documented fallback (image.c): rounded, clamped, long side cut to the cap
        gh = max(1, min(max_tokens, math.floor(h + 0.5)))  # C lround: halves away from zero
        gw = max(1, min(max_tokens, math.floor(w + 0.5)))
        if gh * gw > max_tokens:
            if gh >= gw:
                gh = max_tokens // gw
            else:
                gw = max_tokens // gh
        return gh, gw
    return best[1], best[2]


def patches(rgb):
    """HF: rescale (float64 * 1/255 -> float32), normalize (float32), (t, c, r, c) patches."""
    x = (rgb.astype(np.float64) * (1 / 255)).astype(np.float32)
    x = (x - np.float32(0.5)) / np.float32(0.5)
    h, w, _ = x.shape
    x = x.transpose(2, 0, 1).reshape(3, h // 14, 14, w // 14, 14).transpose(1, 3, 0, 2, 4)
    x = x.reshape(h // 14, w // 14, 1, 3, 14, 14)
    return np.concatenate([x, x], axis=2).reshape(-1, 1176)


def run_glint(glint, path, work, want_patches, cap=None):
    cmd = [glint, "image", "preprocess", path, "--out", f"{work}/out.raw", "--decoded", f"{work}/dec.raw"]
    if cap is not None:
        cmd += ["--max-image-tokens", str(cap)]
    if want_patches:
        cmd += ["--patches", f"{work}/patches.f32"]
    return subprocess.run(cmd, capture_output=True, text=True)


def check_one(glint, work, name, data, stats, cap=None):
    path = f"{work}/{name}"
    with open(path, "wb") as f:
        f.write(data)
    ref = convert_to_rgb(Image.open(path))
    ref_rgb = np.asarray(ref)
    gh, gw = grid(ref.width, ref.height, cap or 4096)
    want_patches = stats["patch_checked"] < 6 and gh * gw <= 1024
    r = run_glint(glint, path, work, want_patches, cap)
    if r.returncode != 0:
        return f"{name}: glint failed: {r.stderr.strip()}"
    meta = json.loads(r.stdout)
    if meta["grid_thw"] != [1, 2 * gh, 2 * gw] or meta["n_tokens"] != gh * gw:
        return f"{name}: grid {meta['grid_thw']} {meta['n_tokens']}, want [1, {2 * gh}, {2 * gw}] {gh * gw}"
    stats["grid_ok"] += 1
    dec = np.fromfile(f"{work}/dec.raw", np.uint8)
    if dec.size != ref_rgb.size or not np.array_equal(dec.reshape(ref_rgb.shape), ref_rgb):
        n = (dec != ref_rgb.reshape(-1)).sum() if dec.size == ref_rgb.size else "size"
        return f"{name}: decoded pixels differ from Pillow ({n} values)"
    stats["decoded_ok"] += 1
    want = np.asarray(ref.resize((gw * UNIT, gh * UNIT), Image.LANCZOS)).astype(np.int16)
    out = np.fromfile(f"{work}/out.raw", np.uint8)
    if out.size != want.size:
        return f"{name}: resized size {out.size} values, want {want.size}"
    diff = np.abs(out.reshape(want.shape).astype(np.int16) - want)
    stats["values"] += diff.size
    stats["diff_values"] += int((diff > 0).sum())
    stats["max_diff"] = max(stats["max_diff"], int(diff.max()))
    if diff.max() > 1 or (diff > 0).sum() > MAX_DIFF_FRACTION * diff.size:
        return f"{name}: resize differs: {(diff > 0).sum()} values, max {diff.max()}"
    stats["resized_ok"] += 1
    if want_patches:
        got = np.fromfile(f"{work}/patches.f32", np.float32)
        exp = patches(out.reshape(want.shape))
        if got.size != exp.size or not np.array_equal(got.reshape(exp.shape), exp):
            return f"{name}: patch vectors differ from the HF layout/normalisation"
        stats["patch_checked"] += 1
    return None


def check_broken(glint, work, name, data):
    path = f"{work}/{name}"
    with open(path, "wb") as f:
        f.write(data)
    try:
        Image.open(path).load()
        pil_ok = True
    except Exception:
        pil_ok = False
    r = run_glint(glint, path, work, False)
    ok = r.returncode == 1 and "image: " in r.stderr and not r.stdout
    if pil_ok:
        return f"{name}: Pillow decodes this broken file"
    return None if ok else f"{name}: glint exit {r.returncode}, stderr {r.stderr.strip()!r}"


def check_corpus(glint, work, corpus):
    """(agreeing files, failure messages) for Pillow vs glint over a folder of files."""
    agree, fails = 0, []
    for name in sorted(os.listdir(corpus)):
        path = os.path.join(corpus, name)
        try:
            im = Image.open(path)
            im.load()
            ref = np.asarray(convert_to_rgb(im))
        except Exception:
            ref = None
        r = run_glint(glint, path, work, False)
        if ref is None and r.returncode == 1:
            agree += 1
        elif ref is not None and r.returncode == 0:
            dec = np.fromfile(f"{work}/dec.raw", np.uint8)
            if dec.size == ref.size and np.array_equal(dec.reshape(ref.shape), ref):
                agree += 1
            else:
                fails.append(f"corpus {name}: decoded pixels differ from Pillow")
        else:
            fails.append(f"corpus {name}: Pillow {'ok' if ref is not None else 'refuses'}, glint exit "
                         f"{r.returncode} {r.stderr.strip()[-100:]!r}")
    return agree, fails


def main():
    glint, work = sys.argv[1], sys.argv[2]
    rng = random.Random(12)
    cases = build_cases(rng)
    stats = dict(grid_ok=0, decoded_ok=0, resized_ok=0, values=0, diff_values=0, max_diff=0, patch_checked=0)
    fails = []
    for name, data in cases:
        msg = check_one(glint, work, name, data, stats)
        if msg:
            fails.append(msg)
    # A few files again under smaller token caps (--max-image-tokens).
    for name, cap in (("rgb_640x480.png", 100), ("rgb_3000x7.png", 16), ("jpeg_1001x999_sub2.jpg", 1),
                      ("rgba_300x200.png", 64), ("rgb_2400x1800.png", 1000)):
        msg = check_one(glint, work, name, dict(cases)[name], stats, cap)
        if msg:
            fails.append(f"{msg} (max tokens {cap})")
    n_runs = len(cases) + 5
    if grid(640, 480) != (17, 23):
        fails.append(f"python grid(640, 480) = {grid(640, 480)}, want (17, 23)")
    png, jpg = dict(cases)["rgb_101x67.png"], dict(cases)["jpeg_640x480_sub2.jpg"]
    broken = [("trunc_png_half.png", png[: len(png) // 2]), ("trunc_png_sig.png", png[:12]),
              ("trunc_jpeg_half.jpg", jpg[: len(jpg) // 2]), ("trunc_jpeg_hdr.jpg", jpg[:200]),
              ("garbage.png", b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(300))),
              ("garbage.bin", b"GIF89a" + bytes(100)), ("empty.png", b"")]
    n_broken = 0
    for name, data in broken:
        msg = check_broken(glint, work, name, data)
        if msg:
            fails.append(msg)
        else:
            n_broken += 1
    n_corpus = corpus_agree = 0
    if len(sys.argv) > 3:
        n_corpus = len(os.listdir(sys.argv[3]))
        corpus_agree, corpus_fails = check_corpus(glint, work, sys.argv[3])
        fails += corpus_fails
    for m in fails:
        print("  " + m)
    n = len(cases)
    print(f"image pillow: {n} images, {n_runs} runs: decoded {stats['decoded_ok']}/{n_runs} identical, resized "
          f"{stats['resized_ok']}/{n_runs} ok ({stats['diff_values']}/{stats['values']} values differ, max "
          f"{stats['max_diff']}), grids {stats['grid_ok']}/{n_runs}, patches {stats['patch_checked']} exact, "
          f"broken {n_broken}/{len(broken)} rejected, fuzz corpus {corpus_agree}/{n_corpus} agree")
    return 1 if fails or n < 60 else 0


if __name__ == "__main__":
    sys.exit(main())
