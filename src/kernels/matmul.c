// SPDX-License-Identifier: MIT
// matmul: out[t][r] = dot(W row r, act row t) with the table's vec_dot for the weight type.
// The work is a list of items (a chunk of weight rows x a tile of tokens), in tile-major order,
// that the pool's threads claim one at a time from atomic cursors (run_items): a thread the OS
// delays (2-vCPU VMs steal time) no longer holds up the others. Every output element is exactly one
// vec_dot call whoever computes it, so results do not depend on the thread count, the claim
// order or the tiling. For n_tok > 1 a token tile (a few hundred KiB of activations) stays in
// L2; where the table has a vec_dot4 (bit-identical to vec_dot by contract) each group of four
// tokens is dotted with every row of the chunk (one weight-row unpack per four tokens), and the
// tile's last n_tok % 4 tokens take one vec_dot per (row, token).
#include "kernels/kernels.h"

#include "base/base.h"

#include <stdatomic.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include <string.h>

// Rows per item: 64 rows of a 6656-wide Q4_K matrix are 240 KiB of contiguous weights, long
// enough for the prefetchers, and a 19968-row matrix still splits into ~300 items.
#define MM_CHUNK_ROWS 64
// 16-row groups per item, both layouts: the same 64 rows when the groups are consecutive.
#define MM_GROUP_CHUNK 4
// Activation bytes per token tile: half of a 1 MiB L2, leaving room for the weight rows.
#define MM_TILE_BYTES   (512 * 1024)
#define MM_TILE_MAX_TOK 64

// One matmul split into items (a chunk of weight rows x a tile of tokens) that the threads claim
// (run_items); item() computes one of them (row layout or r16).
struct mm_job {
    void (*item)(const struct mm_job *j, int64_t item);
    gl_vec_dot_fn dot;
    gl_vec_dot4_fn dot4; // NULL: one vec_dot per (row, token)
    gl_gemm_r16_fn r16;  // r16 layout only
    const uint8_t *W;
    size_t row_bytes;     // r16: bytes of a 16-row group
    int64_t n_rows, n_in; // r16: n_rows counts groups
    const uint8_t *act;
    size_t act_stride;
    int64_t n_tok;
    float *out;
    int64_t out_stride;
    int64_t n_chunks, tile_tok, n_items;
    const int32_t *groups; // NULL: every row; else rows of these 16-row groups (gl_matmul_groups)
    int64_t n_groups;
};

// Rows [r0, r1) x tokens [t0, t1) of a row-layout job.
static void mm_rows(const struct mm_job *j, int64_t r0, int64_t r1, int64_t t0, int64_t t1)
{
    int64_t t = t0;
    // Groups of four tokens outermost: the group's activation rows (4 x 7.6 KB at n_in 6656,
    // q8_K) are reused from L1 by every row of the chunk, and the chunk's weights (240 KB) come
    // from L2. Row-outermost instead re-streams 1168 B of activations per 144 B q4_K block.
    if (j->dot4 != NULL)
        for (; t + 4 <= t1; t += 4) {
            const uint8_t *a = j->act + (size_t)t * j->act_stride;
            for (int64_t r = r0; r < r1; r++)
                j->dot4(j->n_in, &j->out[t * j->out_stride + r], j->out_stride,
                        j->W + (size_t)r * j->row_bytes, a, j->act_stride);
        }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *w = j->W + (size_t)r * j->row_bytes;
        for (int64_t u = t; u < t1; u++)
            j->dot(j->n_in, &j->out[u * j->out_stride + r], w, j->act + (size_t)u * j->act_stride);
    }
}

// An item's token range, and its chunk's first and last (exclusive) unit: rows (row layout),
// 16-row groups (r16), or entries of the group list.
static void mm_item_range(const struct mm_job *j, int64_t item, int64_t per_chunk, int64_t n_units,
                          int64_t *u0, int64_t *u1, int64_t *t0, int64_t *t1)
{
    int64_t tile = item / j->n_chunks, chunk = item % j->n_chunks;
    *u0 = chunk * per_chunk;
    *u1 = *u0 + per_chunk < n_units ? *u0 + per_chunk : n_units;
    *t0 = tile * j->tile_tok;
    *t1 = *t0 + j->tile_tok < j->n_tok ? *t0 + j->tile_tok : j->n_tok;
}

