// SPDX-License-Identifier: MIT
// api/request: request body -> struct gl_api_req. Every field is checked against a table of the
// fields we implement; each value is range-checked with a message naming the field. The body is
// hostile input: jansson parses it (bounded nesting), and every length taken from it is checked
// before use.
#include "api/api.h"
#include "api/api_int.h"
#include "chat/render.h"
#include "image/image.h"
#include "mediasrc/mediasrc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAIL(param, ...) gl_api_fail(e, 400, param, __VA_ARGS__)
#define NOMEM()          gl_api_fail(e, 500, NULL, "out of memory")

// ---- the fields: implemented, ignored, refused ----

// vLLM accepts any body field and drops the ones it does not know with a log line, so a client
// library that starts sending a new field keeps working. glint does the same for a field whose
// absence cannot change the output (a hosted platform's bookkeeping, routing and tracing hints,
// and any field it does not know): accepted, named in the log and in the X-Glint-Ignored-Fields
// response header. A field that would silently change the output if ignored and that glint does
// not implement is a 400 naming it. --strict-request-fields (config strict_fields) makes every
// field outside the implemented ones a 400, as before.
enum { F_CHAT = 1, F_COMP = 2, F_BOTH = 3 };
enum fkind {
    K_IMPL,   // implemented
    K_IGNORE, // accepted, changes nothing, reported
    K_REFUSE, // a 400 when set (not null, false or []): ignoring it would change the output
};
struct field {
    const char *name;
    int where;
    enum fkind kind;
    const char *why; // K_REFUSE: what the client should know
};
static const struct field k_fields[] = {
    {"model", F_BOTH, K_IMPL, NULL},
    {"messages", F_CHAT, K_IMPL, NULL},
    {"prompt", F_COMP, K_IMPL, NULL},
    {"echo", F_BOTH, K_IMPL, NULL},
    {"suffix", F_COMP, K_IMPL, NULL}, // refused below unless null
    {"best_of", F_COMP, K_IMPL, NULL},
    {"n", F_BOTH, K_IMPL, NULL},
    {"seed", F_BOTH, K_IMPL, NULL},
    {"stream", F_BOTH, K_IMPL, NULL},
    {"stream_options", F_BOTH, K_IMPL, NULL},
    {"max_tokens", F_BOTH, K_IMPL, NULL},
    {"max_completion_tokens", F_CHAT, K_IMPL, NULL},
    {"temperature", F_BOTH, K_IMPL, NULL},
    {"top_p", F_BOTH, K_IMPL, NULL},
    {"top_k", F_BOTH, K_IMPL, NULL},
    {"min_p", F_BOTH, K_IMPL, NULL},
    {"presence_penalty", F_BOTH, K_IMPL, NULL},
    {"frequency_penalty", F_BOTH, K_IMPL, NULL},
    {"repetition_penalty", F_BOTH, K_IMPL, NULL},
    {"logit_bias", F_BOTH, K_IMPL, NULL},
    {"logprobs", F_BOTH, K_IMPL, NULL},
    {"top_logprobs", F_CHAT, K_IMPL, NULL},
    {"stop", F_BOTH, K_IMPL, NULL},
    {"stop_token_ids", F_BOTH, K_IMPL, NULL},
    {"include_stop_str_in_output", F_BOTH, K_IMPL, NULL},
    {"skip_special_tokens", F_BOTH, K_IMPL, NULL},
    {"spaces_between_special_tokens", F_BOTH, K_IMPL, NULL},
    {"ignore_eos", F_BOTH, K_IMPL, NULL},
    {"min_tokens", F_BOTH, K_IMPL, NULL},
    {"allowed_token_ids", F_BOTH, K_IMPL, NULL},
    {"request_id", F_BOTH, K_IMPL, NULL},
    {"cache_salt", F_BOTH, K_IMPL, NULL},
    {"return_token_ids", F_BOTH, K_IMPL, NULL},
    {"use_beam_search", F_BOTH, K_IMPL, NULL},
    {"add_special_tokens", F_BOTH, K_IMPL, NULL},
    {"response_format", F_BOTH, K_IMPL, NULL},
    {"structured_outputs", F_BOTH, K_IMPL, NULL},
    {"guided_json", F_BOTH, K_IMPL, NULL},
    {"guided_regex", F_BOTH, K_IMPL, NULL},
    {"guided_choice", F_BOTH, K_IMPL, NULL},
    {"guided_grammar", F_BOTH, K_IMPL, NULL},
    {"guided_decoding_backend", F_BOTH, K_IMPL, NULL},
    {"guided_whitespace_pattern", F_BOTH, K_IMPL, NULL},
    {"tools", F_CHAT, K_IMPL, NULL},
    {"tool_choice", F_CHAT, K_IMPL, NULL},
    {"parallel_tool_calls", F_CHAT, K_IMPL, NULL},
    {"reasoning_effort", F_CHAT, K_IMPL, NULL},
    {"include_reasoning", F_CHAT, K_IMPL, NULL},
    {"thinking_token_budget", F_CHAT, K_IMPL, NULL},
    {"chat_template_kwargs", F_CHAT, K_IMPL, NULL},
    {"add_generation_prompt", F_CHAT, K_IMPL, NULL},
    {"continue_final_message", F_CHAT, K_IMPL, NULL},
    {"mm_processor_kwargs", F_CHAT, K_IMPL, NULL},
    {"truncate_prompt_tokens", F_BOTH, K_IMPL, NULL},
    {"prompt_logprobs", F_BOTH, K_IMPL, NULL},
    {"truncation_side", F_BOTH, K_IMPL, NULL},
    {"priority", F_BOTH, K_IMPL, NULL},
    {"modalities", F_CHAT, K_IMPL, NULL}, // ["text"] is ignored; any other modality refused
    // A hosted platform's bookkeeping (OpenAI's stored completions, billing tier, prompt-cache
    // routing, abuse tracking, Predicted Outputs, which only speed up identical output) and
    // vLLM's plumbing (disaggregated serving, custom extensions, tracing, render-only options,
    // beam-only length_penalty, stream chunking): nothing here changes the tokens.
    {"user", F_BOTH, K_IGNORE, NULL},
    {"store", F_BOTH, K_IGNORE, NULL},
    {"metadata", F_BOTH, K_IGNORE, NULL},
    {"service_tier", F_BOTH, K_IGNORE, NULL},
    {"prompt_cache_key", F_BOTH, K_IGNORE, NULL},
    {"prompt_cache_retention", F_BOTH, K_IGNORE, NULL},
    {"safety_identifier", F_BOTH, K_IGNORE, NULL},
    {"prediction", F_CHAT, K_IGNORE, NULL},
    {"documents", F_CHAT, K_IGNORE, NULL}, // the release template has no documents section
    {"session_id", F_BOTH, K_IGNORE, NULL},
    {"kv_transfer_params", F_BOTH, K_IGNORE, NULL},
    {"ec_transfer_params", F_BOTH, K_IGNORE, NULL},
    {"vllm_xargs", F_BOTH, K_IGNORE, NULL},
    {"length_penalty", F_BOTH, K_IGNORE, NULL},
    {"stream_interval", F_BOTH, K_IGNORE, NULL},
    {"routed_experts_prompt_start", F_BOTH, K_IGNORE, NULL},
    {"return_token_offsets", F_BOTH, K_IGNORE, NULL},
    {"return_mm_kwargs", F_BOTH, K_IGNORE, NULL},
    // Would change the output if ignored; not implemented.
    {"audio", F_CHAT, K_REFUSE, "audio output is not supported: this server writes text only"},
    {"web_search_options", F_CHAT, K_REFUSE,
     "web search is a hosted tool; this server does not search, so the answer would lack what "
     "the search would have found"},
    {"functions", F_CHAT, K_REFUSE, "the legacy functions API is not supported: use tools"},
    {"function_call", F_CHAT, K_REFUSE,
     "the legacy functions API is not supported: use tool_choice"},
    {"logprob_token_ids", F_BOTH, K_REFUSE, "not supported; use logprobs with top_logprobs"},
    {"bad_words", F_BOTH, K_REFUSE, "not supported; use logit_bias on the token ids"},
    {"repetition_detection", F_BOTH, K_REFUSE, "not supported"},
    {"watermarking", F_BOTH, K_REFUSE, "not supported"},
    {"chat_template", F_CHAT, K_REFUSE,
     "a request chat template is not supported: the model's release template is built in"},
    {"return_prompt_text", F_CHAT, K_REFUSE, "not supported; POST /tokenize shows the prompt"},
    {"return_tokens_as_token_ids", F_BOTH, K_REFUSE, "not supported"},
    {"media_io_kwargs", F_CHAT, K_REFUSE, "not supported; use mm_processor_kwargs"},
    {"logits_processors", F_BOTH, K_REFUSE, "custom logits processors are not supported"},
    {"structural_tag", F_BOTH, K_REFUSE,
     "structural tags are not supported; use response_format json_schema or tools"},
};

