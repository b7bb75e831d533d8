// SPDX-License-Identifier: MIT
// fp8: E4M3 encode (round to nearest even, saturating) and decode (a 256-entry table, generated
// from value = (-1)^s * (e ? (1 + m/8) * 2^(e-7) : m/8 * 2^-6); codes 0x7F/0xFF are NaN).
// Encoding works on the f32 bit pattern: the 23-bit mantissa is cut to 3 bits with the 20 dropped
// bits deciding the rounding; magnitudes below 2^-6 go through the subnormal grid of step 2^-9.
// Row scales are bf16 (fp8.h: why not a power of two).
#include "quant/fp8.h"

#include "base/base.h"

#include <math.h>
#include <string.h>

const float gl_fp8_e4m3_table[256] = {
    0.0f,     0x1p-9f,    0x1p-8f,    0x1.8p-8f,  0x1p-7f,    0x1.4p-7f,  0x1.8p-7f,  0x1.cp-7f,
    0x1p-6f,  0x1.2p-6f,  0x1.4p-6f,  0x1.6p-6f,  0x1.8p-6f,  0x1.ap-6f,  0x1.cp-6f,  0x1.ep-6f,
    0x1p-5f,  0x1.2p-5f,  0x1.4p-5f,  0x1.6p-5f,  0x1.8p-5f,  0x1.ap-5f,  0x1.cp-5f,  0x1.ep-5f,
    0x1p-4f,  0x1.2p-4f,  0x1.4p-4f,  0x1.6p-4f,  0x1.8p-4f,  0x1.ap-4f,  0x1.cp-4f,  0x1.ep-4f,
    0x1p-3f,  0x1.2p-3f,  0x1.4p-3f,  0x1.6p-3f,  0x1.8p-3f,  0x1.ap-3f,  0x1.cp-3f,  0x1.ep-3f,
    0x1p-2f,  0x1.2p-2f,  0x1.4p-2f,  0x1.6p-2f,  0x1.8p-2f,  0x1.ap-2f,  0x1.cp-2f,  0x1.ep-2f,
    0x1p-1f,  0x1.2p-1f,  0x1.4p-1f,  0x1.6p-1f,  0x1.8p-1f,  0x1.ap-1f,  0x1.cp-1f,  0x1.ep-1f,
    0x1p+0f,  0x1.2p+0f,  0x1.4p+0f,  0x1.6p+0f,  0x1.8p+0f,  0x1.ap+0f,  0x1.cp+0f,  0x1.ep+0f,
    0x1p+1f,  0x1.2p+1f,  0x1.4p+1f,  0x1.6p+1f,  0x1.8p+1f,  0x1.ap+1f,  0x1.cp+1f,  0x1.ep+1f,
    0x1p+2f,  0x1.2p+2f,  0x1.4p+2f,  0x1.6p+2f,  0x1.8p+2f,  0x1.ap+2f,  0x1.cp+2f,  0x1.ep+2f,
    0x1p+3f,  0x1.2p+3f,  0x1.4p+3f,  0x1.6p+3f,  0x1.8p+3f,  0x1.ap+3f,  0x1.cp+3f,  0x1.ep+3f,
    0x1p+4f,  0x1.2p+4f,  0x1.4p+4f,  0x1.6p+4f,  0x1.8p+4f,  0x1.ap+4f,  0x1.cp+4f,  0x1.ep+4f,
    0x1p+5f,  0x1.2p+5f,  0x1.4p+5f,  0x1.6p+5f,  0x1.8p+5f,  0x1.ap+5f,  0x1.cp+5f,  0x1.ep+5f,
    0x1p+6f,  0x1.2p+6f,  0x1.4p+6f,  0x1.6p+6f,  0x1.8p+6f,  0x1.ap+6f,  0x1.cp+6f,  0x1.ep+6f,
    0x1p+7f,  0x1.2p+7f,  0x1.4p+7f,  0x1.6p+7f,  0x1.8p+7f,  0x1.ap+7f,  0x1.cp+7f,  0x1.ep+7f,
    0x1p+8f,  0x1.2p+8f,  0x1.4p+8f,  0x1.6p+8f,  0x1.8p+8f,  0x1.ap+8f,  0x1.cp+8f,  NAN,
    -0.0f,    -0x1p-9f,   -0x1p-8f,   -0x1.8p-8f, -0x1p-7f,   -0x1.4p-7f, -0x1.8p-7f, -0x1.cp-7f,
    -0x1p-6f, -0x1.2p-6f, -0x1.4p-6f, -0x1.6p-6f, -0x1.8p-6f, -0x1.ap-6f, -0x1.cp-6f, -0x1.ep-6f,
    -0x1p-5f, -0x1.2p-5f, -0x1.4p-5f, -0x1.6p-5f, -0x1.8p-5f, -0x1.ap-5f, -0x1.cp-5f, -0x1.ep-5f,
    -0x1p-4f, -0x1.2p-4f, -0x1.4p-4f, -0x1.6p-4f, -0x1.8p-4f, -0x1.ap-4f, -0x1.cp-4f, -0x1.ep-4f,
    -0x1p-3f, -0x1.2p-3f, -0x1.4p-3f, -0x1.6p-3f, -0x1.8p-3f, -0x1.ap-3f, -0x1.cp-3f, -0x1.ep-3f,
    -0x1p-2f, -0x1.2p-2f, -0x1.4p-2f, -0x1.6p-2f, -0x1.8p-2f, -0x1.ap-2f, -0x1.cp-2f, -0x1.ep-2f,
    -0x1p-1f, -0x1.2p-1f, -0x1.4p-1f, -0x1.6p-1f, -0x1.8p-1f, -0x1.ap-1f, -0x1.cp-1f, -0x1.ep-1f,
    -0x1p+0f, -0x1.2p+0f, -0x1.4p+0f, -0x1.6p+0f, -0x1.8p+0f, -0x1.ap+0f, -0x1.cp+0f, -0x1.ep+0f,
    -0x1p+1f, -0x1.2p+1f, -0x1.4p+1f, -0x1.6p+1f, -0x1.8p+1f, -0x1.ap+1f, -0x1.cp+1f, -0x1.ep+1f,
    -0x1p+2f, -0x1.2p+2f, -0x1.4p+2f, -0x1.6p+2f, -0x1.8p+2f, -0x1.ap+2f, -0x1.cp+2f, -0x1.ep+2f,
    -0x1p+3f, -0x1.2p+3f, -0x1.4p+3f, -0x1.6p+3f, -0x1.8p+3f, -0x1.ap+3f, -0x1.cp+3f, -0x1.ep+3f,
    -0x1p+4f, -0x1.2p+4f, -0x1.4p+4f, -0x1.6p+4f, -0x1.8p+4f, -0x1.ap+4f, -0x1.cp+4f, -0x1.ep+4f,
    -0x1p+5f, -0x1.2p+5f, -0x1.4p+5f, -0x1.6p+5f, -0x1.8p+5f, -0x1.ap+5f, -0x1.cp+5f, -0x1.ep+5f,
    -0x1p+6f, -0x1.2p+6f, -0x1.4p+6f, -0x1.6p+6f, -0x1.8p+6f, -0x1.ap+6f, -0x1.cp+6f, -0x1.ep+6f,
    -0x1p+7f, -0x1.2p+7f, -0x1.4p+7f, -0x1.6p+7f, -0x1.8p+7f, -0x1.ap+7f, -0x1.cp+7f, -0x1.ep+7f,
    -0x1p+8f, -0x1.2p+8f, -0x1.4p+8f, -0x1.6p+8f, -0x1.8p+8f, -0x1.ap+8f, -0x1.cp+8f, -NAN,
};

