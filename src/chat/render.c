// SPDX-License-Identifier: MIT
// chat/render: native transcription of the Muse Glimmer release chat template (see render.h).
// Each static function below mirrors one template macro or branch; comments quote the Jinja
// construct whose Python semantics they reproduce (truthiness, str(), json.dumps). Output goes
// to one growable byte buffer; the first error stops rendering and names messages[i]/tools[i].
#include "chat/render.h"

#include "base/buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rctx {
    struct gl_buf out;
    struct gl_err *err;
    gl_status st;
    const json_t *messages, *tools;
    const char *strength, *cutoff, *date; // template variables, NULL when falsy
    const json_t *ns_desc;                // object or NULL
};

static void put_str_value(struct gl_buf *b, const json_t *s) // a JSON string, NUL bytes included
{
    gl_buf_put(b, json_string_value(s), json_string_length(s));
}

// Records the first error; returns 0 so callers can `return fail(...)`.
static int fail(struct rctx *c, gl_status code, const char *fmt, ...) GL_PRINTF(3, 4);
static int fail(struct rctx *c, gl_status code, const char *fmt, ...)
{
    if (c->st != GL_OK)
        return 0;
    c->st = code;
    if (c->err) {
        char msg[GL_ERR_MSG_CAP];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        gl_err_set(c->err, code, "chat render: %s", msg);
    }
    return 0;
}

// Python truthiness of a JSON value (None, False, 0, 0.0, "", [], {} are false; absent = None).
static int truthy(const json_t *v)
{
    if (!v)
        return 0;
    switch (json_typeof(v)) {
    case JSON_NULL:
    case JSON_FALSE:
        return 0;
    case JSON_TRUE:
        return 1;
    case JSON_INTEGER:
        return json_integer_value(v) != 0;
    case JSON_REAL:
        return json_real_value(v) != 0.0;
    case JSON_STRING:
        return json_string_length(v) != 0;
    case JSON_ARRAY:
        return json_array_size(v) != 0;
    case JSON_OBJECT:
        return json_object_size(v) != 0;
    }
    return 0;
}

// Python repr(float): shortest round-trip digits; exponent form when the decimal exponent is
// < -4 or >= 16 (e.g. 1e-05, 1e+16), else fixed with at least one fractional digit (100.0).
static int put_pyfloat(struct gl_buf *b, double x)
{
    if (!isfinite(x))
        return -1;
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    // tmp = [-]d[.ddd]e±XX -> digits + decimal exponent
    char digits[24];
    size_t nd = 0;
    const char *s = tmp;
    if (*s == '-') {
        gl_buf_put(b, "-", 1);
        s++;
    }
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    int e10 = atoi(s + 1); // value = d.ddd * 10^e10
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int decpt = e10 + 1; // value = 0.ddd * 10^decpt
    if (decpt > 16 || decpt < -3) {
        gl_buf_put(b, digits, 1);
        if (nd > 1) {
            gl_buf_put(b, ".", 1);
            gl_buf_put(b, digits + 1, nd - 1);
        }
        snprintf(tmp, sizeof tmp, "e%c%02d", e10 < 0 ? '-' : '+', abs(e10));
        gl_buf_puts(b, tmp);
    } else if (decpt <= 0) {
        gl_buf_put(b, "0.", 2);
        for (int i = 0; i < -decpt; i++)
            gl_buf_put(b, "0", 1);
        gl_buf_put(b, digits, nd);
    } else if ((size_t)decpt < nd) {
        gl_buf_put(b, digits, (size_t)decpt);
        gl_buf_put(b, ".", 1);
        gl_buf_put(b, digits + decpt, nd - (size_t)decpt);
    } else {
        gl_buf_put(b, digits, nd);
        for (size_t i = nd; i < (size_t)decpt; i++)
            gl_buf_put(b, "0", 1);
        gl_buf_put(b, ".0", 2);
    }
    return 0;
}

static void put_int(struct gl_buf *b, json_int_t v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, v);
    gl_buf_puts(b, tmp);
}

