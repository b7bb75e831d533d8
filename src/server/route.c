// SPDX-License-Identifier: MIT
// server/route: the endpoint table (route.h).
#include "server/route.h"

#include <stddef.h>
#include <string.h>

static const struct {
    const char *path, *method;
    enum gl_route_id id;
} k_routes[] = {
    {"/v1/chat/completions", "POST", GL_R_CHAT},
    {"/v1/completions", "POST", GL_R_COMP},
    {"/v1/responses", "POST", GL_R_RESP},
    {"/v1/models", "GET", GL_R_MODELS},
    {"/health", "GET", GL_R_HEALTH},
    {"/ping", "GET", GL_R_PING},
    {"/metrics", "GET", GL_R_METRICS},
    {"/version", "GET", GL_R_VERSION},
    {"/tokenize", "POST", GL_R_TOK},
    {"/detokenize", "POST", GL_R_DETOK},
};

enum gl_route_id gl_route_find(const char *method, const char *url, const char **allow)
{
    *allow = NULL;
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++)
        if (strcmp(k_routes[i].path, url) == 0) {
            *allow = k_routes[i].method;
            if (strcmp(k_routes[i].method, method) == 0)
                return k_routes[i].id;
        }
    return GL_R_NONE;
}
