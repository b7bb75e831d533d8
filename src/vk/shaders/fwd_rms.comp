// SPDX-License-Identifier: MIT
// RMSNorm over rows of width floats (src/model/backend_vk.c; the reference is backend_cpu.c's
// rms_norm, which sums squares in double: here fp32 fma per thread, then a fixed tree over the 64
// threads, so the device differs from the CPU by a few ulps of the scale, never by the batch).
//   mode 0: b[r] = RMS(a[r]) * w            (b may be a: each element is read, then written, by
//                                            the same thread after the sum)
//   mode 1: a[r] = RMS(a[r]) * w; b[r] += a[r]  (the sandwich norm and the residual)
//   mode 2: b[r] = RMS(a[idx[r]]) * w       (the head's final norm over gathered rows)
// One workgroup per row (row = workgroup x); w_off = 0xFFFFFFFF: no weight.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer WBuf { float wv[]; };
layout(std430, set = 0, binding = 3) readonly buffer InBuf { uint inb[]; };
layout(push_constant) uniform Push {
    uint width;
    uint w_off;   // float index of the weight vector in WBuf
    uint mode;
    uint idx_off; // mode 2: uint index of the row list in InBuf
    float eps;
} p;

shared float red[64];

void main()
{
    uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    uint sr = p.mode == 2u ? inb[p.idx_off + r] : r;
    uint s0 = sr * p.width, d0 = r * p.width;
    precise float ss = 0.0;
    for (uint i = tid; i < p.width; i += 64u)
        ss = fma(a[s0 + i], a[s0 + i], ss);
    red[tid] = ss;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (tid < k)
            red[tid] += red[tid + k];
        barrier();
    }
    float s = 1.0 / sqrt(red[0] / float(p.width) + p.eps);
    for (uint i = tid; i < p.width; i += 64u) {
        float v = a[s0 + i] * s;
        if (p.w_off != 0xFFFFFFFFu)
            v *= wv[p.w_off + i];
        if (p.mode == 1u) {
            a[s0 + i] = v;
            b[d0 + i] += v;
        } else {
            b[d0 + i] = v;
        }
    }
}
