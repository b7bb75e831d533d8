// SPDX-License-Identifier: MIT
// Small front ends: the regex kind (the whole output matches one regex),
// the choice kind (a JSON array of strings; the output is exactly one of them, compiled as one
// alternation regex so a long list is one deterministic DFA, not one parse thread per entry) and
// the forced ATEM tool call (grammar.h, gl_grammar_compile_atem_tools; arch doc §5.3), and the
// whole assistant turn (GL_GRAMMAR_ATEM_TURN: reasoning, then the answer or the tool calls).
// Tool-call parameters: each declared property at most once, required ones present, in any order
// (a DAG over the set of parameters already written, exact for up to ATEM_SUBSET_MAX
// properties) or, above that or with opts.ordered_keys, in schema order (the order the template's
// worked example and the renderer use). Forced calls never write undeclared parameters, even
// when additionalProperties allows them, never write a raw string value that the ATEM parser
// would read back as JSON ("42", "true"), and keep numbers within what its JSON reader (jansson)
// can read: restrictions of the language, never widenings.
#include "grammar/frontend.h"
#include "grammar/regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATEM_SUBSET_MAX 8 // 2^8 parameter-set states at most

static int32_t max_states(const struct gl_gctx *c)
{
    return c && c->opts ? c->opts->max_regex_states : 0;
}

static gl_status builder_failed(struct gl_gir_builder *b, struct gl_err *err)
{
    if (b->err && b->err != err && err)
        *err = *b->err;
    if (err && err->code != GL_OK)
        return err->code;
    return gl_err_set(err, GL_E_LIMIT, "grammar: too many nodes");
}

// Compiles src as a regex into a GN_REGEX node.
static gl_status regex_node(struct gl_gir_builder *b, struct gl_gctx *c, const char *src,
                            size_t len, int flags, int32_t *out, struct gl_err *err)
{
    struct gl_regex *re = NULL;
    gl_status st = gl_regex_compile(&re, src, len, flags, max_states(c), err);
    if (st != GL_OK)
        return st;
    int32_t ri = gl_gir_add_regex(b, re);
    if (ri < 0)
        return builder_failed(b, err);
    *out = gl_gir_add(b, &(struct gl_gnode){.kind = GN_REGEX, .u.regex.re = ri});
    return *out < 0 ? builder_failed(b, err) : GL_OK;
}

gl_status gl_fe_regex_build(struct gl_gir_builder *b, struct gl_gctx *c, const char *src,
                            size_t len, int32_t *root, struct gl_err *err)
{
    return regex_node(b, c, src ? src : "", src ? len : 0, 0, root, err);
}

gl_status gl_fe_choice_build(struct gl_gir_builder *b, struct gl_gctx *c, const char *src,
                             size_t len, int32_t *root, struct gl_err *err)
{
    json_error_t je;
    json_t *arr = json_loadb(src ? src : "", src ? len : 0, JSON_ALLOW_NUL, &je);
    if (!arr)
        return gl_err_set(err, GL_E_INVAL, "choice: invalid JSON at byte %d: %s", je.position,
                          je.text);
    gl_status st = GL_OK;
    char *re = NULL;
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        st = gl_err_set(err, GL_E_INVAL, "choice: expected a non-empty JSON array of strings");
        goto out;
    }
    // "(?:" + escaped entries joined by '|' + ")"
    size_t need = 5;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *s = json_array_get(arr, i);
        if (!json_is_string(s)) {
            st = gl_err_set(err, GL_E_INVAL, "choice: element %zu is not a string", i);
            goto out;
        }
        need += gl_regex_escape(json_string_value(s), json_string_length(s), NULL, 0) + 1;
    }
    re = gl_malloc(need + 1);
    if (!re) {
        st = gl_err_set(err, GL_E_NOMEM, "choice: out of memory");
        goto out;
    }
    size_t n = 0;
    memcpy(re, "(?:", 3);
    n = 3;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *s = json_array_get(arr, i);
        if (i)
            re[n++] = '|';
        n += gl_regex_escape(json_string_value(s), json_string_length(s), re + n, need + 1 - n);
        if ((st = gl_gctx_check_time(c, err)) != GL_OK)
            goto out;
    }
    re[n++] = ')';
    re[n] = 0;
    GL_ASSERT(n <= need);
    st = regex_node(b, c, re, n, 0, root, err);
out:
    gl_free(re);
    json_decref(arr);
    return st;
}

// ---- forced ATEM tool calls ----

struct atem_param {
    const char *key;
    json_t *schema;
    int required;
    int32_t item; // SEQ(KEY "\">", VALUE, "</atem:parameter>\n")
};

struct atem_ctx {
    struct gl_gir_builder *b;
    struct gl_gctx *c;
    struct gl_err *err;
    int32_t guard;    // regex index of RAW_GUARD_RE in the IR, -1 until first needed
    int tool;         // index in the tools array
    const char *name; // function name
    char ptr[512];    // JSON pointer of the parameters schema
};

static gl_status tool_err(struct atem_ctx *a, gl_status code, const char *fmt, ...) GL_PRINTF(3, 4);
static gl_status tool_err(struct atem_ctx *a, gl_status code, const char *fmt, ...)
{
    char msg[GL_ERR_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gl_err_set(a->err, code, "tools[%d] '%.64s': %s", a->tool, a->name ? a->name : "", msg);
}

// Prefixes an error that a nested builder reported with the tool's index and name.
static gl_status tool_wrap(struct atem_ctx *a, gl_status st)
{
    if (!a->err || strncmp(a->err->msg, "tools[", 6) == 0)
        return st;
    char msg[GL_ERR_MSG_CAP];
    memcpy(msg, a->err->msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    return tool_err(a, st, "%s", msg);
}

static int32_t add_bytes_str(struct gl_gir_builder *b, const char *s)
{
    return gl_gir_add_bytes(b, s, strlen(s));
}

// RFC 6901 escaping of one reference token appended to dst (cap bytes).
static void ptr_append(char *dst, size_t cap, const char *tok)
{
    size_t n = strlen(dst);
    if (n + 1 < cap)
        dst[n++] = '/';
    for (const char *q = tok; *q && n + 2 < cap; q++) {
        if (*q == '~' || *q == '/') {
            dst[n++] = '~';
            dst[n++] = *q == '~' ? '0' : '1';
        } else {
            dst[n++] = *q;
        }
    }
    dst[n < cap ? n : cap - 1] = 0;
}

// A name written into the header (` to=NAME`) or an attribute (name="KEY") must survive the
// ATEM parser: non-empty, no '"', '<', '>', whitespace or control bytes.
static int atem_name_ok(const char *s, int header)
{
    if (!s || !*s)
        return 0;
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q < 0x20 || *q == '"' || *q == '<' || *q == '>' || *q == 0x7F)
            return 0;
        if (header && *q == ' ')
            return 0;
    }
    return 1;
}

