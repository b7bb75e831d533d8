// SPDX-License-Identifier: MIT
// tokenizer vocabulary tables: the token byte table, the byte-string -> id hash (whole-piece fast
// path and merge results), the special-name hash, the merge-pair hash and the compiled split
// regex. All hashes are open addressing with linear probing at load factor <= 1/2, built once
// at load and read-only afterwards. Regex: o200k / Llama-4 pattern, muse-glimmer-arch.md §4.
#include "tokenizer/tokenizer_int.h"

#include <string.h>

// The 7 alternatives of the o200k split pattern, as in the HF converter (with \p{M} and the
// case-insensitive contraction group; PCRE2 folds 's' with U+017F like Rust regex does).
static const char SPLIT_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

uint64_t gl_tok_hash(const void *p, size_t n)
{
    // Multiply-xorshift over 8-byte words: tokens are short, so speed matters more than quality.
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

static uint64_t hash_pair(uint64_t key)
{
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15ull;
    key ^= key >> 29;
    return key;
}

// Smallest power of two >= 2 * n (load factor <= 1/2), at least 16.
static uint32_t table_cap(uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    return (uint32_t)cap;
}

gl_status gl_tok_alloc(struct gl_tokenizer **out, int32_t n_vocab, size_t total_bytes,
                       struct gl_err *err)
{
    *out = NULL;
    if (n_vocab <= 0 || n_vocab > GL_TOK_MAX_VOCAB)
        return gl_err_set(err, GL_E_LIMIT, "tokenizer: vocabulary size %d outside 1..%d",
                          (int)n_vocab, GL_TOK_MAX_VOCAB);
    if (total_bytes > UINT32_MAX)
        return gl_err_set(err, GL_E_LIMIT, "tokenizer: %zu token bytes exceed 4 GiB", total_bytes);
    struct gl_tokenizer *t = gl_calloc(1, sizeof *t);
    if (!t)
        return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
    t->n_vocab = n_vocab;
    t->off = gl_calloc((size_t)n_vocab + 1, sizeof *t->off);
    t->bytes = gl_malloc(total_bytes ? total_bytes : 1);
    t->type = gl_calloc((size_t)n_vocab, 1);
    t->bos = t->eos = t->eot = -1;
    if (!t->off || !t->bytes || !t->type) {
        gl_tokenizer_free(t);
        return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory for %d tokens", (int)n_vocab);
    }
    *out = t;
    return GL_OK;
}

void gl_tokenizer_free(struct gl_tokenizer *t)
{
    if (!t)
        return;
    gl_free(t->off);
    gl_free(t->bytes);
    gl_free(t->type);
    gl_free(t->lookup);
    gl_free(t->sp_lookup);
    gl_free(t->merges);
    gl_free(t->pairs);
    if (t->re)
        pcre2_code_free(t->re);
    gl_free(t);
}

static const char *tok_ptr(const struct gl_tokenizer *t, gl_token id, size_t *len)
{
    *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

// Inserts id into a table keyed by the token's bytes; returns the id already there with the
// same bytes, or -1 after inserting.
static int32_t table_insert(const struct gl_tokenizer *t, struct gl_tok_slot *slots, uint32_t mask,
                            gl_token id)
{
    size_t n;
    const char *p = tok_ptr(t, id, &n);
    uint64_t h = gl_tok_hash(p, n);
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (slots[i].id < 0) {
            slots[i] = (struct gl_tok_slot){id, (uint32_t)(h >> 32)};
            return -1;
        }
        size_t m;
        const char *q = tok_ptr(t, slots[i].id, &m);
        if (slots[i].tag == (uint32_t)(h >> 32) && m == n && !memcmp(p, q, n))
            return slots[i].id;
    }
}

static int32_t table_find(const struct gl_tokenizer *t, const struct gl_tok_slot *slots,
                          uint32_t mask, const void *p, size_t n)
{
    if (!slots)
        return -1;
    uint64_t h = gl_tok_hash(p, n);
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (slots[i].id < 0)
            return -1;
        if (slots[i].tag != (uint32_t)(h >> 32))
            continue;
        size_t m;
        const char *q = tok_ptr(t, slots[i].id, &m);
        if (m == n && !memcmp(p, q, n))
            return slots[i].id;
    }
}

gl_token gl_tok_lookup(const struct gl_tokenizer *t, const void *p, size_t n)
{
    return table_find(t, t->lookup, t->lookup_mask, p, n);
}

