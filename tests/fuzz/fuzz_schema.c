// SPDX-License-Identifier: MIT
// Fuzz target for the JSON Schema compiler (src/grammar/schema.c). Input: JSON text (a schema);
// the first byte's low bit selects lenient mode, its next bit closed objects (closed_objects).
// Invariants: no crash or hang within the node, regex-state and time budgets; every failure carries
// a message; a schema that compiles gives an IR that validates, and the recogniser runs over the
// input text itself without error.
#include "grammar/frontend.h"
#include "grammar/match.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 16384)
        return 0;
    json_error_t je;
    json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, &je);
    if (!schema)
        return 0;
    struct gl_grammar_opts opts = gl_grammar_default_opts();
    opts.max_regex_states = 4096;
    opts.max_nodes = 100000;
    opts.lenient = data[0] & 1;
    opts.closed_objects = (data[0] >> 1) & 1;
    struct gl_gctx c = {.opts = &opts, .deadline_us = gl_time_us() + 2000000};
    struct gl_gir ir;
    memset(&ir, 0, sizeof ir);
    struct gl_err err = {0};
    struct gl_gir_builder b;
    if (gl_gir_builder_init(&b, &ir, opts.max_nodes, &err) == GL_OK) {
        int32_t root = -1;
        gl_status st = gl_schema_build(&b, &c, schema, &root, &err);
        if (st == GL_OK) {
            GL_ASSERT(root >= 0 && root < ir.n_nodes);
            ir.root = root;
            ir.ws_max = opts.ws_max;
            st = gl_gir_validate(&ir, &err);
            GL_ASSERT_MSG(st == GL_OK, "built but invalid: %s", err.msg);
            struct gl_mlimits lim = {.max_threads = 32, .max_depth = 64};
            struct gl_mstate *s = NULL;
            if (gl_mstate_new(&s, &ir, &lim, &err) == GL_OK) {
                gl_mstate_reset(s);
                for (size_t i = 0; i < size && i < 1024; i++)
                    (void)gl_mstate_advance_byte(s, data[i]);
                (void)gl_mstate_can_end(s);
                gl_mstate_free(s);
            }
        } else {
            GL_ASSERT(err.msg[0] != 0);
        }
    }
    gl_free(c.warnings);
    gl_gir_free(&ir);
    json_decref(schema);
    return 0;
}