// Ignored fields are logged once per name (at most WARN_NAMES names; past that one line a
// minute), so a client sending a field on every request does not flood the log.
#define WARN_NAMES       64
#define IGNORED_NAME_MAX 64 // bytes of an ignored field's name kept (header and log)
static void warn_ignored(const char *name)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char seen[WARN_NAMES][IGNORED_NAME_MAX + 1];
    static int n_seen;
    static int64_t last_us;
    pthread_mutex_lock(&mu);
    int i = 0, log = 0;
    for (; i < n_seen && strncmp(seen[i], name, sizeof seen[i] - 1) != 0; i++)
        ;
    if (i == n_seen && n_seen < WARN_NAMES) {
        snprintf(seen[n_seen++], sizeof seen[0], "%s", name);
        log = 1;
    } else if (i == n_seen && gl_time_us() - last_us > 60 * 1000000LL) {
        last_us = gl_time_us();
        log = 2;
    }
    pthread_mutex_unlock(&mu);
    if (log)
        GL_LOGW("request field '%.*s' is not used by glint and was ignored (vLLM ignores unknown "
                "fields too; --strict-request-fields refuses them)%s",
                40, name, log == 2 ? " [more distinct names than are logged once each]" : "");
}

// Appends name to r->ignored (the X-Glint-Ignored-Fields value): header-safe bytes only (a
// field name is client text), each name cut to 64 bytes, the list cut with ", ..." when full.
static void note_ignored(struct gl_api_req *r, const char *name)
{
    size_t len = strlen(r->ignored);
    if (len >= 4 && strcmp(r->ignored + len - 3, "...") == 0)
        return;
    char safe[IGNORED_NAME_MAX + 1];
    size_t n = 0;
    for (; name[n] && n < sizeof safe - 1; n++) {
        unsigned char ch = (unsigned char)name[n];
        safe[n] = (ch >= 0x21 && ch <= 0x7e && ch != ',') ? (char)ch : '_';
    }
    safe[n] = 0;
    if (len + (len ? 2 : 0) + n + 5 >= sizeof r->ignored) {
        snprintf(r->ignored + len, sizeof r->ignored - len, "%s...", len ? ", " : "");
        return;
    }
    snprintf(r->ignored + len, sizeof r->ignored - len, "%s%s", len ? ", " : "", safe);
    warn_ignored(safe);
}

// A refused field counts as set unless it is null, false or an empty list (vLLM's defaults:
// bad_words [], watermarking false ...).
static int is_set(json_t *v)
{
    return v && !json_is_null(v) && !json_is_false(v) &&
           !(json_is_array(v) && json_array_size(v) == 0);
}

static gl_status check_fields(const struct gl_api_config *c, json_t *body, enum gl_api_endpoint ep,
                              struct gl_api_req *r, struct gl_api_error *e)
{
    const char *key;
    json_t *v;
    const int want = ep == GL_API_CHAT ? F_CHAT : F_COMP;
    const char *where = ep == GL_API_CHAT ? "/v1/chat/completions" : "/v1/completions";
    json_object_foreach(body, key, v)
    {
        const struct field *f = NULL;
        for (size_t i = 0; i < sizeof k_fields / sizeof k_fields[0] && !f; i++)
            if (strcmp(k_fields[i].name, key) == 0 && (k_fields[i].where & want))
                f = &k_fields[i];
        if (f && f->kind == K_IMPL)
            continue;
        if (f && f->kind == K_REFUSE) {
            if (is_set(v))
                return FAIL(key, "%s: %s", key, f->why);
            continue;
        }
        // `user` was always accepted (vLLM documents it as ignored), strict or not.
        if (c->strict_fields && strcmp(key, "user") != 0)
            return FAIL(key,
                        "%.64s: this field is not supported by glint's %s endpoint "
                        "(--strict-request-fields)",
                        key, where);
        if (!json_is_null(v))
            note_ignored(r, key);
    }
    return GL_OK;
}

// vLLM's cache_salt: a non-empty string; only requests with the same salt share prefix-cache
// blocks. Kept as a keyed hash (base.h), never as the string.
static gl_status parse_cache_salt(json_t *b, struct gl_api_req *r, struct gl_api_error *e)
{
    json_t *v = json_object_get(b, "cache_salt");
    if (!v || json_is_null(v))
        return GL_OK;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return FAIL("cache_salt", "cache_salt: expected a non-empty string");
    struct gl_siphash h;
    gl_siphash_init(&h, gl_hash_key());
    gl_siphash_update(&h, json_string_value(v), json_string_length(v));
    r->cache_salt = gl_siphash_final(&h);
    if (r->cache_salt == 0) // 0 means "no salt"
        r->cache_salt = 1;
    return GL_OK;
}

// ---- typed getters: absent or null leaves *out as is ----

static gl_status get_bool(json_t *o, const char *k, int *out, struct gl_api_error *e)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return GL_OK;
    if (!json_is_boolean(v))
        return FAIL(k, "%s: expected true or false", k);
    *out = json_is_true(v);
    return GL_OK;
}

static gl_status get_num(json_t *o, const char *k, double lo, double hi, double *out,
                         struct gl_api_error *e)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return GL_OK;
    if (!json_is_number(v))
        return FAIL(k, "%s: expected a number", k);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return FAIL(k, "%s: %g is not in [%g, %g]", k, x, lo, hi);
    *out = x;
    return GL_OK;
}

static gl_status get_float(json_t *o, const char *k, double lo, double hi, float *out,
                           struct gl_api_error *e)
{
    double x = (double)*out;
    gl_status st = get_num(o, k, lo, hi, &x, e);
    *out = (float)x;
    return st;
}

static gl_status get_int(json_t *o, const char *k, long long lo, long long hi, long long *out,
                         struct gl_api_error *e)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return GL_OK;
    long long x;
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9e15)
        x = (long long)json_real_value(v);
    else
        return FAIL(k, "%s: expected an integer", k);
    if (x < lo || x > hi)
        return FAIL(k, "%s: %lld is not in [%lld, %lld]", k, x, lo, hi);
    *out = x;
    return GL_OK;
}

static gl_status get_i32(json_t *o, const char *k, long long lo, long long hi, int32_t *out,
                         struct gl_api_error *e)
{
    long long x = *out;
    gl_status st = get_int(o, k, lo, hi, &x, e);
    *out = (int32_t)x;
    return st;
}

// ---- sampling fields (both endpoints) ----

static gl_status parse_sampling(const struct gl_api_config *c, json_t *b, struct gl_api_req *r,
                                struct gl_api_error *e)
{
    struct gl_sample_params *sp = &r->sp;
    const int32_t V = gl_tokenizer_n_vocab(c->tok);
    gl_status st;
    long long seed = 0;
    json_t *jseed = json_object_get(b, "seed");
    if (jseed && !json_is_null(jseed)) {
        if ((st = get_int(b, "seed", INT64_MIN, INT64_MAX, &seed, e)) != GL_OK)
            return st;
        sp->seed = (uint64_t)seed;
        sp->has_seed = 1;
    }
    if ((st = get_i32(b, "n", 1, GL_SAMPLE_MAX_N, &sp->n, e)) != GL_OK ||
        (st = get_float(b, "temperature", 0, 100, &sp->temperature, e)) != GL_OK ||
        (st = get_float(b, "top_p", 1e-9, 1, &sp->top_p, e)) != GL_OK ||
        (st = get_i32(b, "top_k", -1, V, &sp->top_k, e)) != GL_OK ||
        (st = get_float(b, "min_p", 0, 1, &sp->min_p, e)) != GL_OK ||
        (st = get_float(b, "presence_penalty", -2, 2, &sp->presence_penalty, e)) != GL_OK ||
        (st = get_float(b, "frequency_penalty", -2, 2, &sp->frequency_penalty, e)) != GL_OK ||
        (st = get_float(b, "repetition_penalty", 1e-6, 100, &sp->repetition_penalty, e)) != GL_OK ||
        (st = get_i32(b, "min_tokens", 0, c->max_model_len, &sp->min_tokens, e)) != GL_OK ||
        (st = get_bool(b, "ignore_eos", &sp->ignore_eos, e)) != GL_OK ||
        (st = get_bool(b, "include_stop_str_in_output", &sp->include_stop_str_in_output, e)) !=
            GL_OK ||
        (st = get_bool(b, "skip_special_tokens", &sp->skip_special_tokens, e)) != GL_OK)
        return st;
    r->skip_special_tokens = sp->skip_special_tokens;
    int spaces = 1;
    if ((st = get_bool(b, "spaces_between_special_tokens", &spaces, e)) != GL_OK)
        return st;
    int beam = 0;
    if ((st = get_bool(b, "use_beam_search", &beam, e)) != GL_OK)
        return st;
    if (beam)
        return FAIL("use_beam_search", "use_beam_search: beam search is not supported");
    // max_completion_tokens takes precedence over the deprecated max_tokens (vLLM).
    int32_t mt = -1;
    if ((st = get_i32(b, "max_tokens", 1, INT32_MAX, &mt, e)) != GL_OK ||
        (st = get_i32(b, "max_completion_tokens", 1, INT32_MAX, &mt, e)) != GL_OK)
        return st;
    r->max_tokens_set = mt > 0;
    // Unset: the server's default (generation_config.json's max_new_tokens, or -1), which the
    // prompt loop below clips to the room max_model_len leaves, as vLLM does.
    sp->max_tokens = mt > 0 ? mt : c->defaults.max_tokens;
    if (sp->min_tokens > 0 && mt > 0 && sp->min_tokens > mt)
        return FAIL("min_tokens", "min_tokens (%d) must be at most max_tokens (%d)", sp->min_tokens,
                    mt);

