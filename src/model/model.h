// SPDX-License-Identifier: MIT
// model: the Muse Glimmer text tower. Config from `muse-glimmer.*` GGUF metadata or from an HF
// folder's config.json `text_config` (missing keys fall back to the release constants, arch doc
// §1/§3.1), weights bound by name and validated by shape and type (borrowed, still quantized, from
// the gguf or safetensors mapping; HF folders: §3.3 names), a per-sequence f32 KV cache
// read through a page-table view, and the batched multi-sequence forward pass (arch doc §2).
// Invariant: after gl_model_load succeeds every tensor pointer, shape and type has been checked,
// so the forward pass only asserts. Lifetimes: model (weights) > ctx (scratch); kv (sequence).
#pragma once

#include "base/base.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "safetensors/safetensors.h"
#include "vision/vision.h"

#include <stddef.h>
#include <stdint.h>

#define GL_MODEL_ARCH       "muse-glimmer"
#define GL_MODEL_MAX_LAYERS 512

// Release constants (arch doc §1) used when a key is absent. Never llama.cpp's softcap 30.
#define GL_MODEL_DEF_SOFTCAP     20.0f
#define GL_MODEL_DEF_LOGIT_SCALE 0.19611613513818404f
#define GL_MODEL_DEF_RMS_EPS     1e-5f
#define GL_MODEL_DEF_POST_EPS    1e-8f
#define GL_MODEL_DEF_WINDOW      2048
#define GL_MODEL_DEF_ROPE_BASE   500000.0f
#define GL_MODEL_DEF_N_EMBD      6656
#define GL_MODEL_DEF_N_FF        19968
#define GL_MODEL_DEF_N_LAYER     52
#define GL_MODEL_DEF_N_HEAD      32
#define GL_MODEL_DEF_N_HEAD_KV   2 // or n_head when that is smaller
#define GL_MODEL_DEF_HEAD_DIM    128
#define GL_MODEL_DEF_N_CTX       131072
#define GL_MODEL_DEF_QK_SCALE    3.87f // HF qk_scale_factor (multiplier on Q after the QK-norm)
#define GL_MODEL_DEF_EOS         200001
#define GL_MODEL_DEF_EOT         200008
#define GL_MODEL_MAX_STOP        8

// Plain record: hyper-parameters of one model, all validated (> 0, consistent) after parsing.
struct gl_model_config {
    int32_t n_vocab;     // rows of token_embd / output (from the tensors; 0 until bound)
    int32_t n_embd;      // E, hidden size
    int32_t n_ff;        // F, SwiGLU width
    int32_t n_layer;     // L <= GL_MODEL_MAX_LAYERS
    int32_t n_head;      // H query heads
    int32_t n_head_kv;   // Hkv, H % Hkv == 0
    int32_t head_dim;    // D (key_length == value_length), even
    int32_t n_ctx_train; // context_length
    float rms_eps;       // embedding/input/pre-FFN/QK/final norms
    float post_eps;      // post-attention and post-FFN norms (no key: always 1e-8)
    float rope_base;     // freq_base (only sliding layers use RoPE)
    float rope_base_swa; // freq_base_swa, defaults to rope_base
    float logit_scale;   // output multiplier
    float softcap;       // final logit soft-cap; 0 = disabled
    int32_t window;      // sliding window in tokens incl. the current one; 0 = no window
    uint8_t swa[GL_MODEL_MAX_LAYERS]; // 1 = sliding layer (RoPE + window), 0 = full (NoPE)
};

// Parses and validates the config. GL_E_UNSUPPORTED if general.architecture is not
// "muse-glimmer" (message names it); GL_E_FORMAT for a wrongly typed or inconsistent key.
// Unknown `muse-glimmer.*` keys are logged as warnings. n_vocab is left 0.
GL_MUST_USE gl_status gl_model_config_parse(struct gl_model_config *cfg, const struct gl_gguf *g,
                                            struct gl_err *err);

