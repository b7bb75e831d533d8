// SPDX-License-Identifier: MIT
// make_model: writes a random-weight Muse Glimmer GGUF (arch "muse-glimmer") that llama.cpp and
// glint load: metadata keys and tensor names/shapes of muse-glimmer-arch.md §3, the real Llama-4
// vocabulary (§4) and deterministic pseudo-random weights. Every row of every tensor comes from
// its own random stream keyed by (seed, tensor name, row), so output is identical for any chunking
// or thread count, and gl_make_model_gen_rows() reproduces the pre-quantization values exactly.
// Tensor data is generated and quantized row chunk by row chunk inside the gguf writer's fill
// callback, so multi-GB files never sit in memory.
#pragma once

#include "base/base.h"

#include <stdint.h>

// Container written by gl_make_model_write.
enum gl_make_model_format {
    GL_MAKE_MODEL_GGUF,        // one .gguf file
    GL_MAKE_MODEL_SAFETENSORS, // an HF folder: config.json (text_config + vision_config),
                               // generation_config.json, tokenizer.model, chat_template.jinja,
                               // model.safetensors or shards + model.safetensors.index.json
};

enum gl_make_model_preset {
    GL_MAKE_MODEL_TINY,      // E=256, H=32, Hkv=2, D=16, F=512, 4 layers, window 8, ctx 4096
    GL_MAKE_MODEL_30B_SHAPE, // the release dims: E=6656, H=32, Hkv=2, D=128, F=19968, 52 layers
    // DFlash drafters (arch doc §7) in llama.cpp's `dflash` GGUF layout (docs/dflash.md), or with
    // GL_MAKE_MODEL_SAFETENSORS the HF assistant folder (config.json as transformers'
    // MuseGlimmerAssistantConfig, the same tensors under their HF names, unchanged: `glint
    // convert` of it gives this GGUF byte for byte, with tokenizer.model and chat_template.jinja
    // beside them for the vocabulary). Both: no
    // token_embd / output (the target's are used), fc [T*E, E], enc.output_norm, output_norm and
    // per block attn_norm, attn_q/k/v/output, attn_q_norm/attn_k_norm [D], ffn_norm, ffn_gate/up/
    // down. E matches the target preset of the same size.
    GL_MAKE_MODEL_DFLASH_TINY,      // E=256, H=8, Hkv=2, D=32, F=512, 5 layers, window 8, targets
                                    // {0, 1, 2} of the 4-layer tiny target (stored 1, 2, 3)
    GL_MAKE_MODEL_DFLASH_30B_SHAPE, // E=6656, H=32, Hkv=8, D=128, F=19968, 5 layers, window 2048,
                                    // targets {1, 13, 25, 37, 49} (stored 2, 14, 26, 38, 50)
};

#define GL_MAKE_MODEL_DFLASH_BLOCK 16     // dflash.block_size
#define GL_MAKE_MODEL_DFLASH_MASK  201818 // tokenizer.ggml.mask_token_id
#define GL_MAKE_MODEL_MAX_TARGETS  8

// How the final-logit soft-cap key is written.
enum gl_make_model_softcap {
    GL_MAKE_MODEL_SOFTCAP_VALUE, // write params.softcap (0 = the documented "disabled" form)
    GL_MAKE_MODEL_SOFTCAP_OMIT,  // leave the key out (llama.cpp then assumes 30, not 20)
};

struct gl_make_model_params {
    enum gl_make_model_preset preset;
    uint64_t seed;
    int32_t n_layers;   // 0: preset default (tiny 4, 30b-shape 52, dflash 5)
    int32_t window;     // 0: preset default (tiny 8, 30b-shape 2048); else >= 1
    const char *type;   // F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M (case-insensitive);
                        // NULL: F32 for tiny, Q4_K_M for 30b-shape. Borrowed.
    int pattern_period; // 0: sliding_window_pattern as a per-layer bool array (true = sliding);
                        // 1: as the scalar u32 period 4
    enum gl_make_model_softcap softcap_mode;
    float softcap;   // final_logit_softcapping (default 20)
    int header_only; // metadata + tensor table only; offsets as if the data followed
    int vocab_only;  // metadata only, no tensors (llama.cpp loads it with vocabOnly)
    // tiktoken ranks file; NULL: $GLINT_VOCAB, else the shared copy. Borrowed.
    const char *vocab_path;
    int n_threads; // quantization threads; 0: online CPUs (at most 8)
    enum gl_make_model_format format;
    // SAFETENSORS: bytes of tensor data per shard before a new one starts (0: 4 GiB). One shard
    // is written as model.safetensors without an index. Types: F32, F16, BF16 only (NULL type:
    // F32 for tiny, BF16 for 30b-shape). The text weights are the GGUF writer's values for the
    // same params: HF layout (Q/K rows in rotate-half order, the four sandwich norms stored as
    // w - 1, no QK-norm tensors), 1-D tensors F32 as in the GGUF. The vision tower (arch doc §6.6
    // names; release dims for 30b-shape, hidden 64 / 2 layers / 4x4 positions for tiny) is
    // random too and written only here; gl_model_open binds it (gl_model_vision).
    uint64_t shard_bytes;
};

