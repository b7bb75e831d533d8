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
    uint dtype; // 0 f32, 1 f16, 2 bf16
} p;
#include "fwd_kv.glsl"

void main()
{
    uint r = gl_WorkGroupID.x;
    uint pos = inb[p.rows_off + 2u * r], seq = inb[p.rows_off + 2u * r + 1u];
    uint view = p.views_off + 8u * (seq * p.n_layer + p.layer);
    uint kr = kv_row(view, pos, false), vr = kv_row(view, pos, true);
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
