// SPDX-License-Identifier: MIT
// mask: the vocabulary index (token bytes, byte tries in depth-first order, the plain-string
// token classes) and the token mask of a match state: trie walk with one state copy per depth,
// the string fast paths, a per-grammar LRU cache of masks keyed by the full match state, and one
// of the quote-free part of string-body masks keyed by the string frame alone.
// Invariant: a token's bit is set iff its bytes, fed one by one to a copy of the state, are all
// accepted (gl_mask_fill_ref is that definition, and the tests compare the two), or the state
// expects it as a GN_TOKEN. Special and empty tokens are never byte-matched.
#include "grammar/mask.h"

#include <stdlib.h>
#include <string.h>

// Plain tokens longer than this many code points are walked instead (bounds the class memory).
#define GL_PLAIN_MAX_CHARS 256
// Tokens longer than this are never allowed (depth is 16-bit; real vocabularies stay < 200).
#define GL_TOKEN_MAX_BYTES 4096
// Cached masks with at most this many allowed tokens are stored as an id list.
#define GL_MASK_SPARSE_MAX 2048

// One trie node. Nodes are in depth-first preorder, so node i's subtree is [i, next) and the
// tokens ending in that subtree are ids[tok(i) .. tok(next)). The tokens ending exactly at i are
// ids[tok(i) .. tok(i + 1)) (a sentinel node n_nodes closes the last range).
struct gl_tnode {
    uint32_t next;  // index past this node's subtree
    uint32_t tok;   // first index into ids of the tokens ending here or below
    uint16_t depth; // bytes from the root (root 0)
    uint8_t byte;   // edge byte into this node
    uint8_t plain;  // max code points of the subtree's token suffixes after this node when they
                    // are all plain (see plain_chars), else GL_SUB_MIXED
};
#define GL_SUB_MIXED 255

struct gl_trie {
    struct gl_tnode *nodes; // n_nodes + 1 (sentinel)
    uint32_t n_nodes;
    int32_t *ids; // token ids in trie order
    uint32_t n_ids;
    int32_t max_depth;
};

struct gl_gvocab {
    int32_t n_vocab;
    size_t words; // mask words
    uint8_t *blob;
    uint32_t *off;       // token i bytes: blob[off[i] .. off[i + 1])
    uint32_t *excluded;  // bitset: special or empty, never byte-matched
    struct gl_trie full; // every byte-matchable token
    struct gl_trie slow; // the byte-matchable tokens that are not plain (walked on the fast path)
    struct gl_trie strq; // slow minus the tokens whose first non-plain byte is a control byte
    struct gl_trie noq;  // byte-matchable tokens without a '"' byte (never leave a string body)
    struct gl_trie quot; // byte-matchable tokens with a '"' byte
    struct gl_trie slnq; // slow tokens without a '"' byte
    uint32_t *plain;     // (max_plain + 1) bitsets: plain[k] = plain tokens of 1..k code points
    int32_t max_plain;
};

// A cached mask: the allowed ids when there are few (most states outside strings allow a few
// hundred tokens: ~1 KB instead of 25 KB), else the bitset.
struct gl_mentry {
    uint64_t hash;
    uint64_t stamp; // LRU clock value of the last use
    const struct gl_gvocab *v;
    struct gl_mstate *st;
    uint32_t *data; // n_ids token ids, or v->words bitset words when n_ids < 0
    int32_t n_ids;
    size_t cap_data; // uint32 units allocated
};

// Quote-free part of the mask of a string-body state, keyed by the string frame's value
// (gl_mstate_string_key): regex-constrained strings (formats, patterns) walk most of the trie
// on every mask, yet their frames repeat across positions and documents.
#define GL_SCACHE_N 32
#define GL_SKEY_MAX 320
struct gl_sentry {
    uint64_t hash, stamp;
    const struct gl_gvocab *v;
    size_t key_len;
    uint8_t key[GL_SKEY_MAX];
    uint32_t *bits; // v->words words
};