static void mm_item(const struct mm_job *j, int64_t item)
{
    int64_t u0, u1, t0, t1;
    if (j->groups == NULL) {
        mm_item_range(j, item, MM_CHUNK_ROWS, j->n_rows, &u0, &u1, &t0, &t1);
        mm_rows(j, u0, u1, t0, t1);
        return;
    }
    mm_item_range(j, item, MM_GROUP_CHUNK, j->n_groups, &u0, &u1, &t0, &t1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t r0 = (int64_t)j->groups[u] * GL_R16_ROWS, r1 = r0 + GL_R16_ROWS;
        mm_rows(j, r0, r1 < j->n_rows ? r1 : j->n_rows, t0, t1);
    }
}

// Items 0 .. n_chunks * n_tiles - 1 of a job (tile-major: item = tile * n_chunks + chunk),
// claimed from per-thread segments: thread ith owns a contiguous run of chunks and takes them
// tile by tile, in order, from its segment's cursor; a thread that runs dry takes the next items
// of the other segments, in turn, the same way. So a thread that the OS delays still holds up no
// one, and each thread's weights are one forward stream: its software prefetch runs into its own
// next chunk instead of the other thread's. From DRAM, 13 x 75 MB Q4_K and 9 x 109 MB Q6_K
// matrices (6,656 x 19,968), alternated pass by pass with the one shared counter of before (every
// other chunk per thread), both orders (Zen 3, 2 threads, AVX2 r16): 0.88-0.97x the time at 1
// token and 0.85-0.89x at 4. In the 52-layer 30b-shape model, the two orders switched every ~2
// tokens in one process: 0.97x the matmul time at 1 token (tg) and at 4 (pp4).
#define ITEMS_MAX_SEG 64

struct items {
    void (*fn)(const void *job, int64_t item);
    const void *job;
    int64_t n_chunks, n_tiles;
    int n_seg;
    // Segment s: chunks [c0, c0 + len) of every tile; next counts its claimed items, len per tile.
    struct {
        _Alignas(64) _Atomic int64_t next;
        int64_t c0, len;
    } seg[ITEMS_MAX_SEG];
};

static void items_worker(void *ctx, int ith, int nth)
{
    struct items *it = ctx;
    (void)nth;
    for (int k = 0; k < it->n_seg; k++) {
        int s = (ith + k) % it->n_seg;
        const int64_t len = it->seg[s].len, end = len * it->n_tiles;
        for (;;) {
            int64_t i = atomic_fetch_add_explicit(&it->seg[s].next, 1, memory_order_relaxed);
            if (i >= end)
                break;
            it->fn(it->job, (i / len) * it->n_chunks + it->seg[s].c0 + i % len);
        }
    }
}

static void run_items(struct gl_pool *pool, void (*fn)(const void *job, int64_t item),
                      const void *job, int64_t n_chunks, int64_t n_items)
{
    GL_ASSERT(n_chunks > 0 && n_items % n_chunks == 0);
    struct items it = {.fn = fn, .job = job, .n_chunks = n_chunks, .n_tiles = n_items / n_chunks};
    // A single item is not worth waking a worker for.
    int nth = n_items == 1 ? 1 : gl_pool_size(pool);
    int64_t n_seg = nth < ITEMS_MAX_SEG ? nth : ITEMS_MAX_SEG;
    it.n_seg = (int)(n_seg < n_chunks ? n_seg : n_chunks);
    for (int s = 0; s < it.n_seg; s++) {
        it.seg[s].c0 = n_chunks * s / it.n_seg;
        it.seg[s].len = n_chunks * (s + 1) / it.n_seg - it.seg[s].c0;
        atomic_init(&it.seg[s].next, 0);
    }
    if (nth == 1)
        items_worker(&it, 0, 1);
    else
        gl_pool_run(pool, items_worker, &it);
}

static void mm_item_call(const void *job, int64_t item)
{
    const struct mm_job *j = job;
    j->item(j, item);
}

static void mm_run(struct gl_pool *pool, const struct mm_job *j)
{
    run_items(pool, mm_item_call, j, j->n_chunks, j->n_items);
}

