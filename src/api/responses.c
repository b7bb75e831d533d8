// SPDX-License-Identifier: MIT
// api/responses: the OpenAI Responses API (POST /v1/responses), stateless, over the chat path.
// A Responses body is translated into the chat body it means (instructions and input items ->
// messages, text.format -> response_format, flat function tools -> chat tools, reasoning.effort
// -> reasoning_effort, max_output_tokens -> max_completion_tokens), and that body goes through
// the chat parser: the same whole-turn grammar, tools, reasoning and structured outputs. The
// finished turn (the chat accumulator) becomes output items: a reasoning item (the analysis
// channel, as reasoning_text content), a message with output_text, function_call items. Nothing
// is stored, so the fields that name stored state are refused (k_fields).
#include "api/api.h"
#include "api/api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(param, ...) gl_api_fail(e, 400, param, __VA_ARGS__)
#define NOMEM()          gl_api_fail(e, 500, NULL, "out of memory")

// ---- the request's top-level fields ----

enum rs_kind {
    RS_COPY,      // copied into the chat body (under `to` when set), whose parser checks it
    RS_OWN,       // translated below
    RS_STATELESS, // names stored state: refused unless null or false
    // Concerns only a hosted platform: handed to the chat body unchanged, so whatever the chat
    // endpoint does with such a field (today: a 400 naming it) applies here too.
    RS_HOSTED,
};
static const struct rs_field {
    const char *name;
    enum rs_kind kind;
    const char *to;
} k_fields[] = {
    {"model", RS_COPY, NULL},
    {"input", RS_OWN, NULL},
    {"instructions", RS_OWN, NULL},
    {"text", RS_OWN, NULL},
    {"tools", RS_OWN, NULL},
    {"tool_choice", RS_OWN, NULL},
    {"reasoning", RS_OWN, NULL},
    {"store", RS_OWN, NULL}, // false is what we do anyway
    {"include", RS_OWN, NULL},
    {"truncation", RS_OWN, NULL},
    {"stream_options", RS_OWN, NULL},
    {"max_output_tokens", RS_COPY, "max_completion_tokens"},
    {"parallel_tool_calls", RS_COPY, NULL},
    {"temperature", RS_COPY, NULL},
    {"top_p", RS_COPY, NULL},
    {"stream", RS_COPY, NULL},
    {"user", RS_COPY, NULL},
    // vLLM's sampling extras, as on chat
    {"seed", RS_COPY, NULL},
    {"top_k", RS_COPY, NULL},
    {"min_p", RS_COPY, NULL},
    {"presence_penalty", RS_COPY, NULL},
    {"frequency_penalty", RS_COPY, NULL},
    {"repetition_penalty", RS_COPY, NULL},
    {"request_id", RS_COPY, NULL},
    {"cache_salt", RS_COPY, NULL},
    {"thinking_token_budget", RS_COPY, NULL},
    {"logit_bias", RS_COPY, NULL},
    {"previous_response_id", RS_STATELESS, NULL},
    {"conversation", RS_STATELESS, NULL},
    {"background", RS_STATELESS, NULL},
    {"prompt", RS_STATELESS, NULL}, // a prompt template stored on the platform
    {"metadata", RS_HOSTED, NULL},
    {"service_tier", RS_HOSTED, NULL},
    {"safety_identifier", RS_HOSTED, NULL},
    {"prompt_cache_key", RS_HOSTED, NULL},
    {"prompt_cache_retention", RS_HOSTED, NULL},
};
#define N_FIELDS (sizeof k_fields / sizeof k_fields[0])

static gl_status stateless(const char *field, struct gl_api_error *e)
{
    return FAIL(field,
                "%s: glint's /v1/responses is stateless: it stores no responses, conversations or "
                "prompts, so each request carries its whole input (send the earlier output items "
                "back in input) and store must be false",
                field);
}

// Sets k on o (taking v); 0 when out of memory.
static int jset(json_t *o, const char *k, json_t *v)
{
    return v && json_object_set_new(o, k, v) == 0;
}

static int is_set(json_t *v)
{
    return v && !json_is_null(v);
}

// ---- input items -> chat messages ----

// One content part of a message item as a chat part.
static gl_status input_part(json_t *p, size_t i, size_t j, json_t **out, struct gl_api_error *e)
{
    char f[96];
    snprintf(f, sizeof f, "input[%zu].content[%zu]", i, j);
    const char *ty = json_string_value(json_object_get(p, "type"));
    if (!json_is_object(p) || !ty)
        return FAIL(f, "%s: expected a content part object with a type", f);
    if (!strcmp(ty, "input_text") || !strcmp(ty, "output_text")) {
        json_t *t = json_object_get(p, "text");
        if (!json_is_string(t))
            return FAIL(f, "%s.text: expected a string", f);
        *out = json_pack("{s:s,s:O}", "type", "text", "text", t);
    } else if (!strcmp(ty, "input_image")) {
        json_t *u = json_object_get(p, "image_url");
        if (is_set(json_object_get(p, "file_id")))
            return FAIL(f,
                        "%s.file_id: uploaded files are not available (the server is "
                        "stateless): give image_url",
                        f);
        if (!json_is_string(u))
            return FAIL(f, "%s.image_url: expected a URL string", f);
        *out = json_pack("{s:s,s:{s:O}}", "type", "image_url", "image_url", "url", u);
    } else {
        snprintf(f + strlen(f), sizeof f - strlen(f), ".type");
        return FAIL(f, "%s: '%.40s' is not supported (input_text, output_text, input_image)", f,
                    ty);
    }
    return *out ? GL_OK : NOMEM();
}

