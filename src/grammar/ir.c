// SPDX-License-Identifier: MIT
// grammar IR: the arena that owns a grammar graph, the builder the front ends append nodes with,
// and gl_gir_validate, which proves the invariants the matcher relies on (ir.h): indices in
// range, list/string pointers present, and no cycle that can be walked without consuming a byte
// (left recursion), so the matcher's epsilon closure always terminates.
// Nullability is over-approximated (a node that MAY match "" counts as nullable), which can only
// refuse more grammars, never admit a looping one.
#include "grammar/ir.h"

#include "grammar/regex.h"

#include <string.h>

// ---- arena ----

// Chunks are chained; big requests get a chunk of their own.
struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};
struct gl_arena {
    struct arena_chunk *head;
};

#define ARENA_CHUNK (64 * 1024)

struct gl_arena *gl_arena_new(void)
{
    return gl_calloc(1, sizeof(struct gl_arena));
}

void gl_arena_free(struct gl_arena *a)
{
    if (!a)
        return;
    struct arena_chunk *c = a->head;
    while (c) {
        struct arena_chunk *n = c->next;
        gl_free(c);
        c = n;
    }
    gl_free(a);
}

void *gl_arena_alloc(struct gl_arena *a, size_t n)
{
    if (!a)
        return NULL;
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n)
        return NULL;
    struct arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > ARENA_CHUNK / 2 ? need : ARENA_CHUNK;
        if (cap > SIZE_MAX - sizeof *c)
            return NULL;
        struct arena_chunk *nc = gl_malloc(sizeof *nc + cap);
        if (!nc)
            return NULL;
        nc->used = 0;
        nc->cap = cap;
        if (c && need > ARENA_CHUNK / 2) {
            // A big block goes behind the current chunk so its free space stays usable.
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, n);
    return p;
}

