// SPDX-License-Identifier: MIT
// Q8_0: 34-byte blocks of 32 weights, {fp16 d; int8 qs[32]}, w = qs[j] * d.
#version 450
#include "matmul.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 34u * u;
    float d = from_fp16(rd16(b));
    for (uint j = 0u; j < 32u; j++)
        wv[j] = float(rd8s(b + 2u + j)) * d;
}
