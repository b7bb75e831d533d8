// SPDX-License-Identifier: MIT
// Fuzz target for the GGUF reader: opens the input from memory with and without allow_no_data
// and, when it opens, touches everything a caller may touch (every KV, every array element and
// string, every tensor's data bytes, every lookup) so a sanitizer sees any byte the validation
// let through but should not have. A refusal must come with a "gguf: " message.
#include "gguf/gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_kv(const struct gl_gguf *g, const struct gl_gguf_kv *kv)
{
    uint64_t acc = kv->key.len + (uint64_t)kv->type;
    for (uint64_t i = 0; i < kv->key.len; i++)
        acc += (unsigned char)kv->key.ptr[i];
    if (kv->type == GL_GGUF_STR) {
        for (uint64_t i = 0; i < kv->v.str.len; i++)
            acc += (unsigned char)kv->v.str.ptr[i];
    } else if (kv->type == GL_GGUF_ARR && kv->v.arr.type == GL_GGUF_STR) {
        for (uint64_t i = 0; i < kv->v.arr.n; i++) {
            struct gl_gguf_str s = kv->v.arr.strs[i];
            if (s.len)
                acc += (unsigned char)s.ptr[0] + (unsigned char)s.ptr[s.len - 1];
        }
    } else if (kv->type == GL_GGUF_ARR) {
        for (uint64_t i = 0; i < kv->v.arr.n; i++)
            acc += (uint64_t)gl_gguf_arr_get_int(kv, i) + (gl_gguf_arr_get_float(kv, i) > 0);
    } else {
        acc += kv->v.u64;
    }
    // Lookups by the key's own text must find it (keys with a NUL inside cannot be looked up).
    if (kv->key.len < 256 && !memchr(kv->key.ptr, 0, (size_t)kv->key.len)) {
        char name[256];
        memcpy(name, kv->key.ptr, (size_t)kv->key.len);
        name[kv->key.len] = '\0';
        if (gl_gguf_find_kv(g, name) != kv)
            abort();
        uint32_t u;
        float f;
        int b;
        char *s = NULL;
        struct gl_err err;
        acc += gl_gguf_get_u32(g, name, &u, &err) == GL_OK ? u : 0;
        acc += gl_gguf_get_f32(g, name, &f, &err) == GL_OK && f > 0;
        acc += gl_gguf_get_bool(g, name, &b, &err) == GL_OK ? (uint64_t)b : 0;
        if (gl_gguf_get_str(g, name, &s, &err) == GL_OK)
            acc += strlen(s);
        gl_free(s);
    }
    sink += acc;
}

static void walk_tensor(const struct gl_gguf *g, const struct gl_gguf_tensor *t)
{
    uint64_t acc = t->n_bytes + t->offset + t->type;
    if (t->n_dims < 1 || t->n_dims > GL_GGUF_MAX_DIMS)
        abort();
    if (t->data) {
        const uint8_t *p = t->data;
        for (uint64_t i = 0; i < t->n_bytes; i++)
            acc += p[i];
    }
    if (t->name.len < 256 && !memchr(t->name.ptr, 0, (size_t)t->name.len)) {
        char name[256];
        memcpy(name, t->name.ptr, (size_t)t->name.len);
        name[t->name.len] = '\0';
        if (gl_gguf_find_tensor(g, name) != t)
            abort();
    }
    sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int allow = 0; allow <= 1; allow++) {
        struct gl_gguf_open_params prm = {.use_mmap = 0, .allow_no_data = allow};
        struct gl_gguf *g = NULL;
        struct gl_err err = {0};
        if (gl_gguf_open_memory(&g, data, size, &prm, &err) != GL_OK) {
            if (g || strncmp(err.msg, "gguf: ", 6) != 0)
                abort();
            continue;
        }
        if (gl_gguf_data_offset(g) % gl_gguf_alignment(g) != 0)
            abort();
        for (int64_t i = 0; i < gl_gguf_n_kv(g); i++)
            walk_kv(g, gl_gguf_kv_at(g, i));
        for (int64_t i = 0; i < gl_gguf_n_tensors(g); i++)
            walk_tensor(g, gl_gguf_tensor_at(g, i));
        sink += gl_gguf_find_kv(g, "general.alignment") != NULL;
        sink += gl_gguf_find_tensor(g, "token_embd.weight") != NULL;
        gl_gguf_close(g);
    }
    return 0;
}