float gl_fp8_e4m3_decode(uint8_t c)
{
    return gl_fp8_e4m3_table[c];
}

uint8_t gl_fp8_e4m3_encode(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    const uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
    const uint32_t mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) // NaN
        return (uint8_t)(sign | 0x7Fu);
    if (mag >= 0x43E00000u) // |x| >= 448 (and +-inf): saturate
        return (uint8_t)(sign | 0x7Eu);
    if (mag < 0x3C800000u) { // |x| < 2^-6: subnormal grid m * 2^-9, m = 0..8 (8 = 2^-6, code 8)
        float a;
        memcpy(&a, &mag, sizeof a);
        // a * 512 is exact (power of two); nearbyintf rounds half to even in the default mode.
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 512.0f));
    }
    int32_t e = (int32_t)(mag >> 23) - 127; // -6 .. 8
    uint32_t m = (mag >> 20) & 7u, rest = mag & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (m & 1u)))
        m++;
    if (m == 8) {
        m = 0;
        e++;
    }
    uint32_t code = ((uint32_t)(e + 7) << 3) | m;
    if (code > 0x7Eu) // only reachable by rounding up past 448
        code = 0x7Eu;
    return (uint8_t)(sign | code);
}

uint16_t gl_fp8_e4m3_encode_row(const float *x, int64_t n, uint8_t *codes)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        amax = a > amax || isnan(a) ? a : amax; // a NaN element makes the row NaN
    }
    if (!isfinite(amax)) {
        for (int64_t i = 0; i < n; i++)
            codes[i] = gl_fp8_e4m3_encode(x[i]);
        return 0x7FC0; // bf16 quiet NaN
    }
    const uint16_t sb = gl_f32_to_bf16(amax / 448.0f);
    const float s = gl_bf16_to_f32(sb);
    if (s == 0.0f) { // amax 0, or so small that amax / 448 rounds to bf16 zero
        memset(codes, 0, (size_t)n);
        return 0;
    }
    // s may be rounded below amax / 448 by up to 2^-8 relative: the largest elements then land
    // just over 448 and saturate onto it (error <= 2^-8 relative, below e4m3's own 2^-4).
    for (int64_t i = 0; i < n; i++)
        codes[i] = gl_fp8_e4m3_encode(x[i] / s);
    return sb;
}

void gl_fp8_e4m3_decode_row(const uint8_t *codes, uint16_t scale, int64_t n, float *out)
{
    const float s = gl_bf16_to_f32(scale);
    for (int64_t i = 0; i < n; i++)
        out[i] = gl_fp8_e4m3_table[codes[i]] * s;
}