// One 2-D weight used as y = W x: n_out rows of n_in elements of `type`.
struct gl_weight {
    const void *data; // borrowed from the mapping, or owned by the model (f32 expansion)
    enum gl_type type;
    int64_t n_in;     // ne[0]
    int64_t n_out;    // ne[1]
    size_t row_bytes; // gl_type_row_size(type, n_in)
    int r16;          // 1: data is in the 16-row interleaved layout of type (quant.h), owned
};

// One repacked weight buffer: p (n bytes, gl_alloc_huge) holds the r16 copy of the file tensor
// whose bytes start at src.
struct gl_model_huge {
    void *p;
    size_t n;
    const void *src;
};

struct gl_layer {
    const float *attn_norm, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffw_norm;
    struct gl_weight q, k, v, gate, o; // q,gate: E -> H*D ; k,v: E -> Hkv*D ; o: H*D -> E
    struct gl_weight ffn_gate, ffn_up, ffn_down;
};

typedef void (*gl_model_progress_fn)(void *user, int done, int total);

struct gl_model {
    struct gl_model_config cfg;
    const struct gl_gguf *gguf; // borrowed unless owns_gguf; NULL for an HF folder
    int owns_gguf;
    struct gl_safetensors *st; // HF folder: its safetensors (owned), else NULL
    char *hf_dir;              // HF folder path (owned), else NULL
    int hf_legacy;             // 1: legacy `model.layers.N.*` names (arch doc §3.3)
    float hf_qk_scale;     // HF: qk_scale_factor (folded form), synthesised as the q_norm weight
    int32_t hf_vocab_size; // HF: config vocab_size (0 = absent), checked against embed_tokens
    int32_t stop_ids[GL_MODEL_MAX_STOP]; // end-of-generation ids (GGUF eos/eot keys or
    int n_stop;                          // generation_config.json eos_token_id)
    struct gl_weight tok_embd;           // n_in = E, n_out = n_vocab (row per token)
    struct gl_weight output;             // untied lm_head
    const float *output_norm;
    struct gl_layer *layers; // [n_layer]
    void **owned;            // buffers this model allocated (f32 copies), freed at delete
    int n_owned, cap_owned;
    struct gl_model_huge *huge; // repacked weights (gl_alloc_huge), freed at delete
    int n_huge, cap_huge;
    uint64_t r16_bytes;            // bytes of weights repacked into resident memory
    int keep_quant;                // 0: every weight was expanded to F32 at load
    int repack;                    // 1: Q4_K / Q6_K matrices were offered to the r16 layout
    gl_model_progress_fn progress; // gl_model_params.progress, during the load only
    void *progress_user;
    // Vision tower (arch doc §6): HF folders holding the §6.6 tensors, or a vision GGUF attached
    // with gl_model_attach_vision; otherwise none (has_vision 0). vision_cfg is parsed from
    // config.json vision_config (absent keys: §6.1 values; out_dim = n_embd, rms_eps = the text
    // rms_eps) whenever the folder has one; the weights borrow from the mapping (F32/F16/BF16
    // matrices) or from owned f32 copies (vectors not stored as aligned F32).
    int has_vision;
    struct gl_vision_config vision_cfg;
    struct gl_vision_weights vision;
    struct gl_vision_layer *vision_layers; // [vision_cfg.n_layers], owned
    struct gl_gguf *vision_gguf;           // gl_model_attach_vision's file (owned), or NULL
    char *vision_path;                     // its path (owned), for messages
    int vision_mmproj;   // 1: vision_gguf is llama.cpp's mmproj layout (vision/vision_gguf.h)
    int vision_no_video; // 1: the tower cannot encode video (an mmproj with the summed kernel)
    char vision_unsupported[256]; // non-empty: why the encoder cannot run vision_cfg (checked at
                                  // bind time, only when the folder has the tower's tensors)
};