static gl_status index_specials(struct gl_tokenizer *t, int32_t n_special, const char *what,
                                struct gl_err *err)
{
    uint32_t cap = table_cap((uint64_t)n_special);
    t->sp_mask = cap - 1;
    t->sp_lookup = gl_malloc((size_t)cap * sizeof *t->sp_lookup);
    if (!t->sp_lookup)
        return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
    memset(t->sp_lookup, 0xff, (size_t)cap * sizeof *t->sp_lookup); // id -1: empty
    for (gl_token id = 0; id < t->n_vocab; id++) {
        if (!gl_tok_is_special_type(t->type[id]))
            continue;
        size_t n;
        const char *p = tok_ptr(t, id, &n);
        if (n == 0)
            return gl_err_set(err, GL_E_FORMAT, "%s: special token %d has an empty name", what,
                              (int)id);
        int32_t dup = table_insert(t, t->sp_lookup, t->sp_mask, id);
        if (dup >= 0)
            return gl_err_set(err, GL_E_FORMAT, "%s: special tokens %d and %d have the same name",
                              what, (int)dup, (int)id);
        t->sp_first[(uint8_t)p[0]] = 1;
        if (n >= 2) {
            unsigned tail = (unsigned)(uint8_t)p[n - 2] << 8 | (uint8_t)p[n - 1];
            t->sp_tail[tail / 64] |= 1ull << (tail % 64);
        }
        t->sp_lens[n / 64] |= 1ull << (n % 64);
        if ((int)n > t->sp_max_len)
            t->sp_max_len = (int)n;
    }
    return GL_OK;
}

gl_status gl_tok_index(struct gl_tokenizer *t, const char *what, struct gl_err *err)
{
    int32_t n_special = 0;
    for (gl_token id = 0; id < t->n_vocab; id++) {
        GL_ASSERT(t->off[id + 1] >= t->off[id]);
        if (t->off[id + 1] - t->off[id] > GL_TOK_MAX_TOKEN_LEN)
            return gl_err_set(err, GL_E_LIMIT, "%s: token %d is %u bytes long (limit %d)", what,
                              (int)id, t->off[id + 1] - t->off[id], GL_TOK_MAX_TOKEN_LEN);
        n_special += gl_tok_is_special_type(t->type[id]);
    }
    uint32_t cap = table_cap((uint64_t)(t->n_vocab - n_special));
    t->lookup_mask = cap - 1;
    t->lookup = gl_malloc((size_t)cap * sizeof *t->lookup);
    if (!t->lookup)
        return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
    memset(t->lookup, 0xff, (size_t)cap * sizeof *t->lookup); // id -1: empty
    for (int i = 0; i < 256; i++)
        t->byte_tok[i] = -1;
    for (gl_token id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->type[id];
        if (gl_tok_is_special_type(ty) || ty == GL_TOKTYPE_UNUSED)
            continue;
        size_t n;
        const char *p = tok_ptr(t, id, &n);
        if (n == 0)
            return gl_err_set(err, GL_E_FORMAT, "%s: token %d has no bytes", what, (int)id);
        int32_t dup = table_insert(t, t->lookup, t->lookup_mask, id);
        if (dup >= 0)
            return gl_err_set(err, GL_E_FORMAT, "%s: tokens %d and %d have the same bytes", what,
                              (int)dup, (int)id);
        if (n == 1)
            t->byte_tok[(uint8_t)p[0]] = id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_tok[b] < 0)
            return gl_err_set(err, GL_E_FORMAT,
                              "%s: no token for byte 0x%02x (byte-level BPE needs all 256)", what,
                              b);
    return index_specials(t, n_special, what, err);
}

