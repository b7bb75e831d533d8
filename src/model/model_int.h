// SPDX-License-Identifier: MIT
// model internals shared only by src/model/*.c (not for other modules): the KV cache length is
// advanced by the forward pass once a chunk's K/V rows are stored.
#pragma once

#include "model/model.h"

#include <jansson.h>

void gl_kv_cache__set_len(struct gl_kv_cache *kv, int64_t len);

// The page holding position p of a KV view (the target's cache, the engine's paged pools, the
// drafter's context): an unmapped block is an invariant violation, never a silent read.
static inline uint8_t *gl_kv_view__page(const struct gl_kv_view *v, int64_t p)
{
    GL_ASSERT(p >= 0 && p / v->block_size < v->n_blocks);
    const int32_t pg = v->pages[p / v->block_size];
    GL_ASSERT_MSG(pg >= 0, "kv: position %lld read or written through an unmapped block",
                  (long long)p);
    return v->base + (size_t)pg * v->page_bytes;
}

// Validates the structure dims v = {embedding_length, feed_forward_length, block_count,
// head_count, head_count_kv, key_length, value_length, context_length} (shared by the GGUF and HF
// config parsers) and stores them in cfg. GL_E_FORMAT / GL_E_LIMIT / GL_E_UNSUPPORTED naming them.
GL_MUST_USE gl_status gl_model__set_dims(struct gl_model_config *cfg, const uint32_t v[8],
                                         struct gl_err *err);

// A buffer of n bytes (64-byte aligned) owned by m: freed by gl_model_delete. NULL on OOM.
void *gl_model__own(struct gl_model *m, size_t n);

// HF folders: binds the vision tower (arch doc §6.6 names) when the folder holds its patch
// embedding, checking every tensor's shape against m->vision_cfg; leaves has_vision 0 otherwise.
// GL_E_FORMAT names a missing or misshapen tensor, GL_E_UNSUPPORTED a dtype without kernels.
GL_MUST_USE gl_status gl_model__bind_vision(struct gl_model *m, struct gl_err *err);

// HF folders' JSON files (config.json and the like; model_hf.c, dflash_hf.c): the object in path,
// read whole (at most 4 MiB), duplicate keys refused. NULL with err set, its message prefixed
// "who: path: ": GL_E_IO when the file cannot be opened (then *missing = 1, when missing is not
// NULL) or read, GL_E_FORMAT when it is not one JSON object. The caller owns the result.
json_t *gl_model__load_json(const char *who, const char *path, int *missing, struct gl_err *err);