// The row-layout job: tiles sized for L2 (see MM_TILE_BYTES).
static struct mm_job mm_rows_job(const struct gl_kernels *k, enum gl_type wtype, const void *W,
                                 int64_t n_rows, int64_t n_in, const void *act, size_t act_stride,
                                 int64_t n_tok, float *out, int64_t out_stride)
{
    GL_ASSERT(k != NULL && (unsigned)wtype < GL_TYPE_COUNT);
    GL_ASSERT_MSG(k->vec_dot[wtype] != NULL, "matmul: no %s vec_dot for weight type %d", k->isa,
                  (int)wtype);
    GL_ASSERT(n_rows >= 0 && n_tok >= 0 && n_in > 0);
    GL_ASSERT(n_tok <= 1 || out_stride >= n_rows);
    size_t row_bytes = gl_type_row_size((uint32_t)wtype, n_in);
    GL_ASSERT_MSG(row_bytes != 0, "matmul: n_in %lld is not a whole number of type-%d blocks",
                  (long long)n_in, (int)wtype);
    int64_t tile_tok = act_stride > 0 ? (int64_t)(MM_TILE_BYTES / act_stride) : MM_TILE_MAX_TOK;
    tile_tok = tile_tok < 1 ? 1 : tile_tok > MM_TILE_MAX_TOK ? MM_TILE_MAX_TOK : tile_tok;
    return (struct mm_job){
        .item = mm_item,
        .dot = k->vec_dot[wtype],
        .dot4 = k->vec_dot4[wtype],
        .W = W,
        .row_bytes = row_bytes,
        .n_rows = n_rows,
        .n_in = n_in,
        .act = act,
        .act_stride = act_stride,
        .n_tok = n_tok,
        .out = out,
        .out_stride = out_stride,
        .n_chunks = (n_rows + MM_CHUNK_ROWS - 1) / MM_CHUNK_ROWS,
        .tile_tok = tile_tok,
    };
}

void gl_matmul(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type wtype, const void *W,
               int64_t n_rows, int64_t n_in, const void *act, size_t act_stride, int64_t n_tok,
               float *out, int64_t out_stride)
{
    struct mm_job j =
        mm_rows_job(k, wtype, W, n_rows, n_in, act, act_stride, n_tok, out, out_stride);
    if (n_rows == 0 || n_tok == 0)
        return;
    j.n_items = j.n_chunks * ((n_tok + j.tile_tok - 1) / j.tile_tok);
    mm_run(pool, &j);
}

// ---- r16 layout ----
// Items are (4 groups of 16 rows) x (a token tile); inside an item each group's weights (up to
// 78 blocks x 2.3 KB = 180 KB at n_in 19968) stay in L2 while the tile's tokens pass over them
// 8 at a time. The tile is sized for L3 (4 MiB of q8_K activations, 180 tokens at n_in 19968),
// not L2: a 16-row x 8-token call reads only ~3 B of activations per cycle, while a small tile
// would re-read every weight from DRAM once per tile (75 MB per pass for a 6656 x 19968 Q4_K).
#define MM_R16_TILE_BYTES (4u << 20)

static void mm_r16_item(const struct mm_job *j, int64_t item)
{
    int64_t u0, u1, t0, t1;
    mm_item_range(j, item, MM_GROUP_CHUNK, j->groups ? j->n_groups : j->n_rows, &u0, &u1, &t0, &t1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t g = j->groups ? j->groups[u] : u;
        for (int64_t t = t0; t < t1; t += GL_R16_MAX_TOK) {
            int64_t nt = t1 - t < GL_R16_MAX_TOK ? t1 - t : GL_R16_MAX_TOK;
            j->r16(j->n_in, j->W + (size_t)g * j->row_bytes, j->act + (size_t)t * j->act_stride,
                   j->act_stride, (int)nt, j->out + t * j->out_stride + g * GL_R16_ROWS,
                   j->out_stride);
        }
    }
}

