// SPDX-License-Identifier: MIT
// Activation rounding before a matmul, as the CPU path does it: the CPU quantizes each input row
// to the weight's vec_dot type (src/quant/quant.c: Q8_K for the K-quants, Q8_0 for Q8_0/Q4_0,
// F16 / BF16 for those weights) and multiplies the quantized values. Here each element is
// replaced by its quantized value dequantized back (a fp32 number the CPU also multiplies), so
// the fp32 matmul shaders then form the same products, up to summation order.
//   mode 0 Q8_K: per 256: max = the signed value of the first largest |x|, iscale = -127/max,
//                q = min(127, round-half-even(iscale * x)), value q * (1 / iscale)
//   mode 1 Q8_0: per 32: amax, d = amax / 127, id = 127 / amax (0 if amax is 0),
//                q = clamp(rne(x * id), -127, 127), value q * fp16(d)
//   mode 2 F16 (round to nearest even, as gl_f32_to_fp16), mode 3 BF16 (as gl_f32_to_bf16)
// The scales' divisions are correctly rounded (div_rn) as the CPU's are: Vulkan allows a / b to be
// 2.5 ulp off (lavapipe's is exact; an NVIDIA driver's is not), and a scale an ulp off moves the
// rounding of every element of its block. One workgroup per row; thread i takes blocks (or
// elements) i, i + 64.
#version 450
#extension GL_GOOGLE_include_directive : enable
#include "fp16.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer YBuf { float y[]; };
layout(push_constant) uniform Push {
    uint width;
    uint mode;
} p;

// a / b rounded to nearest even, from the driver's approximate quotient q: among q and its
// neighbours up to 3 ulps away the nearest to a / b is the one with the least |a - c b|, each
// residual computed exactly by fma (one rounding, and exact for c next to a / b). Finite,
// non-zero a and b only (the callers' cases).
float div_rn(float a, float b)
{
    precise float q = a / b;
    precise float best = q, br = abs(fma(-q, b, a));
    for (int k = -3; k <= 3; k++) {
        if (k == 0)
            continue;
        precise float c = uintBitsToFloat(uint(int(floatBitsToUint(q)) + k));
        precise float r = abs(fma(-c, b, a));
        if (r < br || (r == br && (floatBitsToUint(c) & 1u) == 0u)) {
            best = c;
            br = r;
        }
    }
    return best;
}

void main()
{
    uint b0 = gl_WorkGroupID.x * p.width, tid = gl_LocalInvocationID.x;
    if (p.mode >= 2u) {
        for (uint i = tid; i < p.width; i += 64u) {
            uint u = floatBitsToUint(x[b0 + i]);
            if (p.mode == 2u) {
                y[b0 + i] = from_fp16(to_fp16(x[b0 + i]));
            } else if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
                y[b0 + i] = x[b0 + i];
            } else {
                u += 0x7FFFu + ((u >> 16) & 1u);
                y[b0 + i] = uintBitsToFloat(u & 0xFFFF0000u);
            }
        }
        return;
    }
    uint bs = p.mode == 0u ? 256u : 32u;
    for (uint blk = tid; blk * bs < p.width; blk += 64u) {
        uint o = b0 + blk * bs;
        float amax = 0.0, mx = 0.0;
        for (uint j = 0u; j < bs; j++)
            if (abs(x[o + j]) > amax) {
                amax = abs(x[o + j]);
                mx = x[o + j];
            }
        if (p.mode == 0u) {
            if (amax == 0.0) {
                for (uint j = 0u; j < bs; j++)
                    y[o + j] = 0.0;
                continue;
            }
            float iscale = div_rn(-127.0, mx), d = div_rn(1.0, iscale);
            for (uint j = 0u; j < bs; j++)
                y[o + j] = min(127.0, roundEven(iscale * x[o + j])) * d;
        } else {
            float d = amax != 0.0 ? from_fp16(to_fp16(div_rn(amax, 127.0))) : 0.0;
            float id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
            for (uint j = 0u; j < bs; j++)
                y[o + j] = clamp(roundEven(x[o + j] * id), -127.0, 127.0) * d;
        }
    }
}
