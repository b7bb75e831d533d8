// SPDX-License-Identifier: MIT
// tokenizer encoder: special-token split -> UTF-8 validity split -> o200k regex pre-tokenization
// -> byte-level BPE per piece. A piece that is a whole token is emitted directly (tiktoken's fast
// path); otherwise the adjacent pair with the lowest merge priority is merged, leftmost first on
// ties, until no pair is a merge. Short pieces use an O(n^2) scan, long ones a lazy min-heap so
// hostile input (a megabyte with no split point) stays O(n log n).
// Invalid UTF-8: maximal runs of bytes that do not start a valid sequence are pieces of their own
// (BPE'd as raw bytes); the valid text between them is split exactly as if the runs were string
// boundaries. decode(encode(x)) == x for every byte string x.
#include "tokenizer/tokenizer_int.h"

#include "base/buf.h"

#include <string.h>

#define SMALL_PIECE 64 // bytes; up to here the quadratic scan beats the heap

struct idvec {
    gl_token *v;
    size_t n, cap;
};

static int vec_push(struct idvec *a, gl_token id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        gl_token *v = gl_realloc(a->v, cap * sizeof *v);
        if (!v)
            return 0;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 1;
}

static int32_t pair_rank(const struct gl_tokenizer *t, gl_token l, gl_token r, gl_token *merged)
{
    int32_t rank;
    return gl_tok_pair_find(t, l, r, &rank, merged) ? rank : INT32_MAX;
}

// Quadratic BPE for n <= SMALL_PIECE parts; tok[i] are the current parts.
static int bpe_small(const struct gl_tokenizer *t, const uint8_t *p, size_t n, struct idvec *out)
{
    gl_token tok[SMALL_PIECE], mrg[SMALL_PIECE];
    int32_t rank[SMALL_PIECE]; // rank[i]: priority of merging parts i and i + 1
    for (size_t i = 0; i < n; i++)
        tok[i] = t->byte_tok[p[i]];
    for (size_t i = 0; i + 1 < n; i++)
        rank[i] = pair_rank(t, tok[i], tok[i + 1], &mrg[i]);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[best])
                best = i;
        if (rank[best] == INT32_MAX)
            break;
        tok[best] = mrg[best];
        memmove(&tok[best + 1], &tok[best + 2], (n - best - 2) * sizeof *tok);
        memmove(&rank[best], &rank[best + 1], (n - best - 2) * sizeof *rank);
        memmove(&mrg[best], &mrg[best + 1], (n - best - 2) * sizeof *mrg);
        n--;
        if (best > 0)
            rank[best - 1] = pair_rank(t, tok[best - 1], tok[best], &mrg[best - 1]);
        if (best + 1 < n)
            rank[best] = pair_rank(t, tok[best], tok[best + 1], &mrg[best]);
    }
    for (size_t i = 0; i < n; i++)
        if (!vec_push(out, tok[i]))
            return 0;
    return 1;
}

// Heap entry: a candidate merge of the part starting at byte pos with its successor. Merge
// priorities are unique per pair, so the entry is still valid iff the current pair at pos has
// the same rank; stale entries are skipped when popped (8 bytes each, at most 3 per input byte).
struct cand {
    int32_t rank;
    int32_t pos;
};

