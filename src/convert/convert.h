// SPDX-License-Identifier: MIT
// convert: an HF Muse Glimmer checkpoint folder (config.json, tokenizer.model, model.safetensors
// or shards + index; BF16/F16/F32) -> a text GGUF that glint and llama.cpp load, and optionally
// glint's vision GGUF (src/vision/vision_gguf.h) that keeps the patch embedding's temporal axis.
//
// Text GGUF: the tensors, names and shapes of arch doc §3.2 in make-model's order (token_embd,
// output_norm, output, then per layer the 14 blk.N tensors), typed by make-model's recipes
// (gl_make_model_recipe_type: uniform types or llama.cpp's Q4_K_M / Q5_K_M mix; 1-D tensors F32)
// and quantized by src/quant's reference quantizers, with these transforms from HF (the same
// ones glint's HF loader applies at load time, src/model/model.c):
//  * Q and K rows un-permuted per head from HF's rotate-half order to the interleaved order
//    (GGUF row h*D + 2j + t = HF row h*D + t*D/2 + j, §2.3);
//  * the four sandwich norms stored centered (w - 1) in HF get +1 in f32 (§2.2; the final norm
//    is plain);
//  * attn_q_norm = qk_scale_factor (folded form, 3.87) and attn_k_norm = 1, synthesised (§2.4).
// Metadata: the 32 keys of the released file (§3.1): general.{architecture, type, name,
// size_label, quantization_version, file_type}, the 14 muse-glimmer.* keys from config.json
// (sliding_window_pattern as a per-layer bool array), make-model's tokenizer keys for the
// folder's tokenizer.model, tokenizer.ggml.add_sep_token and, when the folder has one,
// tokenizer.chat_template (chat_template.jinja, else tokenizer_config.json's chat_template).
// Tensors are read row by row from the mapped safetensors and written in chunks, so memory stays
// at the writer's chunk buffer plus one row per thread, whatever the model size.
//
// A DFlash assistant folder (config.json model_type "muse_glimmer_assistant"; model/dflash.h)
// becomes llama.cpp's `dflash` GGUF instead (docs/dflash.md): gl_dflash_add_keys' keys (target
// layers stored as ids + 1), the target's vocabulary plus tokenizer.ggml.mask_token_id, and the
// drafter's 3 + 11 per block tensors copied unchanged from their HF names, 2-D ones typed by the
// recipe as make-model types its drafters (so make-model's folder converts to the bytes of its
// own GGUF). Its errors: gl_dflash_hf_config_parse's, the reader's, a missing / mis-shaped tensor
// or an unknown one named with its file, no vocabulary (GL_E_INVAL), --vision-out (GL_E_INVAL).
#pragma once

#include "base/base.h"

struct gl_convert_params {
    // Text type recipe: F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M (case-insensitive);
    // NULL: Q4_K_M. Borrowed.
    const char *type;
    // Vision GGUF path, or NULL for none. Borrowed.
    const char *vision_out;
    // Vision matrices: F32|F16|BF16; NULL: BF16 (the checkpoint's own precision). Borrowed.
    const char *vision_type;
    // general.name; NULL: the folder's base name. Borrowed.
    const char *name;
    // A DFlash assistant folder only: the folder whose tokenizer.model (and chat_template.jinja)
    // give the drafter GGUF its vocabulary (llama.cpp's --target-model-dir); NULL: the assistant
    // folder's own tokenizer.model, else GL_E_INVAL. Borrowed.
    const char *target_dir;
    // Quantization threads; 0: online CPUs (at most 8).
    int n_threads;
};

struct gl_convert_params gl_convert_default_params(void);

// Converts hf_dir into out (replaced; removed again on failure) and, if p->vision_out is set,
// the vision GGUF. Every tensor is checked before anything is written: a missing tensor or one
// whose shape does not match config.json is GL_E_FORMAT naming the HF tensor, its file and the
// expected shape; a dtype other than F32/F16/BF16 is GL_E_UNSUPPORTED naming the tensor (from
// the safetensors reader); a row length that is not a whole number of the chosen type's blocks
// is GL_E_UNSUPPORTED naming the tensor and type. Config errors are gl_model_hf_config_parse's.
GL_MUST_USE gl_status gl_convert(const char *hf_dir, const char *out,
                                 const struct gl_convert_params *p, struct gl_err *err);
