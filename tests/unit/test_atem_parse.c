// SPDX-License-Identifier: MIT
// Tests for the ATEM output parser and the OpenAI accumulator (issue 4 items 2-3): each case
// tokenizes a generated turn (text after `<|start|>assistant`) with the real Llama-4 vocabulary,
// feeds the ids one at a time and compares the exact event stream (consecutive text pieces of
// one kind joined; the piece boundaries are checked separately). Each case also re-encodes the
// decoded text (specials kept) and must give the same events, and checks that the text a client
// would see with special tokens stripped carries the header framing that the events do not.
#include "chat/atem_parse.h"
#include "chat/render.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static struct gl_tokenizer *tok;

struct log {
    char s[8192];
    size_t n;
    int last_kind; // kind of the previous event, to join text pieces
    int pieces;    // text events seen (to check streaming granularity)
};

static void log_add(struct log *l, const char *s, size_t n)
{
    if (l->n + n + 1 < sizeof l->s) {
        memcpy(l->s + l->n, s, n);
        l->n += n;
        l->s[l->n] = 0;
    }
}

static void log_sink(void *user, const struct gl_atem_event *ev)
{
    struct log *l = user;
    char tmp[256];
    int joinable = ev->kind == GL_ATEM_EV_REASONING || ev->kind == GL_ATEM_EV_CONTENT ||
                   ev->kind == GL_ATEM_EV_TOOL_ARGS;
    if (joinable && l->last_kind == (int)ev->kind) {
        l->n--; // reopen the ']' of the previous piece
        log_add(l, ev->text, ev->len);
        log_add(l, "]", 1);
        l->pieces++;
        return;
    }
    if (l->n)
        log_add(l, "|", 1);
    l->last_kind = (int)ev->kind;
    switch (ev->kind) {
    case GL_ATEM_EV_REASONING:
    case GL_ATEM_EV_CONTENT:
        log_add(l, ev->kind == GL_ATEM_EV_REASONING ? "R[" : "C[", 2);
        log_add(l, ev->text, ev->len);
        log_add(l, "]", 1);
        l->pieces++;
        break;
    case GL_ATEM_EV_TOOL_ARGS:
        snprintf(tmp, sizeof tmp, "A%d[", ev->tool_index);
        log_add(l, tmp, strlen(tmp));
        log_add(l, ev->text, ev->len);
        log_add(l, "]", 1);
        break;
    case GL_ATEM_EV_TOOL_START:
        snprintf(tmp, sizeof tmp, "S%d %s %s", ev->tool_index, ev->id, ev->name);
        log_add(l, tmp, strlen(tmp));
        break;
    case GL_ATEM_EV_TOOL_END:
        snprintf(tmp, sizeof tmp, "E%d%s", ev->tool_index, ev->truncated ? "!" : "");
        log_add(l, tmp, strlen(tmp));
        break;
    case GL_ATEM_EV_MSG_END:
        log_add(l, ev->truncated ? "M!" : "M", ev->truncated ? 2 : 1);
        break;
    }
}

