// SPDX-License-Identifier: MIT
// Fuzz target for the safetensors reader: opens the input from memory and, when it opens, touches
// everything a caller may touch (every tensor's name, shape and data bytes, every lookup, the
// metadata) so a sanitizer sees any byte the validation let through but should not have. A
// refusal must come with a "safetensors: " message and leave the handle NULL.
#include "safetensors/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    // A private copy sized exactly, so reads past the end hit the sanitizer's redzone.
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct gl_safetensors *s = NULL;
    struct gl_err err = {0};
    gl_status st = gl_safetensors_open_memory(&s, buf, size, "fuzz", &err);
    if (st != GL_OK) {
        if (s != NULL || strncmp(err.msg, "safetensors: ", 13) != 0)
            abort();
        free(buf);
        return 0;
    }
    uint64_t acc = 0;
    for (int64_t i = 0; i < gl_safetensors_n_tensors(s); i++) {
        const struct gl_safetensors_tensor *t = gl_safetensors_tensor_at(s, i);
        if (gl_safetensors_find(s, t->name) != t)
            abort();
        uint64_t n = gl_safetensors_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++)
            n *= (uint64_t)t->shape[d];
        if (n != t->nbytes)
            abort();
        const uint8_t *p = t->data;
        for (uint64_t j = 0; j < t->nbytes; j++)
            acc += p[j];
        acc += strlen(t->name);
    }
    const char *m = gl_safetensors_metadata(s, "format");
    acc += m ? strlen(m) : 0;
    sink = acc;
    gl_safetensors_close(s);
    free(buf);
    return 0;
}
