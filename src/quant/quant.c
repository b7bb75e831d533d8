// SPDX-License-Identifier: MIT
// quant: type traits and the scalar reference quantizers, dequantizers and dot products.
// Block layouts follow ggml-common.h bit for bit; dequantization and the integer grouping of
// the dot products follow ggml's reference code, so rows from llama.cpp GGUF files decode
// identically and our dots agree with llama.cpp's CPU backend up to float summation order.
// Activation quantizers (Q8_0, Q8_K) follow ggml's x86 CPU path exactly (round-half-even).
// Weight quantizers use our own simple scale search: valid blocks, not ggml's exact bytes.
#include "quant/quant.h"

#include "base/base.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

// ---- traits ----

#define T(id, nm, bs, ts, sup) [id] = {nm, bs, ts, sup}

// Sizes of every ggml type a GGUF file may carry (so files can be walked and reported), even
// the ones we cannot compute with (supported = 0). Ids without a name are holes in ggml's enum.
static const struct gl_type_traits type_traits[GL_TYPE_COUNT] = {
    T(0, "F32", 1, 4, 1),         T(1, "F16", 1, 2, 1),         T(2, "Q4_0", 32, 18, 1),
    T(3, "Q4_1", 32, 20, 0),      T(6, "Q5_0", 32, 22, 0),      T(7, "Q5_1", 32, 24, 0),
    T(8, "Q8_0", 32, 34, 1),      T(9, "Q8_1", 32, 36, 0),      T(10, "Q2_K", 256, 84, 0),
    T(11, "Q3_K", 256, 110, 0),   T(12, "Q4_K", 256, 144, 1),   T(13, "Q5_K", 256, 176, 1),
    T(14, "Q6_K", 256, 210, 1),   T(15, "Q8_K", 256, 292, 1),   T(16, "IQ2_XXS", 256, 66, 0),
    T(17, "IQ2_XS", 256, 74, 0),  T(18, "IQ3_XXS", 256, 98, 0), T(19, "IQ1_S", 256, 50, 0),
    T(20, "IQ4_NL", 32, 18, 0),   T(21, "IQ3_S", 256, 110, 0),  T(22, "IQ2_S", 256, 82, 0),
    T(23, "IQ4_XS", 256, 136, 0), T(24, "I8", 1, 1, 0),         T(25, "I16", 1, 2, 0),
    T(26, "I32", 1, 4, 0),        T(27, "I64", 1, 8, 0),        T(28, "F64", 1, 8, 0),
    T(29, "IQ1_M", 256, 56, 0),   T(30, "BF16", 1, 2, 1),       T(34, "TQ1_0", 256, 54, 0),
    T(35, "TQ2_0", 256, 66, 0),   T(39, "MXFP4", 32, 17, 0),
};

#undef T

const struct gl_type_traits *gl_type_traits_of(uint32_t type)
{
    if (type >= GL_TYPE_COUNT || type_traits[type].name == NULL)
        return NULL;
    return &type_traits[type];
}

size_t gl_type_row_size(uint32_t type, int64_t n)
{
    const struct gl_type_traits *tt = gl_type_traits_of(type);
    if (tt == NULL || n < 0 || n % tt->blck_size != 0)
        return 0;
    uint64_t bytes;
    if (!gl_mul_ok((uint64_t)(n / tt->blck_size), tt->type_size, &bytes) || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}

int gl_type_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < GL_TYPE_COUNT; i++) {
        const char *a = type_traits[i].name, *b = name;
        if (a == NULL)
            continue;
        while (*a && *b && toupper((unsigned char)*a) == toupper((unsigned char)*b)) {
            a++;
            b++;
        }
        if (*a == 0 && *b == 0)
            return i;
    }
    return -1;
}

enum gl_type gl_type_vec_dot_type(enum gl_type weight_type)
{
    switch (weight_type) {
    case GL_TYPE_F32:
    case GL_TYPE_F16:
    case GL_TYPE_BF16:
        return weight_type;
    case GL_TYPE_Q4_0:
    case GL_TYPE_Q8_0:
        return GL_TYPE_Q8_0;
    case GL_TYPE_Q4_K:
    case GL_TYPE_Q5_K:
    case GL_TYPE_Q6_K:
    case GL_TYPE_Q8_K:
        return GL_TYPE_Q8_K;
    default:
        // Callers check traits->supported before computing with a type from a file.
        GL_ASSERT_MSG(0, "quant: no vec_dot type for unsupported type %d", (int)weight_type);
    }
}

