// SPDX-License-Identifier: MIT
// Fuzz target for the OpenAI request layer (src/api/): request body -> engine parameters, and
// engine events -> response JSON / SSE. Input: the first byte selects the endpoint (low bit 1:
// completions; else low nibble 0xe: the Responses API, POST /v1/responses; else chat) and its
// other bits steer the synthetic output; the rest is the body.
// For each input: gl_api_parse; on success the logits processors are made (a few tokens accepted;
// for 1 input in 64 also a few mask/accept/jump-forward steps) and freed, a response is built from
// synthetic engine events (scripted ATEM turns with tokens replaced by input-derived ids and
// specials 200001/200007/200008/200022/200023, split into events, then a finish; sometimes an
// engine failure midway), and the response JSON or SSE is produced; on error the error must be
// 400/404/500 with a message and gl_api_error_json must succeed. gl_api_tokenize and
// gl_api_detokenize run over the body too. Invariants: no crash, no leak, no sanitizer report;
// every choice finishes; a finished stream ends with "data: [DONE]"; a Responses stream is
// `event: T` / `data: {"type": T, "sequence_number": 0, 1, ...}` blocks ending with
// response.completed, response.incomplete or response.failed, and its object is a "response".
// Vocabulary: $GLINT_VOCAB, else shared/ beside the repository (../shared/data/tokenizer/...
// from the source dir, then from the working directory); absent: no-op.
#include "api/api_int.h" // white-box: the request's fields
#include "chat/atem_parse.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define VOCAB_REL  "../shared/data/tokenizer/llama4-tokenizer.model"
#define MAX_SCRIPT 256
#define MAX_EVENTS 4 // choices that get the whole script; the rest only a finish event

// Scripted assistant turns (specials parsed), as a model would write them after
// `<|start|>assistant`.
static const char *const scripts[] = {
    " to=user<|message|>Hello, world! The answer is 42.<|eot|>",
    " to=self<|message|>17 × 23 = 391.<|eom|><|start|>assistant to=user<|message|>It is "
    "391.<|eot|>",
    " to=get_weather<|message|><atem:function_calls>\n<atem:invoke name=\"get_weather\">\n"
    "<atem:parameter name=\"city\">Paris</atem:parameter>\n</atem:invoke>\n"
    "</atem:function_calls><|eot|>",
    " to=user<|message|>{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"x\", \"é漢😀\"]}<|eot|>",
    " to=self<|message|>use tools<|eom|><|start|>assistant to=f<|message|>{{f}}((a|1)){{/}}"
    "<|eom|><|start|>assistant to=g<|message|>{{g}}((b|{\"c\": null})){{/}}<|eot|>",
    "Once upon a time there was a STOP word and END.<|end_of_text|>",
};
#define N_SCRIPTS (sizeof scripts / sizeof scripts[0])

static const int32_t specials[] = {200001, 200007, 200008, 200022, 200023, 200000, 200018};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

static struct gl_tokenizer *tok;
static struct gl_gvocab *gvocab;
static struct gl_grammar_cache *gcache;
static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;
static struct gl_api_config cfg;
static int32_t script_ids[N_SCRIPTS][MAX_SCRIPT];
static int32_t script_n[N_SCRIPTS];
static int ready = -1;

static const char *vocab_path(void)
{
    const char *env = getenv("GLINT_VOCAB");
    if (env && env[0])
        return env;
    static char p[4096];
#ifdef GLINT_SOURCE_DIR
    snprintf(p, sizeof p, "%s/%s", GLINT_SOURCE_DIR, VOCAB_REL);
    if (access(p, R_OK) == 0)
        return p;
#endif
    // CMake compiles this file by its absolute path: the repository root is two levels up.
    const char *f = __FILE__, *cut = strstr(f, "tests/fuzz/");
    if (f[0] == '/' && cut) {
        snprintf(p, sizeof p, "%.*s%s", (int)(cut - f), f, VOCAB_REL);
        if (access(p, R_OK) == 0)
            return p;
    }
    return VOCAB_REL;
}

