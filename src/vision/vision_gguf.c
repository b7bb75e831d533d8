// SPDX-License-Identifier: MIT
// vision_gguf: telling glint's temporal vision GGUF from llama.cpp's summed mmproj (contract and
// file layout in vision_gguf.h).
#include "vision/vision_gguf.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_PATCH 14
#define CHANNELS      3

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int64_t patch_size_of(const struct gl_gguf *g)
{
    static const char *const keys[] = {"muse-glimmer-vision.patch_size", "clip.vision.patch_size"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint32_t v = 0;
        if (gl_gguf_find_kv(g, keys[i]) && gl_gguf_get_u32(g, keys[i], &v, NULL) == GL_OK && v > 0)
            return v;
    }
    return DEFAULT_PATCH;
}

enum gl_vgguf_kind gl_vgguf_kind(const struct gl_gguf *g, int64_t *frames)
{
    if (frames)
        *frames = 0;
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, GL_VGGUF_PATCH);
    if (!t || t->n_dims < 2)
        return t ? GL_VGGUF_UNKNOWN : GL_VGGUF_NOT_VISION;
    // Inputs per output channel: every dim but the last (the output channels).
    int64_t k = 1;
    for (uint32_t d = 0; d + 1 < t->n_dims; d++)
        k *= t->ne[d];
    const int64_t p = patch_size_of(g), slab = CHANNELS * p * p;
    if (k == slab) {
        if (frames)
            *frames = 1;
        return GL_VGGUF_SUMMED;
    }
    if (k % slab == 0 && k / slab >= 2) {
        if (frames)
            *frames = k / slab;
        return GL_VGGUF_TEMPORAL;
    }
    return GL_VGGUF_UNKNOWN;
}

#define WHAT_INSTEAD                                                                               \
    "use glint convert HF_DIR --out TEXT.gguf --vision-out VISION.gguf instead (it keeps the "     \
    "temporal axis)"

gl_status gl_vgguf_check(const char *path, const struct gl_gguf *g, struct gl_err *err)
{
    const char *name = path ? base_name(path) : "";
    if (!strcasecmp(name, GL_VGGUF_RELEASED_MMPROJ))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: %s refused: the released mmproj's patch embedding is "
                          "[1536, 3, 14, 14], HF's [1536, 2, 3, 14, 14] with the temporal axis "
                          "summed away (right for still images only), so video cannot work "
                          "from it; " WHAT_INSTEAD,
                          name);
    if (!g)
        return GL_OK;
    int64_t frames = 0;
    const enum gl_vgguf_kind kind = gl_vgguf_kind(g, &frames);
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, GL_VGGUF_PATCH);
    char shape[96] = "";
    for (uint32_t d = 0; t && d < t->n_dims; d++) {
        size_t n = strlen(shape);
        snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    }
    if (kind == GL_VGGUF_SUMMED)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: %s refused: its patch embedding " GL_VGGUF_PATCH
                          " (ne [%s]) has no temporal axis (3 x %lld x %lld inputs per output: "
                          "the temporal axis was summed away, as in llama.cpp's mmproj), so "
                          "video cannot work from it; " WHAT_INSTEAD,
                          path ? base_name(path) : "(gguf)", shape, (long long)patch_size_of(g),
                          (long long)patch_size_of(g));
    if (kind == GL_VGGUF_UNKNOWN)
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: %s: patch embedding " GL_VGGUF_PATCH
                          " has ne [%s], neither T x 3 x %lld x %lld (temporal) nor 3 x %lld x "
                          "%lld (summed) inputs per output",
                          path ? path : "(gguf)", shape, (long long)patch_size_of(g),
                          (long long)patch_size_of(g), (long long)patch_size_of(g),
                          (long long)patch_size_of(g));
    return GL_OK;
}
