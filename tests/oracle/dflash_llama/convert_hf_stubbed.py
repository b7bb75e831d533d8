#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# usage: /usr/bin/python3 tests/oracle/dflash_llama/convert_hf_stubbed.py LLAMA_CPP_DIR HF_DIR --outfile F.gguf --outtype f32 --target-model-dir T
# By-hand check: llama.cpp's own converter (bundle de3ff815) on glint make-model's assistant folder.
# transformers is not installed here: AutoConfig is stubbed to fail (llama.cpp then reads
# config.json itself), and the vocabulary step (AutoTokenizer on --target-model-dir) is replaced
# by writing only tokenizer.ggml.mask_token_id, as the real set_vocab does after the vocab.
import sys, types, os
LC = sys.argv[1]
sys.path[:0] = [LC, os.path.join(LC, "gguf-py")]
tf = types.ModuleType("transformers")
class AutoConfig:
    @staticmethod
    def from_pretrained(*a, **k): raise RuntimeError("transformers stubbed")
class AutoTokenizer:
    @staticmethod
    def from_pretrained(*a, **k): raise RuntimeError("transformers stubbed")
tf.AutoConfig = AutoConfig; tf.AutoTokenizer = AutoTokenizer
sys.modules["transformers"] = tf
tq = types.ModuleType("tqdm")  # progress bars only
class tqdm:
    def __init__(self, *a, **k): pass
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def update(self, *a, **k): pass
    def set_description(self, *a, **k): pass
    def close(self): pass
    def write(self, *a, **k): pass
tq.tqdm = tqdm
sys.modules["tqdm"] = tq
import importlib
import torch
# torch 1.13 (the only torch here) predates these dtypes; the drafter is F32, so stand-ins do.
for n in ["float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "uint16", "uint32", "uint64"]:
    if not hasattr(torch, n):
        setattr(torch, n, torch.uint8)
from conversion import muse_glimmer
def set_vocab(self):
    m = self.hparams.get("mask_token_id")
    if m is not None:
        self.gguf_writer.add_mask_token_id(int(m))
muse_glimmer.MuseGlimmerAssistantModel.set_vocab = set_vocab
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
import runpy
runpy.run_path(os.path.join(LC, "convert_hf_to_gguf.py"), run_name="__main__")