struct gl_model_params {
    int keep_quant; // default from GLINT_GGUF_KEEP_QUANT (unset or non-"0" -> 1)
    // Default from GLINT_REPACK (unset or non-"0" -> 1). When the CPU has r16 kernels, Q4_K and
    // Q6_K matrices (all but token_embd, which is only row-gathered) are repacked at load into
    // resident memory (gl_alloc_huge); the file's pages are then released. This is also how the
    // model ends up resident rather than paged in from the mapping on every pass.
    int repack;
    // gl_model_open only: a vision GGUF to attach after loading (gl_model_attach_vision), or
    // NULL. Borrowed.
    const char *mmproj;
    // Called on the loading thread after each layer's weights are bound (read, converted or
    // repacked: nearly all of a load's time), with done = layers bound of total; NULL: none.
    gl_model_progress_fn progress;
    void *progress_user;
};
struct gl_model_params gl_model_default_params(void);

// Binds weights of an open gguf (borrowed: must outlive the model). GL_E_UNSUPPORTED names a
// tensor whose type we cannot compute with; GL_E_FORMAT names a missing tensor or a wrong shape
// (expected vs actual). *out is freed with gl_model_delete.
GL_MUST_USE gl_status gl_model_load(struct gl_model **out, const struct gl_gguf *g,
                                    const struct gl_model_params *params, struct gl_err *err);
// Opens path and loads: a GGUF file (GLINT_MMAP honoured by the reader; the model owns the gguf)
// or an HF model folder (config.json with text_config, optional generation_config.json,
// model.safetensors[.index.json], tokenizer.model; the model owns the mapping). HF weights keep
// their dtype (F32/F16/BF16); Q/K rows are permuted from HF's rotate-half layout to the
// interleaved RoPE layout the forward pass uses (arch doc §2.3), centered norms get their +1
// (§2.2) and the weight-less QK-norm gets qk_scale_factor / 1 as q_norm / k_norm weights (§2.4).
GL_MUST_USE gl_status gl_model_open(struct gl_model **out, const char *path,
                                    const struct gl_model_params *params, struct gl_err *err);
// Parses an HF folder's config.json (text_config, or a legacy flat config; vision_config into
// m->vision_cfg, see struct gl_model) and generation_config.json into cfg, the folded qk scale,
// the config vocab_size and the stop ids. Absent keys take the release values (§1). GL_E_IO for a
// missing config.json, GL_E_FORMAT for a wrongly typed or inconsistent key, GL_E_UNSUPPORTED for a
// feature the forward pass lacks (naming the key).
GL_MUST_USE gl_status gl_model_hf_config_parse(struct gl_model *m, const char *dir,
                                               struct gl_err *err);
// The vision tower's config of an HF folder as the loader reads it (arch doc §6.1: vision_config
// over the release values; out_dim and rms_eps from the text tower), for converters and checks;
// no tensor is read. *present = 0 when config.json has no vision_config object. Errors as
// gl_model_hf_config_parse.
GL_MUST_USE gl_status gl_model_hf_vision_config(const char *dir, struct gl_vision_config *cfg,
                                                int *present, struct gl_err *err);
// HF safetensors name (arch doc §3.3) of a GGUF tensor name ("blk.3.attn_q.weight" ->
// "model.language_model.layers.3.self_attn.q_proj.weight"; legacy = 1: the `model.layers.N.*`
// export). Returns 0 (out unspecified) when HF has no such tensor: the QK-norm weights, which an
// HF model does not store. out holds cap bytes.
int gl_model_hf_tensor_name(const char *gguf_name, int legacy, char *out, size_t cap);
struct gl_tokenizer;
// The model's tokenizer: from the GGUF metadata, or the folder's tokenizer.model (tiktoken ranks
// plus the Muse Glimmer specials). *out is freed with gl_tokenizer_free.
GL_MUST_USE gl_status gl_model_load_tokenizer(const struct gl_model *m, struct gl_tokenizer **out,
                                              struct gl_err *err);