static int is_one_of(const char *k, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(k, *list) == 0)
            return 1;
    return 0;
}

// Keywords on the parameters object that forced calls cannot enforce.
static const char *const unsupported_kw[] = {"patternProperties",
                                             "propertyNames",
                                             "dependentRequired",
                                             "dependentSchemas",
                                             "dependencies",
                                             "allOf",
                                             "anyOf",
                                             "oneOf",
                                             "not",
                                             "if",
                                             "then",
                                             "else",
                                             "$ref",
                                             "$dynamicRef",
                                             "$recursiveRef",
                                             "enum",
                                             "const",
                                             "items",
                                             "prefixItems",
                                             "contains",
                                             NULL};

static gl_status check_params_keywords(struct atem_ctx *a, json_t *params, int subset_mode)
{
    const char *k;
    json_t *v;
    json_object_foreach(params, k, v)
    {
        int bad = is_one_of(k, unsupported_kw);
        if (strcmp(k, "patternProperties") == 0 && json_is_object(v) && json_object_size(v) == 0)
            bad = 0;
        if (!subset_mode && (strcmp(k, "minProperties") == 0 || strcmp(k, "maxProperties") == 0))
            bad = 1;
        if (strcmp(k, "type") == 0) {
            int obj = json_is_string(v) && strcmp(json_string_value(v), "object") == 0;
            if (json_is_array(v))
                for (size_t i = 0; i < json_array_size(v) && !obj; i++) {
                    json_t *t = json_array_get(v, i);
                    obj = json_is_string(t) && strcmp(json_string_value(t), "object") == 0;
                }
            if (!obj)
                return tool_err(a, GL_E_INVAL, "parameters at %s must be an object schema", a->ptr);
        }
        if (!bad)
            continue;
        if (a->c && a->c->opts && a->c->opts->lenient) {
            char p[600];
            snprintf(p, sizeof p, "%s", a->ptr);
            ptr_append(p, sizeof p, k);
            if (!gl_gctx_warn(a->c, k, p))
                return gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
            continue;
        }
        return tool_err(a, GL_E_UNSUPPORTED,
                        "keyword '%s' at %s is not supported for forced tool calls", k, a->ptr);
    }
    return GL_OK;
}