// ---- helpers ----

// Round to nearest, ties to even, for |v| < 2^22: the float-add trick ggml uses, so our
// activation quants match its bytes.
static inline int nearest_int(float v)
{
    float f = v + 12582912.f; // 1.5 * 2^23: the integer lands in the low mantissa bits
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// nearest_int(v) clamped to lo..hi, clamping first so extreme ratios stay inside the trick's range.
static inline int round_clamp(float v, int lo, int hi)
{
    if (!(v > (float)lo)) // also catches NaN
        return lo;
    if (v > (float)hi)
        return hi;
    return nearest_int(v);
}

static inline float h2f(uint16_t h)
{
    return gl_fp16_to_f32(h);
}

// 6-bit scale and min j (0..7) of a Q4_K/Q5_K block: j<4 in the low 6 bits of bytes j and j+4;
// j>=4 low nibbles in byte j+4, high two bits in the top bits of bytes j-4 (scale) and j (min).
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void pack_scale_min_k4(int j, int sc, int m, uint8_t *q)
{
    if (j < 4) {
        q[j] = (uint8_t)(q[j] | sc);
        q[j + 4] = (uint8_t)(q[j + 4] | m);
    } else {
        q[j + 4] = (uint8_t)((sc & 0xF) | ((m & 0xF) << 4));
        q[j - 4] = (uint8_t)(q[j - 4] | ((sc >> 4) << 6));
        q[j] = (uint8_t)(q[j] | ((m >> 4) << 6));
    }
}

// Branch-free round-half-even of v clamped to lo..hi, staying in float (adding and removing
// 1.5*2^23 drops the fraction), for the weight quantizers' inner loops. NaN stays NaN; the
// callers' sums then compare false and the candidate is skipped.
static inline float round_clamp_fast(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (v + 12582912.f) - 12582912.f;
}

// Asymmetric fit of n values to x ~= scale*L - mn with L in 0..nmax, mn >= 0 (the k-quant
// convention: the offset is never positive). Tries inverse scales around nmax/(max-min); for
// each, fixes L, solves least squares for (scale, mn) and scores the squared error in closed
// form from the sums. Returns the scale; L filled.
static float fit_asym(const float *x, int n, int nmax, float *mn_out, uint8_t *L)
{
    GL_ASSERT(n <= 32);
    float lo = x[0], hi = x[0], sx = 0, sx2 = 0;
    for (int i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sx += x[i];
        sx2 += x[i] * x[i];
    }
    if (lo > 0)
        lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *mn_out = -lo;
        return 0;
    }
    float best_err = INFINITY, best_scale = 0, best_min = -lo, best_iscale = 0;
    const float fn = (float)n, fmax = (float)nmax;
    for (int step = -10; step <= 10; step++) {
        float iscale = (fmax + 0.1f * (float)step) / (hi - lo);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            float l = round_clamp_fast(iscale * (x[i] - lo), 0, fmax);
            sl += l;
            sl2 += l * l;
            sxl += x[i] * l;
        }
        float det = fn * sl2 - sl * sl;
        if (det <= 0)
            continue;
        float a = (fn * sxl - sl * sx) / det;
        float b = (sl2 * sx - sl * sxl) / det;
        if (b > 0) { // the offset must be <= 0: refit with b = 0
            b = 0;
            a = sxl / sl2;
        }
        if (a <= 0)
            continue;
        // sum (a*l + b - x)^2 expanded over the sums.
        float err = a * a * sl2 + 2 * a * b * sl + fn * b * b - 2 * a * sxl - 2 * b * sx + sx2;
        if (err < best_err) {
            best_err = err;
            best_scale = a;
            best_min = -b;
            best_iscale = iscale;
        }
    }
    if (best_err == INFINITY) { // degenerate; plain min/max grid
        best_scale = (hi - lo) / fmax;
        best_min = -lo;
        best_iscale = 1 / best_scale;
    }
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)round_clamp(best_iscale * (x[i] - lo), 0, nmax);
    *mn_out = best_min;
    return best_scale;
}