void gl_model_delete(struct gl_model *m); // NULL-safe
// Attaches a vision GGUF as m's vision tower: llama.cpp's mmproj layout (what `glint convert
// --vision-out` writes and llama.cpp's converter writes, the released mmproj files included; F32,
// F16, BF16, Q8_0 and k-quant matrices) or glint's older "muse-glimmer-vision" file
// (src/vision/vision_gguf.h). Config from the file's keys (rms_eps from the text model), tensors
// bound from the file's mapping (the model owns the file from here); an mmproj's q/k rows are put
// back in rotate-half order and its patch kernel widened to the two-slab f32 matrix (owned
// copies). An mmproj whose patch kernel is only the temporal sum serves images; video is refused
// (gl_model_vision_video). Refused: a model that already has a tower (GL_E_INVAL); a file that is
// not a vision GGUF, a projection_dim other than the text width, a bad key or a missing or
// mis-shaped tensor (GL_E_FORMAT, naming it); a weight type without kernels, another projector
// (GL_E_UNSUPPORTED). On error m is unchanged.
GL_MUST_USE gl_status gl_model_attach_vision(struct gl_model *m, const char *path,
                                             struct gl_err *err);

// The vision tower's weights (borrowed: valid while m lives), or NULL when the model has none
// (a GGUF, or an HF folder without model.vision_tower.* tensors).
const struct gl_vision_weights *gl_model_vision(const struct gl_model *m);
// Its config (shapes checked against every tensor at load), or NULL when it has no tower.
const struct gl_vision_config *gl_model_vision_config(const struct gl_model *m);
// NULL when the tower can encode video (or there is no tower), else why not (a static string).
const char *gl_model_vision_video(const struct gl_model *m);
// 1 when the file tensor whose bytes start at data was repacked (its weight now lives in
// resident memory, in the r16 layout), for diagnostics.
int gl_model_is_repacked(const struct gl_model *m, const void *data);
// Moves w into the 16-row interleaved layout (quant.h) when its type, its row count (a multiple
// of 16) and the CPU's kernels allow it: a gl_alloc_huge copy of w->row_bytes * w->n_out bytes,
// repacked on pool (NULL: this thread), becomes w->data (w->r16 = 1) and is returned in *copy,
// owned by the caller (gl_free_huge with that size). mmapped: w->data points into a private file
// mapping whose pages of the tensor are released afterwards (MADV_DONTNEED drops them from this
// process only; a later read faults them in unchanged). Otherwise *copy = NULL and w is left
// alone. GL_E_NOMEM when the copy cannot be allocated (w unchanged).
GL_MUST_USE gl_status gl_weight_repack_r16(struct gl_weight *w, const struct gl_kernels *k,
                                           struct gl_pool *pool, int mmapped, void **copy,
                                           struct gl_err *err);

// ---- KV views ----
// Element type of stored K/V rows. Attention converts rows to f32 on the fly.
enum gl_kv_dtype { GL_KV_F32, GL_KV_F16, GL_KV_BF16, GL_KV_FP8_E4M3 };
size_t gl_kv_dtype_size(enum gl_kv_dtype t); // bytes per element: 4, 2, 2, 1

// One layer's K/V as seen by attention: a table of page ids into pool memory. Position p lives in
// logical block p / block_size, i.e. page pages[p / block_size] (-1 = unmapped: outside a sliding
// window, or not yet reserved), at row p % block_size. A row is Hkv * D elements of `dtype`
// (head-major, then dim), row_bytes long. Inside a page this layer's K rows start at k_off and
// its V rows at v_off (block_size consecutive rows each); for fp8 the scale of each row, a bf16 s
// (dequantized value = e4m3 code value * s, src/quant/fp8.h), sits at k_scale_off / v_scale_off
// (block_size bf16 each, 2 bytes, unaligned access by memcpy). Attention reads only positions it
// may see and asserts that their pages are mapped.
// A view borrows the table; it is valid until its owner changes the table (reserve, free).
struct gl_kv_view {
    int32_t block_size;
    int32_t n_blocks;     // entries in pages
    const int32_t *pages; // [n_blocks]
    uint8_t *base;        // page id i starts at base + i * page_bytes
    size_t page_bytes;
    int64_t n_pages; // pages at base (the whole pool: what a device mirror of it holds)
    size_t row_bytes;
    size_t k_off, v_off;
    size_t k_scale_off, v_scale_off; // fp8 only: bf16 row scales
    enum gl_kv_dtype dtype;
};

