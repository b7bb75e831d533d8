// SPDX-License-Identifier: MIT
// vision_gguf: the vision GGUF layouts glint reads. Since issue 21 `glint convert --vision-out`
// writes llama.cpp's mmproj layout (below, "llama.cpp's mmproj layout") plus one tensor llama.cpp
// never asks for, the full temporal patch kernel, so one file works in llama-mtmd-cli and serves
// video in glint. llama.cpp's own files (its converter, the released mmproj-kquant.gguf and
// mmproj-*-BF16.gguf) hold only the patch kernel SUMMED over its two temporal slabs: exact for a
// still image (both slabs see the same frame), not enough for video, which is then refused.
//
// glint's older "muse-glimmer-vision" layout (written before issue 21) is still read, so files
// converted earlier keep working; nothing writes it any more. Its layout (GGUF v3):
//  * general.architecture = "muse-glimmer-vision", general.type = "mmproj"; llama.cpp does not
//    know the architecture, so it never mistakes the file for its own mmproj.
//  * GL_VGGUF_KEY_FORMAT = GL_VGGUF_FORMAT ("temporal-v1") names the layout;
//    muse-glimmer-vision.patch_temporal = 2 (frames per patch).
//  * v.patch_embd.weight: ne = [p*p, 3, T, hidden] = [196, 3, 2, 1536] (ggml order, ne[0]
//    contiguous: column-major within the patch row, then patch row, channel, temporal slab,
//    output). GGUF allows 4 dims, so HF's two spatial axes are merged into ne[0]; the bytes equal
//    HF's row-major [1536, 1176] matrix (patch vector order temporal, channel, row, col; §6.2),
//    so a loader may view it as a 2-D [1176, 1536] weight.
//  * Other tensors under llama.cpp's clip names: v.position_embd.weight [hidden, 1024],
//    v.pre_ln.{weight,bias}, v.blk.N.{ln1,ln2,attn_q,attn_k,attn_v,attn_out,ffn_up,ffn_down}.
//    {weight,bias} (ffn_up = mlp.fc1, ffn_down = mlp.fc2), v.post_ln.{weight,bias}, mm.0.weight
//    (adapter fc1), mm.1.weight (adapter fc2), mm.2.weight (vision_projection). Matrices are
//    [in, out] like every GGUF weight. Vision q/k rows stay in HF's rotate-half order
//    (muse-glimmer-vision.rope_layout = "rotate_half"), the order glint's encoder uses; llama.cpp
//    un-permutes them for its own mmproj.
//  * Vectors F32; matrices F32, F16 or BF16.
#pragma once

#include "base/base.h"
#include "gguf/gguf.h"
#include "vision/vision.h"

#include <stddef.h>

#define GL_VGGUF_ARCH         "muse-glimmer-vision"
#define GL_VGGUF_KEY_FORMAT   "muse-glimmer-vision.format"
#define GL_VGGUF_FORMAT       "temporal-v1"
#define GL_VGGUF_KEY_TEMPORAL "muse-glimmer-vision.patch_temporal"
#define GL_VGGUF_PATCH        "v.patch_embd.weight"

enum gl_vgguf_kind {
    GL_VGGUF_NOT_VISION, // no patch embedding: not a vision GGUF
    GL_VGGUF_TEMPORAL,   // patch embedding keeps T >= 2 temporal slabs (ours): video works
    GL_VGGUF_SUMMED,     // patch embedding of 3 * p * p inputs per output: still images only
    GL_VGGUF_UNKNOWN,    // a patch embedding of another size
};

// Classifies an open GGUF by its patch embedding's inputs per output channel K = elements /
// last dim: K == 3 * p * p -> SUMMED, K == T * 3 * p * p with T >= 2 -> TEMPORAL. p comes from
// muse-glimmer-vision.patch_size or clip.vision.patch_size (default 14). *frames (may be NULL)
// gets T (1 for SUMMED, 0 otherwise).
enum gl_vgguf_kind gl_vgguf_kind(const struct gl_gguf *g, int64_t *frames);

// Refuses a vision GGUF that cannot encode video, with a message that says why and what to use
// instead: the released mmproj-kquant.gguf by its file name (checked first, so g may be NULL to
// refuse before opening), and any GGUF whose patch embedding has no temporal axis (SUMMED) or an
// unexpected size (UNKNOWN). GL_E_UNSUPPORTED (FORMAT for UNKNOWN); GL_OK for our layout and for
// GGUFs that are not vision GGUFs.
GL_MUST_USE gl_status gl_vgguf_check(const char *path, const struct gl_gguf *g, struct gl_err *err);

