// SPDX-License-Identifier: MIT
// tokenizer loader for tiktoken ranks files: one "base64(token bytes) SP rank" per line, ranks
// 0..N-1 each exactly once (N = 200000 for l4_200k_base). Token id = rank. The 2,048 Muse Glimmer
// specials follow at N + i (muse-glimmer-arch.md §4; i = 0..2047, reserved names use i).
// Merges are derived as the HF tiktoken converter does: BPE each multi-byte token using only the
// tokens ranked below it; a token that ends as exactly two parts (l, r) gives merge (l, r) with
// priority = its rank. Tokens ending in any other part count are reachable only as whole pieces.
#include "tokenizer/tokenizer_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_FILE_BYTES (1ull << 30)
#define MAX_LINE_BYTES 4096

struct entry {
    uint32_t off, len; // decoded bytes in the scratch buffer
    int64_t line;
};

static const struct {
    int index;
    const char *name;
} NAMED_SPECIALS[] = {
    {0, "<|begin_of_text|>"},
    {1, "<|end_of_text|>"},
    {7, "<|eom|>"},
    {8, "<|eot|>"},
    {18, "<|finetune_right_pad|>"},
    {22, "<|start|>"},
    {23, "<|message|>"},
    {80, "<|image_start|>"},
    {81, "<|image_end|>"},
    {82, "<|vid_start|>"},
    {83, "<|vid_end|>"},
    {87, "<|vid_frame_separator|>"},
    {90, "<|image|>"},
    {91, "<|video|>"},
    {92, "<|patch|>"},
};

