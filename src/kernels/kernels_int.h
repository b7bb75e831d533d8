// SPDX-License-Identifier: MIT
// kernels_int: private to src/kernels/. Per-ISA registration functions that overwrite entries
// of a dispatch table already filled with the reference functions. Each is defined in the file
// compiled with that ISA's flags and must only be called after the CPU has been checked.
#pragma once

#include "kernels/kernels.h"

void gl_kernels__register_avx2(struct gl_kernels *k);
void gl_kernels__register_avx512(struct gl_kernels *k);
// The r16 kernels (gemm_r16_avx2.c, gemm_r16_avx512.c), called by gl_kernels__register_avx2 /
// gl_kernels__register_avx512.
void gl_kernels__register_avx2_r16(struct gl_kernels *k);
void gl_kernels__register_avx512_r16(struct gl_kernels *k);
// The attention tile (attn_avx512.c), called by gl_kernels__register_avx512.
void gl_kernels__register_avx512_attn(struct gl_kernels *k);
// The BF16 token-lane tile (gemm_bf16_avx512.c), called by gl_kernels__register_avx512.
void gl_kernels__register_avx512_bf16(struct gl_kernels *k);
// The Q8_0 token-lane tile (gemm_q8_avx512.c), called by gl_kernels__register_avx512.
void gl_kernels__register_avx512_q8(struct gl_kernels *k);