uint8_t *gl_arena_memdup(struct gl_arena *a, const void *p, size_t n)
{
    uint8_t *d = gl_arena_alloc(a, n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

// ---- builder ----

gl_status gl_gir_builder_init(struct gl_gir_builder *b, struct gl_gir *ir, int32_t max_nodes,
                              struct gl_err *err)
{
    memset(b, 0, sizeof *b);
    memset(ir, 0, sizeof *ir);
    ir->root = -1;
    ir->ws_max = 16; // the front end sets the request's value
    ir->arena = gl_arena_new();
    if (!ir->arena)
        return gl_err_set(err, GL_E_NOMEM, "grammar: out of memory creating the arena");
    b->ir = ir;
    b->max_nodes = max_nodes > 0 ? max_nodes : 1000000;
    b->err = err;
    return GL_OK;
}

// Grows the node array (in the arena: the old copy is left behind, at most doubling the bytes).
static int grow_nodes(struct gl_gir_builder *b)
{
    struct gl_gir *ir = b->ir;
    if (ir->n_nodes >= b->max_nodes) {
        gl_err_set(b->err, GL_E_LIMIT, "grammar: more than %d nodes", (int)b->max_nodes);
        return 0;
    }
    if (ir->n_nodes < b->cap_nodes)
        return 1;
    int64_t cap = b->cap_nodes ? (int64_t)b->cap_nodes * 2 : 64;
    if (cap > b->max_nodes)
        cap = b->max_nodes;
    struct gl_gnode *nn = gl_arena_alloc(ir->arena, (size_t)cap * sizeof *nn);
    if (!nn) {
        gl_err_set(b->err, GL_E_NOMEM, "grammar: out of memory for %lld nodes", (long long)cap);
        return 0;
    }
    if (ir->n_nodes)
        memcpy(nn, ir->nodes, (size_t)ir->n_nodes * sizeof *nn);
    ir->nodes = nn;
    b->cap_nodes = (int32_t)cap;
    return 1;
}

int32_t gl_gir_add(struct gl_gir_builder *b, const struct gl_gnode *n)
{
    if (!grow_nodes(b))
        return -1;
    b->ir->nodes[b->ir->n_nodes] = *n;
    return b->ir->n_nodes++;
}

int32_t gl_gir_add_bytes(struct gl_gir_builder *b, const void *p, size_t len)
{
    if (len > UINT32_MAX) {
        gl_err_set(b->err, GL_E_LIMIT, "grammar: literal of %zu bytes", len);
        return -1;
    }
    struct gl_gnode n = {.kind = GN_BYTES};
    if (len) {
        n.u.bytes.p = gl_arena_memdup(b->ir->arena, p, len);
        if (!n.u.bytes.p) {
            gl_err_set(b->err, GL_E_NOMEM, "grammar: out of memory for a %zu-byte literal", len);
            return -1;
        }
    }
    n.u.bytes.len = (uint32_t)len;
    return gl_gir_add(b, &n);
}

int32_t gl_gir_add_list(struct gl_gir_builder *b, enum gl_gnode_kind k, const int32_t *kids,
                        int32_t n)
{
    GL_ASSERT(k == GN_SEQ || k == GN_ALT);
    GL_ASSERT(n >= 0);
    struct gl_gnode node = {.kind = k};
    if (n) {
        int32_t *c = gl_arena_alloc(b->ir->arena, (size_t)n * sizeof *c);
        if (!c) {
            gl_err_set(b->err, GL_E_NOMEM, "grammar: out of memory for a %d-item list", (int)n);
            return -1;
        }
        memcpy(c, kids, (size_t)n * sizeof *c);
        node.u.list.kids = c;
    }
    node.u.list.n = n;
    return gl_gir_add(b, &node);
}

int32_t gl_gir_reserve(struct gl_gir_builder *b)
{
    struct gl_gnode n = {.kind = GN_EMPTY};
    return gl_gir_add(b, &n);
}

void gl_gir_set(struct gl_gir_builder *b, int32_t idx, const struct gl_gnode *n)
{
    GL_ASSERT(idx >= 0 && idx < b->ir->n_nodes);
    b->ir->nodes[idx] = *n;
}

int32_t gl_gir_add_regex(struct gl_gir_builder *b, struct gl_regex *re)
{
    struct gl_gir *ir = b->ir;
    if (ir->n_regexes >= b->cap_regexes) {
        int32_t cap = b->cap_regexes ? b->cap_regexes * 2 : 16;
        struct gl_regex **nr = gl_arena_alloc(ir->arena, (size_t)cap * sizeof *nr);
        if (!nr) {
            gl_regex_free(re);
            gl_err_set(b->err, GL_E_NOMEM, "grammar: out of memory for %d regexes", (int)cap);
            return -1;
        }
        if (ir->n_regexes)
            memcpy(nr, ir->regexes, (size_t)ir->n_regexes * sizeof *nr);
        ir->regexes = nr;
        b->cap_regexes = cap;
    }
    ir->regexes[ir->n_regexes] = re;
    return ir->n_regexes++;
}

void gl_gir_free(struct gl_gir *ir)
{
    if (!ir)
        return;
    for (int32_t i = 0; i < ir->n_regexes; i++)
        gl_regex_free(ir->regexes[i]);
    gl_arena_free(ir->arena);
    memset(ir, 0, sizeof *ir);
    ir->root = -1;
}

// ---- validation ----

static const char *kind_name(enum gl_gnode_kind k)
{
    static const char *const names[] = {"EMPTY",   "BYTES",  "REGEX",   "TOKEN",   "SEQ",
                                        "ALT",     "REPEAT", "WS",      "JSTRING", "JNUMBER",
                                        "JOBJECT", "JARRAY", "ANYBYTES"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static int node_ok(const struct gl_gir *ir, int32_t i)
{
    return i >= 0 && i < ir->n_nodes;
}

static gl_status bad_ref(const struct gl_gir *ir, int32_t at, const char *what, int32_t v,
                         struct gl_err *err)
{
    return gl_err_set(err, GL_E_INVAL, "grammar: node %d (%s): %s %d out of range (%d nodes)",
                      (int)at, kind_name(ir->nodes[at].kind), what, (int)v, (int)ir->n_nodes);
}

static gl_status check_str(const struct gl_gir *ir, int32_t i, const struct gl_gstr *s,
                           struct gl_err *err)
{
    if (s->n_regex < 0 || (s->n_regex && !s->regexes))
        return gl_err_set(err, GL_E_INVAL, "grammar: node %d: bad regex list", (int)i);
    for (int32_t k = 0; k < s->n_regex; k++)
        if (s->regexes[k] < 0 || s->regexes[k] >= ir->n_regexes || !ir->regexes[s->regexes[k]])
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: regex %d out of range", (int)i,
                              (int)s->regexes[k]);
    if (s->min_chars < 0 || (s->max_chars >= 0 && s->max_chars < s->min_chars))
        return gl_err_set(err, GL_E_INVAL, "grammar: node %d: string length bounds %d..%d", (int)i,
                          (int)s->min_chars, (int)s->max_chars);
    return GL_OK;
}

static gl_status check_node(const struct gl_gir *ir, int32_t i, struct gl_err *err)
{
    const struct gl_gnode *n = &ir->nodes[i];
    switch (n->kind) {
    case GN_EMPTY:
    case GN_WS:
    case GN_ANYBYTES:
        return GL_OK;
    case GN_BYTES:
        if (n->u.bytes.len && !n->u.bytes.p)
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: literal without bytes", (int)i);
        return GL_OK;
    case GN_REGEX:
        if (n->u.regex.re < 0 || n->u.regex.re >= ir->n_regexes || !ir->regexes[n->u.regex.re])
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: regex %d out of range", (int)i,
                              (int)n->u.regex.re);
        return GL_OK;
    case GN_TOKEN:
        if (n->u.token.id < 0)
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: token id %d", (int)i,
                              (int)n->u.token.id);
        return GL_OK;
    case GN_SEQ:
    case GN_ALT:
        if (n->u.list.n < 0 || (n->u.list.n && !n->u.list.kids))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: bad list", (int)i);
        for (int32_t k = 0; k < n->u.list.n; k++)
            if (!node_ok(ir, n->u.list.kids[k]))
                return bad_ref(ir, i, "child", n->u.list.kids[k], err);
        return GL_OK;
    case GN_REPEAT:
        if (!node_ok(ir, n->u.rep.kid))
            return bad_ref(ir, i, "child", n->u.rep.kid, err);
        if (n->u.rep.sep != -1 && !node_ok(ir, n->u.rep.sep))
            return bad_ref(ir, i, "separator", n->u.rep.sep, err);
        if (n->u.rep.min < 0 || (n->u.rep.max >= 0 && n->u.rep.max < n->u.rep.min))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: repeat bounds %d..%d", (int)i,
                              (int)n->u.rep.min, (int)n->u.rep.max);
        return GL_OK;
    case GN_JSTRING:
        return check_str(ir, i, &n->u.str, err);
    case GN_JNUMBER:
        if ((n->u.num.has_min && n->u.num.min != n->u.num.min) ||
            (n->u.num.has_max && n->u.num.max != n->u.num.max))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: NaN number bound", (int)i);
        return GL_OK;
    case GN_JOBJECT: {
        const struct gl_gobj *o = &n->u.obj;
        if (o->n_props < 0 || (o->n_props && !o->props) || o->n_patterns < 0 ||
            (o->n_patterns && !o->patterns))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: bad property lists", (int)i);
        for (int32_t k = 0; k < o->n_props; k++) {
            const struct gl_gprop *p = &o->props[k];
            if (!node_ok(ir, p->value))
                return bad_ref(ir, i, "property value", p->value, err);
            if (p->name.len && !p->name.p)
                return gl_err_set(err, GL_E_INVAL, "grammar: node %d: property %d has no name",
                                  (int)i, (int)k);
            if (k > 0) {
                const struct gl_gbytes *a = &o->props[k - 1].name, *c = &p->name;
                uint32_t m = a->len < c->len ? a->len : c->len;
                int r = m ? memcmp(a->p, c->p, m) : 0;
                if (r > 0 || (r == 0 && a->len >= c->len))
                    return gl_err_set(err, GL_E_INVAL,
                                      "grammar: node %d: properties %d and %d not sorted/unique",
                                      (int)i, (int)k - 1, (int)k);
            }
        }
        for (int32_t k = 0; k < o->n_patterns; k++) {
            const struct gl_gpattern_prop *p = &o->patterns[k];
            if (p->re < 0 || p->re >= ir->n_regexes || !ir->regexes[p->re])
                return gl_err_set(err, GL_E_INVAL, "grammar: node %d: pattern regex %d", (int)i,
                                  (int)p->re);
            if (!node_ok(ir, p->value))
                return bad_ref(ir, i, "pattern value", p->value, err);
        }
        if (o->additional != -1 && !node_ok(ir, o->additional))
            return bad_ref(ir, i, "additional", o->additional, err);
        if (o->min_props < 0 || (o->max_props >= 0 && o->max_props < o->min_props))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: property count bounds %d..%d",
                              (int)i, (int)o->min_props, (int)o->max_props);
        if (o->order)
            for (int32_t k = 0; k < o->n_props; k++)
                if (o->order[k] < 0 || o->order[k] >= o->n_props)
                    return gl_err_set(err, GL_E_INVAL, "grammar: node %d: order[%d] = %d", (int)i,
                                      (int)k, (int)o->order[k]);
        return GL_OK;
    }
    case GN_JARRAY: {
        const struct gl_garr *a = &n->u.arr;
        if (a->n_prefix < 0 || (a->n_prefix && !a->prefix))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: bad prefix list", (int)i);
        for (int32_t k = 0; k < a->n_prefix; k++)
            if (!node_ok(ir, a->prefix[k]))
                return bad_ref(ir, i, "prefix item", a->prefix[k], err);
        if (a->items != -1 && !node_ok(ir, a->items))
            return bad_ref(ir, i, "items", a->items, err);
        if (a->min_items < 0 || (a->max_items >= 0 && a->max_items < a->min_items))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: item count bounds %d..%d", (int)i,
                              (int)a->min_items, (int)a->max_items);
        // The matcher finds the unique array's frame right below its item string's (match.c).
        if (a->unique && (a->n_prefix || a->items < 0 || ir->nodes[a->items].kind != GN_JSTRING ||
                          !ir->nodes[a->items].u.str.uniq))
            return gl_err_set(err, GL_E_INVAL, "grammar: node %d: uniqueItems over non-strings",
                              (int)i);
        return GL_OK;
    }
    }
    return gl_err_set(err, GL_E_INVAL, "grammar: node %d: unknown kind %d", (int)i, (int)n->kind);
}