    json_t *lb = json_object_get(b, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb))
            return FAIL("logit_bias", "logit_bias: expected an object of token id -> bias");
        size_t m = json_object_size(lb);
        if (m > GL_API_MAX_LOGIT_BIAS)
            return FAIL("logit_bias", "logit_bias: %zu entries, at most %d allowed", m,
                        GL_API_MAX_LOGIT_BIAS);
        r->bias = gl_malloc((m ? m : 1) * sizeof *r->bias);
        if (!r->bias)
            return NOMEM();
        const char *key;
        json_t *v;
        json_object_foreach(lb, key, v)
        {
            char *end;
            long long id = strtoll(key, &end, 10);
            if (end == key || *end || id < 0 || id >= V)
                return FAIL("logit_bias", "logit_bias: key '%.40s' is not a token id in [0, %d)",
                            key, V);
            if (!json_is_number(v))
                return FAIL("logit_bias", "logit_bias[%s]: expected a number", key);
            double x = json_number_value(v);
            // vLLM clamps biases to [-100, 100].
            x = x < -100 ? -100 : x > 100 ? 100 : x;
            r->bias[sp->n_logit_bias++] = (struct gl_logit_bias){(int32_t)id, (float)x};
        }
        sp->logit_bias = r->bias;
    }
    json_t *sti = json_object_get(b, "stop_token_ids");
    if (sti && !json_is_null(sti)) {
        if ((st = gl_api_get_ids(sti, "stop_token_ids", V, GL_API_MAX_STOP_IDS, &r->stop_ids,
                                 &sp->n_stop_ids, e)) != GL_OK)
            return st;
        sp->stop_token_ids = r->stop_ids;
    }
    json_t *ati = json_object_get(b, "allowed_token_ids");
    if (ati && !json_is_null(ati)) {
        if ((st = gl_api_get_ids(ati, "allowed_token_ids", V, V, &r->allowed_ids, &sp->n_allowed,
                                 e)) != GL_OK)
            return st;
        if (sp->n_allowed == 0)
            return FAIL("allowed_token_ids", "allowed_token_ids: must not be empty");
        sp->allowed_ids = r->allowed_ids;
    }
    json_t *stop = json_object_get(b, "stop");
    if (stop && !json_is_null(stop)) {
        json_t *one = json_is_string(stop) ? stop : NULL;
        size_t m = one ? 1 : json_is_array(stop) ? json_array_size(stop) : 0;
        if (!one && !json_is_array(stop))
            return FAIL("stop", "stop: expected a string or a list of strings");
        if (m > GL_SAMPLE_MAX_STOP)
            return FAIL("stop", "stop: %zu strings, at most %d allowed", m, GL_SAMPLE_MAX_STOP);
        for (size_t i = 0; i < m; i++) {
            json_t *s = one ? one : json_array_get(stop, i);
            if (!json_is_string(s))
                return FAIL("stop", "stop[%zu]: expected a string", i);
            size_t len = json_string_length(s);
            if (len == 0)
                continue; // vLLM drops empty stop strings
            if (len > GL_SAMPLE_MAX_STOP_LEN || memchr(json_string_value(s), 0, len))
                return FAIL("stop", "stop[%zu]: longer than %d bytes or holds a NUL", i,
                            GL_SAMPLE_MAX_STOP_LEN);
            char *d = gl_strdup(json_string_value(s));
            if (!d)
                return NOMEM();
            r->stops[sp->n_stop] = d;
            sp->stop[sp->n_stop++] = d;
        }
    }
    return GL_OK;
}

// ---- structured output ----

struct constraint {
    const char *field; // where it came from, for messages
    const char *kind;  // turn-spec body kind: json_schema json_object regex choice gbnf
    enum gl_grammar_kind gkind;
    char *src; // owned source text
    size_t len;
    // options (gl_api_so defaults, then structured_outputs fields)
    int ws_bounded, ws_set; // disable_any_whitespace (ws_set: the request gave it)
    int32_t ws_pattern;     // whitespace_pattern's ws_max (gl_grammar_ws_pattern), or -1
    int open_objects, lenient;
    int finish_within; // finish_within_max_tokens
};

static gl_status set_constraint(struct constraint *k, const char *field, const char *kind,
                                enum gl_grammar_kind gkind, json_t *v, int as_json,
                                struct gl_api_error *e)
{
    if (k->field)
        return FAIL(field, "%s: only one structured-output constraint per request (%s is also set)",
                    field, k->field);
    k->field = field;
    k->kind = kind;
    k->gkind = gkind;
    if (gkind == GL_GRAMMAR_JSON_OBJECT)
        return GL_OK;
    if (as_json) {
        // A schema may be given as an object or as its JSON text (guided_json accepts both).
        if (json_is_string(v)) {
            k->src = gl_strdup(json_string_value(v));
            k->len = json_string_length(v);
        } else {
            k->src = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            k->len = k->src ? strlen(k->src) : 0;
            if (k->src) { // json_dumps memory is libc's; keep one allocator for the field
                char *d = gl_strdup(k->src);
                free(k->src);
                k->src = d;
            }
        }
    } else {
        if (!json_is_string(v))
            return FAIL(field, "%s: expected a string", field);
        k->src = gl_malloc(json_string_length(v) + 1);
        if (k->src) {
            memcpy(k->src, json_string_value(v), json_string_length(v) + 1);
            k->len = json_string_length(v);
        }
    }
    return k->src ? GL_OK : NOMEM();
}

static gl_status parse_choice_list(json_t *v, const char *field, struct constraint *k,
                                   struct gl_api_error *e)
{
    if (!json_is_array(v) || json_array_size(v) == 0)
        return FAIL(field, "%s: expected a non-empty list of strings", field);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i)))
            return FAIL(field, "%s[%zu]: expected a string", field, i);
    return set_constraint(k, field, "choice", GL_GRAMMAR_CHOICE, v, 1, e);
}

// whitespace_pattern (or the legacy guided_whitespace_pattern) at field.
static gl_status parse_ws_pattern(struct constraint *k, const char *field, json_t *v,
                                  struct gl_api_error *e)
{
    if (!json_is_string(v))
        return FAIL(field, "%s: expected a string", field);
    struct gl_err err = {0};
    if (gl_grammar_ws_pattern(json_string_value(v), json_string_length(v), &k->ws_pattern, &err) !=
        GL_OK)
        return FAIL(field, "%s: %s", field, err.msg);
    return GL_OK;
}

// The option fields of structured_outputs (vLLM's StructuredOutputsParams, plus glint's
// lenient_keywords); disable_fallback is accepted and ignored (one engine, nothing to fall back
// to).
static gl_status parse_so_option(struct constraint *k, const char *key, json_t *v,
                                 struct gl_api_error *e)
{
    static const char *const flags[] = {"disable_any_whitespace", "disable_additional_properties",
                                        "lenient_keywords", "disable_fallback"};
    if (strcmp(key, "whitespace_pattern") == 0)
        return parse_ws_pattern(k, "structured_outputs.whitespace_pattern", v, e);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strcmp(key, flags[i]) != 0)
            continue;
        char field[64];
        snprintf(field, sizeof field, "structured_outputs.%s", flags[i]);
        if (!json_is_boolean(v))
            return FAIL(field, "%s: expected true or false", field);
        int on = json_is_true(v);
        if (i == 0) {
            k->ws_bounded = !on;
            k->ws_set = 1;
        } else if (i == 1) {
            k->open_objects = !on;
        } else if (i == 2) {
            k->lenient = on;
        }
        return GL_OK;
    }
    return FAIL("structured_outputs",
                "structured_outputs.%.40s: not supported (json, regex, choice, grammar, "
                "json_object, disable_any_whitespace, disable_additional_properties, "
                "whitespace_pattern, lenient_keywords, disable_fallback)",
                key);
}

// structured_outputs.finish_within_max_tokens (glint's; proc.c applies it).
static gl_status parse_finish_within(struct constraint *k, json_t *v, struct gl_api_error *e)
{
    if (!json_is_boolean(v))
        return FAIL("structured_outputs.finish_within_max_tokens",
                    "structured_outputs.finish_within_max_tokens: expected true or false");
    k->finish_within = json_is_true(v);
    return GL_OK;
}