// A message item ({type: "message"} or the easy {role, content}) as a chat message.
static gl_status input_message(json_t *it, size_t i, json_t **out, struct gl_api_error *e)
{
    char f[64];
    snprintf(f, sizeof f, "input[%zu].role", i);
    const char *role = json_string_value(json_object_get(it, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") &&
                  strcmp(role, "assistant")))
        return FAIL(f, "%s: expected user, system, developer or assistant", f);
    // The template knows no developer role (it would drop the message): a developer message is
    // an instruction, which the template's system message carries.
    json_t *m = json_pack("{s:s}", "role", strcmp(role, "developer") ? role : "system");
    json_t *c = json_object_get(it, "content");
    snprintf(f, sizeof f, "input[%zu].content", i);
    gl_status st = m ? GL_OK : NOMEM();
    if (st == GL_OK && json_is_string(c)) {
        st = jset(m, "content", json_copy(c)) ? GL_OK : NOMEM();
    } else if (st == GL_OK && json_is_array(c)) {
        json_t *parts = json_array();
        st = jset(m, "content", parts) ? GL_OK : NOMEM();
        for (size_t j = 0; st == GL_OK && j < json_array_size(c); j++) {
            json_t *p = NULL;
            st = input_part(json_array_get(c, j), i, j, &p, e);
            if (st == GL_OK && json_array_append_new(parts, p))
                st = NOMEM();
        }
    } else if (st == GL_OK) {
        st = FAIL(f, "%s: expected a string or a list of content parts", f);
    }
    if (st != GL_OK) {
        json_decref(m);
        return st;
    }
    *out = m;
    return GL_OK;
}

// The string field k of item i, required.
static gl_status item_str(json_t *it, size_t i, const char *k, json_t **out, struct gl_api_error *e)
{
    char f[64];
    snprintf(f, sizeof f, "input[%zu].%s", i, k);
    *out = json_object_get(it, k);
    return json_is_string(*out) ? GL_OK : FAIL(f, "%s: expected a string", f);
}

// A function_call item as a chat tool call ({id, type, function: {name, arguments}}).
static gl_status input_call(json_t *it, size_t i, json_t **out, struct gl_api_error *e)
{
    json_t *id, *name, *args;
    gl_status st;
    if ((st = item_str(it, i, "call_id", &id, e)) != GL_OK ||
        (st = item_str(it, i, "name", &name, e)) != GL_OK ||
        (st = item_str(it, i, "arguments", &args, e)) != GL_OK)
        return st;
    json_t *v = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
    int obj = json_is_object(v);
    json_decref(v);
    if (!obj) {
        char f[64];
        snprintf(f, sizeof f, "input[%zu].arguments", i);
        return FAIL(f, "%s: expected the text of a JSON object", f);
    }
    *out = json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name",
                     name, "arguments", args);
    return *out ? GL_OK : NOMEM();
}

// Text of a list of parts of the given type (joined with newlines), or of a string.
static gl_status join_text(json_t *v, const char *type, const char *f, json_t **out,
                           struct gl_api_error *e)
{
    if (json_is_string(v)) {
        *out = json_copy(v);
        return *out ? GL_OK : NOMEM();
    }
    if (!json_is_array(v))
        return FAIL(f, "%s: expected a string or a list of %s parts", f, type);
    size_t total = 0;
    for (size_t j = 0; j < json_array_size(v); j++) {
        json_t *p = json_array_get(v, j);
        const char *ty = json_string_value(json_object_get(p, "type"));
        json_t *t = json_object_get(p, "text");
        if (!ty || strcmp(ty, type) || !json_is_string(t))
            return FAIL(f, "%s[%zu]: expected {type: %s, text: string}", f, j, type);
        total += json_string_length(t) + 1;
    }
    char *buf = gl_malloc(total + 1);
    if (!buf)
        return NOMEM();
    size_t n = 0;
    for (size_t j = 0; j < json_array_size(v); j++) {
        json_t *t = json_object_get(json_array_get(v, j), "text");
        if (j)
            buf[n++] = '\n';
        memcpy(buf + n, json_string_value(t), json_string_length(t));
        n += json_string_length(t);
    }
    *out = json_stringn(buf, n);
    gl_free(buf);
    return *out ? GL_OK : NOMEM();
}

// A reasoning item's text: its reasoning_text content, else its summary.
static gl_status input_reasoning(json_t *it, size_t i, json_t **out, struct gl_api_error *e)
{
    char f[64];
    snprintf(f, sizeof f, "input[%zu].encrypted_content", i);
    if (is_set(json_object_get(it, "encrypted_content")))
        return FAIL(f,
                    "%s: glint encrypts no reasoning (its reasoning items carry their text "
                    "in content): send content",
                    f);
    json_t *c = json_object_get(it, "content");
    if (is_set(c) && json_array_size(c) > 0) {
        snprintf(f, sizeof f, "input[%zu].content", i);
        return join_text(c, "reasoning_text", f, out, e);
    }
    snprintf(f, sizeof f, "input[%zu].summary", i);
    return join_text(json_object_get(it, "summary"), "summary_text", f, out, e);
}

