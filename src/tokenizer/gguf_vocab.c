// SPDX-License-Identifier: MIT
// tokenizer loader for GGUF metadata (llama.cpp "gpt2" byte-level BPE layout): tokens are GPT-2
// byte-to-unicode strings (each raw byte is one code point: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order); control and user-defined tokens
// (token_type 3, 4) are literal names. merges are "A B" in priority order. Every value is checked:
// array types and lengths, id ranges, and that both merge parts and their concatenation exist.
// tokenizer.ggml.pre must be "llama4" or "gpt-4o" (the o200k split); anything else is refused,
// because a different pre-tokenizer would silently produce different ids.
#include "tokenizer/tokenizer_int.h"

#include <string.h>

// Inverse of the GPT-2 byte-to-unicode map: code point -> byte, -1 if not a byte symbol.
static void build_unicode_to_byte(int16_t map[324])
{
    for (int i = 0; i < 324; i++)
        map[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        map[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

// Decodes one GPT-2 encoded string into raw bytes; returns the byte count or -1 (*bad_cp set).
static long decode_symbols(const int16_t map[324], const char *s, size_t n, uint8_t *dst,
                           size_t cap, uint32_t *bad_cp)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if (c >= 0xC2 && c <= 0xDF && i + 1 < n && ((uint8_t)s[i + 1] & 0xC0) == 0x80) {
            cp = (uint32_t)(c & 0x1F) << 6 | ((uint8_t)s[i + 1] & 0x3F);
            i += 2;
        } else {
            *bad_cp = c >= 0xE0 ? 0x800 : c; // anything beyond 2 bytes is >= U+0800: no byte
            return -1;
        }
        if (cp >= 324 || map[cp] < 0) {
            *bad_cp = cp;
            return -1;
        }
        if (o == cap) {
            *bad_cp = UINT32_MAX;
            return -1;
        }
        dst[o++] = (uint8_t)map[cp];
    }
    return (long)o;
}

static gl_status find_array(const struct gl_gguf *g, const char *key, int want_str,
                            const struct gl_gguf_kv **out, struct gl_err *err)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    if (!kv)
        return gl_err_set(err, GL_E_FORMAT, "gguf tokenizer: missing key %s", key);
    int ok = kv->type == GL_GGUF_ARR;
    if (ok && want_str)
        ok = kv->v.arr.type == GL_GGUF_STR;
    if (ok && !want_str)
        ok = kv->v.arr.type <= GL_GGUF_I32 || kv->v.arr.type == GL_GGUF_U64 ||
             kv->v.arr.type == GL_GGUF_I64;
    if (!ok)
        return gl_err_set(
            err, GL_E_FORMAT, "gguf tokenizer: %s (at byte %llu) is %s%s, expected an array of %s",
            key, (unsigned long long)kv->file_offset, gl_gguf_vtype_name(kv->type),
            kv->type == GL_GGUF_ARR ? " of another type" : "", want_str ? "strings" : "integers");
    *out = kv;
    return GL_OK;
}

static gl_status check_strings(const struct gl_gguf *g, struct gl_err *err)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, "tokenizer.ggml.model");
    if (!kv || kv->type != GL_GGUF_STR)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "gguf tokenizer: tokenizer.ggml.model is %s (need the string \"gpt2\")",
                          kv ? gl_gguf_vtype_name(kv->type) : "missing");
    if (!gl_gguf_str_eq(kv->v.str, "gpt2"))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "gguf tokenizer: tokenizer.ggml.model \"%.*s\" is not supported (only "
                          "\"gpt2\" byte-level BPE)",
                          (int)(kv->v.str.len > 64 ? 64 : kv->v.str.len), kv->v.str.ptr);
    kv = gl_gguf_find_kv(g, "tokenizer.ggml.pre");
    if (!kv || kv->type != GL_GGUF_STR)
        return gl_err_set(
            err, GL_E_UNSUPPORTED,
            "gguf tokenizer: tokenizer.ggml.pre is %s (need \"llama4\" or \"gpt-4o\")",
            kv ? gl_gguf_vtype_name(kv->type) : "missing");
    if (!gl_gguf_str_eq(kv->v.str, "llama4") && !gl_gguf_str_eq(kv->v.str, "gpt-4o"))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "gguf tokenizer: pre-tokenizer \"%.*s\" is not supported (only the o200k "
                          "split: \"llama4\", \"gpt-4o\")",
                          (int)(kv->v.str.len > 64 ? 64 : kv->v.str.len), kv->v.str.ptr);
    return GL_OK;
}

