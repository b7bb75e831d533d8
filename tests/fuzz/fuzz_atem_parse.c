// SPDX-License-Identifier: MIT
// Fuzz target for the ATEM output parser over token-id streams. Each input byte picks one item:
// a framing special (<|start|>, <|message|>, <|eom|>, <|eot|>, <|end_of_text|>, a pad), a text
// piece (header words, ATEM tags, JSON fragments, UTF-8 split across byte tokens), or with its
// top bits set, any special id (next byte). Invariants: no crash; no "<|" in any text event (no
// text piece contains it, so it could only come from framing); text events and tool names are
// valid UTF-8; every call's arguments are one JSON object; and the joined reasoning and answer
// text equals a whole-sequence reference split on the specials (when each body is valid UTF-8).
// Vocabulary: $GLINT_VOCAB or ../shared/data/tokenizer/llama4-tokenizer.model; absent: no-op.
#include "chat/atem_parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const pieces[] = {
    " to=",
    "self",
    "user",
    "assistant",
    " ",
    "get_weather",
    "ns.fn",
    "<atem:function_calls>",
    "\n<atem:invoke name=\"",
    "\">\n",
    "<atem:parameter name=\"",
    "</atem:parameter>\n",
    "</atem:invoke>\n",
    "</atem:function_calls>",
    "{\"a\": [1, 2]}",
    "42",
    "\"",
    "x y",
    "é漢😀",
    "<atem:",
    ">",
    "<",
    "\n",
};
#define N_PIECES     (sizeof pieces / sizeof pieces[0])
#define N_BYTE_TOKS  4 // 0xE6 0xBC 0xA2 (漢 split) and 0xFF (never valid)
#define N_SPECIALS   6
#define MAX_PIECE_ID 16

static struct gl_tokenizer *tok;
static int loaded;
static gl_token piece_ids[N_PIECES][MAX_PIECE_ID];
static size_t piece_n[N_PIECES];
static gl_token byte_ids[N_BYTE_TOKS];
static const gl_token specials[N_SPECIALS] = {GL_ATEM_TOK_START, GL_ATEM_TOK_MESSAGE, GL_TOK_EOM,
                                              GL_TOK_EOT,        GL_TOK_EOS,          GL_TOK_PAD};

static void load(void)
{
    loaded = 1;
    const char *path = getenv("GLINT_VOCAB");
    struct gl_err err = {0};
    if (gl_tokenizer_load_tiktoken(
            &tok, path ? path : "../shared/data/tokenizer/llama4-tokenizer.model", &err) != GL_OK) {
        tok = NULL;
        return;
    }
    for (size_t i = 0; i < N_PIECES; i++) {
        gl_token *ids;
        size_t n;
        if (gl_tokenizer_encode(tok, pieces[i], strlen(pieces[i]), 0, 0, &ids, &n, &err) != GL_OK ||
            n > MAX_PIECE_ID)
            abort();
        memcpy(piece_ids[i], ids, n * sizeof *ids);
        piece_n[i] = n;
        gl_free(ids);
    }
    static const uint8_t bytes[N_BYTE_TOKS] = {0xE6, 0xBC, 0xA2, 0xFF};
    for (int i = 0; i < N_BYTE_TOKS; i++) {
        gl_token *ids;
        size_t n;
        if (gl_tokenizer_encode(tok, (const char *)&bytes[i], 1, 0, 0, &ids, &n, &err) != GL_OK ||
            n != 1)
            abort();
        byte_ids[i] = ids[0];
        gl_free(ids);
    }
}

struct text {
    char *p;
    size_t n, cap;
};

static void text_add(struct text *t, const char *s, size_t n)
{
    if (!n)
        return;
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        if (!t->p)
            abort();
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
}

static int valid_utf8(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint8_t b = u[i];
        size_t k = b < 0x80                 ? 1
                   : b >= 0xC2 && b <= 0xDF ? 2
                   : b >= 0xE0 && b <= 0xEF ? 3
                   : b >= 0xF0 && b <= 0xF4 ? 4
                                            : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((u[i + j] & 0xC0) != 0x80)
                return 0;
        if ((b == 0xE0 && u[i + 1] < 0xA0) || (b == 0xED && u[i + 1] > 0x9F) ||
            (b == 0xF0 && u[i + 1] < 0x90) || (b == 0xF4 && u[i + 1] > 0x8F))
            return 0;
        i += k;
    }
    return 1;
}

struct seen {
    struct text reasoning, content, args;
    int bad;
};

static void sink(void *user, const struct gl_atem_event *ev)
{
    struct seen *s = user;
    if (ev->kind == GL_ATEM_EV_REASONING || ev->kind == GL_ATEM_EV_CONTENT) {
        if (!valid_utf8(ev->text, ev->len) || !ev->len)
            s->bad = 1;
        text_add(ev->kind == GL_ATEM_EV_REASONING ? &s->reasoning : &s->content, ev->text, ev->len);
    } else if (ev->kind == GL_ATEM_EV_TOOL_START) {
        if (!valid_utf8(ev->name, strlen(ev->name)))
            s->bad = 1;
        s->args.n = 0;
    } else if (ev->kind == GL_ATEM_EV_TOOL_ARGS) {
        text_add(&s->args, ev->text, ev->len);
    } else if (ev->kind == GL_ATEM_EV_TOOL_END) {
        json_error_t je;
        json_t *j = json_loadb(s->args.p, s->args.n, 0, &je);
        if (!j || !json_is_object(j) || !valid_utf8(s->args.p, s->args.n))
            s->bad = 2;
        json_decref(j);
    }
}