static int popcount32(uint32_t x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

// Parameter set DAG: state(mask) = ALT(EMPTY when complete, "<atem:parameter name=\"" ALT_p(
// item_p state(mask|p))) over the parameters p not yet written. Only states from which a
// complete set is reachable are built, so no prefix is a dead end.
static gl_status build_subset(struct atem_ctx *a, const struct atem_param *ps, int n,
                              int32_t min_props, int32_t max_props, int32_t *out)
{
    struct gl_gir_builder *b = a->b;
    uint32_t n_masks = 1u << n, req = 0;
    for (int i = 0; i < n; i++)
        if (ps[i].required)
            req |= 1u << i;
    int32_t state[1u << ATEM_SUBSET_MAX];
    uint8_t viable[1u << ATEM_SUBSET_MAX];
    int32_t open = add_bytes_str(b, "<atem:parameter name=\"");
    int32_t empty = gl_gir_add(b, &(struct gl_gnode){.kind = GN_EMPTY});
    if (open < 0 || empty < 0)
        return builder_failed(b, a->err);
    for (uint32_t m = n_masks; m-- > 0;) {
        int cnt = popcount32(m);
        int complete = (m & req) == req && cnt >= min_props && (max_props < 0 || cnt <= max_props);
        int32_t kids[ATEM_SUBSET_MAX], nk = 0;
        for (int i = 0; i < n; i++) {
            uint32_t nm = m | (1u << i);
            if (nm == m || !viable[nm])
                continue;
            int32_t pair[2] = {ps[i].item, state[nm]};
            kids[nk] = gl_gir_add_list(b, GN_SEQ, pair, 2);
            if (kids[nk++] < 0)
                return builder_failed(b, a->err);
        }
        viable[m] = (uint8_t)(complete || nk > 0);
        state[m] = -1;
        if (!viable[m])
            continue;
        int32_t alt[2], na = 0;
        if (complete)
            alt[na++] = empty;
        if (nk) {
            int32_t which = nk == 1 ? kids[0] : gl_gir_add_list(b, GN_ALT, kids, nk);
            if (which < 0)
                return builder_failed(b, a->err);
            int32_t seq[2] = {open, which};
            alt[na] = gl_gir_add_list(b, GN_SEQ, seq, 2);
            if (alt[na++] < 0)
                return builder_failed(b, a->err);
        }
        state[m] = na == 1 ? alt[0] : gl_gir_add_list(b, GN_ALT, alt, na);
        if (state[m] < 0)
            return builder_failed(b, a->err);
    }
    if (!viable[0])
        return tool_err(a, GL_E_INVAL,
                        "parameters at %s cannot be satisfied (required, minProperties, "
                        "maxProperties)",
                        a->ptr);
    *out = state[0];
    return GL_OK;
}

// Schema order: required parameters as is, optional ones optional.
static gl_status build_ordered(struct atem_ctx *a, const struct atem_param *ps, int n, int32_t *out)
{
    struct gl_gir_builder *b = a->b;
    if (n == 0) {
        *out = gl_gir_add(b, &(struct gl_gnode){.kind = GN_EMPTY});
        return *out < 0 ? builder_failed(b, a->err) : GL_OK;
    }
    int32_t *seq = gl_malloc((size_t)n * sizeof *seq);
    if (!seq)
        return gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
    int32_t open = add_bytes_str(b, "<atem:parameter name=\"");
    gl_status st = GL_OK;
    if (open < 0)
        st = builder_failed(b, a->err);
    for (int i = 0; i < n && st == GL_OK; i++) {
        int32_t pair[2] = {open, ps[i].item};
        int32_t one = gl_gir_add_list(b, GN_SEQ, pair, 2);
        if (one >= 0 && !ps[i].required) {
            struct gl_gnode nd = {.kind = GN_REPEAT};
            nd.u.rep.kid = one;
            nd.u.rep.sep = -1;
            nd.u.rep.min = 0;
            nd.u.rep.max = 1;
            one = gl_gir_add(b, &nd);
        }
        if (one < 0)
            st = builder_failed(b, a->err);
        seq[i] = one;
    }
    if (st == GL_OK) {
        *out = n == 1 ? seq[0] : gl_gir_add_list(b, GN_SEQ, seq, n);
        if (*out < 0)
            st = builder_failed(b, a->err);
    }
    gl_free(seq);
    return st;
}

static int32_t count_limit(json_t *params, const char *key, int32_t dflt)
{
    json_t *v = json_object_get(params, key);
    if (!json_is_integer(v))
        return dflt;
    json_int_t x = json_integer_value(v);
    return x < 0 ? dflt : x > INT32_MAX ? INT32_MAX : (int32_t)x;
}

// The ATEM parser reads a parameter value as JSON when the whole value is one JSON text (no
// surrounding whitespace), else as a string; the template writes strings verbatim. So a raw
// string value must not itself be a JSON text, or "42" would come back as the number 42. This
// regex (over the raw bytes, which never contain '<') is the language of raw texts that jansson
// cannot read as JSON, restricted where that is simpler: empty, led by whitespace, or led by a
// character that starts no JSON value; a word that only begins like true/false/null; text that
// leaves the JSON number grammar. Strings led by '{', '[' or '"' are never written raw.
#define RG_ANY "[\\u{0}-\\u{D7FF}\\u{E000}-\\u{10FFFF}]"
#define RG_M   "-?(?:0|[1-9][0-9]*)"
#define RG_Q   RG_M "(?:\\.[0-9]+)?"
static const char RAW_GUARD_RE[] =
    "(?:|[ \\t\\n\\r]" RG_ANY "*|[^\\-0-9{\\[\"tfn \\t\\n\\r]" RG_ANY "*"
    "|t|t[^r]" RG_ANY "*|tr|tr[^u]" RG_ANY "*|tru|tru[^e]" RG_ANY "*|true" RG_ANY "+"
    "|f|f[^a]" RG_ANY "*|fa|fa[^l]" RG_ANY "*|fal|fal[^s]" RG_ANY "*|fals|fals[^e]" RG_ANY
    "*|false" RG_ANY "+"
    "|n|n[^u]" RG_ANY "*|nu|nu[^l]" RG_ANY "*|nul|nul[^l]" RG_ANY "*|null" RG_ANY "+"
    "|-|-[^0-9]" RG_ANY "*|-?0[^.eE]" RG_ANY "*|-?[1-9][0-9]*[^0-9.eE]" RG_ANY "*"
    "|" RG_M "\\.|" RG_M "\\.[^0-9]" RG_ANY "*|" RG_M "\\.[0-9]+[^0-9eE]" RG_ANY "*"
    "|" RG_Q "[eE]|" RG_Q "[eE][+\\-]|" RG_Q "[eE][^0-9+\\-]" RG_ANY "*|" RG_Q
    "[eE][+\\-][^0-9]" RG_ANY "*|" RG_Q "[eE][+\\-]?[0-9]+[^0-9]" RG_ANY "*)";

// jansson (the ATEM parser's JSON reader) fails on integers beyond int64 and on reals that
// overflow a double, and the value then reads back as a string. Numbers anywhere in a value are
// kept within +-9e18 (integers: +-(2^53 - 1), the IR's exact range) unless the schema demands
// more; a restriction, never a widening.
#define NUM_LIMIT 9e18
#define INT_LIMIT 9007199254740991.0

static void clamp_number(struct gl_gnum *u)
{
    double lim = u->integer ? INT_LIMIT : NUM_LIMIT;
    double lo = u->has_min && u->min > -lim ? u->min : -lim;
    double hi = u->has_max && u->max < lim ? u->max : lim;
    if (lo > hi) // the schema asks for numbers beyond the limit: leave it as it is
        return;
    if (!u->has_min || u->min < -lim) {
        u->has_min = 1;
        u->excl_min = 0;
        u->min = -lim;
    }
    if (!u->has_max || u->max > lim) {
        u->has_max = 1;
        u->excl_max = 0;
        u->max = lim;
    }
}

static void push_node(uint8_t *seen, int32_t *stack, int32_t *sp, int32_t n, int32_t x)
{
    if (x >= 0 && x < n && !seen[x]) {
        seen[x] = 1;
        stack[(*sp)++] = x;
    }
}

// Adds the guard regex to every raw string node the value can start as (container children are
// never raw) and bounds every number node of the value, containers included.
static gl_status guard_raw_strings(struct atem_ctx *a, int32_t v)
{
    struct gl_gir_builder *b = a->b;
    if (a->guard < 0) {
        struct gl_regex *re = NULL;
        gl_status st = gl_regex_compile(&re, RAW_GUARD_RE, sizeof RAW_GUARD_RE - 1, 0, 0, a->err);
        if (st != GL_OK)
            return st;
        a->guard = gl_gir_add_regex(b, re);
        if (a->guard < 0)
            return builder_failed(b, a->err);
    }
    int32_t n = b->ir->n_nodes;
    uint8_t *seen = gl_calloc((size_t)n, 1);
    int32_t *stack = gl_malloc((size_t)n * sizeof *stack);
    gl_status st = GL_OK;
    if (!seen || !stack) {
        st = gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
        goto out;
    }
    int32_t sp = 0;
    stack[sp++] = v;
    seen[v] = 1;
    while (sp && st == GL_OK) {
        int32_t i = stack[--sp];
        struct gl_gnode nd = b->ir->nodes[i];
        const int32_t *kids = NULL;
        int32_t nk = 0;
        if (nd.kind == GN_SEQ || nd.kind == GN_ALT) {
            kids = nd.u.list.kids;
            nk = nd.u.list.n;
        } else if (nd.kind == GN_REPEAT) {
            kids = &b->ir->nodes[i].u.rep.kid;
            nk = 1;
        } else if (nd.kind == GN_JSTRING && nd.u.str.raw) {
            int have = 0;
            for (int32_t r = 0; r < nd.u.str.n_regex; r++)
                have |= nd.u.str.regexes[r] == a->guard;
            if (have)
                continue;
            int32_t *res =
                gl_arena_alloc(b->ir->arena, (size_t)(nd.u.str.n_regex + 1) * sizeof *res);
            if (!res) {
                st = gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
                break;
            }
            if (nd.u.str.n_regex)
                memcpy(res, nd.u.str.regexes, (size_t)nd.u.str.n_regex * sizeof *res);
            res[nd.u.str.n_regex] = a->guard;
            nd.u.str.regexes = res;
            nd.u.str.n_regex++;
            gl_gir_set(b, i, &nd);
        } else if (nd.kind == GN_JNUMBER) {
            clamp_number(&nd.u.num);
            gl_gir_set(b, i, &nd);
        } else if (nd.kind == GN_JOBJECT) {
            for (int32_t k = 0; k < nd.u.obj.n_props; k++)
                push_node(seen, stack, &sp, n, nd.u.obj.props[k].value);
            for (int32_t k = 0; k < nd.u.obj.n_patterns; k++)
                push_node(seen, stack, &sp, n, nd.u.obj.patterns[k].value);
            push_node(seen, stack, &sp, n, nd.u.obj.additional);
        } else if (nd.kind == GN_JARRAY) {
            for (int32_t k = 0; k < nd.u.arr.n_prefix; k++)
                push_node(seen, stack, &sp, n, nd.u.arr.prefix[k]);
            push_node(seen, stack, &sp, n, nd.u.arr.items);
        }
        for (int32_t k = 0; k < nk; k++)
            push_node(seen, stack, &sp, n, kids[k]);
    }
out:
    gl_free(seen);
    gl_free(stack);
    return st;
}

// One parameter's item node: KEY "\">" VALUE "</atem:parameter>\n".
static gl_status build_item(struct atem_ctx *a, json_t *doc, struct atem_param *p, const char *ptr)
{
    struct gl_gir_builder *b = a->b;
    size_t kl = strlen(p->key);
    char *head = gl_malloc(kl + 3);
    if (!head)
        return gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
    memcpy(head, p->key, kl);
    memcpy(head + kl, "\">", 3);
    int32_t h = gl_gir_add_bytes(b, head, kl + 2);
    gl_free(head);
    if (h < 0)
        return builder_failed(b, a->err);
    int32_t v;
    gl_status st = gl_schema_build_at(b, a->c, doc, p->schema, ptr, 1, &v, a->err);
    if (st != GL_OK)
        return tool_wrap(a, st);
    if ((st = guard_raw_strings(a, v)) != GL_OK)
        return st;
    int32_t close = add_bytes_str(b, "</atem:parameter>\n");
    if (close < 0)
        return builder_failed(b, a->err);
    int32_t kids[3] = {h, v, close};
    p->item = gl_gir_add_list(b, GN_SEQ, kids, 3);
    return p->item < 0 ? builder_failed(b, a->err) : GL_OK;
}

static gl_status build_params(struct atem_ctx *a, json_t *params, json_t *any_schema, int32_t *out)
{
    if (json_is_null(params)) // "parameters": null is no schema, as vLLM's None
        params = NULL;
    int ordered = a->c && a->c->opts && a->c->opts->ordered_keys;
    json_t *props = params ? json_object_get(params, "properties") : NULL;
    json_t *req = params ? json_object_get(params, "required") : NULL;
    json_t *addl = params ? json_object_get(params, "additionalProperties") : NULL;
    if (params && !json_is_object(params))
        return tool_err(a, GL_E_INVAL, "parameters at %s must be a JSON object", a->ptr);
    if (props && !json_is_object(props))
        return tool_err(a, GL_E_INVAL, "properties at %s must be a JSON object", a->ptr);
    if (req && !json_is_array(req))
        return tool_err(a, GL_E_INVAL, "required at %s must be an array", a->ptr);
    size_t n_props = props ? json_object_size(props) : 0;
    size_t n_req = req ? json_array_size(req) : 0;
    if (n_props + n_req > 4096)
        return tool_err(a, GL_E_LIMIT, "more than 4096 parameters at %s", a->ptr);
    struct atem_param *ps = gl_calloc(n_props + n_req + 1, sizeof *ps);
    if (!ps)
        return gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
    int n = 0;
    gl_status st = GL_OK;
    const char *k;
    json_t *v;
    if (props)
        json_object_foreach(props, k, v) ps[n++] = (struct atem_param){.key = k, .schema = v};
    for (size_t i = 0; i < n_req && st == GL_OK; i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) {
            st = tool_err(a, GL_E_INVAL, "required[%zu] at %s is not a string", i, a->ptr);
            break;
        }
        const char *rk = json_string_value(r);
        int found = 0;
        for (int j = 0; j < n && !found; j++)
            if (strcmp(ps[j].key, rk) == 0) {
                ps[j].required = 1;
                found = 1;
            }
        if (found)
            continue;
        // Required but undeclared: its value follows additionalProperties.
        if (json_is_false(addl)) {
            st = tool_err(a, GL_E_INVAL,
                          "required parameter '%.64s' is not in properties and "
                          "additionalProperties is false at %s",
                          rk, a->ptr);
            break;
        }
        ps[n++] = (struct atem_param){
            .key = rk, .schema = json_is_object(addl) ? addl : any_schema, .required = 1};
    }
    for (int i = 0; i < n && st == GL_OK; i++)
        if (!atem_name_ok(ps[i].key, 0))
            st = tool_err(a, GL_E_UNSUPPORTED,
                          "parameter name '%.64s' at %s cannot be written in an ATEM tag",
                          ps[i].key, a->ptr);
    int subset = !ordered && n <= ATEM_SUBSET_MAX;
    if (st == GL_OK && params)
        st = check_params_keywords(a, params, subset);
    for (int i = 0; i < n && st == GL_OK; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s", a->ptr);
        int declared = props && json_object_get(props, ps[i].key) == ps[i].schema;
        ptr_append(p, sizeof p, declared ? "properties" : "additionalProperties");
        if (declared)
            ptr_append(p, sizeof p, ps[i].key);
        st = build_item(a, params, &ps[i], p);
        if (st == GL_OK)
            st = gl_gctx_check_time(a->c, a->err);
    }
    if (st == GL_OK) {
        if (subset)
            st = build_subset(a, ps, n, params ? count_limit(params, "minProperties", 0) : 0,
                              params ? count_limit(params, "maxProperties", -1) : -1, out);
        else
            st = build_ordered(a, ps, n, out);
    }
    gl_free(ps);
    return st;
}