// Symmetric fit x ~= scale*(L) with L in -nmax..nmax-1 (Q6_K: -32..31). Candidate inverse scales
// around -nmax/max (max = the signed value of largest magnitude, so it maps to -nmax exactly,
// using the extra negative level); for fixed L the least-squares scale is sxl/sl2 and its error
// sx2 - sxl^2/sl2, so the best candidate maximises sxl^2/sl2.
static float fit_sym(const float *x, int n, int nmax, int8_t *L)
{
    GL_ASSERT(n <= 16);
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    memset(L, 0, (size_t)n);
    if (amax == 0)
        return 0;
    const float lo = (float)-nmax, hi = (float)(nmax - 1);
    float best_gain = -1, best_scale = 0, best_iscale = 0;
    for (int step = -9; step <= 9; step++) {
        float iscale = -((float)nmax + 0.1f * (float)step) / max;
        float sxl = 0, sl2 = 0;
        for (int i = 0; i < n; i++) {
            float l = round_clamp_fast(iscale * x[i], lo, hi);
            sxl += x[i] * l;
            sl2 += l * l;
        }
        if (sl2 == 0)
            continue;
        float gain = sxl * sxl / sl2;
        if (gain > best_gain) {
            best_gain = gain;
            best_scale = sxl / sl2;
            best_iscale = iscale;
        }
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)round_clamp(best_iscale * x[i], -nmax, nmax - 1);
    return best_scale;
}

// ---- F32 / F16 / BF16 ----

static void quantize_f16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = gl_f32_to_fp16(x[i]);
}

static void quantize_bf16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = gl_f32_to_bf16(x[i]);
}

// ---- Q4_0 / Q8_0 ----

