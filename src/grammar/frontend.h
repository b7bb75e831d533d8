// SPDX-License-Identifier: MIT
// grammar front ends (internal to src/grammar/): each turns one constraint source into IR nodes
// through a builder (ir.h). They only build; grammar.c owns the resulting struct gl_gir, the
// budgets' clock and the cache. Errors as in grammar.h (keyword + JSON pointer, or line:column).
#pragma once

#include "grammar/gctx.h"
#include "grammar/grammar.h"
#include "grammar/ir.h"

#include <jansson.h>

// schema.c: JSON Schema (2020-12 and older spellings) -> node index of the document value
// (in *root). `schema` is the root document ($ref "#/..." resolves against it).
GL_MUST_USE gl_status gl_schema_build(struct gl_gir_builder *b, struct gl_gctx *c, json_t *schema,
                                      int32_t *root, struct gl_err *err);
// The same for a sub-schema inside document `doc` at JSON pointer `ptr` (error messages use it),
// with strings compiled raw (gl_gstr.raw) when raw_strings (ATEM parameter values).
GL_MUST_USE gl_status gl_schema_build_at(struct gl_gir_builder *b, struct gl_gctx *c, json_t *doc,
                                         json_t *schema, const char *ptr, int raw_strings,
                                         int32_t *root, struct gl_err *err);
// Any JSON value (json_object mode uses gl_schema_build with {"type":"object"}).
int32_t gl_schema_any_value(struct gl_gir_builder *b);

// gbnf.c: llama.cpp GBNF (rule ::= alternatives; "lit", [classes], (groups), * + ? {m,n},
// comments, <[id]> token literals and <|name|> special names resolved by the caller-given
// lookup) -> root node of rule "root".
GL_MUST_USE gl_status gl_gbnf_build(struct gl_gir_builder *b, struct gl_gctx *c, const char *src,
                                    size_t len, int32_t *root, struct gl_err *err);

// frontends.c: regex (whole output), choice (JSON array of strings, exact bytes),
// ATEM tool calls and the whole ATEM assistant turn (grammar.h).
GL_MUST_USE gl_status gl_fe_regex_build(struct gl_gir_builder *b, struct gl_gctx *c,
                                        const char *src, size_t len, int32_t *root,
                                        struct gl_err *err);
GL_MUST_USE gl_status gl_fe_choice_build(struct gl_gir_builder *b, struct gl_gctx *c,
                                         const char *src, size_t len, int32_t *root,
                                         struct gl_err *err);
GL_MUST_USE gl_status gl_fe_atem_tools_build(struct gl_gir_builder *b, struct gl_gctx *c,
                                             json_t *tools, const char *only_name,
                                             int32_t message_token, int32_t *root,
                                             struct gl_err *err);
// The turn spec (grammar.h, GL_GRAMMAR_ATEM_TURN): canon checks it (GL_E_INVAL naming the field)
// and returns its normal form, the cache key and build's input: every field present, defaults
// filled in, fields the language does not depend on nulled (tools under "none", body without a
// user arm, parallel without a tool arm), a JSON body source parsed, header_tokens reduced to
// the pinned pieces the language uses (null when none).
GL_MUST_USE gl_status gl_fe_atem_turn_canon(json_t *spec, json_t **out, struct gl_err *err);
GL_MUST_USE gl_status gl_fe_atem_turn_build(struct gl_gir_builder *b, struct gl_gctx *c,
                                            json_t *turn, int32_t *root, struct gl_err *err);
