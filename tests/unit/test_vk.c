// SPDX-License-Identifier: MIT
// The Vulkan device layer and its matmul shaders (src/vk), on whatever device 0 is: Mesa's
// lavapipe in CI. Prints SKIP and passes when glint was built without Vulkan or the machine has no
// loader or no device (GLINT_VK_REQUIRE=1 makes that a failure). With the Khronos validation
// layer installed every instance runs under it and any validation error fails the test.
//
// The reference for y[t][r] = sum_c W[r][c] x[t][c] is independent of the shaders: the weights
// dequantized by src/quant's scalar reference (gl_dequantize_row_ref), dotted with x in float64.
//
// Tolerance (stated once, used for every type). The shaders dequantize each weight with the
// same float operations as the reference (no fused multiply-add where the reference has two
// roundings: `precise` in matmul_q4_k/q5_k), so the weights are equal and the only difference is
// the fp32 summation: each thread accumulates its 32-weight units in order (one rounding per
// term, or two without fused multiply-add) and 64 partial sums are added by a 6-level tree.
// Every term passes through at most m = C + 7 roundings of relative size u = 2^-24, so
// |y - ref| <= gamma_m * sum_c |w_c x_c|, gamma_m = m u / (1 - m u) (Higham, Accuracy and
// Stability, eq. 3.5, any summation order). We allow K = 2 times (C + 7) u sum|w x|: the factor
// covers gamma's denominator and the float64 reference's own rounding (C 2^-53, negligible).
// The observed error is far below (printed as max err/tol); the negative controls show the
// bound still catches one corrupted block, and one weight moved by one quantization step.
#include "test.h"

#include "base/base.h"
#include "quant/quant.h"
#include "vk/vk.h"

#include <stdint.h>
#include <string.h>

#define TOL_K 2.0
#define U32   5.9604644775390625e-08 // 2^-24

static struct gl_vk_device *dev;
static struct gl_vk_recorder *rec;

// ---- data ----

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) // uniform in [-1, 1)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) * 0x1.0p-52 - 1.0);
}

// One matmul case on the host: quantized rows, their reference dequantization, activations.
struct mm_case {
    enum gl_type type;
    int64_t rows, cols, n_tok, x_stride, y_stride;
    size_t row_bytes;
    uint8_t *w;  // rows * row_bytes, GGUF layout
    float *wf;   // rows * cols, gl_dequantize_row_ref of w
    float *x;    // n_tok * x_stride
    double *ref; // n_tok * rows: float64 dot
    double *tol; // n_tok * rows: TOL_K (C + 7) u sum |w x|
    float *y;    // n_tok * y_stride, read back from the device
};

static void case_free(struct mm_case *c)
{
    free(c->w);
    free(c->wf);
    free(c->x);
    free(c->ref);
    free(c->tol);
    free(c->y);
}

// *ref = the float64 dot of w and x (n terms), *tol = the bound above.
static void ref_dot(const float *w, const float *x, int64_t n, double *ref, double *tol)
{
    double s = 0, a = 0;
    for (int64_t k = 0; k < n; k++) {
        double p = (double)w[k] * (double)x[k];
        s += p;
        a += fabs(p);
    }
    *ref = s;
    *tol = TOL_K * (double)(n + 7) * U32 * a;
}

static void case_make(struct mm_case *c, enum gl_type type, int64_t rows, int64_t cols,
                      int64_t n_tok)
{
    *c = (struct mm_case){.type = type, .rows = rows, .cols = cols, .n_tok = n_tok};
    c->x_stride = cols + 3; // strides wider than the rows: the shader must not assume packing
    c->y_stride = rows + 5;
    c->row_bytes = gl_type_row_size(type, cols);
    c->w = malloc((size_t)rows * c->row_bytes);
    c->wf = malloc((size_t)(rows * cols) * sizeof(float));
    c->x = malloc((size_t)(n_tok * c->x_stride) * sizeof(float));
    c->ref = malloc((size_t)(n_tok * rows) * sizeof(double));
    c->tol = malloc((size_t)(n_tok * rows) * sizeof(double));
    c->y = malloc((size_t)(n_tok * c->y_stride) * sizeof(float));
    float *row = malloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        // Rows of different scale with an offset per 32 columns: sub-block mins and scales vary.
        float scale = 0.25f + (float)(r % 5), off = 0;
        for (int64_t k = 0; k < cols; k++) {
            if (k % 32 == 0)
                off = 0.5f * frand();
            row[k] = scale * (frand() + off);
        }
        gl_quantize_row_ref(type, row, c->w + r * (int64_t)c->row_bytes, cols);
        gl_dequantize_row_ref(type, c->w + r * (int64_t)c->row_bytes, c->wf + r * cols, cols);
    }
    free(row);
    for (int64_t i = 0; i < n_tok * c->x_stride; i++)
        c->x[i] = frand();
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < rows; r++)
            ref_dot(c->wf + r * cols, c->x + t * c->x_stride, cols, &c->ref[t * rows + r],
                    &c->tol[t * rows + r]);
}

