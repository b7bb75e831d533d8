// SPDX-License-Identifier: MIT
// Fuzz target for the GBNF front end (src/grammar/gbnf.c). Input: GBNF text, optionally followed
// by a NUL byte and a text to match. Invariants: no crash or hang (node, regex-state and time
// budgets apply); every failure carries a message; a grammar that builds also validates
// (left recursion and nullable open repetitions are caught by the front end itself) and its
// recogniser runs over the text without error.
#include "grammar/frontend.h"
#include "grammar/match.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int32_t lookup(void *user, const char *text, size_t len)
{
    (void)user;
    return len == 7 && memcmp(text, "<|eot|>", 7) == 0 ? 200008 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    struct gl_grammar_opts opts = gl_grammar_default_opts();
    opts.max_regex_states = 4096;
    struct gl_gctx c = {
        .opts = &opts, .deadline_us = gl_time_us() + 2000000, .token_lookup = lookup};
    struct gl_gir ir;
    memset(&ir, 0, sizeof ir);
    struct gl_err err = {0};
    struct gl_gir_builder b;
    if (gl_gir_builder_init(&b, &ir, 50000, &err) != GL_OK)
        return 0;
    int32_t root = -1;
    gl_status st = gl_gbnf_build(&b, &c, (const char *)data, glen, &root, &err);
    if (st == GL_OK) {
        GL_ASSERT(root >= 0 && root < ir.n_nodes);
        ir.root = root;
        st = gl_gir_validate(&ir, &err);
        GL_ASSERT_MSG(st == GL_OK, "built but invalid: %s", err.msg);
        struct gl_mlimits lim = {.max_threads = 32, .max_depth = 64};
        struct gl_mstate *s = NULL;
        if (gl_mstate_new(&s, &ir, &lim, &err) == GL_OK) {
            gl_mstate_reset(s);
            const uint8_t *t = nul ? nul + 1 : data;
            size_t tlen = nul ? size - glen - 1 : 0;
            for (size_t i = 0; i < tlen && i < 1024; i++) {
                if (t[i] == 0xFF && i + 1 < tlen) // 0xFF NN: a token id 200000 + NN
                    (void)gl_mstate_advance_token(s, 200000 + t[++i]);
                else
                    (void)gl_mstate_advance_byte(s, t[i]);
            }
            (void)gl_mstate_can_end(s);
            gl_mstate_free(s);
        }
    } else {
        GL_ASSERT(err.msg[0] != 0);
    }
    gl_free(c.warnings);
    gl_gir_free(&ir);
    return 0;
}