// ggml's reference rule: d = max/-8 with max the signed value of largest magnitude, so that value
// maps to quant 0 exactly; q = min(15, trunc(x/d + 8.5)).
static void quantize_q4_0(const float *x, struct gl_block_q4_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GL_QK4_0) {
        float amax = 0, max = 0;
        for (int j = 0; j < GL_QK4_0; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        float d = max / -8.f, id = d != 0 ? 1.f / d : 0.f;
        y[i].d = gl_f32_to_fp16(d);
        for (int j = 0; j < GL_QK4_0 / 2; j++) {
            int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void dequantize_q4_0(const struct gl_block_q4_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GL_QK4_0) {
        float d = h2f(x[i].d);
        for (int j = 0; j < GL_QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

// As ggml's x86 activation path: d = amax/127 (stored fp16), q = round-half-even(x * 127/amax).
static void quantize_q8_0(const float *x, struct gl_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GL_QK8_0) {
        float amax = 0;
        for (int j = 0; j < GL_QK8_0; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
        y[i].d = gl_f32_to_fp16(d);
        for (int j = 0; j < GL_QK8_0; j++)
            y[i].qs[j] = (int8_t)clampi(nearest_int(x[j] * id), -127, 127);
    }
}

static void dequantize_q8_0(const struct gl_block_q8_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GL_QK8_0) {
        float d = h2f(x[i].d);
        for (int j = 0; j < GL_QK8_0; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

// ---- Q4_K / Q5_K ----

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fits 8 sub-blocks of 32, quantizes their scales and
// mins to 6 bits against fp16 super-scales d, dmin, then requantizes with the rounded scales.
static void quantize_k_asym(const float *x, int nmax, uint16_t *d_out, uint16_t *dmin_out,
                            uint8_t scales[GL_K_SCALE_SIZE], uint8_t L[GL_QK_K])
{
    float sc[8], mn[8], max_sc = 0, max_mn = 0;
    for (int j = 0; j < 8; j++) {
        sc[j] = fit_asym(x + 32 * j, 32, nmax, &mn[j], L + 32 * j);
        max_sc = sc[j] > max_sc ? sc[j] : max_sc;
        max_mn = mn[j] > max_mn ? mn[j] : max_mn;
    }
    float inv_sc = max_sc > 0 ? 63.f / max_sc : 0.f, inv_mn = max_mn > 0 ? 63.f / max_mn : 0.f;
    memset(scales, 0, GL_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        int ls = round_clamp(inv_sc * sc[j], 0, 63);
        int lm = round_clamp(inv_mn * mn[j], 0, 63);
        pack_scale_min_k4(j, ls, lm, scales);
    }
    *d_out = gl_f32_to_fp16(max_sc / 63.f);
    *dmin_out = gl_f32_to_fp16(max_mn / 63.f);
    float d = h2f(*d_out), dmin = h2f(*dmin_out);
    for (int j = 0; j < 8; j++) {
        int ls, lm;
        scale_min_k4(j, scales, &ls, &lm);
        float ds = d * (float)ls, dm = dmin * (float)lm;
        for (int l = 0; l < 32; l++) {
            int q = ds != 0 ? round_clamp((x[32 * j + l] + dm) / ds, 0, nmax) : 0;
            L[32 * j + l] = (uint8_t)q;
        }
    }
}

static void quantize_q4_K(const float *x, struct gl_block_q4_K *y, int64_t nb)
{
    uint8_t L[GL_QK_K];
    for (int64_t i = 0; i < nb; i++, x += GL_QK_K) {
        quantize_k_asym(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        // Each 64-element group: byte l holds element l (low nibble) and l+32 (high nibble).
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
    }
}

static void dequantize_q4_K(const struct gl_block_q4_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GL_QK_K) {
        float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
        for (int g = 0; g < 4; g++) {
            int sc0, m0, sc1, m1;
            scale_min_k4(2 * g, x[i].scales, &sc0, &m0);
            scale_min_k4(2 * g + 1, x[i].scales, &sc1, &m1);
            float d0 = d * (float)sc0, mm0 = dmin * (float)m0;
            float d1 = d * (float)sc1, mm1 = dmin * (float)m1;
            const uint8_t *q = x[i].qs + 32 * g;
            for (int l = 0; l < 32; l++) {
                y[64 * g + l] = d0 * (float)(q[l] & 0xF) - mm0;
                y[64 * g + 32 + l] = d1 * (float)(q[l] >> 4) - mm1;
            }
        }
    }
}

static void quantize_q5_K(const float *x, struct gl_block_q5_K *y, int64_t nb)
{
    uint8_t L[GL_QK_K];
    for (int64_t i = 0; i < nb; i++, x += GL_QK_K) {
        quantize_k_asym(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        // Group g: low nibbles as Q4_K; the 5th bit of element 64g+l is bit 2g of qh[l], of
        // element 64g+32+l bit 2g+1.
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int g = 0; g < 4; g++) {
            for (int l = 0; l < 32; l++) {
                int a = L[64 * g + l], b = L[64 * g + 32 + l];
                int hbits = ((a >> 4) << (2 * g)) | ((b >> 4) << (2 * g + 1));
                y[i].qh[l] = (uint8_t)(y[i].qh[l] | hbits);
                y[i].qs[32 * g + l] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            }
        }
    }
}

static void dequantize_q5_K(const struct gl_block_q5_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GL_QK_K) {
        float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
        for (int g = 0; g < 4; g++) {
            int sc0, m0, sc1, m1;
            scale_min_k4(2 * g, x[i].scales, &sc0, &m0);
            scale_min_k4(2 * g + 1, x[i].scales, &sc1, &m1);
            float d0 = d * (float)sc0, mm0 = dmin * (float)m0;
            float d1 = d * (float)sc1, mm1 = dmin * (float)m1;
            const uint8_t *q = x[i].qs + 32 * g;
            for (int l = 0; l < 32; l++) {
                int h0 = (x[i].qh[l] >> (2 * g)) & 1, h1 = (x[i].qh[l] >> (2 * g + 1)) & 1;
                y[64 * g + l] = d0 * (float)((q[l] & 0xF) | (h0 << 4)) - mm0;
                y[64 * g + 32 + l] = d1 * (float)((q[l] >> 4) | (h1 << 4)) - mm1;
            }
        }
    }
}

// ---- Q6_K ----

// The 6-bit quant (0..63, value q-32) of element e of a Q6_K block. Each 128-element half h has
// 64 ql bytes and 32 qh bytes; within it, element 32*k + l (k = 0..3, l < 32) takes nibble
// (k >= 2 ? high : low) of ql[l + 32*(k & 1)] and bits 2k..2k+1 of qh[l].
static inline int q6_K_get(const struct gl_block_q6_K *b, int e)
{
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    int lo = b->ql[64 * h + l + 32 * (k & 1)];
    lo = k >= 2 ? lo >> 4 : lo & 0xF;
    int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
    return lo | (hi << 4);
}

static void quantize_q6_K(const float *x, struct gl_block_q6_K *y, int64_t nb)
{
    int8_t L[GL_QK_K];
    for (int64_t i = 0; i < nb; i++, x += GL_QK_K) {
        float sc[16], amax = 0, max = 0;
        for (int j = 0; j < 16; j++) {
            sc[j] = fit_sym(x + 16 * j, 16, 32, L + 16 * j);
            if (fabsf(sc[j]) > amax) {
                amax = fabsf(sc[j]);
                max = sc[j];
            }
        }
        memset(y[i].ql, 0, sizeof y[i].ql);
        memset(y[i].qh, 0, sizeof y[i].qh);
        if (amax == 0) {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = 0;
            for (int e = 0; e < GL_QK_K; e++)
                L[e] = 0;
        } else {
            // Largest-magnitude scale maps to -128: same convention as ggml (int8 scales).
            float iscale = -128.f / max;
            y[i].d = gl_f32_to_fp16(1.f / iscale);
            float d = h2f(y[i].d);
            for (int j = 0; j < 16; j++) {
                int s = round_clamp(iscale * sc[j], -128, 127);
                y[i].scales[j] = (int8_t)s;
                float ds = d * (float)s;
                for (int l = 0; l < 16; l++) {
                    int q = ds != 0 ? round_clamp(x[16 * j + l] / ds, -32, 31) : 0;
                    L[16 * j + l] = (int8_t)q;
                }
            }
        }
        for (int e = 0; e < GL_QK_K; e++) {
            int q = L[e] + 32, h = e / 128, k = (e % 128) / 32, l = e % 32;
            uint8_t *lo = &y[i].ql[64 * h + l + 32 * (k & 1)];
            *lo = (uint8_t)(*lo | ((q & 0xF) << (k >= 2 ? 4 : 0)));
            y[i].qh[32 * h + l] = (uint8_t)(y[i].qh[32 * h + l] | ((q >> 4) << (2 * k)));
        }
    }
}

static void dequantize_q6_K(const struct gl_block_q6_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GL_QK_K) {
        float d = h2f(x[i].d);
        for (int e = 0; e < GL_QK_K; e++)
            y[e] = d * (float)x[i].scales[e / 16] * (float)(q6_K_get(&x[i], e) - 32);
    }
}

// ---- Q8_K ----

// Exactly ggml's quantize_row_q8_K_ref: iscale = -127/max (max = signed value of largest |x|),
// q = min(127, round-half-even(iscale*x)), d = 1/iscale, bsums = sums of 16 quants.
static void quantize_q8_K(const float *x, struct gl_block_q8_K *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GL_QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < GL_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < GL_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < GL_QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

static void dequantize_q8_K(const struct gl_block_q8_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GL_QK_K)
        for (int j = 0; j < GL_QK_K; j++)
            y[j] = x[i].d * (float)x[i].qs[j];
}

// ---- public row functions ----

static int64_t n_blocks(enum gl_type t, int64_t n)
{
    const struct gl_type_traits *tt = gl_type_traits_of((uint32_t)t);
    GL_ASSERT(tt != NULL && tt->supported);
    GL_ASSERT_MSG(n >= 0 && n % tt->blck_size == 0, "quant: %s row of %lld elements", tt->name,
                  (long long)n);
    return n / tt->blck_size;
}

void gl_quantize_row_ref(enum gl_type t, const float *x, void *y, int64_t n)
{
    int64_t nb = n_blocks(t, n);
    switch (t) {
    case GL_TYPE_F32:
        memcpy(y, x, (size_t)n * sizeof(float));
        break;
    case GL_TYPE_F16:
        quantize_f16(x, y, n);
        break;
    case GL_TYPE_BF16:
        quantize_bf16(x, y, n);
        break;
    case GL_TYPE_Q4_0:
        quantize_q4_0(x, y, nb);
        break;
    case GL_TYPE_Q8_0:
        quantize_q8_0(x, y, nb);
        break;
    case GL_TYPE_Q4_K:
        quantize_q4_K(x, y, nb);
        break;
    case GL_TYPE_Q5_K:
        quantize_q5_K(x, y, nb);
        break;
    case GL_TYPE_Q6_K:
        quantize_q6_K(x, y, nb);
        break;
    case GL_TYPE_Q8_K:
        quantize_q8_K(x, y, nb);
        break;
    default:
        GL_ASSERT_MSG(0, "quant: cannot quantize type %d", (int)t);
    }
}

void gl_dequantize_row_ref(enum gl_type t, const void *x, float *y, int64_t n)
{
    int64_t nb = n_blocks(t, n);
    const uint16_t *h = x;
    switch (t) {
    case GL_TYPE_F32:
        memcpy(y, x, (size_t)n * sizeof(float));
        break;
    case GL_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            y[i] = gl_fp16_to_f32(h[i]);
        break;
    case GL_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            y[i] = gl_bf16_to_f32(h[i]);
        break;
    case GL_TYPE_Q4_0:
        dequantize_q4_0(x, y, nb);
        break;
    case GL_TYPE_Q8_0:
        dequantize_q8_0(x, y, nb);
        break;
    case GL_TYPE_Q4_K:
        dequantize_q4_K(x, y, nb);
        break;
    case GL_TYPE_Q5_K:
        dequantize_q5_K(x, y, nb);
        break;
    case GL_TYPE_Q6_K:
        dequantize_q6_K(x, y, nb);
        break;
    case GL_TYPE_Q8_K:
        dequantize_q8_K(x, y, nb);
        break;
    default:
        GL_ASSERT_MSG(0, "quant: cannot dequantize type %d", (int)t);
    }
}

// ---- dot products ----
// Float types accumulate in double (ggml's scalar ggml_float path). Quantized types form exact
// int32 dot products per scale group, then scale them in float per block, as ggml does.

static float dot_q4_0(int64_t nb, const struct gl_block_q4_0 *x, const struct gl_block_q8_0 *y)
{
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi +=
                ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        s += (float)sumi * (h2f(x[i].d) * h2f(y[i].d));
    }
    return s;
}

static float dot_q8_0(int64_t nb, const struct gl_block_q8_0 *x, const struct gl_block_q8_0 *y)
{
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < GL_QK8_0; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        s += (float)sumi * (h2f(x[i].d) * h2f(y[i].d));
    }
    return s;
}

// Q4_K/Q5_K: sum over sub-blocks of sc_j * dot(q, q8) times d*y.d, minus dmin*y.d times
// sum_j m_j * (sum of the sub-block's q8, from bsums). Q5_K passes its 5th bits in qh.
static float dot_k_asym(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qs,
                        const uint8_t *qh, const struct gl_block_q8_K *y)
{
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(j, scales, &sc, &m);
        summ += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = (j & 1) ? 4 : 0, dot = 0;
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift) & 0xF;
            if (qh != NULL)
                v |= ((qh[l] >> j) & 1) << 4;
            dot += v * y->qs[32 * j + l];
        }
        sumi += sc * dot;
    }
    return h2f(d16) * y->d * (float)sumi - h2f(dmin16) * y->d * (float)summ;
}

