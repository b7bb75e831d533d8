// SPDX-License-Identifier: MIT
// F32 weights: 4 bytes each (rows start 4-byte aligned: w_off and 4 * cols are).
#version 450
#include "matmul.glsl"

void unit_weights(uint rb, uint u, out float wv[32])
{
    uint b = rb + 128u * u, n = min(32u, p.cols - 32u * u);
    for (uint j = 0u; j < 32u; j++)
        wv[j] = j < n ? uintBitsToFloat(w[(b >> 2) + j]) : 0.0;
}