// ---- KV cache (one sequence, f32) ----
// A private pool of n_layer x ceil(n_ctx / 256) pages, each one layer's K and V rows for 256
// positions; every page is mapped, so it is the plain per-sequence cache of the CLI and tests.
struct gl_kv_cache;
// Capacity n_ctx positions for every layer.
GL_MUST_USE gl_status gl_kv_cache_new(struct gl_kv_cache **out, const struct gl_model_config *cfg,
                                      int64_t n_ctx, struct gl_err *err);
void gl_kv_cache_delete(struct gl_kv_cache *kv); // NULL-safe
int64_t gl_kv_cache_capacity(const struct gl_kv_cache *kv);
int64_t gl_kv_cache_len(const struct gl_kv_cache *kv); // positions written so far
void gl_kv_cache_clear(struct gl_kv_cache *kv);        // forget all positions
struct gl_kv_view gl_kv_cache_view(const struct gl_kv_cache *kv, int layer);

// ---- forward ----
// Optional per-layer hook: called with the chunk's hidden states (n_tok x E f32, row-major)
// after the embedding norm (layer -1), after every layer (0..L-1), and for the logits
// (layer L, n_tok x n_vocab). pos0 is the position of the first row.
struct gl_model_dump {
    void (*fn)(void *user, int layer, int64_t pos0, const float *x, int64_t n_tok, int64_t width);
    void *user;
};

// Step scratch for one model and at most n_batch tokens per pass, plus the thread pool.
struct gl_model_ctx;
GL_MUST_USE gl_status gl_model_ctx_new(struct gl_model_ctx **out, const struct gl_model *m,
                                       int n_batch, int n_threads, int64_t n_ctx,
                                       struct gl_err *err);
// The same on a chosen backend: device -1 the CPU, N >= 0 Vulkan device N (the index of
// gl_vk_list_devices; src/model/backend_vk.c). A device backend uploads the weights here
// (GL_E_UNSUPPORTED without Vulkan or the device, GL_E_NOMEM without device memory).
GL_MUST_USE gl_status gl_model_ctx_new_dev(struct gl_model_ctx **out, const struct gl_model *m,
                                           int n_batch, int n_threads, int64_t n_ctx, int device,
                                           struct gl_err *err);
// Where a context runs and the bounds of its steps (gl_model_ctx_new_ex).
struct gl_model_dev {
    int device; // -1: the CPU; N >= 0: Vulkan device N
    // The last n_gpu_layers layers run on the device, the rest on the CPU (llama.cpp's -ngl);
    // n_layer + 1 puts the output head there too (llama.cpp offloads it past n_layer). -1: all
    // (n_layer + 1). Ignored on the CPU.
    int n_gpu_layers;
    // Step bounds a device backend allocates for at create, so that its memory is what
    // gl_model_dev_mem_plan says (0: grown at first need): sequences in one step, positions per
    // sequence and KV positions per page (the page tables of the step inputs), logits rows.
    int max_seqs;
    int64_t max_len;
    int32_t block_size;
    int head_rows;
    // The KV pool the steps will use (its memory, gl_kv_pool_base, and bytes): a device backend
    // makes its copy at create (NULL: at the first step).
    const void *kv_base;
    uint64_t kv_bytes;
};
// gl_model_ctx_new_dev with placement and bounds (d NULL: the CPU). GL_E_INVAL names
// --n-gpu-layers when n_gpu_layers is not in -1..n_layer + 1.
GL_MUST_USE gl_status gl_model_ctx_new_ex(struct gl_model_ctx **out, const struct gl_model *m,
                                          int n_batch, int n_threads, int64_t n_ctx,
                                          const struct gl_model_dev *d, struct gl_err *err);
