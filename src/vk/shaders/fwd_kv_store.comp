// SPDX-License-Identifier: MIT
// Stores the step's K and V rows (KD floats each) at their positions through the page tables
// (fwd_kv.glsl), converted to the pool's dtype as backend_cpu.c's kv_store does. One workgroup
// per row.
#version 450
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer KBuf { float k[]; };
layout(std430, set = 0, binding = 1) readonly buffer VBuf { float v[]; };
layout(std430, set = 0, binding = 2) buffer KvBuf { uint kv[]; };
layout(push_constant) uniform Push {
    uint KD;
    uint rows_off;
    uint views_off;
    uint layer;
    uint n_layer;
    uint dtype; // 0 f32, 1 f16, 2 bf16, 3 fp8
} p;
#include "fwd_kv.glsl"

shared float red[2][64];

// fp8: one row of K or V as gl_fp8_e4m3_encode_row does it: s = bf16(amax / 448), codes
// e4m3(x / s) (a NaN or infinite element: codes e4m3(x), scale NaN; s 0: zero codes, scale 0).
// The bf16 scale shares its word with the neighbouring row's, which another workgroup may be
// writing: it is stored with atomics.
void store_fp8(uint r, uint pos, uint view, uint row, bool is_v, float amax)
{
    uint sb = (floatBitsToUint(amax) & 0x7FFFFFFFu) >= 0x7F800000u ? 0x7FC0u : to_bf16(amax / 448.0);
    float s = uintBitsToFloat(sb << 16);
    bool raw = sb == 0x7FC0u;
    for (uint j = gl_LocalInvocationID.x; 4u * j < p.KD; j += 64u) {
        uint word = 0u;
        for (uint t = 0u; t < 4u; t++) {
            float x = is_v ? v[r * p.KD + 4u * j + t] : k[r * p.KD + 4u * j + t];
            uint c = raw ? e4m3(x) : s == 0.0 ? 0u : e4m3(x / s);
            word |= c << (8u * t);
        }
        kv[row + j] = word;
    }
    if (gl_LocalInvocationID.x == 0u) {
        uint b = kv_scale_byte(view, pos, is_v), sh = (b & 2u) * 8u;
        atomicAnd(kv[b >> 2], ~(0xFFFFu << sh));
        atomicOr(kv[b >> 2], (s == 0.0 && !raw ? 0u : sb) << sh);
    }
}

void main()
{
    uint r = gl_WorkGroupID.x;
    uint pos = inb[p.rows_off + 2u * r], seq = inb[p.rows_off + 2u * r + 1u];
    uint view = p.views_off + 10u * (seq * p.n_layer + p.layer);
    uint kr = kv_row(view, pos, false), vr = kv_row(view, pos, true);
    if (p.dtype == 3u) {
        float ak = 0.0, av = 0.0; // |x| maxima; a NaN element makes the row NaN (max keeps it)
        for (uint i = gl_LocalInvocationID.x; i < p.KD; i += 64u) {
            float a = abs(k[r * p.KD + i]), b = abs(v[r * p.KD + i]);
            ak = a > ak || isnan(a) ? a : ak;
            av = b > av || isnan(b) ? b : av;
        }
        uint tid = gl_LocalInvocationID.x;
        red[0][tid] = ak;
        red[1][tid] = av;
        barrier();
        for (uint h = 32u; h > 0u; h >>= 1) {
            if (tid < h)
                for (uint q = 0u; q < 2u; q++) {
                    float o = red[q][tid + h];
                    red[q][tid] = o > red[q][tid] || isnan(o) ? o : red[q][tid];
                }
            barrier();
        }
        store_fp8(r, pos, view, kr, false, red[0][0]);
        store_fp8(r, pos, view, vr, true, red[1][0]);
        return;
    }
    if (p.dtype == 0u) {
        for (uint i = gl_LocalInvocationID.x; i < p.KD; i += 64u) {
            kv[kr + i] = floatBitsToUint(k[r * p.KD + i]);
            kv[vr + i] = floatBitsToUint(v[r * p.KD + i]);
        }
        return;
    }
    // 16-bit: one thread per word (KD is even), so no two threads write one word.
    for (uint j = gl_LocalInvocationID.x; 2u * j < p.KD; j += 64u) {
        uint a = r * p.KD + 2u * j;
        if (p.dtype == 1u) {
            kv[kr + j] = to_fp16(k[a]) | (to_fp16(k[a + 1u]) << 16);
            kv[vr + j] = to_fp16(v[a]) | (to_fp16(v[a + 1u]) << 16);
        } else {
            kv[kr + j] = to_bf16(k[a]) | (to_bf16(k[a + 1u]) << 16);
            kv[vr + j] = to_bf16(v[a]) | (to_bf16(v[a + 1u]) << 16);
        }
    }
}