static struct mm_job mm_r16_job(const struct gl_kernels *k, enum gl_type wtype, const void *W,
                                int64_t n_rows, int64_t n_in, const void *act, size_t act_stride,
                                int64_t n_tok, float *out, int64_t out_stride)
{
    GL_ASSERT(k != NULL && (unsigned)wtype < GL_TYPE_COUNT);
    GL_ASSERT_MSG(k->gemm_r16[wtype] != NULL, "matmul: no %s r16 kernel for weight type %d", k->isa,
                  (int)wtype);
    GL_ASSERT(n_rows % GL_R16_ROWS == 0 && n_tok >= 0 && n_in > 0);
    GL_ASSERT(n_tok <= 1 || out_stride >= n_rows);
    size_t row_bytes = gl_type_row_size((uint32_t)wtype, n_in);
    GL_ASSERT(row_bytes != 0 && act_stride > 0);
    int64_t tile_tok = (int64_t)(MM_R16_TILE_BYTES / act_stride) / GL_R16_MAX_TOK * GL_R16_MAX_TOK;
    tile_tok = tile_tok < GL_R16_MAX_TOK ? GL_R16_MAX_TOK : tile_tok;
    struct mm_job j = {
        .item = mm_r16_item,
        .r16 = k->gemm_r16[wtype],
        .W = W,
        .row_bytes = row_bytes * GL_R16_ROWS,
        .n_rows = n_rows / GL_R16_ROWS,
        .n_in = n_in,
        .act = act,
        .act_stride = act_stride,
        .n_tok = n_tok,
        .out = out,
        .out_stride = out_stride,
        .tile_tok = tile_tok,
    };
    j.n_chunks = (j.n_rows + MM_GROUP_CHUNK - 1) / MM_GROUP_CHUNK;
    return j;
}

void gl_matmul_r16(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type wtype,
                   const void *W, int64_t n_rows, int64_t n_in, const void *act, size_t act_stride,
                   int64_t n_tok, float *out, int64_t out_stride)
{
    struct mm_job j =
        mm_r16_job(k, wtype, W, n_rows, n_in, act, act_stride, n_tok, out, out_stride);
    if (n_rows == 0 || n_tok == 0)
        return;
    j.n_items = j.n_chunks * ((n_tok + j.tile_tok - 1) / j.tile_tok);
    mm_run(pool, &j);
}

void gl_matmul_groups(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type wtype, int r16,
                      const void *W, int64_t n_rows, int64_t n_in, const void *act,
                      size_t act_stride, int64_t n_tok, float *out, int64_t out_stride,
                      const int32_t *groups, int64_t n_groups)
{
    struct mm_job j = (r16 ? mm_r16_job : mm_rows_job)(k, wtype, W, n_rows, n_in, act, act_stride,
                                                       n_tok, out, out_stride);
    GL_ASSERT(n_groups >= 0 && (n_groups == 0 || groups != NULL));
    for (int64_t i = 0; i < n_groups; i++) // ascending, inside the matrix
        GL_ASSERT(groups[i] >= 0 && (int64_t)groups[i] * GL_R16_ROWS < n_rows &&
                  (i == 0 || groups[i] > groups[i - 1]));
    if (n_groups == 0 || n_tok == 0)
        return;
    j.groups = groups;
    j.n_groups = n_groups;
    j.n_chunks = (n_groups + MM_GROUP_CHUNK - 1) / MM_GROUP_CHUNK;
    j.n_items = j.n_chunks * ((n_tok + j.tile_tok - 1) / j.tile_tok);
    mm_run(pool, &j);
}

// ---- activation conversion ----

struct quant_job {
    gl_from_float_fn fn;
    const float *x;
    uint8_t *dst;
    int64_t n_tok, n_in;
    size_t stride;
};

static void quant_rows(void *ctx, int ith, int nth)
{
    const struct quant_job *j = ctx;
    for (int64_t t = ith; t < j->n_tok; t += nth)
        j->fn(j->x + t * j->n_in, j->dst + (size_t)t * j->stride, j->n_in);
}

void gl_quantize_rows(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type vdt,
                      const float *x, int64_t n_tok, int64_t n_in, void *dst, size_t stride)
{
    GL_ASSERT(k != NULL && (unsigned)vdt < GL_TYPE_COUNT && k->from_float[vdt] != NULL);
    struct quant_job j = {k->from_float[vdt], x, dst, n_tok, n_in, stride};
    if (n_tok > 1)
        gl_pool_run(pool, quant_rows, &j);
    else
        quant_rows(&j, 0, 1);
}

