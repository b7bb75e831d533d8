// SPDX-License-Identifier: MIT
// server/cors: Starlette's CORSMiddleware rules (what vLLM runs), so a browser client that works
// against vLLM works against glint with the same flags.
#include "server/cors.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

// Starlette: "*" methods means these; request headers always allowed (the CORS safelist).
static const char *const k_all_methods = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";
static const char *const k_safelisted[] = {"accept", "accept-language", "content-language",
                                           "content-type"};

static gl_status add_item(struct gl_cors_list *l, const char *s, size_t n, int lower,
                          const char *flag, struct gl_err *err)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 1 && *s == '*') {
        l->any = 1;
        return GL_OK;
    }
    if (n == 0 || n > 512 || l->n == GL_CORS_MAX_ITEMS)
        return gl_err_set(err, GL_E_INVAL,
                          "serve: %s: empty or over-long entry, or more than %d entries", flag,
                          GL_CORS_MAX_ITEMS);
    char *c = gl_malloc(n + 1);
    if (!c)
        return gl_err_set(err, GL_E_NOMEM, "serve: no memory");
    for (size_t i = 0; i < n; i++)
        c[i] = lower ? (char)tolower((unsigned char)s[i]) : s[i];
    c[n] = 0;
    l->item[l->n++] = c;
    return GL_OK;
}

// '["a", "b"]' (vLLM's json.loads spelling) or "a,b".
static gl_status parse_list(struct gl_cors_list *l, const char *text, int lower, const char *flag,
                            struct gl_err *err)
{
    if (!text) {
        l->any = 1;
        return GL_OK;
    }
    const char *t = text;
    while (isspace((unsigned char)*t))
        t++;
    if (*t != '[') {
        for (const char *p = t;;) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            gl_status st = add_item(l, p, n, lower, flag, err);
            if (st != GL_OK || !e)
                return st;
            p = e + 1;
        }
    }
    json_error_t je;
    json_t *a = json_loads(t, 0, &je);
    gl_status st = GL_OK;
    if (!json_is_array(a))
        st = gl_err_set(err, GL_E_INVAL, "serve: %s: not a JSON list of strings: %s", flag,
                        a ? "not a list" : je.text);
    for (size_t i = 0; st == GL_OK && i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        st = json_is_string(v)
                 ? add_item(l, json_string_value(v), json_string_length(v), lower, flag, err)
                 : gl_err_set(err, GL_E_INVAL, "serve: %s: entry %zu is not a string", flag, i);
    }
    json_decref(a);
    return st;
}

gl_status gl_cors_init(struct gl_cors *c, const char *origins, const char *methods,
                       const char *headers, int credentials, struct gl_err *err)
{
    memset(c, 0, sizeof *c);
    c->credentials = credentials;
    gl_status st = parse_list(&c->origins, origins, 0, "--allowed-origins", err);
    if (st == GL_OK)
        st = parse_list(&c->methods, methods, 0, "--allowed-methods", err);
    if (st == GL_OK)
        st = parse_list(&c->headers, headers, 1, "--allowed-headers", err);
    if (st != GL_OK)
        gl_cors_free(c);
    return st;
}

static void list_free(struct gl_cors_list *l)
{
    for (int i = 0; i < l->n; i++)
        gl_free(l->item[i]);
    l->n = 0;
}

void gl_cors_free(struct gl_cors *c)
{
    list_free(&c->origins);
    list_free(&c->methods);
    list_free(&c->headers);
}

static int listed(const struct gl_cors_list *l, const char *s, size_t n, int nocase)
{
    if (l->any)
        return 1;
    for (int i = 0; i < l->n; i++)
        if (strlen(l->item[i]) == n &&
            (nocase ? strncasecmp(l->item[i], s, n) : strncmp(l->item[i], s, n)) == 0)
            return 1;
    return 0;
}