static gl_status parse_constraint(json_t *b, struct constraint *k, struct gl_api_error *e)
{
    gl_status st;
    json_t *rf = json_object_get(b, "response_format");
    if (rf && !json_is_null(rf)) {
        json_t *t = json_object_get(rf, "type");
        const char *ty = json_is_object(rf) ? json_string_value(t) : NULL;
        if (!ty)
            return FAIL("response_format", "response_format: expected an object with a type");
        if (strcmp(ty, "json_object") == 0) {
            st = set_constraint(k, "response_format", "json_object", GL_GRAMMAR_JSON_OBJECT, NULL,
                                0, e);
        } else if (strcmp(ty, "json_schema") == 0) {
            json_t *js = json_object_get(rf, "json_schema");
            if (!json_is_object(js))
                return FAIL("response_format.json_schema",
                            "response_format: type json_schema needs a json_schema object");
            json_t *sch = json_object_get(js, "schema");
            if (!sch || json_is_null(sch))
                sch = json_object_get(js, "json_schema"); // older client spelling
            if (!json_is_object(sch) && !json_is_boolean(sch))
                return FAIL("response_format.json_schema.schema",
                            "response_format.json_schema.schema: expected a JSON Schema object");
            st = set_constraint(k, "response_format.json_schema.schema", "json_schema",
                                GL_GRAMMAR_JSON_SCHEMA, sch, 1, e);
        } else if (strcmp(ty, "text") == 0) {
            st = GL_OK;
        } else {
            return FAIL("response_format.type",
                        "response_format.type: '%.40s' is not supported (text, json_object, "
                        "json_schema)",
                        ty);
        }
        if (st != GL_OK)
            return st;
    }
    json_t *so = json_object_get(b, "structured_outputs");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return FAIL("structured_outputs", "structured_outputs: expected an object");
        const char *key;
        json_t *v;
        json_object_foreach(so, key, v)
        {
            if (json_is_null(v))
                continue;
            if (strcmp(key, "json") == 0)
                st = set_constraint(k, "structured_outputs.json", "json_schema",
                                    GL_GRAMMAR_JSON_SCHEMA, v, 1, e);
            else if (strcmp(key, "regex") == 0)
                st = set_constraint(k, "structured_outputs.regex", "regex", GL_GRAMMAR_REGEX, v, 0,
                                    e);
            else if (strcmp(key, "choice") == 0)
                st = parse_choice_list(v, "structured_outputs.choice", k, e);
            else if (strcmp(key, "grammar") == 0)
                st = set_constraint(k, "structured_outputs.grammar", "gbnf", GL_GRAMMAR_GBNF, v, 0,
                                    e);
            else if (strcmp(key, "finish_within_max_tokens") == 0)
                st = parse_finish_within(k, v, e);
            else if (strcmp(key, "json_object") == 0)
                st = json_is_true(v)
                         ? set_constraint(k, "structured_outputs.json_object", "json_object",
                                          GL_GRAMMAR_JSON_OBJECT, NULL, 0, e)
                         : GL_OK;
            else
                st = parse_so_option(k, key, v, e);
            if (st != GL_OK)
                return st;
        }
    }
    static const struct {
        const char *field, *kind;
        enum gl_grammar_kind g;
        int as_json;
    } legacy[] = {
        {"guided_json", "json_schema", GL_GRAMMAR_JSON_SCHEMA, 1},
        {"guided_regex", "regex", GL_GRAMMAR_REGEX, 0},
        {"guided_grammar", "gbnf", GL_GRAMMAR_GBNF, 0},
    };
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
        json_t *v = json_object_get(b, legacy[i].field);
        if (v && !json_is_null(v) &&
            (st = set_constraint(k, legacy[i].field, legacy[i].kind, legacy[i].g, v,
                                 legacy[i].as_json, e)) != GL_OK)
            return st;
    }
    json_t *gc = json_object_get(b, "guided_choice");
    if (gc && !json_is_null(gc) && (st = parse_choice_list(gc, "guided_choice", k, e)) != GL_OK)
        return st;
    json_t *gw = json_object_get(b, "guided_whitespace_pattern");
    if (gw && !json_is_null(gw) &&
        (st = parse_ws_pattern(k, "guided_whitespace_pattern", gw, e)) != GL_OK)
        return st;
    json_t *gb = json_object_get(b, "guided_decoding_backend");
    if (gb && !json_is_null(gb) && !json_is_string(gb))
        return FAIL("guided_decoding_backend", "guided_decoding_backend: expected a string");
    return GL_OK;
}

// Compiles (or finds in the cache) the grammar of kind/src; times it for metrics.
// Whitespace: a whitespace_pattern decides unless the request asks for compact JSON outright.
static gl_status lookup_grammar(const struct gl_api_config *c, struct gl_api_req *r,
                                enum gl_grammar_kind kind, const char *src, size_t len,
                                const struct constraint *k, const char *field,
                                struct gl_api_error *e)
{
    struct gl_grammar_opts o = gl_grammar_default_opts();
    o.ws_max = k->ws_bounded ? GL_API_WS_MAX : 0;
    if (k->ws_pattern >= 0 && !(k->ws_set && !k->ws_bounded))
        o.ws_max = k->ws_pattern;
    o.closed_objects = !k->open_objects;
    o.lenient = k->lenient;
    if (c->grammar_compile_bytes > 0)
        o.max_compile_bytes = c->grammar_compile_bytes;
    struct gl_err err = {0};
    int64_t t0 = gl_time_us();
    gl_status st = gl_grammar_cache_get_locked(c->gcache, c->grammar_lock, &r->grammar, kind, src,
                                               len, &o, &err);
    r->grammar_us = gl_time_us() - t0;
    if (st == GL_E_NOMEM)
        return NOMEM();
    if (st != GL_OK)
        return FAIL(field, "%s: %s", field, err.msg);
    return GL_OK;
}

// A constrained request's max_tokens must hold the shortest answer its grammar allows (the turn's
// framing, the shortest valid body, the stop token): else a 400 with the count. The count is a
// lower bound (grammar.h gl_matcher_shortest), so no request that could finish is refused. An
// unconstrained one is not checked (vLLM serves max_tokens 1; its reply is cut, as asked).
static gl_status check_answer_room(const struct gl_api_config *c, struct gl_api_req *r,
                                   const struct constraint *k, struct gl_api_error *e)
{
    r->finish_within = k->finish_within;
    if (!r->grammar || !k->field || r->sp.max_tokens <= 0)
        return GL_OK;
    struct gl_matcher *m = NULL;
    struct gl_err err = {0};
    int32_t eos = gl_tokenizer_eos(c->tok);
    int64_t lower = -1;
    pthread_mutex_lock(c->grammar_lock);
    gl_status st = gl_matcher_new(&m, r->grammar, c->gvocab, &eos, eos >= 0, &err);
    if (st == GL_OK)
        gl_matcher_shortest(m, &lower, NULL);
    gl_matcher_free(m);
    pthread_mutex_unlock(c->grammar_lock);
    if (st != GL_OK)
        return st == GL_E_NOMEM ? NOMEM() : FAIL(k->field, "%s: %s", k->field, err.msg);
    if (lower > r->sp.max_tokens)
        return FAIL(
            "max_tokens",
            "'max_tokens' or 'max_completion_tokens' is %d, but the shortest answer that %s "
            "allows needs at least %lld tokens (%sthe shortest valid body and the stop "
            "token)",
            r->sp.max_tokens, k->field, (long long)lower, r->turn ? "the turn's framing, " : "");
    return GL_OK;
}

// ---- chat ----

// An image or video part: its URL's bytes fetched and decoded, so that a malformed part is a 400
// naming it (truncated, not an image or video, zero-sized, over the byte, pixel, frame or duration
// limits, a path outside --allowed-local-media-path). Each is preprocessed here, once: a video
// (decode, sampling, resize under r->mm's video caps) into clips[k], an image (decode, grid under
// max_image_tokens, which mm_processor_kwargs has already set, resize) into pixels[k]; the bytes
// are dropped. The part joins r->parts; the prompt expansion patchifies it (and encodes it unless
// the engine does, defer_encode).
static gl_status check_media_part(const struct gl_api_config *c, json_t *part, const char *ty,
                                  size_t i, size_t j, struct gl_api_req *r, struct gl_api_error *e)
{
    const int video = strstr(ty, "video") != NULL;
    const char *key = video ? "video_url" : "image_url";
    char param[96];
    snprintf(param, sizeof param, "messages[%zu].content[%zu].%s", i, j, key);
    json_t *u = json_object_get(part, key);
    if (json_is_object(u))
        u = json_object_get(u, "url");
    if (!json_is_string(u))
        return FAIL("messages", "%s: expected a URL string (or an object with a string url)",
                    param);
    if (r->n_parts >= r->mm.max_parts)
        return FAIL("messages", "%s: more than %d images and videos in one request", param,
                    r->mm.max_parts);
    if (!r->parts && (!(r->parts = gl_calloc((size_t)r->mm.max_parts, sizeof *r->parts)) ||
                      !(r->clips = gl_calloc((size_t)r->mm.max_parts, sizeof *r->clips)) ||
                      !(r->pixels = gl_calloc((size_t)r->mm.max_parts, sizeof *r->pixels))))
        return NOMEM();
    uint8_t *bytes = NULL;
    size_t n = 0;
    struct gl_err err = {0};
    gl_status st =
        gl_mediasrc_load(&c->media, json_string_value(u), json_string_length(u), &bytes, &n, &err);
    if (st != GL_OK) // 400; 500 when memory or the server's own setup failed (mediasrc.h)
        return gl_api_fail(e, gl_mediasrc_http_status(st), param, "%s: %s", param, err.msg);
    struct gl_video *clip = &r->clips[r->n_parts];
    const int tower = c->model && gl_model_vision(c->model) && (c->media_pool || c->defer_encode);
    if (video && tower && gl_model_vision_video(c->model)) { // before decoding the clip
        gl_free(bytes);
        return FAIL("messages", "%s: %s", param, gl_model_vision_video(c->model));
    }
    struct gl_image *px = &r->pixels[r->n_parts];
    if (!video && tower) {
        struct gl_image_grid g;
        st = gl_image_preprocess(bytes, n, &r->mm.limits, r->mm.max_image_tokens, px, &g, &err);
    } else if (!video) { // only checked: a text-only model refuses it below
        st = gl_image_decode(bytes, n, &r->mm.limits, px, &err);
    } else if (tower) { // a video is decoded only for a model that can use it
        st = gl_video_preprocess(bytes, n, &r->mm.video_limits, &r->mm.video, clip, &err);
    }
    if (st == GL_OK && !tower) {
        gl_free(bytes);
        gl_image_free(px);
        return FAIL("messages", "%s: this model has no vision tower: it takes text only", param);
    }
    if (st != GL_OK) {
        gl_free(bytes);
        return st == GL_E_NOMEM ? gl_api_fail(e, 500, "messages", "%s: %s", param, err.msg)
                                : FAIL("messages", "%s: %s", param, err.msg);
    }
    gl_free(bytes); // preprocessed: the pixels or the clip are all the expansion needs
    r->parts[r->n_parts++] = (struct gl_media_part){
        .kind = video ? GL_MEDIA_VIDEO : GL_MEDIA_IMAGE,
        .clip = video ? clip : NULL,
        .pixels = video ? NULL : px,
    };
    return GL_OK;
}

