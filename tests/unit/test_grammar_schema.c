// SPDX-License-Identifier: MIT
// Tests for the JSON Schema front end (src/grammar/schema.c): IR shapes for each keyword family,
// error messages (keyword + JSON pointer) for unsupported and malformed schemas, hostile schemas
// (deep nesting, huge enums, $ref cycles, exponential sharing) failing fast under the budget,
// and acceptance: instance bytes walked through the matcher (valid accepted, invalid rejected).
#include "grammar/frontend.h"
#include "grammar/match.h"
#include "grammar/regex.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct compiled {
    gl_status st;
    struct gl_gir ir;
    int32_t root;
    struct gl_err err;
    char *warnings;
};

static struct gl_grammar_opts g_opts;

static void compiled_free(struct compiled *c)
{
    gl_gir_free(&c->ir);
    free(c->warnings);
    c->warnings = NULL;
}

static struct compiled compile_json(json_t *schema, const struct gl_grammar_opts *o)
{
    struct compiled r;
    memset(&r, 0, sizeof r);
    struct gl_gctx c = {.opts = o, .deadline_us = gl_time_us() + o->compile_budget_us};
    struct gl_gir_builder b;
    r.root = -1;
    r.st = gl_gir_builder_init(&b, &r.ir, o->max_nodes, &r.err);
    if (r.st == GL_OK)
        r.st = gl_schema_build(&b, &c, schema, &r.root, &r.err);
    r.warnings = c.warnings;
    if (r.st == GL_OK) {
        // what grammar.c does next: the IR must pass the builder's invariant checks
        r.ir.root = r.root;
        r.ir.ws_max = o->ws_max;
        gl_status vs = gl_gir_validate(&r.ir, &r.err);
        CHECKF(vs == GL_OK, "gl_gir_validate: %s", r.err.msg);
    }
    return r;
}

static struct compiled compile_text(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) {
        fprintf(stderr, "  bad test JSON: %s: %s\n", text, je.text);
        struct compiled r;
        memset(&r, 0, sizeof r);
        r.st = GL_E_INTERNAL;
        return r;
    }
    struct compiled r = compile_json(j, &g_opts);
    json_decref(j);
    return r;
}

static const struct gl_gnode *node(const struct compiled *c, int32_t i)
{
    GL_ASSERT(i >= 0 && i < c->ir.n_nodes);
    return &c->ir.nodes[i];
}

static int walk(const struct compiled *c, const char *doc); // the recogniser on doc's bytes

// Compiles and expects failure with code, the message containing both needles.
static int fails_with(const char *schema, gl_status code, const char *n1, const char *n2)
{
    struct compiled c = compile_text(schema);
    int ok = c.st == code && strstr(c.err.msg, n1) && (!n2 || strstr(c.err.msg, n2));
    if (!ok)
        fprintf(stderr, "  schema %s: status %d, message: %s\n", schema, (int)c.st, c.err.msg);
    compiled_free(&c);
    return ok;
}

// ---- shapes ----

