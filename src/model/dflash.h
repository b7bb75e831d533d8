// SPDX-License-Identifier: MIT
// dflash: the DFlash drafter of Muse Glimmer (arch doc §7, `muse_glimmer_assistant`) loaded from
// llama.cpp's `dflash` GGUF (docs/dflash.md: keys, tensor names, target layers stored as ids + 1)
// or from the HF assistant folder (config.json + safetensors; dflash_hf.c), and its forward pass:
// target hidden states of the context -> fc -> RMSNorm (the projected context, whose per-layer K/V
// a sequence keeps and only appends to), then a block of [anchor, mask x (B-1)] through pre-norm
// blocks (q/k RMSNorm with weights, NeoX RoPE, keys and values over [context ; block], block
// queries bidirectional within the block and to the context under the sliding window), the final
// norm and the TARGET's lm_head (raw logits: no logit scale, no soft-cap, as llama.cpp's DFlash;
// neither changes the argmax).
//
// Ownership: a gl_dflash borrows its gguf (gl_dflash_load) or owns it or the folder's safetensors
// (gl_dflash_open); weights are borrowed from the mapping (norm vectors not stored as aligned F32,
// and folder matrices not aligned to their element size, get owned copies). A
// gl_dflash_ctx borrows the drafter and the target model (both outlive it) and owns its scratch
// and thread pool. A gl_dflash_seq owns one sequence's projected context K/V (a private store);
// a gl_dflash_kv borrows views of K/V the caller owns (the engine's paged drafter pool).
// Errors: the file is hostile input. Every key is type- and range-checked, every tensor's
// presence, shape and type; GL_E_FORMAT / GL_E_UNSUPPORTED name the key or tensor (and for a
// folder the file holding it: config.json, the safetensors shard). Calls with
// arguments out of contract (a token id outside the vocabulary, a block longer than the context
// allows) return GL_E_INVAL; invariant violations abort (GL_ASSERT).
#pragma once

#include "base/base.h"
#include "gguf/gguf.h"
#include "model/model.h"

#include <stdint.h>

#define GL_DFLASH_ARCH        "dflash"
#define GL_DFLASH_MAX_TARGETS 16
#define GL_DFLASH_MAX_LAYERS  64
#define GL_DFLASH_MAX_BLOCK   256

// Plain record: the drafter's hyper-parameters, validated.
struct gl_dflash_config {
    int32_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx_train;
    float rms_eps;   // every norm (attention.layer_norm_rms_epsilon)
    float rope_base; // rope.freq_base (NeoX pairing: dim j with j + D/2)
    float kq_scale;  // attention.scale, or 1/sqrt(D) when absent or 0
    int32_t window;  // attention.sliding_window; 0 = none. Key p is visible to query q iff
                     // q - p < window (llama.cpp's standard SWA, by position, block included)
    uint8_t swa[GL_DFLASH_MAX_LAYERS]; // sliding_window_pattern (absent: all sliding)
    int32_t block_size;                // dflash.block_size (absent: 16, llama.cpp's default)
    int32_t mask_token_id;             // tokenizer.ggml.mask_token_id (required)
    int32_t n_target;                  // entries of target_layers
    // 0-based target layer whose OUTPUT feeds slot i of fc's input (the file's value - 1: llama.cpp
    // counts the input of layer id + 1).
    int32_t target_layers[GL_DFLASH_MAX_TARGETS];
};

struct gl_dflash_layer {
    const float *attn_norm, *q_norm, *k_norm, *ffn_norm; // [E], [D], [D], [E]
    struct gl_weight q, k, v, o;                         // E->H*D, E->Hkv*D (x2), H*D->E
    struct gl_weight ffn_gate, ffn_up, ffn_down;         // E->F (x2), F->E
};

struct gl_safetensors;

struct gl_dflash {
    struct gl_dflash_config cfg;
    const struct gl_gguf *gguf; // the GGUF, or NULL for a folder
    int owns_gguf;
    struct gl_safetensors *st;                  // a folder's tensors (owned), or NULL
    char *dir;                                  // the folder (owned), or NULL
    struct gl_weight fc;                        // n_target*E -> E
    const float *enc_norm, *output_norm;        // enc.output_norm, output_norm: [E]
    struct gl_dflash_layer *layers;             // [n_layer], owned
    void *owned[11 * GL_DFLASH_MAX_LAYERS + 3]; // copies (norm vectors, unaligned matrices)
    int n_owned;
    // Q4_K / Q6_K matrices moved into the r16 layout at load (gl_weight_repack_r16, as the
    // target's are, unless GLINT_REPACK=0): their copies and sizes, owned.
    void *r16[1 + 7 * GL_DFLASH_MAX_LAYERS];
    size_t r16_bytes[1 + 7 * GL_DFLASH_MAX_LAYERS];
    int n_r16;
};