// A function_call_output item as a chat tool message.
static gl_status input_output(json_t *it, size_t i, json_t **out, struct gl_api_error *e)
{
    json_t *id, *text = NULL;
    char f[64];
    snprintf(f, sizeof f, "input[%zu].output", i);
    gl_status st = item_str(it, i, "call_id", &id, e);
    if (st == GL_OK)
        st = join_text(json_object_get(it, "output"), "input_text", f, &text, e);
    if (st != GL_OK)
        return st;
    *out = json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", text);
    return *out ? GL_OK : NOMEM();
}

// Builds the chat messages from instructions and input. Consecutive function_call items become
// one assistant message with several tool_calls; a reasoning item becomes the reasoning of the
// assistant message (or calls) that follows it, as the chat template renders them.
struct conv {
    json_t *msgs;
    json_t *origin;    // per message, the Responses field it came from ("input[3]"), for errors
    json_t *calls;     // tool_calls of the assistant message being extended (borrowed), or NULL
    json_t *reasoning; // a reasoning item's text waiting for its assistant output (owned)
    size_t reasoning_at;
};

// Appends message m (taken), which came from the field named origin.
static gl_status conv_add(struct conv *v, json_t *m, const char *origin, struct gl_api_error *e)
{
    if (!m || json_array_append_new(v->msgs, m))
        return NOMEM();
    return json_array_append_new(v->origin, json_string(origin)) ? NOMEM() : GL_OK;
}

static gl_status conv_take_reasoning(struct conv *v, json_t *m, struct gl_api_error *e)
{
    if (!v->reasoning)
        return GL_OK;
    int ok = jset(m, "reasoning_content", v->reasoning);
    v->reasoning = NULL;
    return ok ? GL_OK : NOMEM();
}

static gl_status conv_item(struct conv *v, json_t *it, size_t i, struct gl_api_error *e)
{
    char f[64];
    snprintf(f, sizeof f, "input[%zu]", i);
    if (!json_is_object(it))
        return FAIL(f, "%s: expected an input item object", f);
    const char *ty = json_string_value(json_object_get(it, "type"));
    if (!ty && json_object_get(it, "role"))
        ty = "message"; // the easy {role, content} form
    snprintf(f, sizeof f, "input[%zu].type", i);
    if (!ty)
        return FAIL(f, "%s: expected a string", f);
    json_t *m = NULL, *x = NULL;
    gl_status st;
    char at[32];
    snprintf(at, sizeof at, "input[%zu]", i);
    if (!strcmp(ty, "reasoning")) {
        v->calls = NULL;
        if ((st = input_reasoning(it, i, &x, e)) != GL_OK)
            return st;
        json_decref(v->reasoning); // two in a row: the later one (a new turn's)
        v->reasoning = x;
        v->reasoning_at = i;
        return GL_OK;
    }
    if (!strcmp(ty, "function_call")) {
        if ((st = input_call(it, i, &x, e)) != GL_OK)
            return st;
        if (!v->calls) {
            m = json_pack("{s:s,s:n,s:[]}", "role", "assistant", "content", "tool_calls");
            st = m ? conv_take_reasoning(v, m, e) : NOMEM();
            if (st != GL_OK || (st = conv_add(v, json_incref(m), at, e)) != GL_OK) {
                json_decref(m);
                json_decref(x);
                return st;
            }
            v->calls = json_object_get(m, "tool_calls");
            json_decref(m); // msgs holds it
        }
        return json_array_append_new(v->calls, x) ? NOMEM() : GL_OK;
    }
    v->calls = NULL;
    if (!strcmp(ty, "message"))
        st = input_message(it, i, &m, e);
    else if (!strcmp(ty, "function_call_output"))
        st = input_output(it, i, &m, e);
    else if (!strcmp(ty, "item_reference"))
        return stateless(f, e);
    else
        return FAIL(f,
                    "%s: '%.40s' is not supported (message, function_call, "
                    "function_call_output, reasoning)",
                    f, ty);
    if (st != GL_OK)
        return st;
    const char *role = json_string_value(json_object_get(m, "role"));
    if (v->reasoning && strcmp(role, "assistant")) {
        json_decref(m);
        snprintf(f, sizeof f, "input[%zu]", v->reasoning_at);
        return FAIL(f,
                    "%s: a reasoning item must be followed by the assistant message or "
                    "function_call it led to",
                    f);
    }
    if ((st = conv_take_reasoning(v, m, e)) != GL_OK) {
        json_decref(m);
        return st;
    }
    return conv_add(v, m, at, e);
}

