// SPDX-License-Identifier: MIT
// The 16-bit float conversions every shader that reads or writes f16 / bf16 shares (included by
// fwd_kv.glsl, matmul.glsl and fwd_actq.comp): the CPU's base.c rounding, bit for bit.
#ifndef FP16_GLSL_INCLUDED
#define FP16_GLSL_INCLUDED

// IEEE binary16 <-> fp32: to_fp16 rounds to nearest even exactly as gl_f32_to_fp16 (base.c),
// from_fp16 is exact (subnormals included).
uint to_fp16(float f)
{
    uint u = floatBitsToUint(f), s = (u >> 16) & 0x8000u, m = u & 0x7FFFFFu;
    int e = int((u >> 23) & 0xFFu);
    if (e == 255)
        return s | 0x7C00u | (m != 0u ? 0x200u : 0u);
    e = e - 127 + 15;
    if (e >= 31)
        return s | 0x7C00u;
    if (e <= 0) {
        if (e < -10)
            return s;
        m |= 0x800000u;
        uint shift = uint(14 - e), half_ = 1u << (shift - 1u);
        uint r = m >> shift, rem = m & ((1u << shift) - 1u);
        if (rem > half_ || (rem == half_ && (r & 1u) != 0u))
            r++;
        return s | r;
    }
    uint h = s | (uint(e) << 10) | (m >> 13), rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u))
        h++;
    return h;
}

float from_fp16(uint h)
{
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0u) {
        float v = float(m) * 5.9604644775390625e-8; // m * 2^-24
        return s != 0u ? -v : v;
    }
    if (e == 31u)
        return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

// As gl_f32_to_bf16: round to nearest even, NaN kept quiet.
uint to_bf16(float f)
{
    uint u = floatBitsToUint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (u >> 16) | 64u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// bf16 -> fp32: exact.
float from_bf16(uint h) { return uintBitsToFloat(h << 16); }

#endif