// Bytes the device buffers of c hold now, device-local (host 0) or host-visible (host 1), as
// asked for (gl_vk_device_held); 0 on the CPU.
uint64_t gl_model_ctx_device_bytes(const struct gl_model_ctx *c, int host);

// What a device context allocates (gl_model_ctx_new_ex on a device, then a step that touches
// a KV pool of kv_pool_bytes): the matrices of its layers (and of the head) in their GGUF types,
// the norm vectors (f32), the activations of n_batch rows, the step inputs and logits at the
// bounds of d, and the KV pool's device copy. From the metadata alone (a header-only GGUF does).
struct gl_model_dev_mem {
    int n_gpu_layers, head_on_device; // resolved (-1: n_layer + 1)
    uint64_t weights_by_type[GL_TYPE_COUNT];
    uint64_t weights, norms, activations, step_inputs, logits, kv; // device-local
    uint64_t device_total;
    uint64_t host_visible; // step inputs and logits read-back, the staging buffer
    uint64_t kv_binding;   // the largest KV binding (the pool's device copy, bound whole)
};
GL_MUST_USE gl_status gl_model_dev_mem_plan(const struct gl_gguf *g,
                                            const struct gl_model_config *cf, int n_batch,
                                            const struct gl_model_dev *d, uint64_t kv_pool_bytes,
                                            struct gl_model_dev_mem *out, struct gl_err *err);
// Checks a plan against Vulkan device `index`: GL_E_NOMEM with the numbers (needed, heap size,
// each part) when device_total (plus host_visible where the device has one heap) is more than
// the heap device-local buffers go to, GL_E_LIMIT when the KV binding is over the device's
// binding range (with the --kv-cache-memory that fits); heap_bytes / name: the heap compared
// with and the device's name (when the device was found).
GL_MUST_USE gl_status gl_model_dev_mem_check(const struct gl_model_dev_mem *p, int index,
                                             uint64_t *heap_bytes, char *name, size_t name_len,
                                             struct gl_err *err);

// The room for the KV pool's device copy on Vulkan device `index`, as vLLM sizes its pool
// (--gpu-memory-utilization): heap x utilization minus what p needs besides the KV (device_total
// - kv, plus host_visible where the device has one heap), at most the storage binding range (the
// copy is bound whole); negative when the rest alone is over. heap_bytes / range_bytes: the
// figures used. GL_E_INVAL / the loader's errors when the device is not there.
GL_MUST_USE gl_status gl_model_dev_kv_room(const struct gl_model_dev_mem *p, int index,
                                           double utilization, int64_t *room, uint64_t *heap_bytes,
                                           uint64_t *range_bytes, struct gl_err *err);

void gl_model_ctx_delete(struct gl_model_ctx *c); // NULL-safe
const struct gl_kernels *gl_model_ctx_kernels(const struct gl_model_ctx *c);
struct gl_pool *gl_model_ctx_pool(struct gl_model_ctx *c); // its threads (for pinning)