static const char *hdr(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

// Starlette echoes the origin when origins are listed or credentials are on (preflight), so a
// credentialed browser request never sees "*".
static void allow_origin(const struct gl_cors *c, struct MHD_Response *res, const char *origin,
                         int echo)
{
    MHD_add_response_header(res, "Access-Control-Allow-Origin", echo ? origin : "*");
    if (echo)
        MHD_add_response_header(res, "Vary", "Origin");
    if (c->credentials)
        MHD_add_response_header(res, "Access-Control-Allow-Credentials", "true");
}

void gl_cors_add_headers(const struct gl_cors *c, struct MHD_Connection *conn,
                         struct MHD_Response *res)
{
    const char *origin = hdr(conn, "Origin");
    if (!origin || !listed(&c->origins, origin, strlen(origin), 0))
        return;
    int echo = !c->origins.any || (c->credentials && hdr(conn, "Cookie"));
    allow_origin(c, res, origin, echo);
}

// Every requested header must be safelisted or allowed (case-insensitive).
static int headers_ok(const struct gl_cors *c, const char *req)
{
    for (const char *p = req; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (n && isspace((unsigned char)*s))
            s++, n--;
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        int ok = n == 0 || listed(&c->headers, s, n, 1);
        for (size_t i = 0; !ok && i < sizeof k_safelisted / sizeof *k_safelisted; i++)
            ok = strlen(k_safelisted[i]) == n && strncasecmp(k_safelisted[i], s, n) == 0;
        if (!ok)
            return 0;
        if (!e)
            break;
        p = e + 1;
    }
    return 1;
}

// "a, b, c" of a list (the methods or headers the preflight answer names).
static void join(const struct gl_cors_list *l, const char *const *extra, size_t n_extra, char *out,
                 size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < n_extra + (size_t)l->n; i++) {
        const char *s = i < n_extra ? extra[i] : l->item[i - n_extra];
        int w = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", s);
        if (w < 0 || (size_t)w >= cap - len)
            break;
        len += (size_t)w;
    }
}

int gl_cors_preflight(const struct gl_cors *c, struct MHD_Connection *conn, const char *method,
                      unsigned *status, struct MHD_Response **out)
{
    const char *origin = hdr(conn, "Origin");
    const char *req_method = hdr(conn, "Access-Control-Request-Method");
    if (strcmp(method, "OPTIONS") != 0 || !origin || !req_method)
        return 0;
    const char *req_headers = hdr(conn, "Access-Control-Request-Headers");
    char failures[64] = "";
    int origin_ok = listed(&c->origins, origin, strlen(origin), 0);
    if (!origin_ok)
        strcat(failures, "origin");
    if (!listed(&c->methods, req_method, strlen(req_method), 0))
        strcat(failures, failures[0] ? ", method" : "method");
    if (req_headers && !c->headers.any && !headers_ok(c, req_headers))
        strcat(failures, failures[0] ? ", headers" : "headers");
    char text[96];
    snprintf(text, sizeof text, failures[0] ? "Disallowed CORS %s" : "OK", failures);
    *status = failures[0] ? 400 : 200;
    *out = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
    if (!*out)
        return 1;
    MHD_add_response_header(*out, "Content-Type", "text/plain; charset=utf-8");
    if (origin_ok)
        allow_origin(c, *out, origin, !c->origins.any || c->credentials);
    else if (c->credentials)
        MHD_add_response_header(*out, "Access-Control-Allow-Credentials", "true");
    char buf[4096];
    if (c->methods.any)
        snprintf(buf, sizeof buf, "%s", k_all_methods);
    else
        join(&c->methods, NULL, 0, buf, sizeof buf);
    MHD_add_response_header(*out, "Access-Control-Allow-Methods", buf);
    if (c->headers.any && req_headers) {
        MHD_add_response_header(*out, "Access-Control-Allow-Headers", req_headers);
    } else if (!c->headers.any) {
        join(&c->headers, k_safelisted, sizeof k_safelisted / sizeof *k_safelisted, buf,
             sizeof buf);
        MHD_add_response_header(*out, "Access-Control-Allow-Headers", buf);
    }
    MHD_add_response_header(*out, "Access-Control-Max-Age", "600");
    return 1;
}
