// SPDX-License-Identifier: MIT
// grammar compile context (gctx.h): lenient-mode warnings and the time and memory budgets.
#include "grammar/gctx.h"

#include <string.h>

int gl_gctx_warn(struct gl_gctx *c, const char *keyword, const char *pointer)
{
    size_t kl = strlen(keyword), pl = strlen(pointer), add = kl + pl + 6; // " at " + "; "
    char *w = gl_realloc(c->warnings, c->warn_len + add + 1);
    if (!w)
        return 0;
    c->warnings = w;
    memcpy(w + c->warn_len, keyword, kl);
    memcpy(w + c->warn_len + kl, " at ", 4);
    memcpy(w + c->warn_len + kl + 4, pointer, pl);
    memcpy(w + c->warn_len + kl + 4 + pl, "; ", 2);
    c->warn_len += add;
    w[c->warn_len] = 0;
    return 1;
}

gl_status gl_gctx_check_mem(const struct gl_gctx *c, const char *where, struct gl_err *err)
{
    int64_t max = c && c->opts ? c->opts->max_compile_bytes : 0;
    if (!c || !c->mem || max <= 0 || c->mem->peak <= max)
        return GL_OK;
    return gl_err_set(err, GL_E_LIMIT,
                      "grammar: compiling %s took more than %lld bytes of memory (the per-request "
                      "grammar compile limit)",
                      where, (long long)max);
}

gl_status gl_gctx_check_time(const struct gl_gctx *c, struct gl_err *err)
{
    gl_status st = gl_gctx_check_mem(c, "the constraint", err);
    if (st != GL_OK)
        return st;
    if (!c || c->deadline_us <= 0 || gl_time_us() <= c->deadline_us)
        return GL_OK;
    int64_t ms = c->opts ? c->opts->compile_budget_us / 1000 : 0;
    return gl_err_set(err, GL_E_LIMIT, "grammar: compile time budget of %lld ms exceeded",
                      (long long)ms);
}