struct gl_mcache {
    struct gl_sentry se[GL_SCACHE_N];
    int32_t cap, n;
    uint64_t clock;
    struct gl_mentry *e;
    struct gl_mstate **walk; // walk[d]: the state after the first d bytes of the current node path
    uint8_t *fresh;          // fresh[d]: walk[d] still equals its parent (copy can be skipped)
    int32_t n_walk;          // walk[1 .. n_walk - 1] allocated
    int32_t *exp;            // expected GN_TOKEN ids scratch
    int32_t cap_exp;
};

// ---- vocabulary index ----

struct gl_tokref {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
};

static int tokref_cmp(const void *a, const void *b)
{
    const struct gl_tokref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

// Code points of a token made only of plain string characters (not '"', not '\\', not < 0x20,
// valid UTF-8: no overlongs, surrogates or values above U+10FFFF), else -1. The token may end
// inside its last character (byte-level BPE splits them): that character counts as one, since
// inside a free string body the partial character is accepted iff there is room for one more
// code point (any completion of a valid prefix is valid UTF-8).
static int32_t plain_chars(const uint8_t *p, size_t n)
{
    size_t i = 0;
    int32_t cnt = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x20 || c == '"' || c == '\\')
            return -1;
        if (c < 0x80) {
            i++;
            cnt++;
            continue;
        }
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF; // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return -1;
        }
        size_t have = n - i < len ? n - i : len; // a token may end inside a character
        if (have > 1 && (p[i + 1] < lo || p[i + 1] > hi))
            return -1;
        for (size_t k = 2; k < have; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return -1;
        i += have;
        cnt++;
    }
    return cnt;
}

// 1 when the first byte of p that ends a plain run is a control byte (< 0x20): inside a JSON
// string body that rejects raw control bytes, such a token can never be accepted, whatever the
// plain characters before it do (they only move the character count).
static int ctrl_first(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x20)
            return 1;
        if (c == '"' || c == '\\')
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len > n - i || plain_chars(p + i, len) != 1)
            return 0; // invalid or cut UTF-8 comes first
        i += len;
    }
    return 0;
}

static void trie_free(struct gl_trie *t)
{
    gl_free(t->nodes);
    gl_free(t->ids);
    memset(t, 0, sizeof *t);
}

// Builds the trie of refs[0..n) (sorted by tokref_cmp) in depth-first preorder.
static gl_status trie_build(struct gl_trie *t, const struct gl_tokref *refs, size_t n,
                            struct gl_err *err)
{
    uint64_t cap = 2;
    uint32_t max_len = 0;
    for (size_t i = 0; i < n; i++) {
        cap += refs[i].len;
        if (refs[i].len > max_len)
            max_len = refs[i].len;
    }
    if (cap > UINT32_MAX / 2)
        return gl_err_set(err, GL_E_LIMIT, "grammar: vocabulary trie over %u nodes",
                          UINT32_MAX / 2);
    t->nodes = gl_malloc((size_t)cap * sizeof *t->nodes);
    t->ids = gl_malloc((n ? n : 1) * sizeof *t->ids);
    uint32_t *path = gl_malloc(((size_t)max_len + 1) * sizeof *path);
    if (!t->nodes || !t->ids || !path) {
        gl_free(path);
        trie_free(t);
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary trie");
    }
    uint32_t nn = 1, ni = 0, plen = 0;
    memset(&t->nodes[0], 0, sizeof t->nodes[0]);
    path[0] = 0;
    const struct gl_tokref *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct gl_tokref *r = &refs[i];
        uint32_t lcp = 0;
        if (prev) {
            uint32_t m = prev->len < r->len ? prev->len : r->len;
            while (lcp < m && prev->p[lcp] == r->p[lcp])
                lcp++;
        }
        while (plen > lcp)
            t->nodes[path[plen--]].next = nn;
        for (uint32_t d = lcp; d < r->len; d++) {
            struct gl_tnode *x = &t->nodes[nn];
            x->next = 0;
            x->tok = ni;
            x->depth = (uint16_t)(d + 1);
            x->byte = r->p[d];
            x->plain = 0;
            path[++plen] = nn++;
        }
        t->ids[ni++] = r->id;
        // The suffix of this token after each node on its path (O(len^2), once per vocabulary).
        for (uint32_t d = 0; d <= r->len; d++) {
            struct gl_tnode *x = &t->nodes[path[d]];
            int32_t c = plain_chars(r->p + d, r->len - d);
            if (c < 0 || c >= GL_SUB_MIXED)
                x->plain = GL_SUB_MIXED;
            else if (x->plain != GL_SUB_MIXED && c > x->plain)
                x->plain = (uint8_t)c;
        }
        prev = r;
    }
    while (plen > 0)
        t->nodes[path[plen--]].next = nn;
    t->nodes[0].next = nn;
    t->nodes[nn].tok = ni; // sentinel
    t->nodes[nn].next = nn + 1;
    t->nodes[nn].depth = 0;
    t->n_nodes = nn;
    t->n_ids = ni;
    t->max_depth = (int32_t)max_len;
    gl_free(path);
    struct gl_tnode *shrunk = gl_realloc(t->nodes, ((size_t)nn + 1) * sizeof *t->nodes);
    if (shrunk)
        t->nodes = shrunk;
    return GL_OK;
}