// Parses and validates the config of g (no tensors). GL_E_UNSUPPORTED if the architecture is
// not "dflash" or the file is a variant this drafter does not run (DSpark / DFlash2 / d2t /
// own head / gelu / causal); GL_E_FORMAT naming a wrongly typed, missing or out-of-range key.
GL_MUST_USE gl_status gl_dflash_config_parse(struct gl_dflash_config *cfg, const struct gl_gguf *g,
                                             struct gl_err *err);
// Config + every tensor (exactly the expected set: an unknown tensor is refused by name).
GL_MUST_USE gl_status gl_dflash_load(struct gl_dflash **out, const struct gl_gguf *g,
                                     struct gl_err *err);
// Opens path and loads; the drafter owns the file. path: a GGUF (GL_E_IO / the reader's
// GL_E_FORMAT), or an HF assistant folder: config.json (gl_dflash_hf_config_parse) and
// model.safetensors or shards + index (the safetensors reader's errors), holding exactly the
// drafter's tensors under their HF names in F32/F16/BF16 (a missing, mis-shaped or unknown tensor
// is named with its file). Folder weights are used as stored: the same logits as the GGUF that
// `glint convert --type` of the same dtype writes.
GL_MUST_USE gl_status gl_dflash_open(struct gl_dflash **out, const char *path, struct gl_err *err);
void gl_dflash_delete(struct gl_dflash *d); // NULL-safe

// ---- the two containers (dflash_hf.c; docs/dflash.md) ----

#define GL_DFLASH_HF_MODEL_TYPE "muse_glimmer_assistant"
#define GL_DFLASH_HF_ARCH       "MuseGlimmerAssistantModel"

// 1 if dir/config.json reads as the assistant's (model_type "muse_glimmer_assistant", or without
// model_type an architectures entry "MuseGlimmerAssistantModel"); 0 otherwise or unreadable.
int gl_dflash_hf_is_assistant(const char *dir);
// dir/config.json (transformers' MuseGlimmerAssistantConfig) -> cfg: hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
// rms_norm_eps, rope_parameters.rope_theta (or rope_theta; rope_type "default" only),
// max_position_embeddings, sliding_window (null: none), layer_types, hidden_act ("silu" only),
// block_size, mask_token_id, target_layer_ids (0-based layer outputs, as cfg->target_layers).
// An absent key takes HF's default (the release drafter's value); a present one is type- and
// range-checked. GL_E_IO / GL_E_FORMAT / GL_E_UNSUPPORTED name the file and the key.
GL_MUST_USE gl_status gl_dflash_hf_config_parse(struct gl_dflash_config *cfg, const char *dir,
                                                struct gl_err *err);
// The drafter's tensors in file order (fc, enc.output_norm, output_norm, then per block
// attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate,
// ffn_up, ffn_down): GGUF name and ggml shape [n_in, n_out] (n_out 0: a vector of n_in).
int64_t gl_dflash_n_tensors(const struct gl_dflash_config *cfg);
int gl_dflash_tensor_at(const struct gl_dflash_config *cfg, int64_t i, char *name, size_t cap,
                        int64_t *n_in, int64_t *n_out); // 0 when i is out of range
// GGUF name <-> HF name (encoder.fc, encoder.output_norm_enc, norm, layers.N.{input_layernorm,
// self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, post_attention_layernorm,
// mlp.{gate,up,down}_proj}.weight). 0 when the name is not a drafter tensor's.
int gl_dflash_hf_tensor_name(const char *gguf, char *out, size_t cap);
int gl_dflash_hf_gguf_name(const char *hf, char *out, size_t cap);
// llama.cpp's converter keys for cfg (general.*, dflash.* with target_layers as INT32 ids + 1,
// the window and its bool pattern when cfg->window > 0), in make-model's order. The tokenizer
// keys and tokenizer.ggml.mask_token_id are the caller's.
struct gl_gguf_writer;
GL_MUST_USE gl_status gl_dflash_add_keys(struct gl_gguf_writer *w,
                                         const struct gl_dflash_config *cfg, const char *name,
                                         uint32_t file_type, struct gl_err *err);

// Whether d drafts for target: same hidden size, every target layer < the target's n_layer,
// mask token and vocabulary inside the target's. GL_E_INVAL naming the mismatch.
GL_MUST_USE gl_status gl_dflash_check_target(const struct gl_dflash *d,
                                             const struct gl_model *target, struct gl_err *err);

