// SPDX-License-Identifier: MIT
// fp8: the OCP FP8 E4M3 ("e4m3fn") element format used for the fp8 KV cache: 1 sign bit,
// 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN, so the largest
// finite magnitude is 1.75 * 2^8 = 448 and the smallest subnormal 2^-9. Encoding rounds to
// nearest, ties to even, and saturates to +-448 (the KV writer scales rows into range first).
#pragma once

#include <stdint.h>

uint8_t gl_fp8_e4m3_encode(float x); // NaN -> 0x7F (sign kept); |x| >= 448 -> +-448
float gl_fp8_e4m3_decode(uint8_t c); // exact
// The 256 decoded values (index = code), for row loops.
extern const float gl_fp8_e4m3_table[256];