// out[t][r] = tile[r - r0][t - t0] (tile rows TILE_TOK floats apart): 4x4 blocks transposed in
// SSE registers, so a token's row is written 16 bytes at a time (4-byte stores to 64 rows 36 KB
// apart cost ~15% of a fc1 item). Shared by the BF16 and Q8_0 token-lane GEMMs.
#define TILE_TOK 64
static void tile_out(float *out, int64_t out_stride, const float *tile, int64_t r0, int64_t r1,
                     int64_t t0, int64_t t1)
{
    int64_t t = t0;
#if defined(__SSE2__)
    for (; t + 4 <= t1; t += 4) {
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            const float *s = tile + (r - r0) * TILE_TOK + (t - t0);
            __m128 a = _mm_loadu_ps(s), b = _mm_loadu_ps(s + TILE_TOK),
                   c = _mm_loadu_ps(s + 2 * TILE_TOK), d = _mm_loadu_ps(s + 3 * TILE_TOK);
            _MM_TRANSPOSE4_PS(a, b, c, d);
            _mm_storeu_ps(out + t * out_stride + r, a);
            _mm_storeu_ps(out + (t + 1) * out_stride + r, b);
            _mm_storeu_ps(out + (t + 2) * out_stride + r, c);
            _mm_storeu_ps(out + (t + 3) * out_stride + r, d);
        }
        for (; r < r1; r++)
            for (int64_t u = t; u < t + 4; u++)
                out[u * out_stride + r] = tile[(r - r0) * TILE_TOK + (u - t0)];
    }
#endif
    for (; t < t1; t++)
        for (int64_t r = r0; r < r1; r++)
            out[t * out_stride + r] = tile[(r - r0) * TILE_TOK + (t - t0)];
}

// ---- BF16 token-lane GEMM ----
// An item is up to BF16_CHUNK_COLS weight rows x BF16_TILE_TOK tokens; inside it k goes in blocks
// of BF16_KC pairs (1 KiB of each weight row, 1 KiB per token), and for each block the 12-row
// column blocks (12 KiB of weights, reused from L1) pass over the tile's groups two at a time
// (32 KiB of activations from L2). The item's sums live in a transposed tile on the stack between
// k blocks (storing and reloading an f32 is exact), then go to out once. Items are tile-major:
// the two threads share a token tile (from L2/L3) and stream the weights, which at 64 tokens a
// tile is 64 FLOP per weight byte.
#define BF16_CHUNK_COLS (8 * GL_BF16_MAX_COLS)
#define BF16_TILE_TOK   TILE_TOK
#define BF16_KC         256

struct bf16_job {
    gl_gemm_bf16_fn fn;
    const uint16_t *W, *act;
    int64_t n_rows, n_in, n_tok, out_stride, n_chunks, n_items;
    float *out;
};

static void bf16_item(const struct bf16_job *j, int64_t item)
{
    float tile[BF16_CHUNK_COLS * BF16_TILE_TOK];
    const int64_t n_pairs = j->n_in / 2;
    const size_t gs = (size_t)j->n_in * GL_BF16_GROUP; // elements per packed group
    int64_t r0 = (item % j->n_chunks) * BF16_CHUNK_COLS, t0 = (item / j->n_chunks) * BF16_TILE_TOK;
    int64_t r1 = r0 + BF16_CHUNK_COLS < j->n_rows ? r0 + BF16_CHUNK_COLS : j->n_rows;
    int64_t t1 = t0 + BF16_TILE_TOK < j->n_tok ? t0 + BF16_TILE_TOK : j->n_tok;
    int64_t n_groups = (t1 - t0 + GL_BF16_GROUP - 1) / GL_BF16_GROUP;
    const uint16_t *act = j->act + (size_t)(t0 / GL_BF16_GROUP) * gs;
    for (int64_t p0 = 0; p0 < n_pairs; p0 += BF16_KC) {
        int64_t np = n_pairs - p0 < BF16_KC ? n_pairs - p0 : BF16_KC;
        for (int64_t c = r0; c < r1; c += GL_BF16_MAX_COLS) {
            int nc = (int)(r1 - c < GL_BF16_MAX_COLS ? r1 - c : GL_BF16_MAX_COLS);
            for (int64_t g = 0; g < n_groups; g += GL_BF16_MAX_GROUPS) {
                int ng =
                    (int)(n_groups - g < GL_BF16_MAX_GROUPS ? n_groups - g : GL_BF16_MAX_GROUPS);
                j->fn(np, act + (size_t)g * gs + (size_t)p0 * 2 * GL_BF16_GROUP, gs, ng,
                      j->W + (size_t)c * (size_t)j->n_in + 2 * (size_t)p0, (size_t)j->n_in, nc,
                      tile + (c - r0) * BF16_TILE_TOK + g * GL_BF16_GROUP, BF16_TILE_TOK, p0 > 0);
            }
        }
    }
    tile_out(j->out, j->out_stride, tile, r0, r1, t0, t1);
}

