// SPDX-License-Identifier: MIT
// vk: recording y = W x for GGUF-layout weights (the shaders are src/vk/shaders/matmul_*.comp).
#include "vk/vk_int.h"

#include <stdio.h>
#include <string.h>

// Tokens per workgroup (NT in matmul.glsl, a specialization constant): 8 for decode-sized calls,
// 32 for prefill-sized ones (the weights are read once per NT tokens). Both give the same bits.
#define MM_NT_SMALL   8
#define MM_NT_LARGE   32
#define MM_MAX_GROUPS 65535u // per grid dimension, the least Vulkan guarantees
// Threads per workgroup (WG in matmul.glsl): 64, or 8 for rows of at most 8 units of 32 weights
// (the tiny models' 256 columns), where 56 of 64 threads would idle through every barrier: on
// lavapipe that made a tiny model's 202,048-row head take seconds. Two values, not every power of
// two, because each is another pipeline to compile (lavapipe: ~0.3 s each). The sums' tree
// depends on the matrix's width only, never on the tokens, so a token's result stays the same
// whatever shares its dispatch.
#define MM_WG_NARROW 8u
#define MM_WG_WIDE   64u

static const char *const mm_shader[GL_TYPE_COUNT] = {
    [GL_TYPE_F32] = "matmul_f32",   [GL_TYPE_F16] = "matmul_f16",   [GL_TYPE_BF16] = "matmul_bf16",
    [GL_TYPE_Q8_0] = "matmul_q8_0", [GL_TYPE_Q4_0] = "matmul_q4_0", [GL_TYPE_Q4_K] = "matmul_q4_k",
    [GL_TYPE_Q5_K] = "matmul_q5_k", [GL_TYPE_Q6_K] = "matmul_q6_k",
};

// matmul.glsl's push constants, in its order. Offsets are relative to each binding's start.
struct mm_push {
    uint32_t rows, cols, n_tok;
    uint32_t w_off, w_stride; // bytes
    uint32_t x_off, x_stride; // floats
    uint32_t y_off, y_stride; // floats
};

int gl_vk_matmul_supported(enum gl_type type)
{
    return (unsigned)type < GL_TYPE_COUNT && mm_shader[type] != NULL;
}

// A binding for bytes [off, off + n) of buf: the range starts at off rounded down to the
// device's alignment, *rem is what the shader adds. GL_E_LIMIT when it spans more than the
// device binds.
static gl_status bind(const struct gl_vk_device *d, struct gl_vk_buffer *buf, uint64_t off,
                      uint64_t n, const char *what, struct gl_vk_range *rg, uint32_t *rem,
                      struct gl_err *err)
{
    uint64_t align = d->info.storage_align > 4 ? d->info.storage_align : 4;
    uint64_t base = off - off % align;
    // Whole words: the shader reads W as 32-bit words (buffer sizes are multiples of 4).
    uint64_t bytes = (off - base + n + 3) & ~(uint64_t)3;
    if (bytes > d->storage_range)
        return gl_err_set(err, GL_E_LIMIT,
                          "vulkan: matmul %s spans %.1f MiB; %s binds at most %.1f MiB: use "
                          "fewer tokens per step",
                          what, (double)bytes / 1048576.0, d->info.name,
                          (double)d->storage_range / 1048576.0);
    *rg = (struct gl_vk_range){.buf = buf, .off = base, .bytes = bytes};
    *rem = (uint32_t)(off - base);
    return GL_OK;
}

// Shape and offset checks; the 32-bit bounds keep every index the shader forms below 2^32.
static gl_status check(const struct gl_vk_matmul *m, size_t row_bytes, struct gl_err *err)
{
    const struct gl_type_traits *tt = gl_type_traits_of((uint32_t)m->type);
    if (!gl_vk_matmul_supported(m->type))
        return gl_err_set(err, GL_E_UNSUPPORTED, "vulkan: no matmul shader for weight type %s",
                          tt && tt->name ? tt->name : "unknown");
    if (m->rows < 1 || m->cols < 1 || m->n_tok < 1 || m->rows > INT32_MAX || m->cols > INT32_MAX ||
        m->n_tok > (int64_t)MM_MAX_GROUPS * MM_NT_LARGE)
        return gl_err_set(err, GL_E_INVAL, "vulkan: matmul of %lld rows x %lld cols x %lld tokens",
                          (long long)m->rows, (long long)m->cols, (long long)m->n_tok);
    if (row_bytes == 0)
        return gl_err_set(err, GL_E_INVAL,
                          "vulkan: matmul: %lld columns is not a multiple of %s's block of %lld",
                          (long long)m->cols, tt->name, (long long)tt->blck_size);
    if (m->x_stride < m->cols || m->y_stride < m->rows || m->x_stride > UINT32_MAX ||
        m->y_stride > UINT32_MAX)
        return gl_err_set(
            err, GL_E_INVAL, "vulkan: matmul strides x %lld (cols %lld), y %lld (rows %lld)",
            (long long)m->x_stride, (long long)m->cols, (long long)m->y_stride, (long long)m->rows);
    if (m->w_off % 4 || m->x_off % 4 || m->y_off % 4)
        return gl_err_set(err, GL_E_INVAL, "vulkan: matmul offsets must be multiples of 4 bytes");
    uint64_t w_end = m->w_off + (uint64_t)m->rows * row_bytes;
    uint64_t x_end =
        m->x_off + 4 * ((uint64_t)(m->n_tok - 1) * (uint64_t)m->x_stride + (uint64_t)m->cols);
    uint64_t y_end =
        m->y_off + 4 * ((uint64_t)(m->n_tok - 1) * (uint64_t)m->y_stride + (uint64_t)m->rows);
    if (w_end > gl_vk_buffer_size(m->w) || x_end > gl_vk_buffer_size(m->x) ||
        y_end > gl_vk_buffer_size(m->y))
        return gl_err_set(err, GL_E_INVAL,
                          "vulkan: matmul reaches past a buffer: W to byte %llu of %llu, x to %llu "
                          "of %llu, y to %llu of %llu",
                          (unsigned long long)w_end, (unsigned long long)gl_vk_buffer_size(m->w),
                          (unsigned long long)x_end, (unsigned long long)gl_vk_buffer_size(m->x),
                          (unsigned long long)y_end, (unsigned long long)gl_vk_buffer_size(m->y));
    return GL_OK;
}

