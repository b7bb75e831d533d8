// SPDX-License-Identifier: MIT
// Q4_0: 18-byte blocks of 32 weights, {fp16 d; uint8 qs[16]}: byte j holds weight j (low nibble)
// and weight j + 16 (high nibble), w = (q - 8) * d.
#version 450
#include "matmul.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 18u * u;
    float d = from_fp16(rd16(b));
    for (uint j = 0u; j < 16u; j++) {
        uint q = rd8(b + 2u + j);
        wv[j] = float(int(q & 15u) - 8) * d;
        wv[j + 16u] = float(int(q >> 4) - 8) * d;
    }
}
