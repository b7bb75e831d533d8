// SPDX-License-Identifier: MIT
// server/cors: CORS as vLLM serves it (FastAPI's CORSMiddleware with --allowed-origins,
// --allowed-methods, --allowed-headers, --allow-credentials; defaults ["*"] each, credentials
// off). Internal to server/. A policy is built once at start (gl_cors_init parses the flags: a
// JSON list as vLLM takes them, or comma-separated) and is read-only afterwards, so connection
// threads share it without a lock.
#pragma once

#include "base/base.h"

#include <microhttpd.h>

#define GL_CORS_MAX_ITEMS 64

struct gl_cors_list {
    int any;                       // "*" listed
    int n;                         // explicit entries
    char *item[GL_CORS_MAX_ITEMS]; // owned
};

struct gl_cors {
    struct gl_cors_list origins, methods, headers; // headers lowercased
    int credentials;
};

// text NULL means ["*"]. GL_E_INVAL naming the flag for a malformed list.
GL_MUST_USE gl_status gl_cors_init(struct gl_cors *c, const char *origins, const char *methods,
                                   const char *headers, int credentials, struct gl_err *err);
void gl_cors_free(struct gl_cors *c);

// 1 when the request on conn is a preflight (OPTIONS with Origin and
// Access-Control-Request-Method): then *out is the answer to queue (200 "OK", or 400 "Disallowed
// CORS origin, method, headers" as Starlette words it), with the CORS headers on it.
int gl_cors_preflight(const struct gl_cors *c, struct MHD_Connection *conn, const char *method,
                      unsigned *status, struct MHD_Response **out);
// Adds the headers of a simple (non-preflight) response when the request has an allowed Origin:
// Access-Control-Allow-Origin ("*", or the origin echoed when origins are listed or credentials
// go with a Cookie), Vary: Origin when echoed, Access-Control-Allow-Credentials when on.
void gl_cors_add_headers(const struct gl_cors *c, struct MHD_Connection *conn,
                         struct MHD_Response *res);