static void bf16_item_call(const void *job, int64_t item)
{
    bf16_item(job, item);
}

void gl_matmul_bf16(struct gl_pool *pool, const struct gl_kernels *k, const void *W, int64_t n_rows,
                    int64_t n_in, const void *act, int64_t n_tok, float *out, int64_t out_stride)
{
    GL_ASSERT(k != NULL && k->gemm_bf16 != NULL);
    GL_ASSERT(n_rows >= 0 && n_tok >= 0 && n_in > 0 && n_in % 2 == 0);
    GL_ASSERT(n_tok <= 1 || out_stride >= n_rows);
    if (n_rows == 0 || n_tok == 0)
        return;
    struct bf16_job j = {
        .fn = k->gemm_bf16,
        .W = W,
        .act = act,
        .n_rows = n_rows,
        .n_in = n_in,
        .n_tok = n_tok,
        .out_stride = out_stride,
        .out = out,
        .n_chunks = (n_rows + BF16_CHUNK_COLS - 1) / BF16_CHUNK_COLS,
    };
    j.n_items = j.n_chunks * ((n_tok + BF16_TILE_TOK - 1) / BF16_TILE_TOK);
    run_items(pool, bf16_item_call, &j, j.n_chunks, j.n_items);
}

size_t gl_bf16_packed_bytes(int64_t n_tok, int64_t n_in)
{
    GL_ASSERT(n_tok >= 0 && n_in >= 0 && n_in % 2 == 0);
    int64_t groups = (n_tok + GL_BF16_GROUP - 1) / GL_BF16_GROUP;
    return (size_t)groups * GL_BF16_GROUP * (size_t)n_in * sizeof(uint16_t);
}

struct pack_job {
    const float *x;
    uint16_t *dst;
    int64_t n_tok, n_in, x_stride;
};

