// SPDX-License-Identifier: MIT
// api/util: the helpers every api file shares (declared in api.h and api_int.h): errors, ids,
// JSON strings of arbitrary bytes, token-id lists and detokenisation, the context-length check.
// Calls run one way: the other api files call these, and this file calls none of them.
#include "api/api.h"
#include "api/api_int.h"
#include "base/buf.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

// ---- errors ----

gl_status gl_api_fail(struct gl_api_error *e, int http, const char *param, const char *fmt, ...)
{
    if (!e)
        return http == 500 ? GL_E_NOMEM : GL_E_INVAL;
    e->http = http;
    snprintf(e->type, sizeof e->type, "%s",
             http == 400   ? "BadRequestError"
             : http == 401 ? "AuthenticationError"
             : http == 404 ? "NotFoundError"
             : http == 405 ? "MethodNotAllowed"
             : http == 408 ? "RequestTimeout"
             : http == 413 ? "RequestTooLarge"
             : http == 429 ? "TooManyRequests"
             : http == 503 ? "ServiceUnavailableError"
                           : "InternalServerError");
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return http == 500 ? GL_E_NOMEM : http == 503 ? GL_E_AGAIN : GL_E_INVAL;
}

json_t *gl_api_error_json(const struct gl_api_error *e)
{
    // msg and param quote the request (field names, values) cut with %.Ns or to their buffers,
    // possibly inside a UTF-8 character, which jansson's "s" refuses: gl_api_jstr replaces it.
    return json_pack("{s:{s:o,s:s,s:o,s:i}}", "error", "message",
                     gl_api_jstr(e->msg, strlen(e->msg)), "type", e->type, "param",
                     e->param[0] ? gl_api_jstr(e->param, strlen(e->param)) : json_null(), "code",
                     e->http);
}

// ---- strings ----

// Each maximal invalid subpart of the UTF-8 becomes one U+FFFD (gl_utf8_seq), as Python's and
// HF's lossy decoders do.
json_t *gl_api_jstr(const char *p, size_t n)
{
    json_t *s = json_stringn(p, n);
    if (s)
        return s;
    struct gl_buf b = {0};
    for (size_t i = 0; i < n;) {
        size_t bad = 1, k = gl_utf8_seq((const uint8_t *)p + i, n - i, &bad);
        if (k) {
            gl_buf_put(&b, p + i, k);
            i += k;
        } else {
            gl_buf_put(&b, "\xef\xbf\xbd", 3);
            i += bad;
        }
    }
    s = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.len);
    gl_free(b.p);
    return s;
}

// ---- ids and tokens ----

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

// ---- limits ----

gl_status gl_api_check_text_len(const struct gl_api_config *c, size_t len, const char *param,
                                struct gl_api_error *e)
{
    if (c->max_token_bytes > 0 && len / 2 / (size_t)c->max_token_bytes >= (size_t)c->max_model_len)
        return gl_api_fail(
            e, 400, param,
            "This model's maximum context length is %d tokens. However, your request "
            "has %zu bytes of input text, at least %zu tokens. Please reduce the length "
            "of the input messages.",
            c->max_model_len, len, len / 2 / (size_t)c->max_token_bytes);
    return GL_OK;
}