// json.dumps string escaping with ensure_ascii=False: only " \ and C0 controls are escaped.
static void put_json_string(struct gl_buf *b, const char *s, size_t n)
{
    gl_buf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (ch == '"')
            esc = "\\\"";
        else if (ch == '\\')
            esc = "\\\\";
        else if (ch == '\n')
            esc = "\\n";
        else if (ch == '\r')
            esc = "\\r";
        else if (ch == '\t')
            esc = "\\t";
        else if (ch == '\b')
            esc = "\\b";
        else if (ch == '\f')
            esc = "\\f";
        else if (ch < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", ch);
            esc = u;
        }
        if (esc) {
            gl_buf_put(b, s + run, i - run);
            gl_buf_puts(b, esc);
            run = i + 1;
        }
    }
    gl_buf_put(b, s + run, n - run);
    gl_buf_put(b, "\"", 1);
}

// One value as the template writes it. py = 0: `x | tojson` (json.dumps: null, true, false, quoted
// strings, lists, dicts); py = 1: `{{ x }}` (Python str(): None, True, False, a string's bare
// text; lists and dicts are refused, their repr is not copied). Numbers print alike in both.
// Returns -1 for a refused value, a non-finite float, or nesting deeper than 512.
static int put_value(struct gl_buf *b, const json_t *v, int py, int depth)
{
    if (depth > 512)
        return -1;
    switch (json_typeof(v)) {
    case JSON_NULL:
        gl_buf_puts(b, py ? "None" : "null");
        return 0;
    case JSON_TRUE:
        gl_buf_puts(b, py ? "True" : "true");
        return 0;
    case JSON_FALSE:
        gl_buf_puts(b, py ? "False" : "false");
        return 0;
    case JSON_INTEGER:
        put_int(b, json_integer_value(v));
        return 0;
    case JSON_REAL:
        return put_pyfloat(b, json_real_value(v));
    case JSON_STRING:
        if (py)
            put_str_value(b, v);
        else
            put_json_string(b, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_ARRAY: {
        if (py)
            return -1;
        gl_buf_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                gl_buf_put(b, ", ", 2);
            if (put_value(b, json_array_get(v, i), 0, depth + 1))
                return -1;
        }
        gl_buf_put(b, "]", 1);
        return 0;
    }
    case JSON_OBJECT: {
        if (py)
            return -1;
        gl_buf_put(b, "{", 1);
        int first = 1;
        const char *k;
        size_t klen;
        json_t *item;
        json_object_keylen_foreach((json_t *)v, k, klen, item)
        {
            if (!first)
                gl_buf_put(b, ", ", 2);
            first = 0;
            put_json_string(b, k, klen);
            gl_buf_put(b, ": ", 2);
            if (put_value(b, item, 0, depth + 1))
                return -1;
        }
        gl_buf_put(b, "}", 1);
        return 0;
    }
    }
    return -1;
}