static gl_status build_tool(struct atem_ctx *a, json_t *params, int32_t message_token,
                            json_t *any_schema, int32_t *out)
{
    struct gl_gir_builder *b = a->b;
    int32_t pnode = -1;
    gl_status st = build_params(a, params, any_schema, &pnode);
    if (st != GL_OK)
        return st;
    size_t nl = strlen(a->name);
    static const char pre[] = "<atem:function_calls>\n<atem:invoke name=\"";
    static const char post[] = "\">\n";
    char *head = gl_malloc(sizeof pre + nl + sizeof post);
    if (!head)
        return gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
    memcpy(head, pre, sizeof pre - 1);
    memcpy(head + sizeof pre - 1, a->name, nl);
    memcpy(head + sizeof pre - 1 + nl, post, sizeof post);
    // The header part starts at '=': the vocabulary merges '=' with the recipient (` to=get_w`
    // is [" to"]["=get"]["_w"]), so the grammar arms after the model's " to" token.
    char *eq = gl_malloc(nl + 2);
    if (!eq) {
        gl_free(head);
        return gl_err_set(a->err, GL_E_NOMEM, "grammar: out of memory");
    }
    eq[0] = '=';
    memcpy(eq + 1, a->name, nl);
    int32_t kids[5];
    kids[0] = gl_gir_add_bytes(b, eq, nl + 1);
    gl_free(eq);
    kids[1] = gl_gir_add(b, &(struct gl_gnode){.kind = GN_TOKEN, .u.token.id = message_token});
    kids[2] = gl_gir_add_bytes(b, head, sizeof pre - 1 + nl + sizeof post - 1);
    kids[3] = pnode;
    kids[4] = add_bytes_str(b, "</atem:invoke>\n</atem:function_calls>");
    gl_free(head);
    for (int i = 0; i < 5; i++)
        if (kids[i] < 0)
            return builder_failed(b, a->err);
    *out = gl_gir_add_list(b, GN_SEQ, kids, 5);
    return *out < 0 ? builder_failed(b, a->err) : GL_OK;
}

