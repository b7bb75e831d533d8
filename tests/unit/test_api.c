// SPDX-License-Identifier: MIT
// api/ without sockets (issue 23): request parsing and its error mapping (HTTP status, the field
// named, vLLM's error object), unknown fields lenient and strict, and the response side fed
// scripted engine events: chat messages and reasoning from an ATEM turn, streamed chunks that
// reassemble into the whole reply, completions echo + logprobs (a choice that runs ahead of
// choice 0's prompt logprobs waits for them), an engine error, request ids. The real vocabulary
// ($GLINT_VOCAB or ../shared).
#include "api/api_int.h" // white-box: the request's fields
#include "test.h"

#include <string.h>

static struct gl_tokenizer *tok;
static struct gl_gvocab *gvocab;
static struct gl_grammar_cache *gcache;
static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;
static struct gl_api_config cfg;

static int setup(void)
{
    struct gl_err err = {0};
    if (gl_tokenizer_load_tiktoken(&tok, t_vocab_path(), &err) != GL_OK) {
        fprintf(stderr, "test_api: no vocabulary at %s: %s\n", t_vocab_path(), err.msg);
        return 0;
    }
    if (gl_gvocab_new(&gvocab, tok, &err) != GL_OK || gl_grammar_cache_new(&gcache, 16, &err))
        return 0;
    cfg.tok = tok;
    cfg.gvocab = gvocab;
    cfg.gcache = gcache;
    cfg.grammar_lock = &glock;
    cfg.model_name = "m";
    cfg.max_model_len = 4096;
    cfg.max_token_bytes = gl_api_max_token_bytes(tok);
    cfg.max_logprobs = 20;
    cfg.defaults = gl_sample_default_params();
    cfg.eos_ids[0] = 200001;
    cfg.eos_ids[1] = 200008;
    cfg.n_eos = 2;
    cfg.framing = 1;
    return 1;
}

static gl_status parse(const struct gl_api_config *c, enum gl_api_endpoint ep, const char *body,
                       struct gl_api_req **r, struct gl_api_error *e)
{
    memset(e, 0, sizeof *e);
    *r = NULL;
    return gl_api_parse(c, ep, body, strlen(body), r, e);
}

static int32_t *encode(const char *text, int32_t *n)
{
    gl_token *ids = NULL;
    size_t k = 0;
    struct gl_err err = {0};
    if (gl_tokenizer_encode(tok, text, strlen(text), 1, 0, &ids, &k, &err) != GL_OK)
        return NULL;
    *n = (int32_t)k;
    return ids;
}

// Every error: a status of the 400 family or 404, the field named, a message that names it,
// and vLLM's object {"error": {message, type, param, code = status}}.
TEST(test_parse_errors)
{
    static const struct {
        enum gl_api_endpoint ep;
        const char *body;
        int http;
        const char *param;
    } cases[] = {
        {GL_API_CHAT, "{", 400, ""},
        {GL_API_CHAT, "[]", 400, ""},
        {GL_API_CHAT, "{\"model\": \"m\"}", 400, "messages"},
        {GL_API_CHAT,
         "{\"model\": \"nope\", \"messages\": [{\"role\": \"user\", \"content\": "
         "\"x\"}]}",
         404, "model"},
        {GL_API_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
         "\"temperature\": -1}",
         400, "temperature"},
        {GL_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 0}", 400,
         "n"},
        {GL_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_p\": 2}",
         400, "top_p"},
        {GL_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": 5}",
         400, "stop"},
        {GL_API_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
         "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
         "{\"name\": \"s\", \"schema\": {\"type\": \"bogus\"}}}}",
         400, "response_format"},
        {GL_API_COMPLETIONS, "{\"model\": \"m\"}", 400, "prompt"},
        {GL_API_COMPLETIONS, "{\"prompt\": []}", 400, "prompt"},
        {GL_API_COMPLETIONS, "{\"prompt\": \"x\", \"logprobs\": 21}", 400, "logprobs"},
        {GL_API_COMPLETIONS, "{\"prompt\": \"x\", \"suffix\": \"y\"}", 400, "suffix"},
        {GL_API_COMPLETIONS, "{\"prompt\": [1, 2, 999999999]}", 400, "prompt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gl_api_req *r;
        struct gl_api_error e;
        gl_status st = parse(&cfg, cases[i].ep, cases[i].body, &r, &e);
        CHECKF(st != GL_OK && r == NULL, "case %zu accepted: %s", i, cases[i].body);
        CHECKF(e.http == cases[i].http, "case %zu: http %d, want %d (%s)", i, e.http, cases[i].http,
               e.msg);
        CHECKF(strncmp(e.param, cases[i].param, strlen(cases[i].param)) == 0 &&
                   (cases[i].param[0] || !e.param[0]),
               "case %zu: param '%s', want '%s' (%s)", i, e.param, cases[i].param, e.msg);
        CHECKF(e.msg[0] && (!cases[i].param[0] || strstr(e.msg, cases[i].param)),
               "case %zu: message '%s' does not name '%s'", i, e.msg, cases[i].param);
        json_t *j = gl_api_error_json(&e), *o = json_object_get(j, "error");
        CHECKF(o && json_is_string(json_object_get(o, "message")) &&
                   json_is_string(json_object_get(o, "type")) &&
                   json_integer_value(json_object_get(o, "code")) == e.http,
               "case %zu: error object", i);
        json_decref(j);
        gl_api_req_free(&cfg, r);
    }
}