// Test shorthand for ATEM blocks: {{F}} opens a block invoking F, ((K|V)) is one parameter,
// {{/}} closes the invoke and the block. Returns a malloc'ed string.
static char *expand(const char *s)
{
    size_t cap = strlen(s) * 4 + 256, n = 0;
    char *out = malloc(cap);
    while (*s) {
        const char *e;
        if (!strncmp(s, "{{/}}", 5)) {
            n += (size_t)sprintf(out + n, "</atem:invoke>\n</atem:function_calls>");
            s += 5;
        } else if (!strncmp(s, "{{", 2) && (e = strstr(s, "}}"))) {
            n += (size_t)sprintf(out + n, "<atem:function_calls>\n<atem:invoke name=\"%.*s\">\n",
                                 (int)(e - s - 2), s + 2);
            s = e + 2;
        } else if (!strncmp(s, "((", 2) && (e = strstr(s, "))")) &&
                   memchr(s, '|', (size_t)(e - s))) {
            const char *bar = memchr(s, '|', (size_t)(e - s));
            n += (size_t)sprintf(out + n, "<atem:parameter name=\"%.*s\">%.*s</atem:parameter>\n",
                                 (int)(bar - s - 2), s + 2, (int)(e - bar - 1), bar + 1);
            s = e + 2;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = 0;
    return out;
}

static gl_token *encode(const char *text, size_t *n)
{
    gl_token *ids = NULL;
    struct gl_err err = {0};
    gl_status st = gl_tokenizer_encode(tok, text, strlen(text), 1, 0, &ids, n, &err);
    if (st != GL_OK) {
        fprintf(stderr, "encode: %s\n", err.msg);
        abort();
    }
    return ids;
}

// Feeds ids (then finish) into a fresh parser logging into l.
static void parse_ids(const gl_token *ids, size_t n, struct log *l, int64_t *answer_index)
{
    struct gl_atem_parser *p = NULL;
    struct gl_err err = {0};
    memset(l, 0, sizeof *l);
    l->last_kind = -1;
    if (gl_atem_parser_new(&p, tok, NULL, log_sink, l, &err) != GL_OK)
        abort();
    for (size_t i = 0; i < n; i++)
        if (gl_atem_parser_feed(p, ids[i], &err) != GL_OK)
            abort();
    if (gl_atem_parser_finish(p, &err) != GL_OK)
        abort();
    if (answer_index)
        *answer_index = gl_atem_parser_answer_body_index(p);
    gl_atem_parser_free(p);
}

// Decodes ids to text with or without the specials (malloc'ed).
static char *decode(const gl_token *ids, size_t n, int skip_special)
{
    struct gl_detok d = {0};
    size_t cap = 64 + n * (1024 + 16), len = 0;
    char *out = malloc(cap);
    for (size_t i = 0; i < n; i++)
        len += (size_t)gl_detok_feed(&d, tok, ids[i], skip_special, out + len, cap - len);
    len += (size_t)gl_detok_flush(&d, out + len, cap - len);
    out[len] = 0;
    return out;
}

// The exact event log of a generated turn; also checks the two text renderings (see header).
static int check_case(const char *shorthand, const char *expected)
{
    char *generated = expand(shorthand);
    size_t n;
    gl_token *ids = encode(generated, &n);
    struct log a, b;
    parse_ids(ids, n, &a, NULL);
    int ok = strcmp(a.s, expected) == 0;
    if (!ok)
        fprintf(stderr, "  got      %s\n  expected %s\n", a.s, expected);
    // Specials kept: the decoded text re-encodes to ids that parse the same.
    char *kept = decode(ids, n, 0);
    size_t n2;
    gl_token *ids2 = encode(kept, &n2);
    parse_ids(ids2, n2, &b, NULL);
    if (strcmp(a.s, b.s) != 0) {
        fprintf(stderr, "  re-encoded text parses differently: %s\n", b.s);
        ok = 0;
    }
    // Specials stripped: the client-visible text still holds the header words (" to=..."),
    // which a text-keyed parser would leak; the events never do.
    char *stripped = decode(ids, n, 1);
    if (strstr(generated, "<|message|>") && !strstr(stripped, " to=")) {
        fprintf(stderr, "  stripped text lost its header: %s\n", stripped);
        ok = 0;
    }
    if (strstr(a.s, "to=") || strstr(a.s, "<|")) {
        if (!strstr(expected, "to=") && !strstr(expected, "<|")) {
            fprintf(stderr, "  framing leaked: %s\n", a.s);
            ok = 0;
        }
    }
    free(kept);
    free(stripped);
    free(generated);
    gl_free(ids);
    gl_free(ids2);
    return ok;
}

TEST(test_reasoning_then_answer)
{
    const char *g = " to=self<|message|>17 × 23 = 391.<|eom|><|start|>assistant to=user<|message|>"
                    "391<|eot|>";
    CHECK(check_case(g, "R[17 × 23 = 391.]|M|C[391]|M"));
    // The grammar arms at the first answer-body token: right after the second <|message|>.
    size_t n;
    gl_token *ids = encode(g, &n);
    struct log l;
    int64_t idx;
    parse_ids(ids, n, &l, &idx);
    size_t msg2 = 0, seen = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] == GL_ATEM_TOK_MESSAGE && ++seen == 2)
            msg2 = i;
    CHECK(seen == 2 && idx == (int64_t)msg2 + 1);
    size_t len;
    const char *b = gl_tokenizer_token_bytes(tok, ids[idx], &len);
    CHECK(b && len >= 1 && b[0] == '3');
    gl_free(ids);
}