static float dot_q4_K(int64_t nb, const struct gl_block_q4_K *x, const struct gl_block_q8_K *y)
{
    float s = 0;
    for (int64_t i = 0; i < nb; i++)
        s += dot_k_asym(x[i].d, x[i].dmin, x[i].scales, x[i].qs, NULL, &y[i]);
    return s;
}

static float dot_q5_K(int64_t nb, const struct gl_block_q5_K *x, const struct gl_block_q8_K *y)
{
    float s = 0;
    for (int64_t i = 0; i < nb; i++)
        s += dot_k_asym(x[i].d, x[i].dmin, x[i].scales, x[i].qs, x[i].qh, &y[i]);
    return s;
}

static float dot_q6_K(int64_t nb, const struct gl_block_q6_K *x, const struct gl_block_q8_K *y)
{
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int dot = 0;
            for (int l = 0; l < 16; l++)
                dot += (q6_K_get(&x[i], 16 * j + l) - 32) * y[i].qs[16 * j + l];
            sumi += x[i].scales[j] * dot;
        }
        s += h2f(x[i].d) * y[i].d * (float)sumi;
    }
    return s;
}

static float dot_q8_K(int64_t nb, const struct gl_block_q8_K *x, const struct gl_block_q8_K *y)
{
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < GL_QK_K; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        s += x[i].d * y[i].d * (float)sumi;
    }
    return s;
}