static gl_status convert_input(json_t *b, json_t *chat, json_t *origin, struct gl_api_error *e)
{
    struct conv v = {.msgs = json_array(), .origin = origin};
    if (!v.msgs || json_object_set_new(chat, "messages", v.msgs))
        return NOMEM();
    json_t *ins = json_object_get(b, "instructions");
    if (is_set(ins)) {
        if (!json_is_string(ins))
            return FAIL("instructions", "instructions: expected a string");
        gl_status st = conv_add(&v, json_pack("{s:s,s:O}", "role", "system", "content", ins),
                                "instructions", e);
        if (st != GL_OK)
            return st;
    }
    json_t *in = json_object_get(b, "input");
    gl_status st = GL_OK;
    if (json_is_string(in)) {
        st = conv_add(&v, json_pack("{s:s,s:O}", "role", "user", "content", in), "input", e);
    } else if (json_is_array(in) && json_array_size(in) > 0) {
        for (size_t i = 0; st == GL_OK && i < json_array_size(in); i++)
            st = conv_item(&v, json_array_get(in, i), i, e);
        if (st == GL_OK && v.reasoning) {
            char f[64];
            snprintf(f, sizeof f, "input[%zu]", v.reasoning_at);
            st = FAIL(f, "%s: a reasoning item must be followed by the assistant output it led to",
                      f);
        }
    } else {
        st = FAIL("input", "input: expected a string or a non-empty list of input items");
    }
    json_decref(v.reasoning);
    return st;
}

// ---- text, tools, tool_choice, reasoning ----

static gl_status convert_text(json_t *b, json_t *chat, struct gl_api_error *e)
{
    json_t *t = json_object_get(b, "text");
    if (!is_set(t))
        return GL_OK;
    if (!json_is_object(t))
        return FAIL("text", "text: expected an object");
    if (is_set(json_object_get(t, "verbosity")))
        return FAIL("text.verbosity", "text.verbosity: not supported (the model has no verbosity "
                                      "control)");
    json_t *f = json_object_get(t, "format");
    if (!is_set(f))
        return GL_OK;
    const char *ty = json_string_value(json_object_get(f, "type"));
    if (!json_is_object(f) || !ty)
        return FAIL("text.format", "text.format: expected an object with a type");
    json_t *rf = NULL;
    if (!strcmp(ty, "text")) {
        return GL_OK;
    } else if (!strcmp(ty, "json_object")) {
        rf = json_pack("{s:s}", "type", "json_object");
    } else if (!strcmp(ty, "json_schema")) {
        json_t *name = json_object_get(f, "name"), *sch = json_object_get(f, "schema");
        json_t *strict = json_object_get(f, "strict");
        if (!json_is_string(name) || json_string_length(name) == 0)
            return FAIL("text.format.name", "text.format.name: expected a non-empty string");
        if (!json_is_object(sch) && !json_is_boolean(sch))
            return FAIL("text.format.schema", "text.format.schema: expected a JSON Schema object");
        if (is_set(strict) && !json_is_boolean(strict))
            return FAIL("text.format.strict", "text.format.strict: expected true or false");
        rf = json_pack("{s:s,s:{s:O,s:O}}", "type", "json_schema", "json_schema", "name", name,
                       "schema", sch);
    } else {
        return FAIL("text.format.type",
                    "text.format.type: '%.40s' is not supported (text, json_object, json_schema)",
                    ty);
    }
    return jset(chat, "response_format", rf) ? GL_OK : NOMEM();
}

static gl_status convert_tools(json_t *b, json_t *chat, struct gl_api_error *e)
{
    json_t *t = json_object_get(b, "tools");
    if (!is_set(t))
        return GL_OK;
    if (!json_is_array(t))
        return FAIL("tools", "tools: expected a list of tools");
    if (json_array_size(t) == 0)
        return GL_OK; // the SDK's default: no tools
    json_t *out = json_array();
    if (!jset(chat, "tools", out))
        return NOMEM();
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *x = json_array_get(t, i);
        const char *ty = json_string_value(json_object_get(x, "type"));
        char f[64];
        snprintf(f, sizeof f, "tools[%zu].type", i);
        if (!json_is_object(x) || !ty)
            return FAIL(f, "%s: expected a tool object with a type", f);
        if (strcmp(ty, "function"))
            return FAIL(f, "%s: '%.40s' is a hosted tool; glint runs function tools only", f, ty);
        snprintf(f, sizeof f, "tools[%zu].name", i);
        if (!json_is_string(json_object_get(x, "name")))
            return FAIL(f, "%s: expected a string", f);
        // Only the fields given, so the chat path treats a missing description or parameters
        // as it does on /v1/chat/completions.
        json_t *fn = json_object();
        static const char *keys[] = {"name", "description", "parameters", "strict"};
        for (size_t k = 0; fn && k < sizeof keys / sizeof keys[0]; k++)
            if (json_object_get(x, keys[k]) &&
                json_object_set(fn, keys[k], json_object_get(x, keys[k])))
                json_decref(fn), fn = NULL;
        if (json_array_append_new(out, json_pack("{s:s,s:o}", "type", "function", "function", fn)))
            return NOMEM();
    }
    return GL_OK;
}

static gl_status convert_tool_choice(json_t *b, json_t *chat, struct gl_api_error *e)
{
    json_t *tc = json_object_get(b, "tool_choice");
    if (!is_set(tc))
        return GL_OK;
    if (json_is_string(tc))
        return jset(chat, "tool_choice", json_copy(tc)) ? GL_OK : NOMEM();
    const char *ty = json_string_value(json_object_get(tc, "type"));
    json_t *name = json_object_get(tc, "name");
    if (!json_is_object(tc) || !ty || strcmp(ty, "function") || !json_is_string(name))
        return FAIL("tool_choice", "tool_choice: expected none, auto, required or {type: "
                                   "function, name} (hosted tools and allowed_tools are not "
                                   "supported)");
    return jset(chat, "tool_choice",
                json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name))
               ? GL_OK
               : NOMEM();
}

