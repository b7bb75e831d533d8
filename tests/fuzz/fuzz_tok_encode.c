// SPDX-License-Identifier: MIT
// Fuzz target for the tokenizer encoder and streaming decoder over the real Llama-4 vocabulary.
// Input byte 0 is flags (bit 0 parse_special, bit 1 add_bos, bit 2 single-piece mode); the rest
// is the text. Invariants (tokenizer.h): every id is in the vocabulary, no special appears
// without parse_special, BOS leads iff asked, and the token bytes concatenated -- directly and
// through gl_detok_feed/flush -- are exactly the input (specials decode to their names).
// Single-piece mode maps the text onto bytes that form one pre-tokenizer piece (bit 3 clear:
// lowercase ASCII letters, one regex match; set: bytes that never start UTF-8, one raw piece) and
// compares the ids with tiktoken's own rank BPE (whole piece if it is a token, else repeatedly
// merge the adjacent pair whose concatenation has the lowest rank, leftmost first).
// The streaming decoder must also cut valid UTF-8 text only between code points.
// The vocabulary is loaded once per process from $GLINT_VOCAB or
// ../shared/data/tokenizer/llama4-tokenizer.model (relative to the working directory: the repo
// root under tests/run_all.sh); if absent the target does nothing.
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DETOK_CAP (1024 + 64) // longest token (GL_TOK_MAX_TOKEN_LEN) + held bytes + slack
#define MAX_PIECE 256         // bytes; the reference BPE is O(n^2) hash lookups

// Reference rank table: open addressing over the base tokens' bytes (the tokenizer's own lookup
// is internal, and an independent table keeps the check independent).
static int32_t *rank_slots;
static uint32_t rank_mask;

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

static int32_t rank_of(const struct gl_tokenizer *t, const char *p, size_t n)
{
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & rank_mask;; i = (i + 1) & rank_mask) {
        int32_t id = rank_slots[i];
        size_t m;
        if (id < 0)
            return -1;
        const char *q = gl_tokenizer_token_bytes(t, id, &m);
        if (m == n && memcmp(p, q, n) == 0)
            return id;
    }
}

static void build_ranks(const struct gl_tokenizer *t)
{
    int32_t n_base = gl_tokenizer_n_vocab(t) - GL_TOK_N_SPECIAL;
    uint32_t cap = 1;
    while (cap < 2 * (uint32_t)n_base)
        cap <<= 1;
    rank_mask = cap - 1;
    rank_slots = malloc(cap * sizeof *rank_slots);
    if (!rank_slots)
        abort();
    memset(rank_slots, 0xff, cap * sizeof *rank_slots);
    for (int32_t id = 0; id < n_base; id++) {
        size_t n;
        const char *p = gl_tokenizer_token_bytes(t, id, &n);
        uint32_t i = (uint32_t)hash_bytes(p, n) & rank_mask;
        while (rank_slots[i] >= 0)
            i = (i + 1) & rank_mask;
        rank_slots[i] = id;
    }
}

// tiktoken's byte-pair merge of one piece; writes the ids to out, returns their count.
static size_t reference_bpe(const struct gl_tokenizer *t, const char *p, size_t n, gl_token *out)
{
    int32_t whole = rank_of(t, p, n);
    if (whole >= 0) {
        out[0] = whole;
        return 1;
    }
    size_t start[MAX_PIECE + 1], np = n; // part i is bytes [start[i], start[i + 1])
    for (size_t i = 0; i <= n; i++)
        start[i] = i;
    for (;;) {
        int32_t best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < np; i++) {
            int32_t r = rank_of(t, p + start[i], start[i + 2] - start[i]);
            if (r >= 0 && (best < 0 || r < best)) {
                best = r;
                at = i;
            }
        }
        if (best < 0)
            break;
        memmove(&start[at + 1], &start[at + 2], (np - at - 1) * sizeof *start);
        np--;
    }
    for (size_t i = 0; i < np; i++) {
        out[i] = rank_of(t, p + start[i], start[i + 1] - start[i]);
        if (out[i] < 0)
            abort(); // single bytes are always tokens
    }
    return np;
}

static const struct gl_tokenizer *vocab(void)
{
    static struct gl_tokenizer *tok;
    static int tried;
    if (tried)
        return tok;
    tried = 1;
    const char *env = getenv("GLINT_VOCAB");
    const char *paths[] = {env, "../shared/data/tokenizer/llama4-tokenizer.model",
                           "../../shared/data/tokenizer/llama4-tokenizer.model"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && !tok; i++) {
        FILE *f = paths[i] ? fopen(paths[i], "rb") : NULL;
        if (!f)
            continue;
        fclose(f);
        struct gl_err err = {0};
        if (gl_tokenizer_load_tiktoken(&tok, paths[i], &err) != GL_OK) {
            fprintf(stderr, "fuzz_tok_encode: %s\n", err.msg);
            abort(); // the real vocabulary must load
        }
    }
    if (!tok)
        fprintf(stderr, "fuzz_tok_encode: vocabulary not found (set GLINT_VOCAB); skipping\n");
    else
        build_ranks(tok);
    return tok;
}

// 1 if s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
static int utf8_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (k == 0 || k > n - i)
            return 0;
        if (k > 1)
            c &= 0x7Fu >> k;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            c = c << 6 | (s[i + j] & 0x3Fu);
        }
        static const uint32_t MIN[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (c < MIN[k] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return 0;
        i += k;
    }
    return 1;
}