// Frees the parts' bytes and clips.
static void free_parts(struct gl_api_req *r)
{
    for (int32_t i = 0; i < r->n_parts; i++) {
        gl_free((void *)r->parts[i].data);
        gl_video_free(&r->clips[i]);
        gl_image_free(&r->pixels[i]);
    }
    gl_free(r->parts);
    gl_free(r->clips);
    gl_free(r->pixels);
    r->parts = NULL;
    r->clips = NULL;
    r->pixels = NULL;
    r->n_parts = 0;
}

static gl_status check_messages(const struct gl_api_config *c, json_t *msgs, struct gl_api_req *r,
                                struct gl_api_error *e)
{
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return FAIL("messages", "messages: expected a non-empty list of messages");
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")))
            return FAIL("messages", "messages[%zu]: expected an object with a string role", i);
        json_t *content = json_object_get(m, "content");
        if (!json_is_array(content))
            continue;
        for (size_t j = 0; j < json_array_size(content); j++) {
            json_t *part = json_array_get(content, j);
            const char *ty = json_string_value(json_object_get(part, "type"));
            if (!json_is_object(part) || !ty)
                return FAIL("messages",
                            "messages[%zu].content[%zu]: expected a part object "
                            "with a type",
                            i, j);
            if (strcmp(ty, "text") == 0 || strcmp(ty, "input_text") == 0) {
                if (!json_is_string(json_object_get(part, "text")))
                    return FAIL("messages", "messages[%zu].content[%zu].text: expected a string", i,
                                j);
                continue;
            }
            if (!strcmp(ty, "image_url") || !strcmp(ty, "input_image") ||
                !strcmp(ty, "video_url")) {
                gl_status st = check_media_part(c, part, ty, i, j, r, e);
                if (st != GL_OK)
                    return st;
                continue;
            }
            if (strstr(ty, "image") || strstr(ty, "video") || strstr(ty, "audio"))
                return FAIL("messages",
                            "messages[%zu].content[%zu]: '%.40s' content is not supported (image "
                            "parts are image_url, video parts video_url)",
                            i, j, ty);
            return FAIL("messages", "messages[%zu].content[%zu]: unknown content part type '%.40s'",
                        i, j, ty);
        }
    }
    return GL_OK;
}

// tool_choice -> "none" | "auto" | "required" | the named function (in *name).
static gl_status parse_tools(json_t *b, json_t **tools, const char **mode, const char **name,
                             struct gl_api_error *e)
{
    json_t *t = json_object_get(b, "tools");
    *tools = NULL;
    *name = NULL;
    if (t && !json_is_null(t)) {
        if (!json_is_array(t) || json_array_size(t) == 0)
            return FAIL("tools", "tools: expected a non-empty list of tools");
        for (size_t i = 0; i < json_array_size(t); i++) {
            json_t *x = json_array_get(t, i);
            json_t *f = json_object_get(x, "function");
            const char *ty = json_string_value(json_object_get(x, "type"));
            if (!json_is_object(x) || (ty && strcmp(ty, "function") != 0) ||
                !json_is_object(f ? f : x) || !json_is_string(json_object_get(f ? f : x, "name")))
                return FAIL("tools",
                            "tools[%zu]: expected {type: function, function: {name, "
                            "parameters}}",
                            i);
        }
        *tools = t;
    }
    *mode = *tools ? "auto" : "none";
    json_t *tc = json_object_get(b, "tool_choice");
    if (!tc || json_is_null(tc))
        return GL_OK;
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (strcmp(s, "none") && strcmp(s, "auto") && strcmp(s, "required"))
            return FAIL("tool_choice",
                        "tool_choice: '%.40s' is not none, auto, required or a "
                        "function",
                        s);
        if (strcmp(s, "required") == 0 && !*tools)
            return FAIL("tool_choice", "tool_choice: required needs tools");
        *mode = *tools ? s : "none";
        return GL_OK;
    }
    json_t *f = json_object_get(tc, "function");
    const char *n = json_string_value(json_object_get(f, "name"));
    if (!json_is_object(tc) || !n)
        return FAIL("tool_choice", "tool_choice: expected a string or {type: function, function: "
                                   "{name}}");
    int found = 0;
    for (size_t i = 0; *tools && i < json_array_size(*tools) && !found; i++) {
        json_t *x = json_array_get(*tools, i);
        json_t *xf = json_object_get(x, "function");
        found = strcmp(json_string_value(json_object_get(xf ? xf : x, "name")), n) == 0;
    }
    if (!found)
        return FAIL("tool_choice", "tool_choice: function '%.60s' is not in tools", n);
    *mode = "named";
    *name = n;
    return GL_OK;
}

int32_t gl_api_max_token_bytes(const struct gl_tokenizer *tok)
{
    size_t most = 0;
    for (int32_t i = 0; i < gl_tokenizer_n_vocab(tok); i++) {
        size_t len = 0;
        (void)gl_tokenizer_token_bytes(tok, i, &len);
        most = len > most ? len : most;
    }
    return most > INT32_MAX ? INT32_MAX : (int32_t)most;
}

// param: "prompt" or "messages", for the context-length error.
static gl_status encode(const struct gl_api_config *c, const char *text, size_t len, int special,
                        int bos, const char *param, struct gl_api_prompt *p, struct gl_api_error *e)
{
    gl_token *ids = NULL;
    size_t n = 0;
    struct gl_err err = {0};
    if (gl_api_check_text_len(c, len, param, e) != GL_OK)
        return GL_E_INVAL;
    if (gl_tokenizer_encode(c->tok, text, len, special, bos, &ids, &n, &err) != GL_OK)
        return err.code == GL_E_NOMEM ? NOMEM() : FAIL("prompt", "prompt: %s", err.msg);
    if (n > INT32_MAX / 2) {
        gl_free(ids);
        return FAIL("prompt", "prompt: too many tokens");
    }
    p->ids = ids;
    p->n = (int32_t)n;
    return GL_OK;
}

// Each part's placeholder in prompts[0] (<|patch|> for an image, <|video|> for a video) expanded
// into its soft-token run (media/): with defer_encode the run carries the part's patch vectors
// for the engine's encoder (nothing is computed here), else the encoder runs on the shared media
// pool, one request at a time. The parts' pixels and clips are dropped after.
static gl_status expand_media(const struct gl_api_config *c, struct gl_api_req *r,
                              struct gl_api_error *e)
{
    struct gl_err err = {0};
    r->mm.defer = c->defer_encode;
    if (!r->mm.defer)
        pthread_mutex_lock(c->media_lock);
    gl_status st = gl_media_expand(c->model, c->tok, c->media_pool, r->prompts[0].ids,
                                   r->prompts[0].n, r->parts, r->n_parts, &r->mm, &r->media, &err);
    if (!r->mm.defer)
        pthread_mutex_unlock(c->media_lock);
    free_parts(r);
    if (st != GL_OK)
        return st == GL_E_NOMEM ? NOMEM() : FAIL("messages", "%s", err.msg);
    gl_free(r->prompts[0].ids); // the expanded ids take its place
    r->prompts[0].ids = r->media.ids;
    r->prompts[0].n = r->media.n_ids;
    r->media.ids = NULL;
    return GL_OK;
}

// mm_processor_kwargs (vLLM passes them to the HF processor, so these are its names):
// max_image_tokens caps each image's merged tokens (§6.2); fps, num_frames and
// max_video_frame_tokens are the video sampling rate, frame cap and per-frame token cap (§6.5).
static gl_status parse_mm_kwargs(const struct gl_api_config *c, json_t *b, struct gl_api_req *r,
                                 struct gl_api_error *e)
{
    r->mm = gl_media_default_params();
    r->mm.max_image_tokens = c->max_image_tokens;
    r->mm.cache = c->media_cache;
    json_t *kw = json_object_get(b, "mm_processor_kwargs"), *v;
    if (!kw || json_is_null(kw))
        return GL_OK;
    if (!json_is_object(kw))
        return FAIL("mm_processor_kwargs", "mm_processor_kwargs: expected an object");
    const char *key;
    json_object_foreach(kw, key, v)
    {
        int32_t *dst = !strcmp(key, "max_image_tokens")         ? &r->mm.max_image_tokens
                       : !strcmp(key, "num_frames")             ? &r->mm.video.max_frames
                       : !strcmp(key, "max_video_frame_tokens") ? &r->mm.video.max_frame_tokens
                                                                : NULL;
        const int32_t hi =
            dst == &r->mm.video.max_frames ? GL_VIDEO_MAX_FRAMES_LIMIT : GL_IMAGE_MAX_TOKENS_LIMIT;
        if (!strcmp(key, "fps")) {
            if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 1000)
                return FAIL("mm_processor_kwargs",
                            "mm_processor_kwargs.fps: expected a number in (0, 1000]");
            r->mm.video.fps = json_number_value(v);
        } else if (!dst) {
            return FAIL("mm_processor_kwargs",
                        "mm_processor_kwargs.%.40s: not supported (max_image_tokens, fps, "
                        "num_frames, max_video_frame_tokens are)",
                        key);
        } else if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > hi) {
            return FAIL("mm_processor_kwargs",
                        "mm_processor_kwargs.%s: expected an integer in 1..%d", key, (int)hi);
        } else {
            *dst = (int32_t)json_integer_value(v);
        }
    }
    if ((int64_t)r->mm.video.max_frames * r->mm.video.max_frame_tokens > GL_VIDEO_MAX_CLIP_TOKENS)
        return FAIL("mm_processor_kwargs",
                    "mm_processor_kwargs: num_frames x max_video_frame_tokens = %lld is over %d",
                    (long long)r->mm.video.max_frames * r->mm.video.max_frame_tokens,
                    GL_VIDEO_MAX_CLIP_TOKENS);
    return GL_OK;
}

