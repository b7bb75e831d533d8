// SPDX-License-Identifier: MIT
// tokenizer internals shared by the two loaders, the encoder and the streaming decoder.
// A loader fills the token table (off/bytes/type), then calls gl_tok_index (byte-string and
// special-name hashes), fills the merge list and calls gl_tok_finish (pair hash + regex).
// Invariant after finish: every byte value has a single-byte token, every merge (l, r) has a
// token whose bytes are bytes(l) ++ bytes(r), and nothing is mutated again (thread-safe reads).
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

#define GL_TOK_MAX_TOKEN_LEN 1024      // bytes; longer tokens are refused by both loaders
#define GL_TOK_MAX_VOCAB     (1 << 22) // ids; keeps every offset and hash slot in 32 bits

// One slot of the merge hash: (left, right) -> priority (index in the merge list) and result.
struct gl_tok_pair {
    uint64_t key; // (uint64_t)left << 32 | right
    int32_t rank; // -1: empty slot
    gl_token merged;
};

// One slot of a byte-string hash: the id, and the hash's high half so that most probes are
// settled without touching the token bytes (a dependent cache miss).
struct gl_tok_slot {
    int32_t id; // -1: empty
    uint32_t tag;
};

struct gl_tokenizer {
    int32_t n_vocab;
    uint32_t *off; // [n_vocab + 1] byte offsets of each token in bytes
    char *bytes;   // concatenated raw token bytes (specials: their names)
    uint8_t *type; // [n_vocab] enum gl_tok_type
    gl_token byte_tok[256];

    struct gl_tok_slot *lookup; // open addressing over non-special token bytes -> id
    uint32_t lookup_mask;
    struct gl_tok_slot *sp_lookup; // open addressing over special names -> id
    uint32_t sp_mask;
    uint8_t sp_first[256];  // 1 if some special name starts with this byte
    uint64_t sp_tail[1024]; // bit (a << 8 | b): a special name of >= 2 bytes ends in a, b
    uint64_t sp_lens[GL_TOK_MAX_TOKEN_LEN / 64 + 1]; // bit n: some special name has n bytes
    int sp_max_len;

    int64_t n_merges;
    gl_token *merges; // [2 * n_merges] left, right in priority order
    struct gl_tok_pair *pairs;
    uint32_t pair_mask;

    gl_token bos, eos, eot;
    int add_bos;
    pcre2_code *re; // o200k split regex, JIT-compiled when possible
};

static inline int gl_tok_is_special_type(uint8_t type)
{
    return type == GL_TOKTYPE_CONTROL || type == GL_TOKTYPE_USER_DEFINED;
}

uint64_t gl_tok_hash(const void *p, size_t n);
// Allocates a zeroed tokenizer with room for n_vocab tokens of total_bytes bytes.
GL_MUST_USE gl_status gl_tok_alloc(struct gl_tokenizer **out, int32_t n_vocab, size_t total_bytes,
                                   struct gl_err *err);
// Builds the byte-string and special-name hashes and byte_tok; refuses duplicate strings and
// missing single-byte tokens. what names the source for messages ("tiktoken", "gguf").
GL_MUST_USE gl_status gl_tok_index(struct gl_tokenizer *t, const char *what, struct gl_err *err);
// Id of the non-special token with exactly these bytes, -1 if none.
gl_token gl_tok_lookup(const struct gl_tokenizer *t, const void *p, size_t n);
// Id of the special token named by these bytes, -1 if none.
gl_token gl_tok_find_special(const struct gl_tokenizer *t, const void *p, size_t n);
// Builds the pair hash from t->merges (first occurrence of a pair wins) and compiles the regex.
GL_MUST_USE gl_status gl_tok_finish(struct gl_tokenizer *t, struct gl_err *err);
// Merge priority and result for (left, right); returns 0 if the pair is not a merge.
int gl_tok_pair_find(const struct gl_tokenizer *t, gl_token left, gl_token right, int32_t *rank,
                     gl_token *merged);