gl_status gl_gvocab_new(struct gl_gvocab **out, const struct gl_tokenizer *tok, struct gl_err *err)
{
    *out = NULL;
    int32_t n = gl_tokenizer_n_vocab(tok);
    if (n <= 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: tokenizer has no tokens");
    struct gl_gvocab *v = gl_calloc(1, sizeof *v);
    if (!v)
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary index");
    v->n_vocab = n;
    v->words = ((size_t)n + 31) / 32;
    gl_status st = GL_OK;
    struct gl_tokref *refs = NULL, *refs2 = NULL;
    int32_t *chars = NULL;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        if (gl_tokenizer_token_bytes(tok, i, &len))
            total += len;
    }
    if (total > UINT32_MAX) {
        st = gl_err_set(err, GL_E_LIMIT, "grammar: vocabulary has over 4 GiB of token bytes");
        goto fail;
    }
    v->blob = gl_malloc(total ? (size_t)total : 1);
    v->off = gl_malloc(((size_t)n + 1) * sizeof *v->off);
    v->excluded = gl_calloc(v->words, sizeof *v->excluded);
    refs = gl_malloc((size_t)n * sizeof *refs);
    chars = gl_malloc((size_t)n * sizeof *chars);
    if (!v->blob || !v->off || !v->excluded || !refs || !chars) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary index");
        goto fail;
    }
    uint32_t o = 0;
    size_t n_refs = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = gl_tokenizer_token_bytes(tok, i, &len);
        v->off[i] = o;
        if (p && len)
            memcpy(v->blob + o, p, len);
        else
            len = 0;
        o += (uint32_t)len;
        chars[i] = -1;
        if (len == 0 || len > GL_TOKEN_MAX_BYTES || i >= GL_TOK_N_BASE ||
            gl_tokenizer_is_special(tok, i)) {
            v->excluded[i >> 5] |= 1u << (i & 31);
            continue;
        }
        refs[n_refs].p = v->blob + v->off[i];
        refs[n_refs].len = (uint32_t)len;
        refs[n_refs].id = i;
        n_refs++;
        int32_t c = plain_chars(v->blob + v->off[i], len);
        if (c > GL_PLAIN_MAX_CHARS)
            c = -1;
        chars[i] = c;
        if (c > v->max_plain)
            v->max_plain = c;
    }
    v->off[n] = o;
    qsort(refs, n_refs, sizeof *refs, tokref_cmp);
    st = trie_build(&v->full, refs, n_refs, err);
    if (st != GL_OK)
        goto fail;
    refs2 = gl_malloc((n_refs ? n_refs : 1) * sizeof *refs2);
    if (!refs2) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary index");
        goto fail;
    }
    for (int q = 0; q < 2; q++) {
        size_t m = 0;
        for (size_t i = 0; i < n_refs; i++)
            if ((memchr(refs[i].p, '"', refs[i].len) != NULL) == q)
                refs2[m++] = refs[i]; // keeps the sorted order
        st = trie_build(q ? &v->quot : &v->noq, refs2, m, err);
        if (st != GL_OK)
            goto fail;
    }
    size_t n_slow = 0;
    for (size_t i = 0; i < n_refs; i++)
        if (chars[refs[i].id] < 0)
            refs[n_slow++] = refs[i]; // keeps the sorted order
    st = trie_build(&v->slow, refs, n_slow, err);
    if (st != GL_OK)
        goto fail;
    size_t n_slnq = 0;
    for (size_t i = 0; i < n_slow; i++)
        if (!memchr(refs[i].p, '"', refs[i].len))
            refs2[n_slnq++] = refs[i];
    st = trie_build(&v->slnq, refs2, n_slnq, err);
    if (st != GL_OK)
        goto fail;
    size_t n_strq = 0;
    for (size_t i = 0; i < n_slow; i++)
        if (!ctrl_first(refs[i].p, refs[i].len))
            refs[n_strq++] = refs[i];
    st = trie_build(&v->strq, refs, n_strq, err);
    if (st != GL_OK)
        goto fail;
    uint64_t plain_words;
    if (!gl_mul_ok((uint64_t)v->max_plain + 1, v->words, &plain_words) ||
        !(v->plain = gl_calloc((size_t)plain_words, sizeof *v->plain))) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the plain-string classes");
        goto fail;
    }
    for (int32_t i = 0; i < n; i++)
        if (chars[i] > 0)
            v->plain[(size_t)chars[i] * v->words + ((size_t)i >> 5)] |= 1u << (i & 31);
    for (int32_t k = 1; k <= v->max_plain; k++) {
        uint32_t *dst = v->plain + (size_t)k * v->words;
        const uint32_t *src = dst - v->words;
        for (size_t w = 0; w < v->words; w++)
            dst[w] |= src[w];
    }
    gl_free(refs);
    gl_free(refs2);
    gl_free(chars);
    *out = v;
    return GL_OK;
