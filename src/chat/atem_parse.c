// SPDX-License-Identifier: MIT
// ATEM output parser (arch doc §5.1, §5.5): a state machine over generated token ids. Specials
// drive the framing (<|start|> opens a header, <|message|> opens a body, <|eom|>/<|eot|>/
// <|end_of_text|> close it); text tokens are header bytes, body text, or ATEM tool-block bytes.
// Invariant: no framing byte reaches a text event, and each token's bytes are scanned a bounded
// number of times (the tool block resumes its tag search where the previous token left it).
// Tool parameter values parse as JSON when the whole value is JSON, else become JSON strings.
#include "chat/atem_parse.h"

#include "base/buf.h"

#include <stdio.h>
#include <string.h>

#define HEADER_MAX   512        // bytes of ` to=RECIPIENT`; beyond this the header is junk
#define TOOL_BUF_MAX (8u << 20) // bytes of one tool-call body held at once
#define TAG_MAX      1024       // bytes of one <atem:...> tag
#define ID_MAX       64

static const char REPLACEMENT[] = "\xEF\xBF\xBD";

// Tool-block sub-state: what the bytes at tool.pos are expected to be.
enum tool_st {
    TS_TAGS,  // between tags: skip to the next '<' and read a tag
    TS_VALUE, // inside <atem:parameter name="K">, up to </atem:parameter>
    TS_OVER,  // after </atem:function_calls>: the rest is ignored
};

struct gl_atem_parser {
    const struct gl_tokenizer *tok;
    gl_atem_sink sink;
    void *user;
    char id_prefix[ID_MAX];
    enum gl_atem_state st;
    int64_t n_consumed, answer_index, tool_index_tok;
    struct gl_buf header; // header bytes since <|start|> (or since the generation prompt)
    int header_overflow;
    struct gl_detok detok;
    struct gl_buf text; // scratch for detok output and its UTF-8 sanitised form
    struct gl_buf clean;
    // Current tool-call message.
    struct gl_buf tool; // body bytes; [0, pos) consumed
    size_t pos;         // next unparsed byte
    size_t value_start; // TS_VALUE: value bytes begin here
    size_t scan;        // TS_VALUE: search for the closing tag resumes here
    struct gl_buf key;  // TS_VALUE: parameter name
    enum tool_st ts;
    int call_open;   // a call was started and its arguments object is not closed
    int n_params;    // parameters emitted for the open call
    int invoke_seen; // the open call's <atem:invoke> was read
    int tool_overflow;
    int n_calls;
    char call_id[ID_MAX + 24];
    struct gl_buf call_name;
    struct gl_buf args; // scratch for one arguments piece
};

// out = s with every invalid byte replaced by U+FFFD (text events are valid UTF-8: the
// accumulator puts them in JSON strings).
static int utf8_clean(struct gl_buf *out, const char *s, size_t n)
{
    out->len = 0;
    if (gl_buf_reserve(out, n * 3) != GL_OK)
        return 0;
    for (size_t i = 0; i < n;) {
        size_t k = gl_utf8_seq((const uint8_t *)s + i, n - i, NULL);
        if (k) {
            memcpy(out->p + out->len, s + i, k);
            out->len += k;
            i += k;
        } else {
            memcpy(out->p + out->len, REPLACEMENT, 3);
            out->len += 3;
            i++;
        }
    }
    out->p[out->len] = 0;
    return 1;
}

// Appends s as a JSON string literal (quotes included); invalid UTF-8 becomes \ufffd.
static int json_quote(struct gl_buf *out, const char *s, size_t n)
{
    if (gl_buf_reserve(out, n * 6 + 2) != GL_OK)
        return 0;
    char *o = out->p + out->len;
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        size_t k = gl_utf8_seq((const uint8_t *)s + i, n - i, NULL);
        if (!k) {
            memcpy(o, "\\ufffd", 6);
            o += 6;
            i++;
        } else if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
            i++;
        } else if (c < 0x20) {
            const char *esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (esc) {
                memcpy(o, esc, 2);
                o += 2;
            } else {
                static const char hex[] = "0123456789abcdef";
                memcpy(o, "\\u00", 4);
                o[4] = hex[c >> 4];
                o[5] = hex[c & 15];
                o += 6;
            }
            i++;
        } else {
            memcpy(o, s + i, k);
            o += k;
            i += k;
        }
    }
    *o++ = '"';
    out->len = (size_t)(o - out->p);
    *o = 0;
    return 1;
}

