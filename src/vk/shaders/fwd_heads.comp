// SPDX-License-Identifier: MIT
// Per head of D values of each row: RMS * w (QK-norm), then when rope the interleaved-pair RoPE
// (pair (2j, 2j+1) rotated by the row's angle j; cos/sin tables computed on the host in double,
// exactly the CPU backend's, and read from InBuf). One workgroup per row, one thread per head.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer VBuf { float v[]; };
layout(std430, set = 0, binding = 1) readonly buffer WBuf { float wv[]; };
layout(std430, set = 0, binding = 2) readonly buffer InBuf { uint inb[]; };
layout(push_constant) uniform Push {
    uint width;   // floats per row (heads x D)
    uint D;
    uint w_off;   // 0xFFFFFFFF: no weight
    uint rope;
    uint cos_off; // uint index of row 0's D/2 cosines in InBuf (sines at sin_off)
    uint sin_off;
    float eps;
} p;

void main()
{
    uint r = gl_WorkGroupID.x, D2 = p.D / 2u;
    for (uint h = gl_LocalInvocationID.x; h < p.width / p.D; h += 64u) {
        uint b = r * p.width + h * p.D;
        precise float ss = 0.0;
        for (uint i = 0u; i < p.D; i++)
            ss = fma(v[b + i], v[b + i], ss);
        float s = 1.0 / sqrt(ss / float(p.D) + p.eps);
        for (uint i = 0u; i < p.D; i++) {
            float x = v[b + i] * s;
            v[b + i] = p.w_off != 0xFFFFFFFFu ? x * wv[p.w_off + i] : x;
        }
        if (p.rope == 0u)
            continue;
        for (uint j = 0u; j < D2; j++) {
            float cs = uintBitsToFloat(inb[p.cos_off + r * D2 + j]);
            float sn = uintBitsToFloat(inb[p.sin_off + r * D2 + j]);
            float x0 = v[b + 2u * j], x1 = v[b + 2u * j + 1u];
            v[b + 2u * j] = x0 * cs - x1 * sn;
            v[b + 2u * j + 1u] = x0 * sn + x1 * cs;
        }
    }
}