fail:
    gl_free(refs);
    gl_free(refs2);
    gl_free(chars);
    gl_gvocab_free(v);
    return st;
}

void gl_gvocab_free(struct gl_gvocab *v)
{
    if (!v)
        return;
    trie_free(&v->full);
    trie_free(&v->slow);
    trie_free(&v->strq);
    trie_free(&v->noq);
    trie_free(&v->quot);
    trie_free(&v->slnq);
    gl_free(v->plain);
    gl_free(v->blob);
    gl_free(v->off);
    gl_free(v->excluded);
    gl_free(v);
}

int32_t gl_gvocab_n_vocab(const struct gl_gvocab *v)
{
    return v->n_vocab;
}

size_t gl_gvocab_mask_words(const struct gl_gvocab *v)
{
    return v->words;
}

int gl_gvocab_is_excluded(const struct gl_gvocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_vocab)
        return 1;
    return (v->excluded[id >> 5] >> (id & 31)) & 1;
}

const uint8_t *gl_gvocab_token(const struct gl_gvocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = v->off[id + 1] - v->off[id];
    return v->blob + v->off[id];
}

void gl_gvocab_sizes(const struct gl_gvocab *v, int64_t *trie_nodes, int64_t *slow_tokens,
                     int64_t *slow_nodes)
{
    *trie_nodes = v->full.n_nodes;
    *slow_tokens = v->slow.n_ids;
    *slow_nodes = v->slow.n_nodes;
}

// ---- mask cache and walk scratch ----

static void mcache_clear(struct gl_mcache *c)
{
    for (int32_t i = 0; i < c->n; i++) {
        gl_mstate_free(c->e[i].st);
        gl_free(c->e[i].data);
    }
    c->n = 0;
    for (int i = 0; i < GL_SCACHE_N; i++)
        c->se[i].v = NULL;
}

void gl_mask_cache_free(struct gl_mcache *c)
{
    if (!c)
        return;
    mcache_clear(c);
    for (int32_t d = 1; d < c->n_walk; d++)
        gl_mstate_free(c->walk[d]);
    for (int i = 0; i < GL_SCACHE_N; i++)
        gl_free(c->se[i].bits);
    gl_free(c->walk);
    gl_free(c->fresh);
    gl_free(c->e);
    gl_free(c->exp);
    gl_free(c);
}

void gl_mask_set_cache(struct gl_grammar *g, int entries, int min_nodes)
{
    if (entries < 0)
        entries = 0;
    g->mcache_cap = entries;
    g->mcache_min_nodes = min_nodes < 0 ? 0 : min_nodes;
    struct gl_mcache *c = g->mcache;
    if (!c)
        return;
    mcache_clear(c);
    gl_free(c->e);
    c->e = NULL;
    c->cap = 0;
}