// reasoning {effort, summary}: effort is chat's reasoning_effort. Summaries are not written:
// a reasoning item carries the whole reasoning as reasoning_text content, summary [].
static gl_status convert_reasoning(json_t *b, json_t *chat, struct gl_api_error *e)
{
    json_t *r = json_object_get(b, "reasoning");
    if (!is_set(r))
        return GL_OK;
    if (!json_is_object(r))
        return FAIL("reasoning", "reasoning: expected an object");
    const char *key;
    json_t *v;
    json_object_foreach(r, key, v)
    {
        if (strcmp(key, "effort") && strcmp(key, "summary") && strcmp(key, "generate_summary"))
            return FAIL("reasoning", "reasoning.%.40s: not supported (effort, summary)", key);
        if (is_set(v) && !json_is_string(v))
            return FAIL("reasoning", "reasoning.%s: expected a string", key);
    }
    json_t *eff = json_object_get(r, "effort");
    return !is_set(eff) || jset(chat, "reasoning_effort", json_copy(eff)) ? GL_OK : NOMEM();
}

// store, include, truncation, stream_options: values that change nothing here are accepted.
static gl_status check_options(json_t *b, struct gl_api_error *e)
{
    json_t *v = json_object_get(b, "store");
    if (is_set(v) && !json_is_boolean(v))
        return FAIL("store", "store: expected true or false");
    if (json_is_true(v))
        return stateless("store", e);
    json_t *inc = json_object_get(b, "include");
    if (is_set(inc) && !json_is_array(inc))
        return FAIL("include", "include: expected a list of strings");
    for (size_t i = 0; is_set(inc) && i < json_array_size(inc); i++) {
        const char *s = json_string_value(json_array_get(inc, i));
        // Reasoning is returned in clear: there is no encrypted form to add.
        if (!s || strcmp(s, "reasoning.encrypted_content"))
            return FAIL("include",
                        "include[%zu]: '%.60s' is not supported "
                        "(reasoning.encrypted_content is accepted; reasoning items "
                        "carry their text)",
                        i, s ? s : "?");
    }
    const char *tr = json_string_value(json_object_get(b, "truncation"));
    if (is_set(json_object_get(b, "truncation")) && (!tr || strcmp(tr, "disabled")))
        return FAIL("truncation", "truncation: only 'disabled' is supported (the input is never "
                                  "cut; one over the context is a 400)");
    json_t *so = json_object_get(b, "stream_options");
    if (is_set(so) && !json_is_object(so))
        return FAIL("stream_options", "stream_options: expected an object");
    return GL_OK;
}

// ---- the whole request ----

// The chat body of Responses body b, and the fields the response object repeats.
static gl_status translate(json_t *b, json_t *chat, json_t *origin, struct gl_api_error *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v)
    {
        size_t i = 0;
        while (i < N_FIELDS && strcmp(k_fields[i].name, key))
            i++;
        if (i == N_FIELDS)
            return FAIL(key, "%.60s: this field is not supported by glint's /v1/responses endpoint",
                        key);
        const struct rs_field *f = &k_fields[i];
        if (f->kind == RS_STATELESS && is_set(v) && !json_is_false(v))
            return stateless(key, e);
        if ((f->kind == RS_COPY || f->kind == RS_HOSTED) &&
            json_object_set(chat, f->to ? f->to : key, v))
            return NOMEM();
    }
    gl_status st;
    if ((st = check_options(b, e)) != GL_OK || (st = convert_input(b, chat, origin, e)) != GL_OK ||
        (st = convert_text(b, chat, e)) != GL_OK || (st = convert_tools(b, chat, e)) != GL_OK ||
        (st = convert_tool_choice(b, chat, e)) != GL_OK ||
        (st = convert_reasoning(b, chat, e)) != GL_OK)
        return st;
    return GL_OK;
}

// buf (cap bytes) with its first n bytes replaced by to.
static void replace_head(char *buf, size_t cap, size_t n, const char *to)
{
    char rest[640];
    snprintf(rest, sizeof rest, "%s", buf + n);
    snprintf(buf, cap, "%s%s", to, rest);
}

// The length of a leading "messages[N]" or "messages" in s, the Responses field it stands for
// in *to (origin[N]: where message N came from; "input" for messages as a whole); 0 if none.
static size_t messages_head(const char *s, json_t *origin, const char **to)
{
    static const char k[] = "messages";
    if (strncmp(s, k, sizeof k - 1))
        return 0;
    *to = "input";
    const char *p = s + sizeof k - 1;
    char *end = NULL;
    unsigned long i = *p == '[' ? strtoul(p + 1, &end, 10) : 0;
    if (!end || *end != ']' || !json_string_value(json_array_get(origin, i)))
        return sizeof k - 1;
    *to = json_string_value(json_array_get(origin, i));
    return (size_t)(end + 1 - s);
}