static gl_status read_file(const char *path, uint8_t **buf, size_t *size, struct gl_err *err)
{
    *buf = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gl_err_set(err, GL_E_IO, "tiktoken %s: cannot open: %s", path, strerror(errno));
    gl_status st = GL_OK;
    uint8_t *b = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : (size_t)1 << 22;
            uint8_t *nb = gl_realloc(b, cap);
            if (!nb) {
                st = gl_err_set(err, GL_E_NOMEM, "tiktoken %s: out of memory", path);
                break;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n > MAX_FILE_BYTES) {
            st = gl_err_set(err, GL_E_LIMIT, "tiktoken %s: larger than %llu bytes", path,
                            (unsigned long long)MAX_FILE_BYTES);
            break;
        }
        if (got == 0) {
            if (ferror(f))
                st = gl_err_set(err, GL_E_IO, "tiktoken %s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st != GL_OK) {
        gl_free(b);
        return st;
    }
    *buf = b;
    *size = n;
    return GL_OK;
}

// Parses "b64 rank" lines into ent[rank] (decoded bytes appended to dec). Fails on syntax
// errors, duplicate ranks or tokens, and gaps in the rank sequence.
static gl_status parse_lines(const char *path, const uint8_t *s, size_t n, uint8_t *dec,
                             struct entry **ent_out, int32_t *n_ranks, struct gl_err *err)
{
    size_t n_lines = 1;
    for (size_t i = 0; i < n; i++)
        n_lines += s[i] == '\n';
    if (n_lines > GL_TOK_MAX_VOCAB)
        return gl_err_set(err, GL_E_LIMIT, "tiktoken %s: %zu lines exceed %d tokens", path, n_lines,
                          GL_TOK_MAX_VOCAB);
    struct entry *ent = gl_malloc(n_lines * sizeof *ent);
    if (!ent)
        return gl_err_set(err, GL_E_NOMEM, "tiktoken %s: out of memory", path);
    for (size_t i = 0; i < n_lines; i++)
        ent[i].line = -1;
    gl_status st = GL_OK;
    uint32_t o = 0;
    int64_t line = 0, max_rank = -1;
    for (size_t pos = 0; pos < n && st == GL_OK;) {
        line++;
        const uint8_t *nl = memchr(s + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - s) : n, len = end - pos;
        const uint8_t *l = s + pos;
        pos = end + 1;
        if (len > 0 && l[len - 1] == '\r')
            len--;
        if (len == 0)
            continue; // blank lines are skipped, as tiktoken does
        if (len > MAX_LINE_BYTES) {
            st = gl_err_set(err, GL_E_LIMIT, "tiktoken %s:%lld: line is %zu bytes (limit %d)", path,
                            (long long)line, len, MAX_LINE_BYTES);
            break;
        }
        const uint8_t *sp = memchr(l, ' ', len);
        if (!sp || sp == l || sp == l + len - 1) {
            st = gl_err_set(err, GL_E_FORMAT, "tiktoken %s:%lld: expected 'base64 rank'", path,
                            (long long)line);
            break;
        }
        int64_t rank = 0;
        for (const uint8_t *d = sp + 1; d < l + len && st == GL_OK; d++) {
            if (*d < '0' || *d > '9' || rank >= GL_TOK_MAX_VOCAB)
                st = gl_err_set(err, GL_E_FORMAT,
                                "tiktoken %s:%lld: rank '%.*s' is not an integer in 0..%d", path,
                                (long long)line, (int)(l + len - sp - 1), (const char *)sp + 1,
                                GL_TOK_MAX_VOCAB - 1);
            rank = rank * 10 + (*d - '0');
        }
        if (st == GL_OK && (rank >= (int64_t)n_lines || rank >= GL_TOK_MAX_VOCAB))
            st = gl_err_set(err, GL_E_FORMAT,
                            "tiktoken %s:%lld: rank %lld out of range (the file has at most %zu "
                            "tokens; ranks must be 0..N-1)",
                            path, (long long)line, (long long)rank, n_lines);
        if (st == GL_OK && ent[rank].line >= 0)
            st = gl_err_set(err, GL_E_FORMAT, "tiktoken %s:%lld: rank %lld already on line %lld",
                            path, (long long)line, (long long)rank, (long long)ent[rank].line);
        size_t bad;
        long nb = st == GL_OK ? gl_b64_decode(l, (size_t)(sp - l), dec + o, &bad) : 0;
        if (st == GL_OK && nb < 0)
            st = gl_err_set(err, GL_E_FORMAT, "tiktoken %s:%lld: invalid base64 at column %zu",
                            path, (long long)line, bad + 1);
        if (st == GL_OK && nb > GL_TOK_MAX_TOKEN_LEN)
            st = gl_err_set(err, GL_E_LIMIT, "tiktoken %s:%lld: token is %ld bytes (limit %d)",
                            path, (long long)line, nb, GL_TOK_MAX_TOKEN_LEN);
        if (st != GL_OK)
            break;
        ent[rank] = (struct entry){o, (uint32_t)nb, line};
        o += (uint32_t)nb;
        if (rank > max_rank)
            max_rank = rank;
    }
    for (int64_t r = 0; st == GL_OK && r <= max_rank; r++)
        if (ent[r].line < 0)
            st = gl_err_set(err, GL_E_FORMAT,
                            "tiktoken %s: rank %lld is missing (ranks must be 0..%lld, no gaps)",
                            path, (long long)r, (long long)max_rank);
    if (st == GL_OK && max_rank < 0)
        st = gl_err_set(err, GL_E_FORMAT, "tiktoken %s: no tokens", path);
    if (st != GL_OK) {
        gl_free(ent);
        return st;
    }
    *ent_out = ent;
    *n_ranks = (int32_t)(max_rank + 1);
    return GL_OK;
}

static void special_name(int i, char *buf, size_t cap)
{
    for (size_t k = 0; k < sizeof NAMED_SPECIALS / sizeof NAMED_SPECIALS[0]; k++) {
        if (NAMED_SPECIALS[k].index == i) {
            snprintf(buf, cap, "%s", NAMED_SPECIALS[k].name);
            return;
        }
    }
    snprintf(buf, cap, "<|reserved_special_token_%d|>", i);
}

static gl_status build_table(struct gl_tokenizer **out, const char *path, const uint8_t *dec,
                             const struct entry *ent, int32_t n_base, struct gl_err *err)
{
    size_t total = 0;
    char name[64];
    for (int32_t r = 0; r < n_base; r++)
        total += ent[r].len;
    for (int i = 0; i < GL_TOK_N_SPECIAL; i++) {
        special_name(i, name, sizeof name);
        total += strlen(name);
    }
    struct gl_tokenizer *t;
    gl_status st = gl_tok_alloc(&t, n_base + GL_TOK_N_SPECIAL, total, err);
    if (st != GL_OK)
        return st;
    uint32_t o = 0;
    for (int32_t r = 0; r < n_base; r++) {
        t->off[r] = o;
        memcpy(t->bytes + o, dec + ent[r].off, ent[r].len);
        o += ent[r].len;
        t->type[r] = GL_TOKTYPE_NORMAL;
    }
    for (int i = 0; i < GL_TOK_N_SPECIAL; i++) {
        special_name(i, name, sizeof name);
        t->off[n_base + i] = o;
        memcpy(t->bytes + o, name, strlen(name));
        o += (uint32_t)strlen(name);
        t->type[n_base + i] = GL_TOKTYPE_CONTROL;
    }
    t->off[t->n_vocab] = o;
    t->bos = n_base + GL_TOK_BOS - GL_TOK_N_BASE;
    t->eos = n_base + GL_TOK_EOS - GL_TOK_N_BASE;
    t->eot = n_base + GL_TOK_EOT - GL_TOK_N_BASE;
    t->add_bos = 0;
    st = gl_tok_index(t, path, err);
    if (st != GL_OK) {
        gl_tokenizer_free(t);
        return st;
    }
    *out = t;
    return GL_OK;
}

// BPE of token r's bytes with only tokens ranked below r; returns the final part count and the
// first two parts. Parts are byte ranges [start[i], start[i + 1]).
static int split_token(const struct gl_tokenizer *t, gl_token r, gl_token *l, gl_token *rt)
{
    size_t n;
    const char *p = gl_tokenizer_token_bytes(t, r, &n);
    uint32_t start[GL_TOK_MAX_TOKEN_LEN + 1];
    int32_t rank[GL_TOK_MAX_TOKEN_LEN]; // merge rank of parts i and i + 1; INT32_MAX: none
    size_t np = n;
    for (size_t i = 0; i <= n; i++)
        start[i] = (uint32_t)i;
    for (size_t i = 0; i + 1 < np; i++) {
        gl_token id = gl_tok_lookup(t, p + start[i], start[i + 2] - start[i]);
        rank[i] = id >= 0 && id < r ? id : INT32_MAX;
    }
    while (np > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < np; i++)
            if (rank[i] < rank[best])
                best = i;
        if (rank[best] == INT32_MAX)
            break;
        memmove(&start[best + 1], &start[best + 2], (np - best - 1) * sizeof *start);
        memmove(&rank[best], &rank[best + 1], (np - best - 2) * sizeof *rank);
        np--;
        for (size_t i = best ? best - 1 : 0; i <= best && i + 1 < np; i++) {
            gl_token id = gl_tok_lookup(t, p + start[i], start[i + 2] - start[i]);
            rank[i] = id >= 0 && id < r ? id : INT32_MAX;
        }
    }
    if (np == 2) {
        *l = gl_tok_lookup(t, p, start[1]);
        *rt = gl_tok_lookup(t, p + start[1], start[2] - start[1]);
    }
    return (int)np;
}