gl_status gl_mask_prepare(struct gl_grammar *g, const struct gl_gvocab *v, struct gl_err *err)
{
    struct gl_mcache *c = g->mcache;
    if (!c) {
        c = gl_calloc(1, sizeof *c);
        if (!c)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the mask cache");
        g->mcache = c;
    }
    if (!c->exp) {
        c->cap_exp = 16;
        c->exp = gl_malloc((size_t)c->cap_exp * sizeof *c->exp);
        if (!c->exp)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the mask cache");
    }
    // One state per trie depth (+1: the walk clears fresh[d + 1] below the deepest node).
    int32_t need = v->full.max_depth + 2;
    if (need > c->n_walk) {
        struct gl_mstate **w = gl_realloc(c->walk, (size_t)need * sizeof *w);
        if (!w)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->walk = w;
        uint8_t *f = gl_realloc(c->fresh, (size_t)need + 1);
        if (!f)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->fresh = f;
        if (c->n_walk == 0) {
            c->walk[0] = NULL; // depth 0 is the state itself
            c->n_walk = 1;
        }
        while (c->n_walk < need) {
            gl_status st = gl_mstate_new(&c->walk[c->n_walk], &g->ir, NULL, err);
            if (st != GL_OK)
                return st;
            c->n_walk++;
        }
    }
    return GL_OK;
}

// Depth-first walk of trie t from state s: sets the bit of every token whose bytes s accepts.
// walk[d] holds the state after the first d bytes of the current path; a rejected byte leaves
// walk[d] unchanged (match.h), so it stays a valid copy of walk[d - 1] for the next sibling and
// the copy is skipped (fresh[d]). Where the path leads into a free string body (e.g. one anyOf
// branch died and a string branch is left) and every token below continues with plain
// characters only, within the budget, the whole subtree is accepted without walking it: that is
// the string fast path's rule applied to suffixes. Returns the nodes visited.
static int64_t trie_walk(const struct gl_trie *t, struct gl_mcache *c, const struct gl_mstate *s,
                         uint32_t *mask)
{
    const struct gl_tnode *nd = t->nodes;
    const int32_t *ids = t->ids;
    struct gl_mstate **walk = c->walk;
    uint8_t *fresh = c->fresh;
    memset(fresh, 0, (size_t)t->max_depth + 2);
    uint32_t i = 1, n = t->n_nodes;
    int64_t visited = 0;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        uint32_t d = x->depth;
        struct gl_mstate *cur = walk[d];
        visited++;
        if (!fresh[d]) {
            gl_mstate_copy(cur, d == 1 ? s : walk[d - 1]);
            fresh[d] = 1;
        }
        if (!gl_mstate_advance_byte(cur, x->byte)) {
            i = x->next;
            continue;
        }
        fresh[d] = 0;
        fresh[d + 1] = 0;
        uint32_t end = nd[i + 1].tok; // tokens ending here
        uint32_t sub = x->plain;
        int32_t mn, mx;
        if (sub != GL_SUB_MIXED && x->next - i > 4 && gl_mstate_string_fast(cur, &mn, &mx) &&
            (mx < 0 || (int32_t)sub <= mx)) {
            end = nd[x->next].tok; // the whole subtree
            i = x->next;
        } else {
            i++;
        }
        for (uint32_t k = x->tok; k < end; k++) {
            uint32_t id = (uint32_t)ids[k];
            mask[id >> 5] |= 1u << (id & 31);
        }
    }
    return visited;
}

static void add_expected(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                         uint32_t *mask)
{
    int n = gl_mstate_expected_tokens(s, c->exp, c->cap_exp);
    if (n > c->cap_exp) {
        int32_t *e = gl_realloc(c->exp, (size_t)n * sizeof *e);
        if (e) {
            c->exp = e;
            c->cap_exp = n;
            n = gl_mstate_expected_tokens(s, c->exp, c->cap_exp);
        }
        if (n > c->cap_exp)
            n = c->cap_exp; // out of memory: fewer token literals, never a wrong one
    }
    for (int i = 0; i < n; i++) {
        int32_t id = c->exp[i];
        if (id >= 0 && id < v->n_vocab)
            mask[id >> 5] |= 1u << (id & 31);
    }
}

