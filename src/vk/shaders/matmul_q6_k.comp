// SPDX-License-Identifier: MIT
// Q6_K: 210-byte super-blocks of 256 weights, {ql[128]; qh[64]; int8 scales[16]; fp16 d}. Unit
// j = 4h + k (half h of 128, quarter k): element l takes nibble (k >= 2 ? high : low) of
// ql[64h + l + 32 (k & 1)] and bits 2k, 2k + 1 of qh[32h + l]; w = d * scale[(32j + l) / 16] *
// (q - 32) (quant.c dequantize_q6_K).
#version 450
#include "matmul.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 210u * (u >> 3), j = u & 7u, h = j >> 2, k = j & 3u;
    float d = from_fp16(rd16(b + 208u));
    uint ql = b + 64u * h + 32u * (k & 1u), qh = b + 128u + 32u * h, shift = 4u * (k >> 1);
    for (uint l = 0u; l < 32u; l++) {
        uint q = ((rd8(ql + l) >> shift) & 15u) | (((rd8(qh + l) >> (2u * k)) & 3u) << 4);
        float sc = float(rd8s(b + 192u + 2u * j + (l >> 4)));
        wv[l] = d * sc * float(int(q) - 32);
    }
}
