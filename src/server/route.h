// SPDX-License-Identifier: MIT
// server/route: the endpoints `glint serve` answers, as a table (internal to server/; server.c
// dispatches on the id, tests/unit/test_server.c holds the table to vLLM's paths and methods).
// A path is served for one method; any other method on it is a 405 naming the allowed one, an
// unknown path a 404.
#pragma once

enum gl_route_id {
    GL_R_CHAT,     // POST /v1/chat/completions
    GL_R_COMP,     // POST /v1/completions
    GL_R_RESP,     // POST /v1/responses
    GL_R_MODELS,   // GET /v1/models
    GL_R_HEALTH,   // GET /health
    GL_R_PING,     // GET /ping
    GL_R_METRICS,  // GET /metrics
    GL_R_VERSION,  // GET /version
    GL_R_TOK,      // POST /tokenize
    GL_R_DETOK,    // POST /detokenize
    GL_R_NONE = -1 // not served: *allow says which method the path takes (405) or is NULL (404)
};

// The route of method + url (exact path, no query string; the caller strips none: MHD gives
// the path alone). *allow: the path's method when it is served (also on a match), else NULL.
enum gl_route_id gl_route_find(const char *method, const char *url, const char **allow);
