// SPDX-License-Identifier: MIT
// api/endpoints: /tokenize, /detokenize, /v1/models, and the helpers shared by the api files.
#include "api/api.h"
#include "api/api_int.h"
#include "chat/render.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

void gl_api_new_id(char *out, size_t cap, const char *prefix)
{
    static atomic_uint_fast64_t counter;
    uint64_t x = (uint64_t)gl_time_us() * 0x9e3779b97f4a7c15ull ^ atomic_fetch_add(&counter, 1);
    // splitmix64 finaliser: ids look random and never repeat within a run (counter).
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    snprintf(out, cap, "%s%016llx%08llx", prefix, (unsigned long long)z,
             (unsigned long long)(x & 0xffffffffu));
}

int gl_api_detok(const struct gl_tokenizer *t, const int32_t *ids, int32_t n, int skip_special,
                 char **text, size_t *len)
{
    size_t cap = 64, used = 0;
    char *p = gl_malloc(cap);
    struct gl_detok d = {0};
    for (int32_t i = 0; p && i <= n; i++) {
        size_t tl = 0;
        if (i < n)
            (void)gl_tokenizer_token_bytes(t, ids[i], &tl);
        if (used + tl + 16 > cap) {
            while (used + tl + 16 > cap)
                cap *= 2;
            char *q = gl_realloc(p, cap);
            if (!q) {
                gl_free(p);
                p = NULL;
                break;
            }
            p = q;
        }
        int w = i < n ? gl_detok_feed(&d, t, ids[i], skip_special, p + used, cap - used - 1)
                      : gl_detok_flush(&d, p + used, cap - used - 1);
        used += w > 0 ? (size_t)w : 0;
    }
    if (!p)
        return -1;
    p[used] = 0;
    *text = p;
    *len = used;
    return 0;
}

int32_t gl_api_single_token(const struct gl_tokenizer *t, const char *text)
{
    gl_token *ids = NULL;
    size_t n = 0;
    if (gl_tokenizer_encode(t, text, strlen(text), 0, 0, &ids, &n, NULL) != GL_OK)
        return -1;
    int32_t id = n == 1 ? ids[0] : -1;
    gl_free(ids);
    return id;
}

gl_status gl_api_get_ids(json_t *v, const char *k, int32_t n_vocab, int32_t cap, int32_t **out,
                         int32_t *n, struct gl_api_error *e)
{
    if (!json_is_array(v))
        return gl_api_fail(e, 400, k, "%s: expected a list of token ids", k);
    size_t m = json_array_size(v);
    if (m > (size_t)cap)
        return gl_api_fail(e, 400, k, "%s: %zu ids, at most %d allowed", k, m, cap);
    int32_t *ids = gl_malloc((m ? m : 1) * sizeof *ids);
    if (!ids)
        return gl_api_fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < m; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= n_vocab) {
            gl_free(ids);
            return gl_api_fail(e, 400, k, "%s[%zu]: not a token id in [0, %d)", k, i, n_vocab);
        }
        ids[i] = (int32_t)json_integer_value(x);
    }
    *out = ids;
    *n = (int32_t)m;
    return GL_OK;
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

json_t *gl_api_models(const struct gl_api_config *c, int64_t created)
{
    return json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:s,s:n,s:i,s:[]}]}", "object", "list", "data", "id",
                     c->model_name, "object", "model", "created", (json_int_t)created, "owned_by",
                     "glint", "root", c->model_name, "parent", "max_model_len", c->max_model_len,
                     "permission");
}