char *gl_chat_tojson(const json_t *v, size_t *len)
{
    struct gl_buf b = {0};
    gl_buf_put(&b, "", 0);
    if (!v || put_value(&b, v, 0, 0) || b.oom) {
        gl_free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}

// Request-level part-type normalisation (OpenAI shapes -> the template's names).
static const char *part_type(const json_t *part)
{
    const char *t = json_string_value(json_object_get(part, "type"));
    if (!t || strlen(t) != json_string_length(json_object_get(part, "type")))
        return NULL;
    if (!strcmp(t, "image_url") || !strcmp(t, "input_image"))
        return "image";
    if (!strcmp(t, "video_url"))
        return "video";
    if (!strcmp(t, "input_text"))
        return "text";
    return t;
}

// macro render_content(content)
static int render_content(struct rctx *c, struct gl_buf *b, const json_t *content, size_t mi)
{
    if (!content || json_is_null(content) || json_is_object(content))
        return 1; // undefined/None render nothing; iterating a dict yields keys -> no parts match
    if (json_is_string(content)) {
        put_str_value(b, content);
        return 1;
    }
    if (!json_is_array(content))
        return fail(c, GL_E_INVAL,
                    "messages[%zu].content: a %s is not iterable (need a string, "
                    "null or an array of parts)",
                    mi, json_is_boolean(content) ? "bool" : "number");
    for (size_t i = 0; i < json_array_size(content); i++) {
        const json_t *part = json_array_get(content, i);
        if (!json_is_object(part))
            continue; // part['type'] of a non-mapping is undefined
        const char *t = part_type(part);
        if (!t)
            continue;
        if (!strcmp(t, "image")) {
            gl_buf_puts(b, "<|patch|>");
        } else if (!strcmp(t, "video")) {
            gl_buf_puts(b, "<|video|>");
        } else if (!strcmp(t, "text")) {
            const json_t *text = json_object_get(part, "text");
            if (text && put_value(b, text, 1, 0))
                return fail(c, GL_E_INVAL, "messages[%zu].content[%zu].text: must be a string", mi,
                            i);
        }
    }
    return 1;
}

// '<|start|>...' + x: Jinja raises TypeError unless x is a string.
static const char *need_str(struct rctx *c, const json_t *v, const char *what, size_t i)
{
    if (!json_is_string(v)) {
        fail(c, GL_E_INVAL, "%s[%zu]: must be a string (the template concatenates it)", what, i);
        return NULL;
    }
    return json_string_value(v);
}

static const json_t *tool_fn(const json_t *tool) // tool.function if defined else tool
{
    const json_t *fn = json_object_get(tool, "function");
    return fn ? fn : tool;
}

// fn.name.split('.')[0] appended to list *ns (an array of JSON strings) if not yet present.
static void add_namespace(json_t *ns, const json_t *name)
{
    const char *s = json_string_value(name);
    size_t n = json_string_length(name);
    const char *dot = memchr(s, '.', n);
    size_t len = dot ? (size_t)(dot - s) : n;
    for (size_t i = 0; i < json_array_size(ns); i++) {
        const json_t *e = json_array_get(ns, i);
        if (json_string_length(e) == len && !memcmp(json_string_value(e), s, len))
            return;
    }
    json_array_append_new(ns, json_stringn(s, len));
}

// Validates tools once (name a string) and returns the distinct namespaces in first-seen order
// (new reference), or NULL after fail(). A function without description or parameters is what
// the SDKs' helpers send (openai's zodFunction has no description): vLLM's request model turns
// the missing field into None, so it renders as `null` (fn_field).
static json_t *tool_namespaces(struct rctx *c)
{
    json_t *ns = json_array();
    if (!ns) {
        fail(c, GL_E_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(c->tools); i++) {
        const json_t *tool = json_array_get(c->tools, i);
        const json_t *fn = json_is_object(tool) ? tool_fn(tool) : NULL;
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name"))) {
            fail(c, GL_E_INVAL, "tools[%zu]: need an object with a string function name", i);
            json_decref(ns);
            return NULL;
        }
        add_namespace(ns, json_object_get(fn, "name"));
    }
    return ns;
}

// fn[key] as vLLM's FunctionDefinition holds it: an absent description or parameters is None,
// which tojson writes as null.
static const json_t *fn_field(const json_t *fn, const char *key)
{
    const json_t *v = json_object_get(fn, key);
    return v ? v : json_null();
}

static int put_tojson_or_fail(struct rctx *c, const json_t *v, const char *where, size_t i)
{
    if (put_value(&c->out, v, 0, 0))
        return fail(c, GL_E_INVAL,
                    "%s[%zu]: value cannot be written as JSON (non-finite or "
                    "nested too deeply)",
                    where, i);
    return 1;
}

// macro render_tool_defs(tools)
static int render_tool_defs(struct rctx *c, const json_t *ns)
{
    struct gl_buf *b = &c->out;
    gl_buf_puts(b,
                "In this environment you have access to a set of tools you can use to answer the "
                "user's question.\n\n"
                "You can invoke a function by writing a \"<atem:function_calls>\" block like the "
                "following:\n"
                "<atem:function_calls>\n<atem:invoke name=\"$FUNCTION_NAME\">\n<atem:parameter "
                "name=\"$PARAMETER_NAME\">$PARAMETER_VALUE</atem:parameter>\n...\n</atem:invoke>\n"
                "</atem:function_calls>\n\n"
                "String and scalar parameters should be specified as is, while lists and objects "
                "should use JSON format. Note that spaces for string values are not stripped. The "
                "output is not expected to be valid XML and is parsed with regular expressions.\n"
                "Here are the functions available in JSONSchema format:\n"
                "// Tool metadata\n");
    for (size_t i = 0; i < json_array_size(ns); i++) {
        const json_t *tns = json_array_get(ns, i);
        const json_t *desc = c->ns_desc ? json_object_getn(c->ns_desc, json_string_value(tns),
                                                           json_string_length(tns))
                                        : NULL;
        gl_buf_puts(b, "{\"name\": ");
        put_json_string(b, json_string_value(tns), json_string_length(tns));
        gl_buf_puts(b, ", \"description\": ");
        if (desc) {
            if (!put_tojson_or_fail(c, desc, "tool_namespace_descriptions", i))
                return 0;
        } else {
            gl_buf_puts(b, "\"\"");
        }
        gl_buf_puts(b, "}\n");
    }
    gl_buf_puts(b, "// Function schemas");
    for (size_t i = 0; i < json_array_size(c->tools); i++) {
        const json_t *fn = tool_fn(json_array_get(c->tools, i));
        gl_buf_puts(b, "\n{\"name\": ");
        put_json_string(b, json_string_value(json_object_get(fn, "name")),
                        json_string_length(json_object_get(fn, "name")));
        // A missing description or parameters renders as null, as vLLM does: its request model
        // fills the absent optional field with None, and the template's tojson prints null (the
        // openai SDK's zodFunction sends no description).
        gl_buf_puts(b, ", \"description\": ");
        if (!put_tojson_or_fail(c, fn_field(fn, "description"), "tools", i))
            return 0;
        gl_buf_puts(b, ", \"parameters\": ");
        if (!put_tojson_or_fail(c, fn_field(fn, "parameters"), "tools", i))
            return 0;
        gl_buf_puts(b, "}");
    }
    gl_buf_puts(b,
                "\n\nHere's an example of how to call a function in the tool set:\n"
                "(If the tool namespace is not specified, invoke the function directly as "
                "`example_function_name` rather than `example_tool_name.example_function_name`)\n\n"
                "to=example_tool_name.example_function_name\n\n"
                "<atem:function_calls>\n<atem:invoke name=\"example_tool_name.example_function_name"
                "\">\n<atem:parameter name=\"example_parameter_1\">value_1</atem:parameter>\n"
                "<atem:parameter name=\"example_parameter_2\">This is the value for the second "
                "parameter\nthat can span\n\"multiple\" lines\n</atem:parameter>\n"
                "</atem:invoke>\n</atem:function_calls>");
    return 1;
}

// The tail shared by the synthesized and explicit system blocks: tools block (if tools),
// "\n\n", recipients line (render_system_meta), "<|eot|>".
static int render_system_tail(struct rctx *c)
{
    struct gl_buf *b = &c->out;
    json_t *ns = NULL;
    if (truthy(c->tools)) {
        ns = tool_namespaces(c);
        if (!ns)
            return 0;
        gl_buf_puts(b, "\n\n");
        if (!render_tool_defs(c, ns)) {
            json_decref(ns);
            return 0;
        }
    }
    gl_buf_puts(b, "\n\n# Valid recipients: \"self\", ");
    for (size_t i = 0; i < json_array_size(ns); i++) {
        gl_buf_puts(b, "\"");
        put_str_value(b, json_array_get(ns, i));
        gl_buf_puts(b, ".*\", ");
    }
    gl_buf_puts(b, "\"user\".<|eot|>");
    json_decref(ns);
    return 1;
}

static void render_reasoning(struct rctx *c)
{
    gl_buf_puts(&c->out, "Reasoning strength: ");
    gl_buf_puts(&c->out, c->strength ? c->strength : "high");
    gl_buf_puts(&c->out, ".");
}

static int contains_ci(const struct gl_buf *b, const char *needle) // needle lower-case ASCII
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= b->len; i++) {
        size_t k = 0;
        for (; k < n; k++) {
            char ch = b->p[i + k];
            if (ch >= 'A' && ch <= 'Z')
                ch = (char)(ch - 'A' + 'a');
            if (ch != needle[k])
                break;
        }
        if (k == n)
            return 1;
    }
    return 0;
}

