// SPDX-License-Identifier: MIT
// gguf internals shared by the reader (gguf.c) and the writer (gguf_write.c) only; no other module
// includes this. On-disk facts: magic "GGUF" as bytes 47 47 55 46, scalars little-endian, strings
// are u64 length + bytes (no NUL), arrays are u32 element type + u64 count + packed elements.
#pragma once

#include "gguf/gguf.h"

#include <stddef.h>

#define GL_GGUF__MAGIC             0x46554747u // "GGUF" read as a little-endian u32
#define GL_GGUF__VERSION           3u
#define GL_GGUF__DEFAULT_ALIGNMENT 32u
#define GL_GGUF__ALIGNMENT_KEY     "general.alignment"

// On-disk bytes of one scalar of type t; 0 for STR, ARR and ids outside the enum.
size_t gl_gguf__scalar_size(uint32_t t);