gl_status gl_fe_atem_tools_build(struct gl_gir_builder *b, struct gl_gctx *c, json_t *tools,
                                 const char *only_name, int32_t message_token, int32_t *root,
                                 struct gl_err *err)
{
    if (!json_is_array(tools) || json_array_size(tools) == 0)
        return gl_err_set(err, GL_E_INVAL, "tools: expected a non-empty array");
    size_t n = json_array_size(tools);
    if (n > 4096)
        return gl_err_set(err, GL_E_LIMIT, "tools: more than 4096 tools");
    int32_t *alts = gl_malloc(n * sizeof *alts);
    const char **names = gl_calloc(n, sizeof *names);
    json_t *any_schema = json_object(); // {}: any value (required but undeclared parameters)
    gl_status st = GL_OK;
    int32_t n_alts = 0, guard = -1;
    if (!alts || !names || !any_schema) {
        st = gl_err_set(err, GL_E_NOMEM, "tools: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && st == GL_OK; i++) {
        json_t *t = json_array_get(tools, i);
        struct atem_ctx a = {.b = b, .c = c, .err = err, .guard = guard, .tool = (int)i};
        json_t *fn = json_object_get(t, "function");
        const char *field = "/function";
        if (!json_is_object(t)) {
            st = gl_err_set(err, GL_E_INVAL, "tools[%zu]: expected an object", i);
            break;
        }
        json_t *type = json_object_get(t, "type");
        if (type && !(json_is_string(type) && strcmp(json_string_value(type), "function") == 0) &&
            fn) {
            st = gl_err_set(err, GL_E_UNSUPPORTED, "tools[%zu]: type is not \"function\"", i);
            break;
        }
        if (!fn) {
            fn = t;
            field = "";
        }
        if (!json_is_object(fn)) {
            st = gl_err_set(err, GL_E_INVAL, "tools[%zu]: function is not an object", i);
            break;
        }
        json_t *jn = json_object_get(fn, "name");
        a.name = json_is_string(jn) ? json_string_value(jn) : NULL;
        if (!atem_name_ok(a.name, 1) || strlen(a.name) != json_string_length(jn)) {
            st = gl_err_set(err, GL_E_INVAL,
                            "tools[%zu]: function name missing or not writable in an ATEM header "
                            "(empty, whitespace, quotes or angle brackets)",
                            i);
            break;
        }
        for (size_t j = 0; j < i; j++)
            if (names[j] && strcmp(names[j], a.name) == 0) {
                st = gl_err_set(err, GL_E_INVAL, "tools[%zu]: duplicate function name '%.64s'", i,
                                a.name);
                break;
            }
        names[i] = a.name;
        if (st != GL_OK || (only_name && strcmp(only_name, a.name) != 0))
            continue;
        snprintf(a.ptr, sizeof a.ptr, "/tools/%zu%s/parameters", i, field);
        // Absent or null parameters (vLLM's None): a call with no parameters, arguments {}
        // (vLLM's required/named schema is {"type": "object", "properties": {}} then).
        json_t *params = json_object_get(fn, "parameters");
        st = build_tool(&a, json_is_null(params) ? NULL : params, message_token, any_schema,
                        &alts[n_alts]);
        if (st == GL_OK)
            n_alts++;
        guard = a.guard;
    }
    if (st == GL_OK && n_alts == 0)
        st = gl_err_set(err, GL_E_INVAL, "tools: no function named '%.64s'",
                        only_name ? only_name : "");
    if (st == GL_OK) {
        *root = n_alts == 1 ? alts[0] : gl_gir_add_list(b, GN_ALT, alts, n_alts);
        if (*root < 0)
            st = builder_failed(b, err);
    }
out:
    gl_free(alts);
    gl_free(names);
    json_decref(any_schema);
    return st;
}

// ---- the whole assistant turn (GL_GRAMMAR_ATEM_TURN, grammar.h) ----

#define ATEM_TOK_START   200022 // <|start|>
#define ATEM_TOK_MESSAGE 200023 // <|message|>

enum turn_choice { TC_NONE, TC_AUTO, TC_REQUIRED, TC_NAMED };

static const char *const turn_fields[] = {"body",      "tools",         "tool_choice", "parallel",
                                          "reasoning", "header_tokens", NULL};
// header_tokens pieces and the bytes each pinned token stands for (grammar.h).
enum turn_piece { HP_TO, HP_SELF, HP_USER, HP_ASSISTANT, HP_N };
static const char *const piece_names[] = {"to", "self", "user", "assistant", NULL};
static const char *const piece_bytes[] = {" to", "=self", "=user", "assistant"};
static const char *const body_kinds[] = {"json_schema", "json_object", "regex",
                                         "choice",      "gbnf",        NULL};

// Function name of one tools entry, in either shape gl_fe_atem_tools_build reads; NULL if none.
static const char *tool_name(json_t *t)
{
    json_t *fn = json_object_get(t, "function");
    json_t *n = json_object_get(fn ? fn : t, "name");
    return json_is_string(n) ? json_string_value(n) : NULL;
}

static gl_status turn_bool(json_t *spec, const char *key, int dflt, int *out, struct gl_err *err)
{
    json_t *v = json_object_get(spec, key);
    *out = dflt;
    if (!v || json_is_null(v))
        return GL_OK;
    if (!json_is_boolean(v))
        return gl_err_set(err, GL_E_INVAL, "%s: expected true or false", key);
    *out = json_is_true(v);
    return GL_OK;
}

// Reads tool_choice against the tools (n of them); *name: the forced function (TC_NAMED).
static gl_status turn_choice(json_t *spec, json_t *tools, size_t n, enum turn_choice *mode,
                             const char **name, struct gl_err *err)
{
    json_t *tc = json_object_get(spec, "tool_choice");
    *name = NULL;
    if (!tc || json_is_null(tc)) {
        *mode = n ? TC_AUTO : TC_NONE;
    } else if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (!strcmp(s, "none"))
            *mode = TC_NONE;
        else if (!strcmp(s, "auto"))
            *mode = TC_AUTO;
        else if (!strcmp(s, "required"))
            *mode = TC_REQUIRED;
        else
            return gl_err_set(err, GL_E_INVAL,
                              "tool_choice: '%.64s' is not \"none\", \"auto\", \"required\" or "
                              "{\"name\": ...}",
                              s);
    } else if (json_is_object(tc)) {
        // {"name": N}, or OpenAI's {"type": "function", "function": {"name": N}}
        json_t *fn = json_object_get(tc, "function");
        json_t *nm = json_object_get(json_is_object(fn) ? fn : tc, "name");
        if (!json_is_string(nm) || strlen(json_string_value(nm)) != json_string_length(nm))
            return gl_err_set(err, GL_E_INVAL, "tool_choice: object without a function name");
        *mode = TC_NAMED;
        *name = json_string_value(nm);
    } else {
        return gl_err_set(err, GL_E_INVAL,
                          "tool_choice: expected \"none\", \"auto\", \"required\" or "
                          "{\"name\": ...}");
    }
    if (*mode == TC_AUTO && n == 0)
        *mode = TC_NONE; // nothing to call: the answer is the only arm
    if (*mode == TC_REQUIRED && n == 0)
        return gl_err_set(err, GL_E_INVAL,
                          "tool_choice: \"required\" needs a non-empty tools array");
    if (*mode == TC_NAMED) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++) {
            const char *tn = tool_name(json_array_get(tools, i));
            found = tn && !strcmp(tn, *name);
        }
        if (!found)
            return gl_err_set(err, GL_E_INVAL, "tool_choice: function '%.64s' is not in tools",
                              *name);
    }
    return GL_OK;
}