TEST(test_answer_only)
{
    CHECK(check_case(" to=user<|message|>Hello, world!<|eot|>", "C[Hello, world!]|M"));
    // An <|eom|> end and the end-of-text token also end an answer.
    CHECK(check_case(" to=user<|message|>a<|eom|>", "C[a]|M"));
    CHECK(check_case(" to=user<|message|>b<|end_of_text|>", "C[b]|M"));
    // Text between messages (after <|eom|>, before <|start|>) is not content.
    CHECK(check_case(" to=self<|message|>x<|eom|>junk<|start|>assistant to=user<|message|>y<|eot|>",
                     "R[x]|M|C[y]|M"));
}

TEST(test_one_tool_call)
{
    CHECK(check_case(" to=self<|message|>I need the weather tool.<|eom|><|start|>assistant "
                     "to=get_weather<|message|>{{get_weather}}((city|Paris)){{/}}<|eot|>",
                     "R[I need the weather tool.]|M|S0 call_0 get_weather|"
                     "A0[{\"city\": \"Paris\"}]|E0|M"));
    // Namespaced function names and a call without parameters.
    CHECK(check_case(" to=weather.get<|message|>{{weather.get}}{{/}}<|eot|>",
                     "S0 call_0 weather.get|A0[{}]|E0|M"));
}

TEST(test_parallel_calls)
{
    CHECK(check_case(" to=get_weather<|message|>{{get_weather}}((city|Paris)){{/}}<|eom|>"
                     "<|start|>assistant to=get_time<|message|>{{get_time}}((tz|Europe/Paris))"
                     "((fmt|24h)){{/}}<|eot|>",
                     "S0 call_0 get_weather|A0[{\"city\": \"Paris\"}]|E0|M|S1 call_1 get_time|"
                     "A1[{\"tz\": \"Europe/Paris\", \"fmt\": \"24h\"}]|E1|M"));
}

TEST(test_json_parameters)
{
    // Whole-value JSON is kept verbatim (objects, arrays, numbers, literals, JSON strings);
    // anything else, including JSON with surrounding spaces, becomes a string.
    CHECK(check_case(" to=f<|message|>{{f}}((o|{\"a\": [1, 2], \"b\": {\"c\": null}}))"
                     "((arr|[1, \"x\", true]))((n|-4.5e3))((t|false))((z|007))((s| 42))"
                     "((q|\"quoted\"))((bad|{oops)){{/}}<|eot|>",
                     "S0 call_0 f|A0[{\"o\": {\"a\": [1, 2], \"b\": {\"c\": null}}, "
                     "\"arr\": [1, \"x\", true], \"n\": -4.5e3, \"t\": false, \"z\": \"007\", "
                     "\"s\": \" 42\", \"q\": \"quoted\", \"bad\": \"{oops\"}]|E0|M"));
}

TEST(test_multiline_string_parameter)
{
    CHECK(check_case(" to=write_file<|message|>{{write_file}}((path|/tmp/a.txt))"
                     "((text|line 1\nline \"2\" \\ end\n\tindented\n)){{/}}<|eot|>",
                     "S0 call_0 write_file|A0[{\"path\": \"/tmp/a.txt\", \"text\": \"line 1\\nline "
                     "\\\"2\\\" \\\\ end\\n\\tindented\\n\"}]|E0|M"));
}