// vLLM accepts fields it does not know (logged); glint names them in r->ignored. Strict: 400.
TEST(test_unknown_fields)
{
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"store\": "
                       "true, \"metadata\": {}, \"nosuch_field\": 1, \"max_tokens\": 4}";
    struct gl_api_req *r;
    struct gl_api_error e;
    REQUIRE(parse(&cfg, GL_API_CHAT, body, &r, &e) == GL_OK);
    CHECKF(strstr(r->ignored, "store") && strstr(r->ignored, "metadata") &&
               strstr(r->ignored, "nosuch_field"),
           "ignored: '%s'", r->ignored);
    CHECK(r->sp.max_tokens == 4 && r->ep == GL_API_CHAT && r->n_prompts == 1);
    gl_api_req_free(&cfg, r);
    struct gl_api_config strict = cfg;
    strict.strict_fields = 1;
    CHECK(parse(&strict, GL_API_CHAT, body, &r, &e) != GL_OK && e.http == 400 &&
          (!strcmp(e.param, "store") || !strcmp(e.param, "metadata") ||
           !strcmp(e.param, "nosuch_field")));
    // an output-changing field is refused either way
    CHECK(parse(&cfg, GL_API_CHAT,
                "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"priority\": 3}", &r,
                &e) != GL_OK &&
          !strcmp(e.param, "priority"));
}

// Events of one choice: each token of ids alone (with logprob lp and top_n made-up tops when
// asked), then a finish event.
static void feed(struct gl_api_resp *s, const struct gl_api_req *r, int32_t prompt, int32_t index,
                 const int32_t *ids, int32_t n, enum gl_finish fin, int32_t stop_token)
{
    static const int32_t top_ids[2] = {11, 12};
    static const float top_lp[2] = {-0.25f, -2.5f};
    const float lp = -0.5f;
    for (int32_t i = 0; i < n; i++) {
        size_t bl = 0;
        const char *b = gl_tokenizer_token_bytes(tok, ids[i], &bl);
        if (gl_tokenizer_is_special(tok, ids[i]))
            bl = 0;
        struct gl_event ev = {.index = index,
                              .tokens = ids + i,
                              .n_tokens = 1,
                              .text = b,
                              .text_len = bl,
                              .logprobs = r->sp.logprobs >= 0 ? &lp : NULL,
                              .top_ids = r->sp.logprobs >= 0 ? top_ids : NULL,
                              .top_logprobs = r->sp.logprobs >= 0 ? top_lp : NULL,
                              .top_n = r->sp.logprobs > 0 ? r->sp.logprobs : 0,
                              .stop_token = -1,
                              .n_prompt = r->prompts[prompt].n,
                              .n_generated = i + 1};
        gl_api_resp_event(s, prompt, &ev);
    }
    struct gl_event end = {.index = index,
                           .text = "",
                           .finish = fin,
                           .stop_token = stop_token,
                           .n_prompt = r->prompts[prompt].n,
                           .n_generated = n};
    gl_api_resp_event(s, prompt, &end);
}