// gl_f32_to_bf16 (base.c), inlined here: the pack converts every activation of every matmul.
static inline uint32_t bf16_rne(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (x >> 16) | 64; // quiet NaN
    return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

// Group g: token i's elements (2p, 2p + 1) become dword p * 16 + i of the group (low half 2p).
static void pack_groups(void *ctx, int ith, int nth)
{
    const struct pack_job *j = ctx;
    int64_t n_groups = (j->n_tok + GL_BF16_GROUP - 1) / GL_BF16_GROUP, n_pairs = j->n_in / 2;
    for (int64_t g = ith; g < n_groups; g += nth) {
        uint32_t *d = (uint32_t *)(j->dst + (size_t)g * GL_BF16_GROUP * (size_t)j->n_in);
        for (int i = 0; i < GL_BF16_GROUP; i++) {
            int64_t t = g * GL_BF16_GROUP + i;
            const float *x = j->x + t * j->x_stride;
            if (t >= j->n_tok)
                for (int64_t p = 0; p < n_pairs; p++)
                    d[p * GL_BF16_GROUP + i] = 0;
            else
                for (int64_t p = 0; p < n_pairs; p++)
                    d[p * GL_BF16_GROUP + i] = bf16_rne(x[2 * p]) | bf16_rne(x[2 * p + 1]) << 16;
        }
    }
}

void gl_pack_bf16(struct gl_pool *pool, const float *x, int64_t n_tok, int64_t n_in,
                  int64_t x_stride, void *dst)
{
    GL_ASSERT(n_tok >= 0 && n_in > 0 && n_in % 2 == 0 && x_stride >= n_in);
    struct pack_job j = {x, dst, n_tok, n_in, x_stride};
    if (n_tok > GL_BF16_GROUP)
        gl_pool_run(pool, pack_groups, &j);
    else
        pack_groups(&j, 0, 1);
}

// ---- Q8_0 token-lane GEMM ----
// The BF16 GEMM's items and tiling (96 rows x 64 tokens, transposed f32 tile on the stack), with
// k cut in blocks of Q8_KB Q8_0 blocks (512 elements: 576 B per token, 36 KiB for the tile's 64
// tokens from L2; 544 B per weight row, 3.3 KiB for a 6-row column block, reused from L1 by
// the tile's groups). The f32 tile carries the block-ordered sums between k blocks exactly.
#define Q8_CHUNK_COLS (16 * GL_Q8_MAX_COLS)
#define Q8_KB         16

struct q8_job {
    gl_gemm_q8_0_fn fn;
    const struct gl_block_q8_0 *W;
    const struct gl_q8_0_wsum *ws;
    const uint8_t *act;
    int64_t n_rows, n_blocks, n_tok, out_stride, n_chunks, n_items;
    float *out;
};

static void q8_item(const struct q8_job *j, int64_t item)
{
    float tile[Q8_CHUNK_COLS * TILE_TOK];
    const int64_t nb = j->n_blocks;
    const size_t gs = (size_t)nb * GL_Q8_BLOCK_BYTES; // bytes per packed group
    int64_t r0 = (item % j->n_chunks) * Q8_CHUNK_COLS, t0 = (item / j->n_chunks) * TILE_TOK;
    int64_t r1 = r0 + Q8_CHUNK_COLS < j->n_rows ? r0 + Q8_CHUNK_COLS : j->n_rows;
    int64_t t1 = t0 + TILE_TOK < j->n_tok ? t0 + TILE_TOK : j->n_tok;
    int64_t n_groups = (t1 - t0 + GL_Q8_GROUP - 1) / GL_Q8_GROUP;
    const uint8_t *act = j->act + (size_t)(t0 / GL_Q8_GROUP) * gs;
    for (int64_t b0 = 0; b0 < nb; b0 += Q8_KB) {
        int64_t kb = nb - b0 < Q8_KB ? nb - b0 : Q8_KB;
        for (int64_t c = r0; c < r1; c += GL_Q8_MAX_COLS) {
            int nc = (int)(r1 - c < GL_Q8_MAX_COLS ? r1 - c : GL_Q8_MAX_COLS);
            size_t w0 = (size_t)c * (size_t)nb + (size_t)b0;
            for (int64_t g = 0; g < n_groups; g += GL_Q8_MAX_GROUPS) {
                int ng = (int)(n_groups - g < GL_Q8_MAX_GROUPS ? n_groups - g : GL_Q8_MAX_GROUPS);
                j->fn(kb, act + (size_t)g * gs + (size_t)b0 * GL_Q8_BLOCK_BYTES, gs, ng, j->W + w0,
                      j->ws + w0, (size_t)nb, nc, tile + (c - r0) * TILE_TOK + g * GL_Q8_GROUP,
                      TILE_TOK, b0 > 0);
            }
        }
    }
    tile_out(j->out, j->out_stride, tile, r0, r1, t0, t1);
}

static void q8_item_call(const void *job, int64_t item)
{
    q8_item(job, item);
}

void gl_matmul_q8_0(struct gl_pool *pool, const struct gl_kernels *k, const void *W,
                    const struct gl_q8_0_wsum *ws, int64_t n_rows, int64_t n_in, const void *act,
                    int64_t n_tok, float *out, int64_t out_stride)
{
    GL_ASSERT(k != NULL && k->gemm_q8_0 != NULL);
    GL_ASSERT(n_rows >= 0 && n_tok >= 0 && n_in > 0 && n_in % GL_QK8_0 == 0);
    GL_ASSERT(n_tok <= 1 || out_stride >= n_rows);
    if (n_rows == 0 || n_tok == 0)
        return;
    struct q8_job j = {
        .fn = k->gemm_q8_0,
        .W = W,
        .ws = ws,
        .act = act,
        .n_rows = n_rows,
        .n_blocks = n_in / GL_QK8_0,
        .n_tok = n_tok,
        .out_stride = out_stride,
        .out = out,
        .n_chunks = (n_rows + Q8_CHUNK_COLS - 1) / Q8_CHUNK_COLS,
    };
    j.n_items = j.n_chunks * ((n_tok + TILE_TOK - 1) / TILE_TOK);
    run_items(pool, q8_item_call, &j, j.n_chunks, j.n_items);
}

size_t gl_q8_0_packed_bytes(int64_t n_tok, int64_t n_in)
{
    GL_ASSERT(n_tok >= 0 && n_in >= 0 && n_in % GL_QK8_0 == 0);
    int64_t groups = (n_tok + GL_Q8_GROUP - 1) / GL_Q8_GROUP;
    return (size_t)groups * (size_t)(n_in / GL_QK8_0) * GL_Q8_BLOCK_BYTES;
}

struct pack_q8_job {
    gl_from_float_fn quant;
    const float *x;
    uint8_t *dst;
    int64_t n_tok, n_in, x_stride;
};

// Group g, block b at dst + (g * nb + b) * GL_Q8_BLOCK_BYTES: token i's quants 4q..4q+3 (+ 128)
// at byte 64 q + 4 i, its scale at float 128 + i. Each row is quantized one 32-element block at a
// time by the table's from_float, which quantizes every block on its own (quant.c), so the quants
// and scales equal those of gl_quantize_rows on the whole row.
static void pack_q8_groups(void *ctx, int ith, int nth)
{
    const struct pack_q8_job *j = ctx;
    const int64_t nb = j->n_in / GL_QK8_0, n_groups = (j->n_tok + GL_Q8_GROUP - 1) / GL_Q8_GROUP;
    for (int64_t g = ith; g < n_groups; g += nth) {
        uint8_t *dg = j->dst + (size_t)g * (size_t)nb * GL_Q8_BLOCK_BYTES;
        for (int i = 0; i < GL_Q8_GROUP; i++) {
            int64_t t = g * GL_Q8_GROUP + i;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *d = dg + (size_t)b * GL_Q8_BLOCK_BYTES;
                struct gl_block_q8_0 q = {0};
                if (t < j->n_tok)
                    j->quant(j->x + t * j->x_stride + b * GL_QK8_0, &q, GL_QK8_0);
                for (int e = 0; e < GL_QK8_0; e += 4) { // + 128 = flip the sign bit
                    uint32_t quad;
                    memcpy(&quad, q.qs + e, 4);
                    quad ^= 0x80808080u;
                    memcpy(d + e * GL_Q8_GROUP + 4 * i, &quad, 4);
                }
                float s = gl_fp16_to_f32(q.d);
                memcpy(d + 32 * GL_Q8_GROUP + 4 * i, &s, 4);
            }
        }
    }
}