static gl_status fill_tokens(struct gl_tokenizer *t, const struct gl_gguf_kv *toks,
                             const struct gl_gguf_kv *types, const int16_t map[324],
                             struct gl_err *err)
{
    uint32_t o = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        int64_t ty = gl_gguf_arr_get_int(types, (uint64_t)id);
        if (ty < GL_TOKTYPE_NORMAL || ty > GL_TOKTYPE_BYTE)
            return gl_err_set(err, GL_E_FORMAT,
                              "gguf tokenizer: tokenizer.ggml.token_type[%d] = %lld (valid 1..6)",
                              (int)id, (long long)ty);
        t->type[id] = (uint8_t)ty;
        struct gl_gguf_str s = toks->v.arr.strs[id];
        t->off[id] = o;
        if (gl_tok_is_special_type((uint8_t)ty)) {
            if (s.len > GL_TOK_MAX_TOKEN_LEN)
                return gl_err_set(err, GL_E_LIMIT, "gguf tokenizer: token %d is %llu bytes",
                                  (int)id, (unsigned long long)s.len);
            memcpy(t->bytes + o, s.ptr, s.len);
            o += (uint32_t)s.len;
            continue;
        }
        uint32_t bad;
        long n =
            decode_symbols(map, s.ptr, s.len, (uint8_t *)t->bytes + o, GL_TOK_MAX_TOKEN_LEN, &bad);
        if (n < 0 && bad == UINT32_MAX)
            return gl_err_set(err, GL_E_LIMIT, "gguf tokenizer: token %d longer than %d bytes",
                              (int)id, GL_TOK_MAX_TOKEN_LEN);
        if (n < 0)
            return gl_err_set(err, GL_E_FORMAT,
                              "gguf tokenizer: token %d has U+%04X, not a GPT-2 byte symbol",
                              (int)id, (unsigned)bad);
        o += (uint32_t)n;
    }
    t->off[t->n_vocab] = o;
    return GL_OK;
}

static gl_status fill_merges(struct gl_tokenizer *t, const struct gl_gguf_kv *merges,
                             const int16_t map[324], struct gl_err *err)
{
    t->merges = gl_malloc(2 * (merges->v.arr.n ? merges->v.arr.n : 1) * sizeof *t->merges);
    if (!t->merges)
        return gl_err_set(err, GL_E_NOMEM, "gguf tokenizer: out of memory for merges");
    uint8_t buf[2 * GL_TOK_MAX_TOKEN_LEN];
    for (uint64_t m = 0; m < merges->v.arr.n; m++) {
        struct gl_gguf_str s = merges->v.arr.strs[m];
        const char *sp = s.len ? memchr(s.ptr, ' ', s.len) : NULL;
        if (!sp || memchr(sp + 1, ' ', s.len - (size_t)(sp + 1 - s.ptr)))
            return gl_err_set(err, GL_E_FORMAT,
                              "gguf tokenizer: merge %llu is not two symbols separated by one "
                              "space",
                              (unsigned long long)m);
        uint32_t bad;
        long nl = decode_symbols(map, s.ptr, (size_t)(sp - s.ptr), buf, GL_TOK_MAX_TOKEN_LEN, &bad);
        long nr = nl < 0 ? -1
                         : decode_symbols(map, sp + 1, s.len - (size_t)(sp + 1 - s.ptr), buf + nl,
                                          GL_TOK_MAX_TOKEN_LEN, &bad);
        gl_token l = nl > 0 ? gl_tok_lookup(t, buf, (size_t)nl) : -1;
        gl_token r = nr > 0 ? gl_tok_lookup(t, buf + nl, (size_t)nr) : -1;
        gl_token lr = l >= 0 && r >= 0 ? gl_tok_lookup(t, buf, (size_t)(nl + nr)) : -1;
        if (l < 0 || r < 0 || lr < 0)
            return gl_err_set(err, GL_E_FORMAT,
                              "gguf tokenizer: merge %llu (\"%.*s\"): %s is not a token",
                              (unsigned long long)m, (int)(s.len > 80 ? 80 : s.len), s.ptr,
                              l < 0   ? "the left part"
                              : r < 0 ? "the right part"
                                      : "the concatenation");
        t->merges[2 * m] = l;
        t->merges[2 * m + 1] = r;
    }
    t->n_merges = (int64_t)merges->v.arr.n;
    return GL_OK;
}

