// SPDX-License-Identifier: MIT
// shortest: the shortest completion of a match state (contract in shortest.h). Costs are int64
// units saturating at GL_SHORT_INF; a byte costs w_byte, a GN_TOKEN literal w_token.
#include "grammar/shortest.h"

#include "grammar/mask.h"
#include "grammar/regex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 256 // views per thread (the matcher's default depth limit is 128)

// A* over fixed-size states (blob bytes each): the DFA state of a regex, or a string frame copy.
struct astar {
    uint32_t blob, n, cap; // bytes per state, states, bytes allocated for states
    uint8_t *st;           // n * blob
    int64_t *g;            // best cost found per state
    uint32_t *slot;        // open addressing: state index + 1, 0 empty; hcap entries
    uint32_t hcap;
    struct hent {
        int64_t f, g;
        uint32_t i;
    } * heap;
    uint32_t hn, heap_cap;
    int full; // a limit or an allocation failed: the search gives up
};

struct gl_short {
    const struct gl_gir *ir;
    int64_t wb, wt;        // unit weights
    int64_t *tab;          // per node
    int64_t *pmin;         // per regex: fewest bytes from its start state (-1: not yet)
    struct gl_mstate *ms;  // any state of ir: the frame steps read its grammar
    struct gl_mstate *esc; // scratch for esc_rest (a state stepped through an escape)
    int in_esc;            // esc_rest is running: no second level
    struct gl_mframe *fr;  // MAX_FRAMES views
    int64_t *costs;        // scratch for object extras (n_props of the largest object)
    int32_t n_costs;
    struct astar as;
    uint64_t frame[GL_SFRAME_MAX / 8]; // a fresh string frame
    // The vocabulary's non-plain tokens (excluded, or with '"', '\\' or a control byte), for
    // the filter's fast path; built for sp_v on first use.
    const struct gl_gvocab *sp_v;
    int32_t *sp_ids, n_sp;
    int32_t rc_node; // string_classes: the node rc_* describe, -1 none
    uint8_t rc_reps[256], rc_all[256];
    int rc_n, rc_n_all;
};

static inline int64_t add(int64_t a, int64_t b)
{
    return a >= GL_SHORT_INF || b >= GL_SHORT_INF || a + b >= GL_SHORT_INF ? GL_SHORT_INF : a + b;
}