// ---- device side ----

#define SENTINEL 12345.5f // y entries the matmul must not write (stride padding, offsets)
#define W_OFF    36       // not a multiple of the storage alignment: the remainder path
#define X_OFF    20
#define Y_OFF    12

// Runs c on the device (W, x, y each in its own buffer at the offsets above) and reads y back.
// corrupt_at >= 0 XORs byte corrupt_at of W with `mask` on the device copy only. Returns the
// status of the recording (GL_OK) or the first error, in err.
static gl_status case_run(struct mm_case *c, long corrupt_at, uint8_t mask, struct gl_err *err)
{
    uint64_t wb = W_OFF + (uint64_t)c->rows * c->row_bytes;
    uint64_t xb = X_OFF + (uint64_t)(c->n_tok * c->x_stride) * 4;
    uint64_t yb = Y_OFF + (uint64_t)(c->n_tok * c->y_stride) * 4;
    struct gl_vk_buffer *w = NULL, *x = NULL, *y = NULL;
    gl_status st = gl_vk_buffer_create(dev, wb, GL_VK_MEM_DEVICE, "test W", &w, err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, xb, GL_VK_MEM_DEVICE, "test x", &x, err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, yb, GL_VK_MEM_DEVICE, "test y", &y, err);
    if (st == GL_OK)
        st = gl_vk_upload(w, W_OFF, c->w, wb - W_OFF, err);
    if (st == GL_OK && corrupt_at >= 0) {
        uint8_t b = c->w[corrupt_at] ^ mask;
        st = gl_vk_upload(w, W_OFF + (uint64_t)corrupt_at, &b, 1, err);
    }
    if (st == GL_OK)
        st = gl_vk_upload(x, X_OFF, c->x, xb - X_OFF, err);
    float *fill = malloc(yb);
    for (uint64_t i = 0; i < yb / 4; i++)
        fill[i] = SENTINEL;
    if (st == GL_OK)
        st = gl_vk_upload(y, 0, fill, yb, err);
    struct gl_vk_matmul m = {.type = c->type,
                             .rows = c->rows,
                             .cols = c->cols,
                             .n_tok = c->n_tok,
                             .w = w,
                             .w_off = W_OFF,
                             .x = x,
                             .x_off = X_OFF,
                             .x_stride = c->x_stride,
                             .y = y,
                             .y_off = Y_OFF,
                             .y_stride = c->y_stride};
    if (st == GL_OK)
        st = gl_vk_rec_begin(rec, err);
    if (st == GL_OK) {
        gl_status mst = gl_vk_rec_matmul(rec, &m, err);
        st = gl_vk_rec_submit(rec, err);
        st = mst != GL_OK ? mst : st;
    }
    if (st == GL_OK)
        st = gl_vk_download(y, 0, fill, yb, err);
    if (st == GL_OK) {
        // Everything before Y_OFF and every padding entry keeps the sentinel.
        for (uint64_t i = 0; i < Y_OFF / 4; i++)
            CHECK(fill[i] == SENTINEL);
        memcpy(c->y, fill + Y_OFF / 4, (size_t)(c->n_tok * c->y_stride) * 4);
    }
    free(fill);
    gl_vk_buffer_free(w);
    gl_vk_buffer_free(x);
    gl_vk_buffer_free(y);
    return st;
}

// Rows of c (over all tokens) outside the tolerance; *worst = max |y - ref| / tol. Padding
// entries of y must still hold the sentinel.
static int64_t case_bad_rows(const struct mm_case *c, int64_t *first_bad, double *worst)
{
    int64_t bad = 0;
    *first_bad = -1;
    *worst = 0;
    for (int64_t r = 0; r < c->rows; r++) {
        int row_bad = 0;
        for (int64_t t = 0; t < c->n_tok; t++) {
            double e = fabs((double)c->y[t * c->y_stride + r] - c->ref[t * c->rows + r]);
            double q = e / c->tol[t * c->rows + r];
            if (!(q <= 1.0)) // NaN counts as bad
                row_bad = 1;
            if (q > *worst || q != q)
                *worst = q;
        }
        if (row_bad && bad++ == 0)
            *first_bad = r;
    }
    for (int64_t t = 0; t < c->n_tok; t++)
        for (int64_t r = c->rows; r < c->y_stride; r++)
            CHECK(c->y[t * c->y_stride + r] == SENTINEL);
    return bad;
}

