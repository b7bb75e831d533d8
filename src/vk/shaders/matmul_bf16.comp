// SPDX-License-Identifier: MIT
// BF16 weights: the top 16 bits of an fp32, 2 bytes each.
#version 450
#include "matmul.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 64u * u, n = min(32u, p.cols - 32u * u);
    for (uint j = 0u; j < 32u; j++)
        wv[j] = j < n ? from_bf16(rd16(b + 2u * j)) : 0.0;
}