static gl_status derive_merges(struct gl_tokenizer *t, int32_t n_base, struct gl_err *err)
{
    t->merges = gl_malloc(2 * (size_t)n_base * sizeof *t->merges);
    if (!t->merges)
        return gl_err_set(err, GL_E_NOMEM, "tiktoken: out of memory for merges");
    int64_t n_other = 0;
    for (gl_token r = 0; r < n_base; r++) {
        if (t->off[r + 1] - t->off[r] < 2)
            continue;
        gl_token l = -1, rt = -1;
        if (split_token(t, r, &l, &rt) == 2) {
            GL_ASSERT(l >= 0 && rt >= 0);
            t->merges[2 * t->n_merges] = l;
            t->merges[2 * t->n_merges + 1] = rt;
            t->n_merges++;
        } else {
            n_other++;
        }
    }
    GL_LOGD("tiktoken: %lld merges; %lld multi-byte tokens do not split in two",
            (long long)t->n_merges, (long long)n_other);
    return GL_OK;
}

gl_status gl_tokenizer_load_tiktoken(struct gl_tokenizer **out, const char *path,
                                     struct gl_err *err)
{
    *out = NULL;
    uint8_t *buf, *dec = NULL;
    size_t size;
    struct entry *ent = NULL;
    int32_t n_base = 0;
    struct gl_tokenizer *t = NULL;
    gl_status st = read_file(path, &buf, &size, err);
    if (st != GL_OK)
        return st;
    dec = gl_malloc(size / 4 * 3 + 1); // decoded bytes never exceed 3/4 of the file
    st = dec ? parse_lines(path, buf, size, dec, &ent, &n_base, err)
             : gl_err_set(err, GL_E_NOMEM, "tiktoken %s: out of memory", path);
    if (st == GL_OK)
        st = build_table(&t, path, dec, ent, n_base, err);
    if (st == GL_OK)
        st = derive_merges(t, n_base, err);
    if (st == GL_OK)
        st = gl_tok_finish(t, err);
    gl_free(buf);
    gl_free(dec);
    gl_free(ent);
    if (st != GL_OK) {
        gl_tokenizer_free(t);
        return st;
    }
    *out = t;
    return GL_OK;
}

gl_status gl_tokenizer_load_hf_dir(struct gl_tokenizer **out, const char *dir, struct gl_err *err)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    gl_status st = gl_tokenizer_load_tiktoken(out, p, err);
    if (st == GL_OK)
        (*out)->add_bos = 1; // chat renders carry their own BOS and encode without it
    return st;
}