TEST(test_string_bounds)
{
    struct compiled c = compile_text("{\"type\":\"string\",\"minLength\":2,\"maxLength\":5}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    CHECK(n->kind == GN_JSTRING);
    CHECK(n->u.str.min_chars == 2 && n->u.str.max_chars == 5 && n->u.str.n_regex == 0);
    CHECK(!n->u.str.raw);
    compiled_free(&c);
}

TEST(test_integer_bounds)
{
    struct compiled c =
        compile_text("{\"type\":\"integer\",\"minimum\":1.5,\"exclusiveMaximum\":10}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JNUMBER);
    CHECK(n->u.num.integer && n->u.num.has_min && n->u.num.has_max);
    CHECK(n->u.num.min == 2 && n->u.num.max == 9 && !n->u.num.excl_min && !n->u.num.excl_max);
    compiled_free(&c);
    // draft 4 boolean exclusive flags on a number
    c = compile_text("{\"type\":\"number\",\"minimum\":0,\"exclusiveMinimum\":true,"
                     "\"maximum\":1}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JNUMBER);
    CHECK(!n->u.num.integer && n->u.num.excl_min && !n->u.num.excl_max && n->u.num.max == 1);
    compiled_free(&c);
    // an empty integer range is no value at all
    CHECK(fails_with("{\"type\":\"integer\",\"minimum\":1.2,\"maximum\":1.8}", GL_E_INVAL,
                     "accepts no value", NULL));
}

TEST(test_object_shape)
{
    struct compiled c =
        compile_text("{\"type\":\"object\",\"properties\":{\"zeta\":{\"type\":\"string\"},\"a\":{},"
                     "\"ab\":{\"type\":\"null\"}},\"required\":[\"zeta\",\"extra\"],"
                     "\"additionalProperties\":{\"type\":\"boolean\"},\"minProperties\":1}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT);
    const struct gl_gobj *o = &n->u.obj;
    REQUIRE(o->n_props == 4);
    // sorted by name bytes, a prefix first
    CHECK(o->props[0].name.len == 1 && memcmp(o->props[0].name.p, "a", 1) == 0);
    CHECK(o->props[1].name.len == 2 && memcmp(o->props[1].name.p, "ab", 2) == 0);
    CHECK(o->props[2].name.len == 5 && memcmp(o->props[2].name.p, "extra", 5) == 0);
    CHECK(o->props[3].name.len == 4 && memcmp(o->props[3].name.p, "zeta", 4) == 0);
    CHECK(!o->props[0].required && !o->props[1].required);
    CHECK(o->props[2].required && o->props[3].required);
    // a required name that is not declared takes the additionalProperties schema
    CHECK(node(&c, o->props[2].value)->kind == GN_ALT);
    CHECK(node(&c, o->props[3].value)->kind == GN_JSTRING);
    CHECK(node(&c, o->props[1].value)->kind == GN_BYTES);
    CHECK(o->additional >= 0 && o->min_props == 1 && o->max_props == -1 && !o->order);
    compiled_free(&c);

    c = compile_text("{\"properties\":{\"b\":{},\"a\":{}},\"additionalProperties\":false,"
                     "\"type\":\"object\"}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT);
    CHECK(n->u.obj.additional == -1 && n->u.obj.n_props == 2);
    compiled_free(&c);

    // schema order (opt-in): order lists the sorted indices in declaration order
    struct gl_grammar_opts o2 = g_opts;
    o2.ordered_keys = 1;
    json_t *j =
        json_loads("{\"type\":\"object\",\"properties\":{\"b\":{},\"a\":{},\"c\":{}}}", 0, NULL);
    c = compile_json(j, &o2);
    json_decref(j);
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT && n->u.obj.order);
    CHECK(n->u.obj.order[0] == 1 && n->u.obj.order[1] == 0 && n->u.obj.order[2] == 2);
    compiled_free(&c);

    // an object that cannot be completed accepts no value (never a matcher dead end): more
    // required names than maxProperties, or fewer possible keys than minProperties
    CHECK(fails_with("{\"type\":\"object\",\"required\":[\"a\",\"b\"],\"maxProperties\":1}",
                     GL_E_INVAL, "accepts no value", NULL));
    CHECK(
        fails_with("{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":false,"
                   "\"minProperties\":2}",
                   GL_E_INVAL, "accepts no value", NULL));
}

TEST(test_escaped_pointer_and_pattern_props)
{
    struct compiled c =
        compile_text("{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},"
                     "\"properties\":{\"x-a\":{\"type\":\"number\"},\"b\":{}},"
                     "\"additionalProperties\":false}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT);
    CHECK(n->u.obj.n_patterns == 1 && n->u.obj.additional == -1);
    // "x-a" matches ^x-: its value must satisfy both (number and integer: integer)
    REQUIRE(n->u.obj.n_props == 2);
    const struct gl_gnode *xa = node(&c, n->u.obj.props[1].value);
    CHECK(xa->kind == GN_JNUMBER && xa->u.num.integer);
    compiled_free(&c);
}

TEST(test_enum_const)
{
    struct compiled c = compile_text("{\"enum\":[\"red\",\"green\",\"a\\\"b\"]}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JSTRING && n->u.str.n_regex == 1);
    struct gl_regex *re = c.ir.regexes[n->u.str.regexes[0]];
    CHECK(gl_regex_match(re, "red", 3) && gl_regex_match(re, "green", 5));
    CHECK(gl_regex_match(re, "a\"b", 3) && !gl_regex_match(re, "gree", 4));
    CHECK(n->u.str.min_chars == 3 && n->u.str.max_chars == 5);
    compiled_free(&c);

    // mixed: strings in one JSTRING, numbers exact, null bytes; filtered by the sibling type
    c = compile_text("{\"type\":[\"string\",\"null\"],\"enum\":[\"x\",1,null,true]}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_ALT && n->u.list.n == 2);
    compiled_free(&c);

    c = compile_text("{\"const\":2.5}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    CHECK(n->kind == GN_JNUMBER && n->u.num.min == 2.5 && n->u.num.max == 2.5);
    compiled_free(&c);

    // const object: all keys required, nothing else
    c = compile_text("{\"const\":{\"k\":[1,\"s\"]}}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT);
    CHECK(n->u.obj.n_props == 1 && n->u.obj.props[0].required && n->u.obj.additional == -1);
    CHECK(node(&c, n->u.obj.props[0].value)->kind == GN_JARRAY);
    compiled_free(&c);

    // enum values failing their siblings are dropped; none left is an error
    CHECK(fails_with("{\"enum\":[\"abc\"],\"maxLength\":2}", GL_E_INVAL, "accepts no value", NULL));
}

TEST(test_types_and_any)
{
    struct compiled c = compile_text("{\"type\":[\"string\",\"null\"]}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    CHECK(n->kind == GN_ALT && n->u.list.n == 2);
    compiled_free(&c);

    // type-specific keywords without a type apply only to that type: still all 6 kinds
    c = compile_text("{\"minimum\":3}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    CHECK(n->kind == GN_ALT && n->u.list.n == 6);
    compiled_free(&c);

    c = compile_text("true");
    REQUIRE(c.st == GL_OK);
    CHECK(node(&c, c.root)->kind == GN_ALT);
    compiled_free(&c);
    CHECK(fails_with("false", GL_E_INVAL, "accepts no value", NULL));
    // nullable (OpenAPI) adds null to the type
    c = compile_text("{\"type\":\"integer\",\"nullable\":true}");
    REQUIRE(c.st == GL_OK);
    CHECK(node(&c, c.root)->kind == GN_ALT);
    compiled_free(&c);
}

TEST(test_arrays)
{
    struct compiled c =
        compile_text("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":"
                     "\"null\"}],\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":4}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JARRAY);
    CHECK(n->u.arr.n_prefix == 2 && n->u.arr.min_items == 1 && n->u.arr.max_items == 4);
    CHECK(node(&c, n->u.arr.items)->kind == GN_JNUMBER);
    compiled_free(&c);
    // draft 4: array-form items + additionalItems false
    c = compile_text("{\"type\":\"array\",\"items\":[{},{}],\"additionalItems\":false}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JARRAY);
    CHECK(n->u.arr.n_prefix == 2 && n->u.arr.items == -1 && n->u.arr.max_items == 2);
    compiled_free(&c);
    // a false prefix item caps the length; more required items is no value
    CHECK(fails_with("{\"type\":\"array\",\"prefixItems\":[{},false],\"minItems\":2}", GL_E_INVAL,
                     "accepts no value", NULL));
    // uniqueItems over any values is refused (strings: test_unique_items); with at most one item
    // it cannot matter
    CHECK(fails_with("{\"type\":\"array\",\"uniqueItems\":true}", GL_E_UNSUPPORTED, "'uniqueItems'",
                     "/uniqueItems"));
    c = compile_text("{\"type\":\"array\",\"uniqueItems\":true,\"maxItems\":1}");
    CHECK(c.st == GL_OK);
    compiled_free(&c);
}

TEST(test_ref_recursion_shares_nodes)
{
    struct compiled c = compile_text(
        "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
        "\"next\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT && n->u.obj.n_props == 2);
    int32_t next = n->u.obj.props[0].value; // "next" < "v"
    const struct gl_gnode *nn = node(&c, next);
    REQUIRE(nn->kind == GN_JOBJECT && nn->u.obj.n_props == 2);
    CHECK(nn->u.obj.props[0].value == next); // the recursion is a cycle, not a copy
    compiled_free(&c);

    // a definition used many times is compiled once
    c = compile_text("{\"definitions\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a+$\"}},"
                     "\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/definitions/s\"},"
                     "\"b\":{\"$ref\":\"#/definitions/s\"},\"c\":{\"$ref\":\"#/definitions/s\"}}}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT && n->u.obj.n_props == 3);
    CHECK(n->u.obj.props[0].value == n->u.obj.props[1].value);
    CHECK(n->u.obj.props[1].value == n->u.obj.props[2].value);
    CHECK(c.ir.n_regexes == 1);
    compiled_free(&c);

    // $anchor and %-escaped / ~-escaped pointers
    c = compile_text("{\"$defs\":{\"a b\":{\"$anchor\":\"A\",\"type\":\"null\"},\"x/y\":{\"type\":"
                     "\"boolean\"}},\"anyOf\":[{\"$ref\":\"#A\"},{\"$ref\":\"#/$defs/a%20b\"},"
                     "{\"$ref\":\"#/$defs/x~1y\"}]}");
    CHECK(c.st == GL_OK);
    compiled_free(&c);
}

TEST(test_allof_merge)
{
    struct compiled c = compile_text(
        "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"integer\","
        "\"string\"]}},\"required\":[\"a\"]},{\"properties\":{\"a\":{\"type\":\"integer\","
        "\"minimum\":0},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}");
    REQUIRE(c.st == GL_OK);
    const struct gl_gnode *n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT && n->u.obj.n_props == 2);
    CHECK(n->u.obj.props[0].required && n->u.obj.props[1].required);
    const struct gl_gnode *a = node(&c, n->u.obj.props[0].value);
    CHECK(a->kind == GN_JNUMBER && a->u.num.integer && a->u.num.has_min && a->u.num.min == 0);
    compiled_free(&c);

    // intersected bounds and lengths, two patterns kept
    c = compile_text("{\"allOf\":[{\"type\":\"string\",\"maxLength\":9,\"pattern\":\"a\"},"
                     "{\"minLength\":2,\"maxLength\":4,\"pattern\":\"b\"}]}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JSTRING);
    CHECK(n->u.str.min_chars == 2 && n->u.str.max_chars == 4 && n->u.str.n_regex == 2);
    compiled_free(&c);

    // additionalProperties false on one side closes the other side's extra names
    c = compile_text("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{}},"
                     "\"additionalProperties\":false},{\"properties\":{\"b\":{}}}]}");
    REQUIRE(c.st == GL_OK);
    n = node(&c, c.root);
    REQUIRE(n->kind == GN_JOBJECT);
    CHECK(n->u.obj.n_props == 1 && n->u.obj.additional == -1);
    compiled_free(&c);

    CHECK(fails_with("{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", GL_E_INVAL,
                     "accepts no value", NULL));
    CHECK(fails_with("{\"allOf\":[{\"enum\":[1,2]},{\"enum\":[3]}]}", GL_E_INVAL,
                     "accepts no value", NULL));
}

TEST(test_oneof)
{
    // disjoint by type: compiled as anyOf
    struct compiled c = compile_text("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}");
    REQUIRE(c.st == GL_OK);
    CHECK(node(&c, c.root)->kind == GN_ALT);
    compiled_free(&c);
    // discriminated objects (a const property)
    c = compile_text("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},"
                     "\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":"
                     "\"b\"},\"x\":{}},\"required\":[\"k\"]}]}");
    CHECK(c.st == GL_OK);
    compiled_free(&c);
    // overlapping required sets: each branch excludes the others
    c = compile_text("{\"type\":\"object\",\"oneOf\":[{\"required\":[\"a\"]},{\"required\":"
                     "[\"b\",\"c\"]}]}");
    REQUIRE(c.st == GL_OK);
    CHECK(node(&c, c.root)->kind == GN_ALT);
    compiled_free(&c);
    // overlapping patterns: each branch takes the strings that fail the other's pattern
    c = compile_text("{\"oneOf\":[{\"type\":\"string\",\"pattern\":\"a\"},{\"type\":\"string\","
                     "\"pattern\":\"b\"}]}");
    REQUIRE(c.st == GL_OK);
    CHECK(walk(&c, "\"xa\"") == 1 && walk(&c, "\"bx\"") == 1);
    CHECK(walk(&c, "\"ab\"") == 0 && walk(&c, "\"c\"") == 0);
    compiled_free(&c);
    // overlapping lengths: a string beyond a member's bound fails it
    c = compile_text("{\"oneOf\":[{\"type\":\"string\",\"minLength\":2},{\"type\":\"string\","
                     "\"maxLength\":5}]}");
    REQUIRE(c.st == GL_OK);
    CHECK(walk(&c, "\"a\"") == 1 && walk(&c, "\"abcdefg\"") == 1);
    CHECK(walk(&c, "\"abc\"") == 0 && walk(&c, "\"ab\"") == 0 && walk(&c, "\"abcde\"") == 0);
    compiled_free(&c);
    // if/then/else decided by a discriminator: "not if" is kind absent or kind not "a"
    c = compile_text("{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]}},"
                     "\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}},\"required\":[\"kind\"]},"
                     "\"then\":{\"required\":[\"x\"]},\"else\":{\"required\":[\"y\"]}}");
    REQUIRE(c.st == GL_OK);
    CHECK(walk(&c, "{\"kind\":\"a\",\"x\":1}") == 1 && walk(&c, "{\"kind\":\"b\",\"y\":1}") == 1);
    CHECK(walk(&c, "{\"y\":1}") == 1);
    CHECK(walk(&c, "{\"kind\":\"a\",\"y\":1}") == 0 && walk(&c, "{\"kind\":\"b\",\"x\":1}") == 0);
    CHECK(walk(&c, "{}") == 0 && walk(&c, "{\"kind\":\"c\",\"y\":1}") == 0);
    compiled_free(&c);
    // not provable: an error naming oneOf and where
    CHECK(
        fails_with("{\"properties\":{\"p\":{\"oneOf\":[{\"type\":\"string\",\"format\":\"email\"},"
                   "{\"type\":\"string\",\"maxLength\":5}]}}}",
                   GL_E_UNSUPPORTED, "'oneOf'", "/properties/p"));
    // lenient: compiled as anyOf with a warning
    struct gl_grammar_opts lo = g_opts;
    lo.lenient = 1;
    json_t *j = json_loads("{\"oneOf\":[{\"type\":\"string\",\"format\":\"email\"},{\"type\":"
                           "\"string\",\"maxLength\":5}],\"not\":{\"multipleOf\":9}}",
                           0, NULL);
    c = compile_json(j, &lo);
    json_decref(j);
    CHECK(c.st == GL_OK);
    CHECK(c.warnings && strstr(c.warnings, "oneOf") && strstr(c.warnings, "not"));
    compiled_free(&c);
}

TEST(test_errors_name_keyword_and_pointer)
{
    CHECK(fails_with("{\"properties\":{\"a/b~\":{\"if\":{\"format\":\"email\"},\"then\":{}}}}",
                     GL_E_UNSUPPORTED, "'if'", "/properties/a~1b~0"));
    CHECK(fails_with("{\"items\":{\"contains\":{\"type\":\"null\"}}}", GL_E_UNSUPPORTED,
                     "'contains'", "/items/contains"));
    CHECK(fails_with("{\"not\":{\"multipleOf\":2}}", GL_E_UNSUPPORTED, "'not'", "/not"));
    CHECK(fails_with("{\"unevaluatedProperties\":false}", GL_E_UNSUPPORTED,
                     "'unevaluatedProperties'", NULL));
    CHECK(fails_with("{\"type\":\"strin\"}", GL_E_INVAL, "'type'", NULL));
    CHECK(fails_with("{\"minLength\":-1}", GL_E_INVAL, "'minLength'", NULL));
    CHECK(fails_with("{\"properties\":{\"q\":{\"format\":\"regex\",\"type\":\"string\"}}}",
                     GL_E_UNSUPPORTED, "'format'", "/properties/q"));
    CHECK(fails_with("{\"$ref\":\"https://example.com/s.json#/a\"}", GL_E_UNSUPPORTED, "'$ref'",
                     "remote"));
    CHECK(fails_with("{\"$ref\":\"#/definitions/missing\"}", GL_E_INVAL, "'$ref'",
                     "does not resolve"));
    CHECK(fails_with("{\"type\":\"number\",\"multipleOf\":0.37}", GL_E_UNSUPPORTED, "'multipleOf'",
                     NULL));
    CHECK(fails_with("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", GL_E_UNSUPPORTED, "regex",
                     "/pattern"));
    // unknown keywords and annotations are ignored; unknown formats are annotations
    struct compiled c = compile_text("{\"x-custom\":{\"not\":1},\"title\":\"t\",\"examples\":[1],"
                                     "\"type\":\"string\",\"format\":\"int32\"}");
    CHECK(c.st == GL_OK);
    compiled_free(&c);
}

TEST(test_cycles)
{
    CHECK(fails_with("{\"$ref\":\"#\"}", GL_E_INVAL, "cycle", NULL));
    CHECK(fails_with("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"allOf\":[{\"$ref\":"
                     "\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
                     GL_E_INVAL, "cycle", NULL));
    CHECK(fails_with("{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#\"}]}", GL_E_INVAL, "cycle",
                     NULL));
    // through an object or array it is recursion, which is fine
    struct compiled c = compile_text("{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"array\","
                                     "\"items\":{\"$ref\":\"#\"}}]}");
    CHECK(c.st == GL_OK);
    compiled_free(&c);
}

TEST(test_raw_strings_at_pointer)
{
    json_t *doc = json_loads("{\"p\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":9},"
                             "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":"
                             "\"string\"}}}]},\"e\":{\"enum\":[\"a<b\",\"c\"]},"
                             "\"bad\":{\"uniqueItems\":true}}",
                             0, NULL);
    REQUIRE(doc);
    struct gl_gctx c = {.opts = &g_opts};
    struct gl_gir ir;
    struct gl_gir_builder b;
    struct gl_err err;
    int32_t root = -1;
    REQUIRE(gl_gir_builder_init(&b, &ir, g_opts.max_nodes, &err) == GL_OK);
    REQUIRE(gl_schema_build_at(&b, &c, doc, json_object_get(doc, "p"), "/tools/0/p", 1, &root,
                               &err) == GL_OK);
    const struct gl_gnode *n = &ir.nodes[root];
    REQUIRE(n->kind == GN_ALT && n->u.list.n == 2);
    const struct gl_gnode *str = &ir.nodes[n->u.list.kids[0]]; // anyOf member order
    const struct gl_gnode *obj = &ir.nodes[n->u.list.kids[1]];
    REQUIRE(obj->kind == GN_JOBJECT && str->kind == GN_JSTRING);
    CHECK(str->u.str.raw && str->u.str.max_chars == 9);
    // strings nested in JSON values are JSON strings
    REQUIRE(obj->u.obj.n_props == 1);
    CHECK(ir.nodes[obj->u.obj.props[0].value].kind == GN_JSTRING);
    CHECK(!ir.nodes[obj->u.obj.props[0].value].u.str.raw);
    // a raw value never contains '<': such enum members are left out
    REQUIRE(gl_schema_build_at(&b, &c, doc, json_object_get(doc, "e"), "/e", 1, &root, &err) ==
            GL_OK);
    n = &ir.nodes[root];
    REQUIRE(n->kind == GN_JSTRING && n->u.str.raw && n->u.str.n_regex == 1);
    CHECK(gl_regex_match(ir.regexes[n->u.str.regexes[0]], "c", 1));
    CHECK(!gl_regex_match(ir.regexes[n->u.str.regexes[0]], "a<b", 3));
    // errors carry the caller's pointer
    CHECK(gl_schema_build_at(&b, &c, doc, json_object_get(doc, "bad"), "/tools/1/parameters", 1,
                             &root, &err) == GL_E_UNSUPPORTED);
    CHECKF(strstr(err.msg, "/tools/1/parameters/uniqueItems"), "%s", err.msg);
    gl_gir_free(&ir);
    json_decref(doc);
}

// ---- hostile schemas: errors within the budget, never a hang or a crash ----

TEST(test_hostile)
{
    int64_t t0 = gl_time_us();
    // 10,000 nested properties
    json_t *root = json_object(), *cur = root;
    for (int i = 0; i < 10000; i++) {
        json_t *props = json_object(), *child = json_object();
        json_object_set_new(cur, "type", json_string("object"));
        json_object_set_new(props, "a", child);
        json_object_set_new(cur, "properties", props);
        cur = child;
    }
    struct compiled c = compile_json(root, &g_opts);
    CHECKF(c.st == GL_E_LIMIT && strstr(c.err.msg, "deeper"), "%d %s", (int)c.st, c.err.msg);
    compiled_free(&c);
    json_decref(root);

    // 10,000 nested allOf
    root = json_object();
    cur = root;
    for (int i = 0; i < 10000; i++) {
        json_t *child = json_object();
        json_object_set_new(cur, "allOf", json_pack("[o]", child));
        cur = child;
    }
    c = compile_json(root, &g_opts);
    CHECK(c.st == GL_E_LIMIT);
    compiled_free(&c);
    json_decref(root);

    // 10,000 nested anyOf under a sibling keyword (distributed, not memoised)
    root = json_object();
    json_object_set_new(root, "type", json_string("string"));
    cur = root;
    for (int i = 0; i < 10000; i++) {
        json_t *child = json_object();
        json_object_set_new(cur, "anyOf", json_pack("[o]", child));
        cur = child;
    }
    c = compile_json(root, &g_opts);
    CHECK(c.st == GL_E_LIMIT);
    compiled_free(&c);
    json_decref(root);

    // enum of 100,000 values
    json_t *e = json_array();
    for (int i = 0; i < 100000; i++)
        json_array_append_new(e, json_integer(i));
    root = json_pack("{so}", "enum", e);
    c = compile_json(root, &g_opts);
    CHECK(c.st == GL_E_LIMIT && strstr(c.err.msg, "'enum'"));
    compiled_free(&c);
    json_decref(root);

    // exponential sharing: d_i = array of (d_{i+1} or d_{i+1}), 40 levels: memoised
    json_t *defs = json_object();
    for (int i = 0; i < 40; i++) {
        char name[16], ref[32];
        snprintf(name, sizeof name, "d%d", i);
        snprintf(ref, sizeof ref, "#/$defs/d%d", i + 1);
        json_t *d = i == 39 ? json_pack("{ss}", "type", "null")
                            : json_pack("{sss{s[{ss}{ss}]}}", "type", "array", "items", "anyOf",
                                        "$ref", ref, "$ref", ref);
        json_object_set_new(defs, name, d);
    }
    root = json_pack("{sos{ss}}", "$defs", defs, "not", "type", "string");
    json_object_set_new(root, "$ref", json_string("#/$defs/d0"));
    c = compile_json(root, &g_opts);
    CHECKF(c.st == GL_OK && c.ir.n_nodes < 2000, "%d %s %d", (int)c.st, c.err.msg, c.ir.n_nodes);
    compiled_free(&c);
    json_decref(root);

    // a long $ref chain through anyOf
    defs = json_object();
    for (int i = 0; i < 5000; i++) {
        char name[16], ref[32];
        snprintf(name, sizeof name, "d%d", i);
        snprintf(ref, sizeof ref, "#/$defs/d%d", i + 1);
        json_object_set_new(defs, name,
                            json_pack("{s[{ss}{ss}]}", "anyOf", "$ref", ref, "type", "null"));
    }
    root = json_pack("{sos[{ss}]}", "$defs", defs, "anyOf", "$ref", "#/$defs/d0");
    c = compile_json(root, &g_opts);
    CHECK(c.st == GL_E_LIMIT || c.st == GL_E_INVAL);
    compiled_free(&c);
    json_decref(root);

    // a deadline already past: the budget error
    struct gl_grammar_opts o = g_opts;
    o.compile_budget_us = -1000000;
    defs = json_object();
    for (int i = 0; i < 200; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        json_object_set_new(defs, name, json_pack("{ss}", "type", "string"));
    }
    root = json_pack("{ssso}", "type", "object", "properties", defs);
    c = compile_json(root, &o);
    CHECK(c.st == GL_E_LIMIT && strstr(c.err.msg, "budget"));
    compiled_free(&c);
    json_decref(root);
    CHECKF(gl_time_us() - t0 < 5000000, "hostile schemas took %lld us",
           (long long)(gl_time_us() - t0));
}

// ---- acceptance: walk instance bytes through the matcher ----

// Reference semantics of the IR on a parsed value (what the matcher must implement), so a
// schema.c bug shows up even where the matcher would mask it, and vice versa.
static int ir_accepts(const struct gl_gir *ir, int32_t ni, json_t *x, int depth)
{
    if (depth > 200)
        return 0;
    const struct gl_gnode *n = &ir->nodes[ni];
    switch (n->kind) {
    case GN_ALT:
        for (int32_t i = 0; i < n->u.list.n; i++)
            if (ir_accepts(ir, n->u.list.kids[i], x, depth + 1))
                return 1;
        return 0;
    case GN_BYTES:
    case GN_REGEX: {
        char *d = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
        int ok = d && (n->kind == GN_BYTES
                           ? strlen(d) == n->u.bytes.len && !memcmp(d, n->u.bytes.p, strlen(d))
                           : gl_regex_match(ir->regexes[n->u.regex.re], d, strlen(d)));
        free(d);
        return ok;
    }
    case GN_JSTRING: {
        if (!json_is_string(x))
            return 0;
        const char *s = json_string_value(x);
        size_t len = json_string_length(x);
        int64_t chars = 0;
        for (size_t i = 0; i < len; i++)
            chars += ((uint8_t)s[i] & 0xC0) != 0x80;
        if (chars < n->u.str.min_chars || (n->u.str.max_chars >= 0 && chars > n->u.str.max_chars))
            return 0;
        for (int32_t i = 0; i < n->u.str.n_regex; i++)
            if (!gl_regex_match(ir->regexes[n->u.str.regexes[i]], s, len))
                return 0;
        return !(n->u.str.raw && memchr(s, '<', len));
    }
    case GN_JNUMBER: {
        if (!json_is_number(x))
            return 0;
        double d = json_number_value(x);
        const struct gl_gnum *g = &n->u.num;
        if (g->integer && floor(d) != d)
            return 0;
        if (g->has_min && (d < g->min || (g->excl_min && d == g->min)))
            return 0;
        return !(g->has_max && (d > g->max || (g->excl_max && d == g->max)));
    }
    case GN_JOBJECT: {
        const struct gl_gobj *o = &n->u.obj;
        if (!json_is_object(x))
            return 0;
        int64_t cnt = (int64_t)json_object_size(x);
        if (cnt < o->min_props || (o->max_props >= 0 && cnt > o->max_props))
            return 0;
        for (int32_t i = 0; i < o->n_props; i++)
            if (o->props[i].required &&
                !json_object_getn(x, (const char *)o->props[i].name.p, o->props[i].name.len))
                return 0;
        const char *k;
        size_t kl;
        json_t *v;
        json_object_keylen_foreach(x, k, kl, v)
        {
            int found = 0;
            for (int32_t i = 0; i < o->n_props && !found; i++) {
                if (o->props[i].name.len != kl || memcmp(o->props[i].name.p, k, kl))
                    continue;
                found = 1;
                if (!ir_accepts(ir, o->props[i].value, v, depth + 1))
                    return 0;
            }
            for (int32_t i = 0; i < o->n_patterns && !found; i++)
                if (gl_regex_match(ir->regexes[o->patterns[i].re], k, kl)) {
                    for (int32_t j = i; j < o->n_patterns; j++)
                        if (gl_regex_match(ir->regexes[o->patterns[j].re], k, kl) &&
                            !ir_accepts(ir, o->patterns[j].value, v, depth + 1))
                            return 0;
                    found = 1;
                }
            if (!found && (o->additional < 0 || !ir_accepts(ir, o->additional, v, depth + 1)))
                return 0;
        }
        return 1;
    }
    case GN_JARRAY: {
        const struct gl_garr *a = &n->u.arr;
        if (!json_is_array(x))
            return 0;
        int64_t cnt = (int64_t)json_array_size(x);
        if (cnt < a->min_items || (a->max_items >= 0 && cnt > a->max_items))
            return 0;
        for (size_t i = 0; i < json_array_size(x); i++) {
            int32_t k = (int64_t)i < a->n_prefix ? a->prefix[i] : a->items;
            if (k < 0 || !ir_accepts(ir, k, json_array_get(x, i), depth + 1))
                return 0;
            for (size_t j = 0; a->unique && j < i; j++)
                if (json_equal(json_array_get(x, i), json_array_get(x, j)))
                    return 0;
        }
        return 1;
    }
    default:
        return 0;
    }
}

static int ir_accepts_text(const struct compiled *c, const char *doc)
{
    json_t *x = json_loads(doc, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!x)
        return 0; // not JSON (a duplicate key counts as invalid): rejected
    int r = ir_accepts(&c->ir, c->root, x, 0);
    json_decref(x);
    return r;
}

// doc's bytes accepted one by one, and (need_end) the document complete after them.
static int walk_bytes(const struct compiled *c, const char *doc, int need_end)
{
    struct gl_mstate *s = NULL;
    struct gl_err err;
    if (gl_mstate_new(&s, &c->ir, NULL, &err) != GL_OK)
        return -1;
    gl_mstate_reset(s);
    int ok = 1;
    for (const char *p = doc; *p && ok; p++)
        ok = gl_mstate_advance_byte(s, (uint8_t)*p);
    ok = ok && (!need_end || gl_mstate_can_end(s));
    gl_mstate_free(s);
    return ok;
}

static int walk(const struct compiled *c, const char *doc)
{
    return walk_bytes(c, doc, 1);
}

struct accept_case {
    const char *schema;
    const char *valid[6];
    const char *invalid[8];
};

static const struct accept_case k_accept[] = {
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
     "\"string\"}},\"required\":[\"a\"],\"additionalProperties\":false}",
     {"{\"a\":1}", "{\"b\":\"x\",\"a\":-3}", "{\"a\":1,\"b\":\"\"}", "{\"\\u0061\":2}"},
     {"{}", "{\"a\":1.5}", "{\"a\":1,\"c\":1}", "{\"a\":1,\"a\":2}", "{\"b\":\"x\"}",
      "{\"a\":\"1\"}"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"\"ab\"", "\"abc\"", "\"\\u00e9\\u00e9\"", "\"\xc3\xa9\xc3\xa9\xc3\xa9\""},
     {"\"a\"", "\"abcd\"", "1", "null"}},
    {"{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":100}",
     {"-5", "0", "99", "42"},
     {"-6", "100", "1000", "1.5", "\"1\""}},
    {"{\"enum\":[\"red\",\"green\",null,1]}",
     {"\"red\"", "\"green\"", "null", "1", "\"\\u0072ed\""},
     {"\"blue\"", "\"re\"", "2", "true"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"}],\"items\":{\"type\":\"null\"},"
     "\"minItems\":1,\"maxItems\":3}",
     {"[true]", "[false,null]", "[true,null,null]"},
     {"[]", "[null]", "[true,true]", "[true,null,null,null]"}},
    {"{\"type\":\"string\",\"format\":\"date\"}",
     {"\"2024-02-29\"", "\"1999-12-31\""},
     {"\"2023-02-29\"", "\"2024-13-01\"", "\"24-01-01\"", "\"2024-01-32\""}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}",
     {"\"2024-02-29T12:30:00Z\"", "\"1999-12-31T23:59:59.123+05:30\""},
     {"\"2024-02-29 12:30:00\"", "\"2024-02-29T25:00:00Z\"", "\"2024-02-29T12:30:00\""}},
    {"{\"type\":\"string\",\"format\":\"email\"}",
     {"\"a.b@example.com\"", "\"x@y.z\""},
     // a dotless domain is RFC-valid but refused on purpose (schema.c: what validators accept)
     {"\"ab\"", "\"a@@b\"", "\"@b.com\"", "\"a b@c.d\"", "\"x@y\""}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}",
     {"\"123e4567-e89b-12d3-a456-426614174000\""},
     {"\"123e4567e89b12d3a456426614174000\"", "\"g23e4567-e89b-12d3-a456-426614174000\""}},
    {"{\"type\":\"string\",\"format\":\"ipv4\"}",
     {"\"192.168.0.1\"", "\"0.0.0.0\""},
     {"\"256.1.1.1\"", "\"1.2.3\"", "\"01.2.3.4\""}},
    {"{\"type\":\"string\",\"format\":\"ipv6\"}",
     {"\"::1\"", "\"2001:db8::ff00:42:8329\"", "\"::ffff:192.0.2.1\""},
     {"\"1:2:3:4:5:6:7:8:9\"", "\"12345::\"", "\":::\""}},
    {"{\"type\":\"string\",\"format\":\"uri\"}",
     {"\"https://example.com/a?b=c#d\"", "\"urn:isbn:0451450523\""},
     {"\"example.com\"", "\"http://exa mple.com\"", "\"/relative\""}},
    {"{\"type\":\"string\",\"format\":\"hostname\"}",
     {"\"example.com\"", "\"a-b.c\""},
     {"\"-a.com\"", "\"a..b\"", "\"a_b.com\""}},
    {"{\"type\":\"string\",\"pattern\":\"[0-9]{3}\"}",
     {"\"123\"", "\"ab1234\""},
     {"\"12\"", "\"a1b2c3\""}},
    {"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":3}]}",
     {"\"s\"", "3"},
     {"2", "null", "1.5"}},
    {"{\"type\":\"object\",\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}",
     {"{\"a\":1}", "{\"b\":1}", "{\"a\":1,\"c\":2}"},
     {"{}", "{\"a\":1,\"b\":2}", "{\"c\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"dependentRequired\":{\"a\":"
     "[\"b\"]}}",
     {"{}", "{\"b\":1}", "{\"a\":1,\"b\":2}"},
     {"{\"a\":1}"}},
    {"{\"type\":\"object\",\"not\":{\"required\":[\"x\"]}}",
     {"{}", "{\"y\":1}"},
     {"{\"x\":1}", "{\"y\":1,\"x\":null}", "{\"\\u0078\":1}"}},
    {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}},"
     "{\"properties\":{\"a\":{\"minimum\":5}},\"required\":[\"a\"]}]}",
     {"{\"a\":5}", "{\"a\":7,\"z\":[]}"},
     {"{\"a\":4}", "{\"a\":5.5}", "{}"}},
    {"{\"type\":\"object\",\"patternProperties\":{\"^n_\":{\"type\":\"number\"}},"
     "\"additionalProperties\":{\"type\":\"string\"}}",
     {"{\"n_1\":1,\"s\":\"x\"}", "{}"},
     {"{\"n_1\":\"x\"}", "{\"s\":1}"}},
    {"{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/$defs/t\"}}},\"additionalProperties\":false}},\"$ref\":"
     "\"#/$defs/t\"}",
     {"{}", "{\"c\":[]}", "{\"c\":[{\"c\":[{}]}]}"},
     {"{\"c\":[1]}", "{\"c\":[{\"d\":1}]}"}},
    {"{\"const\":{\"a\":[1,\"x\"],\"b\":null}}",
     {"{\"a\":[1,\"x\"],\"b\":null}", "{\"b\":null,\"a\":[1.0,\"\\u0078\"]}"},
     {"{\"a\":[1,\"x\"]}", "{\"a\":[1,\"x\"],\"b\":null,\"c\":1}", "{\"a\":[\"x\",1],\"b\":null}"}},
    {"{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":0,\"maximum\":20}",
     {"0", "5", "20"},
     {"3", "25", "-5"}},
    // if/then/else: (if and then) or (not-if and else); "not if" here is "k absent"
    {"{\"type\":\"object\",\"if\":{\"required\":[\"k\"]},\"then\":{\"required\":"
     "[\"v\"]},\"else\":{\"maxProperties\":0}}",
     {"{}", "{\"k\":1,\"v\":2}"},
     {"{\"k\":1}", "{\"v\":2}"}},
    // propertyNames with a pattern: every key must match it
    {"{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^[a-z]+$\"},"
     "\"properties\":{\"Bad\":{},\"ok\":{\"type\":\"integer\"}}}",
     {"{}", "{\"ok\":1,\"xyz\":null}"},
     {"{\"Bad\":1}", "{\"A1\":1}", "{\"ok\":\"s\"}"}},
    // oneOf discriminated by disjoint patterns on a required property
    {"{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
     "\"pattern\":\"^ok$\"},\"d\":{}},\"required\":[\"s\"]},{\"type\":\"object\","
     "\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^fail$\"},\"d\":{\"type\":"
     "\"array\"}},\"required\":[\"s\",\"d\"]}]}",
     {"{\"s\":\"ok\"}", "{\"s\":\"ok\",\"d\":1}", "{\"s\":\"fail\",\"d\":[]}"},
     {"{\"s\":\"fail\"}", "{\"s\":\"fail\",\"d\":1}", "{\"s\":\"other\"}"}},
    // dependentSchemas: a present makes b an integer
    {"{\"type\":\"object\",\"dependentSchemas\":{\"a\":{\"properties\":{\"b\":{\"type\":"
     "\"integer\"}}}}}",
     {"{\"b\":\"x\"}", "{\"a\":0,\"b\":1}", "{\"a\":0}"},
     {"{\"a\":0,\"b\":\"x\"}"}},
    // draft 4: 1.0 is not an integer
    {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\"}",
     {"1", "-20"},
     {"1.0", "1.5", "\"1\""}},
    {"{\"type\":[\"string\",\"null\"],\"maxLength\":1}", {"null", "\"a\""}, {"\"ab\"", "0"}},
    // issue 19, oneOf: disjoint through a member's own oneOf (string or array vs object)
    {"{\"oneOf\":[{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"array\"}]},{\"type\":\"object\"}]}",
     {"\"s\"", "[]", "{}"},
     {"1", "null", "true"}},
    // closed objects whose key patterns share no name, one needing a key: disjoint
    {"{\"oneOf\":[{\"type\":\"object\",\"patternProperties\":{\"^[0-9]+x$\":{}},"
     "\"additionalProperties\":false,\"minProperties\":1},{\"type\":\"object\","
     "\"patternProperties\":{\"^[a-z]+$\":{}},\"additionalProperties\":false}]}",
     {"{\"2x\":1}", "{\"ab\":1}", "{}"},
     {"{\"2x\":1,\"ab\":1}", "{\"A\":1}", "1"}},
    // object-only members with disjoint objects: every other value satisfies both
    {"{\"oneOf\":[{\"properties\":{\"k\":{\"const\":\"x\"}},\"required\":[\"k\"]},"
     "{\"properties\":{\"k\":{\"const\":\"y\"}},\"required\":[\"k\"]}]}",
     {"{\"k\":\"x\"}", "{\"k\":\"y\",\"z\":1}"},
     {"\"s\"", "1", "null", "{\"k\":\"z\"}", "{}"}},
    // a discriminator without `required`: objects without it satisfy both members
    {"{\"oneOf\":[{\"properties\":{\"t\":{\"const\":\"a\"},\"m\":{\"type\":\"string\"}}},"
     "{\"properties\":{\"t\":{\"const\":\"b\"},\"m\":{\"type\":\"string\"}}}]}",
     {"{\"t\":\"a\"}", "{\"t\":\"b\",\"m\":\"x\"}", "{\"t\":\"a\",\"x\":1}"},
     {"{\"t\":\"c\"}", "{}", "{\"m\":\"x\"}", "\"s\"", "{\"t\":\"a\",\"m\":1}"}},
    // an enum member loses the values another member takes (6.0 is 6)
    {"{\"oneOf\":[{\"enum\":[\"red\",\"orange\",6,null]},{\"enum\":[\"blue\",\"orange\",6,3]}]}",
     {"\"red\"", "null", "\"blue\"", "3"},
     {"\"orange\"", "6", "6.0", "\"green\"", "[]"}},
    // a types-only member covering the other branch's types empties that branch
    {"{\"type\":\"string\",\"oneOf\":[{\"type\":\"string\"},{\"type\":\"string\","
     "\"pattern\":\"^a\"}]}",
     {"\"b\"", "\"\"", "\"ba\""},
     {"\"a\"", "\"ab\"", "1"}},
    // issue 19, not: object keywords, counts, number and boolean enums, not not
    {"{\"type\":\"object\",\"not\":{\"properties\":{\"a\":{\"const\":1}},\"required\":[\"a\"]}}",
     {"{}", "{\"a\":2}", "{\"b\":1}"},
     {"{\"a\":1}", "{\"a\":1,\"b\":2}", "{\"a\":1.0}"}},
    {"{\"not\":{\"properties\":{\"a\":{\"type\":\"string\"}}}}",
     {"{\"a\":1}", "{\"a\":null,\"b\":\"x\"}"},
     {"{}", "{\"a\":\"s\"}", "1", "\"s\"", "[]"}},
    {"{\"type\":\"integer\",\"not\":{\"enum\":[0,5]}}",
     {"1", "-3", "6", "4"},
     {"0", "5", "5.0", "-0", "1.5"}},
    {"{\"not\":{\"const\":true}}", {"false", "1", "\"s\"", "null"}, {"true"}},
    {"{\"type\":\"array\",\"not\":{\"maxItems\":0}}", {"[1]", "[1,2]"}, {"[]", "{}"}},
    {"{\"not\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}}",
     {"\"a\"", "\"abcd\"", "1", "\"\""},
     {"\"ab\"", "\"abc\""}},
    {"{\"not\":{\"minimum\":1,\"exclusiveMaximum\":3}}",
     {"0", "3", "3.5", "0.99"},
     {"1", "2", "2.99", "\"s\"", "null"}},
    // not anyOf [A, B] = not A and not B (before 2026-12-04 this rewrite negated twice and was
    // saved only by refusing the result)
    {"{\"not\":{\"anyOf\":[{\"type\":\"string\"},{\"required\":[\"a\"]}]}}",
     {"1", "{\"b\":1}", "null"},
     {"\"s\"", "{\"a\":1}"}},
    {"{\"not\":{\"not\":{\"type\":\"string\"}}}", {"\"s\""}, {"1", "null", "{}"}},
    {"{\"not\":{\"oneOf\":[{\"type\":\"string\"}]}}", {"1", "null"}, {"\"s\""}},
};

TEST(test_acceptance)
{
    for (size_t i = 0; i < sizeof k_accept / sizeof k_accept[0]; i++) {
        const struct accept_case *k = &k_accept[i];
        struct compiled c = compile_text(k->schema);
        CHECKF(c.st == GL_OK, "schema %s: %s", k->schema, c.err.msg);
        if (c.st != GL_OK) {
            compiled_free(&c);
            continue;
        }
        for (int v = 0; v < 6 && k->valid[v]; v++) {
            CHECKF(ir_accepts_text(&c, k->valid[v]) == 1, "IR of %s rejects valid %s", k->schema,
                   k->valid[v]);
            CHECKF(walk(&c, k->valid[v]) == 1, "matcher on %s rejects valid %s", k->schema,
                   k->valid[v]);
        }
        for (int v = 0; v < 8 && k->invalid[v]; v++) {
            CHECKF(ir_accepts_text(&c, k->invalid[v]) == 0, "IR of %s accepts invalid %s",
                   k->schema, k->invalid[v]);
            CHECKF(walk(&c, k->invalid[v]) == 0, "matcher on %s accepts invalid %s", k->schema,
                   k->invalid[v]);
        }
        compiled_free(&c);
    }
}

// closed_objects (vLLM's default in the server): an object schema without additionalProperties
// takes no undeclared key -- the seed's empty-string key included; true / a schema / patterns /
// required names and any-value schemas still open it. Each case: schema, doc, accepted open,
// accepted closed.
TEST(test_closed_objects)
{
    static const struct {
        const char *schema, *doc;
        int open, closed;
    } k[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"a\":\"x\"}", 1,
         1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"\":\"answer\"}",
         1, 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}",
         "{\"a\":\"x\",\"b\":1}", 1, 0},
        {"{\"type\":\"object\"}", "{}", 1, 1},
        {"{\"type\":\"object\"}", "{\"b\":1}", 1, 0},
        {"{\"properties\":{\"a\":{}},\"additionalProperties\":true}", "{\"\":1}", 1, 1},
        {"{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"z\":1}", 1, 1},
        {"{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"z\":\"s\"}", 0, 0},
        {"{\"properties\":{\"o\":{\"type\":\"object\",\"properties\":{\"x\":{}}}}}",
         "{\"o\":{\"y\":1}}", 1, 0},
        {"{\"properties\":{\"a\":{}}}", "{\"a\":{\"zz\":[{\"\":1}]}}", 1, 1},
        {"{\"properties\":{\"a\":true}}", "{\"a\":{\"zz\":1}}", 1, 1},
        {"{\"patternProperties\":{\"^x\":{}}}", "{\"x1\":1}", 1, 1},
        {"{\"patternProperties\":{\"^x\":{}}}", "{\"y\":1}", 1, 0},
        {"{\"required\":[\"r\"]}", "{\"r\":1}", 1, 1},
        {"{\"required\":[\"r\"]}", "{\"r\":1,\"s\":2}", 1, 0},
        {"{\"items\":{\"properties\":{\"a\":{}}}}", "[{\"a\":1},{\"b\":2}]", 1, 0},
        {"{\"anyOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"b\":{}}}]}", "{\"b\":1}", 1,
         1},
        {"{\"anyOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"b\":{}}}]}",
         "{\"a\":1,\"b\":1}", 1, 0},
    };
    struct gl_grammar_opts co = g_opts;
    co.closed_objects = 1;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        json_t *j = json_loads(k[i].schema, 0, NULL);
        REQUIRE(j);
        for (int closed = 0; closed < 2; closed++) {
            struct compiled c = compile_json(j, closed ? &co : &g_opts);
            CHECKF(c.st == GL_OK, "%s: %s", k[i].schema, c.err.msg);
            int want = closed ? k[i].closed : k[i].open;
            if (c.st == GL_OK)
                CHECKF(walk(&c, k[i].doc) == want, "%s %s closed=%d: want %d", k[i].schema,
                       k[i].doc, closed, want);
            compiled_free(&c);
        }
        json_decref(j);
    }
}

// not {enum/const}: the excluded values are refused exactly, everything else of the type stays.
TEST(test_not_enum)
{
    static const struct {
        const char *schema, *doc;
        int ok;
    } k[] = {
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"intramural\"]}}", "\"intramural\"", 0},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"intramural\"]}}", "\"intramura\"", 1},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"intramural\"]}}", "\"intramurals\"", 1},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"intramural\"]}}", "\"\"", 1},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"a\"", 0},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"ab\"", 0},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"\"", 0},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"\\u00e9\"", 0},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"abc\"", 1},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"b\"", 1},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"éa\"", 1},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"ab\",\"a\",\"\",\"é\"]}}", "\"a\\nb\"", 1},
        {"{\"type\":[\"string\",\"null\"],\"not\":{\"const\":null}}", "null", 0},
        {"{\"type\":[\"string\",\"null\"],\"not\":{\"const\":null}}", "\"x\"", 1},
        {"{\"type\":\"string\",\"minLength\":1,\"not\":{\"const\":\"x\"}}", "\"x\"", 0},
        {"{\"type\":\"string\",\"minLength\":1,\"not\":{\"const\":\"x\"}}", "\"xy\"", 1},
        {"{\"type\":\"string\",\"not\":{\"type\":\"string\",\"enum\":[\"a.b\",\"[\"]}}", "\"a.b\"",
         0},
        {"{\"type\":\"string\",\"not\":{\"type\":\"string\",\"enum\":[\"a.b\",\"[\"]}}", "\"axb\"",
         1},
        {"{\"type\":\"string\",\"not\":{\"type\":\"string\",\"enum\":[\"a.b\",\"[\"]}}", "\"[\"",
         0},
        {"{\"type\":\"integer\",\"not\":{\"enum\":[\"x\"]}}", "3", 1},
        // not {pattern}: strings that fail it; other types satisfy a pattern, so they go
        {"{\"not\":{\"pattern\":\"\\\\$\"}}", "\"a$b\"", 0},
        {"{\"not\":{\"pattern\":\"\\\\$\"}}", "\"ab\"", 1},
        {"{\"not\":{\"pattern\":\"\\\\$\"}}", "1", 0},
        {"{\"type\":\"string\",\"minLength\":1,\"not\":{\"pattern\":\"^[.,* -]+$\"}}", "\"..\"", 0},
        {"{\"type\":\"string\",\"minLength\":1,\"not\":{\"pattern\":\"^[.,* -]+$\"}}", "\"J. Doe\"",
         1},
        {"{\"type\":\"string\",\"maxLength\":3,\"not\":{\"pattern\":\"^a\"}}", "\"bcd\"", 1},
        {"{\"type\":\"string\",\"maxLength\":3,\"not\":{\"pattern\":\"^a\"}}", "\"abc\"", 0},
        {"{\"type\":\"string\",\"maxLength\":3,\"not\":{\"pattern\":\"^a\"}}", "\"bcde\"", 0},
        {"{\"type\":[\"string\",\"null\"],\"not\":{\"type\":\"string\",\"pattern\":\"x\"}}", "null",
         1},
        {"{\"type\":[\"string\",\"null\"],\"not\":{\"type\":\"string\",\"pattern\":\"x\"}}",
         "\"axb\"", 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        struct compiled c = compile_text(k[i].schema);
        CHECKF(c.st == GL_OK, "%s: %s", k[i].schema, c.err.msg);
        if (c.st == GL_OK)
            CHECKF(walk(&c, k[i].doc) == k[i].ok, "%s %s: want %d", k[i].schema, k[i].doc, k[i].ok);
        compiled_free(&c);
    }
    // still refused: an enum of containers, and a `not` of an array's items (needs contains)
    CHECK(fails_with("{\"not\":{\"enum\":[[1]]}}", GL_E_UNSUPPORTED, "'not'", "at /not"));
    CHECK(fails_with("{\"not\":{\"items\":{\"type\":\"string\"}}}", GL_E_UNSUPPORTED, "'not'",
                     "at /not"));
}