TEST(test_truncation)
{
    // Inside the header: nothing at all.
    CHECK(check_case(" to=us", ""));
    CHECK(check_case(" to=self<|message|>ok<|eom|><|start|>assist", "R[ok]|M"));
    // Inside reasoning: the reasoning so far, marked cut.
    CHECK(check_case(" to=self<|message|>thinking about", "R[thinking about]|M!"));
    // Inside a call: the completed parameters, the partial one dropped, marked cut.
    CHECK(check_case(" to=f<|message|>{{f}}((a|1))<atem:parameter name=\"b\">par",
                     "S0 call_0 f|A0[{\"a\": 1}]|E0!|M!"));
    // Cut right after the header: the call exists with no arguments.
    CHECK(check_case(" to=f<|message|>", "S0 call_0 f|A0[{}]|E0!|M!"));
    // A block that ends without </atem:invoke> is incomplete even at an end token.
    CHECK(
        check_case(" to=f<|message|>{{f}}((a|x))<|eot|>", "S0 call_0 f|A0[{\"a\": \"x\"}]|E0!|M"));
}

TEST(test_tool_block_leniency)
{
    // Text before the block and a doubled '<' are skipped; the header's call takes the invoke.
    CHECK(check_case(" to=f<|message|>Sure: <{{f}}((a|1)){{/}}<|eot|>",
                     "S0 call_0 f|A0[{\"a\": 1}]|E0|M"));
    // A second invoke inside one block is a second call; text after the block is ignored.
    CHECK(check_case(" to=f<|message|><atem:function_calls>\n<atem:invoke name=\"f\">\n((a|1))"
                     "</atem:invoke>\n<atem:invoke name=\"g\">\n((b|2))</atem:invoke>\n"
                     "</atem:function_calls>trailing ((c|3))<|eot|>",
                     "S0 call_0 f|A0[{\"a\": 1}]|E0|S1 call_1 g|A1[{\"b\": 2}]|E1|M"));
    // '<' and near-miss closing tags inside a value stay in the value.
    CHECK(check_case(" to=f<|message|>{{f}}((code|a < b && x</atem:param>y<</)){{/}}<|eot|>",
                     "S0 call_0 f|A0[{\"code\": \"a < b && x</atem:param>y<</\"}]|E0|M"));
}

TEST(test_stray_atem_text_in_answer)
{
    CHECK(check_case(" to=user<|message|>Use <atem:invoke name=\"x\"> and "
                     "<atem:parameter name=\"k\">v</atem:parameter> tags.<|eot|>",
                     "C[Use <atem:invoke name=\"x\"> and <atem:parameter name=\"k\">v"
                     "</atem:parameter> tags.]|M"));
    CHECK(check_case(" to=self<|message|><atem:function_calls>\n</atem:function_calls><|eom|>",
                     "R[<atem:function_calls>\n</atem:function_calls>]|M"));
}

TEST(test_stop_mid_header)
{
    // A stop string matched inside the second header (e.g. stop=["to="]): the server stops
    // feeding there; the cut header leaks nothing and the answer never starts.
    size_t n;
    gl_token *ids =
        encode(" to=self<|message|>hmm<|eom|><|start|>assistant to=user<|message|>x", &n);
    size_t cut = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] == GL_ATEM_TOK_START)
            cut = i + 2; // <|start|>, "assistant", then stop inside " to=user"
    struct log l;
    int64_t idx;
    parse_ids(ids, cut, &l, &idx);
    CHECK(strcmp(l.s, "R[hmm]|M") == 0);
    CHECK(idx == -1);
    // A header ended by <|eot|> before <|message|> emits nothing either.
    CHECK(check_case(" to=user<|eot|>", ""));
    gl_free(ids);
}