// Stores (s, mask) in the cache, evicting the least recently used entry when full. Allocation
// failure only means the mask is not cached.
static void mcache_put(struct gl_grammar *g, struct gl_mcache *c, const struct gl_gvocab *v,
                       uint64_t h, const struct gl_mstate *s, const uint32_t *mask)
{
    if (!c->e) {
        c->e = gl_calloc((size_t)g->mcache_cap, sizeof *c->e);
        if (!c->e)
            return;
        c->cap = g->mcache_cap;
    }
    // Count set bits up to the sparse limit only (baseline x86-64 has no popcnt instruction).
    int64_t n_set = 0;
    for (size_t w = 0; w < v->words && n_set <= GL_MASK_SPARSE_MAX; w++)
        for (uint32_t x = mask[w]; x && n_set <= GL_MASK_SPARSE_MAX; x &= x - 1)
            n_set++;
    size_t need = n_set <= GL_MASK_SPARSE_MAX ? (size_t)n_set : v->words;
    struct gl_mentry *e;
    if (c->n < c->cap) {
        e = &c->e[c->n];
        memset(e, 0, sizeof *e);
        if (gl_mstate_new(&e->st, &g->ir, NULL, NULL) != GL_OK)
            return;
        c->n++;
    } else {
        e = &c->e[0];
        for (int32_t i = 1; i < c->n; i++)
            if (c->e[i].stamp < e->stamp)
                e = &c->e[i];
    }
    if (need > e->cap_data || (need < e->cap_data / 4 && e->cap_data > 64)) {
        uint32_t *d = gl_realloc(e->data, (need ? need : 1) * sizeof *d);
        if (!d) {
            e->hash = 0;
            e->v = NULL; // unusable until refilled
            return;
        }
        e->data = d;
        e->cap_data = need ? need : 1;
    }
    e->hash = h;
    e->stamp = ++c->clock;
    e->v = v;
    gl_mstate_copy(e->st, s);
    if (n_set <= GL_MASK_SPARSE_MAX) {
        int32_t k = 0;
        for (size_t w = 0; w < v->words; w++)
            for (uint32_t x = mask[w]; x; x &= x - 1)
                e->data[k++] = (uint32_t)(w * 32 + (size_t)__builtin_ctz(x));
        e->n_ids = k;
    } else {
        memcpy(e->data, mask, v->words * sizeof *mask);
        e->n_ids = -1;
    }
}

static void mentry_read(const struct gl_mentry *e, size_t words, uint32_t *mask)
{
    if (e->n_ids < 0) {
        memcpy(mask, e->data, words * sizeof *mask);
        return;
    }
    memset(mask, 0, words * sizeof *mask);
    for (int32_t i = 0; i < e->n_ids; i++)
        mask[e->data[i] >> 5] |= 1u << (e->data[i] & 31);
}

// A string-body state (gl_mstate_string_key): the quote-free tokens from the frame-keyed cache
// (walked on a miss), then the tokens with a quote walked from s (they may close the string,
// which depends on the rest of the state). Returns the nodes visited.
static int64_t string_mask(struct gl_mcache *c, const struct gl_gvocab *v,
                           const struct gl_mstate *s, const uint8_t *key, size_t klen,
                           uint32_t *mask)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    struct gl_sentry *e = NULL, *old = &c->se[0];
    for (int i = 0; i < GL_SCACHE_N; i++) {
        struct gl_sentry *x = &c->se[i];
        if (x->v == v && x->hash == h && x->key_len == klen && !memcmp(x->key, key, klen)) {
            e = x;
            break;
        }
        if (x->stamp < old->stamp)
            old = x;
    }
    int64_t visited = 0;
    if (e) {
        e->stamp = ++c->clock;
        memcpy(mask, e->bits, v->words * sizeof *mask);
    } else {
        int32_t mx;
        if (gl_mstate_string_loops(s, &mx)) {
            // The string-body fast path for regex strings whose DFA state loops on plain text.
            int32_t k = mx < 0 || mx > v->max_plain ? v->max_plain : mx;
            memcpy(mask, v->plain + (size_t)k * v->words, v->words * sizeof *mask);
            visited = trie_walk(&v->slnq, c, s, mask);
        } else {
            memset(mask, 0, v->words * sizeof *mask);
            visited = trie_walk(&v->noq, c, s, mask);
        }
        if (!old->bits || old->v != v) {
            gl_free(old->bits);
            old->v = NULL;
            old->bits = gl_malloc(v->words * sizeof *old->bits);
        }
        if (old->bits) { // allocation failure only means the result is not kept
            memcpy(old->bits, mask, v->words * sizeof *mask);
            memcpy(old->key, key, klen);
            old->key_len = klen;
            old->hash = h;
            old->v = v;
            old->stamp = ++c->clock;
        }
    }
    return visited + trie_walk(&v->quot, c, s, mask);
}

