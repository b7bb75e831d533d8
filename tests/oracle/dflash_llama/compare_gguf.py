#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# usage: /usr/bin/python3 tests/oracle/dflash_llama/compare_gguf.py LLAMA_CPP_DIR A.gguf B.gguf: keys (tokenizer vocabulary aside) and
# every tensor (type, shape, bytes) of two GGUFs, read with llama.cpp's gguf-py.
# Tensor-by-tensor and key-by-key comparison of two GGUFs with llama.cpp's gguf-py reader.
import sys, os
sys.path.insert(0, os.path.join(sys.argv[1], "gguf-py"))
from gguf import GGUFReader
import numpy as np
a, b = GGUFReader(sys.argv[2]), GGUFReader(sys.argv[3])
def kv(r):
    out = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name.startswith("tokenizer.ggml.") and f.name != "tokenizer.ggml.mask_token_id" or f.name == "tokenizer.chat_template":
            continue
        v = f.contents()
        out[f.name] = (f.types[0].name if f.types else "?", f.types[-1].name if len(f.types) > 1 else "", v)
    return out
ka, kb = kv(a), kv(b)
for k in sorted(set(ka) | set(kb)):
    sa, sb = ka.get(k), kb.get(k)
    tag = "same" if sa == sb else "DIFF"
    print(f"{tag:4} {k}: {sa} | {sb}")
ta = {t.name: t for t in a.tensors}; tb = {t.name: t for t in b.tensors}
print("tensors:", len(ta), len(tb), "names equal:", set(ta) == set(tb))
nbytes = 0; neq = 0
for n in ta:
    x, y = ta[n], tb.get(n)
    if y is None: print("missing in B:", n); continue
    same = x.tensor_type == y.tensor_type and list(x.shape) == list(y.shape) and np.array_equal(np.asarray(x.data).view(np.uint8), np.asarray(y.data).view(np.uint8))
    neq += same; nbytes += x.n_bytes
    if not same: print("DIFF", n, x.tensor_type.name, list(x.shape), y.tensor_type.name, list(y.shape))
print(f"{neq}/{len(ta)} tensors identical (type, shape, bytes); {nbytes} bytes")