// The normal form of body (a user arm exists): {"kind": K, "source": S} with S parsed for the
// JSON kinds and null for json_object.
static gl_status turn_body_canon(json_t *body, json_t **out, struct gl_err *err)
{
    *out = NULL;
    if (!body || json_is_null(body)) {
        *out = json_null();
        return GL_OK;
    }
    if (!json_is_object(body))
        return gl_err_set(err, GL_E_INVAL,
                          "body: expected null or {\"kind\": ..., \"source\": ...}");
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "kind") && strcmp(k, "source"))
            return gl_err_set(err, GL_E_INVAL, "body: unknown field '%.64s'", k);
    }
    json_t *kind = json_object_get(body, "kind");
    if (!json_is_string(kind) || !is_one_of(json_string_value(kind), body_kinds))
        return gl_err_set(err, GL_E_INVAL,
                          "body: kind '%.64s' is not json_schema, json_object, regex, choice or "
                          "gbnf",
                          json_is_string(kind) ? json_string_value(kind) : "");
    const char *ks = json_string_value(kind);
    json_t *src = json_object_get(body, "source"), *s = NULL;
    if (!strcmp(ks, "json_object")) {
        s = json_null();
    } else if (!strcmp(ks, "regex") || !strcmp(ks, "gbnf")) {
        if (!json_is_string(src))
            return gl_err_set(err, GL_E_INVAL, "body: source must be a string (the %s text)",
                              !strcmp(ks, "regex") ? "regex" : "GBNF");
        s = json_incref(src);
    } else if (json_is_string(src)) {
        // Parsed, so the key does not depend on key order or spacing inside the source.
        json_error_t je;
        s = json_loadb(json_string_value(src), json_string_length(src),
                       JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!s)
            return gl_err_set(err, GL_E_INVAL,
                              "body: %s source is not valid JSON: %s (line %d, column %d)", ks,
                              je.text, je.line, je.column);
    } else if (src && !json_is_null(src)) {
        s = json_incref(src); // the schema or list itself
    } else {
        return gl_err_set(err, GL_E_INVAL, "body: %s needs a source", ks);
    }
    *out = json_pack("{s:s, s:o}", "kind", ks, "source", s);
    return *out ? GL_OK : gl_err_set(err, GL_E_NOMEM, "body: out of memory");
}