static int render_system(struct rctx *c, const json_t *m, size_t mi)
{
    struct gl_buf sys = {0};
    gl_buf_put(&sys, "", 0);
    if (!render_content(c, &sys, json_object_get(m, "content"), mi)) {
        gl_free(sys.p);
        return 0;
    }
    // "Reasoning strength" is as long as "Reasoning effort" + 2, so not in place: rebuild.
    static const char *const casings[4][2] = {
        {"Reasoning effort", "Reasoning strength"},
        {"Reasoning Effort", "Reasoning Strength"},
        {"reasoning effort", "reasoning strength"},
        {"REASONING EFFORT", "REASONING STRENGTH"},
    };
    for (int k = 0; k < 4 && !sys.oom; k++) {
        struct gl_buf nb = {0};
        size_t n = strlen(casings[k][0]);
        size_t run = 0;
        gl_buf_put(&nb, "", 0);
        for (size_t i = 0; i + n <= sys.len;) {
            if (!memcmp(sys.p + i, casings[k][0], n)) {
                gl_buf_put(&nb, sys.p + run, i - run);
                gl_buf_puts(&nb, casings[k][1]);
                i += n;
                run = i;
            } else {
                i++;
            }
        }
        gl_buf_put(&nb, sys.p + run, sys.len - run);
        gl_free(sys.p);
        sys = nb;
    }
    gl_buf_puts(&c->out, "<|start|>system<|message|>");
    if (sys.oom) {
        c->out.oom = 1;
    } else {
        gl_buf_put(&c->out, sys.p, sys.len);
    }
    int has = contains_ci(&sys, "reasoning strength");
    gl_free(sys.p);
    if (!has) {
        gl_buf_puts(&c->out, "\n\n");
        render_reasoning(c);
    }
    return render_system_tail(c);
}