// Over-approximated nullability, to a fixed point (monotone, so it converges in <= n passes;
// each pass is linear in the graph).
static void compute_nullable(const struct gl_gir *ir, uint8_t *nl)
{
    memset(nl, 0, (size_t)ir->n_nodes);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t i = 0; i < ir->n_nodes; i++) {
            if (nl[i])
                continue;
            const struct gl_gnode *n = &ir->nodes[i];
            int v = 0;
            switch (n->kind) {
            case GN_EMPTY:
            case GN_WS:
            case GN_ANYBYTES:
                v = 1;
                break;
            case GN_REGEX: {
                struct gl_regex *re = ir->regexes[n->u.regex.re];
                v = gl_regex_is_accept(re, gl_regex_start(re));
                break;
            }
            case GN_BYTES:
                v = n->u.bytes.len == 0;
                break;
            case GN_JSTRING:
                v = n->u.str.raw && n->u.str.min_chars == 0;
                break;
            case GN_SEQ:
                v = 1;
                for (int32_t k = 0; k < n->u.list.n && v; k++)
                    v = nl[n->u.list.kids[k]];
                break;
            case GN_ALT:
                for (int32_t k = 0; k < n->u.list.n && !v; k++)
                    v = nl[n->u.list.kids[k]];
                break;
            case GN_REPEAT:
                v = n->u.rep.min == 0 || nl[n->u.rep.kid];
                break;
            default:
                break;
            }
            if (v) {
                nl[i] = 1;
                changed = 1;
            }
        }
    }
}