// A chat-path error names the chat field; say the Responses one (origin: messages_head).
static void rename_error(struct gl_api_error *e, json_t *origin)
{
    static const char *map[][2] = {
        {"response_format.json_schema.schema", "text.format.schema"},
        {"response_format", "text.format"},
        {"max_completion_tokens", "max_output_tokens"},
        {"max_tokens", "max_output_tokens"},
        {"reasoning_effort", "reasoning.effort"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i][0]);
        if (strncmp(e->param, map[i][0], n) == 0)
            replace_head(e->param, sizeof e->param, n, map[i][1]);
        if (strncmp(e->msg, map[i][0], n) == 0)
            replace_head(e->msg, sizeof e->msg, n, map[i][1]);
    }
    const char *to = NULL;
    size_t n = messages_head(e->msg, origin, &to);
    if (n)
        replace_head(e->msg, sizeof e->msg, n, to);
    // The chat parser's param for message errors is "messages": the message names the item.
    if ((n = messages_head(e->param, origin, &to)) != 0) {
        const char *m = e->msg;
        size_t k = strcspn(m, ": ");
        if (!strcmp(e->param, "messages") && strncmp(m, "input", 5) == 0 && k < sizeof e->param)
            snprintf(e->param, sizeof e->param, "%.*s", (int)k, m);
        else
            replace_head(e->param, sizeof e->param, n, to);
    }
    static const char *inside[][2] = {
        {"/v1/chat/completions", "/v1/responses"},
        {"'max_tokens' or 'max_completion_tokens'", "'max_output_tokens'"},
        {"response_format.json_schema.schema", "text.format.schema"},
        {"response_format", "text.format"},
    };
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        char *at = strstr(e->msg, inside[i][0]);
        if (at)
            replace_head(at, sizeof e->msg - (size_t)(at - e->msg), strlen(inside[i][0]),
                         inside[i][1]);
    }
}

// The request fields a response object repeats (the defaults when absent).
static json_t *echo_fields(json_t *b)
{
    json_t *o = json_object();
    static const char *keys[] = {"instructions", "max_output_tokens", "tools", "tool_choice",
                                 "text",         "reasoning"};
    for (size_t i = 0; o && i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(b, keys[i]);
        if (json_object_set(o, keys[i], v ? v : json_null()))
            json_decref(o), o = NULL;
    }
    if (o && !json_is_array(json_object_get(o, "tools")))
        json_object_set_new(o, "tools", json_array());
    if (o && json_is_null(json_object_get(o, "tool_choice")))
        json_object_set_new(o, "tool_choice", json_string("auto"));
    if (o && json_is_null(json_object_get(o, "text")))
        json_object_set_new(o, "text", json_pack("{s:{s:s}}", "format", "type", "text"));
    if (o && json_is_null(json_object_get(o, "reasoning")))
        json_object_set_new(o, "reasoning", json_pack("{s:n,s:n}", "effort", "summary"));
    json_t *md = json_object_get(b, "metadata");
    if (o &&
        json_object_set_new(o, "metadata", json_is_object(md) ? json_incref(md) : json_object()))
        json_decref(o), o = NULL;
    return o;
}

gl_status gl_api_responses_parse(const struct gl_api_config *c, json_t *b, struct gl_api_req **out,
                                 struct gl_api_error *e)
{
    *out = NULL;
    if (!json_is_object(b))
        return FAIL("", "request body: expected a JSON object");
    json_t *chat = json_object(), *origin = json_array();
    gl_status st = chat && origin ? translate(b, chat, origin, e) : NOMEM();
    if (st == GL_OK) {
        st = gl_api_parse_json(c, GL_API_CHAT, chat, out, e);
        if (st != GL_OK)
            rename_error(e, origin);
    }
    json_decref(chat);
    json_decref(origin);
    if (st != GL_OK)
        return st;
    struct gl_api_req *r = *out;
    r->responses = 1;
    gl_api_new_id(r->id, sizeof r->id, "resp_");
    if (!(r->resp_echo = echo_fields(b))) {
        gl_api_req_free(c, r);
        *out = NULL;
        return NOMEM();
    }
    return GL_OK;
}

// ---- output items ----

// Item ids derive from the response id, so a streamed item and the final object agree.
static json_t *item_id(const struct gl_api_req *r, const char *prefix, int k)
{
    const char *hex = strchr(r->id, '_');
    char buf[96];
    if (k >= 0)
        snprintf(buf, sizeof buf, "%s%s_%d", prefix, hex ? hex + 1 : r->id, k);
    else
        snprintf(buf, sizeof buf, "%s%s", prefix, hex ? hex + 1 : r->id);
    return json_string(buf);
}

static json_t *str_of(const struct gl_buf *b)
{
    return gl_api_jstr(b->p ? b->p : "", b->len);
}

static json_t *output_text_part(const struct gl_atem_accum *a, int empty)
{
    return json_pack("{s:s,s:o,s:[],s:[]}", "type", "output_text", "text",
                     empty ? json_string("") : str_of(&a->content), "annotations", "logprobs");
}

static json_t *reasoning_part(const struct gl_atem_accum *a, int empty)
{
    return json_pack("{s:s,s:o}", "type", "reasoning_text", "text",
                     empty ? json_string("") : str_of(&a->reasoning));
}

// status: "in_progress" (the item as output_item.added shows it: no text yet), "completed",
// "incomplete".
static json_t *reasoning_item(const struct gl_api_req *r, const struct gl_atem_accum *a,
                              const char *status)
{
    int added = !strcmp(status, "in_progress");
    return json_pack(
        "{s:o,s:s,s:[],s:o,s:s}", "id", item_id(r, "rs_", -1), "type", "reasoning", "summary",
        "content", added ? json_array() : json_pack("[o]", reasoning_part(a, 0)), "status", status);
}