// Defaults: tiny, seed 1, preset dims, type from preset, bool pattern, softcap 20.
struct gl_make_model_params gl_make_model_default_params(void);

// Resolved hyper-parameters of a params set (plain record; counts in elements).
struct gl_make_model_hparams {
    int64_t n_vocab;   // 202048 = 200000 BPE ranks + 2048 specials
    int64_t n_embd;    // E
    int64_t n_head;    // H
    int64_t n_head_kv; // Hkv
    int64_t head_dim;  // D
    int64_t n_ff;      // F
    int64_t n_layers;
    int64_t n_ctx;      // context_length
    int64_t window;     // attention.sliding_window (keys visible to a query, itself included)
    uint32_t file_type; // general.file_type (llama_ftype) of the type recipe
    // DFlash drafter presets only (dflash = 1): the target layers whose outputs (0-based layer
    // ids, as HF target_layer_ids) feed fc; the file stores each id + 1.
    int dflash;
    int n_target;
    int32_t target_layer_ids[GL_MAKE_MODEL_MAX_TARGETS];
    int32_t block_size;
    int32_t mask_token_id;
};

// Resolves and validates params (type name, layer count, window). GL_E_INVAL with a message on
// a bad value.
GL_MUST_USE gl_status gl_make_model_hparams(const struct gl_make_model_params *p,
                                            struct gl_make_model_hparams *out, struct gl_err *err);

// ggml type (enum gl_type) that the recipe of p gives tensor `name`; -1 if p is invalid or the
// model has no such tensor.
int gl_make_model_tensor_type(const struct gl_make_model_params *p, const char *name);

// The ggml type that --type recipe `recipe` (the list above, case-insensitive) gives the 2-D
// text weight `name` (GGUF name, e.g. "blk.3.attn_v.weight") of a model with n_layers blocks:
// the uniform type, or for Q4_K_M / Q5_K_M llama.cpp's mix (output.weight Q6_K; attn_v and
// ffn_down Q6_K on the first and last eighth of the layers and every third layer between;
// everything else the base type). name NULL: the base type. 1-D tensors are always F32 and are
// not decided here. *file_type (may be NULL) gets the recipe's llama_ftype. -1: unknown recipe.
int gl_make_model_recipe_type(const char *recipe, const char *name, int64_t n_layers,
                              uint32_t *file_type);

struct gl_gguf_writer;
struct gl_tokenizer;
// Adds the tokenizer keys of a Muse Glimmer GGUF for tok (the Llama-4 tiktoken vocabulary plus
// the 2,048 specials: exactly 202,048 tokens, else GL_E_FORMAT): tokenizer.ggml.model "gpt2",
// pre "llama4", tokens (GPT-2 byte-to-unicode strings), token_type, merges, bos/eos/eot/padding
// ids and add_bos_token, in that order.
GL_MUST_USE gl_status gl_make_model_add_vocab(struct gl_gguf_writer *w,
                                              const struct gl_tokenizer *tok, struct gl_err *err);

// Writes the model to path (replaced if it exists; for SAFETENSORS a folder, created if absent).
// Loads the vocabulary (GL_E_IO naming the path if missing). On failure the partial file may
// remain; err says what and where.
GL_MUST_USE gl_status gl_make_model_write(const struct gl_make_model_params *p, const char *path,
                                          struct gl_err *err);

// The generator's float values for rows [row0, row0 + n_rows) of tensor `name` (a row = ne[0]
// elements) before quantization: what the file stores exactly for F32 and approximately
// otherwise. dst holds n_rows * ne[0] floats. GL_E_INVAL for an unknown name or a row range
// outside the tensor.
GL_MUST_USE gl_status gl_make_model_gen_rows(const struct gl_make_model_params *p, const char *name,
                                             int64_t row0, int64_t n_rows, float *dst,
                                             struct gl_err *err);