void gl_vec_dot_ref(enum gl_type t, int64_t n, float *s, const void *x, const void *y)
{
    int64_t nb = n_blocks(t, n);
    double acc = 0;
    switch (t) {
    case GL_TYPE_F32: {
        const float *a = x, *b = y;
        for (int64_t i = 0; i < n; i++)
            acc += (double)(a[i] * b[i]);
        *s = (float)acc;
        break;
    }
    case GL_TYPE_F16: {
        const uint16_t *a = x, *b = y;
        for (int64_t i = 0; i < n; i++)
            acc += (double)(gl_fp16_to_f32(a[i]) * gl_fp16_to_f32(b[i]));
        *s = (float)acc;
        break;
    }
    case GL_TYPE_BF16: {
        const uint16_t *a = x, *b = y;
        for (int64_t i = 0; i < n; i++)
            acc += (double)(gl_bf16_to_f32(a[i]) * gl_bf16_to_f32(b[i]));
        *s = (float)acc;
        break;
    }
    case GL_TYPE_Q4_0:
        *s = dot_q4_0(nb, x, y);
        break;
    case GL_TYPE_Q8_0:
        *s = dot_q8_0(nb, x, y);
        break;
    case GL_TYPE_Q4_K:
        *s = dot_q4_K(nb, x, y);
        break;
    case GL_TYPE_Q5_K:
        *s = dot_q5_K(nb, x, y);
        break;
    case GL_TYPE_Q6_K:
        *s = dot_q6_K(nb, x, y);
        break;
    case GL_TYPE_Q8_K:
        *s = dot_q8_K(nb, x, y);
        break;
    default:
        GL_ASSERT_MSG(0, "quant: no vec_dot for type %d", (int)t);
    }
}