// Text of a message's content as vLLM's conversation holds it: the string, or the text parts
// joined with "\n". NULL when out of memory (an absent content is "").
static char *content_text(json_t *content, size_t *len)
{
    size_t n = 0, cap = 1;
    for (size_t i = 0; i < json_array_size(content); i++)
        cap += json_string_length(json_object_get(json_array_get(content, i), "text")) + 1;
    if (json_is_string(content))
        cap += json_string_length(content);
    char *t = gl_malloc(cap);
    if (!t)
        return NULL;
    if (json_is_string(content)) {
        memcpy(t, json_string_value(content), json_string_length(content));
        n = json_string_length(content);
    }
    for (size_t i = 0; i < json_array_size(content); i++) {
        json_t *x = json_object_get(json_array_get(content, i), "text");
        if (!json_is_string(x))
            continue;
        if (n)
            t[n++] = '\n';
        memcpy(t + n, json_string_value(x), json_string_length(x));
        n += json_string_length(x);
    }
    t[n] = 0;
    *len = n;
    return t;
}

// add_generation_prompt / continue_final_message (vLLM: not both) and chat echo. The reply is
// parsed from an assistant turn, so the prompt must open one: with the generation prompt
// (default), or by continuing the final message, which must then be an assistant answer (to
// user). echo (vLLM): the last message's content goes before the reply's content when that
// message has the reply's role (assistant; without the generation prompt, any role).
static gl_status parse_turn_start(json_t *b, json_t *msgs, struct gl_api_req *r,
                                  struct gl_api_error *e)
{
    int agp = 1, cont = 0;
    gl_status st;
    if ((st = get_bool(b, "add_generation_prompt", &agp, e)) != GL_OK ||
        (st = get_bool(b, "continue_final_message", &cont, e)) != GL_OK ||
        (st = get_bool(b, "echo", &r->echo, e)) != GL_OK)
        return st;
    if (agp && cont)
        return FAIL(
            "continue_final_message",
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    if (!agp && !cont)
        return FAIL("add_generation_prompt",
                    "add_generation_prompt=false is supported with continue_final_message=true "
                    "only: the reply is parsed from an assistant turn, which the prompt must open");
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (cont) {
        json_t *rcp = json_object_get(last, "recipient");
        if (!role || strcmp(role, "assistant") != 0 ||
            (rcp && !json_is_null(rcp) &&
             !(json_is_string(rcp) && !strcmp(json_string_value(rcp), "user"))))
            return FAIL("continue_final_message",
                        "continue_final_message: the final message must be an assistant answer "
                        "(role assistant, no other recipient) to continue");
        r->continue_final = 1;
    }
    if (r->echo && role && (!agp || !strcmp(role, "assistant"))) {
        r->echo_text = content_text(json_object_get(last, "content"), &r->echo_len);
        if (!r->echo_text)
            return NOMEM();
    }
    return GL_OK;
}

// modalities: ["text"] is what glint writes anyway (accepted, reported as ignored); any other
// output modality would be dropped silently: a 400.
static gl_status check_modalities(json_t *b, struct gl_api_req *r, struct gl_api_error *e)
{
    json_t *m = json_object_get(b, "modalities");
    if (!m || json_is_null(m))
        return GL_OK;
    if (!json_is_array(m))
        return FAIL("modalities", "modalities: expected a list of strings");
    for (size_t i = 0; i < json_array_size(m); i++) {
        const char *x = json_string_value(json_array_get(m, i));
        if (!x || strcmp(x, "text") != 0)
            return FAIL("modalities",
                        "modalities[%zu]: only \"text\" output is supported (got %.40s)", i,
                        x ? x : "a non-string");
    }
    note_ignored(r, "modalities");
    return GL_OK;
}

static gl_status parse_chat(const struct gl_api_config *c, json_t *b, struct gl_api_req *r,
                            struct constraint *k, struct gl_api_error *e)
{
    json_t *msgs = json_object_get(b, "messages");
    gl_status st = parse_mm_kwargs(c, b, r, e);
    if (st == GL_OK)
        st = check_messages(c, msgs, r, e);
    if (st != GL_OK)
        return st;
    if ((st = parse_turn_start(b, msgs, r, e)) != GL_OK ||
        (st = check_modalities(b, r, e)) != GL_OK)
        return st;
    json_t *kw = json_object_get(b, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw))
        return FAIL("chat_template_kwargs", "chat_template_kwargs: expected an object");
    json_t *eff = json_object_get(b, "reasoning_effort");
    if (eff && !json_is_null(eff)) {
        static const char *ok[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
        const char *s = json_string_value(eff);
        size_t i = 0;
        for (; s && i < sizeof ok / sizeof ok[0]; i++)
            if (strcmp(ok[i], s) == 0)
                break;
        if (!s || i == sizeof ok / sizeof ok[0])
            return FAIL("reasoning_effort", "reasoning_effort: expected one of none, minimal, "
                                            "low, medium, high, xhigh, max");
    }
    const char *strength = json_string_value(json_object_get(kw, "reasoning_strength"));
    if (!strength)
        strength = json_string_value(eff);
    int reasoning = !(strength && strcmp(strength, "none") == 0);
    if ((st = get_bool(b, "include_reasoning", &r->include_reasoning, e)) != GL_OK ||
        (st = get_bool(b, "parallel_tool_calls", &r->parallel_tool_calls, e)) != GL_OK)
        return st;
    int32_t budget = -1;
    if ((st = get_i32(b, "thinking_token_budget", 0, INT32_MAX, &budget, e)) != GL_OK)
        return st;
    if (budget == 0)
        reasoning = 0;
    json_t *lp = json_object_get(b, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_boolean(lp))
        return FAIL("logprobs", "logprobs: expected true or false on /v1/chat/completions");
    r->chat_logprobs = json_is_true(lp);
    json_t *tlp = json_object_get(b, "top_logprobs");
    if (tlp && !json_is_null(tlp)) {
        if (!r->chat_logprobs)
            return FAIL("top_logprobs", "top_logprobs: needs logprobs=true");
        if ((st = get_i32(b, "top_logprobs", 0, c->max_logprobs, &r->top_logprobs, e)) != GL_OK)
            return st;
    }
    r->sp.logprobs = r->chat_logprobs ? r->top_logprobs : -1;
    // Chat stop strings are matched on the answer text by the server (api.h).
    for (int32_t i = 0; i < r->sp.n_stop; i++)
        r->chat_stop[i] = r->stops[i];
    r->n_chat_stop = r->sp.n_stop;
    r->sp.n_stop = 0;

    json_t *tools = NULL;
    const char *mode = "none", *name = NULL;
    if ((st = parse_tools(b, &tools, &mode, &name, e)) != GL_OK)
        return st;
    if (k->field && (strcmp(mode, "required") == 0 || strcmp(mode, "named") == 0))
        return FAIL("tool_choice",
                    "tool_choice %s cannot be combined with %s (one constraint "
                    "per request)",
                    mode, k->field);

    char *text = NULL;
    size_t text_len = 0;
    struct gl_err err = {0};
    if (gl_chat_render(b, &text, &text_len, &err) != GL_OK)
        return err.code == GL_E_NOMEM
                   ? NOMEM()
                   : FAIL(strstr(err.msg, "tools[") ? "tools" : "messages", "%s", err.msg);
    r->prompts = gl_calloc(1, sizeof *r->prompts);
    if (!r->prompts) {
        gl_free(text);
        return NOMEM();
    }
    r->n_prompts = 1;
    // The template writes <|begin_of_text|> itself: specials parsed, no BOS added (vLLM).
    st = encode(c, text, text_len, 1, 0, "messages", &r->prompts[0], e);
    gl_free(text);
    if (st == GL_OK && r->n_parts > 0)
        st = expand_media(c, r, e);
    if (st != GL_OK)
        return st;

    if (r->continue_final) {
        // The reply resumes inside the final answer: a constraint or a forced call would have
        // to start mid-document, so none runs (as vLLM, which constrains from the first
        // generated token, cannot either).
        if (k->field || !strcmp(mode, "required") || !strcmp(mode, "named"))
            return FAIL("continue_final_message",
                        "continue_final_message cannot be combined with %s: the constraint "
                        "would start in the middle of the continued message",
                        k->field ? k->field : "tool_choice required or named");
        return GL_OK;
    }
    if (!k->field && !tools && !c->framing)
        return GL_OK;
    // One grammar for the whole turn (api.h): the spec is canonical JSON, so the grammar cache
    // recognises repeated requests.
    json_t *spec = json_object();
    json_t *body = json_null();
    if (k->field) {
        body = json_object();
        json_object_set_new(body, "kind", json_string(k->kind));
        if (k->src)
            json_object_set_new(body, "source", json_stringn(k->src, k->len));
    }
    json_object_set_new(spec, "body", body);
    json_object_set(spec, "tools", tools ? tools : json_null());
    json_object_set_new(spec, "tool_choice",
                        name ? json_pack("{s:s}", "name", name) : json_string(mode));
    json_object_set_new(spec, "parallel", json_boolean(r->parallel_tool_calls));
    json_object_set_new(spec, "reasoning", json_boolean(reasoning));
    // Header pieces pinned to their one-token spelling, so the grammar forces them token by
    // token and jump-forward computes them in one pass (grammar.h).
    json_t *ht = json_object();
    static const char *pieces[][2] = {
        {"to", " to"}, {"self", "=self"}, {"user", "=user"}, {"assistant", "assistant"}};
    for (size_t i = 0; ht && i < sizeof pieces / sizeof pieces[0]; i++) {
        int32_t id = gl_api_single_token(c->tok, pieces[i][1]);
        if (id >= 0)
            json_object_set_new(ht, pieces[i][0], json_integer(id));
    }
    json_object_set_new(spec, "header_tokens", ht);
    char *src = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(spec);
    if (!src)
        return NOMEM();
    st = lookup_grammar(c, r, GL_GRAMMAR_ATEM_TURN, src, strlen(src), k,
                        k->field ? k->field
                        : tools  ? "tools"
                                 : "messages",
                        e);
    free(src);
    if (st != GL_OK)
        return st;
    r->turn = 1;
    r->reasoning_budget = reasoning ? budget : 0;
    return GL_OK;
}

// ---- completions ----

static gl_status parse_completion(const struct gl_api_config *c, json_t *b, struct gl_api_req *r,
                                  struct constraint *k, struct gl_api_error *e)
{
    gl_status st;
    json_t *suffix = json_object_get(b, "suffix");
    if (suffix && !json_is_null(suffix))
        return FAIL("suffix", "suffix: not supported (as in vLLM)");
    int32_t best_of = 1;
    if ((st = get_i32(b, "best_of", 1, GL_SAMPLE_MAX_N, &best_of, e)) != GL_OK)
        return st;
    if (best_of != r->sp.n && json_object_get(b, "best_of") &&
        !json_is_null(json_object_get(b, "best_of")))
        return FAIL("best_of", "best_of: only best_of == n is supported");
    if ((st = get_bool(b, "echo", &r->echo, e)) != GL_OK)
        return st;
    int32_t lp = -1;
    if ((st = get_i32(b, "logprobs", 0, c->max_logprobs, &lp, e)) != GL_OK)
        return st;
    r->sp.logprobs = lp;
    if (r->echo && lp >= 0) {
        // vLLM: the prompt's tokens open the logprobs too, from prompt logprobs of the same k
        // (streamed: in each choice's first chunk, response.c).
        r->sp.prompt_logprobs = r->sp.prompt_logprobs > lp ? r->sp.prompt_logprobs : lp;
    }
    int add_special = 1;
    if ((st = get_bool(b, "add_special_tokens", &add_special, e)) != GL_OK)
        return st;

