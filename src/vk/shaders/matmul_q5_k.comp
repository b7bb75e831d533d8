// SPDX-License-Identifier: MIT
// Q5_K: 176-byte super-blocks of 256 weights, {fp16 d, dmin; scales[12]; qh[32]; qs[128]}; as
// Q4_K with a fifth bit: bit j of qh[l] for element l of sub-block j.
#version 450
#include "matmul.glsl"
#include "kquant.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 176u * (u >> 3), j = u & 7u, sc, m;
    scale_min_k4(b + 4u, j, sc, m);
    float d = from_fp16(rd16(b)) * float(sc), mm = from_fp16(rd16(b + 2u)) * float(m);
    uint q = b + 48u + 32u * (j >> 1), shift = 4u * (j & 1u);
    for (uint l = 0u; l < 32u; l++) {
        uint v = ((rd8(q + l) >> shift) & 15u) | (((rd8(b + 16u + l) >> j) & 1u) << 4);
        precise float wl = d * float(v) - mm; // no fused multiply-add: the reference's bits
        wv[l] = wl;
    }
}
