// SPDX-License-Identifier: MIT
// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12-byte field at byte s
// (quant.c scale_min_k4).
void scale_min_k4(uint s, uint j, out uint sc, out uint m)
{
    if (j < 4u) {
        sc = rd8(s + j) & 63u;
        m = rd8(s + j + 4u) & 63u;
    } else {
        sc = (rd8(s + j + 4u) & 15u) | ((rd8(s + j - 4u) >> 6) << 4);
        m = (rd8(s + j + 4u) >> 4) | ((rd8(s + j) >> 6) << 4);
    }
}