// The SSE bytes so far as a JSON array of the chunks' data objects ([DONE] as the string).
static json_t *take_chunks(struct gl_api_resp *s)
{
    size_t n = 0;
    char *p = gl_api_resp_take_sse(s, &n);
    json_t *out = json_array();
    for (size_t i = 0; p && i < n;) {
        GL_ASSERT(n - i > 6 && memcmp(p + i, "data: ", 6) == 0);
        char *end = strstr(p + i, "\n\n");
        GL_ASSERT(end);
        size_t len = (size_t)(end - (p + i + 6));
        json_t *o = len == 6 && !memcmp(p + i + 6, "[DONE]", 6)
                        ? json_string("[DONE]")
                        : json_loadb(p + i + 6, len, 0, NULL);
        GL_ASSERT(o);
        json_array_append_new(out, o);
        i = (size_t)(end + 2 - p);
    }
    gl_free(p);
    return out;
}

// A chat turn with reasoning then an answer: the message, its finish reason and usage; the same
// turn streamed: the content deltas reassemble into the message, one finish chunk, [DONE] last.
TEST(test_chat_reply)
{
    int32_t n = 0;
    int32_t *ids = encode(" to=self<|message|>think<|eom|><|start|>assistant to=user<|message|>"
                          "Hello, world!<|eot|>",
                          &n);
    REQUIRE(ids && n > 8);
    for (int stream = 0; stream < 2; stream++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stream\": %s, "
                 "\"stream_options\": {\"include_usage\": true}}",
                 stream ? "true" : "false");
        if (!stream) // stream_options only with stream (vLLM refuses it otherwise)
            snprintf(body, sizeof body,
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
        struct gl_api_req *r;
        struct gl_api_error e;
        REQUIRE(parse(&cfg, GL_API_CHAT, body, &r, &e) == GL_OK);
        struct gl_api_resp *s = NULL;
        struct gl_err err = {0};
        REQUIRE(gl_api_resp_new(&s, &cfg, r, &err) == GL_OK);
        feed(s, r, 0, 0, ids, n - 1, GL_FINISH_STOP, ids[n - 1]);
        CHECK(gl_api_resp_done(s) && gl_api_resp_error(s) == NULL);
        int64_t pt = 0, ct = 0;
        gl_api_resp_usage(s, &pt, &ct);
        CHECKF(ct == n - 1 && pt == r->prompts[0].n, "usage %lld %lld", (long long)pt,
               (long long)ct);
        if (!stream) {
            json_t *j = gl_api_resp_json(s);
            json_t *c = json_array_get(json_object_get(j, "choices"), 0);
            json_t *m = json_object_get(c, "message");
            CHECKF(!strcmp(json_string_value(json_object_get(m, "content")), "Hello, world!"),
                   "content '%s'", json_string_value(json_object_get(m, "content")));
            CHECK(!strcmp(json_string_value(json_object_get(m, "reasoning_content")), "think"));
            CHECK(!strcmp(json_string_value(json_object_get(c, "finish_reason")), "stop"));
            json_decref(j);
        } else {
            json_t *chunks = take_chunks(s), *v;
            size_t i, nc = json_array_size(chunks), finishes = 0;
            char content[64] = "";
            json_array_foreach(chunks, i, v)
            {
                json_t *c = json_array_get(json_object_get(v, "choices"), 0);
                const char *d =
                    json_string_value(json_object_get(json_object_get(c, "delta"), "content"));
                if (d && strlen(content) + strlen(d) < sizeof content)
                    strcat(content, d);
                finishes += json_is_string(json_object_get(c, "finish_reason"));
            }
            CHECKF(!strcmp(content, "Hello, world!"), "streamed content '%s'", content);
            CHECK(finishes == 1 && nc >= 3);
            CHECK(json_is_string(json_array_get(chunks, nc - 1)));
            CHECK(json_integer_value(
                      json_object_get(json_object_get(json_array_get(chunks, nc - 2), "usage"),
                                      "completion_tokens")) == n - 1);
            json_decref(chunks);
        }
        gl_api_resp_free(s);
        gl_api_req_free(&cfg, r);
    }
    gl_free(ids);
}

