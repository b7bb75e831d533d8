# SPDX-License-Identifier: MIT
"""media_ref.py: checks glint's vision loading end to end. Reads an HF folder's vision_config
and its §6.6 tensors (arch doc muse-glimmer-arch.md) with its own safetensors parser, runs
vision_ref.py's float64 transcription of the encoder (§6.3) on the patch vectors glint wrote
(`glint image preprocess IMG --patches P`), and compares with the soft-token rows glint's
media/ path produced from the same folder (`--model DIR --rows R`): the binding of every tensor
(names, [out, in] layout, rotate-half Q/K kept as stored, adapter / projection, the final RMS
over the text width) is what differs between the two sides.
Usage: media_ref.py DIR PATCHES ROWS GH2 GW2 [--groups G] [--control swap_norms|swap_qk|still]
(GH2 x GW2: the patch grid, grid_thw[1:] of glint image / video preprocess). --groups G: a
video's G temporal groups, each GH2 x GW2 patches encoded on its own (§6.5), rows in group order.
--control swap_norms / swap_qk maps two tensors the wrong way round; still replaces each patch's
second temporal slab by its first (what a conv kernel summed over time computes, right only for a
still image): the comparison must then FAIL. Exit 0 when max|diff| <= 1e-5 * max|ref|.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vision_ref  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, t in header.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            f.seek(base + b)
            raw = f.read(e - b)
            if t["dtype"] == "F32":
                a = np.frombuffer(raw, "<f4").astype(np.float64)
            elif t["dtype"] == "F16":
                a = np.frombuffer(raw, "<f2").astype(np.float64)
            elif t["dtype"] == "BF16":
                a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view("<f4")
                a = a.astype(np.float64)
            else:
                sys.exit(f"media_ref: {name}: dtype {t['dtype']}")
            out[name] = torch.from_numpy(a.reshape(t["shape"]).copy())
    return out


def load_folder(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    t = {}
    for f in files:
        for name, v in read_safetensors(os.path.join(d, f)).items():
            if name.startswith("model.vision"):
                t[name] = v
    return t


def main():
    args = sys.argv[1:]
    control, groups = None, 1
    while len(args) >= 7 and args[5] in ("--control", "--groups"):
        if args[5] == "--control":
            control = args[6]
        else:
            groups = int(args[6])
        args = args[:5] + args[7:]
    if len(args) != 5:
        sys.exit(__doc__)
    d, patches_path, rows_path, gh2, gw2 = args[0], args[1], args[2], int(args[3]), int(args[4])
    cfg = json.load(open(os.path.join(d, "config.json")))
    vc, tc = cfg.get("vision_config", {}), cfg.get("text_config", cfg)
    c = vision_ref.CFG
    c.update(hidden=vc.get("hidden_size", 1536), n_layers=vc.get("num_hidden_layers", 50),
             n_heads=vc.get("num_attention_heads", 16), ffn=vc.get("intermediate_size", 8960),
             pos_h=vc.get("pos_emb_height", 32), pos_w=vc.get("pos_emb_width", 32),
             adapter=cfg.get("projector_hidden_size", vc.get("adapter_dim", 4096)),
             out_dim=tc["hidden_size"], ln_eps=vc.get("layer_norm_eps", 1e-5),
             rms_eps=tc.get("rms_norm_eps", 1e-5))
    c["head_dim"] = c["hidden"] // c["n_heads"]
    t = load_folder(d)
    vt = "model.vision_tower."
    W = {"patch": t[vt + "patch_embedder.patch_embedding.weight"],
         "pos": t[vt + "patch_embedder.position_embedding_table.weight"],
         "ln_pre.w": t[vt + "ln_pre.weight"], "ln_pre.b": t[vt + "ln_pre.bias"],
         "ln_post.w": t[vt + "ln_post.weight"], "ln_post.b": t[vt + "ln_post.bias"],
         "adapter_fc1": t["model.vision_adapter.fc1.weight"],
         "adapter_fc2": t["model.vision_adapter.fc2.weight"],
         "projection": t["model.vision_projection.weight"]}
    n1, n2, q, k = "norm1", "norm2", "q_proj", "k_proj"
    if control == "swap_norms":
        n1, n2 = n2, n1
    elif control == "swap_qk":
        q, k = k, q
    elif control not in (None, "still"):
        sys.exit("media_ref: unknown control " + control)
    for l in range(c["n_layers"]):
        p = f"{vt}layers.{l}."
        W[f"{l}.ln1.w"], W[f"{l}.ln1.b"] = t[p + n1 + ".weight"], t[p + n1 + ".bias"]
        W[f"{l}.ln2.w"], W[f"{l}.ln2.b"] = t[p + n2 + ".weight"], t[p + n2 + ".bias"]
        for key, name in (("q", q), ("k", k), ("v", "v_proj"), ("proj", "proj")):
            W[f"{l}.{key}.w"] = t[p + "attn." + name + ".weight"]
            W[f"{l}.{key}.b"] = t[p + "attn." + name + ".bias"]
        for key in ("fc1", "fc2"):
            W[f"{l}.{key}.w"] = t[p + "mlp." + key + ".weight"]
            W[f"{l}.{key}.b"] = t[p + "mlp." + key + ".bias"]
    pdim = c["patch_frames"] * 3 * c["patch_size"] ** 2
    patches = torch.from_numpy(np.fromfile(patches_path, "<f4").astype(np.float64))
    patches = patches.reshape(groups, gh2 * gw2, pdim)
    if control == "still":
        half = pdim // c["patch_frames"]
        patches[:, :, half:2 * half] = patches[:, :, :half]
    ref = torch.cat([vision_ref.forward(W, patches[g], gh2, gw2) for g in range(groups)])
    got = torch.from_numpy(np.fromfile(rows_path, "<f4").astype(np.float64))
    if got.numel() != ref.numel():
        sys.exit(f"media_ref: glint wrote {got.numel()} values, the reference has {ref.numel()}")
    got = got.reshape(ref.shape)
    rel = float((got - ref).abs().max() / ref.abs().max())
    ok = rel <= 1e-5
    print(f"{'ok' if ok else 'not ok'} media rows {ref.shape[0]}x{ref.shape[1]} "
          f"({groups} x patch grid {gh2}x{gw2}{', control ' + control if control else ''}): "
          f"max rel {rel:.2e}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