// A tool in the tool arm whose name starts with prefix ("self", "user"): its header "=NAME"
// begins with the bytes of the pinned "=self"/"=user" token, so that token would be both a
// token literal (reasoning, answer) and bytes of the call. The matcher takes a token literal
// over a byte reading, so pinning there would make the tool unreachable in canonical tokens.
static int tool_prefixed(json_t *tools, size_t n, const char *only, const char *prefix)
{
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        const char *tn = tool_name(json_array_get(tools, i));
        if (tn && !strncmp(tn, prefix, pl) && (!only || !strcmp(tn, only)))
            return 1;
    }
    return 0;
}

// The normal form of header_tokens: null when no piece is pinned, else an object with the
// pinned pieces the language uses (ids >= 0). used[p]: the piece occurs in the grammar and may
// be pinned (no conflicting tool name).
static gl_status turn_header_canon(json_t *ht, const int *used, json_t **out, struct gl_err *err)
{
    *out = NULL;
    if (ht && !json_is_null(ht) && !json_is_object(ht))
        return gl_err_set(err, GL_E_INVAL,
                          "header_tokens: expected null or {\"to\": ID, \"self\": ID, "
                          "\"user\": ID, \"assistant\": ID}");
    const char *k;
    json_t *v;
    if (json_is_object(ht)) {
        json_object_foreach(ht, k, v)
        {
            if (!is_one_of(k, piece_names))
                return gl_err_set(err, GL_E_INVAL,
                                  "header_tokens: unknown piece '%.64s' (to, self, user, "
                                  "assistant)",
                                  k);
            json_int_t id = json_is_integer(v) ? json_integer_value(v) : -2;
            if (!json_is_null(v) && (id < -1 || id > INT32_MAX))
                return gl_err_set(err, GL_E_INVAL,
                                  "header_tokens: %s: expected a token id (0..2147483647), -1 "
                                  "or null",
                                  k);
        }
    }
    json_t *o = NULL;
    for (int p = 0; p < HP_N; p++) {
        json_t *id = json_object_get(ht, piece_names[p]);
        if (!used[p] || !json_is_integer(id) || json_integer_value(id) < 0)
            continue;
        if ((!o && !(o = json_object())) ||
            json_object_set_new(o, piece_names[p], json_integer(json_integer_value(id)))) {
            json_decref(o);
            return gl_err_set(err, GL_E_NOMEM, "atem_turn: out of memory");
        }
    }
    *out = o ? o : json_null();
    return GL_OK;
}