// The GGUF name of an HF vision tensor (arch doc §6.6 -> the layout above), written to out[cap].
// Returns 0, or -1 for a name outside the map or one that does not fit.
int gl_vgguf_tensor_name(const char *hf, char *out, size_t cap);

// ---- llama.cpp's mmproj layout (tools/mtmd/clip.cpp, PROJECTOR_TYPE_MUSE_GLIMMER) ----
//
// general.architecture = "clip", general.type = "mmproj", clip.projector_type = "muse-glimmer",
// clip.has_vision_encoder = true (BOOL); U32 keys clip.vision.{patch_size, embedding_length,
// feed_forward_length, block_count, attention.head_count, projection_dim, image_size} and the
// optional clip.vision.spatial_merge_size (2); F32 clip.vision.attention.layer_norm_epsilon;
// optional F32 arrays clip.vision.image_mean / image_std (must be 0.5 x 3: the image module's
// normalisation). What llama.cpp hard-codes for this projector is not in the file: RoPE theta
// 10000, every 4th and the last layer global, 2 frames per patch; pos_h = pos_w = sqrt of the
// position table's rows, adapter width = mm.0's output rows.
// Tensors (ne order): v.patch_embd.weight [p, p, 3, hidden] is a conv2d kernel holding the SUM
// of the two temporal slabs (exact for a still image: both frames are the same picture);
// v.position_embd.weight [hidden, pos_h * pos_w]; v.pre_ln / v.post_ln / v.blk.N.{ln1, ln2}
// {weight, bias} [hidden]; v.blk.N.{attn_q, attn_k, attn_v, attn_out} [hidden, hidden] + bias;
// v.blk.N.ffn_up [hidden, ffn] + bias [ffn]; v.blk.N.ffn_down [ffn, hidden] + bias [hidden];
// mm.0.weight [4 * hidden, adapter], mm.1.weight [adapter, adapter], mm.2.weight [adapter,
// projection_dim]. attn_q/attn_k rows (and biases) are in ggml's interleaved pair order within a
// head (row 2j + s of a head = HF rotate-half row s * head_dim / 2 + j); the loader puts them back.
// glint's writer adds GL_MMPROJ_PATCH_T ne [p*p, 3, 2, hidden]: the full HF kernel (bytes of HF's
// [hidden, 1176] row-major matrix, patch vector order temporal, channel, row, col; §6.2), which
// clip.cpp never asks for (it loads only the names it requests). With it video works and glint
// uses it for images too; a file without it (llama.cpp's own converter, the released files)
// serves still images only.
// Types: vectors, the position table and the patch kernels F32/F16/BF16; matrices any type the
// kernel table can multiply (F32, F16, BF16, Q8_0, the k-quants ...).
#define GL_MMPROJ_ARCH      "clip"
#define GL_MMPROJ_PROJECTOR "muse-glimmer"
#define GL_MMPROJ_PATCH_T   "v.patch_embd_temporal.weight"

struct gl_vgguf_info {
    int mmproj; // 1: llama.cpp's layout (q/k rows interleaved, patch kernel summed); 0: glint's
    int video;  // 1: both temporal slabs are in the file (video works); 0: still images only
};

// 1 when general.architecture is GL_MMPROJ_ARCH (a STR), else 0.
int gl_vgguf_is_mmproj(const struct gl_gguf *g);

// Reads and checks an mmproj: every key's type and value and every tensor the encoder uses (its
// presence, dims, shape and type), against the config the keys give. cfg gets the config
// (rms_eps stays the default 1e-5: the text model's value is the caller's), info the layout.
// Errors name the key or tensor and why: GL_E_FORMAT for a malformed file, GL_E_UNSUPPORTED for a
// well-formed one the encoder cannot run (another projector type, merge != 2, a head size not a
// multiple of 16, a weight type without kernels, another normalisation).
GL_MUST_USE gl_status gl_vgguf_mmproj_read(const struct gl_gguf *g, struct gl_vision_config *cfg,
                                           struct gl_vgguf_info *info, struct gl_err *err);

// Reads a vision GGUF's config (keys absent take the §6.1 values): general.architecture must be
// GL_VGGUF_ARCH and the format GL_VGGUF_FORMAT (else GL_E_FORMAT / GL_E_UNSUPPORTED), q/k rows
// rotate-half, sizes plausible; a head size that is not a multiple of 16 or a merge other than 2
// is GL_E_UNSUPPORTED (the encoder's limits). Tensor shapes are the loader's to check.
GL_MUST_USE gl_status gl_vgguf_config(const struct gl_gguf *g, struct gl_vision_config *cfg,
                                      struct gl_err *err);
