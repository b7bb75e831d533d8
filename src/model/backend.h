// SPDX-License-Identifier: MIT
// backend: the seam between the forward pass and the hardware it runs on (model-internal; used
// by src/model/*.c only). forward.c says WHAT a step computes and in which order, once, as a
// sequence of calls to struct gl_backend_ops; a backend says HOW. The CPU backend
// (backend_cpu.c) runs each op as it is called; a device backend records the ops into one
// command buffer and submits it at step_end, so a whole engine step, every sequence of the
// batch, is one device submission.
//
// Ownership: the backend owns the step's activations, named by enum gl_bk_buf (n_batch rows
// each, f32, row-major: a host array on the CPU, a device buffer + offset on a device); nothing
// outside the backend reads them except through capture. Weights are named by (layer, role)
// (enum gl_bk_tensor) and bound once at create (a device backend uploads them there, still in
// their GGUF blocks). K/V are read and written through the step's gl_kv_view page tables.
// Everything an op is given by pointer (the step description, the head's row lists and its host
// logits, a capture's host buffer) is borrowed until step_end returns, when the logits and the
// captured rows are on the host. Ops never fail (their inputs were validated by forward.c);
// create and step_end return a status (a device backend: no memory, a lost device).
// Numerics: every backend follows docs/ARCHITECTURE.md "Numerics"; the CPU backend's bits are
// the reference (a token's results do not depend on the batch it runs in).
#pragma once

#include "model/model.h"

// Activation buffers of a step, n_batch rows each (widths: gl_bk_buf_width).
enum gl_bk_buf {
    GL_BK_H,   // E: the residual stream
    GL_BK_X,   // E: normed input of a block's matmuls (and of the head)
    GL_BK_Y,   // E: embedding rows, then each block's output before its sandwich norm
    GL_BK_Q,   // H*D: queries
    GL_BK_G,   // H*D: attention output gate
    GL_BK_K,   // Hkv*D: keys of the step's tokens
    GL_BK_V,   // Hkv*D: values
    GL_BK_ATT, // H*D: attention output
    GL_BK_FA,  // F: SwiGLU gate, then its product
    GL_BK_FB,  // F: SwiGLU up
    GL_BK_BUF_COUNT
};
int64_t gl_bk_buf_width(const struct gl_model_config *cf, enum gl_bk_buf b);

// The model's tensors by role. Per-layer roles take layer 0..n_layer-1; the model-level ones
// (OUTPUT_NORM, OUTPUT, TOK_EMBD) ignore the layer. NONE: no weight (a scale-less RMS).
enum gl_bk_tensor {
    GL_BK_ATTN_NORM, // vectors: E floats (Q_NORM, K_NORM: D)
    GL_BK_Q_NORM,
    GL_BK_K_NORM,
    GL_BK_POST_ATTN_NORM,
    GL_BK_FFN_NORM,
    GL_BK_POST_FFW_NORM,
    GL_BK_OUTPUT_NORM,
    GL_BK_WQ, // matrices (struct gl_weight, quantized)
    GL_BK_WK,
    GL_BK_WV,
    GL_BK_WGATE,
    GL_BK_WO,
    GL_BK_FFN_GATE,
    GL_BK_FFN_UP,
    GL_BK_FFN_DOWN,
    GL_BK_OUTPUT,
    GL_BK_TOK_EMBD,
    GL_BK_NONE,
    GL_BK_TENSOR_COUNT = GL_BK_NONE
};
// The matrix of a matrix role, the vector (NULL for NONE) of a vector role; anything else
// asserts.
const struct gl_weight *gl_bk_matrix(const struct gl_model *m, int layer, enum gl_bk_tensor t);
const float *gl_bk_vector(const struct gl_model *m, int layer, enum gl_bk_tensor t);

// One step: n rows (tokens), sequence by sequence (seqs[0]'s n rows first); row r is token
// row_pos[r] - seqs[row_seq[r]].pos0 of sequence row_seq[r], at position row_pos[r].
struct gl_bk_step {
    const struct gl_batch_seq *seqs;
    int n_seqs;
    int64_t n;
    const int32_t *row_seq; // [n]
    const int64_t *row_pos; // [n]
};

// The output head over rows of the step: row src[i] of `from` (the residual stream) goes through
// the final norm, lm_head, x logit_scale and the soft-cap into row dst[i] of logits (host, rows x
// n_vocab). groups: NULL for the whole head, else the n_groups 16-row groups of the head to
// compute (ascending; the partial head under grammar masks): every other entry of those rows is
// -INFINITY.
struct gl_bk_head {
    int64_t n;
    const int32_t *src, *dst; // [n]
    float *logits;
    const int32_t *groups;
    int64_t n_groups;
};