static inline int64_t mul(int64_t n, int64_t w)
{
    if (n >= GL_SHORT_INF)
        return GL_SHORT_INF;
    return w && n > (GL_SHORT_INF - 1) / w ? GL_SHORT_INF : n * w;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

// ---------------------------------------------------------------------------------------------
// A*

static uint64_t blob_hash(const uint8_t *p, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

// A new search over states of blob bytes (the storage is kept; a change of size restarts it).
static void as_begin(struct astar *a, uint32_t blob)
{
    if (a->blob != blob) {
        gl_free(a->slot);
        a->slot = NULL;
        a->cap = 0;
    }
    a->blob = blob;
    a->n = 0;
    a->hn = 0;
    a->full = 0;
    if (a->slot)
        memset(a->slot, 0, a->hcap * sizeof *a->slot);
}

// Room for one more state (storage doubles up to GL_SHORT_SEARCH_MAX states; the hash table
// is rebuilt at twice the state capacity).
static int as_grow(struct astar *a)
{
    uint32_t states = a->cap / a->blob;
    if (a->n < states && a->slot)
        return 1;
    uint32_t ns = a->slot ? states * 2 : 64;
    if (ns > GL_SHORT_SEARCH_MAX)
        ns = GL_SHORT_SEARCH_MAX;
    if (a->n >= ns)
        return 0;
    uint8_t *st = gl_realloc(a->st, (size_t)ns * a->blob);
    if (st)
        a->st = st;
    int64_t *g = gl_realloc(a->g, (size_t)ns * sizeof *g);
    if (g)
        a->g = g;
    uint32_t *slot = gl_calloc(2u * ns, sizeof *slot);
    if (!st || !g || !slot) {
        gl_free(slot);
        return 0;
    }
    gl_free(a->slot);
    a->slot = slot;
    a->hcap = 2u * ns;
    a->cap = ns * a->blob;
    for (uint32_t i = 0; i < a->n; i++) {
        uint32_t h = (uint32_t)blob_hash(a->st + (size_t)i * a->blob, a->blob) & (a->hcap - 1);
        while (a->slot[h])
            h = (h + 1) & (a->hcap - 1);
        a->slot[h] = i + 1;
    }
    return 1;
}

// Index of state p (inserted with cost g when new, *fresh = 1); UINT32_MAX when full.
static uint32_t as_find(struct astar *a, const uint8_t *p, int64_t g, int *fresh)
{
    *fresh = 0;
    if (!as_grow(a)) {
        a->full = 1;
        return UINT32_MAX;
    }
    uint32_t mask = a->hcap - 1;
    for (uint32_t h = (uint32_t)blob_hash(p, a->blob) & mask;; h = (h + 1) & mask) {
        uint32_t s = a->slot[h];
        if (!s) {
            memcpy(a->st + (size_t)a->n * a->blob, p, a->blob);
            a->g[a->n] = g;
            a->slot[h] = a->n + 1;
            *fresh = 1;
            return a->n++;
        }
        if (!memcmp(a->st + (size_t)(s - 1) * a->blob, p, a->blob))
            return s - 1;
    }
}

// Heap order: lower f first; on ties the deeper state (larger g), which reaches a goal sooner.
static int hless(const struct hent *x, const struct hent *y)
{
    return x->f < y->f || (x->f == y->f && x->g > y->g);
}

static void as_push(struct astar *a, uint32_t i, int64_t g, int64_t h)
{
    if (a->hn == a->heap_cap) {
        uint32_t nc = a->heap_cap ? a->heap_cap * 2 : 1024;
        struct hent *nh = gl_realloc(a->heap, nc * sizeof *nh);
        if (!nh) {
            a->full = 1;
            return;
        }
        a->heap = nh;
        a->heap_cap = nc;
    }
    struct hent e = {add(g, h), g, i};
    uint32_t k = a->hn++;
    while (k > 0 && hless(&e, &a->heap[(k - 1) / 2])) {
        a->heap[k] = a->heap[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    a->heap[k] = e;
}

static struct hent as_pop(struct astar *a)
{
    struct hent top = a->heap[0], last = a->heap[--a->hn];
    uint32_t k = 0;
    for (;;) {
        uint32_t c = 2 * k + 1;
        if (c >= a->hn)
            break;
        if (c + 1 < a->hn && hless(&a->heap[c + 1], &a->heap[c]))
            c++;
        if (!hless(&a->heap[c], &last))
            break;
        a->heap[k] = a->heap[c];
        k = c;
    }
    if (a->hn)
        a->heap[k] = last;
    return top;
}

static void as_free(struct astar *a)
{
    gl_free(a->st);
    gl_free(a->g);
    gl_free(a->slot);
    gl_free(a->heap);
    memset(a, 0, sizeof *a);
}

// One search kind: a goal test, an admissible estimate, and the successors (each one byte).
struct aspec {
    int (*goal)(struct gl_short *sh, const void *ctx, const uint8_t *st);
    int64_t (*est)(struct gl_short *sh, const void *ctx, const uint8_t *st);
    // Writes the successor of st on byte b into out; 0 when b is refused.
    int (*step)(struct gl_short *sh, const void *ctx, uint8_t *out, uint8_t b);
    const uint8_t *bytes; // the bytes worth trying (one per class), n of them
    int n;
    const uint8_t *all; // every byte, for states where bytes are not interchangeable
    int n_all;
    int (*use_all)(struct gl_short *sh, const void *ctx, const uint8_t *st);
};

// Fewest bytes from start to a goal state; GL_SHORT_INF when none or the search gave up.
static int64_t as_run(struct gl_short *sh, const struct aspec *sp, const void *ctx,
                      const uint8_t *start, uint32_t blob)
{
    struct astar *a = &sh->as;
    as_begin(a, blob);
    int fresh;
    uint32_t i0 = as_find(a, start, 0, &fresh);
    if (i0 == UINT32_MAX)
        return GL_SHORT_INF;
    as_push(a, i0, 0, sp->est(sh, ctx, start));
    uint8_t child[GL_SFRAME_MAX];
    GL_ASSERT(blob <= sizeof child);
    while (a->hn && !a->full) {
        struct hent e = as_pop(a);
        if (e.g > a->g[e.i])
            continue; // stale entry
        const uint8_t *st = a->st + (size_t)e.i * blob;
        if (sp->goal(sh, ctx, st))
            return e.g;
        int all = sp->use_all && sp->use_all(sh, ctx, st);
        const uint8_t *bytes = all ? sp->all : sp->bytes;
        int nb = all ? sp->n_all : sp->n;
        for (int k = 0; k < nb && !a->full; k++) {
            memcpy(child, a->st + (size_t)e.i * blob, blob); // st may move as states are added
            if (!sp->step(sh, ctx, child, bytes[k]))
                continue;
            uint32_t c = as_find(a, child, e.g + 1, &fresh);
            if (c == UINT32_MAX)
                break;
            if (!fresh && a->g[c] <= e.g + 1)
                continue;
            a->g[c] = e.g + 1;
            as_push(a, c, e.g + 1, sp->est(sh, ctx, child));
        }
    }
    return GL_SHORT_INF;
}

// ---------------------------------------------------------------------------------------------
// Regex nodes and key patterns: fewest bytes from a DFA state to an accepting one

static int rx_goal(struct gl_short *sh, const void *ctx, const uint8_t *st)
{
    (void)sh;
    uint32_t q;
    memcpy(&q, st, 4);
    return gl_regex_is_accept((struct gl_regex *)(uintptr_t)ctx, q);
}

static int64_t rx_est(struct gl_short *sh, const void *ctx, const uint8_t *st)
{
    (void)sh;
    uint32_t q;
    memcpy(&q, st, 4);
    int32_t mc = gl_regex_min_chars((struct gl_regex *)(uintptr_t)ctx, q);
    return mc > 0 ? mc : 0; // code points to start, each at least a byte
}

static int rx_step(struct gl_short *sh, const void *ctx, uint8_t *out, uint8_t b)
{
    (void)sh;
    struct gl_regex *re = (struct gl_regex *)(uintptr_t)ctx;
    uint32_t q;
    memcpy(&q, out, 4);
    // Building states here spends the budget matching needs: stop while it is short.
    if (!gl_regex_room(re, 1)) {
        sh->as.full = 1;
        return 0;
    }
    q = gl_regex_step(re, q, b);
    memcpy(out, &q, 4);
    return q != GL_RE_DEAD;
}

static int64_t regex_rest(struct gl_short *sh, struct gl_regex *re, uint32_t q)
{
    if (q == GL_RE_DEAD)
        return GL_SHORT_INF;
    if (gl_regex_is_accept(re, q))
        return 0;
    uint32_t ncls;
    const uint8_t *rep;
    gl_regex_classes(re, &ncls, &rep);
    struct aspec sp = {
        .goal = rx_goal, .est = rx_est, .step = rx_step, .bytes = rep, .n = (int)ncls};
    uint8_t start[4];
    memcpy(start, &q, 4);
    return as_run(sh, &sp, re, start, 4);
}

// Pattern k's fewest bytes from its start (memoized per regex).
static int64_t pattern_min(struct gl_short *sh, int32_t rx)
{
    if (sh->pmin[rx] < 0) {
        struct gl_regex *re = sh->ir->regexes[rx];
        sh->pmin[rx] = regex_rest(sh, re, gl_regex_start(re));
    }
    return sh->pmin[rx];
}

// ---------------------------------------------------------------------------------------------
// Strings: A* over copies of the frame, stepped by the matcher itself (escapes, UTF-8, lengths,
// regexes: exactly its rules); one byte per class of bytes that step the frame alike.

static int str_goal(struct gl_short *sh, const void *ctx, const uint8_t *st)
{
    (void)ctx;
    return gl_mframe_str_done(sh->ms, (const uint64_t *)(const void *)st);
}

static int64_t str_est(struct gl_short *sh, const void *ctx, const uint8_t *st)
{
    (void)ctx;
    struct gl_mframe v;
    gl_mframe_view(sh->ms, (const uint64_t *)(const void *)st, &v);
    const struct gl_gstr *s = &sh->ir->nodes[v.node].u.str;
    int64_t h = v.pending;
    if ((int64_t)s->min_chars - v.a > h)
        h = (int64_t)s->min_chars - v.a;
    for (int32_t r = 0; r < s->n_regex; r++) {
        int32_t mc = gl_regex_min_chars(sh->ir->regexes[s->regexes[r]], v.re[r]);
        if (mc > h)
            h = mc;
    }
    return h;
}

static int str_step1(struct gl_short *sh, const void *ctx, uint8_t *out, uint8_t b)
{
    const struct gl_gstr *s = ctx;
    for (int32_t r = 0; r < s->n_regex; r++)
        if (!gl_regex_room(sh->ir->regexes[s->regexes[r]], 1)) {
            sh->as.full = 1;
            return 0;
        }
    return gl_mstate_sframe_step(sh->ms, (uint64_t *)(void *)out, b);
}

static int str_use_all(struct gl_short *sh, const void *ctx, const uint8_t *st)
{
    (void)ctx;
    struct gl_mframe v;
    gl_mframe_view(sh->ms, (const uint64_t *)(const void *)st, &v);
    return v.esc; // escape letters and hex digits are not interchangeable
}

// UTF-8 role of a byte (continuation ranges as lead bytes constrain them), and the bytes a JSON
// string treats specially.
static int byte_role(uint8_t b)
{
    if (b == '"' || b == '\\' || b < 0x20)
        return 100 + b;
    if (b < 0x80)
        return 0;
    if (b < 0x90)
        return 1;
    if (b < 0xA0)
        return 2;
    if (b < 0xC0)
        return 3;
    if (b < 0xC2)
        return 4;
    if (b < 0xE0)
        return 5;
    if (b == 0xE0 || b == 0xED || b == 0xF0 || b == 0xF4)
        return 6 + (b & 0x1F);
    if (b < 0xF0)
        return 40;
    if (b < 0xF4)
        return 41;
    return 42;
}

static void string_classes(struct gl_short *sh, int32_t node);

// Fewest bytes that end the string of frame (a copy of its bytes), its closing quote included.
static int64_t string_rest(struct gl_short *sh, const uint64_t *frame, uint32_t size)
{
    struct gl_mframe v;
    gl_mframe_view(sh->ms, frame, &v);
    const struct gl_gstr *s = &sh->ir->nodes[v.node].u.str;
    int64_t close = s->raw ? 0 : 1;
    if (s->n_regex == 0 && (v.pending == 0 || !v.esc)) {
        // Plain characters, one byte each, after the bytes that end a split UTF-8 character
        // (the frame counts a character at its lead byte).
        int64_t chars = (int64_t)v.a;
        return close + v.pending +
               ((int64_t)s->min_chars > chars ? (int64_t)s->min_chars - chars : 0);
    }
    if (sh->rc_node != v.node)
        string_classes(sh, v.node);
    struct aspec sp = {.goal = str_goal,
                       .est = str_est,
                       .step = str_step1,
                       .bytes = sh->rc_reps,
                       .n = sh->rc_n,
                       .all = sh->rc_all,
                       .n_all = sh->rc_n_all,
                       .use_all = str_use_all};
    return add(as_run(sh, &sp, s, (const uint8_t *)(const void *)frame, size), close);
}

// The byte classes of string node i's search, kept for the last node asked (a mask judges many
// tokens in one string): bytes alike for every regex, of one UTF-8 role, and plain for the
// string, one representative each (rc_reps), and every byte but the closing quote (rc_all).
static void string_classes(struct gl_short *sh, int32_t node)
{
    const struct gl_gstr *s = &sh->ir->nodes[node].u.str;
    uint8_t *reps = sh->rc_reps, *all = sh->rc_all;
    int n = 0, n_all = 0;
    const uint8_t *cls[GL_SFAST_RX];
    int32_t nrx = s->n_regex < GL_SFAST_RX ? s->n_regex : GL_SFAST_RX;
    for (int32_t r = 0; r < nrx; r++) {
        uint32_t nc;
        cls[r] = gl_regex_classes(sh->ir->regexes[s->regexes[r]], &nc, NULL);
    }
    _Static_assert(GL_SFAST_RX <= 8, "one class id per byte of the key");
    // A byte joins the representative with its role and its class in every regex (the classes
    // packed 8 bits each, GL_SFAST_RX <= 8); a role >= 100 is one byte's own (100 + b), so the
    // bytes a JSON string treats specially are never merged. Keys make this 256 x n compares of
    // two words: a schema of thousands of string nodes computes it once per node.
    int role[256];
    uint64_t key[256];
    for (int b = 0; b < 256; b++) {
        if (b == '"' && !s->raw)
            continue; // the end, not a step
        all[n_all++] = (uint8_t)b;
        int rb = byte_role((uint8_t)b);
        uint64_t kb = 0;
        for (int32_t r = 0; r < nrx; r++)
            kb |= (uint64_t)cls[r][b] << (8 * r);
        int k = 0;
        if (s->n_regex <= GL_SFAST_RX)
            while (k < n && (role[k] != rb || key[k] != kb))
                k++;
        else
            k = n;
        if (k == n) {
            role[n] = rb, key[n] = kb;
            reps[n++] = (uint8_t)b;
        }
    }
    sh->rc_n = n;
    sh->rc_n_all = n_all;
    sh->rc_node = node;
}

// ---------------------------------------------------------------------------------------------
// Numbers

// -?(0|[1-9][0-9]*)(\.[0-9]+)? (no fraction for integers): the texts a bounded number takes.
static int num_syntax(const char *t, int n, int integer)
{
    int i = t[0] == '-';
    if (i >= n || t[i] < '0' || t[i] > '9')
        return 0;
    if (t[i] == '0' && i + 1 < n && t[i + 1] != '.')
        return 0;
    while (i < n && t[i] >= '0' && t[i] <= '9')
        i++;
    if (i == n)
        return 1;
    if (integer || t[i] != '.' || ++i == n)
        return 0;
    while (i < n && t[i] >= '0' && t[i] <= '9')
        i++;
    return i == n;
}

static int num_ok(const struct gl_gnum *nm, const char *t, int n)
{
    return num_syntax(t, n, nm->integer) && gl_mnum_text_ok(nm, t, n);
}

// Completions of t[0..len) by 1 or 2 bytes, tried one by one (exact, any magnitude).
static int num_small(const struct gl_gnum *nm, const char *t, int len, int extra)
{
    static const char al[] = "0123456789.-";
    char buf[72];
    memcpy(buf, t, (size_t)len);
    int na = (int)sizeof al - 1;
    for (int x = 0; x < na; x++) {
        buf[len] = al[x];
        if (extra == 1) {
            if (num_ok(nm, buf, len + 1))
                return 1;
            continue;
        }
        for (int y = 0; y < na; y++) {
            buf[len + 1] = al[y];
            if (num_ok(nm, buf, len + 2))
                return 1;
        }
    }
    return 0;
}

// Some completion of t by i more integer digits and then, when j > 0, '.' and j fraction digits
// (has_dot: t already has its '.', i is 0): the values are N / 10^J for N in a range of
// integers, so the one nearest the bound is built and checked by the matcher's own test.
static int num_grid(const struct gl_gnum *nm, const char *t, int len, int neg, int i, int j,
                    int has_dot)
{
    int s = neg, dot = has_dot ? (int)((const char *)memchr(t, '.', (size_t)len) - t) : len;
    int nint = dot - s, nd = len - s - (has_dot ? 1 : 0); // integer digits, all digits in t
    if (nint == 1 && t[s] == '0' && i > 0)
        return 0; // no digit after a leading zero
    int free_d = i + j, total = nd + free_d;
    if (total > 18)
        return 0; // beyond exact long double integers: left to the caller's larger splits
    long double p = 0;
    for (int k = s; k < len; k++)
        if (k != dot)
            p = p * 10 + (t[k] - '0');
    long double scale = powl(10, free_d), nlo = p * scale, nhi = nlo + scale - 1;
    if (nint == 0 && i >= 2)
        nlo = powl(10, free_d - 1); // the first integer digit is not a zero
    int J = (has_dot ? nd - nint : 0) + j;
    long double lo, hi, pj = powl(10, J);
    gl_mnum_range(nm, &lo, &hi);
    long double vlo = neg ? -hi : lo, vhi = neg ? -lo : hi;
    long double a = ceill(vlo * pj), b = floorl(vhi * pj);
    if (a < nlo)
        a = nlo;
    if (b > nhi)
        b = nhi;
    // The grid points next to both ends (the scaled bounds are rounded), each built and checked.
    long double cand[6] = {a - 1, a, a + 1, b - 1, b, b + 1};
    for (int c = 0; c < 6 && a <= b + 1; c++) {
        char digits[40], buf[72];
        if (cand[c] < nlo || cand[c] > nhi)
            continue;
        int dn = snprintf(digits, sizeof digits, "%0*.0Lf", total, cand[c]);
        if (dn != total)
            continue;
        int w = 0;
        if (neg)
            buf[w++] = '-';
        for (int k = 0; k < total; k++) {
            if (J > 0 && k == total - J)
                buf[w++] = '.';
            buf[w++] = digits[k];
        }
        if (w >= len && !memcmp(buf, t, (size_t)len) && num_ok(nm, buf, w))
            return 1;
    }
    return 0;
}

// Fewest bytes that complete a number (node nm) whose text so far is t (bounded; unbounded
// numbers keep no text and go by phase).
static int64_t number_rest(const struct gl_gnum *nm, int phase, const char *t, int len)
{
    if (!nm->has_min && !nm->has_max) {
        static const int8_t need[] = {
            [GL_MF_NUM_START] = 1, [GL_MF_NUM_MINUS] = 1,   [GL_MF_NUM_ZERO] = 0,
            [GL_MF_NUM_INT] = 0,   [GL_MF_NUM_DOT] = 1,     [GL_MF_NUM_FRAC] = 0,
            [GL_MF_NUM_EXP] = 1,   [GL_MF_NUM_EXPSIGN] = 1, [GL_MF_NUM_EXPD] = 0};
        return need[phase];
    }
    if (len > 0 && num_ok(nm, t, len))
        return 0;
    for (int extra = 1; extra <= 2 && len + extra <= 62; extra++)
        if (num_small(nm, t, len, extra))
            return extra;
    int has_dot = memchr(t, '.', (size_t)len) != NULL;
    for (int extra = 3; len + extra <= 62; extra++) {
        // Split extra into a sign (only at the start), integer digits and '.' + fraction.
        for (int neg = 0; neg <= 1; neg++) {
            int sign = neg && len == 0;
            if (neg && !(sign || (len > 0 && t[0] == '-')))
                continue;
            if (!neg && len > 0 && t[0] == '-')
                continue;
            int left = extra - sign;
            char tt[72];
            int tl = 0;
            if (sign)
                tt[tl++] = '-';
            memcpy(tt + tl, t, (size_t)len);
            tl += len;
            for (int i = has_dot ? 0 : left; i >= 0; i--) {
                int rest = left - i, j = has_dot ? rest : (rest == 0 ? 0 : rest - 1);
                if ((!has_dot && rest == 1) || (j > 0 && nm->integer && !has_dot))
                    continue;
                if (num_grid(nm, tt, tl, neg, i, j, has_dot))
                    return extra;
            }
        }
    }
    return GL_SHORT_INF;
}

// ---------------------------------------------------------------------------------------------
// Objects and arrays

// Bytes of a key's name written as a JSON string body (escapes for '"', '\\' and controls).
static int64_t esc_len(const uint8_t *p, uint32_t n)
{
    int64_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        if (b == '"' || b == '\\')
            k += 2;
        else if (b < 0x20)
            k += (b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t') ? 2 : 6;
        else
            k++;
    }
    return k;
}

// "NAME":VALUE for declared prop i.
static int64_t member(const struct gl_short *sh, const struct gl_gobj *o, int32_t i)
{
    const struct gl_gbytes *nm = &o->props[i].name;
    return add(mul(esc_len(nm->p, nm->len) + 3, sh->wb), sh->tab[o->props[i].value]);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

// The e cheapest members beyond the required ones: unseen optional declared props (each once),
// or non-declared keys (costed as one-byte keys, which a string key always has room for: an
// upper bound when one of them is taken).
static int64_t extras(struct gl_short *sh, const struct gl_mstate *s, const struct gl_gobj *o,
                      const struct gl_mframe *v, int32_t skip, int64_t e)
{
    int64_t u = GL_SHORT_INF;
    if (o->additional >= 0)
        u = add(mul(4, sh->wb), sh->tab[o->additional]);
    for (int32_t k = 0; k < o->n_patterns; k++)
        u = min64(u, add(mul(add(pattern_min(sh, o->patterns[k].re), 3), sh->wb),
                         sh->tab[o->patterns[k].value]));
    int32_t n = 0;
    for (int32_t i = 0; i < o->n_props && n < sh->n_costs; i++)
        if (!o->props[i].required && i != skip && (!v || gl_mframe_prop_ok(s, v, i)))
            sh->costs[n++] = member(sh, o, i);
    qsort(sh->costs, (size_t)n, sizeof *sh->costs, cmp_i64);
    int64_t sum = 0;
    for (int32_t k = 0; e > 0; e--)
        sum = add(sum, k < n && sh->costs[k] < u ? sh->costs[k++] : u);
    return sum;
}

// The rest of an object where a member may be added or the object closed: the required props
// not read yet (skip counts as read), the members minProperties still needs, their commas
// (lead: each needs one, after a value; else the first does not), and the closing brace. must:
// a member has to come first (after a comma).
static int64_t obj_tail(struct gl_short *sh, const struct gl_mstate *s, int32_t node,
                        const struct gl_mframe *v, int64_t count, int32_t skip, int lead, int must)
{
    const struct gl_gobj *o = &sh->ir->nodes[node].u.obj;
    int64_t sum = 0, nreq = 0;
    for (int32_t i = 0; i < o->n_props; i++)
        if (o->props[i].required && i != skip && !(v && gl_mframe_seen(v, i))) {
            sum = add(sum, member(sh, o, i));
            nreq++;
        }
    int64_t e = o->min_props - count - nreq;
    if (e < 0)
        e = 0;
    if (must && nreq + e == 0)
        e = 1;
    if (e > 0)
        sum = add(sum, extras(sh, s, o, v, skip, e));
    int64_t m = nreq + e, commas = lead ? m : (m > 0 ? m - 1 : 0);
    return add(sum, mul(commas + 1, sh->wb));
}

// Inside a key: end it as a declared name (the rest of the name), or as a non-declared key (one
// more byte when the key so far is a declared name or a repeat), then ':', the value, the tail.
static int64_t key_rest(struct gl_short *sh, const struct gl_mstate *s, const struct gl_mframe *v)
{
    const struct gl_gobj *o = &sh->ir->nodes[v->node].u.obj;
    int64_t best = GL_SHORT_INF;
    for (int32_t i = v->lo; i < v->hi; i++) {
        const struct gl_gbytes *nm = &o->props[i].name;
        if (nm->len < v->keylen || !gl_mframe_prop_ok(s, v, i))
            continue;
        int64_t c = add(mul(esc_len(nm->p + v->keylen, nm->len - v->keylen) + 2, sh->wb),
                        sh->tab[o->props[i].value]);
        best = min64(best, add(c, obj_tail(sh, s, v->node, v, v->count + 1, i, 1, 0)));
    }
    if (gl_mframe_extra_ok(s, v)) {
        int declared = v->lo < v->hi && o->props[v->lo].name.len == v->keylen;
        int64_t more = declared || gl_mframe_key_dup(s, v) ? 1 : 0;
        if (!v->esc && v->pending > more)
            more = v->pending;
        int64_t c = GL_SHORT_INF;
        if (o->additional >= 0)
            c = add(mul(more + 2, sh->wb), sh->tab[o->additional]);
        for (int32_t k = 0; k < o->n_patterns; k++) {
            int64_t pb = regex_rest(sh, sh->ir->regexes[o->patterns[k].re], v->re[k]);
            c = min64(
                c, add(mul(add(pb > more ? pb : more, 2), sh->wb), sh->tab[o->patterns[k].value]));
        }
        best = min64(best, add(c, obj_tail(sh, s, v->node, v, v->count + 1, -1, 1, 0)));
    }
    return best;
}

static int64_t obj_rest(struct gl_short *sh, const struct gl_mstate *s, const struct gl_mframe *v)
{
    switch (v->phase) {
    case GL_MF_OBJ_START:
        return sh->tab[v->node];
    case GL_MF_OBJ_FIRST:
        return obj_tail(sh, s, v->node, v, v->count, -1, 0, 0);
    case GL_MF_OBJ_COMMA:
        return obj_tail(sh, s, v->node, v, v->count, -1, 0, 1);
    case GL_MF_OBJ_KEY: // inside an escape: esc_rest (state_rest) steps through it instead
        return v->esc ? GL_SHORT_INF : key_rest(sh, s, v);
    case GL_MF_OBJ_COLON:
        return add(add(sh->wb, sh->tab[v->cur]), obj_tail(sh, s, v->node, v, v->count, -1, 1, 0));
    case GL_MF_OBJ_VALUE_WS:
        return add(sh->tab[v->cur], obj_tail(sh, s, v->node, v, v->count, -1, 1, 0));
    default: // NEXT, and IN_VALUE below the value's frames
        return obj_tail(sh, s, v->node, v, v->count, -1, 1, 0);
    }
}

static int32_t arr_kid(const struct gl_garr *a, int64_t i)
{
    return i < a->n_prefix ? a->prefix[i] : a->items;
}

// The rest of an array after count items: the items min_items still needs (must: at least one,
// after a comma), their commas (lead: after an item) and the closing bracket.
static int64_t arr_tail(const struct gl_short *sh, int32_t node, int64_t count, int lead, int must)
{
    const struct gl_garr *a = &sh->ir->nodes[node].u.arr;
    int64_t need = a->min_items - count;
    if (need < 0)
        need = 0;
    if (must && need == 0)
        need = 1;
    int64_t sum = mul((lead ? need : (need > 0 ? need - 1 : 0)) + 1, sh->wb);
    for (int64_t i = count; i < count + need; i++) {
        int32_t k = arr_kid(a, i);
        sum = add(sum, k < 0 ? GL_SHORT_INF : sh->tab[k]);
    }
    return sum;
}

static int64_t arr_rest(const struct gl_short *sh, const struct gl_mframe *v)
{
    switch (v->phase) {
    case GL_MF_ARR_START:
        return sh->tab[v->node];
    case GL_MF_ARR_FIRST:
        return arr_tail(sh, v->node, v->b, 0, 0);
    case GL_MF_ARR_NEXT:
        return arr_tail(sh, v->node, v->b, 1, 0);
    case GL_MF_ARR_COMMA:
        return arr_tail(sh, v->node, v->b, 0, 1);
    default: // IN_ITEM, below the item's frames: the item is then read
        return arr_tail(sh, v->node, (int64_t)v->b + 1, 1, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// The per-node table

// Nodes whose cost depends on other nodes (the rest are computed once).
static int is_inner(enum gl_gnode_kind k)
{
    return k == GN_SEQ || k == GN_ALT || k == GN_REPEAT || k == GN_JOBJECT || k == GN_JARRAY;
}

// Calls f on each node n's cost depends on.
static void for_kids(const struct gl_gnode *n, void (*f)(void *, int32_t), void *u)
{
    switch (n->kind) {
    case GN_SEQ:
    case GN_ALT:
        for (int32_t i = 0; i < n->u.list.n; i++)
            f(u, n->u.list.kids[i]);
        break;
    case GN_REPEAT:
        f(u, n->u.rep.kid);
        if (n->u.rep.sep >= 0)
            f(u, n->u.rep.sep);
        break;
    case GN_JOBJECT:
        for (int32_t i = 0; i < n->u.obj.n_props; i++)
            f(u, n->u.obj.props[i].value);
        for (int32_t i = 0; i < n->u.obj.n_patterns; i++)
            f(u, n->u.obj.patterns[i].value);
        if (n->u.obj.additional >= 0)
            f(u, n->u.obj.additional);
        break;
    case GN_JARRAY:
        for (int32_t i = 0; i < n->u.arr.n_prefix; i++)
            f(u, n->u.arr.prefix[i]);
        if (n->u.arr.items >= 0)
            f(u, n->u.arr.items);
        break;
    default:
        break;
    }
}

static int64_t leaf_cost(struct gl_short *sh, int32_t i)
{
    const struct gl_gnode *n = &sh->ir->nodes[i];
    switch (n->kind) {
    case GN_EMPTY:
    case GN_WS:
    case GN_ANYBYTES:
        return 0;
    case GN_BYTES:
        return mul(n->u.bytes.len, sh->wb);
    case GN_TOKEN:
        return sh->wt;
    case GN_REGEX: {
        struct gl_regex *re = sh->ir->regexes[n->u.regex.re];
        return mul(regex_rest(sh, re, gl_regex_start(re)), sh->wb);
    }
    case GN_JSTRING: {
        size_t fs = gl_mstate_node_frame(sh->ms, i, sh->frame, sizeof sh->frame);
        if (!fs)
            return GL_SHORT_INF;
        int64_t body = string_rest(sh, sh->frame, (uint32_t)fs);
        return mul(add(body, n->u.str.raw ? 0 : 1), sh->wb); // + the opening quote
    }
    case GN_JNUMBER:
        return mul(number_rest(&n->u.num, GL_MF_NUM_START, "", 0), sh->wb);
    default:
        return GL_SHORT_INF;
    }
}

static int64_t inner_cost(struct gl_short *sh, int32_t i)
{
    const struct gl_gnode *n = &sh->ir->nodes[i];
    const int64_t *t = sh->tab;
    switch (n->kind) {
    case GN_SEQ: {
        int64_t c = 0;
        for (int32_t k = 0; k < n->u.list.n; k++)
            c = add(c, t[n->u.list.kids[k]]);
        return c;
    }
    case GN_ALT: {
        int64_t c = GL_SHORT_INF;
        for (int32_t k = 0; k < n->u.list.n; k++)
            c = min64(c, t[n->u.list.kids[k]]);
        return c;
    }
    case GN_REPEAT: {
        int32_t min = n->u.rep.min;
        if (min <= 0 || n->u.rep.max == 0)
            return 0;
        int64_t sep = n->u.rep.sep >= 0 ? t[n->u.rep.sep] : 0;
        return add(mul(t[n->u.rep.kid], min), mul(sep, min - 1));
    }
    case GN_JOBJECT: {
        const struct gl_gobj *o = &n->u.obj;
        int64_t req = 0;
        for (int32_t k = 0; k < o->n_props; k++)
            req += o->props[k].required;
        if ((o->max_props >= 0 && req > o->max_props) ||
            (o->additional < 0 && o->n_patterns == 0 && o->n_props < o->min_props))
            return GL_SHORT_INF;
        return add(sh->wb, obj_tail(sh, NULL, i, NULL, 0, -1, 0, 0)); // '{'
    }
    case GN_JARRAY:
        if (n->u.arr.items < 0 && n->u.arr.n_prefix < n->u.arr.min_items)
            return GL_SHORT_INF;
        return add(sh->wb, arr_tail(sh, i, 0, 0, 0)); // '['
    default:
        return sh->tab[i];
    }
}

struct parents {
    int32_t *off, *list; // CSR: parents of node i are list[off[i] .. off[i + 1])
    int32_t at;          // while filling
};
static void count_parent(void *u, int32_t kid)
{
    ((struct parents *)u)->off[kid + 1]++;
}
static void put_parent(void *u, int32_t kid)
{
    struct parents *p = u;
    p->list[p->off[kid]++] = p->at;
}

// Least fixed point over the graph: inner nodes start at INF and only go down; a node whose
// cost dropped re-queues its parents.
static gl_status build_table(struct gl_short *sh, struct gl_err *err)
{
    const struct gl_gir *ir = sh->ir;
    int32_t n = ir->n_nodes;
    struct parents p = {gl_calloc((size_t)n + 1, sizeof *p.off), NULL, 0};
    int32_t *queue = gl_malloc((size_t)n * sizeof *queue);
    uint8_t *inq = gl_calloc((size_t)n, 1);
    gl_status st = GL_OK;
    if (!p.off || !queue || !inq) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the shortest-completion table");
        goto out;
    }
    for (int32_t i = 0; i < n; i++)
        for_kids(&ir->nodes[i], count_parent, &p);
    for (int32_t i = 0; i < n; i++)
        p.off[i + 1] += p.off[i];
    p.list = gl_malloc((size_t)(p.off[n] ? p.off[n] : 1) * sizeof *p.list);
    if (!p.list) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the shortest-completion table");
        goto out;
    }
    for (int32_t i = 0; i < n; i++) {
        p.at = i;
        for_kids(&ir->nodes[i], put_parent, &p);
    }
    for (int32_t i = n; i > 0; i--) // put_parent advanced each start to the next one's
        p.off[i] = p.off[i - 1];
    p.off[0] = 0;
    int32_t head = 0, tail = 0, len = 0;
    for (int32_t i = 0; i < n; i++) {
        if (is_inner(ir->nodes[i].kind)) {
            sh->tab[i] = GL_SHORT_INF;
            queue[tail++] = i;
            inq[i] = 1;
            len++;
        } else {
            sh->tab[i] = leaf_cost(sh, i);
        }
    }
    tail %= n > 0 ? n : 1;
    while (len > 0) {
        int32_t i = queue[head];
        head = (head + 1) % n;
        len--;
        inq[i] = 0;
        int64_t c = inner_cost(sh, i);
        if (c >= sh->tab[i])
            continue;
        sh->tab[i] = c;
        for (int32_t k = p.off[i]; k < p.off[i + 1]; k++) {
            int32_t q = p.list[k];
            if (!inq[q]) {
                inq[q] = 1;
                queue[tail] = q;
                tail = (tail + 1) % n;
                len++;
            }
        }
    }
out:
    gl_free(p.off);
    gl_free(p.list);
    gl_free(queue);
    gl_free(inq);
    return st;
}

gl_status gl_short_new(struct gl_short **out, const struct gl_gir *ir, int64_t w_byte,
                       int64_t w_token, struct gl_err *err)
{
    *out = NULL;
    if (w_byte < 0 || w_token < 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: negative unit weights");
    struct gl_short *sh = gl_calloc(1, sizeof *sh);
    if (!sh)
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the shortest-completion table");
    sh->ir = ir;
    sh->rc_node = -1;
    sh->wb = w_byte;
    sh->wt = w_token;
    int32_t maxp = 1;
    for (int32_t i = 0; i < ir->n_nodes; i++)
        if (ir->nodes[i].kind == GN_JOBJECT && ir->nodes[i].u.obj.n_props > maxp)
            maxp = ir->nodes[i].u.obj.n_props;
    sh->n_costs = maxp;
    sh->tab = gl_malloc((size_t)(ir->n_nodes ? ir->n_nodes : 1) * sizeof *sh->tab);
    sh->pmin = gl_malloc((size_t)(ir->n_regexes ? ir->n_regexes : 1) * sizeof *sh->pmin);
    sh->fr = gl_malloc(MAX_FRAMES * sizeof *sh->fr);
    sh->costs = gl_malloc((size_t)maxp * sizeof *sh->costs);
    gl_status st = GL_OK;
    if (!sh->tab || !sh->pmin || !sh->fr || !sh->costs)
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the shortest-completion table");
    if (st == GL_OK)
        st = gl_mstate_new(&sh->ms, ir, NULL, err);
    if (st == GL_OK)
        st = gl_mstate_new(&sh->esc, ir, NULL, err);
    if (st == GL_OK) {
        for (int32_t i = 0; i < ir->n_regexes; i++)
            sh->pmin[i] = -1;
        st = build_table(sh, err);
    }
    if (st != GL_OK) {
        gl_short_free(sh);
        return st;
    }
    *out = sh;
    return GL_OK;
}

void gl_short_free(struct gl_short *sh)
{
    if (!sh)
        return;
    gl_free(sh->tab);
    gl_free(sh->pmin);
    gl_free(sh->fr);
    gl_free(sh->costs);
    gl_mstate_free(sh->ms);
    gl_mstate_free(sh->esc);
    gl_free(sh->sp_ids);
    as_free(&sh->as);
    gl_free(sh);
}

int64_t gl_short_node(const struct gl_short *sh, int32_t node)
{
    return sh->tab[node];
}

// ---------------------------------------------------------------------------------------------
// States

// The rest of a thread's top frame, from its progress.
static int64_t top_rest(struct gl_short *sh, const struct gl_mstate *s, const struct gl_mframe *v)
{
    const struct gl_gnode *n = &sh->ir->nodes[v->node];
    switch (n->kind) {
    case GN_BYTES:
        return mul(n->u.bytes.len - v->a, sh->wb);
    case GN_TOKEN:
        return sh->wt;
    case GN_REGEX:
        return mul(regex_rest(sh, sh->ir->regexes[n->u.regex.re], v->a), sh->wb);
    case GN_JSTRING: {
        if (v->phase == GL_MF_STR_OPEN)
            return sh->tab[v->node];
        uint64_t fr[GL_SFRAME_MAX / 8];
        if (v->size > sizeof fr)
            return GL_SHORT_INF;
        memcpy(fr, v->frame, v->size);
        return mul(string_rest(sh, fr, v->size), sh->wb);
    }
    case GN_JNUMBER:
        return mul(number_rest(&n->u.num, v->phase, v->text ? v->text : "", (int)v->b), sh->wb);
    case GN_JOBJECT:
        return obj_rest(sh, s, v);
    case GN_JARRAY:
        return arr_rest(sh, v);
    default: // EMPTY, WS, ANYBYTES (and nothing else sits on top)
        return 0;
    }
}

// What a frame's node still needs once the frame above it (its current child) completes.
static int64_t after_child(struct gl_short *sh, const struct gl_mstate *s,
                           const struct gl_mframe *v)
{
    const struct gl_gnode *n = &sh->ir->nodes[v->node];
    switch (n->kind) {
    case GN_SEQ: {
        int64_t c = 0;
        for (int32_t k = (int32_t)v->a; k < n->u.list.n; k++)
            c = add(c, sh->tab[n->u.list.kids[k]]);
        return c;
    }
    case GN_REPEAT: {
        int64_t item = sh->tab[n->u.rep.kid], sep = n->u.rep.sep >= 0 ? sh->tab[n->u.rep.sep] : 0;
        int64_t more = (int64_t)n->u.rep.min - ((int64_t)v->a + 1);
        int64_t c = more > 0 ? mul(add(item, sep), more) : 0;
        return v->phase == GL_MF_REP_SEP ? add(item, c) : c;
    }
    case GN_JOBJECT:
        return obj_rest(sh, s, v);
    case GN_JARRAY:
        return arr_rest(sh, v);
    default:
        return GL_SHORT_INF;
    }
}

static int64_t state_rest(struct gl_short *sh, const struct gl_mstate *s, int any_only);

// Some thread of s is inside an escape in an object key.
static int key_escape(struct gl_short *sh, const struct gl_mstate *s)
{
    uint32_t th = 0;
    int n;
    while ((n = gl_mstate_thread_frames(s, &th, sh->fr, 1)) != -1)
        if (n != 0 && sh->ir->nodes[sh->fr[0].node].kind == GN_JOBJECT && // -2: deeper, top read
            sh->fr[0].phase == GL_MF_OBJ_KEY && sh->fr[0].esc)
            return 1;
    return 0;
}

// A key escape decides which character the key gets, so the key's rest cannot be read off the
// frame (the declared names it may still become depend on it). Instead s is stepped through each
// way of ending the escape that yields one printable ASCII character (a one-letter escape, or
// \u00XX, whose digits read so far must agree: the step refuses the others), and the value is
// the cheapest such ending plus the rest after it. Every candidate is a real completion, so the
// value never falls below the true one; it is exact unless the cheapest key needs a non-ASCII
// or control character from this escape (then it is an upper bound; GL_SHORT_INF when no
// candidate steps, e.g. after a high-surrogate's digits).
static int64_t esc_rest(struct gl_short *sh, const struct gl_mstate *s)
{
    static const char letters[] = "\"\\/bfnrt";
    int64_t best = GL_SHORT_INF;
    sh->in_esc = 1;
    for (int c = 0; c < (int)sizeof letters - 1 + 95; c++) {
        char buf[8];
        int len;
        if (c < (int)sizeof letters - 1) {
            buf[0] = letters[c];
            len = 1;
        } else {
            len = snprintf(buf, sizeof buf, "u%04x", 0x20 + c - ((int)sizeof letters - 1));
        }
        // The same ending from wherever the escape is: skip what it has read ('\\', 'u', digits).
        for (int skip = 0; skip < len; skip++) {
            gl_mstate_copy(sh->esc, s);
            int ok = 1;
            for (int k = skip; k < len && ok; k++)
                ok = gl_mstate_advance_byte(sh->esc, (uint8_t)buf[k]);
            if (ok && !key_escape(sh, sh->esc))
                best = min64(best, add(mul(len - skip, sh->wb), state_rest(sh, sh->esc, 0)));
        }
    }
    sh->in_esc = 0;
    return best;
}

// The minimum over the threads of s (only those whose top frame is GN_ANYBYTES when any_only).
static int64_t state_rest(struct gl_short *sh, const struct gl_mstate *s, int any_only)
{
    if (!any_only && !sh->in_esc && key_escape(sh, s))
        return esc_rest(sh, s);
    int64_t best = GL_SHORT_INF;
    uint32_t th = 0;
    for (;;) {
        int n = gl_mstate_thread_frames(s, &th, sh->fr, MAX_FRAMES);
        if (n == -1)
            break;
        if (n < 0 || (any_only && (n == 0 || sh->ir->nodes[sh->fr[0].node].kind != GN_ANYBYTES)))
            continue; // deeper than we look: not counted (never a lower value)
        if (n == 0)
            return 0; // a complete document
        int64_t c = top_rest(sh, s, &sh->fr[0]);
        for (int k = 1; k < n && c < best; k++)
            c = add(c, after_child(sh, s, &sh->fr[k]));
        best = min64(best, c);
    }
    return best;
}

int64_t gl_short_state(struct gl_short *sh, const struct gl_mstate *s)
{
    return state_rest(sh, s, 0);
}

// ---------------------------------------------------------------------------------------------
// The budget filter

// Every thread of s sits in GN_ANYBYTES or before a token literal (which takes no plain token).
static int only_free_or_tokens(struct gl_short *sh, const struct gl_mstate *s)
{
    uint32_t th = 0;
    for (;;) {
        int n = gl_mstate_thread_frames(s, &th, sh->fr, 1);
        if (n == -1)
            return 1;
        if (n == 0)
            return 0;
        enum gl_gnode_kind k = sh->ir->nodes[sh->fr[0].node].kind;
        if (k != GN_ANYBYTES && k != GN_TOKEN)
            return 0;
    }
}

// How plain tokens are judged without stepping each one.
enum plain_mode {
    P_EACH, // stepped one by one
    P_FREE, // a free-text thread stays where it is: cost s0, its rest (exact when only free-text
            // threads take plain tokens, else an upper bound, used only when within the budget)
    P_STR,  // every thread in a free string value: cost = s0 + bytes owed - characters needed
};

// Cost after plain token p[0..n) in P_STR (the string's rest changes alike in every thread), or
// -1 when the token is not plain text (quote, backslash, control byte: stepped instead).
static int64_t str_delta(const uint8_t *p, size_t n, int64_t s0, int32_t min_more)
{
    int64_t leads = 0, owed = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        if (b == '"' || b == '\\' || b < 0x20)
            return -1;
        if (b < 0x80 || b >= 0xC0) {
            leads++;
            owed = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
        } else if (owed > 0) {
            owed--;
        }
    }
    return s0 + owed - (leads < min_more ? leads : min_more);
}

// Cost after token id from s: 0 when it ends the document (a stop token).
static int64_t token_cost(struct gl_short *sh, const struct gl_gvocab *v, const struct gl_mstate *s,
                          struct gl_mstate *tmp, int32_t id, const int32_t *stop, int n_stop)
{
    gl_mstate_copy(tmp, s);
    if (gl_mstate_advance_token(tmp, id))
        return gl_short_state(sh, tmp);
    for (int i = 0; i < n_stop; i++)
        if (stop[i] == id)
            return 0; // in the mask, so the document may end here
    if (gl_gvocab_is_excluded(v, id))
        return GL_SHORT_INF;
    size_t len;
    const uint8_t *p = gl_gvocab_token(v, id, &len);
    for (size_t i = 0; i < len; i++)
        if (!gl_mstate_advance_byte(tmp, p[i]))
            return GL_SHORT_INF;
    return gl_short_state(sh, tmp);
}

struct filt {
    enum plain_mode mode;
    int64_t s0;
    int32_t min_more;
};

static int64_t judged(struct gl_short *sh, const struct gl_gvocab *v, const struct gl_mstate *s,
                      struct gl_mstate *tmp, const struct filt *f, int32_t id, const int32_t *stop,
                      int n_stop)
{
    if (f->mode != P_EACH && !gl_gvocab_is_excluded(v, id)) {
        int stopper = 0;
        for (int i = 0; i < n_stop; i++)
            stopper |= stop[i] == id;
        if (!stopper) {
            if (f->mode == P_FREE)
                return f->s0;
            size_t len;
            const uint8_t *p = gl_gvocab_token(v, id, &len);
            int64_t c = str_delta(p, len, f->s0, f->min_more);
            if (c >= 0)
                return c;
        }
    }
    return token_cost(sh, v, s, tmp, id, stop, n_stop);
}

// The non-plain tokens of v (sh->sp_ids); 0 when out of memory.
static int special_ids(struct gl_short *sh, const struct gl_gvocab *v)
{
    if (sh->sp_v == v)
        return 1;
    gl_free(sh->sp_ids);
    sh->sp_ids = NULL;
    sh->n_sp = 0;
    int32_t n = gl_gvocab_n_vocab(v), cap = 0;
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const uint8_t *p = gl_gvocab_token(v, id, &len);
        int plain = !gl_gvocab_is_excluded(v, id) && p;
        for (size_t i = 0; plain && i < len; i++)
            plain = p[i] != '"' && p[i] != '\\' && p[i] >= 0x20;
        if (plain)
            continue;
        if (sh->n_sp == cap) {
            cap = cap ? cap * 2 : 1024;
            int32_t *ids = gl_realloc(sh->sp_ids, (size_t)cap * sizeof *ids);
            if (!ids)
                return 0;
            sh->sp_ids = ids;
        }
        sh->sp_ids[sh->n_sp++] = id;
    }
    sh->sp_v = v;
    return 1;
}

static void judge_into(struct gl_short *sh, const struct gl_gvocab *v, const struct gl_mstate *s,
                       struct gl_mstate *tmp, const struct filt *f, int32_t id, uint32_t *out,
                       int64_t budget, const int32_t *stop, int n_stop)
{
    if ((out[id / 32] >> (id % 32) & 1) && judged(sh, v, s, tmp, f, id, stop, n_stop) > budget)
        out[id / 32] &= ~(1u << (id % 32));
}

// Where every plain token fits (free text within the budget: each costs s0; a string value with
// s0 + 3 within it: a plain token moves the cost by at most the 3 bytes a split character owes),
// only the non-plain tokens and the stop tokens need judging: out = mask minus those that do not
// fit. 1 when done (some token kept); 0: the caller runs the full pass.
static int fast_path(struct gl_short *sh, const struct gl_gvocab *v, const struct gl_mstate *s,
                     struct gl_mstate *tmp, const struct filt *f, uint32_t *mask, uint32_t *out,
                     size_t words, int64_t budget, const int32_t *stop, int n_stop)
{
    if (!((f->mode == P_FREE && f->s0 <= budget) || (f->mode == P_STR && f->s0 + 3 <= budget)) ||
        !special_ids(sh, v))
        return 0;
    memcpy(out, mask, words * sizeof *out);
    for (int32_t k = 0; k < sh->n_sp; k++)
        judge_into(sh, v, s, tmp, f, sh->sp_ids[k], out, budget, stop, n_stop);
    for (int k = 0; k < n_stop; k++)
        if (stop[k] >= 0 && (size_t)stop[k] < words * 32)
            judge_into(sh, v, s, tmp, f, stop[k], out, budget, stop, n_stop);
    int any = 0;
    for (size_t w = 0; w < words && !any; w++)
        any = out[w] != 0;
    if (any)
        memcpy(mask, out, words * sizeof *out);
    return any;
}

static int g_filter_ref; // gl_short_filter_reference

void gl_short_filter_reference(int on)
{
    g_filter_ref = on;
}

// The full pass's walk (P_EACH): the tokens s accepts by bytes are judged in one trie walk
// (gl_mask_each_token) instead of one by one from s; the few ids that token_cost treats
// otherwise (a token literal s expects, a stop id) are left to judged().
#define EACH_LIT_MAX  64
#define EACH_STOP_MAX 16

// One judged token of the full pass: cost c of id, kept in out when it fits the budget.
static void take(uint32_t *out, int32_t id, int64_t c, int64_t budget, int64_t *best, int *kept)
{
    *best = min64(*best, c);
    if (c <= budget) {
        out[id / 32] |= 1u << (id % 32);
        *kept = 1;
    }
}

struct each {
    struct gl_short *sh;
    uint32_t *out;
    int64_t budget, best;
    int kept;
    const int32_t *skip; // stop ids, then the literal ids s expects
    int n_skip;
};

static void each_token(void *user, int32_t id, const struct gl_mstate *after)
{
    struct each *e = user;
    for (int i = 0; i < e->n_skip; i++)
        if (e->skip[i] == id)
            return;
    take(e->out, id, gl_short_state(e->sh, after), e->budget, &e->best, &e->kept);
}

// The full pass by the walk; 0 when it does not apply (too many expected literals: the caller
// judges every token). Ids of the mask that the walk does not reach and that are not judged
// here have cost GL_SHORT_INF, as token_cost gives them.
static int walk_pass(struct gl_grammar *g, struct gl_short *sh, const struct gl_gvocab *v,
                     const struct gl_mstate *s, struct gl_mstate *tmp, const struct filt *f,
                     const uint32_t *mask, uint32_t *out, size_t words, int64_t budget,
                     const int32_t *stop, int n_stop, int64_t *best, int *kept)
{
    int32_t skip[EACH_STOP_MAX + EACH_LIT_MAX];
    if (!g || n_stop > EACH_STOP_MAX)
        return 0;
    memcpy(skip, stop, (size_t)n_stop * sizeof *skip);
    int n_lit = gl_mstate_expected_tokens(s, skip + n_stop, EACH_LIT_MAX);
    if (n_lit > EACH_LIT_MAX)
        return 0;
    struct each e = {sh, out, budget, GL_SHORT_INF, 0, skip, n_stop + n_lit};
    gl_mask_each_token(g, v, s, mask, each_token, &e);
    // The ids the walk leaves: excluded ones (specials, by literal or as stop tokens) and the
    // skipped ones.
    for (size_t w = 0; w < words; w++)
        for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
            int32_t id = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
            int skipped = gl_gvocab_is_excluded(v, id);
            for (int i = 0; i < e.n_skip && !skipped; i++)
                skipped = skip[i] == id;
            if (!skipped)
                continue;
            take(out, id, judged(sh, v, s, tmp, f, id, stop, n_stop), budget, &e.best, &e.kept);
        }
    *best = e.best;
    *kept = e.kept;
    return 1;
}

void gl_short_filter(struct gl_grammar *g, struct gl_short *sh, const struct gl_gvocab *v,
                     const struct gl_mstate *s, struct gl_mstate *tmp, uint32_t *mask,
                     int64_t budget, const int32_t *stop, int n_stop)
{
    size_t words = gl_gvocab_mask_words(v);
    uint32_t *out = gl_calloc(words, sizeof *out);
    if (!out)
        return; // unfiltered: never an empty mask
    struct filt f = {P_EACH, 0, 0};
    int32_t mx;
    if (gl_mstate_any_bytes(s)) {
        f.s0 = state_rest(sh, s, 1);
        if (f.s0 <= budget || only_free_or_tokens(sh, s))
            f.mode = P_FREE;
    } else if (gl_mstate_string_fast(s, &f.min_more, &mx)) {
        // Keys are left to the step: a declared name or a repeat may need another byte.
        uint32_t th = 0;
        int keys = 0, n;
        while ((n = gl_mstate_thread_frames(s, &th, sh->fr, 1)) != -1)
            keys |= n != 0 && sh->ir->nodes[sh->fr[0].node].kind == GN_JOBJECT; // -2: top read
        if (!keys) {
            f.mode = P_STR;
            f.s0 = gl_short_state(sh, s);
        }
    }
    if (fast_path(sh, v, s, tmp, &f, mask, out, words, budget, stop, n_stop)) {
        gl_free(out);
        return;
    }
    int64_t best = GL_SHORT_INF;
    int kept = 0;
    if (f.mode != P_EACH || g_filter_ref ||
        !walk_pass(g, sh, v, s, tmp, &f, mask, out, words, budget, stop, n_stop, &best, &kept))
        for (size_t w = 0; w < words; w++)
            for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
                int32_t id = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
                take(out, id, judged(sh, v, s, tmp, &f, id, stop, n_stop), budget, &best, &kept);
            }
    if (!kept && best < GL_SHORT_INF) {
        // Nothing fits (the budget was short from the start): the tokens that come closest.
        for (size_t w = 0; w < words; w++)
            for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
                int32_t id = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
                if (judged(sh, v, s, tmp, &f, id, stop, n_stop) == best)
                    out[w] |= 1u << (id & 31);
            }
        kept = 1;
    }
    if (kept)
        memcpy(mask, out, words * sizeof *out);
    gl_free(out);
}
