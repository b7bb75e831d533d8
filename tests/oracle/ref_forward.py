#!/usr/bin/python3
# ref_forward.py: float64 PyTorch reference forward pass of muse-glimmer, written from
# ../shared/docs/muse-glimmer-arch.md §2-3 (GGUF conventions: norm weights used as stored,
# interleaved-pair RoPE on sliding layers only, NoPE on full layers, q/k norm weights applied as
# RMSNorm weights, sigmoid output gate, post-norm eps 1e-8, logit_scale then tanh softcap).
# Reads the GGUF itself (minimal numpy reader below; F32/F16/BF16/Q8_0 tensors only), then compares
# its per-layer hidden states with `glint eval --dump-layers DIR` and/or logits from another
# implementation. Exit status 1 when any compared tensor exceeds its tolerance.
import argparse
import mmap
import struct
import sys
import time

import numpy as np
import torch

# ---- minimal GGUF v2/v3 reader ------------------------------------------------------------
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
_TENSOR_DTYPE = {0: np.float32, 1: np.float16, 30: np.uint16}  # 30 = BF16, widened below


class Gguf:
    def __init__(self, path):
        self.f = open(path, "rb")
        self.buf = mmap.mmap(self.f.fileno(), 0, access=mmap.ACCESS_READ)
        self.pos = 0
        if self._raw(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (bad magic)")
        version = self._scalar(4)
        if version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {version}")
        n_tensors, n_kv = self._scalar(10), self._scalar(10)
        self.kv = {}
        for _ in range(n_kv):
            key = self._str()
            self.kv[key] = self._value(self._scalar(4))
        self.tensors, self.cache = {}, {}
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._scalar(4)
            if n_dims > 4:
                raise ValueError(f"tensor {name}: {n_dims} dims")
            ne = [self._scalar(10) for _ in range(n_dims)]
            self.tensors[name] = (ne, self._scalar(4), self._scalar(10))
        align = self.kv.get("general.alignment", 32)
        self.data = (self.pos + align - 1) // align * align

    def _raw(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError(f"truncated GGUF at byte {self.pos}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def _scalar(self, t):
        fmt = _SCALAR[t]
        return struct.unpack(fmt, self._raw(struct.calcsize(fmt)))[0]

    def _str(self):
        return self._raw(self._scalar(10)).decode("utf-8", "replace")

    def _value(self, t):
        if t == 8:
            return self._str()
        if t == 9:
            et, n = self._scalar(4), self._scalar(10)
            if et in _SCALAR and et != 7:  # numeric arrays in one go (token_type has 202k ids)
                dt = np.dtype(_SCALAR[et])
                a = np.frombuffer(self._raw(n * dt.itemsize), dtype=dt)
                return a
            return [self._value(et) for _ in range(n)]
        if t not in _SCALAR:
            raise ValueError(f"unknown GGUF value type {t} at byte {self.pos}")
        return self._scalar(t)

    def tensor(self, name, rows=None):
        """Float64 torch tensor shaped [ne1, ne0] (rows = output features), like a torch Linear;
        rows: only these rows (the embedding lookup), else the whole tensor (cached)."""
        if rows is None and name in self.cache:
            return self.cache[name]
        if name not in self.tensors:
            raise ValueError(f"tensor {name} missing")
        ne, t, off = self.tensors[name]
        if t == 8:  # Q8_0: blocks of 32 along ne0, {f16 scale d; int8 q[32]}, value = d * q
            nb = int(np.prod(ne)) // 32
            blk = np.frombuffer(self.buf, dtype=np.dtype([("d", "<f2"), ("q", "i1", 32)]),
                                count=nb, offset=self.data + off)
            a = (blk["d"].astype(np.float64)[:, None] * blk["q"]).reshape(list(reversed(ne)))
            w = torch.from_numpy(a[rows] if rows is not None else a)
            if rows is None:
                self.cache[name] = w
            return w
        if t not in _TENSOR_DTYPE:
            raise ValueError(f"tensor {name}: ggml type {t} unsupported (reference wants F32)")
        n = int(np.prod(ne))
        dt = np.dtype(_TENSOR_DTYPE[t])
        a = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.data + off)
        a = a.reshape(list(reversed(ne)))
        if rows is not None:
            a = a[rows]
        if t == 30:
            a = (a.astype(np.uint32) << 16).view(np.float32)
        w = torch.from_numpy(a.astype(np.float64))
        if rows is None:
            self.cache[name] = w
        return w


# ---- forward pass --------------------------------------------------------------------------
def rms(x, w=None, eps=1e-5):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def rope_interleaved(x, pos, base):
    # x: [T, heads, d]; pairs (2j, 2j+1) rotate by pos * base^(-2j/d)
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None].double() * inv[None, :]
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2)