gl_status gl_fe_atem_turn_canon(json_t *spec, json_t **out, struct gl_err *err)
{
    *out = NULL;
    if (!json_is_object(spec))
        return gl_err_set(err, GL_E_INVAL, "atem_turn: the spec must be a JSON object");
    const char *k;
    json_t *v;
    json_object_foreach(spec, k, v)
    {
        if (!is_one_of(k, turn_fields))
            return gl_err_set(err, GL_E_INVAL, "atem_turn: unknown field '%.64s'", k);
    }
    json_t *tools = json_object_get(spec, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return gl_err_set(err, GL_E_INVAL, "tools: expected an array or null");
    size_t n = json_is_array(tools) ? json_array_size(tools) : 0;
    enum turn_choice mode;
    const char *name;
    gl_status st = turn_choice(spec, tools, n, &mode, &name, err);
    int parallel, reasoning;
    if (st == GL_OK)
        st = turn_bool(spec, "parallel", 1, &parallel, err);
    if (st == GL_OK)
        st = turn_bool(spec, "reasoning", 1, &reasoning, err);
    if (st != GL_OK)
        return st;
    int user = mode == TC_NONE || mode == TC_AUTO, tool = mode != TC_NONE;
    // A tool named like a reserved recipient would be read back as reasoning or as the answer.
    for (size_t i = 0; tool && i < n; i++) {
        const char *tn = tool_name(json_array_get(tools, i));
        if (tn && (!strcmp(tn, "self") || !strcmp(tn, "user")) && (!name || !strcmp(tn, name)))
            return gl_err_set(err, GL_E_INVAL,
                              "tools[%zu]: function name '%s' is a reserved ATEM recipient", i, tn);
    }
    // Pieces the language uses; "self"/"user" stay bytes where a tool name would share them.
    int used[HP_N] = {
        [HP_TO] = 1,
        [HP_SELF] = reasoning && !(tool && tool_prefixed(tools, n, name, "self")),
        [HP_USER] = user && !(tool && tool_prefixed(tools, n, name, "user")),
        [HP_ASSISTANT] = reasoning || (tool && parallel),
    };
    json_t *ht = NULL;
    st = turn_header_canon(json_object_get(spec, "header_tokens"), used, &ht, err);
    if (st != GL_OK)
        return st;
    json_t *body = NULL;
    st = turn_body_canon(user ? json_object_get(spec, "body") : NULL, &body, err);
    if (st != GL_OK) {
        json_decref(ht);
        return st;
    }
    // Fields the language does not depend on are normalised away (shared cache entries).
    json_t *tc = mode == TC_NAMED  ? json_pack("{s:s}", "name", name)
                 : mode == TC_NONE ? json_string("none")
                 : mode == TC_AUTO ? json_string("auto")
                                   : json_string("required");
    json_t *o = json_object();
    if (!tc || !o) {
        json_decref(tc);
        json_decref(o);
        json_decref(body);
        json_decref(ht);
        return gl_err_set(err, GL_E_NOMEM, "atem_turn: out of memory");
    }
    // Every set is made (each takes its value even when it fails), so nothing leaks.
    int ok = !json_object_set_new(o, "body", body);
    ok &= !json_object_set_new(o, "tools", tool ? json_incref(tools) : json_null());
    ok &= !json_object_set_new(o, "tool_choice", tc);
    ok &= !json_object_set_new(o, "parallel", json_boolean(tool && parallel));
    ok &= !json_object_set_new(o, "reasoning", json_boolean(reasoning));
    ok &= !json_object_set_new(o, "header_tokens", ht);
    if (!ok) {
        json_decref(o);
        return gl_err_set(err, GL_E_NOMEM, "atem_turn: out of memory");
    }
    *out = o;
    return GL_OK;
}

// Prefixes the message a nested front end left in err with the spec field it came from.
static gl_status err_prefix(struct gl_err *err, gl_status st, const char *field)
{
    if (!err)
        return st;
    char msg[GL_ERR_MSG_CAP];
    memcpy(msg, err->msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    return gl_err_set(err, st, "%s: %s", field, msg);
}

// BODY of the user arm: free text, or the request's constraint by its own front end.
static gl_status turn_body_build(struct gl_gir_builder *b, struct gl_gctx *c, json_t *body,
                                 int32_t *out, struct gl_err *err)
{
    if (json_is_null(body)) {
        *out = gl_gir_add(b, &(struct gl_gnode){.kind = GN_ANYBYTES});
        return *out < 0 ? builder_failed(b, err) : GL_OK;
    }
    const char *kind = json_string_value(json_object_get(body, "kind"));
    json_t *src = json_object_get(body, "source");
    gl_status st;
    if (!strcmp(kind, "json_schema")) {
        st = gl_schema_build(b, c, src, out, err);
    } else if (!strcmp(kind, "json_object")) {
        json_t *obj = json_pack("{s:s,s:b}", "type", "object", "additionalProperties", 1);
        if (!obj)
            return gl_err_set(err, GL_E_NOMEM, "body: out of memory");
        st = gl_schema_build(b, c, obj, out, err);
        json_decref(obj);
    } else if (!strcmp(kind, "regex")) {
        st = gl_fe_regex_build(b, c, json_string_value(src), json_string_length(src), out, err);
    } else if (!strcmp(kind, "gbnf")) {
        st = gl_gbnf_build(b, c, json_string_value(src), json_string_length(src), out, err);
    } else { // choice
        char *text = json_dumps(src, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text)
            return gl_err_set(err, GL_E_NOMEM, "body: out of memory");
        st = gl_fe_choice_build(b, c, text, strlen(text), out, err);
        free(text);
    }
    return st == GL_OK ? GL_OK : err_prefix(err, st, "body");
}

static int32_t seq_of(struct gl_gir_builder *b, const int32_t *kids, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (kids[i] < 0)
            return -1;
    return gl_gir_add_list(b, GN_SEQ, kids, n);
}

static int32_t repeat_of(struct gl_gir_builder *b, int32_t kid, int32_t min, int32_t max)
{
    if (kid < 0)
        return -1;
    struct gl_gnode nd = {.kind = GN_REPEAT};
    nd.u.rep.kid = kid;
    nd.u.rep.sep = -1;
    nd.u.rep.min = min;
    nd.u.rep.max = max;
    return gl_gir_add(b, &nd);
}

static int32_t token_of(struct gl_gir_builder *b, int32_t id)
{
    return gl_gir_add(b, &(struct gl_gnode){.kind = GN_TOKEN, .u.token.id = id});
}

gl_status gl_fe_atem_turn_build(struct gl_gir_builder *b, struct gl_gctx *c, json_t *turn,
                                int32_t *root, struct gl_err *err)
{
    json_t *tools = json_object_get(turn, "tools");
    size_t n = json_is_array(tools) ? json_array_size(tools) : 0;
    enum turn_choice mode;
    const char *name;
    gl_status st = turn_choice(turn, tools, n, &mode, &name, err);
    if (st != GL_OK)
        return st;
    int user = mode == TC_NONE || mode == TC_AUTO, tool = mode != TC_NONE;
    // Header pieces: the pinned token (canon kept only the usable ones) or the bytes.
    json_t *ht = json_object_get(turn, "header_tokens");
    int32_t piece[HP_N];
    for (int p = 0; p < HP_N; p++) {
        json_t *id = json_object_get(ht, piece_names[p]);
        piece[p] = json_is_integer(id) && json_integer_value(id) >= 0
                       ? token_of(b, (int32_t)json_integer_value(id))
                       : add_bytes_str(b, piece_bytes[p]);
    }
    int32_t msg = token_of(b, ATEM_TOK_MESSAGE), eom = token_of(b, GL_TOK_EOM);
    int32_t start = token_of(b, ATEM_TOK_START);
    int32_t arms[2], na = 0;
    if (user) {
        int32_t body;
        if ((st = turn_body_build(b, c, json_object_get(turn, "body"), &body, err)) != GL_OK)
            return st;
        int32_t kids[4] = {piece[HP_TO], piece[HP_USER], msg, body};
        if ((arms[na++] = seq_of(b, kids, 4)) < 0)
            return builder_failed(b, err);
    }
    if (tool) {
        // CALL starts at '=' (the model's " to" token comes first) and ends at
        // </atem:function_calls>; the stop token after it is the matcher's. Tool names are
        // never pinned: "=get_weather" is bytes, whatever tokens spell it.
        int32_t call;
        st = gl_fe_atem_tools_build(b, c, tools, name, ATEM_TOK_MESSAGE, &call, err);
        if (st != GL_OK)
            return st;
        int32_t kids[3] = {piece[HP_TO], call, -1};
        int32_t nk = 2;
        if (json_is_true(json_object_get(turn, "parallel"))) {
            int32_t again[5] = {eom, start, piece[HP_ASSISTANT], piece[HP_TO], call};
            kids[nk++] = repeat_of(b, seq_of(b, again, 5), 0, -1);
        }
        if ((arms[na++] = seq_of(b, kids, nk)) < 0)
            return builder_failed(b, err);
    }
    int32_t arm = na == 1 ? arms[0] : gl_gir_add_list(b, GN_ALT, arms, na);
    if (arm >= 0 && json_is_true(json_object_get(turn, "reasoning"))) {
        int32_t r[7] = {piece[HP_TO],
                        piece[HP_SELF],
                        msg,
                        gl_gir_add(b, &(struct gl_gnode){.kind = GN_ANYBYTES}),
                        eom,
                        start,
                        piece[HP_ASSISTANT]};
        int32_t kids[2] = {repeat_of(b, seq_of(b, r, 7), 0, 1), arm};
        arm = seq_of(b, kids, 2);
    }
    if (arm < 0)
        return builder_failed(b, err);
    *root = arm;
    return gl_gctx_check_time(c, err);
}
