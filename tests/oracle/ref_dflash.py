#!/usr/bin/python3
# ref_dflash.py: float64 PyTorch transcription of the DFlash drafter (arch doc §7, llama.cpp's
# dflash GGUF conventions in docs/dflash.md), checked against `test_dflash --oracle` output:
#   ctx = the target's captured layer outputs of the context (n x T*E; checked first against
#         ref_forward.py's float64 target pass, the capture's layer mapping included);
#   g   = RMS(fc . ctx) * enc.output_norm; each block l: K/V of the context from g (k_norm,
#         NeoX RoPE at context positions 0..n-1), Q/K/V of the block from attn_norm(x) (q_norm,
#         k_norm, NeoX RoPE at n..n+B-1), block queries over [context ; block], bidirectional in the
#         block, key visible iff q_pos - k_pos < window; x += Wo a; x += down(silu(gate) * up)
#         of ffn_norm(x); final norm; the target's lm_head, raw (no logit scale, no soft-cap).
#   x0  = the target's raw token_embd rows of [anchor, mask x (B-1)] (no embedding RMS).
# Exit 1 when a compared tensor exceeds its tolerance (max|diff| <= tol * max|ref|), or when the
# --control run (glint with a causal block) does NOT exceed it.
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_forward import Gguf, forward, rms  # noqa: E402


def rope_neox(x, pos, base):
    # x: [T, heads, d]; dim j pairs with j + d/2, angle pos * base^(-2j/d) (rotate-half layout)
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None].double() * inv[None, :]
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x0, x1 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1)


def drafter(t, d, ctx, anchor, causal=False):
    kv = d.kv
    hp = lambda k, dflt=None: kv.get(f"dflash.{k}", dflt)  # noqa: E731
    L, H, HK = hp("block_count"), hp("attention.head_count"), hp("attention.head_count_kv")
    D, eps, base = hp("attention.key_length"), hp("attention.layer_norm_rms_epsilon"), \
        hp("rope.freq_base")
    window, B = hp("attention.sliding_window", 0), hp("block_size", 16)
    swa = hp("attention.sliding_window_pattern", [True] * L)
    scale = hp("attention.scale", 0.0) or D ** -0.5
    mask_id = kv["tokenizer.ggml.mask_token_id"]
    W = lambda n: d.tensor(n)  # noqa: E731
    n = ctx.shape[0]
    g = rms(ctx @ W("fc.weight").T, W("enc.output_norm.weight"), eps)
    pc, pb = torch.arange(n), n + torch.arange(B)
    pk = torch.cat([pc, pb])
    x = t.tensor("token_embd.weight", rows=np.array([anchor] + [mask_id] * (B - 1)))
    for l in range(L):
        w = lambda s: W(f"blk.{l}.{s}.weight")  # noqa: E731
        h = rms(x, w("attn_norm"), eps)
        q = rope_neox(rms((h @ w("attn_q").T).view(B, H, D), w("attn_q_norm"), eps), pb, base)
        kb = rope_neox(rms((h @ w("attn_k").T).view(B, HK, D), w("attn_k_norm"), eps), pb, base)
        kc = rope_neox(rms((g @ w("attn_k").T).view(n, HK, D), w("attn_k_norm"), eps), pc, base)
        vb = (h @ w("attn_v").T).view(B, HK, D)
        vc = (g @ w("attn_v").T).view(n, HK, D)
        k = torch.cat([kc, kb]).repeat_interleave(H // HK, dim=1)
        v = torch.cat([vc, vb]).repeat_interleave(H // HK, dim=1)
        mask = torch.zeros(B, n + B, dtype=torch.bool)
        if window and swa[l]:
            mask |= (pb[:, None] - pk[None, :]) >= window
        if causal:
            mask |= pk[None, :] > pb[:, None]
        s = torch.einsum("qhd,khd->hqk", q, k) * scale
        a = torch.einsum("hqk,khd->qhd", s.masked_fill(mask, float("-inf")).softmax(-1), v)
        x = x + a.reshape(B, H * D) @ w("attn_output").T
        h2 = rms(x, w("ffn_norm"), eps)
        x = x + (torch.nn.functional.silu(h2 @ w("ffn_gate").T) * (h2 @ w("ffn_up").T)) \
            @ w("ffn_down").T
    hid = rms(x, W("output_norm.weight"), eps)
    return hid, hid @ t.tensor("output.weight").T


def rel(ours, ref):
    return float((ours - ref).abs().max() / ref.abs().max())


def load(path, shape):
    a = np.fromfile(path, dtype=np.float32)
    return torch.from_numpy(a.astype(np.float64)).view(*shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--dir", required=True, help="test_dflash --oracle output")
    ap.add_argument("--control", help="output of the same run with a causal block")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--ctx-tol", type=float, default=2e-5)
    a = ap.parse_args()
    ids = [int(x) for x in a.ids.split()]
    t, d = Gguf(a.target), Gguf(a.draft)
    E = t.kv[f"{t.kv['general.architecture']}.embedding_length"]
    layers = [v - 1 for v in d.kv["dflash.target_layers"]]
    B = d.kv.get("dflash.block_size", 16)
    V = t.tensors["output.weight"][0][1]
    n = len(ids) - 1
    ok = True
    # 1. The context: glint's capture against the float64 target pass, per target layer.
    st = forward(t, ids[:-1], logits=False)
    ctx = load(os.path.join(a.dir, "ctx.f32"), (n, len(layers) * E))
    ref_ctx = torch.cat([st[f"layer_{l:02d}"] for l in layers], -1)
    for i, l in enumerate(layers):
        r = rel(ctx[:, i * E:(i + 1) * E], ref_ctx[:, i * E:(i + 1) * E])
        good = r <= a.ctx_tol
        ok &= good
        print(f"  ctx slot {i} (target layer {l} output, stored {l + 1}): rel {r:.2e} "
              f"{'ok' if good else 'FAIL'} (tol {a.ctx_tol:g})")
    # 2. The drafter on glint's own context rows (its inputs exactly).
    hid, logits = drafter(t, d, ctx, ids[-1])
    for name, ref, shape in (("hidden", hid, (B, E)), ("logits", logits, (B, V))):
        r = rel(load(os.path.join(a.dir, f"{name}.f32"), shape), ref)
        good = r <= a.tol
        ok &= good
        print(f"  block {name} [{B} x {shape[1]}]: rel {r:.2e} {'ok' if good else 'FAIL'} "
              f"(tol {a.tol:g})")
    ours = load(os.path.join(a.dir, "logits.f32"), (B, V))
    agree = int((ours[1:].argmax(-1) == logits[1:].argmax(-1)).sum())
    print(f"  greedy draft tokens (rows 1..{B - 1}) equal to the reference's: {agree}/{B - 1}")
    # 3. From the float64 target states end to end (information only).
    _, l64 = drafter(t, d, ref_ctx, ids[-1])
    print(f"  logits from the float64 target states: rel {rel(ours, l64):.2e} (information)")
    if a.control:
        r = rel(load(os.path.join(a.control, "logits.f32"), (B, V)), logits)
        good = r > a.tol
        ok &= good
        print(f"  control (glint with a causal block) vs the reference: rel {r:.2e} "
              f"{'rejected, ok' if good else 'NOT rejected: the check cannot fail'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