// ---- r16 layouts (quant.h) ----

int gl_r16_supported(enum gl_type t)
{
    return t == GL_TYPE_Q4_K || t == GL_TYPE_Q6_K;
}

// Repacking touches every weight byte at load (17 GB for the full model), so it works on 8
// elements at a time in a uint64 (little-endian, as every x86 is): 8 quants in bytes b0..b7, one
// per byte (value < 16), become the r16 dword b0..b3 | b4..b7 << 4 as (x | x >> 28).
static inline uint64_t load8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void put_nibbles(uint8_t *dst, uint64_t x)
{
    uint32_t v = (uint32_t)(x | x >> 28);
    memcpy(dst, &v, 4);
}

#define NIB_LO 0x0f0f0f0f0f0f0f0full

// Row r of r16 block y from the source block x. Q4_K: byte l of 64-element chunk j2 holds
// elements 64 j2 + l (low nibble) and 64 j2 + 32 + l (high nibble), so 8 bytes from 8k give chunk
// pairs c = 8 j2 + k (low nibbles) and 8 j2 + 4 + k (high nibbles).
static void repack_q4_K_row(struct gl_block_q4_K_r16 *y, int r, const struct gl_block_q4_K *x)
{
    y->d[r] = x->d;
    y->dmin[r] = x->dmin;
    for (int i = 0; i < GL_K_SCALE_SIZE; i++)
        y->scales[i][r] = x->scales[i];
    for (int j2 = 0; j2 < 4; j2++)
        for (int k = 0; k < 4; k++) {
            uint64_t w = load8(x->qs + 32 * j2 + 8 * k);
            put_nibbles(y->qs[8 * j2 + k][r], w & NIB_LO);
            put_nibbles(y->qs[8 * j2 + 4 + k][r], (w >> 4) & NIB_LO);
        }
}

// Q6_K: element 128 h + 32 k + l takes nibble (k >= 2) of ql[64 h + 32 (k & 1) + l] and bits 2k
// of qh[32 h + l]; 8 elements from l = 8m are chunk pair c = 16 h + 4 k + m. Their high bits
// (2 per byte) become 4 bits per byte (elements 8c + i, then 8c + 4 + i) at bit 4 (c % 2) of
// sub-block c / 2's qh, as (x | x >> 30).
static void repack_q6_K_row(struct gl_block_q6_K_r16 *y, int r, const struct gl_block_q6_K *x)
{
    y->d[r] = x->d;
    for (int j = 0; j < GL_QK_K / 16; j++)
        y->scales[j][r] = x->scales[j];
    uint32_t qh[GL_QK_K / 16] = {0};
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < 4; m++) {
                int c = 16 * h + 4 * k + m;
                uint64_t w = load8(x->ql + 64 * h + 32 * (k & 1) + 8 * m);
                put_nibbles(y->sub[c / 2].ql[c % 2][r], (k >= 2 ? w >> 4 : w) & NIB_LO);
                uint64_t hb = (load8(x->qh + 32 * h + 8 * m) >> (2 * k)) & 0x0303030303030303ull;
                qh[c / 2] |= (uint32_t)(hb | hb >> 30) << (4 * (c % 2));
            }
    for (int j = 0; j < GL_QK_K / 16; j++)
        memcpy(y->sub[j].qh[r], &qh[j], 4);
}