// Appends n bytes to buf (cap bytes, *len used); aborts on overflow (a broken length bound).
static void append(char *buf, size_t cap, size_t *len, const void *p, size_t n)
{
    if (n > cap - *len)
        abort();
    memcpy(buf + *len, p, n);
    *len += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct gl_tokenizer *t = vocab();
    if (!t || size == 0)
        return 0;
    int parse_special = data[0] & 1, add_bos = data[0] >> 1 & 1, piece = data[0] >> 2 & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char one[MAX_PIECE];
    if (piece) {
        // Lowercase letters; or 0x80..0xC1 and 0xF5..0xFF (continuations and invalid leads).
        len = len < MAX_PIECE ? len : MAX_PIECE;
        for (size_t i = 0; i < len; i++) {
            uint8_t b = data[1 + i];
            one[i] = (char)(data[0] & 8 ? (b % 77 < 66 ? 0x80 + b % 77 : 0xF5 + b % 77 - 66)
                                        : 'a' + b % 26);
        }
        text = one;
    }

    gl_token *ids = NULL;
    size_t n = 0;
    struct gl_err err = {0};
    if (gl_tokenizer_encode(t, text, len, parse_special, add_bos, &ids, &n, &err) != GL_OK)
        abort(); // any byte string encodes (only out-of-memory may fail, not at these sizes)
    if (!ids || n > len + 1 || (len > 0 && n == (size_t)add_bos))
        abort();
    size_t first = 0;
    if (add_bos) {
        if (ids[0] != gl_tokenizer_bos(t))
            abort();
        first = 1;
    }

    // Direct concatenation; every token's bytes are non-empty so the total fits in len + specials.
    size_t cap = len + 64 * n + DETOK_CAP;
    char *cat = malloc(cap), *stream = malloc(cap), *plain = malloc(cap), *skip = malloc(cap);
    if (!cat || !stream || !plain || !skip)
        abort();
    size_t n_cat = 0, n_stream = 0, n_plain = 0, n_skip = 0;
    for (size_t i = first; i < n; i++) {
        size_t tl;
        const char *p = gl_tokenizer_token_bytes(t, ids[i], &tl);
        if (ids[i] < 0 || ids[i] >= gl_tokenizer_n_vocab(t) || !p || tl == 0)
            abort();
        int special = gl_tokenizer_is_special(t, ids[i]);
        if (special && !parse_special)
            abort();
        append(cat, cap, &n_cat, p, tl);
        if (!special)
            append(plain, cap, &n_plain, p, tl);
    }
    if (n_cat != len || memcmp(cat, text, len) != 0)
        abort();

    // Streaming, with and without specials: the same bytes once flushed.
    // Valid text: every chunk released before the flush is valid on its own.
    struct gl_detok d = {0}, ds = {0};
    char chunk[DETOK_CAP];
    int valid = utf8_valid((const uint8_t *)text, len);
    for (size_t i = first; i < n; i++) {
        int w = gl_detok_feed(&d, t, ids[i], 0, chunk, sizeof chunk);
        if (w < 0 || d.n_pending < 0 || d.n_pending > 3 ||
            (valid && !utf8_valid((const uint8_t *)chunk, (size_t)w)))
            abort();
        append(stream, cap, &n_stream, chunk, (size_t)w);
        w = gl_detok_feed(&ds, t, ids[i], 1, chunk, sizeof chunk);
        if (w < 0 || (valid && !utf8_valid((const uint8_t *)chunk, (size_t)w)))
            abort();
        append(skip, cap, &n_skip, chunk, (size_t)w);
    }
    if (valid && d.n_pending != 0)
        abort(); // valid text ends on a code point: nothing may stay held
    int w = gl_detok_flush(&d, chunk, sizeof chunk);
    if (w < 0 || d.n_pending != 0)
        abort();
    append(stream, cap, &n_stream, chunk, (size_t)w);
    w = gl_detok_flush(&ds, chunk, sizeof chunk);
    if (w < 0)
        abort();
    append(skip, cap, &n_skip, chunk, (size_t)w);
    if (n_stream != len || memcmp(stream, text, len) != 0)
        abort();
    if (n_skip != n_plain || memcmp(skip, plain, n_plain) != 0)
        abort();

    if (piece && len > 0) {
        gl_token ref[MAX_PIECE];
        size_t nr = reference_bpe(t, text, len, ref);
        if (nr != n - first || memcmp(ref, ids + first, nr * sizeof *ref) != 0) {
            fprintf(stderr, "fuzz_tok_encode: %zu ids differ from tiktoken's BPE (%zu ids)\n",
                    n - first, nr);
            abort();
        }
    }

    // Determinism: a second encode gives the same ids.
    gl_token *ids2 = NULL;
    size_t n2 = 0;
    if (gl_tokenizer_encode(t, text, len, parse_special, add_bos, &ids2, &n2, &err) != GL_OK ||
        n2 != n || memcmp(ids, ids2, n * sizeof *ids) != 0)
        abort();
    gl_free(ids2);
    gl_free(ids);
    free(cat);
    free(stream);
    free(plain);
    free(skip);
    return 0;
}