// Python `==` for the tool_call_id match (strings and numbers; other kinds by JSON equality).
static int py_eq(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b) && !json_is_boolean(a))
        return json_number_value(a) == json_number_value(b);
    return json_equal((json_t *)a, (json_t *)b);
}

static int render_tool(struct rctx *c, const json_t *m, size_t mi)
{
    const json_t *tname = json_object_get(m, "name");
    if (!truthy(tname)) {
        const json_t *tcid = json_object_get(m, "tool_call_id");
        tname = truthy(tcid) ? tcid : NULL;
        for (size_t j = 0; j < json_array_size(c->messages); j++) {
            const json_t *tcs = json_object_get(json_array_get(c->messages, j), "tool_calls");
            if (!truthy(tcs))
                continue;
            for (size_t k = 0; k < json_array_size(tcs); k++) {
                const json_t *tc = json_array_get(tcs, k);
                const json_t *id = json_object_get(tc, "id");
                if (tcid && !json_is_null(tcid) && id && py_eq(id, tcid)) {
                    tname = json_object_get(json_object_get(tc, "function"), "name");
                    if (!tname)
                        return fail(c, GL_E_INVAL,
                                    "messages[%zu]: tool_call_id matches "
                                    "messages[%zu].tool_calls[%zu], which has no function name",
                                    mi, j, k);
                }
            }
        }
    }
    if (tname && !need_str(c, tname, "messages", mi))
        return 0;
    struct gl_buf *b = &c->out;
    gl_buf_puts(b, "<|start|>tool ");
    if (tname)
        put_str_value(b, tname);
    gl_buf_puts(b, "<|message|><tool_output name=\"");
    if (tname)
        put_str_value(b, tname);
    gl_buf_puts(b, "\">\n");
    if (!render_content(c, b, json_object_get(m, "content"), mi))
        return 0;
    gl_buf_puts(b, "\n</tool_output><|eot|>");
    return 1;
}

