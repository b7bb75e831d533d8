// SPDX-License-Identifier: MIT
// model internals shared only by src/model/*.c (not for other modules): the KV cache length is
// advanced by the forward pass once a chunk's K/V rows are stored.
#pragma once

#include "model/model.h"

void gl_kv_cache__set_len(struct gl_kv_cache *kv, int64_t len);

// Validates the structure dims v = {embedding_length, feed_forward_length, block_count,
// head_count, head_count_kv, key_length, value_length, context_length} (shared by the GGUF and HF
// config parsers) and stores them in cfg. GL_E_FORMAT / GL_E_LIMIT / GL_E_UNSUPPORTED naming them.
GL_MUST_USE gl_status gl_model__set_dims(struct gl_model_config *cfg, const uint32_t v[8],
                                         struct gl_err *err);
