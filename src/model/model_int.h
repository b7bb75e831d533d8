// SPDX-License-Identifier: MIT
// model internals shared only by src/model/*.c (not for other modules): the KV cache length is
// advanced by the forward pass once a chunk's K/V rows are stored.
#pragma once

#include "model/model.h"

void gl_kv_cache__set_len(struct gl_kv_cache *kv, int64_t len);