// Whole-sequence reference: split on the specials, recipient from "to=NAME" in the header.
struct ref {
    struct text reasoning, content, hdr, body;
    int st; // 0 header, 1 reasoning, 2 answer, 3 tool / outside
    int comparable;
};

static void ref_close(struct ref *r)
{
    if (r->st == 1 || r->st == 2) {
        if (!valid_utf8(r->body.p, r->body.n))
            r->comparable = 0;
        text_add(r->st == 1 ? &r->reasoning : &r->content, r->body.p, r->body.n);
    }
    r->body.n = 0;
    r->st = 3;
}

static void ref_open(struct ref *r)
{
    const char *h = r->hdr.p;
    size_t n = r->hdr.n > 512 ? 0 : r->hdr.n;
    r->st = 2;
    for (size_t i = 0; i + 3 <= n; i++) {
        if (memcmp(h + i, "to=", 3) || (i && h[i - 1] != ' ' && h[i - 1] != '\n'))
            continue;
        size_t b = i + 3, e = b;
        while (e < n && h[e] != ' ' && h[e] != '\n')
            e++;
        if (e > b)
            r->st = e - b == 4 && !memcmp(h + b, "self", 4)   ? 1
                    : e - b == 4 && !memcmp(h + b, "user", 4) ? 2
                                                              : 3;
        break;
    }
    r->hdr.n = 0;
}

static void ref_feed(struct ref *r, gl_token id)
{
    size_t n;
    const char *b = gl_tokenizer_token_bytes(tok, id, &n);
    if (!b)
        return;
    if (gl_tokenizer_is_special(tok, id)) {
        if (id == GL_ATEM_TOK_START) {
            ref_close(r);
            r->st = 0;
            r->hdr.n = 0;
        } else if (id == GL_ATEM_TOK_MESSAGE && r->st == 0) {
            ref_open(r);
        } else if (id == GL_TOK_EOM || id == GL_TOK_EOT || id == GL_TOK_EOS) {
            ref_close(r);
        }
        return;
    }
    if (r->st == 0)
        text_add(&r->hdr, b, n);
    else if (r->st == 1 || r->st == 2)
        text_add(&r->body, b, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!loaded)
        load();
    if (!tok || size > 4096)
        return 0;
    struct seen s = {0};
    struct ref r = {.comparable = 1};
    struct gl_atem_parser *p = NULL;
    struct gl_err err = {0};
    if (gl_atem_parser_new(&p, tok, NULL, sink, &s, &err) != GL_OK)
        abort();
    for (size_t i = 0; i < size; i++) {
        gl_token ids[MAX_PIECE_ID];
        size_t n = 0;
        uint8_t b = data[i];
        if (b >= 0xF0 && i + 1 < size) {
            ids[n++] = GL_TOK_BOS + (gl_token)(((b & 0x7) << 8 | data[++i]) % GL_TOK_N_SPECIAL);
        } else if (b % 3 == 0) {
            ids[n++] = specials[(b / 3) % N_SPECIALS];
        } else if (b % 7 == 1) {
            ids[n++] = byte_ids[(b / 7) % N_BYTE_TOKS];
        } else {
            size_t k = b % N_PIECES;
            memcpy(ids, piece_ids[k], piece_n[k] * sizeof *ids);
            n = piece_n[k];
        }
        for (size_t j = 0; j < n; j++) {
            if (gl_atem_parser_feed(p, ids[j], &err) != GL_OK)
                abort();
            ref_feed(&r, ids[j]);
        }
    }
    if (gl_atem_parser_finish(p, &err) != GL_OK || gl_atem_parser_finish(p, &err) != GL_OK)
        abort();
    ref_close(&r);
    gl_atem_parser_free(p);
    if (s.bad)
        abort();
    if ((s.reasoning.p && strstr(s.reasoning.p, "<|")) ||
        (s.content.p && strstr(s.content.p, "<|")))
        abort(); // framing leaked into text
    if (r.comparable && (r.reasoning.n != s.reasoning.n || r.content.n != s.content.n ||
                         (r.reasoning.n && memcmp(r.reasoning.p, s.reasoning.p, r.reasoning.n)) ||
                         (r.content.n && memcmp(r.content.p, s.content.p, r.content.n))))
        abort(); // text differs from the whole-sequence split
    free(s.reasoning.p);
    free(s.content.p);
    free(s.args.p);
    free(r.reasoning.p);
    free(r.content.p);
    free(r.hdr.p);
    free(r.body.p);
    return 0;
}
