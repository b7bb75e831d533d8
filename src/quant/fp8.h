// SPDX-License-Identifier: MIT
// fp8: the OCP FP8 E4M3 ("e4m3fn") element format used for the fp8 KV cache: 1 sign bit,
// 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN, so the largest
// finite magnitude is 1.75 * 2^8 = 448 and the smallest subnormal 2^-9. Encoding rounds to
// nearest, ties to even, and saturates to +-448 (the KV writer scales rows into range first).
//
// Each KV row (one position of one layer's K or V: Hkv*D elements) carries one bf16 scale,
// s = bf16(amax / 448) rounded to nearest even: the row's largest element encodes to 448 (within
// bf16's 2^-8 relative rounding; a value just over 448 saturates onto it), as with an exact f32
// scale. Why not a 1-byte power-of-two (E8M0) scale: dividing by 2^e leaves every element's
// mantissa as it was, so the largest element gets e4m3's full rounding error (up to 2^-4
// relative) where amax / 448 stores it almost exactly; in rows dominated by a few large channels
// (the usual K/V outliers) that element carries much of the row's norm. Simulated on 20,000
// rows of 256 (Gaussian times exp(sigma * Gaussian) per element, half the rows with one channel
// 8x): rms row error relative to the f32 scale's, E8M0 1.06x / 1.17x / 1.78x for sigma 0 / 1 /
// 3, bf16 1.00x for all three. bf16 keeps f32's exponent range, so no
// row under- or overflows its scale (rows with amax below 448 * 2^-126 ~ 5e-36 get a subnormal
// scale and lose precision; below ~ 448 * 2^-134 they are stored as zero).
#pragma once

#include <stdint.h>

uint8_t gl_fp8_e4m3_encode(float x); // NaN -> 0x7F (sign kept); |x| >= 448 -> +-448
float gl_fp8_e4m3_decode(uint8_t c); // exact
// The 256 decoded values (index = code), for row loops.
extern const float gl_fp8_e4m3_table[256];

// One KV row: returns the bf16 bits of its scale s and writes codes[i] = e4m3(x[i] / s) (f32
// division, then e4m3 rounding, saturating). amax 0 (or a scale that rounds to bf16 zero) gives
// scale 0 and zero codes; a NaN or infinite element gives a NaN scale (the row decodes to NaN, as
// an f32 cache would carry the inf/NaN on).
uint16_t gl_fp8_e4m3_encode_row(const float *x, int64_t n, uint8_t *codes);
// out[i] = e4m3 value of codes[i] * s, exact (4 x 8 significant bits fit in an f32).
void gl_fp8_e4m3_decode_row(const uint8_t *codes, uint16_t scale, int64_t n, float *out);