    json_t *p = json_object_get(b, "prompt");
    if (!p || json_is_null(p))
        return FAIL("prompt", "prompt: required");
    // string | [string] | [int] | [[int]]
    size_t np = 1;
    int list_of_lists = 0, list_of_strings = 0;
    if (json_is_array(p)) {
        if (json_array_size(p) == 0)
            return FAIL("prompt", "prompt: must not be empty");
        json_t *x0 = json_array_get(p, 0);
        list_of_lists = json_is_array(x0);
        list_of_strings = json_is_string(x0);
        np = list_of_lists || list_of_strings ? json_array_size(p) : 1;
    } else if (!json_is_string(p)) {
        return FAIL("prompt", "prompt: expected a string, a list of strings, a list of token ids "
                              "or a list of lists of token ids");
    }
    if (np > GL_API_MAX_PROMPTS)
        return FAIL("prompt", "prompt: %zu prompts, at most %d per request", np,
                    GL_API_MAX_PROMPTS);
    r->prompts = gl_calloc(np, sizeof *r->prompts);
    if (!r->prompts)
        return NOMEM();
    r->n_prompts = (int32_t)np;
    const int32_t V = gl_tokenizer_n_vocab(c->tok);
    for (size_t i = 0; i < np; i++) {
        json_t *x =
            json_is_array(p) && (list_of_lists || list_of_strings) ? json_array_get(p, i) : p;
        struct gl_api_prompt *pr = &r->prompts[i];
        if (json_is_string(x)) {
            st = encode(c, json_string_value(x), json_string_length(x), 1,
                        add_special && gl_tokenizer_add_bos(c->tok), "prompt", pr, e);
            if (st == GL_OK && pr->n == 0)
                st = FAIL("prompt", "prompt[%zu]: empty", i);
            if (st == GL_OK && r->echo) {
                pr->text = gl_malloc(json_string_length(x) + 1);
                if (!pr->text)
                    return NOMEM();
                memcpy(pr->text, json_string_value(x), json_string_length(x) + 1);
                pr->text_len = json_string_length(x);
            }
        } else if (json_is_array(x)) {
            st = gl_api_get_ids(x, "prompt", V, c->max_model_len, &pr->ids, &pr->n, e);
            if (st == GL_OK && pr->n == 0)
                st = FAIL("prompt", "prompt[%zu]: empty", i);
            if (st == GL_OK && r->echo)
                st = gl_api_detok(c->tok, pr->ids, pr->n, r->sp.skip_special_tokens, &pr->text,
                                  &pr->text_len) == 0
                         ? GL_OK
                         : NOMEM();
        } else {
            st = FAIL("prompt", "prompt[%zu]: expected a string or a list of token ids", i);
        }
        if (st != GL_OK)
            return st;
    }
    if (k->field)
        return lookup_grammar(c, r, k->gkind, k->src, k->len, k, k->field, e);
    return GL_OK;
}

// ---- entry ----

// stream_options: vLLM's include_usage and continuous_usage_stats; other keys (OpenAI's
// include_obfuscation pads chunks for side channels) change no token: ignored and reported.
static gl_status parse_stream_options(const struct gl_api_config *c, json_t *b,
                                      struct gl_api_req *r, struct gl_api_error *e)
{
    json_t *so = json_object_get(b, "stream_options"), *v;
    if (!so || json_is_null(so))
        return GL_OK;
    if (!r->stream)
        return FAIL("stream_options", "stream_options: only allowed with stream=true");
    if (!json_is_object(so))
        return FAIL("stream_options", "stream_options: expected an object");
    gl_status st;
    if ((st = get_bool(so, "include_usage", &r->include_usage, e)) != GL_OK ||
        (st = get_bool(so, "continuous_usage_stats", &r->continuous_usage, e)) != GL_OK)
        return st;
    const char *key;
    json_object_foreach(so, key, v)
    {
        if (!strcmp(key, "include_usage") || !strcmp(key, "continuous_usage_stats") ||
            json_is_null(v))
            continue;
        char name[96];
        snprintf(name, sizeof name, "stream_options.%.64s", key);
        if (c->strict_fields)
            return FAIL("stream_options", "%s: not supported (--strict-request-fields)", name);
        note_ignored(r, name);
    }
    return GL_OK;
}

// vLLM's truncate_prompt_tokens on every prompt: N keeps N tokens, the last N unless
// truncation_side is "right"; -1 keeps max_model_len - max_tokens. More than that is a 400
// (vLLM's TokenizeParams check), as is a prompt left empty. A chat prompt with images or
// videos is not cut (a cut would split a soft-token run): 400 when it would need to be.
static gl_status truncate_prompts(const struct gl_api_config *c, json_t *b, struct gl_api_req *r,
                                  struct gl_api_error *e)
{
    long long keep = -2;
    gl_status st = get_int(b, "truncate_prompt_tokens", -1, INT64_MAX, &keep, e);
    json_t *side = json_object_get(b, "truncation_side");
    if (st != GL_OK)
        return st;
    if (side && !json_is_null(side) &&
        !(json_is_string(side) &&
          (!strcmp(json_string_value(side), "left") || !strcmp(json_string_value(side), "right"))))
        return FAIL("truncation_side", "truncation_side: expected \"left\" or \"right\"");
    if (keep == -2)
        return GL_OK;
    const long long max_in =
        (long long)c->max_model_len - (r->sp.max_tokens > 0 ? r->sp.max_tokens : 0);
    if (keep > max_in)
        return FAIL("truncate_prompt_tokens",
                    "truncate_prompt_tokens=%lld cannot be greater than max_model_len - "
                    "max_tokens = %lld. Please request a smaller truncation size.",
                    keep, max_in);
    if (keep < 0)
        keep = max_in;
    const int right = json_is_string(side) && !strcmp(json_string_value(side), "right");
    for (int32_t i = 0; i < r->n_prompts; i++) {
        struct gl_api_prompt *p = &r->prompts[i];
        if (keep >= p->n)
            continue;
        if (keep == 0)
            return FAIL("truncate_prompt_tokens",
                        "truncate_prompt_tokens=0 leaves an empty prompt");
        if (r->media.n_media > 0)
            return FAIL("truncate_prompt_tokens",
                        "truncate_prompt_tokens: a prompt with images or videos is not cut (it "
                        "has %d tokens)",
                        p->n);
        if (!right)
            memmove(p->ids, p->ids + (p->n - keep), (size_t)keep * sizeof *p->ids);
        p->n = (int32_t)keep;
        if (p->text) { // completions echo shows the prompt the model saw
            gl_free(p->text);
            p->text = NULL;
            if (gl_api_detok(c->tok, p->ids, p->n, r->sp.skip_special_tokens, &p->text,
                             &p->text_len) != 0)
                return NOMEM();
        }
    }
    return GL_OK;
}

// vLLM's prompt_logprobs: k in 0..--max-logprobs; not with stream (vLLM's rule and message);
// -1 (the whole vocabulary) only fits a server whose --max-logprobs is the vocabulary: refused.
static gl_status parse_prompt_logprobs(const struct gl_api_config *c, json_t *b,
                                       struct gl_api_req *r, struct gl_api_error *e)
{
    json_t *v = json_object_get(b, "prompt_logprobs");
    r->sp.prompt_logprobs = -1;
    if (!v || json_is_null(v))
        return GL_OK;
    if (r->stream)
        return FAIL("prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`.");
    if (json_is_integer(v) && json_integer_value(v) == -1)
        return FAIL("prompt_logprobs",
                    "prompt_logprobs: -1 (every token of the vocabulary) is over this server's "
                    "--max-logprobs %d",
                    (int)c->max_logprobs);
    return get_i32(b, "prompt_logprobs", 0, c->max_logprobs, &r->sp.prompt_logprobs, e);
}

// vLLM's priority: only meaningful under --scheduling-policy priority, which glint does not
// have; any priority other than 0 is then refused, with vLLM's message.
static gl_status check_priority(json_t *b, struct gl_api_error *e)
{
    long long prio = 0;
    gl_status st = get_int(b, "priority", INT64_MIN, INT64_MAX, &prio, e);
    if (st == GL_OK && prio != 0)
        return FAIL("priority", "Got priority %lld but Priority scheduling is not enabled.", prio);
    return st;
}

int gl_api_request_id_ok(const char *rid, size_t len)
{
    if (len == 0 || len > GL_API_RID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)rid[i];
        int alnum = (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
        if (!alnum && ch != '.' && ch != '_' && ch != ':' && ch != '-')
            return 0;
    }
    return 1;
}

gl_status gl_api_set_request_id(struct gl_api_req *r, const char *rid, size_t len,
                                const char *param, struct gl_api_error *e)
{
    if (!gl_api_request_id_ok(rid, len))
        return gl_api_fail(e, 400, param,
                           "%s: a request id is 1 to %d characters of A-Z a-z 0-9 . _ : -", param,
                           GL_API_RID_MAX);
    size_t p = strcspn(r->id, "-_") + 1; // the prefix, through its separator
    GL_ASSERT(p + len < sizeof r->id);
    memcpy(r->id + p, rid, len);
    r->id[p + len] = 0;
    return GL_OK;
}

gl_status gl_api_parse_json(const struct gl_api_config *c, enum gl_api_endpoint ep, json_t *b,
                            struct gl_api_req **out, struct gl_api_error *e)
{
    *out = NULL;
    struct gl_api_req *r = NULL;
    struct constraint k = {.ws_bounded = c->so.ws_bounded,
                           .ws_pattern = -1,
                           .open_objects = c->so.open_objects,
                           .lenient = c->so.lenient};
    gl_status st;
    if (!json_is_object(b)) {
        st = FAIL("", "request body: expected a JSON object");
        goto done;
    }
    r = gl_calloc(1, sizeof *r);
    if (!r) {
        st = NOMEM();
        goto done;
    }
    r->ep = ep;
    if ((st = check_fields(c, b, ep, r, e)) != GL_OK)
        goto done;
    json_t *model = json_object_get(b, "model");
    if (model && !json_is_null(model) &&
        (!json_is_string(model) || strcmp(json_string_value(model), c->model_name) != 0)) {
        st = gl_api_fail(e, 404, "model", "The model `%.100s` does not exist.",
                         json_is_string(model) ? json_string_value(model) : "?");
        goto done;
    }
    r->sp = c->defaults;
    r->sp.logprobs = -1;
    r->include_reasoning = 1;
    r->parallel_tool_calls = 1;
    r->reasoning_budget = -1;
    r->created = (int64_t)time(NULL);
    gl_api_new_id(r->id, sizeof r->id, ep == GL_API_CHAT ? "chatcmpl-" : "cmpl-");
    if ((st = get_bool(b, "stream", &r->stream, e)) != GL_OK ||
        (st = parse_stream_options(c, b, r, e)) != GL_OK || (st = check_priority(b, e)) != GL_OK ||
        (st = parse_prompt_logprobs(c, b, r, e)) != GL_OK)
        goto done;
    if ((st = get_bool(b, "return_token_ids", &r->return_token_ids, e)) != GL_OK)
        goto done;
    json_t *user = json_object_get(b, "user");
    json_t *rid = json_object_get(b, "request_id");
    if ((user && !json_is_null(user) && !json_is_string(user)) ||
        (rid && !json_is_null(rid) && !json_is_string(rid))) {
        st = FAIL(user && !json_is_string(user) ? "user" : "request_id", "expected a string");
        goto done;
    }
    if (json_is_string(rid) &&
        (st = gl_api_set_request_id(r, json_string_value(rid), json_string_length(rid),
                                    "request_id", e)) != GL_OK)
        goto done;
    if ((st = parse_cache_salt(b, r, e)) != GL_OK)
        goto done;
    if ((st = parse_sampling(c, b, r, e)) != GL_OK || (st = parse_constraint(b, &k, e)) != GL_OK)
        goto done;
    st = ep == GL_API_CHAT ? parse_chat(c, b, r, &k, e) : parse_completion(c, b, r, &k, e);
    if (st == GL_OK)
        st = truncate_prompts(c, b, r, e);
    if (st != GL_OK)
        goto done;
    // Context length checks with vLLM's wording.
    for (int32_t i = 0; i < r->n_prompts; i++) {
        int32_t n = r->prompts[i].n;
        if (n >= c->max_model_len) {
            st = FAIL(ep == GL_API_CHAT ? "messages" : "prompt",
                      "This model's maximum context length is %d tokens. However, your request "
                      "has %d input tokens. Please reduce the length of the input messages.",
                      c->max_model_len, n);
            goto done;
        }
        if (!r->max_tokens_set && r->sp.max_tokens > c->max_model_len - n)
            r->sp.max_tokens = c->max_model_len - n;
        if (r->sp.max_tokens > 0 && (int64_t)n + r->sp.max_tokens > c->max_model_len) {
            st = FAIL("max_tokens",
                      "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's "
                      "maximum context length is %d tokens and your request has %d input tokens "
                      "(%d > %d - %d).",
                      r->sp.max_tokens, c->max_model_len, n, r->sp.max_tokens, c->max_model_len, n);
            goto done;
        }
    }
    if (r->turn && r->reasoning_budget < 0) {
        // Default budget (api.h): half of the effective max_tokens.
        int32_t room = r->sp.max_tokens > 0 ? r->sp.max_tokens : c->max_model_len - r->prompts[0].n;
        r->reasoning_budget = room / 2;
    }
    if ((st = check_answer_room(c, r, &k, e)) != GL_OK)
        goto done;
    struct gl_err err = {0};
    if (gl_sample_params_check(&r->sp, gl_tokenizer_n_vocab(c->tok), &err) != GL_OK) {
        st = FAIL("", "%s", err.msg);
        goto done;
    }
done:
    gl_free(k.src);
    if (st != GL_OK) {
        gl_api_req_free(c, r);
        return st;
    }
    *out = r;
    return GL_OK;
}

void gl_api_req_free(const struct gl_api_config *c, struct gl_api_req *r)
{
    if (!r)
        return;
    for (int32_t i = 0; r->prompts && i < r->n_prompts; i++) {
        gl_free(r->prompts[i].ids);
        gl_free(r->prompts[i].text);
    }
    gl_free(r->prompts);
    gl_free(r->echo_text);
    free_parts(r);
    gl_media_prompt_free(&r->media);
    for (int i = 0; i < GL_SAMPLE_MAX_STOP; i++)
        gl_free(r->stops[i]);
    gl_free(r->bias);
    gl_free(r->stop_ids);
    gl_free(r->allowed_ids);
    gl_free(r->bad_ids);
    json_decref(r->resp_echo);
    if (r->grammar) {
        pthread_mutex_lock(c->grammar_lock);
        gl_grammar_unref(r->grammar);
        pthread_mutex_unlock(c->grammar_lock);
    }
    gl_free(r);
}

int32_t gl_api_req_n_prompts(const struct gl_api_req *r)
{
    return r->n_prompts;
}

const struct gl_sample_params *gl_api_req_sp(const struct gl_api_req *r)
{
    return &r->sp;
}

const char *gl_api_req_id(const struct gl_api_req *r)
{
    return r->id;
}

const char *gl_api_req_ignored(const struct gl_api_req *r)
{
    return r->ignored;
}

int gl_api_req_stream(const struct gl_api_req *r)
{
    return r->stream;
}

const struct gl_grammar *gl_api_req_grammar(const struct gl_api_req *r)
{
    return r->grammar;
}

int64_t gl_api_req_grammar_us(const struct gl_api_req *r)
{
    return r->grammar_us;
}

void gl_api_req_engine_request(const struct gl_api_req *r, int32_t i, struct gl_request *out)
{
    GL_ASSERT(i >= 0 && i < r->n_prompts);
    *out = (struct gl_request){.prompt = r->prompts[i].ids,
                               .n_prompt = r->prompts[i].n,
                               .media = i == 0 ? r->media.media : NULL,
                               .n_media = i == 0 ? r->media.n_media : 0,
                               .sp = r->sp,
                               .cache_salt = r->cache_salt};
}

void gl_api_req_media_moved(struct gl_api_req *r)
{
    gl_media_prompt_moved(&r->media);
}