// Completions echo + logprobs, streamed with n = 2: choice 1's tokens come before choice 0's
// prompt logprobs (no prefix cache: it prefilled at once), so its first chunk waits for them
// and then opens with the prompt's tokens (the first null), offsets from 0 through them.
TEST(test_completions_echo_stream_waits)
{
    const char *body = "{\"prompt\": [1000, 2000, 3000, 4000, 5000], \"echo\": true, "
                       "\"logprobs\": 1, \"n\": 2, \"stream\": true, \"max_tokens\": 3}";
    struct gl_api_req *r;
    struct gl_api_error e;
    REQUIRE(parse(&cfg, GL_API_COMPLETIONS, body, &r, &e) == GL_OK);
    CHECK(r->sp.prompt_logprobs == 1);
    struct gl_api_resp *s = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_api_resp_new(&s, &cfg, r, &err) == GL_OK);
    const int32_t gen[2] = {6000, 7000};
    // choice 1 runs ahead: one token, nothing may be sent yet
    feed(s, r, 0, 1, gen, 1, GL_FINISH_NONE, -1);
    json_t *c0 = take_chunks(s);
    CHECKF(json_array_size(c0) == 0, "%zu chunks before the prompt's logprobs",
           json_array_size(c0));
    json_decref(c0);
    // choice 0's prefill: positions 1-2, then 3-4 (the prompt token rank 2, top 1)
    float plp[2] = {-1.0f, -2.0f}, top_lp[2] = {-0.5f, -0.75f};
    int32_t rank[2] = {2, 2}, top_id[2] = {42, 43};
    for (int32_t pos = 1; pos < 5; pos += 2) {
        struct gl_event ev = {.index = 0,
                              .plp_pos = pos,
                              .n_plp = 2,
                              .plp_k = 1,
                              .plp_logprobs = plp,
                              .plp_ranks = rank,
                              .plp_top_ids = top_id,
                              .plp_top_logprobs = top_lp,
                              .stop_token = -1,
                              .n_prompt = 5};
        gl_api_resp_event(s, 0, &ev);
        json_t *c = take_chunks(s);
        CHECKF(json_array_size(c) == (pos == 1 ? 0u : 1u), "after prompt logprobs to %d: %zu",
               pos + 1, json_array_size(c));
        if (pos == 3 && json_array_size(c) == 1) {
            json_t *ch = json_array_get(json_object_get(json_array_get(c, 0), "choices"), 0);
            json_t *lp = json_object_get(ch, "logprobs");
            json_t *toks = json_object_get(lp, "tokens"),
                   *lps = json_object_get(lp, "token_logprobs");
            json_t *offs = json_object_get(lp, "text_offset");
            CHECK(json_integer_value(json_object_get(ch, "index")) == 1);
            CHECKF(json_array_size(toks) == 6 && json_array_size(offs) == 6,
                   "%zu tokens in choice 1's first chunk", json_array_size(toks));
            CHECK(json_is_null(json_array_get(lps, 0)) &&
                  fabs(json_real_value(json_array_get(lps, 1)) + 1.0) < 1e-6 &&
                  fabs(json_real_value(json_array_get(lps, 5)) + 0.5) < 1e-6);
            size_t off = 0; // characters (code points), as vLLM's Python str lengths
            for (size_t k = 0; k < json_array_size(toks); k++) {
                CHECKF(json_integer_value(json_array_get(offs, k)) == (json_int_t)off,
                       "text_offset[%zu] %lld, want %zu", k,
                       (long long)json_integer_value(json_array_get(offs, k)), off);
                const char *t = json_string_value(json_array_get(toks, k));
                for (size_t b = 0; t && t[b]; b++)
                    off += ((unsigned char)t[b] & 0xC0) != 0x80;
            }
        }
        json_decref(c);
    }
    feed(s, r, 0, 0, gen, 2, GL_FINISH_LENGTH, -1);
    struct gl_event end1 = {.index = 1, .text = "", .finish = GL_FINISH_LENGTH, .n_prompt = 5};
    gl_api_resp_event(s, 0, &end1);
    CHECK(gl_api_resp_done(s));
    json_t *c = take_chunks(s);
    CHECK(json_array_size(c) >= 3 && json_is_string(json_array_get(c, json_array_size(c) - 1)));
    json_decref(c);
    gl_api_resp_free(s);
    gl_api_req_free(&cfg, r);
}