// ---- tests ----

static const enum gl_type all_types[] = {GL_TYPE_Q4_K, GL_TYPE_Q5_K, GL_TYPE_Q6_K, GL_TYPE_Q8_0,
                                         GL_TYPE_Q4_0, GL_TYPE_F16,  GL_TYPE_BF16, GL_TYPE_F32};
#define N_TYPES (int)(sizeof all_types / sizeof all_types[0])

// Columns for a type: a few blocks (the float types get a short last 32-weight unit), and a
// long row in which every thread of the workgroup takes several units (again with a tail).
static int64_t short_cols(enum gl_type t)
{
    int64_t bs = gl_type_traits_of(t)->blck_size;
    return bs == 256 ? 3 * 256 : bs == 32 ? 5 * 32 : 77;
}
static int64_t long_cols(enum gl_type t)
{
    int64_t bs = gl_type_traits_of(t)->blck_size;
    return bs == 256 ? 18 * 256 : bs == 32 ? 131 * 32 : 4165;
}

static void check_case(enum gl_type t, int64_t rows, int64_t cols, int64_t n_tok)
{
    struct mm_case c;
    case_make(&c, t, rows, cols, n_tok);
    struct gl_err err = {0};
    gl_status st = case_run(&c, -1, 0, &err);
    CHECKF(st == GL_OK, "%s: %s", gl_type_traits_of(t)->name, err.msg);
    if (st == GL_OK) {
        int64_t first;
        double worst;
        int64_t bad = case_bad_rows(&c, &first, &worst);
        CHECKF(bad == 0,
               "%s %lldx%lld n_tok %lld: %lld rows out of tolerance (first %lld), "
               "max err/tol %.3g",
               gl_type_traits_of(t)->name, (long long)rows, (long long)cols, (long long)n_tok,
               (long long)bad, (long long)first, worst);
        printf("  %-4s %3lld x %4lld, %2lld tokens: max err/tol %.2g\n", gl_type_traits_of(t)->name,
               (long long)rows, (long long)cols, (long long)n_tok, worst);
    }
    case_free(&c);
}

// Every type, 67 rows (no multiple of anything), a few blocks, n_tok 1, 2, 7 (one partial tile
// of the 8-token pipeline), 9 (one partial tile of the 32-token one) and 64 (two full tiles).
TEST(test_matmul_types_short)
{
    static const int64_t toks[] = {1, 2, 7, 9, 64};
    for (int i = 0; i < N_TYPES; i++)
        for (int k = 0; k < 5; k++)
            check_case(all_types[i], 67, short_cols(all_types[i]), toks[k]);
}

// Every type on long rows (several units per thread, and a tail unit for the float types).
TEST(test_matmul_types_long)
{
    for (int i = 0; i < N_TYPES; i++)
        check_case(all_types[i], 19, long_cols(all_types[i]), 9);
}

// More rows than one grid dimension holds (65,535 workgroups, the least Vulkan guarantees; a
// vocabulary has 202,048): the rows continue in the grid's z dimension.
TEST(test_matmul_many_rows)
{
    check_case(GL_TYPE_Q4_0, 65535 + 3, 32, 2);
}

// Negative controls: one corrupted byte in one row must put that row, and only it, outside the
// tolerance (67 rows x a few blocks, 7 tokens). XOR 0x4C in the middle of a block (a quant byte;
// the high byte of a float weight) changes several weights; XOR 0x01 on a quant byte moves ONE
// weight by one quantization step (the low bit of a nibble or of an int8): the bound is tight
// enough to see that too at these sizes. At C = 4,608 the bound allows several average |w x|,
// so the long-row cases check indexing (a misread unit is far outside), not the last bits.
static void check_corrupt(enum gl_type t, uint8_t mask)
{
    const struct gl_type_traits *tt = gl_type_traits_of(t);
    int64_t bad_row = 40;
    long byte = (long)(bad_row * (int64_t)gl_type_row_size(t, short_cols(t)));
    byte += tt->blck_size == 1 ? (long)tt->type_size - 1 : (long)tt->type_size / 2;
    struct mm_case c;
    case_make(&c, t, 67, short_cols(t), 7);
    struct gl_err err = {0};
    gl_status st = case_run(&c, byte, mask, &err);
    CHECKF(st == GL_OK, "%s", err.msg);
    int64_t first;
    double worst;
    int64_t bad = case_bad_rows(&c, &first, &worst);
    CHECKF(bad == 1 && first == bad_row,
           "%s, XOR 0x%02x: corrupted row %lld: %lld rows fail (first %lld)", tt->name, mask,
           (long long)bad_row, (long long)bad, (long long)first);
    printf("  %-4s byte XOR 0x%02x: max err/tol %.3g (caught)\n", tt->name, mask, worst);
    case_free(&c);
}

