// SPDX-License-Identifier: MIT
// so_config: the server-wide structured-output defaults (vLLM's --structured-outputs-config) and
// the response header that names the keywords a lenient grammar did not enforce (api.h).
#include "api/api.h"
#include "engine/engine.h"

#include <stdio.h>
#include <string.h>

static gl_status so_bool(json_t *v, const char *key, int *dst, int invert, struct gl_err *err)
{
    if (!json_is_boolean(v))
        return gl_err_set(err, GL_E_INVAL,
                          "--structured-outputs-config: %s: expected true or false", key);
    *dst = invert ? json_is_false(v) : json_is_true(v);
    return GL_OK;
}

gl_status gl_api_so_config(const char *json, struct gl_api_so *out, int *backend_ignored,
                           struct gl_err *err)
{
    json_error_t je;
    json_t *o = json_loads(json ? json : "", JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return gl_err_set(err, GL_E_INVAL,
                          "--structured-outputs-config: expected a JSON object (%s)",
                          o ? "not an object" : je.text);
    }
    struct gl_api_so so = *out;
    gl_status st = GL_OK;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (st != GL_OK)
            break;
        if (!strcmp(k, "backend") || !strcmp(k, "reasoning_parser") ||
            !strcmp(k, "reasoning_parser_plugin")) {
            // One engine, and reasoning is parsed by the ATEM format: nothing to select.
            if (!json_is_string(v))
                st = gl_err_set(err, GL_E_INVAL,
                                "--structured-outputs-config: %s: expected a string", k);
            else if (!strcmp(k, "backend") && backend_ignored)
                *backend_ignored = 1;
        } else if (!strcmp(k, "disable_fallback")) {
            int ignored;
            st = so_bool(v, k, &ignored, 0, err);
        } else if (!strcmp(k, "enable_in_reasoning")) {
            int on = 0;
            st = so_bool(v, k, &on, 0, err);
            if (st == GL_OK && on)
                st = gl_err_set(err, GL_E_INVAL,
                                "--structured-outputs-config: enable_in_reasoning: not supported "
                                "(reasoning is never constrained)");
        } else if (!strcmp(k, "disable_any_whitespace")) {
            st = so_bool(v, k, &so.ws_bounded, 1, err);
        } else if (!strcmp(k, "disable_additional_properties")) {
            st = so_bool(v, k, &so.open_objects, 1, err);
        } else if (!strcmp(k, "lenient_keywords")) {
            st = so_bool(v, k, &so.lenient, 0, err);
        } else {
            st = gl_err_set(err, GL_E_INVAL,
                            "--structured-outputs-config: unknown key '%.64s' (backend, "
                            "disable_fallback, disable_any_whitespace, "
                            "disable_additional_properties, lenient_keywords, reasoning_parser, "
                            "reasoning_parser_plugin, enable_in_reasoning)",
                            k);
        }
    }
    json_decref(o);
    if (st == GL_OK)
        *out = so;
    return st;
}

static gl_status spec_int(json_t *v, const char *key, int32_t lo, int32_t hi, int32_t *dst,
                          struct gl_err *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return gl_err_set(err, GL_E_INVAL,
                          "--speculative-config: %s: expected an integer in %d..%d", key, lo, hi);
    *dst = (int32_t)json_integer_value(v);
    return GL_OK;
}

gl_status gl_api_spec_config(const char *json, struct gl_spec_params *out, struct gl_err *err)
{
    json_error_t je;
    json_t *o = json_loads(json ? json : "", JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return gl_err_set(err, GL_E_INVAL, "--speculative-config: expected a JSON object (%s)",
                          o ? "not an object" : je.text);
    }
    struct gl_spec_params sp = {0};
    int32_t lo = 0, hi = 0, k = 0;
    gl_status st = GL_OK;
    json_t *m = json_object_get(o, "method");
    const char *method = json_is_string(m) ? json_string_value(m) : NULL;
    if (!method)
        st = gl_err_set(err, GL_E_INVAL,
                        "--speculative-config: method: expected a string (built: \"ngram\")");
    else if (strcmp(method, "ngram") != 0 && strcmp(method, "dflash") != 0)
        st = gl_err_set(err, GL_E_INVAL,
                        "--speculative-config: method \"%.32s\": not built yet (built: \"ngram\", "
                        "\"dflash\"; eagle, medusa, mtp and draft models are not)",
                        method);
    const int dfl = method && !strcmp(method, "dflash");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (st != GL_OK)
            break;
        if (!strcmp(key, "method"))
            continue;
        if (!strcmp(key, "num_speculative_tokens"))
            st = spec_int(v, key, 1, GL_SPEC_MAX_K, &k, err);
        else if (dfl && !strcmp(key, "model")) {
            const char *path = json_is_string(v) ? json_string_value(v) : NULL;
            if (!path || !*path || strlen(path) >= sizeof sp.dflash_path)
                st = gl_err_set(
                    err, GL_E_INVAL,
                    "--speculative-config: model: expected the drafter's GGUF or HF folder "
                    "(a non-empty string under %zu bytes)",
                    sizeof sp.dflash_path);
            else
                snprintf(sp.dflash_path, sizeof sp.dflash_path, "%s", path);
        } else if (dfl)
            st = gl_err_set(err, GL_E_INVAL,
                            "--speculative-config: key '%.64s' not supported for method dflash "
                            "(method, model, num_speculative_tokens)",
                            key);
        else if (!strcmp(key, "prompt_lookup_min"))
            st = spec_int(v, key, 1, 64, &lo, err);
        else if (!strcmp(key, "prompt_lookup_max"))
            st = spec_int(v, key, 1, 64, &hi, err);
        else
            st = gl_err_set(err, GL_E_INVAL,
                            "--speculative-config: key '%.64s' not supported for method ngram "
                            "(method, num_speculative_tokens, prompt_lookup_min, "
                            "prompt_lookup_max)",
                            key);
    }
    json_decref(o);
    if (st != GL_OK)
        return st;
    if (k == 0)
        return gl_err_set(err, GL_E_INVAL,
                          "--speculative-config: num_speculative_tokens is required");
    if (dfl) {
        if (!sp.dflash_path[0])
            return gl_err_set(err, GL_E_INVAL,
                              "--speculative-config: method dflash needs \"model\": the "
                              "drafter's GGUF (llama.cpp's dflash layout) or HF assistant folder");
        sp.method = GL_SPEC_DFLASH;
        sp.k = k;
        *out = sp;
        return GL_OK;
    }
    if (lo == 0 && hi == 0) // vLLM's defaults for ngram
        lo = hi = 5;
    lo = lo ? lo : hi;
    hi = hi ? hi : lo;
    if (lo > hi)
        return gl_err_set(err, GL_E_INVAL,
                          "--speculative-config: prompt_lookup_min %d > prompt_lookup_max %d", lo,
                          hi);
    sp.method = GL_SPEC_NGRAM;
    sp.k = k;
    sp.lookup_min = lo;
    sp.lookup_max = hi;
    *out = sp;
    return GL_OK;
}

void gl_api_unenforced_header(const struct gl_grammar *g, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *w = g ? gl_grammar_warnings(g) : "";
    size_t n = strlen(w);
    while (n >= 2 && w[n - 2] == ';' && w[n - 1] == ' ')
        n -= 2; // the list's last "; "
    size_t o = 0;
    if (cap < 8) {
        if (cap)
            out[0] = '\0';
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        int plain = c >= 0x20 && c < 0x7f && c != '%';
        size_t need = plain ? 1 : 3;
        if (o + need + 4 > cap) { // room for "..." and the NUL
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o < cap ? o : cap - 1] = '\0';
}
