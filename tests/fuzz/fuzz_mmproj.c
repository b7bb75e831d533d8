// SPDX-License-Identifier: MIT
// Fuzz target for the vision GGUF loaders' checks (src/vision/vision_gguf.h): the input is opened
// as a GGUF from memory (header-only allowed: the checks read the header only) and, when it
// opens, handed to gl_vgguf_mmproj_read (llama.cpp's mmproj layout) and to glint's older layout's
// gl_vgguf_kind / gl_vgguf_check / gl_vgguf_config. A refusal must come with a "vision: " message;
// an accepted mmproj must give a config the encoder's limits allow (sizes checked against every
// tensor, head size a multiple of 16, merge 2).
#include "gguf/gguf.h"
#include "vision/vision_gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    op.allow_no_data = 1;
    struct gl_err err = {0};
    if (gl_gguf_open_memory(&g, data, size, &op, &err) != GL_OK)
        return 0;
    struct gl_vision_config cfg;
    struct gl_vgguf_info info;
    memset(&err, 0, sizeof err);
    if (gl_vgguf_mmproj_read(g, &cfg, &info, &err) != GL_OK) {
        if (strncmp(err.msg, "vision: ", 8) != 0)
            abort();
    } else if (!info.mmproj || cfg.head_dim * cfg.n_heads != cfg.hidden || cfg.head_dim % 16 ||
               cfg.merge != 2 || cfg.pos_h * cfg.pos_w < 1 || cfg.adapter < 1 ||
               !gl_gguf_find_tensor(g, "v.blk.0.attn_q.weight")) {
        abort();
    }
    int64_t frames = 0;
    (void)gl_vgguf_kind(g, &frames);
    memset(&err, 0, sizeof err);
    if (gl_vgguf_check("fuzz.gguf", g, &err) != GL_OK && strncmp(err.msg, "vision: ", 8) != 0)
        abort();
    memset(&err, 0, sizeof err);
    if (gl_vgguf_config(g, &cfg, &err) != GL_OK && strncmp(err.msg, "vision: ", 8) != 0)
        abort();
    gl_gguf_close(g);
    return 0;
}