// An engine failure: a 500 error for the reply, never a short answer; the stream ends with an
// error event then [DONE].
TEST(test_engine_error)
{
    for (int stream = 0; stream < 2; stream++) {
        struct gl_api_req *r;
        struct gl_api_error e;
        REQUIRE(parse(&cfg, GL_API_COMPLETIONS,
                      stream ? "{\"prompt\": \"x\", \"stream\": true}" : "{\"prompt\": \"x\"}", &r,
                      &e) == GL_OK);
        struct gl_api_resp *s = NULL;
        struct gl_err err = {0};
        REQUIRE(gl_api_resp_new(&s, &cfg, r, &err) == GL_OK);
        const int32_t t = 6000;
        feed(s, r, 0, 0, &t, 1, GL_FINISH_NONE, -1);
        struct gl_event bad = {.index = 0,
                               .text = "",
                               .finish = GL_FINISH_ERROR,
                               .error = "injected",
                               .stop_token = -1,
                               .n_prompt = r->prompts[0].n};
        CHECK(gl_api_resp_event(s, 0, &bad) == 1);
        const struct gl_api_error *fe = gl_api_resp_error(s);
        CHECK(fe && fe->http == 500 && strstr(fe->msg, "injected"));
        if (stream) {
            json_t *c = take_chunks(s);
            size_t nc = json_array_size(c);
            CHECK(nc >= 2 && json_is_string(json_array_get(c, nc - 1)) &&
                  json_integer_value(json_object_get(
                      json_object_get(json_array_get(c, nc - 2), "error"), "code")) == 500);
            json_decref(c);
        }
        gl_api_resp_free(s);
        gl_api_req_free(&cfg, r);
    }
}

// Speculation's events (engine.h gl_event): an event of several tokens reports, per token, what
// that token's own event would. One turn fed one token per event and in events of 1..4 tokens in
// two patterns (per-token logprobs, distinct per token, and text_ends; the texts hold back every
// third token's bytes until the next token, as a stop-string prefix does): chat and completions,
// streamed and not, give the same logprobs entries in order (streamed: concatenated over the
// chunks, completions' text_offset included), text, token ids, finish and usage. Chat with a
// stop string matched inside an event drops the event's later tokens, as one-token events
// after the match are dropped.
enum { MT_MAX = 64, MT_TOP = 2 };