TEST(test_matmul_corrupt_block_fails)
{
    for (int i = 0; i < N_TYPES; i++)
        check_corrupt(all_types[i], 0x4C);
}

TEST(test_matmul_one_quant_step_fails)
{
    for (int i = 0; i < N_TYPES; i++)
        if (gl_type_traits_of(all_types[i])->blck_size > 1)
            check_corrupt(all_types[i], 0x01);
}

// A token's result does not depend on the other tokens of the call (matmul.glsl): token 5 of a
// 64-token call (the 32-token pipeline), of a 7-token call and alone (the 8-token pipeline) are
// the same bits, for every type.
TEST(test_matmul_batch_invariant)
{
    static const int64_t toks[] = {64, 7, 1};
    for (int i = 0; i < N_TYPES; i++) {
        struct mm_case c[3];
        struct gl_err err = {0};
        for (int k = 0; k < 3; k++) {
            case_make(&c[k], all_types[i], 67, short_cols(all_types[i]), toks[k]);
            memcpy(c[k].w, c[0].w, (size_t)c[0].rows * c[0].row_bytes);
            const float *x = c[0].x + (toks[k] == 1 ? 5 * c[0].x_stride : 0);
            memcpy(c[k].x, x, (size_t)(toks[k] * c[0].x_stride) * sizeof(float));
            CHECKF(case_run(&c[k], -1, 0, &err) == GL_OK, "%s", err.msg);
        }
        size_t row_bytes = (size_t)c[0].rows * sizeof(float);
        CHECKF(!memcmp(c[2].y, c[0].y + 5 * c[0].y_stride, row_bytes) &&
                   !memcmp(c[2].y, c[1].y + 5 * c[1].y_stride, row_bytes),
               "%s: token 5 differs between calls of 64, 7 and 1 tokens",
               gl_type_traits_of(all_types[i])->name);
        for (int k = 0; k < 3; k++)
            case_free(&c[k]);
    }
}

