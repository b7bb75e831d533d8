// SPDX-License-Identifier: MIT
// The step's rows and KV page tables in InBuf (written by src/model/backend_vk.c each step):
//   rows_off + 2 r:      position of row r, its sequence index
//   views_off + 10 v:    view v = seq * n_layer + layer: first page-table entry (uint index into
//                        InBuf), n_blocks, block_size, page_words, row_words, k_off_words,
//                        v_off_words, k_scale_off, v_scale_off (bytes in a page: fp8's bf16 row
//                        scales), 0
// KV is the device mirror of the host pool: the same pages at the same byte offsets, rows in the
// pool's dtype (push constant dtype: 0 f32, 1 f16, 2 bf16, 3 fp8 e4m3 with a bf16 scale per row,
// fp8.h; 16-bit elements 2j and 2j + 1 share a word, 2j in the low half, and fp8 codes
// 4j .. 4j + 3 one word, as the little-endian host stores them). First word of the K (or
// V) row at position pos: page * page_words + (k|v)_off_words + (pos % block_size) * row_words,
// as backend_cpu.c's kv_page / kv_head address the host. The including shader declares
// `uint kv[]` first.
layout(std430, set = 0, binding = 3) readonly buffer InBuf { uint inb[]; };

// vb: uint index of the view's record in InBuf
uint kv_row(uint vb, uint pos, bool is_v)
{
    uint bs = inb[vb + 2u];
    uint page = inb[inb[vb] + pos / bs];
    return page * inb[vb + 3u] + inb[vb + (is_v ? 6u : 5u)] + (pos % bs) * inb[vb + 4u];
}

#include "fp16.glsl"

// Byte address of the bf16 scale of the K (or V) row at position pos (fp8 pools).
uint kv_scale_byte(uint vb, uint pos, bool is_v)
{
    uint bs = inb[vb + 2u];
    uint page = inb[inb[vb] + pos / bs];
    return page * inb[vb + 3u] * 4u + inb[vb + (is_v ? 8u : 7u)] + (pos % bs) * 2u;
}

// The scale of a row as f32 (1 for the other dtypes).
float kv_scale(uint vb, uint pos, bool is_v, uint dtype)
{
    if (dtype != 3u)
        return 1.0;
    uint b = kv_scale_byte(vb, pos, is_v);
    return uintBitsToFloat(((kv[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu) << 16);
}

// E4M3 (fp8.c): encode rounds to nearest even and saturates to +-448, NaN -> 0x7F; decode
// is exact.
uint e4m3(float x)
{
    uint bits = floatBitsToUint(x), sign = (bits >> 24) & 0x80u, mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u)
        return sign | 0x7Fu;
    if (mag >= 0x43E00000u)
        return sign | 0x7Eu;
    if (mag < 0x3C800000u) // subnormal grid m * 2^-9
        return sign | uint(roundEven(uintBitsToFloat(mag) * 512.0));
    int e = int(mag >> 23) - 127;
    uint m = (mag >> 20) & 7u, rest = mag & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (m & 1u) != 0u))
        m++;
    if (m == 8u) {
        m = 0u;
        e++;
    }
    uint code = (uint(e + 7) << 3) | m;
    return sign | min(code, 0x7Eu);
}

float e4m3_value(uint c)
{
    uint e = (c >> 3) & 15u, m = c & 7u;
    float v = e == 15u && m == 7u ? uintBitsToFloat(0x7FC00000u)
              : e == 0u           ? float(m) * 0.001953125 // m * 2^-9
                                  : uintBitsToFloat(((e + 120u) << 23) | (m << 20));
    return (c & 0x80u) != 0u ? -v : v;
}

// Element i of the row whose first word is w, times the row's scale s (fp8; 1 otherwise).
float kv_get(uint w, uint i, uint dtype, float s)
{
    if (dtype == 0u)
        return uintBitsToFloat(kv[w + i]);
    if (dtype == 3u)
        return e4m3_value((kv[w + i / 4u] >> ((i & 3u) * 8u)) & 0xFFu) * s;
    uint h = (kv[w + i / 2u] >> ((i & 1u) * 16u)) & 0xFFFFu;
    return dtype == 1u ? from_fp16(h) : uintBitsToFloat(h << 16);
}