def swa_layers(kv, arch, n_layer):
    pat = kv.get(f"{arch}.attention.sliding_window_pattern")
    if pat is None:
        pat = 4
    if isinstance(pat, (list, np.ndarray)):
        if len(pat) != n_layer:
            raise ValueError(f"sliding_window_pattern has {len(pat)} entries, {n_layer} layers")
        return [bool(v) for v in pat]
    return [(l % int(pat)) < int(pat) - 1 for l in range(n_layer)]  # period p: last of each p full


def forward(g, ids, window_delta=0, rows=None, rows_at=0, logits=True):
    """All intermediate states of one prompt. window_delta != 0 builds a deliberately wrong
    model (sliding window off by that much) for the negative control. logits=False skips the
    output head (the DFlash check needs only layer outputs)."""
    kv = g.kv
    arch = kv["general.architecture"]
    hp = lambda k, d=None: kv.get(f"{arch}.{k}", d)  # noqa: E731
    H, HK = hp("attention.head_count"), hp("attention.head_count_kv")
    D, L = hp("attention.key_length"), hp("block_count")
    eps = hp("attention.layer_norm_rms_epsilon")
    window = hp("attention.sliding_window")
    if window:
        window += window_delta
    base = hp("rope.freq_base", 10000.0)
    base_swa = hp("rope.freq_base_swa", base)
    scale, cap = hp("logit_scale", 1.0), hp("final_logit_softcapping", 0.0)
    swa = swa_layers(kv, arch, L)
    T = len(ids)
    pos = torch.arange(T)
    W = lambda n: g.tensor(n)  # noqa: E731
    states = {}
    x = g.tensor("token_embd.weight", rows=np.array(ids))
    if rows is not None:  # soft tokens (§2.1 step 3): given rows replace the lookups, then the RMS
        x = x.clone()
        x[rows_at:rows_at + rows.shape[0]] = rows
    x = rms(x, None, eps)
    states["embed"] = x
    causal = pos[None, :] > pos[:, None]
    for l in range(L):
        w = lambda n: W(f"blk.{l}.{n}.weight")  # noqa: E731
        h = rms(x, w("attn_norm"), eps)
        q = (h @ w("attn_q").T).view(T, H, D)
        k = (h @ w("attn_k").T).view(T, HK, D)
        v = (h @ w("attn_v").T).view(T, HK, D)
        gate = h @ w("attn_gate").T
        q, k = rms(q, w("attn_q_norm"), eps), rms(k, w("attn_k_norm"), eps)
        mask = causal
        if swa[l]:
            q, k = rope_interleaved(q, pos, base_swa), rope_interleaved(k, pos, base_swa)
            if window:
                mask = causal | ((pos[:, None] - pos[None, :]) >= window)
        k = k.repeat_interleave(H // HK, dim=1)  # query head h uses kv head h // (H/HK)
        v = v.repeat_interleave(H // HK, dim=1)
        s = torch.einsum("qhd,khd->hqk", q, k) / D ** 0.5
        s = s.masked_fill(mask, float("-inf")).softmax(-1)
        a = torch.einsum("hqk,khd->qhd", s, v).reshape(T, H * D) * torch.sigmoid(gate)
        x1 = rms(a @ w("attn_output").T, w("post_attention_norm"), 1e-8) + x
        h2 = rms(x1, w("ffn_norm"), eps)
        f = torch.nn.functional.silu(h2 @ w("ffn_gate").T) * (h2 @ w("ffn_up").T)
        f = f @ w("ffn_down").T
        x = rms(f, w("post_ffw_norm"), 1e-8) + x1
        states[f"layer_{l:02d}"] = x
    if not logits:
        return states
    z = (rms(x, W("output_norm.weight"), eps) @ W("output.weight").T) * scale
    if cap:
        z = cap * torch.tanh(z / cap)
    states["logits"] = z
    return states


def compare(name, ours_path, ref, tol, quiet=False):
    got = np.fromfile(ours_path, dtype=np.float32)
    if got.size != ref.numel():
        print(f"FAIL {name}: {ours_path} has {got.size} floats, expected {ref.numel()} "
              f"{tuple(ref.shape)}")
        return False
    got = torch.from_numpy(got.astype(np.float64)).view(ref.shape)
    err = (got - ref).abs()
    mag = ref.abs().max().item()
    rel = err.max().item() / max(mag, 1e-30)
    worst = int(err.max(-1).values.argmax()) if ref.dim() == 2 else 0
    ok = rel <= tol and bool(torch.isfinite(got).all())
    if quiet:
        return ok
    extra = ""
    if ref.dim() == 2 and ref.shape[-1] > 1000:
        agree = int((got.argmax(-1) == ref.argmax(-1)).sum())
        extra = f" argmax {agree}/{ref.shape[0]}"
    print(f"{'ok  ' if ok else 'FAIL'} {name:8s} max|diff| {err.max().item():.3e} "
          f"mean|diff| {err.mean().item():.3e} max|ref| {mag:.3e} rel {rel:.2e} "
          f"(tol {tol:.0e}, worst position {worst}){extra}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="space-separated token ids")
    ap.add_argument("--dump", help="directory written by glint eval --dump-layers")
    ap.add_argument("--logits", action="append", default=[],
                    help="other logits file(s) [n_tok x n_vocab] float32 to compare")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="max|diff| / max|ref| allowed per tensor")
    ap.add_argument("--rows", help="float32 [n x n_embd] input rows (soft tokens) to put in place "
                    "of the token lookups at --rows-at .. --rows-at + n - 1")
    ap.add_argument("--rows-at", type=int, default=0)
    ap.add_argument("--rows-control", action="store_true",
                    help="negative control: the rows one position later must NOT match --dump")
    ap.add_argument("--control", action="store_true",
                    help="negative control: a reference with the sliding window one wider must "
                         "NOT match the --dump logits")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ids = [int(t) for t in a.ids.split()]
    t0 = time.perf_counter()
    g = Gguf(a.model)
    rows = None
    if a.rows:
        E = g.kv[g.kv["general.architecture"] + ".embedding_length"]
        rows = torch.from_numpy(np.fromfile(a.rows, "<f4").astype(np.float64)).view(-1, E)
        if a.rows_at < 0 or a.rows_at + rows.shape[0] > len(ids):
            sys.exit(f"ref_forward: {rows.shape[0]} rows at {a.rows_at} do not fit {len(ids)} ids")
    st = forward(g, ids, rows=rows, rows_at=a.rows_at)
    print(f"reference forward: {len(ids)} tokens, {len(st) - 2} layers, "
          f"{(time.perf_counter() - t0) * 1000:.0f} ms (float64)")
    ok = True
    if a.dump:
        for name, ref in st.items():
            ok &= compare(name, f"{a.dump}/{name}.f32", ref, a.tol)
    for p in a.logits:
        ok &= compare("logits*", p, st["logits"], a.tol)
    if a.control and a.dump:
        bad = forward(g, ids, window_delta=1)
        names = [n for n in bad if n != "embed"]
        caught = [n for n in names if not compare(n, f"{a.dump}/{n}.f32", bad[n], a.tol, True)]
        ok &= "logits" in caught
        print(f"{'ok  ' if 'logits' in caught else 'FAIL'} negative control (window "
              f"{g.kv[g.kv['general.architecture'] + '.attention.sliding_window'] + 1} instead of "
              f"the file's): mismatch caught in {', '.join(caught) or 'nothing'}")
    if a.rows_control and a.dump and rows is not None:
        bad = forward(g, ids, rows=rows, rows_at=a.rows_at + 1)
        caught = not compare("logits", f"{a.dump}/logits.f32", bad["logits"], a.tol, True)
        ok &= caught
        print(f"{'ok  ' if caught else 'FAIL'} negative control (the rows one position later): "
              f"{'mismatch caught' if caught else 'NOT caught'}")
    if not a.dump and not a.logits:
        print("nothing to compare (give --dump and/or --logits)")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
