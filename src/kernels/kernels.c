// SPDX-License-Identifier: MIT
// kernels: the dispatch table. Filled with the scalar reference functions of src/quant, then
// overwritten by the AVX2 and AVX-512 registrations when the CPU has every feature those files
// are compiled for (CMakeLists gives *_avx512.c F/BW/VL/DQ/VNNI/BF16, *_avx2.c AVX2/FMA/F16C).
// GLINT_ISA=ref|avx2|avx512 caps the choice. The process-wide table is built once, then
// read-only. Invariant: a vec_dot4 entry is bit-identical to the vec_dot beside it.
#include "kernels/kernels.h"

#include "base/base.h"
#include "kernels/kernels_int.h"

#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// The per-ISA files are owned by another module author and may not exist yet in a checkout;
// register them only when their source is present (it is then always compiled, by the glob).
#if defined(__has_include)
#if __has_include("kernels_avx2.c")
#define GL_HAVE_AVX2_FILE 1
#endif
#if __has_include("kernels_avx512.c")
#define GL_HAVE_AVX512_FILE 1
#endif
#endif

// ---- reference entries: one thin wrapper per type over the switch-based reference API ----

#define REF_FNS(T)                                                                                 \
    static void ref_dot_##T(int64_t n, float *s, const void *x, const void *y)                     \
    {                                                                                              \
        gl_vec_dot_ref(GL_TYPE_##T, n, s, x, y);                                                   \
    }                                                                                              \
    static void ref_from_##T(const float *x, void *y, int64_t n)                                   \
    {                                                                                              \
        gl_quantize_row_ref(GL_TYPE_##T, x, y, n);                                                 \
    }                                                                                              \
    static void ref_to_##T(const void *x, float *y, int64_t n)                                     \
    {                                                                                              \
        gl_dequantize_row_ref(GL_TYPE_##T, x, y, n);                                               \
    }                                                                                              \
    static void ref_dot4_##T(int64_t n, float *s, int64_t s_stride, const void *x, const void *y,  \
                             size_t y_stride)                                                      \
    {                                                                                              \
        for (int i = 0; i < 4; i++)                                                                \
            gl_vec_dot_ref(GL_TYPE_##T, n, s + i * s_stride, x,                                    \
                           (const uint8_t *)y + (size_t)i * y_stride);                             \
    }

REF_FNS(F32)
REF_FNS(F16)
REF_FNS(BF16)
REF_FNS(Q4_0)
REF_FNS(Q8_0)
REF_FNS(Q4_K)
REF_FNS(Q5_K)
REF_FNS(Q6_K)
REF_FNS(Q8_K)

#define REF_SET(k, T)                                                                              \
    do {                                                                                           \
        (k)->vec_dot[GL_TYPE_##T] = ref_dot_##T;                                                   \
        (k)->from_float[GL_TYPE_##T] = ref_from_##T;                                               \
        (k)->to_float[GL_TYPE_##T] = ref_to_##T;                                                   \
        (k)->vec_dot4[GL_TYPE_##T] = ref_dot4_##T;                                                 \
    } while (0)

static void ref_gemm_r16_Q4_K(int64_t n_in, const void *w, const void *act, size_t act_stride,
                              int n_tok, float *out, int64_t out_stride)
{
    gl_gemm_r16_ref(GL_TYPE_Q4_K, n_in, w, act, act_stride, n_tok, out, out_stride);
}

static void ref_gemm_r16_Q6_K(int64_t n_in, const void *w, const void *act, size_t act_stride,
                              int n_tok, float *out, int64_t out_stride)
{
    gl_gemm_r16_ref(GL_TYPE_Q6_K, n_in, w, act, act_stride, n_tok, out, out_stride);
}

// The attention tile (kernels.h), operation for operation the spec the SIMD entries follow.
static void ref_attn_tile(int D, int n_rows, const float *q, const float *KT, const float *V,
                          int klo, int khi, float scale, float *m, float *l, float *O)
{
    GL_ASSERT(0 <= klo && klo < khi && khi <= GL_ATTN_TILE && D % 16 == 0);
    for (int r = 0; r < n_rows; r++) {
        const float *qr = q + (size_t)r * (size_t)D;
        float s[GL_ATTN_TILE], mx = m[r];
        for (int k = klo; k < khi; k++) {
            float acc = 0.0f;
            for (int d = 0; d < D; d++)
                acc = fmaf(qr[d], KT[d * GL_ATTN_TILE + k], acc);
            s[k] = acc * scale;
            mx = s[k] > mx ? s[k] : mx;
        }
        const float corr = expf(m[r] - mx);
        float sum = l[r] * corr;
        for (int k = klo; k < khi; k++) {
            s[k] = expf(s[k] - mx);
            sum += s[k];
        }
        m[r] = mx;
        l[r] = sum;
        float *o = O + (size_t)r * (size_t)D;
        for (int d = 0; d < D; d++)
            o[d] *= corr;
        for (int k = klo; k < khi; k++)
            for (int d = 0; d < D; d++)
                o[d] = fmaf(s[k], V[k * D + d], o[d]);
    }
}

int64_t gl_attn_rows_scratch(int D, int n_q)
{
    // O [n_q16][D], m [n_q16], l [n_q16], KT [D][chunk], P [4][chunk]: every part starts on 16
    // floats, so a 64-byte aligned scratch gives aligned parts (D is a multiple of 16).
    int64_t n16 = ((int64_t)n_q + 15) / 16 * 16;
    return n16 * D + 2 * n16 + (int64_t)D * GL_ATTN_CHUNK + 4 * GL_ATTN_CHUNK;
}

// Long-run attention (kernels.h), row by row: libm expf, sums in key order.
static void ref_attn_rows(int D, int n_q, const float *q, int64_t q_stride, int n_k, const float *k,
                          int64_t k_stride, const float *v, int64_t v_stride, float scale,
                          float *out, int64_t out_stride, float *scratch)
{
    GL_ASSERT(D >= 16 && D <= 256 && D % 16 == 0 && n_q >= 1 && n_k >= 1);
    float *o = scratch; // [D]: one row's unnormalised output
    for (int r = 0; r < n_q; r++) {
        const float *qr = q + r * q_stride;
        float m = -INFINITY, l = 0.0f;
        memset(o, 0, (size_t)D * sizeof *o);
        for (int c0 = 0; c0 < n_k; c0 += GL_ATTN_CHUNK) {
            int nc = n_k - c0 < GL_ATTN_CHUNK ? n_k - c0 : GL_ATTN_CHUNK;
            float s[GL_ATTN_CHUNK], mx = m;
            for (int j = 0; j < nc; j++) {
                const float *kj = k + (int64_t)(c0 + j) * k_stride;
                float acc = 0.0f;
                for (int d = 0; d < D; d++)
                    acc = fmaf(qr[d], kj[d], acc);
                s[j] = acc * scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            const float corr = expf(m - mx); // 0 on the first chunk (m = -inf)
            l *= corr;
            for (int d = 0; d < D; d++)
                o[d] *= corr;
            for (int j = 0; j < nc; j++) {
                const float p = expf(s[j] - mx), *vj = v + (int64_t)(c0 + j) * v_stride;
                l += p;
                for (int d = 0; d < D; d++)
                    o[d] = fmaf(p, vj[d], o[d]);
            }
            m = mx;
        }
        for (int d = 0; d < D; d++)
            out[r * out_stride + d] = o[d] / l;
    }
}

// The BF16 token-lane tile (kernels.h), vdpbf16ps's arithmetic spelled out: bf16 denormals read
// as zero, two fmas per pair (odd element first), each result flushed to zero when denormal.
static float bf16_daz(uint16_t h)
{
    return (h & 0x7f80) == 0 ? ((h & 0x8000) ? -0.0f : 0.0f) : gl_bf16_to_f32(h);
}

static float f32_ftz(float v)
{
    return fabsf(v) < 1.17549435e-38f ? copysignf(0.0f, v) : v;
}

static void ref_gemm_bf16(int64_t n_pairs, const uint16_t *act, size_t group_stride, int n_groups,
                          const uint16_t *w, size_t w_stride, int n_cols, float *tile,
                          size_t tile_stride, int accumulate)
{
    GL_ASSERT(n_groups >= 1 && n_groups <= GL_BF16_MAX_GROUPS && n_cols >= 1 &&
              n_cols <= GL_BF16_MAX_COLS && n_pairs >= 0);
    for (int c = 0; c < n_cols; c++)
        for (int g = 0; g < n_groups; g++)
            for (int i = 0; i < GL_BF16_GROUP; i++) {
                const uint16_t *a = act + (size_t)g * group_stride + 2 * i;
                const uint16_t *wr = w + (size_t)c * w_stride;
                float *o = &tile[(size_t)c * tile_stride + GL_BF16_GROUP * g + i];
                float acc = accumulate ? *o : 0.0f;
                for (int64_t p = 0; p < n_pairs; p++) {
                    const uint16_t *ap = a + p * 2 * GL_BF16_GROUP;
                    acc = f32_ftz(fmaf(bf16_daz(ap[1]), bf16_daz(wr[2 * p + 1]), acc));
                    acc = f32_ftz(fmaf(bf16_daz(ap[0]), bf16_daz(wr[2 * p]), acc));
                }
                *o = acc;
            }
}

// The Q8_0 token-lane tile (kernels.h): per output one f32 fma per block, blocks ascending, of the
// exact int32 block sum (computed here from the +128 quants and the weight sums' correction, as
// vpdpbusd does) times the exact product of the two scales.
static void ref_gemm_q8_0(int64_t n_blocks, const uint8_t *act, size_t group_stride, int n_groups,
                          const struct gl_block_q8_0 *w, const struct gl_q8_0_wsum *ws,
                          size_t w_stride, int n_cols, float *tile, size_t tile_stride,
                          int accumulate)
{
    GL_ASSERT(n_groups >= 1 && n_groups <= GL_Q8_MAX_GROUPS && n_cols >= 1 &&
              n_cols <= GL_Q8_MAX_COLS && n_blocks >= 0);
    for (int c = 0; c < n_cols; c++)
        for (int g = 0; g < n_groups; g++)
            for (int i = 0; i < GL_Q8_GROUP; i++) {
                float *o = &tile[(size_t)c * tile_stride + GL_Q8_GROUP * g + i];
                float acc = accumulate ? *o : 0.0f;
                for (int64_t b = 0; b < n_blocks; b++) {
                    const uint8_t *ab = act + (size_t)g * group_stride + b * GL_Q8_BLOCK_BYTES;
                    const struct gl_block_q8_0 *wb = &w[(size_t)c * w_stride + (size_t)b];
                    const struct gl_q8_0_wsum *sb = &ws[(size_t)c * w_stride + (size_t)b];
                    int32_t sum = sb->corr;
                    for (int e = 0; e < GL_QK8_0; e++)
                        sum += (int32_t)ab[(e / 4) * 4 * GL_Q8_GROUP + 4 * i + e % 4] * wb->qs[e];
                    float da;
                    memcpy(&da, ab + 32 * GL_Q8_GROUP + 4 * i, 4);
                    acc = fmaf(sb->d * da, (float)sum, acc);
                }
                *o = acc;
            }
}

// ---- elementwise activations (kernels.h): libm per element ----

static void ref_swiglu(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void ref_gate(float *d, const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] *= 1.0f / (1.0f + expf(-s[i]));
}

static void ref_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double s[16] = {0};
    gl_kernels__rms_scale(y, x, w, 0, n, gl_kernels__rms_r(s, x, 0, n, eps));
}

static void ref_softcap(float *z, int64_t n, float scale, float cap)
{
    for (int64_t i = 0; i < n; i++) {
        float v = z[i] * scale;
        z[i] = cap != 0.0f ? cap * tanhf(v / cap) : v;
    }
}

static void fill_ref(struct gl_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->isa = "ref";
    REF_SET(k, F32);
    REF_SET(k, F16);
    REF_SET(k, BF16);
    REF_SET(k, Q4_0);
    REF_SET(k, Q8_0);
    REF_SET(k, Q4_K);
    REF_SET(k, Q5_K);
    REF_SET(k, Q6_K);
    k->gemm_r16[GL_TYPE_Q4_K] = ref_gemm_r16_Q4_K;
    k->gemm_r16[GL_TYPE_Q6_K] = ref_gemm_r16_Q6_K;
    k->attn_tile = ref_attn_tile;
    k->gemm_bf16 = ref_gemm_bf16;
    k->attn_rows = ref_attn_rows;
    k->gemm_q8_0 = ref_gemm_q8_0;
    k->swiglu = ref_swiglu;
    k->gate = ref_gate;
    k->rms_norm = ref_rms_norm;
    k->softcap = ref_softcap;
    REF_SET(k, Q8_K);
}

// ---- CPU features ----

#ifdef GL_HAVE_AVX2_FILE
// F16C via cpuid leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c".
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}

static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}
#endif

#if defined(GL_HAVE_AVX2_FILE) && defined(GL_HAVE_AVX512_FILE)
static int cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
}
#endif

// 0 = ref, 1 = avx2, 2 = avx512; -1 for an unknown name.
static int isa_level(const char *isa)
{
    static const char *const names[] = {"ref", "avx2", "avx512"};
    for (int i = 0; i < 3; i++)
        if (strcmp(isa, names[i]) == 0)
            return i;
    return -1;
}

// Highest level both the CPU and this build provide.
static int best_level(void)
{
    int lvl = 0;
#ifdef GL_HAVE_AVX2_FILE
    if (cpu_has_avx2())
        lvl = 1;
#endif
#if defined(GL_HAVE_AVX2_FILE) && defined(GL_HAVE_AVX512_FILE)
    if (lvl == 1 && cpu_has_avx512())
        lvl = 2;
#endif
    return lvl;
}

#ifdef GL_HAVE_AVX2_FILE
// Applies one ISA's registration. A vec_dot4 must match its own table's vec_dot bit for bit, so
// an entry left over from a lower level whose vec_dot was just replaced is dropped. So is an r16
// entry this level does not provide: the scalar reference is far slower than the SIMD row dots,
// and a NULL entry keeps such weights in the row layout.
static void register_level(struct gl_kernels *k, void (*reg)(struct gl_kernels *), const char *isa)
{
    struct gl_kernels before = *k;
    reg(k);
    for (int t = 0; t < GL_TYPE_COUNT; t++)
        if (k->vec_dot[t] != before.vec_dot[t] && k->vec_dot4[t] == before.vec_dot4[t])
            k->vec_dot4[t] = NULL;
    for (int t = 0; t < GL_TYPE_COUNT; t++)
        if (k->gemm_r16[t] == before.gemm_r16[t])
            k->gemm_r16[t] = NULL;
    k->isa = isa;
}
#endif

int gl_kernels_init_isa(struct gl_kernels *k, const char *isa)
{
    int lvl = isa != NULL ? isa_level(isa) : -1;
    if (lvl < 0 || lvl > best_level())
        return 0;
    fill_ref(k);
#ifdef GL_HAVE_AVX2_FILE
    if (lvl >= 1)
        register_level(k, gl_kernels__register_avx2, "avx2");
#endif
#if defined(GL_HAVE_AVX2_FILE) && defined(GL_HAVE_AVX512_FILE)
    if (lvl >= 2)
        register_level(k, gl_kernels__register_avx512, "avx512");
#endif
    return 1;
}

// ---- process-wide table ----

static struct gl_kernels g_kernels;
static pthread_once_t g_kernels_once = PTHREAD_ONCE_INIT;

static void kernels_init_once(void)
{
    static const char *const names[] = {"ref", "avx2", "avx512"};
    int best = best_level(), lvl = best;
    const char *pin = getenv("GLINT_ISA");
    if (pin != NULL && *pin != 0) {
        int want = isa_level(pin);
        if (want < 0)
            GL_LOGW("kernels: GLINT_ISA=%s is not ref|avx2|avx512; using %s", pin, names[best]);
        else if (want > best)
            GL_LOGW("kernels: GLINT_ISA=%s not available on this CPU/build; using %s", pin,
                    names[best]);
        else
            lvl = want;
    }
    int ok = gl_kernels_init_isa(&g_kernels, names[lvl]);
    GL_ASSERT(ok);
    GL_LOGI("kernels: using %s kernels", g_kernels.isa);
}

const struct gl_kernels *gl_kernels_get(void)
{
    pthread_once(&g_kernels_once, kernels_init_once);
    return &g_kernels;
}
