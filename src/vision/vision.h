// SPDX-License-Identifier: MIT
// vision: the Muse Glimmer perception encoder forward pass for one image (arch doc §6.1, §6.3):
// patch embedding, bilinear position embedding (zero padding), ln_pre, windowed/full pre-norm
// blocks with 2-D RoPE, ln_post, 2x2 pixel shuffle, adapter, vision_projection and the
// weight-less RMS norm. Input: the (2gh)x(2gw) patch grid of gl_image_patchify; output: one
// row of out_dim floats per merged token (row-major over gh x gw), ready to replace the
// <|patch|> rows of the prompt. Matmuls go through gl_matmul (the text tower's kernels), so the
// weight types are those the kernel table has (F32, F16, BF16, Q8_0, the k-quants).
#pragma once

#include "base/base.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <stdint.h>

// Shapes and constants. gl_vision_config_default fills the released model's values; any
// consistent smaller set works (tests use a tiny one).
struct gl_vision_config {
    int32_t patch_size;   // 14 (pixels per patch side)
    int32_t patch_frames; // 2 (temporal slabs per patch); patch_dim = frames * 3 * size * size
    int32_t hidden;       // 1536
    int32_t n_layers;     // 50
    int32_t n_heads;      // 16
    int32_t head_dim;     // 96; a multiple of 16 (RoPE quarters; the attention tile kernel)
    int32_t ffn;          // 8960
    int32_t pos_h, pos_w; // 32 x 32 position table; also the attention window in patches
    int32_t merge;        // 2 (pixel shuffle side); only 2 is supported
    int32_t full_every;   // 4: layer i attends globally iff (i+1) % full_every == 0 or i is last
    int32_t adapter;      // 4096 (adapter width)
    int32_t out_dim;      // 6656 (text n_embd)
    float ln_eps;         // 1e-5 (every LayerNorm)
    float rms_eps;        // 1e-5 (perception_emb_norm = the text rms_norm_eps)
    float rope_theta;     // 10000
};

void gl_vision_config_default(struct gl_vision_config *cfg);
// frames * 3 * patch_size^2 (1176 for the released model).
int64_t gl_vision_patch_dim(const struct gl_vision_config *cfg);

// A matrix W[n_out][n_in] in one of the kernel types (row stride gl_type_row_size(type, n_in));
// n_out, n_in follow from the config and the tensor's role.
struct gl_vision_mat {
    enum gl_type type;
    const void *data;
};

// Per block. Vectors are f32: LayerNorm weight/bias [hidden], biases [n_out].
struct gl_vision_layer {
    const float *ln1_w, *ln1_b;
    struct gl_vision_mat q, k, v, proj; // [hidden][hidden] each
    const float *q_b, *k_b, *v_b, *proj_b;
    const float *ln2_w, *ln2_b;
    struct gl_vision_mat fc1; // [ffn][hidden]
    const float *fc1_b;       // [ffn]
    struct gl_vision_mat fc2; // [hidden][ffn]
    const float *fc2_b;       // [hidden]
};

// Borrowed pointers (the caller owns the memory and keeps it alive during gl_vision_encode).
struct gl_vision_weights {
    struct gl_vision_mat patch;       // [hidden][patch_dim], no bias
    const float *pos;                 // [pos_h * pos_w][hidden], entry (r, c) at row r * pos_w + c
    const float *ln_pre_w, *ln_pre_b; // [hidden]
    const struct gl_vision_layer *layers; // [n_layers]
    const float *ln_post_w, *ln_post_b;   // [hidden]
    struct gl_vision_mat adapter_fc1;     // [adapter][4 * hidden], no bias
    struct gl_vision_mat adapter_fc2;     // [adapter][adapter], no bias
    struct gl_vision_mat projection;      // [out_dim][adapter], no bias
    // 0: every layer's q/k rows and q_b/k_b are in HF's rotate-half order. 1: in ggml's pair
    // order within each head (llama.cpp's mmproj, as mapped: row h*D + 2j + s holds rotate-half
    // row h*D + s*D/2 + j, D = head_dim); the encoder puts each head back in rotate-half order as
    // it applies RoPE, so the output is bit for bit that of reordered rows, with no copy of the
    // matrices (about 470 MB at the release's BF16 tower).
    int qk_pairs;
};

// Encodes one image. patches: [gh2 * gw2][patch_dim] floats, patches row-major over the gh2 x gw2
// patch grid (gl_image_patchify's layout). out: [(gh2/2) * (gw2/2)][out_dim], caller-allocated.
// Threads: every parallel phase runs on pool (not re-entrant: one encode per pool at a time).
// Scratch is allocated per call and freed before return. Errors: GL_E_INVAL for a bad config,
// an odd or empty grid or NULL arguments; GL_E_LIMIT when the sizes overflow; GL_E_UNSUPPORTED
// for a weight type without kernels; GL_E_NOMEM. out is unspecified on error.
gl_status gl_vision_encode(struct gl_pool *pool, const struct gl_vision_config *cfg,
                           const struct gl_vision_weights *w, const float *patches, int64_t gh2,
                           int64_t gw2, float *out, struct gl_err *err) GL_MUST_USE;

// ---- the pieces, exposed for unit tests (pure functions, no allocation) ----

// The window permutation (§6.3 step 4): order[j] = row-major patch index of the j-th token in
// window order; win_start[w] = first j of window w, win_start[n_windows] = gh * gw. Windows are
// win_h x win_w patches, row-major over the ceil(gh/win_h) x ceil(gw/win_w) grid; partial edge
// windows keep only real patches. order has gh * gw entries, win_start n_windows + 1. Returns
// n_windows.
int64_t gl_vision_window_order(int64_t gh, int64_t gw, int64_t win_h, int64_t win_w, int32_t *order,
                               int64_t *win_start);

// The two bilinear taps of output index i (0 <= i < n_out) over a table of n_tab entries, with
// align_corners = false and zero padding: src = (i + 0.5) * n_tab / n_out - 0.5, taps
// idx[0] = floor(src), idx[1] = idx[0] + 1 with weights 1 - frac, frac; a tap outside
// [0, n_tab) gets weight 0 (and idx clamped into range so it can be read harmlessly).
void gl_vision_bilinear_taps(int64_t i, int64_t n_out, int64_t n_tab, int64_t idx[2], float wt[2]);

// out[p][d] = the bilinear position embedding of patch p (row-major over gh x gw), d < hidden.
void gl_vision_pos_embed(const float *table, int64_t pos_h, int64_t pos_w, int64_t hidden,
                         int64_t gh, int64_t gw, float *out);

// 2x2 pixel shuffle (§6.3 step 8): x [gh * gw][dim] row-major patches -> out
// [(gh/2) * (gw/2)][4 * dim], out[m][ch * 4 + s] = x[patch s of cell m][ch], s over (r, c),
// (r, c + 1), (r + 1, c), (r + 1, c + 1). gh, gw even.
void gl_vision_pixel_shuffle(const float *x, int64_t gh, int64_t gw, int64_t dim, float *out);