void gl_pack_q8_0(struct gl_pool *pool, const struct gl_kernels *k, const float *x, int64_t n_tok,
                  int64_t n_in, int64_t x_stride, void *dst)
{
    GL_ASSERT(k != NULL && k->from_float[GL_TYPE_Q8_0] != NULL);
    GL_ASSERT(n_tok >= 0 && n_in > 0 && n_in % GL_QK8_0 == 0 && x_stride >= n_in);
    struct pack_q8_job j = {k->from_float[GL_TYPE_Q8_0], x, dst, n_tok, n_in, x_stride};
    if (n_tok > GL_Q8_GROUP)
        gl_pool_run(pool, pack_q8_groups, &j);
    else
        pack_q8_groups(&j, 0, 1);
}

struct prep_q8_job {
    const struct gl_block_q8_0 *W;
    struct gl_q8_0_wsum *ws;
    int64_t n_rows, nb;
};

static void prep_q8_rows(void *ctx, int ith, int nth)
{
    const struct prep_q8_job *j = ctx;
    for (int64_t r = ith; r < j->n_rows; r += nth)
        for (int64_t b = 0; b < j->nb; b++) {
            const struct gl_block_q8_0 *blk = &j->W[r * j->nb + b];
            int32_t sum = 0;
            for (int e = 0; e < GL_QK8_0; e++)
                sum += blk->qs[e];
            j->ws[r * j->nb + b] = (struct gl_q8_0_wsum){-128 * sum, gl_fp16_to_f32(blk->d)};
        }
}

void gl_prep_q8_0(struct gl_pool *pool, const void *W, int64_t n_rows, int64_t n_in,
                  struct gl_q8_0_wsum *ws)
{
    GL_ASSERT(n_rows >= 0 && n_in > 0 && n_in % GL_QK8_0 == 0);
    struct prep_q8_job j = {W, ws, n_rows, n_in / GL_QK8_0};
    if (n_rows > 1)
        gl_pool_run(pool, prep_q8_rows, &j);
    else
        prep_q8_rows(&j, 0, 1);
}