void gl_repack_r16(enum gl_type t, const void *src, int64_t n_rows, int64_t n_in, void *dst)
{
    GL_ASSERT(gl_r16_supported(t) && n_rows % GL_R16_ROWS == 0 && n_in % GL_QK_K == 0);
    const int64_t nb = n_in / GL_QK_K;
    const size_t row_bytes = gl_type_row_size(t, n_in);
    // Block-major: the 16 rows of one destination block (2304 / 3360 B) are filled while it sits
    // in L1, and the destination is written once, front to back (row-major order made 16 passes
    // over the group's ~90 KB; block-major measured ~5% faster on a warm load, same bytes).
    for (int64_t g = 0; g < n_rows / GL_R16_ROWS; g++)
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < GL_R16_ROWS; r++) {
                const uint8_t *row = (const uint8_t *)src + (size_t)(16 * g + r) * row_bytes;
                if (t == GL_TYPE_Q4_K)
                    repack_q4_K_row((struct gl_block_q4_K_r16 *)dst + g * nb + b, r,
                                    (const struct gl_block_q4_K *)row + b);
                else
                    repack_q6_K_row((struct gl_block_q6_K_r16 *)dst + g * nb + b, r,
                                    (const struct gl_block_q6_K *)row + b);
            }
}

// Exact integer sums of one r16 block row against one q8_K block, in the kernels' terms (quant.h).
static void r16_block_sums(enum gl_type t, const void *blk, int r, const struct gl_block_q8_K *y,
                           int32_t *B, int32_t *M)
{
    int32_t sb = 0, sm = 0;
    if (t == GL_TYPE_Q4_K) {
        const struct gl_block_q4_K_r16 *x = blk;
        uint8_t sc6[GL_K_SCALE_SIZE];
        for (int i = 0; i < GL_K_SCALE_SIZE; i++)
            sc6[i] = x->scales[i][r];
        for (int j = 0; j < 8; j++) {
            int sc, m, dot = 0;
            scale_min_k4(j, sc6, &sc, &m);
            for (int k = 32 * j; k < 32 * j + 32; k++)
                dot += ((x->qs[k / 8][r][k % 4] >> (4 * ((k % 8) / 4))) & 0xF) * y->qs[k];
            sb += sc * dot;
            sm += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
        }
    } else {
        const struct gl_block_q6_K_r16 *x = blk;
        for (int j = 0; j < 16; j++) {
            int dot = 0;
            for (int k = 16 * j; k < 16 * j + 16; k++) {
                int lo = (x->sub[j].ql[(k / 8) % 2][r][k % 4] >> (4 * ((k % 8) / 4))) & 0xF;
                int hi = (x->sub[j].qh[r][k % 4] >> (2 * ((k % 16) / 4))) & 3;
                dot += (lo | hi << 4) * y->qs[k];
            }
            sb += x->scales[j][r] * dot;
            sm += x->scales[j][r] * y->bsums[j];
        }
    }
    *B = sb;
    *M = sm;
}

void gl_gemm_r16_ref(enum gl_type t, int64_t n_in, const void *w, const void *act,
                     size_t act_stride, int64_t n_tok, float *out, int64_t out_stride)
{
    GL_ASSERT(gl_r16_supported(t) && n_in % GL_QK_K == 0 && n_tok >= 1);
    const int64_t nb = n_in / GL_QK_K;
    const size_t bb =
        t == GL_TYPE_Q4_K ? sizeof(struct gl_block_q4_K_r16) : sizeof(struct gl_block_q6_K_r16);
    for (int64_t tk = 0; tk < n_tok; tk++) {
        const struct gl_block_q8_K *y =
            (const struct gl_block_q8_K *)((const uint8_t *)act + (size_t)tk * act_stride);
        for (int r = 0; r < GL_R16_ROWS; r++) {
            float acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                const void *blk = (const uint8_t *)w + (size_t)b * bb;
                int32_t B, M;
                r16_block_sums(t, blk, r, &y[b], &B, &M);
                if (t == GL_TYPE_Q4_K) {
                    const struct gl_block_q4_K_r16 *x = blk;
                    acc = fmaf((float)B, h2f(x->d[r]) * y[b].d, acc);
                    acc = fmaf(-(float)M, h2f(x->dmin[r]) * y[b].d, acc);
                } else {
                    const struct gl_block_q6_K_r16 *x = blk;
                    acc = fmaf((float)(B - 32 * M), h2f(x->d[r]) * y[b].d, acc);
                }
            }
            out[tk * out_stride + r] = acc;
        }
    }
}
