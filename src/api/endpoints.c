// SPDX-License-Identifier: MIT
// api/endpoints: the entry points: gl_api_parse (chat and completions bodies go to request.c,
// Responses bodies to responses.c), /tokenize, /detokenize, /v1/models.
#include "api/api.h"
#include "api/api_int.h"
#include "chat/render.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

gl_status gl_api_parse(const struct gl_api_config *c, enum gl_api_endpoint ep, const char *body,
                       size_t len, struct gl_api_req **out, struct gl_api_error *e)
{
    *out = NULL;
    json_error_t je;
    json_t *b = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!b)
        return gl_api_fail(e, 400, "", "request body is not valid JSON: %s (line %d, column %d)",
                           je.text, je.line, je.column);
    gl_status st = ep == GL_API_RESPONSES ? gl_api_responses_parse(c, b, out, e)
                                          : gl_api_parse_json(c, ep, b, out, e);
    json_decref(b);
    return st;
}

json_t *gl_api_tokenize(const struct gl_api_config *c, const char *body, size_t len,
                        struct gl_api_error *e)
{
    json_error_t je;
    json_t *b = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(b)) {
        json_decref(b);
        gl_api_fail(e, 400, "", "request body: expected a JSON object");
        return NULL;
    }
    json_t *out = NULL;
    char *text = NULL;
    size_t text_len = 0;
    int add_special = -1, strs = 0;
    json_t *as = json_object_get(b, "add_special_tokens"),
           *rs = json_object_get(b, "return_token_strs");
    if ((as && !json_is_boolean(as)) || (rs && !json_is_boolean(rs) && !json_is_null(rs))) {
        gl_api_fail(e, 400, as && !json_is_boolean(as) ? "add_special_tokens" : "return_token_strs",
                    "expected true or false");
        goto done;
    }
    strs = json_is_true(rs);
    json_t *prompt = json_object_get(b, "prompt"), *msgs = json_object_get(b, "messages");
    if (json_is_string(prompt)) {
        // vLLM: add_special_tokens defaults to true for a prompt (BOS), false for messages.
        add_special = as ? json_is_true(as) : 1;
        text = gl_strdup(json_string_value(prompt));
        text_len = json_string_length(prompt);
    } else if (json_is_array(msgs)) {
        add_special = as ? json_is_true(as) : 0;
        struct gl_err err = {0};
        if (gl_chat_render(b, &text, &text_len, &err) != GL_OK) {
            gl_api_fail(e, err.code == GL_E_NOMEM ? 500 : 400, "messages", "%s", err.msg);
            goto done;
        }
    } else {
        gl_api_fail(e, 400, "prompt", "expected prompt (a string) or messages (a list)");
        goto done;
    }
    if (!text) {
        gl_api_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    // The generation requests' cap: a text that cannot fit the context is refused before it is
    // tokenized (10 MB would cost seconds of a connection thread).
    if (gl_api_check_text_len(c, text_len, json_is_array(msgs) ? "messages" : "prompt", e) != GL_OK)
        goto done;
    gl_token *ids = NULL;
    size_t n = 0;
    struct gl_err err = {0};
    if (gl_tokenizer_encode(c->tok, text, text_len, 1,
                            add_special && gl_tokenizer_add_bos(c->tok) && !json_is_array(msgs),
                            &ids, &n, &err) != GL_OK) {
        gl_api_fail(e, 400, "prompt", "%s", err.msg);
        goto done;
    }
    json_t *tokens = json_array(), *ts = strs ? json_array() : NULL;
    for (size_t i = 0; tokens && i < n; i++) {
        json_array_append_new(tokens, json_integer(ids[i]));
        if (ts) {
            size_t tl = 0;
            const char *p = gl_tokenizer_token_bytes(c->tok, ids[i], &tl);
            json_t *s = json_stringn(p ? p : "", tl);
            json_array_append_new(ts, s ? s : json_string("\xef\xbf\xbd"));
        }
    }
    gl_free(ids);
    out = json_pack("{s:I,s:i,s:o}", "count", (json_int_t)n, "max_model_len", c->max_model_len,
                    "tokens", tokens);
    if (out && ts)
        json_object_set_new(out, "token_strs", ts);
    else
        json_decref(ts);
    if (!out)
        gl_api_fail(e, 500, NULL, "out of memory");
done:
    gl_free(text);
    json_decref(b);
    return out;
}

json_t *gl_api_detokenize(const struct gl_api_config *c, const char *body, size_t len,
                          struct gl_api_error *e)
{
    json_error_t je;
    json_t *b = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    int32_t *ids = NULL, n = 0;
    // As for a prompt of ids: at most max_model_len of them.
    if (gl_api_get_ids(json_object_get(b, "tokens"), "tokens", gl_tokenizer_n_vocab(c->tok),
                       c->max_model_len, &ids, &n, e) != GL_OK) {
        json_decref(b);
        return NULL;
    }
    char *text = NULL;
    size_t tl = 0;
    json_t *out = NULL;
    if (gl_api_detok(c->tok, ids, n, 0, &text, &tl) == 0) {
        json_t *s = gl_api_jstr(text, tl); // a cut character becomes U+FFFD, as HF decodes
        out = json_pack("{s:o}", "prompt", s);
    }
    gl_free(text);
    gl_free(ids);
    json_decref(b);
    if (!out)
        gl_api_fail(e, 500, NULL, "out of memory");
    return out;
}

size_t gl_api_tokenize_body_limit(const struct gl_api_config *c)
{
    size_t text = c->max_token_bytes > 0 ? 2 * (size_t)c->max_token_bytes * (size_t)c->max_model_len
                                         : SIZE_MAX / 16;
    size_t ids = 12 * (size_t)c->max_model_len;
    return 6 * (text > ids ? text : ids) + ((size_t)64 << 10);
}

json_t *gl_api_models(const struct gl_api_config *c, int64_t created)
{
    return json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:s,s:n,s:i,s:[]}]}", "object", "list", "data", "id",
                     c->model_name, "object", "model", "created", (json_int_t)created, "owned_by",
                     "glint", "root", c->model_name, "parent", "max_model_len", c->max_model_len,
                     "permission");
}
