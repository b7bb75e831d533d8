// SPDX-License-Identifier: MIT
// Q4_K: 144-byte super-blocks of 256 weights, {fp16 d, dmin; scales[12]; qs[128]}; unit j of a
// block is sub-block j: w = (d * sc_j) * q - dmin * m_j, q the low nibble of qs[32 (j / 2) + l]
// for even j and the high nibble for odd j.
#version 450
#include "matmul.glsl"
#include "kquant.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 144u * (u >> 3), j = u & 7u, sc, m;
    scale_min_k4(b + 4u, j, sc, m);
    float d = from_fp16(rd16(b)) * float(sc), mm = from_fp16(rd16(b + 2u)) * float(m);
    uint q = b + 16u + 32u * (j >> 1), shift = 4u * (j & 1u);
    for (uint l = 0u; l < 32u; l++) {
        // precise: no fused multiply-add, so the weight is the reference's bits (two roundings).
        precise float v = d * float((rd8(q + l) >> shift) & 15u) - mm;
        wv[l] = v;
    }
}