// One sequence's projected context: per layer, the K (k_norm + RoPE applied) and V rows of its
// context positions, f32 (never quantized: blocks equal the reference's bit for bit), read and
// written through model.h's gl_kv_view like the target's KV. Two owners of that memory:
//  - the engine (issue 22, "the drafter's projected context K/V lives per sequence in the paged
//    pool"): a second gl_kv_pool (kv.h) shaped by gl_dflash_kv_config -- the drafter's layers,
//    Hkv, D, window and sliding pattern, the engine's block size, dtype f32, no prefix cache --
//    one gl_kv_seq per sequence, pages reserved as rows are appended, out-of-window pages of
//    sliding layers released at commit, all released on preemption and finish; the pool's bytes
//    are fixed when the engine starts, so drafter memory is bounded and accounted (engine.h
//    gl_engine_dflash_kv_bytes). The drafter calls take that sequence's views (gl_dflash_kv):
//    model/ sits below kv/ and cannot name a pool.
//  - gl_dflash_seq below: a private fully mapped store (model.h gl_kv_cache) for tests, tools
//    and the engine's audit, through the same code.
// The old malloc'd ring per sequence (window + 64 rows, outside any accounting) is gone.
void gl_dflash_kv_config(const struct gl_dflash *d, struct gl_model_config *out);

// A context the caller stores: views[l] (n_layer entries, f32 rows of Hkv * D) and len, the
// positions already in it. Positions a block reads must be mapped: from len - window + 1 in a
// sliding layer (window > 0 and swa[l]), from 0 in the others; an append's len..len+n-1 too.
// An unmapped page read is an invariant violation (GL_ASSERT).
struct gl_dflash_kv {
    const struct gl_kv_view *views;
    int64_t len;
};

struct gl_dflash_seq;
// capacity: the most context positions the sequence will hold (its context length); all of them
// are allocated at once.
GL_MUST_USE gl_status gl_dflash_seq_new(struct gl_dflash_seq **out, const struct gl_dflash *d,
                                        int64_t capacity, struct gl_err *err);
void gl_dflash_seq_delete(struct gl_dflash_seq *s);       // NULL-safe
int64_t gl_dflash_seq_len(const struct gl_dflash_seq *s); // context positions appended
// Forgets positions >= len (a rollback, exact for any len): GL_E_INVAL if len > the length.
GL_MUST_USE gl_status gl_dflash_seq_truncate(struct gl_dflash_seq *s, int64_t len,
                                             struct gl_err *err);

// Scratch for at most n_rows context rows per append call (blocks: up to block_size rows) and a
// pool of n_threads (0: 1). Borrows d and target (checked with gl_dflash_check_target).
struct gl_dflash_ctx;
GL_MUST_USE gl_status gl_dflash_ctx_new(struct gl_dflash_ctx **out, const struct gl_dflash *d,
                                        const struct gl_model *target, int n_rows, int n_threads,
                                        struct gl_err *err);
void gl_dflash_ctx_delete(struct gl_dflash_ctx *c); // NULL-safe

// Appends n context rows at positions len..len+n-1: hidden is n x (n_target * E) f32, row-major,
// each row the target's layer outputs in cfg.target_layers order. Costs O(n) (earlier rows are
// never recomputed). GL_E_INVAL when n exceeds the ctx's n_rows or the capacity.
GL_MUST_USE gl_status gl_dflash_append(struct gl_dflash_ctx *c, struct gl_dflash_seq *s,
                                       const float *hidden, int64_t n, struct gl_err *err);
// The same into caller-stored K/V: writes rows kv->len..kv->len+n-1 (the caller reserved and
// then commits them; kv->len is not changed). GL_E_INVAL also for views not f32 of Hkv * D.
GL_MUST_USE gl_status gl_dflash_append_kv(struct gl_dflash_ctx *c, const struct gl_dflash_kv *kv,
                                          const float *hidden, int64_t n, struct gl_err *err);

// Drafts one block at positions len..len+n_block-1: row 0 is the anchor token (the last accepted
// token, not yet in the context), rows 1.. the mask token. hidden_out (n_block x E, after the
// final norm) and logits (n_block x the target's n_vocab, raw lm_head output) may be NULL.
// The block is denoised in place: row i >= 1's logits are the drafter's guess for the token AT
// position len + i, so rows 1..n_block-1 are the draft (llama.cpp reads exactly those; row 0 is
// the anchor's own row). GL_E_INVAL for n_block outside 1..block_size or a bad anchor id.
GL_MUST_USE gl_status gl_dflash_block(struct gl_dflash_ctx *c, const struct gl_dflash_seq *s,
                                      int32_t anchor, int32_t n_block, float *hidden_out,
                                      float *logits, struct gl_err *err);
// The same over caller-stored K/V (gl_dflash_kv); positions from kv->len.
GL_MUST_USE gl_status gl_dflash_block_kv(struct gl_dflash_ctx *c, const struct gl_dflash_kv *kv,
                                         int32_t anchor, int32_t n_block, float *hidden_out,
                                         float *logits, struct gl_err *err);

// The block attention rule, exposed for tests and the oracle's negative control: 0 = the spec
// (bidirectional within the block), 1 = causal within the block (wrong on purpose).
void gl_dflash__set_block_causal(struct gl_dflash_ctx *c, int causal);