static json_t *message_item(const struct gl_api_req *r, const struct gl_atem_accum *a,
                            const char *status)
{
    int added = !strcmp(status, "in_progress");
    return json_pack("{s:o,s:s,s:s,s:s,s:o}", "id", item_id(r, "msg_", -1), "type", "message",
                     "role", "assistant", "status", status, "content",
                     added ? json_array() : json_pack("[o]", output_text_part(a, 0)));
}

static json_t *call_item(const struct gl_api_req *r, const struct gl_atem_accum *a, int k,
                         const char *status)
{
    const struct gl_atem_tool_call *tc = &a->calls[k];
    int added = !strcmp(status, "in_progress");
    return json_pack("{s:o,s:s,s:s,s:s,s:o,s:s}", "id", item_id(r, "fc_", k), "type",
                     "function_call", "call_id", tc->id ? tc->id : "", "name",
                     tc->name ? tc->name : "", "arguments",
                     added ? json_string("")
                           : gl_api_jstr(tc->arguments ? tc->arguments : "", tc->arguments_len),
                     "status", status);
}

static int cut(const struct gl_api_rs_result *res)
{
    return res->finish && !strcmp(res->finish, "length");
}

// The final status of each item kind.
static const char *reasoning_status(const struct gl_api_rs_result *res)
{
    const struct gl_atem_accum *a = res->acc;
    return cut(res) && !a->has_content && !a->n_calls ? "incomplete" : "completed";
}

static const char *message_status(const struct gl_api_rs_result *res)
{
    return cut(res) ? "incomplete" : "completed";
}

static const char *call_status(const struct gl_api_rs_result *res, int k)
{
    return res->acc->calls[k].truncated ? "incomplete" : "completed";
}

// A message is written when there is answer text, or when nothing else was.
static int has_message(const struct gl_atem_accum *a)
{
    return a->has_content || (!a->n_calls && !a->has_reasoning);
}

static json_t *output_items(const struct gl_api_req *r, const struct gl_api_rs_result *res)
{
    const struct gl_atem_accum *a = res->acc;
    json_t *out = json_array();
    int ok = out != NULL;
    if (ok && a->has_reasoning)
        ok = !json_array_append_new(out, reasoning_item(r, a, reasoning_status(res)));
    if (ok && has_message(a))
        ok = !json_array_append_new(out, message_item(r, a, message_status(res)));
    for (int k = 0; ok && k < a->n_calls; k++)
        ok = !json_array_append_new(out, call_item(r, a, k, call_status(res, k)));
    if (!ok)
        json_decref(out), out = NULL;
    return out;
}

static json_t *usage_json(const struct gl_api_rs_result *res)
{
    return json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", (json_int_t)res->input_tokens,
                     "input_tokens_details", "cached_tokens", (json_int_t)res->cached_tokens,
                     "output_tokens", (json_int_t)res->output_tokens, "output_tokens_details",
                     "reasoning_tokens", (json_int_t)res->reasoning_tokens, "total_tokens",
                     (json_int_t)(res->input_tokens + res->output_tokens));
}

// A sampling parameter as the response shows it: the float the engine uses, at float precision.
static json_t *param_num(json_t *given, float used)
{
    if (json_is_number(given))
        return json_copy(given);
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)used);
    return json_real(strtod(buf, NULL));
}

json_t *gl_api_rs_response(const struct gl_api_config *c, const struct gl_api_req *r,
                           const struct gl_api_rs_result *res, const struct gl_api_error *error,
                           int in_progress)
{
    const char *status = error         ? "failed"
                         : in_progress ? "in_progress"
                         : cut(res)    ? "incomplete"
                                       : "completed";
    json_t *o =
        json_pack("{s:s,s:s,s:I,s:s,s:b,s:s,s:b,s:n,s:s,s:b}", "id", r->id, "object", "response",
                  "created_at", (json_int_t)r->created, "status", status, "background", 0, "model",
                  c->model_name, "parallel_tool_calls", r->parallel_tool_calls,
                  "previous_response_id", "truncation", "disabled", "store", 0);
    int ok = o && json_object_update(o, r->resp_echo) == 0;
    json_t *echo = r->resp_echo;
    ok = ok &&
         jset(o, "temperature", param_num(json_object_get(echo, "temperature"), r->sp.temperature));
    ok = ok && jset(o, "top_p", param_num(json_object_get(echo, "top_p"), r->sp.top_p));
    ok = ok && jset(o, "error",
                    error ? json_pack("{s:s,s:s}", "code", "server_error", "message", error->msg)
                          : json_null());
    ok = ok &&
         jset(o, "incomplete_details",
              !in_progress && !error && cut(res) ? json_pack("{s:s}", "reason", "max_output_tokens")
                                                 : json_null());
    ok = ok && jset(o, "output", in_progress || error ? json_array() : output_items(r, res));
    ok = ok && jset(o, "usage", in_progress || error ? json_null() : usage_json(res));
    if (!ok)
        json_decref(o), o = NULL;
    return o;
}

// ---- streaming ----