static gl_token byte_token(uint8_t b)
{
    size_t n;
    gl_token *ids = NULL;
    struct gl_err err = {0};
    char c = (char)b;
    if (gl_tokenizer_encode(tok, &c, 1, 0, 0, &ids, &n, &err) != GL_OK || n != 1)
        abort();
    gl_token id = ids[0];
    gl_free(ids);
    return id;
}

static int valid_utf8_pieces_ok;
static void piece_sink(void *user, const struct gl_atem_event *ev)
{
    if (ev->kind == GL_ATEM_EV_CONTENT) {
        // Each piece must end on a code-point boundary: no lone lead or continuation bytes.
        const uint8_t *s = (const uint8_t *)ev->text;
        size_t i = 0;
        while (i < ev->len) {
            size_t k = s[i] < 0x80 ? 1 : s[i] >= 0xF0 ? 4 : s[i] >= 0xE0 ? 3 : s[i] >= 0xC2 ? 2 : 0;
            if (!k || i + k > ev->len)
                valid_utf8_pieces_ok = 0;
            i += k ? k : 1;
        }
    }
    log_sink(user, ev);
}

TEST(test_byte_level_splitting)
{
    // Body fed one byte-token at a time: é (2 bytes), 漢 (3), 😀 (4).
    const char *body = "aé漢😀z";
    size_t nh;
    gl_token *head = encode(" to=user<|message|>", &nh);
    struct gl_atem_parser *p = NULL;
    struct gl_err err = {0};
    struct log l;
    memset(&l, 0, sizeof l);
    l.last_kind = -1;
    valid_utf8_pieces_ok = 1;
    REQUIRE(gl_atem_parser_new(&p, tok, NULL, piece_sink, &l, &err) == GL_OK);
    for (size_t i = 0; i < nh; i++)
        CHECK(gl_atem_parser_feed(p, head[i], &err) == GL_OK);
    CHECK(gl_atem_parser_answer_body_started(p));
    CHECK(gl_atem_parser_answer_body_index(p) == (int64_t)nh);
    int events_before = l.pieces;
    for (const char *c = body; *c; c++) {
        CHECK(gl_atem_parser_feed(p, byte_token((uint8_t)*c), &err) == GL_OK);
        if (*c == 'a')
            CHECK(l.pieces == events_before + 1); // ASCII goes out at once
    }
    CHECK(gl_atem_parser_feed(p, GL_TOK_EOT, &err) == GL_OK);
    CHECK(gl_atem_parser_finish(p, &err) == GL_OK);
    CHECK(strcmp(l.s, "C[aé漢😀z]|M") == 0);
    CHECK(l.pieces == 5); // one piece per code point
    CHECK(valid_utf8_pieces_ok);
    gl_atem_parser_free(p);
    gl_free(head);

    // A cut mid-sequence emits U+FFFD, never a lone lead byte.
    gl_token ids[4] = {byte_token(0xE6), byte_token(0xBC)};
    head = encode(" to=user<|message|>", &nh);
    struct gl_atem_parser *q = NULL;
    memset(&l, 0, sizeof l);
    l.last_kind = -1;
    REQUIRE(gl_atem_parser_new(&q, tok, NULL, log_sink, &l, &err) == GL_OK);
    for (size_t i = 0; i < nh; i++)
        CHECK(gl_atem_parser_feed(q, head[i], &err) == GL_OK);
    CHECK(gl_atem_parser_feed(q, ids[0], &err) == GL_OK);
    CHECK(gl_atem_parser_feed(q, ids[1], &err) == GL_OK);
    CHECK(gl_atem_parser_finish(q, &err) == GL_OK);
    CHECK(strcmp(l.s, "C[\xEF\xBF\xBD]|M!") == 0);
    gl_atem_parser_free(q);
    gl_free(head);
}