static void feed_grouped(struct gl_api_resp *s, const struct gl_api_req *r, const int32_t *ids,
                         int32_t n, int grouped)
{
    char piece[MT_MAX][64]; // token i's text as a one-token event carries it
    for (int32_t i = 0; i < n; i++) {
        size_t bl = 0;
        const char *b = gl_tokenizer_token_bytes(tok, ids[i], &bl);
        if (gl_tokenizer_is_special(tok, ids[i]))
            bl = 0;
        GL_ASSERT(bl < 30);
        snprintf(piece[i], sizeof piece[i], "%.*s", (int)bl, b);
        if (i % 3 == 1 && i + 1 < n) // held back, released with the next token
            piece[i][0] = 0;
        if (i % 3 == 2) {
            size_t pl = 0;
            const char *pb = gl_tokenizer_token_bytes(tok, ids[i - 1], &pl);
            if (gl_tokenizer_is_special(tok, ids[i - 1]))
                pl = 0;
            snprintf(piece[i], sizeof piece[i], "%.*s%.*s", (int)pl, pb, (int)bl, b);
        }
    }
    float lp[MT_MAX], top_lp[MT_MAX * MT_TOP];
    int32_t top_id[MT_MAX * MT_TOP];
    for (int32_t i = 0; i < n; i++) {
        lp[i] = -0.125f * (float)(i + 1);
        for (int k = 0; k < MT_TOP; k++) {
            top_id[i * MT_TOP + k] = 100 * (k + 1) + i;
            top_lp[i * MT_TOP + k] = -0.0625f * (float)i - (float)k;
        }
    }
    for (int32_t i = 0, g = 0; i < n; g++) {
        int32_t m = grouped ? 1 + (g * (grouped == 1 ? 5 : 3)) % 4 : 1; // 1,2,3,4,.. / 1,4,3,2,..
        m = m < n - i ? m : n - i;
        char text[256] = "";
        size_t ends[4];
        for (int32_t j = 0; j < m; j++) {
            strcat(text, piece[i + j]);
            ends[j] = strlen(text);
        }
        struct gl_event ev = {.tokens = ids + i,
                              .n_tokens = m,
                              .text = text,
                              .text_len = strlen(text),
                              .logprobs = lp + i,
                              .top_ids = top_id + i * MT_TOP,
                              .top_logprobs = top_lp + i * MT_TOP,
                              .top_n = MT_TOP,
                              .text_ends = ends,
                              .stop_token = -1,
                              .n_prompt = r->prompts[0].n,
                              .n_generated = i + m};
        gl_api_resp_event(s, 0, &ev);
        i += m;
    }
    struct gl_event end = {.text = "",
                           .finish = GL_FINISH_LENGTH,
                           .stop_token = -1,
                           .n_prompt = r->prompts[0].n,
                           .n_generated = n};
    gl_api_resp_event(s, 0, &end);
}

// What a client sees of the reply: {text, logprobs, ids, finish, usage}; streamed, the chunks'
// pieces concatenated.
static json_t *mt_summary(struct gl_api_resp *s, const struct gl_api_req *r)
{
    const int chat = r->ep == GL_API_CHAT;
    json_t *o = json_pack("{s:s,s:[],s:[],s:[],s:[],s:[],s:n,s:n}", "text", "", "content", "tokens",
                          "token_logprobs", "top_logprobs", "text_offset", "finish", "usage");
    json_t *ids = json_array();
    json_t *chunks = NULL, *v;
    size_t i;
    if (!r->stream) {
        json_t *j = gl_api_resp_json(s);
        chunks = json_pack("[{s:O}]", "choices", json_object_get(j, "choices"));
        json_object_set(o, "usage", json_object_get(j, "usage"));
        json_decref(j);
    } else {
        chunks = take_chunks(s);
    }
    json_array_foreach(chunks, i, v)
    {
        json_t *c = json_array_get(json_object_get(v, "choices"), 0);
        if (json_object_get(v, "usage") && !json_is_null(json_object_get(v, "usage")))
            json_object_set(o, "usage", json_object_get(v, "usage"));
        if (!c)
            continue;
        json_t *src = chat ? json_object_get(c, r->stream ? "delta" : "message") : c;
        const char *t = json_string_value(json_object_get(src, chat ? "content" : "text"));
        if (t) {
            const char *had = json_string_value(json_object_get(o, "text"));
            char *cat = malloc(strlen(had) + strlen(t) + 1);
            GL_ASSERT(cat);
            strcpy(cat, had);
            strcat(cat, t);
            json_object_set_new(o, "text", json_string(cat));
            free(cat);
        }
        json_t *lp = json_object_get(c, "logprobs");
        static const char *keys[5] = {"content", "tokens", "token_logprobs", "top_logprobs",
                                      "text_offset"};
        for (int k = chat ? 0 : 1; k < (chat ? 1 : 5); k++)
            json_array_extend(json_object_get(o, keys[k]), json_object_get(lp, keys[k]));
        json_array_extend(ids, json_object_get(c, "token_ids"));
        if (json_is_string(json_object_get(c, "finish_reason")))
            json_object_set(o, "finish", json_object_get(c, "finish_reason"));
    }
    json_object_set_new(o, "ids", ids);
    json_decref(chunks);
    return o;
}