// Calls f for every node the matcher may enter from i without consuming a byte.
#define FOR_EPS_KIDS(ir, nl, i, body)                                                              \
    do {                                                                                           \
        const struct gl_gnode *n_ = &(ir)->nodes[i];                                               \
        if (n_->kind == GN_SEQ) {                                                                  \
            for (int32_t k_ = 0; k_ < n_->u.list.n; k_++) {                                        \
                int32_t kid = n_->u.list.kids[k_];                                                 \
                body;                                                                              \
                if (!(nl)[kid])                                                                    \
                    break;                                                                         \
            }                                                                                      \
        } else if (n_->kind == GN_ALT) {                                                           \
            for (int32_t k_ = 0; k_ < n_->u.list.n; k_++) {                                        \
                int32_t kid = n_->u.list.kids[k_];                                                 \
                body;                                                                              \
            }                                                                                      \
        } else if (n_->kind == GN_REPEAT) {                                                        \
            {                                                                                      \
                int32_t kid = n_->u.rep.kid;                                                       \
                body;                                                                              \
            }                                                                                      \
            if (n_->u.rep.sep >= 0) {                                                              \
                int32_t kid = n_->u.rep.sep;                                                       \
                body;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

gl_status gl_gir_validate(const struct gl_gir *ir, struct gl_err *err)
{
    if (!ir || !ir->nodes || ir->n_nodes <= 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: empty grammar");
    if (!node_ok(ir, ir->root))
        return gl_err_set(err, GL_E_INVAL, "grammar: root %d out of range (%d nodes)",
                          (int)ir->root, (int)ir->n_nodes);
    if (ir->ws_max < 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: ws_max %d < 0", (int)ir->ws_max);
    for (int32_t i = 0; i < ir->n_nodes; i++) {
        gl_status st = check_node(ir, i, err);
        if (st != GL_OK)
            return st;
    }
    // Left recursion: a cycle in the "entered without consuming" graph. Iterative DFS with
    // colours (0 new, 1 on stack, 2 done); the explicit stack keeps hostile depths off the C
    // stack. A REPEAT re-entering its own child is handled by the matcher (an iteration that
    // matched "" ends the repetition), so only cycles through distinct nodes matter.
    size_t n = (size_t)ir->n_nodes;
    uint8_t *nl = gl_malloc(n), *col = gl_calloc(n, 1);
    int32_t *stk = gl_malloc(n * sizeof *stk), *pos = gl_malloc(n * sizeof *pos);
    gl_status st = GL_OK;
    if (!nl || !col || !stk || !pos) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: out of memory validating %d nodes",
                        (int)ir->n_nodes);
        goto out;
    }
    compute_nullable(ir, nl);
    for (int32_t s = 0; s < ir->n_nodes && st == GL_OK; s++) {
        if (col[s])
            continue;
        int32_t sp = 0;
        stk[sp] = s;
        pos[sp] = 0;
        col[s] = 1;
        sp++;
        while (sp > 0 && st == GL_OK) {
            int32_t v = stk[sp - 1];
            int32_t want = pos[sp - 1], seen = 0, next = -1;
            FOR_EPS_KIDS(ir, nl, v, {
                if (next < 0 && seen++ == want)
                    next = kid;
            });
            if (next < 0) {
                col[v] = 2;
                sp--;
                continue;
            }
            pos[sp - 1]++;
            if (col[next] == 1) {
                st = gl_err_set(err, GL_E_INVAL,
                                "grammar: left recursion through node %d (%s): a cycle that "
                                "consumes no input",
                                (int)next, kind_name(ir->nodes[next].kind));
            } else if (col[next] == 0) {
                col[next] = 1;
                stk[sp] = next;
                pos[sp] = 0;
                sp++;
            }
        }
    }
out:
    gl_free(nl);
    gl_free(col);
    gl_free(stk);
    gl_free(pos);
    return st;
}