static gl_status get_id(const struct gl_gguf *g, const char *key, int optional, int32_t n_vocab,
                        gl_token *out, struct gl_err *err)
{
    if (optional && !gl_gguf_find_kv(g, key))
        return GL_OK;
    uint32_t v;
    gl_status st = gl_gguf_get_u32(g, key, &v, err);
    if (st != GL_OK)
        return st;
    if (v >= (uint32_t)n_vocab)
        return gl_err_set(err, GL_E_FORMAT, "gguf tokenizer: %s = %u is not below n_vocab %d", key,
                          v, (int)n_vocab);
    *out = (gl_token)v;
    return GL_OK;
}

static gl_status load_ids(struct gl_tokenizer *t, const struct gl_gguf *g, struct gl_err *err)
{
    gl_status st = get_id(g, "tokenizer.ggml.bos_token_id", 0, t->n_vocab, &t->bos, err);
    if (st == GL_OK)
        st = get_id(g, "tokenizer.ggml.eos_token_id", 0, t->n_vocab, &t->eos, err);
    if (st == GL_OK)
        st = get_id(g, "tokenizer.ggml.eot_token_id", 1, t->n_vocab, &t->eot, err);
    if (st == GL_OK && gl_gguf_find_kv(g, "tokenizer.ggml.add_bos_token"))
        st = gl_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err);
    return st;
}

gl_status gl_tokenizer_load_gguf(struct gl_tokenizer **out, const struct gl_gguf *g,
                                 struct gl_err *err)
{
    *out = NULL;
    const struct gl_gguf_kv *toks, *types, *merges;
    gl_status st = check_strings(g, err);
    if (st == GL_OK)
        st = find_array(g, "tokenizer.ggml.tokens", 1, &toks, err);
    if (st == GL_OK)
        st = find_array(g, "tokenizer.ggml.token_type", 0, &types, err);
    if (st == GL_OK)
        st = find_array(g, "tokenizer.ggml.merges", 1, &merges, err);
    if (st != GL_OK)
        return st;
    if (toks->v.arr.n > GL_TOK_MAX_VOCAB || types->v.arr.n != toks->v.arr.n)
        return gl_err_set(err, GL_E_FORMAT,
                          "gguf tokenizer: %llu tokens and %llu token types (must be equal and at "
                          "most %d)",
                          (unsigned long long)toks->v.arr.n, (unsigned long long)types->v.arr.n,
                          GL_TOK_MAX_VOCAB);
    if (merges->v.arr.n > INT32_MAX)
        return gl_err_set(err, GL_E_LIMIT, "gguf tokenizer: %llu merges",
                          (unsigned long long)merges->v.arr.n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < toks->v.arr.n; i++)
        total += toks->v.arr.strs[i].len; // decoding never grows a token
    struct gl_tokenizer *t;
    st = gl_tok_alloc(&t, (int32_t)toks->v.arr.n, (size_t)total, err);
    if (st != GL_OK)
        return st;
    int16_t map[324];
    build_unicode_to_byte(map);
    st = fill_tokens(t, toks, types, map, err);
    if (st == GL_OK)
        st = gl_tok_index(t, "gguf tokenizer", err);
    if (st == GL_OK)
        st = fill_merges(t, merges, map, err);
    if (st == GL_OK)
        st = load_ids(t, g, err);
    if (st == GL_OK)
        st = gl_tok_finish(t, err);
    if (st != GL_OK) {
        gl_tokenizer_free(t);
        return st;
    }
    *out = t;
    return GL_OK;
}