// macro render_atem(tc); arguments given as a JSON string are decoded first.
static int render_atem(struct rctx *c, const json_t *fn, size_t mi, size_t k)
{
    struct gl_buf *b = &c->out;
    const json_t *args = json_object_get(fn, "arguments");
    json_t *decoded = NULL;
    if (json_is_string(args)) {
        json_error_t je;
        decoded = json_loadb(json_string_value(args), json_string_length(args),
                             JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!decoded)
            return fail(c, GL_E_INVAL,
                        "messages[%zu].tool_calls[%zu].function.arguments: "
                        "invalid JSON at line %d column %d: %s",
                        mi, k, je.line, je.column, je.text);
        args = decoded;
    }
    if (!json_is_object(args)) {
        json_decref(decoded);
        return fail(c, GL_E_INVAL,
                    "messages[%zu].tool_calls[%zu].function.arguments: must be "
                    "a JSON object (the template raises for anything else)",
                    mi, k);
    }
    gl_buf_puts(b, "<atem:function_calls>\n<atem:invoke name=\"");
    put_str_value(b, json_object_get(fn, "name"));
    gl_buf_puts(b, "\">\n");
    const char *key;
    size_t klen;
    json_t *v;
    int ok = 1;
    json_object_keylen_foreach((json_t *)args, key, klen, v)
    {
        gl_buf_puts(b, "<atem:parameter name=\"");
        gl_buf_put(b, key, klen);
        gl_buf_puts(b, "\">");
        // strings bare (str()), booleans and null as JSON (tojson); numbers print alike
        if (json_is_object(v) || json_is_array(v))
            ok = put_tojson_or_fail(c, v, "messages", mi);
        else if (put_value(b, v, json_is_string(v), 0))
            ok =
                fail(c, GL_E_INVAL, "messages[%zu].tool_calls[%zu]: argument is not finite", mi, k);
        if (!ok)
            break;
        gl_buf_puts(b, "</atem:parameter>\n");
    }
    json_decref(decoded);
    if (!ok)
        return 0;
    gl_buf_puts(b, "</atem:invoke>\n</atem:function_calls>");
    return 1;
}

static int render_assistant(struct rctx *c, const json_t *m, size_t mi, const char *end_token)
{
    struct gl_buf *b = &c->out;
    const json_t *rc = json_object_get(m, "reasoning_content");
    if (!rc)
        rc = json_object_get(m, "reasoning");
    if (truthy(rc)) {
        if (!need_str(c, rc, "messages", mi))
            return 0;
        gl_buf_puts(b, "<|start|>assistant to=self<|message|>");
        put_str_value(b, rc);
        gl_buf_puts(b, "<|eom|>");
    }
    const json_t *tcs = json_object_get(m, "tool_calls");
    if (truthy(tcs)) {
        size_t n = json_array_size(tcs);
        for (size_t k = 0; k < n; k++) {
            const json_t *fn = json_object_get(json_array_get(tcs, k), "function");
            if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
                return fail(c, GL_E_INVAL,
                            "messages[%zu].tool_calls[%zu]: need a function "
                            "object with a string name",
                            mi, k);
            gl_buf_puts(b, "<|start|>assistant to=");
            put_str_value(b, json_object_get(fn, "name"));
            gl_buf_puts(b, "<|message|>");
            if (!render_atem(c, fn, mi, k))
                return 0;
            gl_buf_puts(b, k + 1 == n ? end_token : "<|eom|>");
        }
        return 1;
    }
    // recipient = message.get('recipient') or 'user'; end_turn defaults to recipient == 'user'
    const json_t *rcp = json_object_get(m, "recipient");
    if (!truthy(rcp))
        rcp = NULL;
    else if (!need_str(c, rcp, "messages", mi))
        return 0;
    int to_user = !rcp || (json_string_length(rcp) == 4 && !strcmp(json_string_value(rcp), "user"));
    const json_t *et = json_object_get(m, "end_turn");
    int end_turn = !et || json_is_null(et) ? to_user : truthy(et);
    gl_buf_puts(b, "<|start|>assistant to=");
    if (rcp)
        put_str_value(b, rcp);
    else
        gl_buf_puts(b, "user");
    gl_buf_puts(b, "<|message|>");
    if (!render_content(c, b, json_object_get(m, "content"), mi))
        return 0;
    gl_buf_puts(b, end_turn ? "<|eot|>" : "<|eom|>");
    return 1;
}