// What a backend is created with: the model (weights bound from it; it outlives the backend),
// the most rows a step carries, and the host's thread pool and kernel table (borrowed).
struct gl_backend_params {
    const struct gl_model *m;
    int n_batch;
    struct gl_pool *pool;
    const struct gl_kernels *k;
    int device; // a device backend: its index in gl_vk_list_devices
    // A device backend: the layers it runs, first_layer..n_layer-1 (their matrices uploaded),
    // and whether it runs the output head (head: its matrix uploaded); the step bounds it
    // allocates for at create (struct gl_model_dev; 0: grown when a step needs it).
    int first_layer, head;
    int max_seqs, head_rows;
    int64_t max_len;
    int32_t block_size;
    const void *kv_base; // the KV pool to mirror at create (NULL: at the first step)
    uint64_t kv_bytes;
};

// A backend instance; each implementation embeds this as its first member.
struct gl_backend {
    const struct gl_backend_ops *ops;
};

// The ops. Row counts are the step's n unless stated. eps: the RMS epsilon of that norm.
struct gl_backend_ops {
    const char *name;
    gl_status (*create)(struct gl_backend **out, const struct gl_backend_params *p,
                        struct gl_err *err);
    void (*destroy)(struct gl_backend *b); // NULL-safe
    // Starts a step (the previous one has ended): row positions, RoPE angles, attention plan.
    void (*step_begin)(struct gl_backend *b, const struct gl_bk_step *st);
    // dst[r] = the token_embd row of row r's token, or the row its sequence's embd gives (soft
    // tokens).
    void (*embed)(struct gl_backend *b, enum gl_bk_buf dst);
    // dst[r] = RMS(src[r]) * w (w: NONE for none); dst may be src.
    void (*rms_norm)(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src, int layer,
                     enum gl_bk_tensor w, float eps);
    // dst[r] = W src[r] for the matrix role w (dst != src).
    void (*matmul)(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src, int layer,
                   enum gl_bk_tensor w);
    // Per head of D values of buf (Q or K): RMS * w (QK-norm), then when rope the interleaved-pair
    // RoPE at the row's position (sliding layers' base).
    void (*norm_rope_heads)(struct gl_backend *b, enum gl_bk_buf buf, int layer,
                            enum gl_bk_tensor w, int rope, float eps);
    // Stores rows k and v of every row at its position through its sequence's views[layer] (in
    // the view's dtype).
    void (*kv_store)(struct gl_backend *b, int layer, enum gl_bk_buf k, enum gl_bk_buf v);
    // dst = softmax(q K^T / sqrt(D)) V per query head (GQA), over the keys each row may see:
    // positions pos - window + 1 .. pos (window 0: 0 .. pos), read through views[layer].
    void (*attn)(struct gl_backend *b, int layer, enum gl_bk_buf dst, enum gl_bk_buf q, int window);
    // dst *= sigmoid(src) elementwise (the attention output gate).
    void (*gate)(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src);
    // gate = silu(gate) * up elementwise.
    void (*swiglu)(struct gl_backend *b, enum gl_bk_buf gate, enum gl_bk_buf up);
    // The sandwich norm and the residual: y = RMS(y) * w; h += y.
    void (*norm_residual)(struct gl_backend *b, enum gl_bk_buf h, enum gl_bk_buf y, int layer,
                          enum gl_bk_tensor w, float eps);
    // The output head (struct gl_bk_head) over rows of `from`; may overwrite GL_BK_X.
    void (*head)(struct gl_backend *b, enum gl_bk_buf from, const struct gl_bk_head *hd);
    // dst = the host rows src (n x width floats, borrowed until step_end): the residual stream
    // handed over from another backend (partial offload).
    void (*load)(struct gl_backend *b, enum gl_bk_buf dst, const float *src);
    // Copies every row of src to dst (host, n x width floats) by step_end.
    void (*capture)(struct gl_backend *b, enum gl_bk_buf src, float *dst);
    // Ends the step: runs what was recorded and waits for it; the head's logits and the captures
    // are then on the host. An error ends the step too (the caller fails it, nothing is retried).
    gl_status (*step_end)(struct gl_backend *b, struct gl_err *err);
};

extern const struct gl_backend_ops gl_backend_cpu; // backend_cpu.c: today's kernels, in place
extern const struct gl_backend_ops gl_backend_vk;  // backend_vk.c: one Vulkan submit per step
// A Vulkan backend's buffers now: device-local (host 0) or host-visible (host 1) bytes.
uint64_t gl_backend_vk_bytes(const struct gl_backend *b, int host);