TEST(test_multi_token_events)
{
    int32_t n = 0;
    int32_t *ids = encode(" to=self<|message|>think it over<|eom|><|start|>assistant "
                          "to=user<|message|>Hello, wonderful world! And then some more words "
                          "to follow, with commas, here.<|eot|>",
                          &n);
    REQUIRE(ids && n > 24 && n <= MT_MAX);
    for (int chat = 0; chat < 2; chat++)
        for (int stream = 0; stream < 2; stream++)
            for (int stop = 0; stop < 1 + chat; stop++) {
                char body[512];
                snprintf(body, sizeof body,
                         chat ? "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                                "\"logprobs\": true, \"top_logprobs\": 2, "
                                "\"return_token_ids\": true, \"stream\": %s%s%s}"
                              : "{\"prompt\": [1000, 2000], \"logprobs\": 2, \"max_tokens\": 64, "
                                "\"return_token_ids\": true, \"stream\": %s%s%s}",
                         stream ? "true" : "false",
                         stream ? ", \"stream_options\": {\"include_usage\": true}" : "",
                         stop ? ", \"stop\": [\"world\"]" : "");
                json_t *sum[3];
                for (int grouped = 0; grouped < 3; grouped++) {
                    struct gl_api_req *r;
                    struct gl_api_error e;
                    struct gl_api_resp *s = NULL;
                    struct gl_err err = {0};
                    REQUIRE(parse(&cfg, chat ? GL_API_CHAT : GL_API_COMPLETIONS, body, &r, &e) ==
                            GL_OK);
                    REQUIRE(gl_api_resp_new(&s, &cfg, r, &err) == GL_OK);
                    feed_grouped(s, r, chat ? ids : ids + 8, chat ? n : n - 8, grouped);
                    CHECK(gl_api_resp_done(s) && gl_api_resp_error(s) == NULL);
                    sum[grouped] = mt_summary(s, r);
                    gl_api_resp_free(s);
                    gl_api_req_free(&cfg, r);
                }
                size_t n_lp = json_array_size(json_object_get(sum[0], chat ? "content" : "tokens"));
                char *a = json_dumps(sum[0], JSON_COMPACT),
                     *b = json_dumps(json_equal(sum[0], sum[1]) ? sum[2] : sum[1], JSON_COMPACT);
                for (int g = 1; g < 3; g++)
                    CHECKF(json_equal(sum[0], sum[g]), "%s%s%s: one per event %s\n  grouped %s",
                           chat ? "chat" : "completions", stream ? ", stream" : "",
                           stop ? ", stop" : "", a, b);
                CHECKF(stop ? n_lp > 8 && n_lp < (size_t)n - 8 : n_lp == (size_t)(chat ? n : n - 8),
                       "%zu logprobs entries", n_lp);
                CHECK(json_array_size(json_object_get(sum[0], "ids")) == n_lp);
                printf("  %s%s%s: %zu entries, text '%s'\n", chat ? "chat" : "completions",
                       stream ? ", stream" : "", stop ? ", stop" : "", n_lp,
                       json_string_value(json_object_get(sum[1], "text")));
                free(a);
                free(b);
                json_decref(sum[0]);
                json_decref(sum[1]);
                json_decref(sum[2]);
            }
    gl_free(ids);
}