static gl_status nomem(struct gl_err *err, const char *what)
{
    return gl_err_set(err, GL_E_NOMEM, "atem: out of memory (%s)", what);
}

static void emit(struct gl_atem_parser *p, enum gl_atem_ev_kind kind, const char *text, size_t len,
                 int truncated)
{
    struct gl_atem_event ev = {.kind = kind, .text = text, .len = len, .truncated = truncated};
    if (kind == GL_ATEM_EV_TOOL_START || kind == GL_ATEM_EV_TOOL_ARGS ||
        kind == GL_ATEM_EV_TOOL_END) {
        ev.tool_index = p->n_calls - 1;
        ev.id = p->call_id;
        ev.name = p->call_name.p ? p->call_name.p : "";
    }
    p->sink(p->user, &ev);
}

static gl_status emit_text(struct gl_atem_parser *p, const char *s, size_t n, struct gl_err *err)
{
    if (!n)
        return GL_OK;
    if (!utf8_clean(&p->clean, s, n))
        return nomem(err, "text");
    emit(p, p->st == GL_ATEM_ST_REASONING ? GL_ATEM_EV_REASONING : GL_ATEM_EV_CONTENT, p->clean.p,
         p->clean.len, 0);
    return GL_OK;
}

// ---- tool block ----

static gl_status call_start(struct gl_atem_parser *p, const char *name, size_t n,
                            struct gl_err *err)
{
    p->n_calls++;
    snprintf(p->call_id, sizeof p->call_id, "%s%d", p->id_prefix, p->n_calls - 1);
    p->call_name.len = 0;
    if (!utf8_clean(&p->clean, name, n))
        return nomem(err, "tool name");
    if (gl_buf_put(&p->call_name, p->clean.p, p->clean.len) != GL_OK)
        return nomem(err, "tool name");
    p->call_open = 1;
    p->n_params = 0;
    p->invoke_seen = 0;
    emit(p, GL_ATEM_EV_TOOL_START, NULL, 0, 0);
    return GL_OK;
}

