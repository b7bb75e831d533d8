// SPDX-License-Identifier: MIT
// api_int: helpers shared by the api module's files (not for other modules).
#pragma once

#include "api/api.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

// prefix + 24 hex digits from a process-wide counter mixed with the clock (unique per process
// run, not secret).
void gl_api_new_id(char *out, size_t cap, const char *prefix);
// Text of ids (complete UTF-8; specials dropped when skip_special). *text gl_malloc'ed and
// NUL-terminated. Returns 0, or -1 when out of memory.
int gl_api_detok(const struct gl_tokenizer *t, const int32_t *ids, int32_t n, int skip_special,
                 char **text, size_t *len);
// Parses v as a list of at most cap token ids in [0, n_vocab) into *out (gl_malloc'ed, *n of
// them); errors name the field k and the index.
gl_status gl_api_get_ids(json_t *v, const char *k, int32_t n_vocab, int32_t cap, int32_t **out,
                         int32_t *n, struct gl_api_error *e);
// A JSON string of arbitrary bytes: invalid UTF-8 becomes U+FFFD (jansson refuses it). NULL
// only when out of memory.
json_t *gl_api_jstr(const char *p, size_t n);
// The id of the one token that encodes text exactly (no specials, no BOS), or -1.
int32_t gl_api_single_token(const struct gl_tokenizer *t, const char *text);
// The context-length check that needs no tokenizing: GL_OK when len bytes of text may fit
// max_model_len tokens, else a 400 naming param (each token spells at most max_token_bytes of
// the text; x2 for normalisers that drop bytes: api.h). Generation prompts and /tokenize share it.
gl_status gl_api_check_text_len(const struct gl_api_config *c, size_t len, const char *param,
                                struct gl_api_error *e);