static void emit(json_t *ev, json_t *o)
{
    if (o)
        json_array_append_new(ev, o);
}

static void open_item(struct gl_api_rs_stream *st, const struct gl_api_req *r,
                      const struct gl_atem_accum *a, int kind, int call, json_t *ev)
{
    st->open = kind;
    st->call = call;
    int32_t at = st->n_items++;
    json_t *item = kind == 1   ? reasoning_item(r, a, "in_progress")
                   : kind == 2 ? message_item(r, a, "in_progress")
                               : call_item(r, a, call, "in_progress");
    json_t *id = json_copy(json_object_get(item, "id"));
    emit(ev, json_pack("{s:s,s:i,s:o}", "type", "response.output_item.added", "output_index", at,
                       "item", item));
    if (kind != 3)
        emit(ev, json_pack("{s:s,s:O,s:i,s:i,s:o}", "type", "response.content_part.added",
                           "item_id", id, "output_index", at, "content_index", 0, "part",
                           kind == 1 ? reasoning_part(a, 1) : output_text_part(a, 1)));
    json_decref(id);
}

static void close_item(struct gl_api_rs_stream *st, const struct gl_api_req *r,
                       const struct gl_api_rs_result *res, json_t *ev)
{
    const struct gl_atem_accum *a = res->acc;
    int32_t at = st->n_items - 1;
    json_t *item = st->open == 1   ? reasoning_item(r, a, reasoning_status(res))
                   : st->open == 2 ? message_item(r, a, message_status(res))
                                   : call_item(r, a, st->call, call_status(res, st->call));
    json_t *id = json_copy(json_object_get(item, "id"));
    if (st->open == 3) {
        emit(ev, json_pack("{s:s,s:O,s:i,s:s,s:O}", "type", "response.function_call_arguments.done",
                           "item_id", id, "output_index", at, "name",
                           a->calls[st->call].name ? a->calls[st->call].name : "", "arguments",
                           json_object_get(item, "arguments")));
    } else {
        json_t *part = json_array_get(json_object_get(item, "content"), 0);
        json_t *done = json_pack(
            "{s:s,s:O,s:i,s:i,s:O}", "type",
            st->open == 1 ? "response.reasoning_text.done" : "response.output_text.done", "item_id",
            id, "output_index", at, "content_index", 0, "text", json_object_get(part, "text"));
        if (done && st->open == 2)
            json_object_set_new(done, "logprobs", json_array());
        emit(ev, done);
        emit(ev, json_pack("{s:s,s:O,s:i,s:i,s:O}", "type", "response.content_part.done", "item_id",
                           id, "output_index", at, "content_index", 0, "part", part));
    }
    emit(ev, json_pack("{s:s,s:i,s:o}", "type", "response.output_item.done", "output_index", at,
                       "item", item));
    json_decref(id);
    st->open = 0;
}

void gl_api_rs_deltas(struct gl_api_rs_stream *st, const struct gl_api_req *r,
                      const struct gl_atem_accum *acc, size_t from, size_t to, json_t *ev)
{
    // Items closed mid-stream are finished ones: their final status is "completed".
    struct gl_api_rs_result mid = {.acc = acc, .finish = "stop"};
    for (size_t i = from; i < to; i++) {
        const struct gl_atem_delta *d = &acc->deltas[i];
        int kind = d->kind == GL_ATEM_DELTA_REASONING ? 1
                   : d->kind == GL_ATEM_DELTA_CONTENT ? 2
                   : d->kind == GL_ATEM_DELTA_ROLE    ? 0
                                                      : 3;
        if (!kind)
            continue;
        if (st->open != kind ||
            (kind == 3 && (d->kind == GL_ATEM_DELTA_TOOL_HEAD || st->call != d->index))) {
            if (st->open)
                close_item(st, r, &mid, ev);
            open_item(st, r, acc, kind, kind == 3 ? d->index : 0, ev);
        }
        if (d->kind == GL_ATEM_DELTA_TOOL_HEAD)
            continue;
        json_t *id = item_id(r,
                             kind == 1   ? "rs_"
                             : kind == 2 ? "msg_"
                                         : "fc_",
                             kind == 3 ? d->index : -1);
        json_t *o = json_pack("{s:s,s:o,s:i,s:o}", "type",
                              kind == 1   ? "response.reasoning_text.delta"
                              : kind == 2 ? "response.output_text.delta"
                                          : "response.function_call_arguments.delta",
                              "item_id", id, "output_index", st->n_items - 1, "delta",
                              gl_api_jstr(d->text ? d->text : "", d->len));
        if (o && kind != 3)
            json_object_set_new(o, "content_index", json_integer(0));
        if (o && kind == 2)
            json_object_set_new(o, "logprobs", json_array());
        emit(ev, o);
    }
}

void gl_api_rs_finish(struct gl_api_rs_stream *st, const struct gl_api_req *r,
                      const struct gl_api_rs_result *res, json_t *final, json_t *ev)
{
    if (st->open)
        close_item(st, r, res, ev);
    if (st->n_items == 0 && has_message(res->acc)) { // the empty message the object holds
        open_item(st, r, res->acc, 2, 0, ev);
        close_item(st, r, res, ev);
    }
    emit(ev, json_pack("{s:s,s:o}", "type", cut(res) ? "response.incomplete" : "response.completed",
                       "response", final));
}
