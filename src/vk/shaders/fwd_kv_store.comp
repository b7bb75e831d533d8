// SPDX-License-Identifier: MIT
// Stores the step's K and V rows (KD floats each) at their positions through the page tables
// (fwd_kv.glsl). One workgroup per row.
#version 450
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer KBuf { float k[]; };
layout(std430, set = 0, binding = 1) readonly buffer VBuf { float v[]; };
layout(std430, set = 0, binding = 2) buffer KvBuf { float kv[]; };
layout(push_constant) uniform Push {
    uint KD;
    uint rows_off;
    uint views_off;
    uint layer;
    uint n_layer;
} p;
#include "fwd_kv.glsl"

void main()
{
    uint r = gl_WorkGroupID.x;
    uint pos = inb[p.rows_off + 2u * r], seq = inb[p.rows_off + 2u * r + 1u];
    uint view = p.views_off + 8u * (seq * p.n_layer + p.layer);
    uint kr = kv_row(view, pos, false), vr = kv_row(view, pos, true);
    for (uint i = gl_LocalInvocationID.x; i < p.KD; i += 64u) {
        kv[kr + i] = k[r * p.KD + i];
        kv[vr + i] = v[r * p.KD + i];
    }
}
