// SPDX-License-Identifier: MIT
// The matmul shaders' shared part: y[t][r] = sum over c of W[r][c] * x[t][c], W in its GGUF block
// layout exactly as in the file, x and y fp32. Each matmul_<type>.comp includes this and defines
// unit_weights(), the dequantization of one 32-weight unit of a row (the reference is
// src/quant/quant.c's gl_dequantize_row_ref, same float operations in the same order).
//
// One workgroup of WG threads computes one row r for up to NT tokens. Thread i takes units i,
// i + WG, ... of the row, dequantizes each once and accumulates it against every token of the
// tile (fp32 fused multiply-add, in unit order); the WG partial sums are then added by a fixed
// tree in shared memory. So a token's result depends only on its row and its own x, not on
// which or how many tokens share the dispatch, nor on NT (the CPU path's batch invariance,
// docs/ARCHITECTURE.md "Numerics"). NT is a specialization constant: 8 for decode-sized calls,
// 32 for prefill (W is read once per NT tokens); the accumulators are `precise`, which makes
// every fma() one rounding in both pipelines (GLSL 4.60 §4.7.1), so the two agree bit for bit.
//
// Grid: x * z workgroups cover the rows (row = z * num_x + x; Vulkan guarantees only 65535 per
// dimension and a vocabulary has 202,048 rows), y the token tiles of NT.
//
// W is read as 32-bit words and split into bytes: GGUF blocks are 18, 34 or 210 bytes, so rows
// are only 2-byte aligned, and 8/16-bit storage buffers are an optional feature.
#extension GL_GOOGLE_include_directive : enable

layout(constant_id = 0) const uint NT = 8; // tokens per workgroup
// Threads per workgroup, chosen per matrix by the host (vk_matmul.c: 8 for rows of at most 8
// units, else 64), so a narrow matrix does not run 56 idle threads through every barrier.
layout(constant_id = 1) const uint WG = 64;
layout(local_size_x_id = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer WBuf { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer XBuf { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer YBuf { float y[]; };

// Offsets are relative to each binding's start (the host binds aligned ranges of larger buffers).
layout(push_constant) uniform Push {
    uint rows;     // rows of this dispatch
    uint cols;     // weights per row (a multiple of the type's block size)
    uint n_tok;    // tokens
    uint w_off;    // byte offset of row 0 in W (a multiple of 4)
    uint w_stride; // bytes per row
    uint x_off;    // float index of token 0's first element in X
    uint x_stride; // floats from one token to the next in X
    uint y_off;    // float index of y[0][0] in Y
    uint y_stride; // floats from one token to the next in Y
} p;

uint rd8(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
// b even (every 16-bit field of a block is, in every row)
uint rd16(uint b) { return (w[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu; }
int rd8s(uint b) { return bitfieldExtract(int(rd8(b)), 0, 8); }

#include "fp16.glsl"

// The 32 weights of unit u (columns 32u .. 32u + 31) of the row starting at byte rb; for the
// float types the last unit may be short and its extra entries are not read.
void unit_weights(uint rb, uint u, out float wv[32]);

shared float red[NT][WG];

void main()
{
    uint r = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (r >= p.rows) // uniform over the workgroup: no barrier is skipped by some threads only
        return;
    uint tid = gl_LocalInvocationID.x;
    uint t0 = gl_WorkGroupID.y * NT;
    uint nt = min(NT, p.n_tok - t0);
    uint rb = p.w_off + r * p.w_stride;
    uint n_units = (p.cols + 31u) / 32u;

    precise float acc[NT];
    for (uint t = 0u; t < NT; t++)
        acc[t] = 0.0;
    for (uint u = tid; u < n_units; u += WG) {
        float wv[32];
        unit_weights(rb, u, wv);
        uint c0 = u * 32u, n = min(32u, p.cols - c0);
        for (uint t = 0u; t < NT; t++) {
            if (t >= nt)
                break;
            uint xb = p.x_off + (t0 + t) * p.x_stride + c0;
            precise float s = acc[t];
            for (uint j = 0u; j < 32u; j++)
                if (j < n)
                    s = fma(wv[j], x[xb + j], s);
            acc[t] = s;
        }
    }
    for (uint t = 0u; t < NT; t++)
        red[t][tid] = acc[t];
    barrier();
    for (uint s = WG / 2; s > 0u; s >>= 1) {
        if (tid < s)
            for (uint t = 0u; t < NT; t++)
                red[t][tid] += red[t][tid + s];
        barrier();
    }
    for (uint t = tid; t < nt; t += WG) // WG may be below NT
        y[p.y_off + (t0 + t) * p.y_stride + r] = red[t][0];
}