// Client request ids: 1-36 bytes of [A-Za-z0-9._:-]; the id keeps the endpoint's prefix.
TEST(test_request_ids)
{
    CHECK(gl_api_request_id_ok("trace-42.a_b:c", 14));
    CHECK(!gl_api_request_id_ok("a b", 3) && !gl_api_request_id_ok("", 0));
    CHECK(!gl_api_request_id_ok("0123456789012345678901234567890123456", 37));
    struct gl_api_req *r;
    struct gl_api_error e;
    REQUIRE(parse(&cfg, GL_API_COMPLETIONS, "{\"prompt\": \"x\"}", &r, &e) == GL_OK);
    CHECK(gl_api_set_request_id(r, "job7", 4, "request_id", &e) == GL_OK &&
          !strcmp(r->id, "cmpl-job7"));
    CHECK(gl_api_set_request_id(r, "a\"b", 3, "request_id", &e) != GL_OK &&
          !strcmp(e.param, "request_id"));
    gl_api_req_free(&cfg, r);
}

// --speculative-config: vLLM's ngram keys and defaults; other methods and keys refused by name.
TEST(test_speculative_config)
{
    struct gl_spec_params sp = {0};
    struct gl_err e = {0};
    CHECK(gl_api_spec_config("{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                             "\"prompt_lookup_min\": 2, \"prompt_lookup_max\": 4}",
                             &sp, &e) == GL_OK);
    CHECK(sp.method == GL_SPEC_NGRAM && sp.k == 4 && sp.lookup_min == 2 && sp.lookup_max == 4);
    CHECK(gl_api_spec_config("{\"method\":\"ngram\",\"num_speculative_tokens\":3}", &sp, &e) ==
              GL_OK &&
          sp.lookup_min == 5 && sp.lookup_max == 5); // vLLM's defaults
    CHECK(gl_api_spec_config("{\"method\":\"ngram\",\"num_speculative_tokens\":3,"
                             "\"prompt_lookup_max\":3}",
                             &sp, &e) == GL_OK &&
          sp.lookup_min == 3 && sp.lookup_max == 3);
    CHECK(gl_api_spec_config("{\"method\":\"dflash\",\"model\":\"d.gguf\","
                             "\"num_speculative_tokens\":7}",
                             &sp, &e) == GL_OK &&
          sp.method == GL_SPEC_DFLASH && sp.k == 7 && !strcmp(sp.dflash_path, "d.gguf"));
    struct gl_spec_params keep = sp;
    const char *bad[] = {
        "{\"method\":\"dflash\",\"num_speculative_tokens\":4}",
        "{\"method\":\"dflash\",\"model\":\"d.gguf\",\"num_speculative_tokens\":4,"
        "\"prompt_lookup_min\":2}",
        "{\"method\":\"eagle3\",\"num_speculative_tokens\":2}",
        "{\"method\":\"ngram\"}",
        "{\"method\":\"ngram\",\"num_speculative_tokens\":0}",
        "{\"method\":\"ngram\",\"num_speculative_tokens\":17}",
        "{\"method\":\"ngram\",\"num_speculative_tokens\":2,\"prompt_lookup_min\":4,"
        "\"prompt_lookup_max\":2}",
        "{\"method\":\"ngram\",\"num_speculative_tokens\":2,\"model\":\"x\"}",
        "[1]",
        "{\"num_speculative_tokens\":2}"};
    const char *says[] = {"needs \"model\"",
                          "'prompt_lookup_min' not supported for method dflash",
                          "eagle3",
                          "is required",
                          "1..16",
                          "1..16",
                          "> prompt_lookup_max",
                          "key 'model'",
                          "JSON object",
                          "method"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.msg[0] = 0;
        CHECKF(gl_api_spec_config(bad[i], &sp, &e) == GL_E_INVAL && strstr(e.msg, says[i]),
               "%s -> %s", bad[i], e.msg);
    }
    CHECK(memcmp(&sp, &keep, sizeof sp) == 0); // refused: unchanged
}

int main(void)
{
    if (!setup())
        return 1;
    RUN_TESTS(test_parse_errors, test_unknown_fields, test_chat_reply,
              test_completions_echo_stream_waits, test_engine_error, test_request_ids,
              test_speculative_config, test_multi_token_events);
}