// A template variable that is concatenated when truthy: NULL when falsy, error if not a string.
static int kwarg_str(struct rctx *c, const json_t *v, const char *name, const char **out)
{
    *out = NULL;
    if (!truthy(v))
        return 1;
    if (!json_is_string(v) || json_string_length(v) != strlen(json_string_value(v)))
        return fail(c, GL_E_INVAL, "%s: must be a string without NUL bytes", name);
    *out = json_string_value(v);
    return 1;
}

static int validate(struct rctx *c)
{
    if (!json_is_array(c->messages))
        return fail(c, GL_E_INVAL, "\"messages\" must be an array");
    for (size_t i = 0; i < json_array_size(c->messages); i++) {
        const json_t *m = json_array_get(c->messages, i);
        if (!json_is_object(m))
            return fail(c, GL_E_INVAL, "messages[%zu]: must be an object", i);
        if (!json_is_string(json_object_get(m, "role")))
            return fail(c, GL_E_INVAL, "messages[%zu]: missing string \"role\"", i);
        const json_t *tcs = json_object_get(m, "tool_calls");
        if (truthy(tcs)) {
            if (!json_is_array(tcs))
                return fail(c, GL_E_INVAL, "messages[%zu].tool_calls: must be an array", i);
            for (size_t k = 0; k < json_array_size(tcs); k++)
                if (!json_is_object(json_array_get(tcs, k)))
                    return fail(c, GL_E_INVAL,
                                "messages[%zu].tool_calls[%zu]: must be an "
                                "object",
                                i, k);
        }
    }
    if (truthy(c->tools) && !json_is_array(c->tools)) // falsy tools mean "no tools" to Jinja
        return fail(c, GL_E_INVAL, "\"tools\" must be an array");
    return 1;
}

static int role_is(const json_t *m, const char *role)
{
    const json_t *r = json_object_get(m, "role");
    return json_string_length(r) == strlen(role) && !strcmp(json_string_value(r), role);
}

static int render_all(struct rctx *c, const json_t *req)
{
    const json_t *kw = json_object_get(req, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw))
        return fail(c, GL_E_INVAL, "\"chat_template_kwargs\" must be an object");
    const json_t *rs = json_object_get(kw, "reasoning_strength");
    if (!rs) {
        rs = json_object_get(req, "reasoning_effort");
    }
    if (!kwarg_str(c, rs, "reasoning_strength", &c->strength) ||
        !kwarg_str(c, json_object_get(kw, "knowledge_cutoff"), "knowledge_cutoff", &c->cutoff) ||
        !kwarg_str(c, json_object_get(kw, "current_date"), "current_date", &c->date))
        return 0;
    c->ns_desc = json_object_get(kw, "tool_namespace_descriptions");
    if (c->ns_desc && !json_is_object(c->ns_desc) && truthy(c->tools)) // read only with tools
        return fail(c, GL_E_INVAL, "tool_namespace_descriptions: must be an object");
    if (!validate(c))
        return 0;

    struct gl_buf *b = &c->out;
    gl_buf_puts(b, "<|begin_of_text|>");
    size_t n = json_array_size(c->messages);
    int has_system = 0;
    for (size_t i = 0; i < n; i++)
        has_system |= role_is(json_array_get(c->messages, i), "system");
    if (!has_system) {
        gl_buf_puts(
            b, "<|start|>system<|message|>You are a helpful AI assistant.\nKnowledge cutoff: ");
        gl_buf_puts(b, c->cutoff ? c->cutoff : "2026-01-04");
        gl_buf_puts(b, ".");
        if (c->date) {
            gl_buf_puts(b, "\nCurrent date: ");
            gl_buf_puts(b, c->date);
            gl_buf_puts(b, ".");
        }
        gl_buf_puts(b, "\n\n");
        render_reasoning(c);
        if (!render_system_tail(c))
            return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(c->messages, i);
        const json_t *role = json_object_get(m, "role");
        // end_token: '<|eom|>' when the next message (dropped roles included) has the same role
        const char *end_token = "<|eot|>";
        if (i + 1 < n &&
            json_equal((json_t *)role, json_object_get(json_array_get(c->messages, i + 1), "role")))
            end_token = "<|eom|>";
        int ok = 1;
        if (role_is(m, "system"))
            ok = render_system(c, m, i);
        else if (role_is(m, "user")) {
            gl_buf_puts(b, "<|start|>user<|message|>");
            ok = render_content(c, b, json_object_get(m, "content"), i);
            gl_buf_puts(b, "<|eot|>");
        } else if (role_is(m, "tool"))
            ok = render_tool(c, m, i);
        else if (role_is(m, "assistant"))
            ok = render_assistant(c, m, i, end_token);
        if (!ok)
            return 0;
    }
    const json_t *agp = json_object_get(req, "add_generation_prompt");
    if (!agp || truthy(agp))
        gl_buf_puts(b, "<|start|>assistant");
    return 1;
}

