// SPDX-License-Identifier: MIT
// Attention of one query head of one row over the keys it may see (positions lo .. pos, lo =
// pos - window + 1 for sliding layers, else 0), read through the page tables (fwd_kv.glsl):
// out = softmax(q K^T * scale) V, online over tiles of 64 keys, no score matrix in memory.
// Thread j scores key s0 + j (fp32 fma over D, in order); every thread then takes the tile's max
// and the weights, and accumulates its output dims d = tid, tid + 64, ... (D <= 512). A row's
// result depends only on its own q and keys, not on the batch (the reference is backend_cpu.c's
// attn_tile, whose exp and summation order differ: the test's tolerance covers that).
// Grid: x = row, y = query head.
#version 450
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer QBuf { float q[]; };
layout(std430, set = 0, binding = 1) writeonly buffer OBuf { float o[]; };
layout(std430, set = 0, binding = 2) readonly buffer KvBuf { uint kv[]; };
layout(push_constant) uniform Push {
    uint H;
    uint Hkv;
    uint D;
    uint layer;
    uint n_layer;
    uint window; // 0: causal only
    uint rows_off;
    uint views_off;
    float scale;
    uint dtype; // 0 f32, 1 f16, 2 bf16, 3 fp8
} p;
#include "fwd_kv.glsl"

#define MAXD 512
shared float qs[MAXD];
shared float sc[64];

void main()
{
    uint r = gl_WorkGroupID.x, h = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint kh = h / (p.H / p.Hkv);
    uint pos = inb[p.rows_off + 2u * r], seq = inb[p.rows_off + 2u * r + 1u];
    uint view = p.views_off + 10u * (seq * p.n_layer + p.layer);
    uint lo = p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u, hi = pos + 1u;
    uint qb = (r * p.H + h) * p.D;
    for (uint d = tid; d < p.D; d += 64u)
        qs[d] = q[qb + d];
    barrier();
    float m = uintBitsToFloat(0xFF800000u), l = 0.0; // running max (-inf) and sum
    float acc[MAXD / 64];
    for (uint k = 0u; k < MAXD / 64u; k++)
        acc[k] = 0.0;
    for (uint s0 = lo; s0 < hi; s0 += 64u) {
        uint n = min(64u, hi - s0);
        if (tid < n) {
            uint kr = kv_row(view, s0 + tid, false);
            float ks = kv_scale(view, s0 + tid, false, p.dtype);
            precise float dot = 0.0;
            for (uint d = 0u; d < p.D; d++)
                dot = fma(qs[d], kv_get(kr, kh * p.D + d, p.dtype, ks), dot);
            sc[tid] = dot * p.scale;
        }
        barrier();
        float mt = m;
        for (uint j = 0u; j < n; j++)
            mt = max(mt, sc[j]);
        float corr = exp(m - mt); // 0 on the first tile (m = -inf)
        l *= corr;
        for (uint k = 0u; k < MAXD / 64u; k++)
            acc[k] *= corr;
        for (uint j = 0u; j < n; j++) {
            float w = exp(sc[j] - mt);
            l += w;
            uint vr = kv_row(view, s0 + j, true);
            float vs = kv_scale(view, s0 + j, true, p.dtype);
            for (uint k = 0u; k * 64u + tid < p.D; k++)
                acc[k] = fma(w, kv_get(vr, kh * p.D + k * 64u + tid, p.dtype, vs), acc[k]);
        }
        m = mt;
        barrier(); // sc is rewritten by the next tile
    }
    for (uint k = 0u; k * 64u + tid < p.D; k++)
        o[qb + k * 64u + tid] = acc[k] / l;
}