static gl_status call_end(struct gl_atem_parser *p, int truncated, struct gl_err *err)
{
    if (!p->call_open)
        return GL_OK;
    p->args.len = 0;
    if (gl_buf_put(&p->args, p->n_params ? "}" : "{}", p->n_params ? 1 : 2) != GL_OK)
        return nomem(err, "arguments");
    emit(p, GL_ATEM_EV_TOOL_ARGS, p->args.p, p->args.len, 0);
    emit(p, GL_ATEM_EV_TOOL_END, NULL, 0, truncated);
    p->call_open = 0;
    return GL_OK;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The whole value is one JSON text (no surrounding whitespace, so strings like " 42" stay
// strings and render back byte for byte): kept verbatim, since jansson validated it.
static int value_is_json(const char *s, size_t n)
{
    if (!n || is_ws(s[0]) || is_ws(s[n - 1]))
        return 0;
    json_error_t je;
    json_t *j = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j)
        return 0;
    json_decref(j);
    return 1;
}

static gl_status param_done(struct gl_atem_parser *p, const char *v, size_t n, struct gl_err *err)
{
    p->args.len = 0;
    gl_buf_put(&p->args, p->n_params ? ", " : "{", p->n_params ? 2 : 1);
    json_quote(&p->args, p->key.p ? p->key.p : "", p->key.len);
    gl_buf_put(&p->args, ": ", 2);
    if (!p->args.oom && value_is_json(v, n))
        gl_buf_put(&p->args, v, n);
    else
        json_quote(&p->args, v, n);
    if (p->args.oom) // sticky: any of the appends above failed
        return nomem(err, "arguments");
    p->n_params++;
    emit(p, GL_ATEM_EV_TOOL_ARGS, p->args.p, p->args.len, 0);
    return GL_OK;
}

// name="..." inside tag text t[0..n); *v/*vn the value (may be empty).
static int tag_name_attr(const char *t, size_t n, const char **v, size_t *vn)
{
    static const char key[] = "name=\"";
    for (size_t i = 0; i + sizeof key - 1 <= n; i++) {
        if (memcmp(t + i, key, sizeof key - 1) != 0)
            continue;
        size_t b = i + sizeof key - 1, e = b;
        while (e < n && t[e] != '"')
            e++;
        if (e >= n)
            return 0;
        *v = t + b;
        *vn = e - b;
        return 1;
    }
    return 0;
}

static int tag_is(const char *t, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n >= k && memcmp(t, name, k) == 0 && (n == k || t[k] == ' ' || t[k] == '>');
}

// Handles one complete tag t[0..n) ('<' .. '>').
static gl_status tool_tag(struct gl_atem_parser *p, const char *t, size_t n, struct gl_err *err)
{
    const char *v;
    size_t vn;
    gl_status st = GL_OK;
    if (tag_is(t, n, "<atem:invoke") && tag_name_attr(t, n, &v, &vn)) {
        // The header opened the first call (its name wins over a differing invoke name); a
        // later invoke in the same block is another call.
        if (p->call_open && (p->invoke_seen || p->n_params))
            st = call_end(p, 0, err);
        if (st == GL_OK && !p->call_open)
            st = call_start(p, v, vn, err);
        p->invoke_seen = 1;
    } else if (tag_is(t, n, "</atem:invoke")) {
        st = call_end(p, 0, err);
    } else if (tag_is(t, n, "</atem:function_calls")) {
        st = call_end(p, 0, err);
        p->ts = TS_OVER;
    } else if (tag_is(t, n, "<atem:parameter") && tag_name_attr(t, n, &v, &vn) && p->call_open) {
        p->key.len = 0;
        if (gl_buf_put(&p->key, v, vn) != GL_OK)
            return nomem(err, "parameter name");
        p->ts = TS_VALUE;
        p->value_start = p->scan = p->pos;
    }
    return st; // <atem:function_calls> and unknown tags are skipped
}

// Parses as far as the buffered tool body allows.
static gl_status tool_run(struct gl_atem_parser *p, struct gl_err *err)
{
    static const char close_param[] = "</atem:parameter>";
    const size_t cpl = sizeof close_param - 1;
    for (;;) {
        const char *b = p->tool.p;
        size_t len = p->tool.len;
        if (p->ts == TS_OVER) {
            p->pos = len;
            return GL_OK;
        }
        if (p->ts == TS_VALUE) {
            size_t i = p->scan;
            const char *hit = NULL;
            while (i + cpl <= len) {
                const char *q = memchr(b + i, '<', len - i);
                if (!q || (size_t)(q - b) + cpl > len)
                    break;
                if (memcmp(q, close_param, cpl) == 0) {
                    hit = q;
                    break;
                }
                i = (size_t)(q - b) + 1;
            }
            if (!hit) {
                p->scan = len >= cpl ? len - cpl + 1 : 0;
                if (p->scan < p->value_start)
                    p->scan = p->value_start;
                return GL_OK;
            }
            size_t end = (size_t)(hit - b);
            gl_status st = param_done(p, b + p->value_start, end - p->value_start, err);
            if (st != GL_OK)
                return st;
            p->pos = end + cpl;
            p->ts = TS_TAGS;
            continue;
        }
        // TS_TAGS: skip to '<', then wait for the whole tag.
        const char *lt = p->pos < len ? memchr(b + p->pos, '<', len - p->pos) : NULL;
        if (!lt) {
            p->pos = len;
            return GL_OK;
        }
        p->pos = (size_t)(lt - b);
        const char *gt = memchr(lt, '>', len - p->pos);
        size_t span = gt ? (size_t)(gt - lt) : len - p->pos;
        const char *lt2 = span > 1 ? memchr(lt + 1, '<', span - 1) : NULL;
        if (lt2) { // "<<atem:invoke ...>": the tag starts at the last '<'
            p->pos = (size_t)(lt2 - b);
            continue;
        }
        if (!gt) {
            if (len - p->pos <= TAG_MAX)
                return GL_OK; // wait for the rest of the tag
            p->pos++;         // too long to be a tag: skip the '<'
            continue;
        }
        size_t tn = (size_t)(gt - lt) + 1;
        p->pos += tn;
        gl_status st = tn <= TAG_MAX ? tool_tag(p, lt, tn, err) : GL_OK;
        if (st != GL_OK)
            return st;
    }
}

static gl_status tool_feed(struct gl_atem_parser *p, const char *s, size_t n, struct gl_err *err)
{
    if (p->tool_overflow)
        return GL_OK;
    // Drop consumed bytes so the buffer holds at most one pending tag or value.
    size_t keep_from = p->ts == TS_VALUE ? p->value_start : p->pos;
    if (keep_from > 4096 && keep_from * 2 > p->tool.len) {
        memmove(p->tool.p, p->tool.p + keep_from, p->tool.len - keep_from);
        p->tool.len -= keep_from;
        p->pos -= keep_from;
        if (p->ts == TS_VALUE) {
            p->scan -= keep_from;
            p->value_start = 0;
        }
    }
    if (p->tool.len + n > TOOL_BUF_MAX) {
        p->tool_overflow = 1;
        return gl_err_set(err, GL_E_LIMIT,
                          "atem: tool call %d body holds over %u bytes unparsed; rest ignored",
                          p->n_calls - 1, TOOL_BUF_MAX);
    }
    if (gl_buf_put(&p->tool, s, n) != GL_OK)
        return nomem(err, "tool body");
    return tool_run(p, err);
}

// ---- framing ----

// Parses "assistant to=NAME" (the role word is absent for the first, prompt-supplied header) and
// opens the body. Unknown shapes fall back to an answer, as an untagged assistant message is.
static gl_status open_body(struct gl_atem_parser *p, struct gl_err *err)
{
    const char *h = p->header.p ? p->header.p : "";
    size_t n = p->header_overflow ? 0 : p->header.len;
    const char *name = "user";
    size_t nn = 4;
    for (size_t i = 0; i + 3 <= n; i++) {
        if (memcmp(h + i, "to=", 3) == 0 && (i == 0 || is_ws(h[i - 1]))) {
            size_t b = i + 3, e = b;
            while (e < n && !is_ws(h[e]))
                e++;
            if (e > b) {
                name = h + b;
                nn = e - b;
            }
            break;
        }
    }
    p->header.len = 0;
    p->header_overflow = 0;
    memset(&p->detok, 0, sizeof p->detok);
    if (nn == 4 && memcmp(name, "self", 4) == 0) {
        p->st = GL_ATEM_ST_REASONING;
        return GL_OK;
    }
    if (nn == 4 && memcmp(name, "user", 4) == 0) {
        p->st = GL_ATEM_ST_ANSWER;
        if (p->answer_index < 0)
            p->answer_index = p->n_consumed + 1;
        return GL_OK;
    }
    p->st = GL_ATEM_ST_TOOL;
    if (p->tool_index_tok < 0)
        p->tool_index_tok = p->n_consumed + 1;
    p->tool.len = 0;
    p->pos = p->value_start = p->scan = 0;
    p->ts = TS_TAGS;
    p->tool_overflow = 0;
    return call_start(p, name, nn, err);
}

// Ends the current body (truncated: cut by finish() rather than an end token).
static gl_status close_body(struct gl_atem_parser *p, int truncated, struct gl_err *err)
{
    gl_status st = GL_OK;
    if (p->st == GL_ATEM_ST_REASONING || p->st == GL_ATEM_ST_ANSWER) {
        // A held-back partial UTF-8 sequence can never complete now.
        char tmp[8];
        int k = gl_detok_flush(&p->detok, tmp, sizeof tmp);
        if (k > 0)
            st = emit_text(p, REPLACEMENT, 3, err);
    } else if (p->st == GL_ATEM_ST_TOOL) {
        // A call still open here lacked its </atem:invoke>: cut (max_tokens) or malformed.
        st = call_end(p, 1, err);
    } else {
        return GL_OK;
    }
    if (st == GL_OK)
        emit(p, GL_ATEM_EV_MSG_END, NULL, 0, truncated);
    return st;
}

static int is_end(gl_token id)
{
    return id == GL_TOK_EOM || id == GL_TOK_EOT || id == GL_TOK_EOS;
}

static gl_status feed_special(struct gl_atem_parser *p, gl_token id, struct gl_err *err)
{
    gl_status st = GL_OK;
    if (id == GL_ATEM_TOK_START) {
        // A new message; one without an end token before it still closes the previous body.
        st = close_body(p, 0, err);
        p->st = GL_ATEM_ST_HEADER;
        p->header.len = 0;
        p->header_overflow = 0;
    } else if (id == GL_ATEM_TOK_MESSAGE) {
        if (p->st == GL_ATEM_ST_HEADER)
            st = open_body(p, err);
        // elsewhere stray: dropped
    } else if (is_end(id)) {
        if (p->st != GL_ATEM_ST_HEADER)
            st = close_body(p, 0, err);
        // A header cut by an end token emits nothing.
        p->st = id == GL_TOK_EOM ? GL_ATEM_ST_BETWEEN : GL_ATEM_ST_DONE;
    }
    // Other specials (pads, <|patch|>, ...) carry no text.
    return st;
}

gl_status gl_atem_parser_feed(struct gl_atem_parser *p, gl_token id, struct gl_err *err)
{
    gl_status st = GL_OK;
    size_t n = 0;
    const char *bytes = gl_tokenizer_token_bytes(p->tok, id, &n);
    if (!bytes) {
        // Out-of-vocabulary ids carry nothing; count them so indices match the sequence.
    } else if (gl_tokenizer_is_special(p->tok, id)) {
        st = feed_special(p, id, err);
    } else if (p->st == GL_ATEM_ST_HEADER) {
        if (p->header.len + n > HEADER_MAX)
            p->header_overflow = 1;
        else if (gl_buf_put(&p->header, bytes, n) != GL_OK)
            st = nomem(err, "header");
    } else if (p->st == GL_ATEM_ST_REASONING || p->st == GL_ATEM_ST_ANSWER) {
        if (gl_buf_reserve(&p->text, n + 8) != GL_OK)
            st = nomem(err, "text");
        else {
            int k = gl_detok_feed(&p->detok, p->tok, id, 0, p->text.p, p->text.cap);
            GL_ASSERT(k >= 0);
            st = emit_text(p, p->text.p, (size_t)k, err);
        }
    } else if (p->st == GL_ATEM_ST_TOOL) {
        st = tool_feed(p, bytes, n, err);
    }
    // BETWEEN / DONE: text outside any message is not shown.
    p->n_consumed++;
    return st;
}

gl_status gl_atem_parser_finish(struct gl_atem_parser *p, struct gl_err *err)
{
    gl_status st = GL_OK;
    if (p->st != GL_ATEM_ST_HEADER)
        st = close_body(p, 1, err);
    p->st = GL_ATEM_ST_DONE;
    p->header.len = 0;
    return st;
}

gl_status gl_atem_parser_new(struct gl_atem_parser **out, const struct gl_tokenizer *t,
                             const char *id_prefix, gl_atem_sink sink, void *user,
                             struct gl_err *err)
{
    *out = NULL;
    if (!t || !sink)
        return gl_err_set(err, GL_E_INVAL, "atem: parser needs a tokenizer and a sink");
    if (!id_prefix)
        id_prefix = "call_";
    if (strlen(id_prefix) >= ID_MAX)
        return gl_err_set(err, GL_E_INVAL, "atem: tool call id prefix over %d bytes", ID_MAX - 1);
    struct gl_atem_parser *p = gl_malloc(sizeof *p);
    if (!p)
        return nomem(err, "parser");
    memset(p, 0, sizeof *p);
    p->tok = t;
    p->sink = sink;
    p->user = user;
    strcpy(p->id_prefix, id_prefix);
    p->st = GL_ATEM_ST_HEADER;
    p->answer_index = p->tool_index_tok = -1;
    *out = p;
    return GL_OK;
}

void gl_atem_parser_free(struct gl_atem_parser *p)
{
    if (!p)
        return;
    gl_buf_free(&p->header);
    gl_buf_free(&p->text);
    gl_buf_free(&p->clean);
    gl_buf_free(&p->tool);
    gl_buf_free(&p->key);
    gl_buf_free(&p->call_name);
    gl_buf_free(&p->args);
    gl_free(p);
}

enum gl_atem_state gl_atem_parser_state(const struct gl_atem_parser *p)
{
    return p->st;
}

int64_t gl_atem_parser_n_consumed(const struct gl_atem_parser *p)
{
    return p->n_consumed;
}

int gl_atem_parser_answer_body_started(const struct gl_atem_parser *p)
{
    return p->answer_index >= 0;
}

int64_t gl_atem_parser_answer_body_index(const struct gl_atem_parser *p)
{
    return p->answer_index;
}

int64_t gl_atem_parser_tool_body_index(const struct gl_atem_parser *p)
{
    return p->tool_index_tok;
}

// ---- accumulator: events -> OpenAI message and streaming deltas ----

static int delta_push(struct gl_atem_accum *a, enum gl_atem_delta_kind kind, int index,
                      const char *text, size_t n)
{
    if (a->n_deltas == a->cap_deltas) {
        size_t cap = a->cap_deltas ? a->cap_deltas * 2 : 16;
        struct gl_atem_delta *d = gl_realloc(a->deltas, cap * sizeof *d);
        if (!d)
            return 0;
        a->deltas = d;
        a->cap_deltas = cap;
    }
    char *t = gl_malloc(n + 1);
    if (!t)
        return 0;
    if (n)
        memcpy(t, text, n);
    t[n] = 0;
    a->deltas[a->n_deltas++] =
        (struct gl_atem_delta){.kind = kind, .index = index, .text = t, .len = n};
    return 1;
}

gl_status gl_atem_accum_init(struct gl_atem_accum *a)
{
    memset(a, 0, sizeof *a);
    if (!delta_push(a, GL_ATEM_DELTA_ROLE, 0, "assistant", 9))
        return GL_E_NOMEM;
    return GL_OK;
}

void gl_atem_accum_free(struct gl_atem_accum *a)
{
    gl_free(a->content.p);
    gl_free(a->reasoning.p);
    for (int i = 0; i < a->n_calls; i++) {
        gl_free(a->calls[i].id);
        gl_free(a->calls[i].name);
        gl_free(a->calls[i].arguments);
    }
    gl_free(a->calls);
    for (size_t i = 0; i < a->n_deltas; i++)
        gl_free(a->deltas[i].text);
    gl_free(a->deltas);
    memset(a, 0, sizeof *a);
}

static int accum_event(struct gl_atem_accum *a, const struct gl_atem_event *ev)
{
    switch (ev->kind) {
    case GL_ATEM_EV_CONTENT:
        a->has_content = 1;
        return gl_buf_put(&a->content, ev->text, ev->len) == GL_OK &&
               delta_push(a, GL_ATEM_DELTA_CONTENT, 0, ev->text, ev->len);
    case GL_ATEM_EV_REASONING:
        a->has_reasoning = 1;
        return gl_buf_put(&a->reasoning, ev->text, ev->len) == GL_OK &&
               delta_push(a, GL_ATEM_DELTA_REASONING, 0, ev->text, ev->len);
    case GL_ATEM_EV_TOOL_START: {
        GL_ASSERT(ev->tool_index == a->n_calls);
        if (a->n_calls == a->cap_calls) {
            int cap = a->cap_calls ? a->cap_calls * 2 : 4;
            struct gl_atem_tool_call *c = gl_realloc(a->calls, (size_t)cap * sizeof *c);
            if (!c)
                return 0;
            a->calls = c;
            a->cap_calls = cap;
        }
        struct gl_atem_tool_call *c = &a->calls[a->n_calls];
        memset(c, 0, sizeof *c);
        c->id = gl_strdup(ev->id);
        c->name = gl_strdup(ev->name);
        c->arguments = gl_strdup("");
        a->n_calls++;
        return c->id && c->name && c->arguments &&
               delta_push(a, GL_ATEM_DELTA_TOOL_HEAD, ev->tool_index, "", 0);
    }
    case GL_ATEM_EV_TOOL_ARGS: {
        GL_ASSERT(ev->tool_index >= 0 && ev->tool_index < a->n_calls);
        struct gl_atem_tool_call *c = &a->calls[ev->tool_index];
        char *s = gl_realloc(c->arguments, c->arguments_len + ev->len + 1);
        if (!s)
            return 0;
        memcpy(s + c->arguments_len, ev->text, ev->len);
        c->arguments_len += ev->len;
        s[c->arguments_len] = 0;
        c->arguments = s;
        return delta_push(a, GL_ATEM_DELTA_TOOL_ARGS, ev->tool_index, ev->text, ev->len);
    }
    case GL_ATEM_EV_TOOL_END:
        GL_ASSERT(ev->tool_index >= 0 && ev->tool_index < a->n_calls);
        a->calls[ev->tool_index].truncated = ev->truncated;
        return 1;
    case GL_ATEM_EV_MSG_END:
        return 1;
    }
    return 1;
}

void gl_atem_accum_sink(void *accum, const struct gl_atem_event *ev)
{
    struct gl_atem_accum *a = accum;
    if (a->status == GL_OK && !accum_event(a, ev))
        a->status = GL_E_NOMEM;
}

const char *gl_atem_accum_finish_reason(const struct gl_atem_accum *a, const char *given)
{
    return a->n_calls ? "tool_calls" : given;
}

// Sets key to a new reference; returns 0 if v is NULL or the set failed.
static int jset(json_t *o, const char *key, json_t *v)
{
    return v && json_object_set_new(o, key, v) == 0;
}

static json_t *call_json(const struct gl_atem_tool_call *c, int index, int with_args)
{
    json_t *o = json_object(), *f = json_object();
    int ok = o && f && jset(o, "index", json_integer(index)) && jset(o, "id", json_string(c->id)) &&
             jset(o, "type", json_string("function")) && jset(f, "name", json_string(c->name)) &&
             jset(f, "arguments",
                  json_stringn(with_args ? c->arguments : "", with_args ? c->arguments_len : 0));
    if (ok)
        return json_object_set_new(o, "function", f) == 0 ? o : (json_decref(o), NULL);
    json_decref(o);
    json_decref(f);
    return NULL;
}

json_t *gl_atem_accum_message_json(const struct gl_atem_accum *a)
{
    json_t *m = json_object();
    int ok = m && jset(m, "role", json_string("assistant"));
    if (ok)
        ok = jset(m, "content",
                  a->has_content || !a->n_calls
                      ? json_stringn(a->content.p ? a->content.p : "", a->content.len)
                      : json_null());
    if (ok && a->has_reasoning)
        ok = jset(m, "reasoning", json_stringn(a->reasoning.p, a->reasoning.len)) &&
             jset(m, "reasoning_content", json_stringn(a->reasoning.p, a->reasoning.len));
    if (ok && a->n_calls) {
        json_t *arr = json_array();
        ok = jset(m, "tool_calls", arr);
        for (int i = 0; ok && i < a->n_calls; i++) {
            json_t *c = call_json(&a->calls[i], i, 1);
            ok = c && json_object_del(c, "index") == 0 && json_array_append_new(arr, c) == 0;
        }
    }
    if (!ok) {
        json_decref(m);
        return NULL;
    }
    return m;
}

json_t *gl_atem_delta_json(const struct gl_atem_accum *a, const struct gl_atem_delta *d)
{
    json_t *o = json_object();
    int ok = o != NULL;
    switch (d->kind) {
    case GL_ATEM_DELTA_ROLE:
        ok = ok && jset(o, "role", json_string(d->text));
        break;
    case GL_ATEM_DELTA_CONTENT:
        ok = ok && jset(o, "content", json_stringn(d->text, d->len));
        break;
    case GL_ATEM_DELTA_REASONING:
        ok = ok && jset(o, "reasoning", json_stringn(d->text, d->len)) &&
             jset(o, "reasoning_content", json_stringn(d->text, d->len));
        break;
    case GL_ATEM_DELTA_TOOL_HEAD:
    case GL_ATEM_DELTA_TOOL_ARGS: {
        GL_ASSERT(d->index >= 0 && d->index < a->n_calls);
        json_t *c;
        if (d->kind == GL_ATEM_DELTA_TOOL_HEAD) {
            c = call_json(&a->calls[d->index], d->index, 0);
        } else {
            c = json_object();
            json_t *f = json_object();
            if (!(c && f && jset(c, "index", json_integer(d->index)) &&
                  jset(f, "arguments", json_stringn(d->text, d->len)) && jset(c, "function", f))) {
                json_decref(c);
                c = NULL;
            }
        }
        json_t *arr = json_array();
        ok = ok && c && arr && json_array_append_new(arr, c) == 0 && jset(o, "tool_calls", arr);
        if (!ok && arr == NULL)
            json_decref(c);
        break;
    }
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
