# SPDX-License-Identifier: MIT
"""vision_ref.py: a float64 PyTorch transcription of the perception encoder forward pass
(docs muse-glimmer-arch.md §6.3), written from the doc text, for glint's src/vision.

Generates random weights for a tiny config (fixed seed) and random patches for each test grid,
runs the reference forward and writes, into OUT_DIR:
  config.json      shapes, the weight order and the cases (grid, file names)
  weights.f32      every tensor, float32 little-endian, concatenated in the listed order
                   (Linear weights [out][in] as torch stores them)
  <case>.in.f32    patches [gh*gw][patch_dim], row-major over the patch grid
  <case>.ref.f64   expected output (float64) [(gh/2)*(gw/2)][out_dim]
The reference runs in float64 on the float32-rounded weights and inputs the C side reads.
Usage: vision_ref.py OUT_DIR [--control NAME | --preset real2]
--control writes the reference of a plausible mistake instead, for negative controls that the
C side must FAIL: clamp (border-clamped position taps, F.interpolate), nowindow (every layer
full), rope_swap (row and column angles swapped), shuffle (spatial-major pixel shuffle).
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

CFG = dict(patch_size=14, patch_frames=2, hidden=64, n_layers=3, n_heads=4, head_dim=16, ffn=96,
           pos_h=4, pos_w=4, merge=2, full_every=4, adapter=48, out_dim=32, ln_eps=1e-5,
           rms_eps=1e-5, rope_theta=10000.0)
# (name, patch rows, patch cols): one grid inside a single window; one spanning 2x3 windows with
# partial edge windows and wider (10) than the 4-entry table, so bilinear taps fall off the table.
CASES = [("small", 2, 4), ("wide", 6, 10)]
CONTROLS = ("clamp", "nowindow", "nofull", "rope_swap", "shuffle")
# --preset real2: the released widths (hidden 1536, 16 heads of 96, ffn 8960, 32x32 table,
# adapter 4096, out 6656) with 2 layers (a window layer, then the last = full) on the 34x46 patch
# grid of the §6.2 COCO example (2x2 windows, partial at the edges; 34 > 32 rows, so zero padding).
# Large (~0.6 GB of weights): a one-off check, not part of check_vision_torch.sh.
REAL2 = dict(CFG, hidden=1536, n_layers=2, n_heads=16, head_dim=96, ffn=8960, pos_h=32, pos_w=32,
             adapter=4096, out_dim=6656)
CONTROL = None


def make_weights(gen):
    c = CFG
    H, Fd, A = c["hidden"], c["ffn"], c["adapter"]
    pdim = c["patch_frames"] * 3 * c["patch_size"] ** 2

    def mat(o, i):
        return torch.randn(o, i, generator=gen, dtype=torch.float64) / math.sqrt(i)

    def vec(n, scale=0.1):
        return torch.randn(n, generator=gen, dtype=torch.float64) * scale

    def ln():
        return 1.0 + vec(H), vec(H)

    w = []  # (name, tensor) in file order
    w.append(("patch", mat(H, pdim)))
    w.append(("pos", torch.randn(c["pos_h"] * c["pos_w"], H, generator=gen, dtype=torch.float64)))
    g, b = ln()
    w += [("ln_pre.w", g), ("ln_pre.b", b)]
    for l in range(c["n_layers"]):
        g, b = ln()
        w += [(f"{l}.ln1.w", g), (f"{l}.ln1.b", b)]
        for n in ("q", "k", "v", "proj"):
            w += [(f"{l}.{n}.w", mat(H, H)), (f"{l}.{n}.b", vec(H))]
        g, b = ln()
        w += [(f"{l}.ln2.w", g), (f"{l}.ln2.b", b)]
        w += [(f"{l}.fc1.w", mat(Fd, H)), (f"{l}.fc1.b", vec(Fd))]
        w += [(f"{l}.fc2.w", mat(H, Fd)), (f"{l}.fc2.b", vec(H))]
    g, b = ln()
    w += [("ln_post.w", g), ("ln_post.b", b)]
    w.append(("adapter_fc1", mat(A, 4 * H)))
    w.append(("adapter_fc2", mat(A, A)))
    w.append(("projection", mat(c["out_dim"], A)))
    # Round to float32 (what the C side reads), compute in float64.
    return [(n, t.float().double()) for n, t in w]


def pos_embedding(table, gh, gw):
    """Bilinear resample of the (pos_h x pos_w) table to gh x gw, align_corners=False with ZERO
    padding, via grid_sample: its unnormalised source coordinate for a normalised x is
    ((x + 1) * W - 1) / 2; x = (2i + 1) / n - 1 gives (i + 0.5) * W / n - 0.5 as the doc says."""
    ph, pw, H = CFG["pos_h"], CFG["pos_w"], CFG["hidden"]
    img = table.reshape(ph, pw, H).permute(2, 0, 1).unsqueeze(0)  # [1, H, ph, pw]
    if CONTROL == "clamp":
        out = F.interpolate(img, size=(gh, gw), mode="bilinear", align_corners=False)
        return out[0].permute(1, 2, 0).reshape(gh * gw, H)
    ys = (2 * torch.arange(gh, dtype=torch.float64) + 1) / gh - 1
    xs = (2 * torch.arange(gw, dtype=torch.float64) + 1) / gw - 1
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    grid = torch.stack([gx, gy], dim=-1).unsqueeze(0)  # [1, gh, gw, 2], (x=col, y=row)
    out = F.grid_sample(img, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out[0].permute(1, 2, 0).reshape(gh * gw, H)


def window_index(gh, gw):
    """Row-major patch indices in window order, and the window lengths."""
    wh, ww = CFG["pos_h"], CFG["pos_w"]
    idx = torch.arange(gh * gw).reshape(gh, gw)
    order, lens = [], []
    for r0 in range(0, gh, wh):
        for c0 in range(0, gw, ww):
            block = idx[r0:r0 + wh, c0:c0 + ww].reshape(-1)
            order.append(block)
            lens.append(block.numel())
    return torch.cat(order), lens


def rope_cos_sin(rows, cols):
    """cos/sin [P, head_dim] for the rotate_half layout: frequency j < hd/4 on (col+1), the next
    hd/4 on (row+1), the 48-style half repeated for the second element of each pair."""
    hd = CFG["head_dim"]
    half = hd // 2
    inv = CFG["rope_theta"] ** (-torch.arange(0, half, 2, dtype=torch.float64) / half)
    fc = (cols.double() + 1)[:, None] * inv[None, :]
    fr = (rows.double() + 1)[:, None] * inv[None, :]
    emb = torch.cat([fr, fc] if CONTROL == "rope_swap" else [fc, fr], dim=-1)  # [P, half]
    emb = torch.cat([emb, emb], dim=-1)  # [P, hd]
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def forward(W, patches, gh, gw):
    c = CFG
    H, nh, hd = c["hidden"], c["n_heads"], c["head_dim"]
    eps = c["ln_eps"]
    P = gh * gw
    x = patches @ W["patch"].T + pos_embedding(W["pos"], gh, gw)
    x = F.layer_norm(x, (H,), W["ln_pre.w"], W["ln_pre.b"], eps)
    order, lens = window_index(gh, gw)
    x = x[order]
    rows, cols = order // gw, order % gw
    cos, sin = rope_cos_sin(rows, cols)
    # Additive masks: block-diagonal over windows, or none.
    win_mask = torch.full((P, P), float("-inf"), dtype=torch.float64)
    s = 0
    for n in lens:
        win_mask[s:s + n, s:s + n] = 0
        s += n
    for l in range(c["n_layers"]):
        full = (l + 1) % c["full_every"] == 0 or l == c["n_layers"] - 1 or CONTROL == "nowindow"
        full = full and CONTROL != "nofull"
        h = F.layer_norm(x, (H,), W[f"{l}.ln1.w"], W[f"{l}.ln1.b"], eps)
        q = (h @ W[f"{l}.q.w"].T + W[f"{l}.q.b"]).reshape(P, nh, hd).transpose(0, 1)
        k = (h @ W[f"{l}.k.w"].T + W[f"{l}.k.b"]).reshape(P, nh, hd).transpose(0, 1)
        v = (h @ W[f"{l}.v.w"].T + W[f"{l}.v.b"]).reshape(P, nh, hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-1, -2)) * hd ** -0.5
        if not full:
            att = att + win_mask
        o = (att.softmax(-1) @ v).transpose(0, 1).reshape(P, H)
        x = x + o @ W[f"{l}.proj.w"].T + W[f"{l}.proj.b"]
        h = F.layer_norm(x, (H,), W[f"{l}.ln2.w"], W[f"{l}.ln2.b"], eps)
        h = F.gelu(h @ W[f"{l}.fc1.w"].T + W[f"{l}.fc1.b"])
        x = x + h @ W[f"{l}.fc2.w"].T + W[f"{l}.fc2.b"]
    inv = torch.empty_like(order)
    inv[order] = torch.arange(P)
    x = x[inv]
    x = F.layer_norm(x, (H,), W["ln_post.w"], W["ln_post.b"], eps)
    # Pixel shuffle: [gh, gw, H] -> cells [gh/2, gw/2, (2x2 sub-patches s), H] -> channel-major.
    x = x.reshape(gh // 2, 2, gw // 2, 2, H).permute(0, 2, 1, 3, 4).reshape(-1, 4, H)
    x = x.reshape(-1, 4 * H) if CONTROL == "shuffle" else x.permute(0, 2, 1).reshape(-1, 4 * H)
    x = F.gelu(x @ W["adapter_fc1"].T)
    x = F.gelu(x @ W["adapter_fc2"].T)
    x = x @ W["projection"].T
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["rms_eps"])


def main():
    global CONTROL, CASES
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--control" and args[2] in CONTROLS:
        CONTROL = args[2]
    elif len(args) == 3 and args[1:] == ["--preset", "real2"]:
        CFG.update(REAL2)
        CASES = [("coco", 34, 46)]
    elif len(args) != 1:
        sys.exit("usage: vision_ref.py OUT_DIR [--control " + "|".join(CONTROLS) + " | --preset real2]")
    out = args[0]
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(12)
    weights = make_weights(gen)
    with open(os.path.join(out, "weights.f32"), "wb") as f:
        for _, t in weights:
            f.write(t.numpy().astype("<f4").tobytes())
    W = dict(weights)
    pdim = CFG["patch_frames"] * 3 * CFG["patch_size"] ** 2
    cases = []
    for name, gh, gw in CASES:
        patches = torch.rand(gh * gw, pdim, generator=gen, dtype=torch.float64) * 2 - 1
        patches = patches.float().double()
        ref = forward(W, patches, gh, gw)
        patches.numpy().astype("<f4").tofile(os.path.join(out, f"{name}.in.f32"))
        ref.numpy().astype("<f8").tofile(os.path.join(out, f"{name}.ref.f64"))
        cases.append(dict(name=name, gh=gh, gw=gw, input=f"{name}.in.f32", ref=f"{name}.ref.f64"))
        print(f"vision_ref: {name} {gh}x{gw} patches -> {ref.shape[0]}x{ref.shape[1]}")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(config=CFG, weights=[[n, list(t.shape)] for n, t in weights],
                       cases=cases), f, indent=1)


if __name__ == "__main__":
    main()