static int cand_less(const struct cand *a, const struct cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct cand *h, size_t *n, struct cand c)
{
    size_t i = (*n)++;
    while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static struct cand heap_pop(struct cand *h, size_t *n)
{
    struct cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c]))
            c++;
        if (!cand_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

static void heap_offer(const struct gl_tokenizer *t, struct cand *h, size_t *nh, int32_t pos,
                       gl_token l, gl_token r)
{
    gl_token merged;
    int32_t rank = pair_rank(t, l, r, &merged);
    if (rank != INT32_MAX)
        heap_push(h, nh, (struct cand){rank, pos});
}

// O(n log n) BPE over a doubly linked list of parts indexed by their first byte.
static int bpe_large(const struct gl_tokenizer *t, const uint8_t *p, size_t n, struct idvec *out)
{
    if (n > INT32_MAX / 4)
        return 0;
    gl_token *tok = gl_malloc(n * sizeof *tok);
    int32_t *next = gl_malloc(n * sizeof *next), *prev = gl_malloc(n * sizeof *prev);
    struct cand *h = gl_malloc(3 * n * sizeof *h); // n - 1 initial + 2 per merge
    int ok = tok && next && prev && h;
    if (ok) {
        size_t nh = 0;
        for (size_t i = 0; i < n; i++) {
            tok[i] = t->byte_tok[p[i]];
            next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
            prev[i] = (int32_t)i - 1;
        }
        for (size_t i = 0; i + 1 < n; i++)
            heap_offer(t, h, &nh, (int32_t)i, tok[i], tok[i + 1]);
        while (nh > 0) {
            struct cand c = heap_pop(h, &nh);
            int32_t j = next[c.pos];
            if (tok[c.pos] < 0 || j < 0)
                continue; // stale: the part was merged into its left neighbour, or is last
            gl_token merged;
            if (pair_rank(t, tok[c.pos], tok[j], &merged) != c.rank)
                continue; // stale: one side was merged since this entry was pushed
            tok[c.pos] = merged;
            tok[j] = -1;
            next[c.pos] = next[j];
            if (next[j] >= 0)
                prev[next[j]] = c.pos;
            if (prev[c.pos] >= 0)
                heap_offer(t, h, &nh, prev[c.pos], tok[prev[c.pos]], merged);
            if (next[c.pos] >= 0)
                heap_offer(t, h, &nh, c.pos, merged, tok[next[c.pos]]);
        }
        for (int32_t i = 0; i >= 0 && ok; i = next[i])
            ok = vec_push(out, tok[i]);
    }
    gl_free(tok);
    gl_free(next);
    gl_free(prev);
    gl_free(h);
    return ok;
}

static int bpe_piece(const struct gl_tokenizer *t, const uint8_t *p, size_t n, struct idvec *out)
{
    if (n == 1)
        return vec_push(out, t->byte_tok[p[0]]);
    if (n <= GL_TOK_MAX_TOKEN_LEN) {
        gl_token id = gl_tok_lookup(t, p, n);
        if (id >= 0)
            return vec_push(out, id);
    }
    return n <= SMALL_PIECE ? bpe_small(t, p, n, out) : bpe_large(t, p, n, out);
}

// Splits valid UTF-8 text with the regex and BPEs each match.
static gl_status encode_valid(const struct gl_tokenizer *t, const uint8_t *s, size_t n,
                              pcre2_match_data *md, struct idvec *out, struct gl_err *err)
{
    size_t off = 0;
    while (off < n) {
        int rc = pcre2_match(t->re, s, n, off, PCRE2_NO_UTF_CHECK, md, NULL);
        size_t a = n, b = n; // no match: the rest is one piece (cannot happen: the 7
        if (rc >= 0) {       // alternatives cover every code point)
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            a = ov[0];
            b = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            return gl_err_set(err, GL_E_INTERNAL, "tokenizer: regex match error %d at byte %zu", rc,
                              off);
        }
        if (a > off && !bpe_piece(t, s + off, a - off, out))
            return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
        if (b == a) // empty match (impossible for this pattern): consume one code point
            b = a < n ? a + gl_utf8_seq(s + a, n - a, NULL) : n;
        if (b > a && !bpe_piece(t, s + a, b - a, out))
            return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
        off = b;
    }
    return GL_OK;
}

static gl_status encode_ordinary(const struct gl_tokenizer *t, const uint8_t *s, size_t n,
                                 pcre2_match_data *md, struct idvec *out, struct gl_err *err)
{
    size_t i = 0;
    while (i < n) {
        size_t a = i, k;
        while (i < n && (k = gl_utf8_seq(s + i, n - i, NULL)) > 0)
            i += k;
        if (i > a) {
            gl_status st = encode_valid(t, s + a, i - a, md, out, err);
            if (st != GL_OK)
                return st;
        }
        a = i;
        while (i < n && gl_utf8_seq(s + i, n - i, NULL) == 0)
            i++;
        if (i > a && !bpe_piece(t, s + a, i - a, out))
            return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
    }
    return GL_OK;
}

// Longest special name starting at s[0]; returns its id and sets *len, or -1.
static gl_token match_special(const struct gl_tokenizer *t, const uint8_t *s, size_t n, size_t *len)
{
    size_t max = n < (size_t)t->sp_max_len ? n : (size_t)t->sp_max_len;
    for (size_t l = max; l > 0; l--) {
        if (!(t->sp_lens[l / 64] >> (l % 64) & 1))
            continue;
        // Cheap reject before hashing: hostile text full of '<' must not cost a hash per length.
        unsigned tail = l >= 2 ? (unsigned)s[l - 2] << 8 | s[l - 1] : 0;
        if (l >= 2 && !(t->sp_tail[tail / 64] >> (tail % 64) & 1))
            continue;
        gl_token id = gl_tok_find_special(t, s, l);
        if (id >= 0) {
            *len = l;
            return id;
        }
    }
    return -1;
}

gl_status gl_tokenizer_encode(const struct gl_tokenizer *t, const char *text, size_t len,
                              int parse_special, int add_bos, gl_token **ids, size_t *n_ids,
                              struct gl_err *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (!text && len > 0)
        return gl_err_set(err, GL_E_INVAL, "tokenizer: NULL text with length %zu", len);
    struct idvec out = {0};
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    gl_status st = GL_OK;
    if (!md || (add_bos && t->bos >= 0 && !vec_push(&out, t->bos)))
        st = gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
    const uint8_t *s = (const uint8_t *)text;
    size_t start = 0, i = 0;
    while (st == GL_OK && parse_special && i < len) {
        size_t sl;
        gl_token id = t->sp_first[s[i]] ? match_special(t, s + i, len - i, &sl) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        st = encode_ordinary(t, s + start, i - start, md, &out, err);
        if (st == GL_OK && !vec_push(&out, id))
            st = gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
        i += sl;
        start = i;
    }
    if (st == GL_OK)
        st = encode_ordinary(t, s + start, len - start, md, &out, err);
    pcre2_match_data_free(md);
    if (st != GL_OK) {
        gl_free(out.v);
        return st;
    }
    *ids = out.v ? out.v : gl_malloc(sizeof(gl_token));
    if (!*ids)
        return gl_err_set(err, GL_E_NOMEM, "tokenizer: out of memory");
    *n_ids = out.n;
    return GL_OK;
}