// One sequence's part of a batched step: n tokens at positions pos0.. whose K/V are written
// through views[layer]. Each view must map the blocks of those positions and of every key they
// read (sliding layers: from pos0 - window + 1; global layers: from 0). Logits: when
// logits_row >= 0, the last max(1, n_logits) tokens' logits go to rows logits_row.. of the output.
struct gl_batch_seq {
    const int32_t *tokens;
    int32_t n;
    int64_t pos0;
    const struct gl_kv_view *views; // [n_layer]
    int32_t logits_row;             // -1: no logits for this sequence
    int32_t n_logits;               // trailing tokens with logits; 0 means 1
    // NULL, or a bitset ([ceil(n_vocab / 32)] words, bit t of word t / 32) holding every token
    // whose logit this sequence will read (a grammar's allowed set). When every row of the step
    // with logits has one and their union touches few 16-row groups of the head, only those
    // groups are computed: their logits are bit-identical to a full head's, the other entries of
    // the rows are -INFINITY. GLINT_PARTIAL_HEAD=0 turns this off.
    const uint32_t *head_mask;
    // NULL, or [n] pointers, one per token of this chunk: embd[t] != NULL is the input embedding
    // of position pos0 + t (n_embd floats, borrowed for the call) used instead of the token_embd
    // row of tokens[t] (whose id is then not read or checked). The row goes through the same
    // scale-less RMS as a looked-up row (arch doc §2.1 step 3: llama.cpp injects vision features
    // as raw embeddings). Soft tokens of an image: the caller points each position of the chunk
    // at its row, so a chunk may start or end anywhere inside an image.
    const float *const *embd;
};

// ONE forward pass over every token of seqs (at most n_batch in total): each weight matmul
// takes all rows of the step at once; attention runs per sequence through its views. logits is
// (rows requested) x n_vocab; when the requested rows follow the sequence order contiguously the
// output head is one matmul. GL_E_INVAL for a bad token id, an empty or oversized batch or a
// view too short for its positions; GL_E_LIMIT for positions beyond the context n_ctx.
GL_MUST_USE gl_status gl_model_forward_batch(struct gl_model_ctx *c,
                                             const struct gl_batch_seq *seqs, int n_seqs,
                                             float *logits, struct gl_err *err);

// Hidden states brought back to the host from a step (speculative decoding's drafter reads
// chosen layers): for each listed layer (-1: the normed embedding, 0..n_layer-1: that layer's
// output, the residual stream) every row of the step, in row order (seqs[0]'s n rows first, then
// seqs[1]'s, ...), n_embd floats each, into out[i] (host, caller-owned, at least (tokens of the
// step) x n_embd floats; written when the call returns). A row's values are the ones the dump
// hook would see for that token run alone: they do not depend on the batch.
struct gl_model_capture {
    int n_layers;
    const int32_t *layers; // [n_layers], each in -1..n_layer-1
    float *const *out;     // [n_layers]
};
// gl_model_forward_batch that also captures (cap NULL: none). GL_E_INVAL as that, and for a
// listed layer out of range or a NULL buffer.
GL_MUST_USE gl_status gl_model_forward_capture(struct gl_model_ctx *c,
                                               const struct gl_batch_seq *seqs, int n_seqs,
                                               float *logits, const struct gl_model_capture *cap,
                                               struct gl_err *err);

// Runs tokens[0..n) at positions pos0.. (pos0 must equal gl_kv_cache_len(kv)), in chunks of
// at most n_batch tokens, appending K/V. logits: all_logits ? n x n_vocab : n_vocab floats (the
// last token's); may be NULL to skip the output head. GL_E_INVAL for a token id out of range,
// GL_E_LIMIT when the cache would overflow.
GL_MUST_USE gl_status gl_model_forward(struct gl_model_ctx *c, struct gl_kv_cache *kv,
                                       const int32_t *tokens, int64_t n, int64_t pos0,
                                       float *logits, int all_logits,
                                       const struct gl_model_dump *dump, struct gl_err *err);
// A dump needs (n_layer + 1) x n_batch x n_embd floats of the ctx, allocated at its first use
// (GL_E_NOMEM if that fails).
// gl_model_forward with given input rows: embd is NULL or [n] pointers, embd[i] != NULL replacing
// the token_embd row of tokens[i] (as gl_batch_seq embd; tokens[i] is then not checked).
GL_MUST_USE gl_status gl_model_forward_embd(struct gl_model_ctx *c, struct gl_kv_cache *kv,
                                            const int32_t *tokens, const float *const *embd,
                                            int64_t n, int64_t pos0, float *logits, int all_logits,
                                            const struct gl_model_dump *dump, struct gl_err *err);