static int init(void)
{
    struct gl_err err = {0};
    const char *path = vocab_path();
    if (gl_tokenizer_load_tiktoken(&tok, path, &err) != GL_OK) {
        fprintf(stderr, "fuzz_api_request: no vocabulary at %s (%s): inputs are not run\n", path,
                err.msg);
        tok = NULL;
        return 0;
    }
    if (gl_gvocab_new(&gvocab, tok, &err) != GL_OK || gl_grammar_cache_new(&gcache, 64, &err))
        abort();
    cfg.tok = tok;
    cfg.gvocab = gvocab;
    cfg.gcache = gcache;
    cfg.grammar_lock = &glock;
    cfg.model_name = "m";
    cfg.max_model_len = 4096;
    cfg.max_logprobs = 20;
    cfg.defaults = gl_sample_default_params();
    cfg.eos_ids[0] = 200001;
    cfg.eos_ids[1] = 200008;
    cfg.n_eos = 2;
    cfg.framing = 1;
    for (size_t i = 0; i < N_SCRIPTS; i++) {
        gl_token *ids = NULL;
        size_t n = 0;
        if (gl_tokenizer_encode(tok, scripts[i], strlen(scripts[i]), 1, 0, &ids, &n, &err) !=
                GL_OK ||
            n > MAX_SCRIPT)
            abort();
        memcpy(script_ids[i], ids, n * sizeof *ids);
        script_n[i] = (int32_t)n;
        gl_free(ids);
    }
    return 1;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void check_error(const struct gl_api_error *e)
{
    GL_ASSERT_MSG(e->http == 400 || e->http == 404 || e->http == 500, "http %d", e->http);
    GL_ASSERT(e->msg[0] != 0);
    GL_ASSERT(memchr(e->msg, 0, sizeof e->msg) && memchr(e->param, 0, sizeof e->param));
    json_t *j = gl_api_error_json(e);
    GL_ASSERT_MSG(j != NULL, "gl_api_error_json failed for: %s", e->msg);
    char *t = json_dumps(j, JSON_COMPACT);
    GL_ASSERT(t != NULL);
    free(t);
    json_decref(j);
}

// A Responses stream's events: each block "event: T\ndata: {...}\n\n" with data.type T and
// sequence numbers counting from 0; *ended when the last is a terminal event.
static int64_t rs_seq;
static void check_rs_events(const char *p, size_t n, int *ended)
{
    while (n > 0) {
        GL_ASSERT(n > 7 && memcmp(p, "event: ", 7) == 0);
        const char *nl = memchr(p, '\n', n);
        GL_ASSERT(nl && (size_t)(nl - p) + 7 < n && memcmp(nl + 1, "data: ", 6) == 0);
        const char *data = nl + 7, *end = NULL;
        for (const char *q = data; q + 1 < p + n && !end; q++)
            if (q[0] == '\n' && q[1] == '\n')
                end = q;
        GL_ASSERT(end != NULL);
        json_t *o = json_loadb(data, (size_t)(end - data), 0, NULL);
        GL_ASSERT_MSG(o != NULL, "an event's data is not JSON");
        const char *ty = json_string_value(json_object_get(o, "type"));
        GL_ASSERT(ty && strlen(ty) == (size_t)(nl - p - 7) && memcmp(ty, p + 7, strlen(ty)) == 0);
        GL_ASSERT(json_integer_value(json_object_get(o, "sequence_number")) == rs_seq++);
        *ended = !strcmp(ty, "response.completed") || !strcmp(ty, "response.incomplete") ||
                 !strcmp(ty, "response.failed");
        json_decref(o);
        n -= (size_t)(end + 2 - p);
        p = end + 2;
    }
}
static void take_sse(struct gl_api_resp *s, const struct gl_api_req *r, int *ended)
{
    size_t n = 0;
    char *p = gl_api_resp_take_sse(s, &n);
    GL_ASSERT((p == NULL) == (n == 0));
    if (p && r->responses) {
        check_rs_events(p, n, ended);
    } else if (p) {
        GL_ASSERT(n >= 6 && memcmp(p, "data: ", 6) == 0);
        static const char done[] = "data: [DONE]\n\n";
        if (n >= sizeof done - 1 && memcmp(p + n - (sizeof done - 1), done, sizeof done - 1) == 0)
            *ended = 1;
    }
    gl_free(p);
}

// The tokens of one choice: a script, some tokens replaced, maybe cut.
static int32_t make_tokens(uint64_t *rs, uint8_t ctl, const uint8_t *body, size_t len, int32_t *out)
{
    size_t which = ((ctl >> 1) + rng_next(rs)) % N_SCRIPTS;
    const int32_t *src = script_ids[which];
    int32_t n = script_n[which];
    memcpy(out, src, (size_t)n * sizeof *out);
    const int32_t V = gl_tokenizer_n_vocab(tok);
    unsigned rate = (ctl >> 4) & 3; // 0: as scripted, else replace ~rate/8 of the tokens
    for (int32_t i = 0; rate && i < n; i++) {
        uint64_t x = rng_next(rs);
        if ((x & 7) >= rate)
            continue;
        switch ((x >> 3) % 3) {
        case 0:
            out[i] = specials[(x >> 8) % N_SPECIALS];
            break;
        case 1:
            out[i] = (int32_t)((x >> 8) % (uint64_t)V);
            break;
        default:
            if (len >= 2) {
                size_t at = (size_t)((x >> 8) % (len - 1));
                out[i] = (int32_t)(((uint32_t)body[at] << 8 | body[at + 1]) % (uint32_t)V);
            }
        }
    }
    if (ctl & 0x40) // cut: the length limit hit mid-turn
        n = (int32_t)(rng_next(rs) % (uint64_t)(n + 1));
    return n;
}

static void run_choice(struct gl_api_resp *s, const struct gl_api_req *r, int32_t prompt,
                       int32_t index, int full, uint64_t *rs, uint8_t ctl, const uint8_t *body,
                       size_t len, int *ended)
{
    int32_t ids[MAX_SCRIPT];
    int32_t n = full ? make_tokens(rs, ctl, body, len, ids) : 0;
    int lp = r->sp.logprobs >= 0;
    int32_t top_n = lp ? r->sp.logprobs : 0;
    static int32_t top_ids[GL_SAMPLE_MAX_LOGPROBS + 1];
    static float top_lp[GL_SAMPLE_MAX_LOGPROBS + 1];
    float lps[4] = {-0.5f, -1.25f, -3.0f, 0.0f};
    for (int32_t k = 0; k < top_n; k++) {
        top_ids[k] = (k * 7919 + index) % gl_tokenizer_n_vocab(tok);
        top_lp[k] = -(float)k;
    }
    int32_t gen = 0;
    int hit = 0;
    for (int32_t i = 0; i < n && !hit;) {
        int32_t m = lp ? 1 : 1 + (int32_t)(rng_next(rs) % 3);
        if (m > n - i)
            m = n - i;
        // Text as the engine would decode it (bytes of non-special tokens).
        char text[512];
        size_t tl = 0;
        for (int32_t k = 0; k < m; k++) {
            size_t bl = 0;
            const char *b = gl_tokenizer_token_bytes(tok, ids[i + k], &bl);
            if (b && (!gl_tokenizer_is_special(tok, ids[i + k]) || !r->skip_special_tokens) &&
                tl + bl < sizeof text) {
                memcpy(text + tl, b, bl);
                tl += bl;
            }
        }
        gen += m;
        struct gl_event ev = {.request_id = 1,
                              .index = index,
                              .tokens = ids + i,
                              .n_tokens = m,
                              .text = text,
                              .text_len = tl,
                              .logprobs = lp ? lps : NULL,
                              .top_ids = lp ? top_ids : NULL,
                              .top_logprobs = lp ? top_lp : NULL,
                              .top_n = top_n,
                              .finish = GL_FINISH_NONE,
                              .stop_token = -1,
                              .n_prompt = r->prompts[prompt].n,
                              .n_generated = gen};
        hit = gl_api_resp_event(s, prompt, &ev);
        i += m;
        if (r->stream && (rng_next(rs) & 1))
            take_sse(s, r, ended);
    }
    // The final event: a stop token, a stop string, the length limit, or an abort.
    struct gl_event fin = {.request_id = 1,
                           .index = index,
                           .tokens = NULL,
                           .n_tokens = 0,
                           .text = "",
                           .text_len = 0,
                           .finish = GL_FINISH_STOP,
                           .stop_token = -1,
                           .n_prompt = r->prompts[prompt].n,
                           .n_generated = gen};
    switch (hit ? 4 : rng_next(rs) % 5) {
    case 0:
        fin.stop_token = n > 0 ? ids[n - 1] : 200008;
        break;
    case 1:
        fin.stop_matched = r->sp.n_stop > 0     ? r->sp.stop[0]
                           : r->n_chat_stop > 0 ? r->chat_stop[0]
                                                : NULL;
        if (r->sp.n_stop_ids > 0)
            fin.stop_token = fin.stop_matched ? -1 : r->sp.stop_token_ids[0];
        break;
    case 2:
        fin.finish = GL_FINISH_LENGTH;
        break;
    default:
        fin.finish = GL_FINISH_ABORT;
        break;
    }
    (void)gl_api_resp_event(s, prompt, &fin);
}

static void run_response(const struct gl_api_req *r, const uint8_t *data, size_t size,
                         uint64_t seed)
{
    struct gl_err err = {0};
    struct gl_api_resp *s = NULL;
    if (gl_api_resp_new(&s, &cfg, r, &err) != GL_OK) {
        GL_ASSERT(err.msg[0] != 0);
        return;
    }
    uint64_t rs = seed;
    uint8_t ctl = data[0];
    int ended = 0, failed = 0;
    rs_seq = 0;
    if (r->responses && r->stream) // response.created and response.in_progress come first
        take_sse(s, r, &ended);
    int32_t n_ch = gl_api_resp_n_choices(s);
    GL_ASSERT(n_ch == r->n_prompts * r->sp.n);
    for (int32_t c = 0; c < n_ch; c++) {
        if (c == n_ch / 2 && (ctl & 0x80) && (seed & 3) == 0) { // the engine fails midway
            struct gl_api_error e = {0};
            gl_api_fail(&e, 500, NULL, "engine failed: %s", "test");
            gl_api_resp_fail(s, &e);
            gl_api_resp_fail(s, &e); // idempotent
            failed = 1;
        }
        run_choice(s, r, c / r->sp.n, c % r->sp.n, c < MAX_EVENTS, &rs, ctl, data + 1, size - 1,
                   &ended);
    }
    GL_ASSERT(gl_api_resp_done(s));
    for (int32_t c = 0; c < n_ch; c++) {
        const char *f = gl_api_resp_finish(s, c);
        GL_ASSERT(f && f[0]);
    }
    int64_t pt = 0, ct = 0;
    gl_api_resp_usage(s, &pt, &ct);
    GL_ASSERT(pt >= 0 && ct >= 0);
    if (r->stream) {
        take_sse(s, r, &ended);
        GL_ASSERT_MSG(ended || failed, "a finished stream must end with [DONE]");
    } else {
        const struct gl_api_error *fe = gl_api_resp_error(s);
        GL_ASSERT((fe != NULL) == failed);
        if (fe)
            check_error(fe);
        json_t *o = gl_api_resp_json(s);
        GL_ASSERT(o != NULL);
        if (r->responses)
            GL_ASSERT(!strcmp(json_string_value(json_object_get(o, "object")), "response") &&
                      json_is_array(json_object_get(o, "output")));
        else
            GL_ASSERT(json_array_size(json_object_get(o, "choices")) == (size_t)n_ch);
        char *t = json_dumps(o, JSON_COMPACT);
        GL_ASSERT(t != NULL);
        free(t);
        json_decref(o);
    }
    gl_api_resp_free(s);
}

static void run_procs(const struct gl_api_req *r, uint64_t seed)
{
    static struct gl_api_mask_stats ms; // mask timings (metrics); only written here
    struct gl_logits_processor *procs = NULL;
    struct gl_err err = {0};
    if (gl_api_make_procs(&cfg, r, &ms, &procs, &err) != GL_OK) {
        GL_ASSERT(err.msg[0] != 0);
        return;
    }
    GL_ASSERT((procs != NULL) == (r->grammar != NULL));
    if (!procs)
        return;
    // A few tokens through the first processor: a script, as far as the grammar allows.
    const int32_t *ids = script_ids[seed % N_SCRIPTS];
    for (int32_t i = 0; i < script_n[seed % N_SCRIPTS] && i < 24; i++)
        if (procs[0].accept(procs[0].user, ids[i]) != 0)
            break;
    // Sometimes (masks over the whole vocabulary cost more) a few engine steps on the last one:
    // mask, take an allowed token, accept it, then the forced continuation (jump-forward).
    static float logits[GL_TOK_N_BASE + GL_TOK_N_SPECIAL];
    const int32_t V = gl_tokenizer_n_vocab(tok);
    if (seed % 64 == 1 && V <= (int32_t)(sizeof logits / sizeof logits[0])) {
        struct gl_logits_processor *p = &procs[r->sp.n - 1];
        uint64_t rs = seed;
        for (int step = 0; step < 3; step++) {
            for (int32_t i = 0; i < V; i++)
                logits[i] = 0.0f;
            p->mask(p->user, logits, V);
            int32_t start = (int32_t)(rng_next(&rs) % (uint64_t)V), pick = -1;
            for (int32_t k = 0; k < V && pick < 0; k++)
                if (logits[(start + k) % V] == 0.0f)
                    pick = (start + k) % V;
            GL_ASSERT_MSG(pick >= 0, "a live matcher allows some token");
            if (p->accept(p->user, pick) != 0)
                break;
            int32_t forced[16];
            int32_t nf = p->forced ? p->forced(p->user, forced, 16) : 0;
            GL_ASSERT(nf >= 0 && nf <= 16);
        }
    }
    for (int32_t i = 0; i < r->sp.n; i++)
        procs[i].free(procs[i].user);
    gl_free(procs);
}

// libFuzzer calls this once before any input (outside the per-input timeout: loading and
// indexing the vocabulary takes seconds); the replay driver does not, so inputs load lazily too.
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (ready < 0)
        ready = init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ready < 0)
        ready = init();
    if (!ready || size == 0 || size > 65536)
        return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    enum gl_api_endpoint ep = data[0] & 1                ? GL_API_COMPLETIONS
                              : (data[0] & 0x0f) == 0x0e ? GL_API_RESPONSES
                                                         : GL_API_CHAT;
    uint64_t seed = 0xcbf29ce484222325ull; // FNV-1a of the input: the events' randomness
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 0x100000001b3ull;

    struct gl_api_req *r = NULL;
    struct gl_api_error e;
    memset(&e, 0, sizeof e);
    gl_status st = gl_api_parse(&cfg, ep, body, len, &r, &e);
    if (st == GL_OK) {
        // A Responses request is the chat request it means (responses.c).
        GL_ASSERT(r != NULL && r->ep == (ep == GL_API_RESPONSES ? GL_API_CHAT : ep));
        GL_ASSERT(r->responses == (ep == GL_API_RESPONSES));
        GL_ASSERT(!r->responses || (r->sp.n == 1 && r->resp_echo != NULL));
        GL_ASSERT(r->n_prompts >= 1 && r->sp.n >= 1 && r->sp.n <= GL_SAMPLE_MAX_N);
        GL_ASSERT(ep == GL_API_COMPLETIONS || r->n_prompts == 1);
        for (int32_t i = 0; i < r->n_prompts; i++)
            GL_ASSERT(r->prompts[i].n > 0 && r->prompts[i].n < cfg.max_model_len);
        GL_ASSERT(r->sp.logprobs <= cfg.max_logprobs);
        GL_ASSERT(ep == GL_API_COMPLETIONS || r->grammar != NULL); // framing on
        run_procs(r, seed);
        run_response(r, data, size, seed);
        gl_api_req_free(&cfg, r);
    } else {
        GL_ASSERT(r == NULL);
        check_error(&e);
    }

    json_t *j;
    memset(&e, 0, sizeof e);
    if ((j = gl_api_tokenize(&cfg, body, len, &e)) != NULL)
        json_decref(j);
    else
        check_error(&e);
    memset(&e, 0, sizeof e);
    if ((j = gl_api_detokenize(&cfg, body, len, &e)) != NULL)
        json_decref(j);
    else
        check_error(&e);
    return 0;
}