void gl_mask_fill(struct gl_grammar *g, const struct gl_gvocab *v, const struct gl_mstate *s,
                  uint32_t *mask, struct gl_matcher_stats *st)
{
    struct gl_mcache *c = g->mcache;
    GL_ASSERT(c && c->n_walk >= v->full.max_depth + 2); // gl_mask_prepare ran for v
    if (st)
        st->masks++;
    uint64_t h = 0;
    int use_cache = g->mcache_cap > 0;
    if (use_cache) {
        h = gl_mstate_hash(s);
        for (int32_t i = 0; i < c->n; i++) {
            struct gl_mentry *e = &c->e[i];
            if (e->hash == h && e->v == v && gl_mstate_equal(e->st, s)) {
                e->stamp = ++c->clock;
                mentry_read(e, v->words, mask);
                if (st)
                    st->cache_hits++;
                return;
            }
        }
    }
    int32_t min_more = 0, max_more = 0;
    int64_t visited;
    uint8_t key[GL_SKEY_MAX];
    size_t klen;
    if (gl_mstate_string_fast(s, &min_more, &max_more)) {
        int32_t k = max_more < 0 || max_more > v->max_plain ? v->max_plain : max_more;
        memcpy(mask, v->plain + (size_t)k * v->words, v->words * sizeof *mask);
        // A JSON string body rejects every raw control byte; then the tokens that reach one
        // before any quote or backslash are rejected too and need no walk (a state that takes
        // some control byte, e.g. a raw ATEM value, walks them all).
        struct gl_mstate *probe = c->walk[1];
        gl_mstate_copy(probe, s);
        int ctrl_ok = 0;
        for (int b = 0; b < 0x20 && !ctrl_ok; b++)
            ctrl_ok = gl_mstate_advance_byte(probe, (uint8_t)b);
        visited = trie_walk(ctrl_ok ? &v->slow : &v->strq, c, s, mask);
        if (st)
            st->fast_path++;
    } else if (use_cache && (klen = gl_mstate_string_key(s, key, sizeof key)) > 0) {
        visited = string_mask(c, v, s, key, klen, mask);
    } else {
        memset(mask, 0, v->words * sizeof *mask);
        visited = trie_walk(&v->full, c, s, mask);
    }
    add_expected(c, v, s, mask);
    if (st)
        st->nodes_visited += visited;
    if (use_cache && visited >= g->mcache_min_nodes)
        mcache_put(g, c, v, h, s, mask);
}

void gl_mask_fill_ref(const struct gl_gvocab *v, const struct gl_mstate *s,
                      struct gl_mstate *scratch, uint32_t *mask)
{
    memset(mask, 0, v->words * sizeof *mask);
    for (int32_t id = 0; id < v->n_vocab; id++) {
        if (gl_gvocab_is_excluded(v, id))
            continue;
        size_t len;
        const uint8_t *p = gl_gvocab_token(v, id, &len);
        gl_mstate_copy(scratch, s);
        size_t k = 0;
        while (k < len && gl_mstate_advance_byte(scratch, p[k]))
            k++;
        if (k == len)
            mask[id >> 5] |= 1u << (id & 31);
    }
    int32_t ids[256];
    int n = gl_mstate_expected_tokens(s, ids, 256);
    GL_ASSERT(n <= 256); // tests use grammars with few token literals
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < v->n_vocab)
            mask[ids[i] >> 5] |= 1u << (ids[i] & 31);
}