// Runs a generated turn through the accumulator.
static void accumulate(const char *shorthand, struct gl_atem_accum *a)
{
    char *generated = expand(shorthand);
    size_t n;
    gl_token *ids = encode(generated, &n);
    free(generated);
    struct gl_atem_parser *p = NULL;
    struct gl_err err = {0};
    if (gl_atem_accum_init(a) != GL_OK ||
        gl_atem_parser_new(&p, tok, NULL, gl_atem_accum_sink, a, &err) != GL_OK)
        abort();
    for (size_t i = 0; i < n; i++)
        if (gl_atem_parser_feed(p, ids[i], &err) != GL_OK)
            abort();
    if (gl_atem_parser_finish(p, &err) != GL_OK)
        abort();
    gl_atem_parser_free(p);
    gl_free(ids);
}

static int json_is(json_t *j, const char *expected)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    int ok = s && strcmp(s, expected) == 0;
    if (!ok)
        fprintf(stderr, "  got      %s\n  expected %s\n", s ? s : "(null)", expected);
    free(s);
    json_decref(j);
    return ok;
}

TEST(test_accum_tool_calls)
{
    struct gl_atem_accum a;
    accumulate(" to=self<|message|>Need both.<|eom|><|start|>assistant to=get_weather<|message|>"
               "{{get_weather}}((city|Paris))((days|3)){{/}}<|eom|><|start|>assistant "
               "to=get_time<|message|>{{get_time}}{{/}}<|eot|>",
               &a);
    REQUIRE(a.status == GL_OK);
    CHECK(strcmp(gl_atem_accum_finish_reason(&a, "stop"), "tool_calls") == 0);
    CHECK(json_is(gl_atem_accum_message_json(&a),
                  "{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"Need both.\","
                  "\"reasoning_content\":\"Need both.\",\"tool_calls\":[{\"id\":\"call_0\","
                  "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                  "\"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 3}\"}},{\"id\":\"call_1\","
                  "\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":"
                  "\"{}\"}}]}"));
    // Deltas: role first, reasoning, then per call a head and its argument pieces in order.
    static const char *const want[] = {
        "{\"role\":\"assistant\"}",
        NULL, // reasoning pieces (one or more), checked by kind below
        "{\"tool_calls\":[{\"index\":0,\"id\":\"call_0\",\"type\":\"function\",\"function\":"
        "{\"name\":\"get_weather\",\"arguments\":\"\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": "
        "\\\"Paris\\\"\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\", \\\"days\\\": 3\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"}\"}}]}",
        "{\"tool_calls\":[{\"index\":1,\"id\":\"call_1\",\"type\":\"function\",\"function\":"
        "{\"name\":\"get_time\",\"arguments\":\"\"}}]}",
        "{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{}\"}}]}",
    };
    size_t w = 0;
    for (size_t i = 0; i < a.n_deltas; i++) {
        if (a.deltas[i].kind == GL_ATEM_DELTA_REASONING) {
            CHECK(w == 1 || w == 2);
            w = 2;
            continue;
        }
        REQUIRE(w < sizeof want / sizeof want[0] && want[w]);
        CHECK(json_is(gl_atem_delta_json(&a, &a.deltas[i]), want[w]));
        w++;
    }
    CHECK(w == sizeof want / sizeof want[0]);
    gl_atem_accum_free(&a);
}