// y1 = W1 x, barrier, y2 = W2 y1 in one command buffer, and 300 more dispatches of the first
// matmul in the same submission (more descriptor sets than one pool holds): the barrier orders
// the dependent read, every copy equals y1 bit for bit.
TEST(test_recorder_chain_and_many)
{
    enum { N_MORE = 300 };
    struct mm_case a, b;
    case_make(&a, GL_TYPE_F32, 64, 48, 3);
    case_make(&b, GL_TYPE_Q8_0, 40, 64, 3);
    struct gl_err err = {0};
    struct gl_vk_buffer *w1 = NULL, *w2 = NULL, *x = NULL, *y1 = NULL, *y2 = NULL, *more = NULL;
    uint64_t y1_bytes = (uint64_t)(3 * a.rows) * 4;
    gl_status st =
        gl_vk_buffer_create(dev, a.rows * a.row_bytes, GL_VK_MEM_DEVICE, "w1", &w1, &err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, b.rows * b.row_bytes, GL_VK_MEM_DEVICE, "w2", &w2, &err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, (uint64_t)(3 * a.x_stride) * 4, GL_VK_MEM_DEVICE, "x", &x,
                                 &err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, y1_bytes, GL_VK_MEM_DEVICE, "y1", &y1, &err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, (uint64_t)(3 * b.rows) * 4, GL_VK_MEM_HOST, "y2", &y2, &err);
    if (st == GL_OK)
        st = gl_vk_buffer_create(dev, y1_bytes * N_MORE, GL_VK_MEM_DEVICE, "more", &more, &err);
    if (st == GL_OK)
        st = gl_vk_upload(w1, 0, a.w, a.rows * a.row_bytes, &err);
    if (st == GL_OK)
        st = gl_vk_upload(w2, 0, b.w, b.rows * b.row_bytes, &err);
    if (st == GL_OK)
        st = gl_vk_upload(x, 0, a.x, (uint64_t)(3 * a.x_stride) * 4, &err);
    if (st == GL_OK)
        st = gl_vk_rec_begin(rec, &err);
    REQUIRE(st == GL_OK);
    struct gl_vk_matmul m1 = {.type = a.type,
                              .rows = a.rows,
                              .cols = a.cols,
                              .n_tok = 3,
                              .w = w1,
                              .x = x,
                              .x_stride = a.x_stride,
                              .y = y1,
                              .y_stride = a.rows};
    struct gl_vk_matmul m2 = {.type = b.type,
                              .rows = b.rows,
                              .cols = b.cols,
                              .n_tok = 3,
                              .w = w2,
                              .x = y1,
                              .x_stride = a.rows,
                              .y = y2,
                              .y_stride = b.rows};
    CHECK(gl_vk_rec_matmul(rec, &m1, &err) == GL_OK);
    gl_vk_rec_barrier(rec);
    CHECK(gl_vk_rec_matmul(rec, &m2, &err) == GL_OK);
    for (int i = 0; i < N_MORE; i++) {
        struct gl_vk_matmul mi = m1;
        mi.y = more;
        mi.y_off = (uint64_t)i * y1_bytes;
        CHECK(gl_vk_rec_matmul(rec, &mi, &err) == GL_OK);
    }
    st = gl_vk_rec_submit(rec, &err);
    CHECKF(st == GL_OK, "%s", err.msg);
    float *h1 = malloc(y1_bytes), *hm = malloc(y1_bytes * N_MORE);
    if (st == GL_OK && gl_vk_download(y1, 0, h1, y1_bytes, &err) == GL_OK &&
        gl_vk_download(more, 0, hm, y1_bytes * N_MORE, &err) == GL_OK) {
        // y1 against its reference, y2 (read from the mapping) against W2 times the y1 read back.
        memcpy(a.y, h1, y1_bytes);
        a.y_stride = a.rows;
        int64_t first;
        double worst;
        CHECK(case_bad_rows(&a, &first, &worst) == 0);
        const float *hy2 = gl_vk_buffer_map(y2);
        for (int64_t t = 0; t < 3; t++)
            for (int64_t r = 0; r < b.rows; r++) {
                double ref, tol;
                ref_dot(b.wf + r * b.cols, h1 + t * a.rows, b.cols, &ref, &tol);
                CHECK(fabs((double)hy2[t * b.rows + r] - ref) <= tol);
            }
        for (int i = 0; i < N_MORE; i++)
            CHECK(memcmp(hm + (size_t)i * (y1_bytes / 4), h1, y1_bytes) == 0);
    }
    free(h1);
    free(hm);
    gl_vk_buffer_free(w1);
    gl_vk_buffer_free(w2);
    gl_vk_buffer_free(x);
    gl_vk_buffer_free(y1);
    gl_vk_buffer_free(y2);
    gl_vk_buffer_free(more);
    case_free(&a);
    case_free(&b);
}