static struct gl_tok_pair *pair_slot(const struct gl_tokenizer *t, uint64_t key)
{
    for (uint32_t i = (uint32_t)hash_pair(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        struct gl_tok_pair *s = &t->pairs[i];
        if (s->rank < 0 || s->key == key)
            return s;
    }
}

int gl_tok_pair_find(const struct gl_tokenizer *t, gl_token left, gl_token right, int32_t *rank,
                     gl_token *merged)
{
    const struct gl_tok_pair *s = pair_slot(t, (uint64_t)(uint32_t)left << 32 | (uint32_t)right);
    if (s->rank < 0)
        return 0;
    *rank = s->rank;
    *merged = s->merged;
    return 1;
}

static gl_status compile_regex(struct gl_tokenizer *t, struct gl_err *err)
{
    int code;
    PCRE2_SIZE at;
    t->re = pcre2_compile((PCRE2_SPTR)SPLIT_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                          &code, &at, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return gl_err_set(err, GL_E_INTERNAL, "tokenizer: split regex does not compile at %zu: %s",
                          (size_t)at, (const char *)msg);
    }
    // JIT is an optimisation: the interpreter gives the same matches if it is unavailable.
    if (pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) != 0)
        GL_LOGW("tokenizer: PCRE2 JIT unavailable, using the interpreter");
    return GL_OK;
}

gl_status gl_tok_finish(struct gl_tokenizer *t, struct gl_err *err)
{
    if (t->n_merges > INT32_MAX)
        return gl_err_set(err, GL_E_LIMIT, "tokenizer: %lld merges exceed the limit",
                          (long long)t->n_merges);
    uint32_t cap = table_cap((uint64_t)t->n_merges);
    t->pair_mask = cap - 1;
    t->pairs = gl_malloc((size_t)cap * sizeof *t->pairs);
    if (!t->pairs)
        return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory for %lld merges",
                          (long long)t->n_merges);
    for (uint32_t i = 0; i < cap; i++)
        t->pairs[i].rank = -1;
    char buf[2 * GL_TOK_MAX_TOKEN_LEN];
    for (int64_t m = 0; m < t->n_merges; m++) {
        gl_token l = t->merges[2 * m], r = t->merges[2 * m + 1];
        struct gl_tok_pair *s = pair_slot(t, (uint64_t)(uint32_t)l << 32 | (uint32_t)r);
        if (s->rank >= 0)
            continue; // a repeated merge keeps its first (highest) priority
        size_t nl, nr;
        const char *pl = tok_ptr(t, l, &nl), *pr = tok_ptr(t, r, &nr);
        memcpy(buf, pl, nl);
        memcpy(buf + nl, pr, nr);
        gl_token merged = gl_tok_lookup(t, buf, nl + nr);
        GL_ASSERT_MSG(merged >= 0, "merge %lld has no result token (loader must validate)",
                      (long long)m);
        s->key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
        s->rank = (int32_t)m;
        s->merged = merged;
    }
    return compile_regex(t, err);
}

// ---- public accessors ----

int32_t gl_tokenizer_n_vocab(const struct gl_tokenizer *t)
{
    return t->n_vocab;
}

gl_token gl_tokenizer_bos(const struct gl_tokenizer *t)
{
    return t->bos;
}

gl_token gl_tokenizer_eos(const struct gl_tokenizer *t)
{
    return t->eos;
}

gl_token gl_tokenizer_eot(const struct gl_tokenizer *t)
{
    return t->eot;
}

int gl_tokenizer_add_bos(const struct gl_tokenizer *t)
{
    return t->add_bos;
}

const char *gl_tokenizer_token_bytes(const struct gl_tokenizer *t, gl_token id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return NULL;
    }
    return tok_ptr(t, id, len);
}

enum gl_tok_type gl_tokenizer_token_type(const struct gl_tokenizer *t, gl_token id)
{
    if (id < 0 || id >= t->n_vocab)
        return GL_TOKTYPE_UNKNOWN;
    return (enum gl_tok_type)t->type[id];
}

int gl_tokenizer_is_special(const struct gl_tokenizer *t, gl_token id)
{
    return id >= 0 && id < t->n_vocab && gl_tok_is_special_type(t->type[id]);
}

gl_token gl_tok_find_special(const struct gl_tokenizer *t, const void *p, size_t n)
{
    return table_find(t, t->sp_lookup, t->sp_mask, p, n);
}

gl_token gl_tokenizer_find_special(const struct gl_tokenizer *t, const char *name)
{
    return gl_tok_find_special(t, name, strlen(name));
}

int64_t gl_tokenizer_n_merges(const struct gl_tokenizer *t)
{
    return t->n_merges;
}

void gl_tokenizer_merge_at(const struct gl_tokenizer *t, int64_t i, gl_token *left, gl_token *right)
{
    GL_ASSERT(i >= 0 && i < t->n_merges);
    *left = t->merges[2 * i];
    *right = t->merges[2 * i + 1];
}