// Python's str.isspace() for the ASCII range (the strip() below); other Unicode spaces are
// not stripped (a message that starts or ends with U+00A0 keeps it).
static int py_space(unsigned char ch)
{
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}

// continue_final_message: transformers' apply_chat_template rule. The final message's text (its
// string content, or its last part with a text) must appear in the rendered prompt; the prompt
// is cut right after its last occurrence, so the model continues that message:
//   loc = rendered.rindex(final.strip())
//   keep = len(final.lstrip()) if rendered[loc:loc + len(final.lstrip())] == final
//          else len(final.strip())
static void cut_after_final(struct rctx *c)
{
    const json_t *last = json_array_get(c->messages, json_array_size(c->messages) - 1);
    const json_t *content = json_object_get(last, "content");
    const json_t *text = json_is_string(content) ? content : NULL;
    for (size_t i = json_array_size(content); !text && i-- > 0;)
        if (json_is_string(json_object_get(json_array_get(content, i), "text")))
            text = json_object_get(json_array_get(content, i), "text");
    if (!text) {
        fail(c, GL_E_INVAL, "continue_final_message: the final message has no text to continue");
        return;
    }
    const char *f = json_string_value(text);
    size_t n = json_string_length(text), a = 0, z = n;
    while (a < n && py_space((unsigned char)f[a]))
        a++;
    while (z > a && py_space((unsigned char)f[z - 1]))
        z--;
    size_t loc = c->out.len + 1; // rindex of f[a..z)
    for (size_t i = c->out.len + 1 >= z - a ? c->out.len - (z - a) + 1 : 0; i-- > 0;)
        if (memcmp(c->out.p + i, f + a, z - a) == 0) {
            loc = i;
            break;
        }
    if (loc > c->out.len) {
        fail(c, GL_E_INVAL,
             "continue_final_message: the final message does not appear in the rendered prompt");
        return;
    }
    size_t keep = n - a; // len(final.lstrip())
    if (!(a == 0 && loc + n <= c->out.len && memcmp(c->out.p + loc, f, n) == 0))
        keep = z - a;
    c->out.len = loc + keep;
    c->out.p[c->out.len] = '\0';
}

gl_status gl_chat_render(const json_t *req, char **out, size_t *out_len, struct gl_err *err)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    struct rctx c = {.err = err, .st = GL_OK};
    if (!json_is_object(req))
        return (fail(&c, GL_E_INVAL, "the request must be a JSON object"), c.st);
    c.messages = json_object_get(req, "messages");
    c.tools = json_object_get(req, "tools");
    gl_buf_put(&c.out, "", 0);
    render_all(&c, req);
    if (c.st == GL_OK && c.out.oom)
        fail(&c, GL_E_NOMEM, "out of memory");
    if (c.st == GL_OK && json_is_true(json_object_get(req, "continue_final_message")))
        cut_after_final(&c);
    if (c.st != GL_OK) {
        gl_free(c.out.p);
        return c.st;
    }
    *out = c.out.p;
    if (out_len)
        *out_len = c.out.len;
    return GL_OK;
}