// Errors say what and why.
TEST(test_errors)
{
    struct gl_err err = {0};
    struct gl_vk_device *d2 = NULL;
    CHECK(gl_vk_device_open(99, &d2, &err) == GL_E_INVAL && d2 == NULL);
    CHECKF(strstr(err.msg, "out of range") && strstr(err.msg, "glint devices"), "%s", err.msg);

    // Not enough device memory: more than the largest heap, with the numbers.
    const struct gl_vk_device_info *info = gl_vk_device_info(dev);
    uint64_t biggest = 0;
    for (int h = 0; h < info->n_heaps; h++)
        biggest = info->heaps[h].bytes > biggest ? info->heaps[h].bytes : biggest;
    struct gl_vk_buffer *b = NULL;
    CHECK(gl_vk_buffer_create(dev, biggest + (64u << 20), GL_VK_MEM_DEVICE, "the KV pool", &b,
                              &err) == GL_E_NOMEM &&
          b == NULL);
    CHECKF(strstr(err.msg, "not enough device memory for the KV pool") &&
               strstr(err.msg, "MiB asked") && strstr(err.msg, "glint already holds"),
           "%s", err.msg);

    // Matmul arguments.
    struct gl_vk_buffer *w = NULL, *x = NULL, *y = NULL;
    REQUIRE(gl_vk_buffer_create(dev, 4096, GL_VK_MEM_DEVICE, "w", &w, &err) == GL_OK);
    REQUIRE(gl_vk_buffer_create(dev, 4096, GL_VK_MEM_DEVICE, "x", &x, &err) == GL_OK);
    REQUIRE(gl_vk_buffer_create(dev, 4096, GL_VK_MEM_DEVICE, "y", &y, &err) == GL_OK);
    struct gl_vk_matmul m = {.type = GL_TYPE_Q4_K,
                             .rows = 2,
                             .cols = 100,
                             .n_tok = 1,
                             .w = w,
                             .x = x,
                             .x_stride = 100,
                             .y = y,
                             .y_stride = 2};
    REQUIRE(gl_vk_rec_begin(rec, &err) == GL_OK);
    CHECK(gl_vk_rec_matmul(rec, &m, &err) == GL_E_INVAL);
    CHECKF(strstr(err.msg, "not a multiple of Q4_K's block of 256"), "%s", err.msg);
    m.cols = 256;
    m.x_stride = 256;
    m.rows = 40; // 40 x 144 bytes: past the 4096-byte buffer
    m.y_stride = 40;
    CHECK(gl_vk_rec_matmul(rec, &m, &err) == GL_E_INVAL);
    CHECKF(strstr(err.msg, "reaches past a buffer"), "%s", err.msg);
    m.type = GL_TYPE_Q4_1;
    CHECK(gl_vk_rec_matmul(rec, &m, &err) == GL_E_UNSUPPORTED);
    CHECKF(strstr(err.msg, "no matmul shader for weight type Q4_1"), "%s", err.msg);
    CHECK(gl_vk_rec_submit(rec, &err) == GL_OK); // refused calls recorded nothing
    gl_vk_buffer_free(w);
    gl_vk_buffer_free(x);
    gl_vk_buffer_free(y);
}

// A lost device (injected: GLINT_VK_FAULT_LOST_AT=2 makes the second submission report
// VK_ERROR_DEVICE_LOST) fails that call with GL_E_IO saying what to do, and every later call on
// the device fails the same way; closing it still frees everything.
TEST(test_device_lost)
{
    setenv("GLINT_VK_FAULT_LOST_AT", "2", 1);
    struct gl_err err = {0};
    struct gl_vk_device *d2 = NULL;
    gl_status st = gl_vk_device_open(0, &d2, &err);
    unsetenv("GLINT_VK_FAULT_LOST_AT");
    REQUIRE(st == GL_OK);
    struct gl_vk_buffer *b = NULL, *b2 = NULL;
    struct gl_vk_recorder *r2 = NULL;
    uint32_t v = 7, back = 0;
    REQUIRE(gl_vk_buffer_create(d2, 4, GL_VK_MEM_DEVICE, "b", &b, &err) == GL_OK);
    CHECK(gl_vk_upload(b, 0, &v, 4, &err) == GL_OK); // submission 1
    CHECK(!gl_vk_device_lost(d2));
    CHECK(gl_vk_download(b, 0, &back, 4, &err) == GL_E_IO); // submission 2: lost
    CHECKF(strstr(err.msg, "device was lost") && strstr(err.msg, "--device cpu"), "%s", err.msg);
    CHECK(gl_vk_device_lost(d2));
    CHECK(gl_vk_buffer_create(d2, 4, GL_VK_MEM_DEVICE, "b2", &b2, &err) == GL_E_IO && !b2);
    CHECK(gl_vk_recorder_create(d2, &r2, &err) == GL_E_IO && !r2);
    CHECK(gl_vk_upload(b, 0, &v, 4, &err) == GL_E_IO);
    gl_vk_buffer_free(b);
    gl_vk_device_close(d2);
}

// ---- gl_vk_list_devices against vulkaninfo (vulkan-tools: the Khronos tool, an independent
// reading of the same Vulkan queries). One device only, so the first value of each key is its.

// The value after "KEY = " on the first line whose first word is KEY, in out; 0 if none.
static int vi_value(const char *text, const char *key, char *out, size_t cap)
{
    size_t kn = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line) {
        const char *p = line + strspn(line, " \t");
        if (strncmp(p, key, kn) != 0 || (p[kn] != ' ' && p[kn] != '='))
            continue;
        p += kn + strspn(p + kn, " ");
        if (*p != '=')
            continue;
        p += 1 + strspn(p + 1, " ");
        size_t n = strcspn(p, "\n");
        n = n < cap - 1 ? n : cap - 1;
        memcpy(out, p, n);
        out[n] = 0;
        return 1;
    }
    return 0;
}

