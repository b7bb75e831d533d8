// SPDX-License-Identifier: MIT
// grammar compile context (internal to src/grammar/): the options, budgets and warning sink that
// grammar.c hands to every front end (frontend.h). The helpers live in gctx.c, below the front
// ends: schema.c, gbnf.c and frontends.c call them and gctx.c calls none of them back.
#pragma once

#include "grammar/grammar.h"

// Common compile context: options, the deadline (gl_time_us() value; 0 = none) and the lenient
// mode's warning sink (appends "keyword at /pointer; ").
struct gl_gctx {
    const struct gl_grammar_opts *opts;
    int64_t deadline_us;
    char *warnings; // malloc'ed, NUL-terminated; may be NULL when empty
    size_t warn_len;
    // GBNF <text> token literals: the id of the one token whose text is exactly text[0..len)
    // (e.g. "<|eot|>"), or -1. NULL: only <[id]> literals are accepted.
    int32_t (*token_lookup)(void *user, const char *text, size_t len);
    void *token_lookup_user;
    // What the compile holds (the grammar's meter, armed by grammar.c), or NULL: no memory check.
    const struct gl_alloc_meter *mem;
};
// Appends one lenient-mode warning. Returns 0 on allocation failure.
int gl_gctx_warn(struct gl_gctx *c, const char *keyword, const char *pointer);
// GL_E_LIMIT "grammar: compile time budget of N ms exceeded" once past the deadline, or the
// memory check below for "the constraint", else GL_OK.
GL_MUST_USE gl_status gl_gctx_check_time(const struct gl_gctx *c, struct gl_err *err);
// GL_E_LIMIT naming `where` (e.g. "the schema at /properties/a") once the compile has held more
// than opts->max_compile_bytes at some point (the meter's peak), else GL_OK.
GL_MUST_USE gl_status gl_gctx_check_mem(const struct gl_gctx *c, const char *where,
                                        struct gl_err *err);