// multipleOf a / 10^s (a = 2^i 5^j): exact decimal multiples, any spelling without exponent.
TEST(test_multiple_of_decimal)
{
    static const struct {
        const char *schema;
        const char *ok[8], *bad[6];
    } k[] = {
        {"{\"type\":\"number\",\"multipleOf\":0.01}",
         {"1", "1.5", "1.25", "1.250", "-3.07", "0.07", "0", NULL},
         {"1.255", "1e2", "1.2501", "\"1\"", NULL}},
        {"{\"type\":\"number\",\"multipleOf\":0.25}",
         {"1", "1.25", "1.5", "1.50", "2.75", "0.0", "-0.75", NULL},
         {"1.2", "1.125", "1.05", "0.3", NULL}},
        {"{\"type\":\"number\",\"multipleOf\":10}",
         {"10", "100", "0", "-20", "10.0", "1230", NULL},
         {"5", "15", "10.5", "101", NULL}},
        {"{\"type\":\"integer\",\"multipleOf\":1000}",
         {"1000", "0", "-12000", NULL},
         {"1000.0", "100", "1500", "10", NULL}},
        {"{\"type\":\"number\",\"multipleOf\":0.5,\"minimum\":0}",
         {"0.5", "3", "0", "12.50", NULL},
         {"-0.5", "0.25", "-1", NULL}},
        {"{\"type\":[\"number\",\"null\"],\"multipleOf\":0.1}",
         {"null", "0.1", "12.3", "7", NULL},
         {"0.15", "\"x\"", NULL}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        struct compiled c = compile_text(k[i].schema);
        CHECKF(c.st == GL_OK, "%s: %s", k[i].schema, c.err.msg);
        for (int j = 0; c.st == GL_OK && k[i].ok[j]; j++)
            CHECKF(walk(&c, k[i].ok[j]) == 1, "%s: %s refused", k[i].schema, k[i].ok[j]);
        for (int j = 0; c.st == GL_OK && k[i].bad[j]; j++)
            CHECKF(walk(&c, k[i].bad[j]) == 0, "%s: %s accepted", k[i].schema, k[i].bad[j]);
        compiled_free(&c);
    }
    // a factor other than 2 and 5 with no bound: still refused
    CHECK(fails_with("{\"type\":\"number\",\"multipleOf\":0.03}", GL_E_UNSUPPORTED, "'multipleOf'",
                     "/multipleOf"));
}

// ---- multipleOf on a bounded number: the matcher's decimal grid, against brute force ----

struct grid_case {
    const char *schema;
    double lo, hi; // the bounds as written (NAN: absent)
    int excl_lo, excl_hi;
    int64_t a, s; // multipleOf a / 10^s
    int integer;  // no fraction spelled
};

// The value N / 10^s of a grid point satisfies the bounds (double comparison, as ajv and
// python-jsonschema compare).
static int grid_in_range(const struct grid_case *g, int64_t n)
{
    char t[40];
    int64_t p = 1;
    for (int i = 0; i < g->s; i++)
        p *= 10;
    int64_t m = n < 0 ? -n : n;
    snprintf(t, sizeof t, "%s%lld.%0*lld", n < 0 ? "-" : "", (long long)(m / p), (int)g->s,
             (long long)(m % p));
    double v = strtod(t, NULL);
    if (!isnan(g->lo) && (g->excl_lo ? !(v > g->lo) : !(v >= g->lo)))
        return 0;
    if (!isnan(g->hi) && (g->excl_hi ? !(v < g->hi) : !(v <= g->hi)))
        return 0;
    return 1;
}

// A grid point as spelled: sign, integer part, the s fraction digits with trailing zeros trimmed.
struct spelled {
    int neg, zero;
    char ip[24], fr[16];
    double value;
};

static void spell(struct spelled *sp, int64_t n, int s)
{
    int64_t p = 1;
    for (int i = 0; i < s; i++)
        p *= 10;
    int64_t m = n < 0 ? -n : n;
    sp->neg = n < 0;
    sp->zero = n == 0;
    snprintf(sp->ip, sizeof sp->ip, "%lld", (long long)(m / p));
    int64_t f = m % p;
    for (int i = s - 1; i >= 0; i--, f /= 10)
        sp->fr[i] = (char)('0' + f % 10);
    sp->fr[s] = 0;
    for (int fl = s; fl > 0 && sp->fr[fl - 1] == '0'; fl--)
        sp->fr[fl - 1] = 0;
    char t[48];
    snprintf(t, sizeof t, "%s%s.%s0", sp->neg ? "-" : "", sp->ip, sp->fr);
    sp->value = strtod(t, NULL);
}

// x (a number's text so far, no exponent) is a prefix of a spelling of sp: an optional "-"
// (required below 0, allowed at 0), the integer part, then nothing or "." and the trimmed
// fraction digits followed by any zeros (at least one digit after ".").
static int prefix_of(const char *x, const struct spelled *sp, int integer)
{
    if (*x == '-') {
        if (!sp->neg && !sp->zero)
            return 0;
        x++;
    } else if (*x && sp->neg) {
        return 0;
    }
    size_t i = 0;
    for (; x[i] && x[i] != '.'; i++)
        if (x[i] != sp->ip[i])
            return 0;
    if (!x[i])
        return 1;
    if (sp->ip[i] || integer)
        return 0;
    size_t fl = strlen(sp->fr);
    for (size_t j = 0; x[i + 1 + j]; j++)
        if (x[i + 1 + j] != (j < fl ? sp->fr[j] : '0'))
            return 0;
    return 1;
}

TEST(test_multiple_of_grid)
{
    static const char k_alpha[] = "-0125.";
    const struct grid_case k[] = {
        // pydantic condecimal(gt=0, le=10000, multiple_of=0.01)
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":12,\"multipleOf\":0.01}", 0, 12,
         1, 0, 1, 2, 0},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":2.5,\"multipleOf\":0.25}", 0, 2.5,
         1, 0, 25, 2, 0},
        {"{\"type\":\"number\",\"minimum\":-2.5,\"exclusiveMaximum\":1,\"multipleOf\":0.5}", -2.5,
         1, 0, 1, 5, 1, 0},
        {"{\"type\":\"number\",\"minimum\":0.005,\"maximum\":0.05,\"multipleOf\":0.01}", 0.005,
         0.05, 0, 0, 1, 2, 0},
        {"{\"type\":\"number\",\"minimum\":-900,\"maximum\":-0.2,\"multipleOf\":0.3}", -900, -0.2,
         0, 0, 3, 1, 0},
        {"{\"type\":\"integer\",\"minimum\":0,\"maximum\":9000,\"multipleOf\":7}", 0, 9000, 0, 0, 7,
         0, 1},
        {"{\"type\":\"number\",\"minimum\":0.001,\"maximum\":0.009,\"multipleOf\":0.01}", 0.001,
         0.009, 0, 0, 1, 2, 0}, // no multiple in range: nothing accepted
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const struct grid_case *g = &k[i];
        struct compiled c = compile_text(g->schema);
        CHECKF(c.st == GL_OK, "%s: %s", g->schema, c.err.msg);
        if (c.st != GL_OK)
            continue;
        // The valid grid points, by a linear scan over scaled values |N| < 10^5.
        struct spelled *v = malloc(200001 * sizeof *v);
        REQUIRE(v);
        int nv = 0;
        for (int64_t n = -100000; n <= 100000; n++)
            if (n % g->a == 0 && grid_in_range(g, n))
                spell(&v[nv++], n, (int)g->s);
        // Every string over k_alpha of 1 to 5 bytes: the matcher's prefix verdict against "a
        // prefix of some valid value's spelling", its final verdict against "a whole spelling".
        int n_pref = 0, n_bad = 0;
        char x[6];
        int64_t combos = 1; // strings of len bytes
        for (int len = 1; len <= 5; len++) {
            combos *= (int64_t)(sizeof k_alpha - 1);
            for (int64_t code = 0; code < combos; code++) {
                int64_t cc = code;
                for (int j = 0; j < len; j++, cc /= (int64_t)(sizeof k_alpha - 1))
                    x[j] = k_alpha[cc % (int64_t)(sizeof k_alpha - 1)];
                x[len] = 0;
                int want = 0, fin = 0;
                int whole = strcmp(x, "-") != 0 && x[len - 1] != '.';
                double xv = whole ? strtod(x, NULL) : 0;
                for (int j = 0; j < nv && !fin; j++)
                    if (prefix_of(x, &v[j], g->integer)) {
                        want = 1;
                        fin = whole && xv == v[j].value;
                    }
                int got = walk_bytes(&c, x, 0), fgot = walk(&c, x);
                n_pref += want;
                if (got != want && n_bad++ < 5)
                    fprintf(stderr, "  %s: prefix \"%s\": matcher %d, brute force %d\n", g->schema,
                            x, got, want);
                if (fgot != fin && n_bad++ < 5)
                    fprintf(stderr, "  %s: \"%s\": matcher accepts %d, brute force %d\n", g->schema,
                            x, fgot, fin);
            }
        }
        CHECKF(n_bad == 0, "%s: %d disagreements", g->schema, n_bad);
        CHECKF(nv == 0 || n_pref > 0, "%s: no prefix exercised", g->schema);
        free(v);
        compiled_free(&c);
    }
    // One bound: magnitudes up to the grid's 10^19 scaled limit.
    struct compiled c = compile_text("{\"type\":\"number\",\"maximum\":-0.2,\"multipleOf\":0.3}");
    REQUIRE(c.st == GL_OK);
    static const char *const ok[] = {"-0.3", "-0.60", "-21000", "-3000000000.3"};
    static const char *const bad[] = {"-0.2", "0", "-0.31", "0.3", "-0.0"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        CHECKF(walk(&c, ok[i]) == 1, "%s refused", ok[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(walk(&c, bad[i]) == 0, "%s accepted", bad[i]);
    compiled_free(&c);
}

// uniqueItems over strings: an item equal to an earlier one (after decoding escapes) is refused
// at its closing quote; over an enum, a prefix no unseen value extends is refused at once (no
// dead end), and ',' once every value is an item. Each case: schema, text, whole document
// accepted (1/0), or a prefix that must be accepted (2) / refused (3).
TEST(test_unique_items)
{
#define PLAIN "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}"
#define EN    "{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"ab\",\"b\"]},\"uniqueItems\":true}"
#define PAT                                                                                        \
    "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z][a-z0-9_]*$\"},"       \
    "\"uniqueItems\":true}"
#define NEST                                                                                       \
    "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\","            \
    "\"minLength\":1},\"uniqueItems\":true}}"
    static const struct {
        const char *schema, *doc;
        int ok;
    } k[] = {
        {PLAIN, "[]", 1},
        {PLAIN, "[\"a\",\"b\",\"ab\",\"\"]", 1},
        {PLAIN, "[\"a\",\"b\",\"a\"]", 0},
        {PLAIN, "[\"a\",\"\\u0061\"]", 0},
        {PLAIN, "[\"\\u0061\",\"a\"]", 0},
        {PLAIN, "[\"\xc3\xa9\",\"\\u00e9\"]", 0},
        {PLAIN, "[\"\\ud83d\\ude00\",\"\xf0\x9f\x98\x80\"]", 0},
        {PLAIN, "[\"a\\\"\",\"a\\u0022\"]", 0},
        {PLAIN, "[\"a\\\"\",\"a\"]", 1},
        {PLAIN, "[\"\",\"\"]", 0},
        {PLAIN, "[\"ab\",\"a\",\"abc\",\"b\"]", 1},
        {PLAIN, "[\"a\",\"b\",\"a", 2}, // "a" can still grow into "ab..."
        {PLAIN, "[\"a\",\"b\",\"a\"", 3},
        {EN, "[\"a\",\"ab\",\"b\"]", 1},
        {EN, "[\"b\",\"a\"]", 1},
        {EN, "[\"a\",\"a\"]", 0},
        {EN, "[\"ab\",\"a\",\"ab\"]", 0},
        {EN, "[\"b\",\"b", 3},        // no unseen value starts with "b"
        {EN, "[\"a\",\"a", 2},        // "ab" is still unseen
        {EN, "[\"ab\",\"a\",\"a", 3}, // neither "a" nor "ab" is left
        {EN, "[\"ab\",\"a\",\"\\u0062", 2},
        {EN, "[\"ab\",\"a\",\"\\u0061", 3}, // an escape that decodes to a taken prefix
        {EN, "[\"ab\",\"a\",\"\\u006", 2},  // ...whose last digit may still give "b"
        {EN, "[\"a\",\"ab\",\"b\",", 3},    // every value is an item: no fourth
        {EN, "[\"a\",\"c\"]", 0},
        {NEST, "[[\"a\",\"b\"],[\"a\",\"b\"],[\"b\",\"a\"]]", 1}, // the outer array is not unique
        {NEST, "[[\"a\",\"b\"],[\"b\",\"b\"]]", 0},
        {NEST, "[[\"a\"],[\"\\u0061\",\"a\"]]", 0},
        {NEST, "[[\"x\",\"y\"],[\"y\",\"x\",\"z\"],[]]", 1},
        // a pattern whose every state has infinitely many completions
        {PAT, "[\"a\",\"a_1\",\"b\"]", 1},
        {PAT, "[\"a_1\",\"b\",\"a\\u005f1\"]", 0},
        {PAT, "[\"a\",\"1\"]", 0},
    };
#undef PLAIN
#undef PAT
#undef EN
#undef NEST
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        struct compiled c = compile_text(k[i].schema);
        CHECKF(c.st == GL_OK, "%s: %s", k[i].schema, c.err.msg);
        if (c.st == GL_OK && k[i].ok < 2)
            CHECKF(walk(&c, k[i].doc) == k[i].ok, "%s %s: want %d", k[i].schema, k[i].doc, k[i].ok);
        if (c.st == GL_OK && k[i].ok >= 2)
            CHECKF(walk_bytes(&c, k[i].doc, 0) == (k[i].ok == 2), "%s prefix %s: want %s",
                   k[i].schema, k[i].doc, k[i].ok == 2 ? "accepted" : "refused");
        compiled_free(&c);
    }
    // an enum's unique items cap maxItems at its size; more than that is no array at all
    CHECK(fails_with("{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"uniqueItems\":true,"
                     "\"minItems\":3}",
                     GL_E_INVAL, "accepts no value", NULL));
    // still refused: strings whose completions may run out (maxLength, pattern), other items
    CHECK(fails_with("{\"items\":{\"type\":\"string\",\"maxLength\":2},\"uniqueItems\":true}",
                     GL_E_UNSUPPORTED, "'uniqueItems'", "/uniqueItems"));
    CHECK(
        fails_with("{\"items\":{\"type\":\"string\",\"pattern\":\"^[ab]$\"},\"uniqueItems\":true}",
                   GL_E_UNSUPPORTED, "'uniqueItems'", "/uniqueItems"));
    // a pattern with a state that must end soon ("2x" can only close), a complement, two regexes
    CHECK(fails_with("{\"items\":{\"type\":\"string\",\"pattern\":\"^[0-9]+x$\"},"
                     "\"uniqueItems\":true}",
                     GL_E_UNSUPPORTED, "'uniqueItems'", "/uniqueItems"));
    CHECK(fails_with("{\"items\":{\"type\":\"string\",\"not\":{\"pattern\":\"a\"}},"
                     "\"uniqueItems\":true}",
                     GL_E_UNSUPPORTED, "'uniqueItems'", "/uniqueItems"));
    CHECK(fails_with("{\"items\":{\"type\":\"string\",\"pattern\":\"^a*$\",\"format\":\"email\"},"
                     "\"uniqueItems\":true}",
                     GL_E_UNSUPPORTED, "'uniqueItems'", "/uniqueItems"));
    CHECK(fails_with("{\"items\":{\"type\":\"integer\"},\"uniqueItems\":true}", GL_E_UNSUPPORTED,
                     "'uniqueItems'", "/uniqueItems"));
    CHECK(fails_with("{\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"string\"},"
                     "\"uniqueItems\":true}",
                     GL_E_UNSUPPORTED, "'uniqueItems'", "/uniqueItems"));
}

int main(void)
{
    g_opts = gl_grammar_default_opts();
    g_opts.ws_max = 0;
    RUN_TESTS(test_string_bounds, test_integer_bounds, test_object_shape,
              test_escaped_pointer_and_pattern_props, test_enum_const, test_types_and_any,
              test_arrays, test_ref_recursion_shares_nodes, test_allof_merge, test_oneof,
              test_errors_name_keyword_and_pointer, test_cycles, test_raw_strings_at_pointer,
              test_hostile, test_acceptance, test_closed_objects, test_not_enum,
              test_multiple_of_decimal, test_multiple_of_grid, test_unique_items);
}