gl_status gl_vk_rec_matmul(struct gl_vk_recorder *rec, const struct gl_vk_matmul *m,
                           struct gl_err *err)
{
    struct gl_vk_device *d = m->w->d;
    size_t row_bytes = gl_type_row_size((uint32_t)m->type, m->cols);
    gl_status st = check(m, row_bytes, err);
    struct gl_vk_pipeline *pipe = NULL;
    // Specialization: NT, and WG (8 for rows of at most 8 units, else 64).
    uint32_t spec[2] = {m->n_tok <= MM_NT_SMALL ? MM_NT_SMALL : MM_NT_LARGE,
                        m->cols <= (int64_t)MM_WG_NARROW * 32 ? MM_WG_NARROW : MM_WG_WIDE};
    if (st == GL_OK)
        st = gl_vk_pipeline_get(d, mm_shader[m->type], 3, sizeof(struct mm_push), spec, 2, &pipe,
                                err);
    if (st != GL_OK)
        return st;
    // Rows per dispatch: the weights of a chunk (plus the alignment remainder) within one
    // binding; a vocabulary-sized output head can exceed a device's range.
    uint64_t room = d->storage_range > d->info.storage_align + 4
                        ? d->storage_range - d->info.storage_align - 4
                        : 0;
    int64_t chunk = (int64_t)(room / row_bytes);
    if (chunk < 1)
        return gl_err_set(err, GL_E_LIMIT, "vulkan: one row of %zu bytes is over %s's range",
                          row_bytes, d->info.name);
    struct gl_vk_range rg[3];
    struct mm_push pc = {.cols = (uint32_t)m->cols,
                         .n_tok = (uint32_t)m->n_tok,
                         .w_stride = (uint32_t)row_bytes,
                         .x_stride = (uint32_t)m->x_stride,
                         .y_stride = (uint32_t)m->y_stride};
    uint64_t x_bytes = 4 * ((uint64_t)(m->n_tok - 1) * (uint64_t)m->x_stride + (uint64_t)m->cols);
    st = bind(d, m->x, m->x_off, x_bytes, "activations", &rg[1], &pc.x_off, err);
    pc.x_off /= 4;
    for (int64_t r0 = 0; st == GL_OK && r0 < m->rows; r0 += chunk) {
        int64_t n = m->rows - r0 < chunk ? m->rows - r0 : chunk;
        pc.rows = (uint32_t)n;
        st = bind(d, m->w, m->w_off + (uint64_t)r0 * row_bytes, (uint64_t)n * row_bytes, "weights",
                  &rg[0], &pc.w_off, err);
        uint64_t y_bytes = 4 * ((uint64_t)(m->n_tok - 1) * (uint64_t)m->y_stride + (uint64_t)n);
        if (st == GL_OK)
            st = bind(d, m->y, m->y_off + 4 * (uint64_t)r0, y_bytes, "output", &rg[2], &pc.y_off,
                      err);
        pc.y_off /= 4;
        if (st != GL_OK)
            break;
        // Rows over x and z (matmul.glsl: row = z * groups_x + x), token tiles over y.
        uint32_t gx = n < (int64_t)MM_MAX_GROUPS ? (uint32_t)n : MM_MAX_GROUPS;
        uint32_t groups[3] = {gx, (uint32_t)((m->n_tok + spec[0] - 1) / spec[0]),
                              (uint32_t)((n + gx - 1) / gx)};
        st = gl_vk_rec_dispatch(rec, pipe, rg, &pc, groups);
        if (st != GL_OK)
            return gl_vk_rec_error(rec, err);
    }
    return st;
}