static uint64_t vi_u64(const char *text, const char *key)
{
    char v[128];
    return vi_value(text, key, v, sizeof v) ? strtoull(v, NULL, 0) : UINT64_MAX;
}

static int vi_bool(const char *text, const char *key)
{
    char v[16];
    return vi_value(text, key, v, sizeof v) ? !strcmp(v, "true") : -1;
}

TEST(test_devices_vs_vulkaninfo)
{
    struct gl_vk_device_info *infos = NULL;
    int n = 0;
    struct gl_err err = {0};
    REQUIRE(gl_vk_list_devices(&infos, &n, &err) == GL_OK && n >= 1);
    FILE *f = n == 1 ? popen("vulkaninfo 2>/dev/null", "r") : NULL;
    size_t cap = 1 << 20, len = 0, got;
    char *text = malloc(cap);
    while (f && len < cap - 1 && (got = fread(text + len, 1, cap - 1 - len, f)) > 0)
        len += got;
    text[len] = 0;
    if (f)
        pclose(f);
    char v[256];
    if (!vi_value(text, "deviceName", v, sizeof v)) {
        printf("  vulkaninfo not available (or several devices): comparison skipped\n");
    } else {
        const struct gl_vk_device_info *d = &infos[0];
        CHECKF(!strcmp(v, d->name), "name %s vs %s", v, d->name);
        char drv[300], info[200];
        if (vi_value(text, "driverName", drv, sizeof drv) &&
            vi_value(text, "driverInfo", info, sizeof info)) {
            snprintf(v, sizeof v, "%.100s, %.100s", drv, info);
            CHECKF(!strcmp(v, d->driver), "driver %s vs %s", v, d->driver);
        }
        CHECK(vi_value(text, "apiVersion", v, sizeof v));
        char ours[32];
        snprintf(ours, sizeof ours, "%u.%u.%u", (d->api_version >> 22) & 0x7f,
                 (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff);
        CHECKF(!strncmp(v, ours, strlen(ours)), "api %s vs %s", v, ours);
        CHECK(vi_u64(text, "vendorID") == d->vendor_id);
        CHECK(vi_u64(text, "deviceID") == d->device_id);
        CHECK(vi_value(text, "deviceType", v, sizeof v));
        char type[64];
        snprintf(type, sizeof type, "%s", d->type);
        for (char *c = type; *c; c++)
            *c = (char)(*c - ('a' <= *c && *c <= 'z' ? 'a' - 'A' : 0));
        CHECKF(strstr(v, type) != NULL, "type %s vs %s", v, d->type);
        CHECK(vi_u64(text, "maxStorageBufferRange") == d->max_storage_range);
        CHECK(vi_u64(text, "maxMemoryAllocationSize") == d->max_alloc);
        CHECK(vi_u64(text, "minStorageBufferOffsetAlignment") == d->storage_align);
        CHECK(vi_u64(text, "maxPushConstantsSize") == d->max_push_bytes);
        CHECK(vi_u64(text, "maxComputeSharedMemorySize") == d->max_shared_bytes);
        CHECK(vi_u64(text, "subgroupSize") == d->subgroup_size);
        CHECK(vi_bool(text, "storageBuffer16BitAccess") == d->storage16);
        CHECK(vi_bool(text, "storageBuffer8BitAccess") == d->storage8);
        CHECK(vi_bool(text, "shaderFloat16") == d->float16);
        CHECK(vi_bool(text, "shaderInt8") == d->int8);
        CHECK(vi_bool(text, "shaderIntegerDotProduct") == d->int_dot);
        CHECK((strstr(text, "VK_KHR_cooperative_matrix ") != NULL) == d->coop_matrix);
        CHECK((strstr(text, "VK_EXT_memory_budget ") != NULL) == d->mem_budget);
        // memoryHeaps[i]: followed by "size = N (...)".
        for (int h = 0; h < d->n_heaps; h++) {
            char key[32];
            snprintf(key, sizeof key, "memoryHeaps[%d]:", h);
            const char *at = strstr(text, key);
            CHECKF(at && vi_u64(at, "size") == d->heaps[h].bytes, "heap %d", h);
        }
        printf("  vulkaninfo agrees: %s, %s, %d heap(s), subgroup %u\n", d->name, d->driver,
               d->n_heaps, d->subgroup_size);
    }
    free(text);
    gl_free(infos);
}

// Matrices wider than one binding are split into several dispatches by rows; an activation
// block that does not fit one binding is refused. Runs last: the cap stays on the device.
TEST(test_matmul_split_rows)
{
    gl_vk_device_cap_storage_range(dev, 4096);
    check_case(GL_TYPE_F32, 67, 77, 2);   // 308-byte rows: 13 per dispatch
    check_case(GL_TYPE_Q6_K, 67, 256, 2); // 210-byte rows: 19 per dispatch
    struct mm_case c;
    case_make(&c, GL_TYPE_Q6_K, 67, 256, 8); // x spans 8 x 259 floats > 4096 bytes
    struct gl_err err = {0};
    CHECK(case_run(&c, -1, 0, &err) == GL_E_LIMIT);
    CHECKF(strstr(err.msg, "activations spans"), "%s", err.msg);
    case_free(&c);
}

// No loader: the message names the file and what to install (checked before the device is
// opened: dlopen of the real loader afterwards is unaffected).
static int check_no_loader(void)
{
    setenv("GLINT_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
    struct gl_vk_device_info *infos = NULL;
    int n = 0;
    struct gl_err err = {0};
    gl_status st = gl_vk_list_devices(&infos, &n, &err);
    unsetenv("GLINT_VULKAN_LOADER");
    int ok = st == GL_E_UNSUPPORTED && n == 0 && strstr(err.msg, "no Vulkan loader") &&
             strstr(err.msg, "/nonexistent/libvulkan.so.1") && strstr(err.msg, "libvulkan1");
    printf("%s 0 - no-loader message: %s\n", ok ? "ok" : "not ok", err.msg);
    return ok;
}

static int skip(const char *why)
{
    const char *req = getenv("GLINT_VK_REQUIRE");
    printf("SKIP test_vk: %s\n", why);
    return req && !strcmp(req, "1") ? 1 : 0;
}

int main(void)
{
    if (!gl_vk_built()) {
        struct gl_err err = {0};
        struct gl_vk_device_info *infos;
        int n;
        if (gl_vk_list_devices(&infos, &n, &err) != GL_E_UNSUPPORTED ||
            !strstr(err.msg, "built without Vulkan"))
            return 1;
        return skip("glint was built without Vulkan (no Vulkan headers or glslc)");
    }
    if (!check_no_loader())
        return 1;
    // Under the validation layer where it is installed (GLINT_VK_VALIDATION=0 turns it off).
    if (!getenv("GLINT_VK_VALIDATION"))
        setenv("GLINT_VK_VALIDATION", "1", 1);
    struct gl_err err = {0};
    gl_status st = gl_vk_device_open(0, &dev, &err);
    if (st == GL_E_UNSUPPORTED && strstr(err.msg, "validation layer")) {
        printf("# the Khronos validation layer is not installed: running without it\n");
        setenv("GLINT_VK_VALIDATION", "0", 1);
        st = gl_vk_device_open(0, &dev, &err);
    }
    if (st != GL_OK)
        return skip(err.msg);
    printf("# device 0: %s (%s), validation %s\n", gl_vk_device_info(dev)->name,
           gl_vk_device_info(dev)->driver,
           !strcmp(getenv("GLINT_VK_VALIDATION"), "1") ? "on" : "off");
    if (gl_vk_recorder_create(dev, &rec, &err) != GL_OK) {
        printf("not ok - recorder: %s\n", err.msg);
        return 1;
    }
    int64_t t0 = gl_time_us();
    int rc;
    {
        // As RUN_TESTS, but returning here: the device is closed after the tests.
#define VK_TESTS                                                                                   \
    test_matmul_types_short, test_matmul_types_long, test_matmul_many_rows,                        \
        test_matmul_corrupt_block_fails, test_matmul_one_quant_step_fails,                         \
        test_matmul_batch_invariant, test_recorder_chain_and_many, test_errors, test_device_lost,  \
        test_devices_vs_vulkaninfo,                                                                \
        test_matmul_split_rows /* last: it caps the device's binding range */
#define VK_STR_(...) #__VA_ARGS__
#define VK_STR(...)  VK_STR_(__VA_ARGS__)
        t_test_fn fns[] = {VK_TESTS};
        rc = t_run(VK_STR(VK_TESTS), fns, (int)(sizeof fns / sizeof fns[0]));
    }
    gl_vk_recorder_free(rec);
    gl_vk_device_close(dev);
    long verr = gl_vk_validation_errors();
    printf("# %.1f s; validation errors: %ld\n", (double)(gl_time_us() - t0) / 1e6, verr);
    return rc != 0 || verr != 0;
}