TEST(test_accum_answer)
{
    struct gl_atem_accum a;
    accumulate(
        " to=self<|message|>Easy.<|eom|><|start|>assistant to=user<|message|>Hi \"you\"<|eot|>",
        &a);
    REQUIRE(a.status == GL_OK);
    CHECK(strcmp(gl_atem_accum_finish_reason(&a, "stop"), "stop") == 0);
    CHECK(json_is(gl_atem_accum_message_json(&a),
                  "{\"role\":\"assistant\",\"content\":\"Hi \\\"you\\\"\",\"reasoning\":\"Easy.\","
                  "\"reasoning_content\":\"Easy.\"}"));
    REQUIRE(a.n_deltas >= 3);
    CHECK(a.deltas[0].kind == GL_ATEM_DELTA_ROLE);
    CHECK(json_is(gl_atem_delta_json(&a, &a.deltas[1]),
                  "{\"reasoning\":\"Easy\",\"reasoning_content\":\"Easy\"}")); // per token
    CHECK(a.deltas[a.n_deltas - 1].kind == GL_ATEM_DELTA_CONTENT);
    gl_atem_accum_free(&a);
    // Cut by max_tokens inside the header: an empty answer with the caller's "length".
    accumulate(" to=us", &a);
    CHECK(strcmp(gl_atem_accum_finish_reason(&a, "length"), "length") == 0);
    CHECK(json_is(gl_atem_accum_message_json(&a), "{\"role\":\"assistant\",\"content\":\"\"}"));
    CHECK(a.n_deltas == 1);
    gl_atem_accum_free(&a);
}

// Renders [user "hi", msg] and checks it is the generation prompt for [user "hi"] followed by
// exactly the generated text: render(parse(generated)) reproduces the assistant turn.
static int round_trip(const char *shorthand)
{
    char *generated = expand(shorthand);
    struct gl_atem_accum a;
    accumulate(shorthand, &a);
    json_t *msg = gl_atem_accum_message_json(&a);
    json_t *req = json_pack("{s:[{s:s,s:s}],s:b}", "messages", "role", "user", "content", "hi",
                            "add_generation_prompt", 1);
    struct gl_err err = {0};
    char *p1 = NULL, *p2 = NULL;
    size_t n1 = 0, n2 = 0;
    int ok = msg && req && gl_chat_render(req, &p1, &n1, &err) == GL_OK;
    if (ok) {
        json_array_append(json_object_get(req, "messages"), msg);
        json_object_set_new(req, "add_generation_prompt", json_false());
        ok = gl_chat_render(req, &p2, &n2, &err) == GL_OK;
    }
    size_t ng = strlen(generated);
    ok = ok && n2 == n1 + ng && memcmp(p2, p1, n1) == 0 && memcmp(p2 + n1, generated, ng) == 0;
    if (!ok)
        fprintf(stderr, "  round trip: %s\n  generated %s\n  rendered  %s\n", err.msg, generated,
                p2 ? p2 + (n1 < n2 ? n1 : 0) : "(none)");
    gl_free(p1);
    gl_free(p2);
    json_decref(msg);
    json_decref(req);
    gl_atem_accum_free(&a);
    free(generated);
    return ok;
}

TEST(test_round_trip_render)
{
    CHECK(round_trip(" to=self<|message|>17 × 23 = 391.<|eom|><|start|>assistant "
                     "to=user<|message|>391<|eot|>"));
    CHECK(round_trip(" to=self<|message|>Need the tool.<|eom|><|start|>assistant "
                     "to=get_weather<|message|>{{get_weather}}((city|Paris))((days|3))"
                     "((opts|{\"units\": \"C\", \"hours\": [6, 12]}))((now|true)){{/}}<|eot|>"));
    CHECK(round_trip(" to=a.b<|message|>{{a.b}}((x|line 1\nline 2)){{/}}<|eom|><|start|>assistant "
                     "to=c<|message|>{{c}}{{/}}<|eot|>"));
}

static void free_tok(void)
{
    gl_tokenizer_free(tok);
}

int main(void)
{
    const char *path = t_vocab_path();
    struct gl_err err = {0};
    if (gl_tokenizer_load_tiktoken(&tok, path, &err) != GL_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return 1;
    }
    atexit(free_tok);
    RUN_TESTS(test_reasoning_then_answer, test_answer_only, test_one_tool_call, test_parallel_calls,
              test_json_parameters, test_multiline_string_parameter, test_truncation,
              test_tool_block_leniency, test_stray_atem_text_in_answer, test_stop_mid_header,
              test_byte_level_splitting, test_accum_tool_calls, test_accum_answer,
              test_round_trip_render);
}
