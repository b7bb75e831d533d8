// SPDX-License-Identifier: MIT
// gemm_r16_avx512: int8 VNNI kernels for the 16-row interleaved Q4_K / Q6_K layouts (quant.h),
// spec gl_gemm_r16_ref. One zmm holds 4 consecutive weights of each of 16 rows, so vpdpbusd
// with a broadcast dword of 4 activations adds 64 exact products into 16 per-row int32 lanes:
// no horizontal sums, and a token's 4 activations come straight from memory (embedded
// broadcast). A call computes 16 rows x T tokens (T <= 8) over the whole row; the weights are
// unpacked once per call and shared by the T tokens, which is what makes prefill and batched
// decode compute-bound on vpdpbusd rather than on unpacking.
//
// Per block b, token t, the int32 lanes hold (exact: see the bounds below)
//   Q4_K: B = sum_j sc_j * S_j, S_j = dot over the 32 elements of sub-block j (|S_j| <= 60960,
//         |B| <= 63 * 8 * 60960 < 2^25); M = sum_j m_j * (bsum 2j + bsum 2j+1) (|M| < 2^22)
//   Q6_K: B = sum_j sc_j * S_j over 16 sub-blocks of 16 (|B| <= 128 * 16 * 16 * 63 * 127 < 2^28);
//         O = sum_j sc_j * bsum_j (|32 O| < 2^28)
// then the float accumulator takes them with the same single-rounded steps as the reference.
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

// Unrolled per-token loops keep the T accumulators in registers.
#define R16_UNROLL _Pragma("GCC unroll 8")

// Software prefetch R16_PF_BYTES ahead of the block being read, one line per 64 bytes of it. The
// hardware prefetchers alone left the Q4_K stream at 29-35 GB/s from DRAM at one token, where the
// machine reads 51-55 GB/s (bench/microbench_r16, the same weights with and without, interleaved:
// 29.4 -> 16.1 ms per 0.97 GB pass at 1 token, 46.6 -> 21.2 at 5; 6,656 x 19,968 in
// microbench_matmul 2.17 -> 1.21 ms). Q6_K read at full speed at 1 token either way (1.99 vs 2.07
// ms for 109 MB) but 8 tokens went 5.73 -> 3.45 ms. Three Q4_K blocks (6.9 KB) was the best of
// 1-6 blocks (x86_prefetch_ahead: addresses past the matrix are fine).
#define R16_PF_BYTES (3 * (int)sizeof(struct gl_block_q4_K_r16))

GL_X86_INLINE __m512i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

GL_X86_INLINE void q4k_r16(int64_t nb, const struct gl_block_q4_K_r16 *x, const uint8_t *act,
                           size_t act_stride, const int T, float *out, int64_t out_stride)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const struct gl_block_q8_K *y[GL_R16_MAX_TOK];
    __m512 F[GL_R16_MAX_TOK];
    R16_UNROLL
    for (int t = 0; t < T; t++) {
        y[t] = (const struct gl_block_q8_K *)(act + (size_t)t * act_stride);
        F[t] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const struct gl_block_q4_K_r16 *xb = &x[b];
        x86_prefetch_ahead(xb, sizeof *xb, R16_PF_BYTES);
        __m128i s[12];
        for (int i = 0; i < 12; i++)
            s[i] = _mm_loadu_si128((const __m128i *)xb->scales[i]);
        __m512i B[GL_R16_MAX_TOK], S[GL_R16_MAX_TOK];
        R16_UNROLL
        for (int t = 0; t < T; t++)
            B[t] = _mm512_setzero_si512();
        // Sub-blocks go in pairs (j, j + 1): 2T independent vpdpbusd chains instead of T. A chain
        // step waits 4 cycles and the two multiply pipes take 2 per cycle, so T = 2..4 tokens
        // left the pipes half idle; in pairs a block costs 55 instead of 66 ns at 4 tokens (one
        // core, L2-resident weights; 47 vs 54 at 3), which is what speculative verification pays.
        for (int j = 0; j < 8; j += 2) {
            __m512i S1[GL_R16_MAX_TOK];
            R16_UNROLL
            for (int t = 0; t < T; t++)
                S[t] = S1[t] = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int c = 4 * j; c < 4 * j + 4; c++)
            {
                __m512i w0 = _mm512_loadu_si512(xb->qs[c]), w1 = _mm512_loadu_si512(xb->qs[c + 4]);
                __m512i lo0 = _mm512_and_si512(w0, m4), lo1 = _mm512_and_si512(w1, m4);
                __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
                __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
                R16_UNROLL
                for (int t = 0; t < T; t++) {
                    const int8_t *a = y[t][b].qs + 8 * c; // sub-block j + 1: 32 bytes on
                    S[t] = _mm512_dpbusd_epi32(S[t], lo0, bcast32(a));
                    S1[t] = _mm512_dpbusd_epi32(S1[t], lo1, bcast32(a + 32));
                    S[t] = _mm512_dpbusd_epi32(S[t], hi0, bcast32(a + 4));
                    S1[t] = _mm512_dpbusd_epi32(S1[t], hi1, bcast32(a + 36));
                }
            }
            __m128i sc0, sc1, m;
            x86_q4k_r16_scale_min(s, j, &sc0, &m);
            x86_q4k_r16_scale_min(s, j + 1, &sc1, &m);
            __m512i sc32_0 = _mm512_cvtepu8_epi32(sc0), sc32_1 = _mm512_cvtepu8_epi32(sc1);
            R16_UNROLL
            for (int t = 0; t < T; t++)
                B[t] = _mm512_add_epi32(B[t], _mm512_add_epi32(_mm512_mullo_epi32(S[t], sc32_0),
                                                               _mm512_mullo_epi32(S1[t], sc32_1)));
        }
        // Mins: sub-block sums of the activations (bsum 2j + bsum 2j+1, |.| <= 32 * 127, int16)
        // paired as (j = 2p, 2p+1) in a dword, times the pair (m_2p, m_2p+1) per row lane: 4
        // vpdpwssd per token instead of 8 on the multiply pipes, which vpdpbusd saturates.
        int32_t bs32[GL_R16_MAX_TOK][4];
        R16_UNROLL
        for (int t = 0; t < T; t++) {
            S[t] = _mm512_setzero_si512();
            const int16_t *bs = y[t][b].bsums;
            _mm_storeu_si128((__m128i *)bs32[t],
                             _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                            _mm_loadu_si128((const __m128i *)(bs + 8))));
        }
        for (int p = 0; p < 4; p++) {
            __m128i sc, m0, m1;
            x86_q4k_r16_scale_min(s, 2 * p, &sc, &m0);
            x86_q4k_r16_scale_min(s, 2 * p + 1, &sc, &m1);
            __m512i mm = _mm512_or_si512(_mm512_cvtepu8_epi32(m0),
                                         _mm512_slli_epi32(_mm512_cvtepu8_epi32(m1), 16));
            R16_UNROLL
            for (int t = 0; t < T; t++)
                S[t] = _mm512_dpwssd_epi32(S[t], mm, _mm512_set1_epi32(bs32[t][p]));
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)xb->d));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)xb->dmin));
        R16_UNROLL
        for (int t = 0; t < T; t++) {
            __m512 yd = _mm512_set1_ps(y[t][b].d);
            F[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(B[t]), _mm512_mul_ps(d, yd), F[t]);
            F[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(dm, yd), F[t]);
        }
    }
    R16_UNROLL
    for (int t = 0; t < T; t++)
        _mm512_storeu_ps(out + t * out_stride, F[t]);
}

GL_X86_INLINE void q6k_r16(int64_t nb, const struct gl_block_q6_K_r16 *x, const uint8_t *act,
                           size_t act_stride, const int T, float *out, int64_t out_stride)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const struct gl_block_q8_K *y[GL_R16_MAX_TOK];
    __m512 F[GL_R16_MAX_TOK];
    R16_UNROLL
    for (int t = 0; t < T; t++) {
        y[t] = (const struct gl_block_q8_K *)(act + (size_t)t * act_stride);
        F[t] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const struct gl_block_q6_K_r16 *xb = &x[b];
        x86_prefetch_ahead(xb, sizeof *xb, R16_PF_BYTES);
        __m512i B[GL_R16_MAX_TOK], S[GL_R16_MAX_TOK];
        R16_UNROLL
        for (int t = 0; t < T; t++)
            B[t] = _mm512_setzero_si512();
        for (int j = 0; j < 16; j++) {
            __m512i l0 = _mm512_loadu_si512(xb->sub[j].ql[0]);
            __m512i l1 = _mm512_loadu_si512(xb->sub[j].ql[1]);
            __m512i h = _mm512_loadu_si512(xb->sub[j].qh);
            // (low nibble & 0x0f) | (two high bits at 4..5): ternary-logic 0xEA = (A & B) | C.
            __m512i v[4] = {
                _mm512_ternarylogic_epi32(l0, m4, _mm512_and_si512(_mm512_slli_epi16(h, 4), m30),
                                          0xEA),
                _mm512_ternarylogic_epi32(_mm512_srli_epi16(l0, 4), m4,
                                          _mm512_and_si512(_mm512_slli_epi16(h, 2), m30), 0xEA),
                _mm512_ternarylogic_epi32(l1, m4, _mm512_and_si512(h, m30), 0xEA),
                _mm512_ternarylogic_epi32(_mm512_srli_epi16(l1, 4), m4,
                                          _mm512_and_si512(_mm512_srli_epi16(h, 2), m30), 0xEA),
            };
            __m512i sc32 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)xb->scales[j]));
            R16_UNROLL
            for (int t = 0; t < T; t++) {
                const int8_t *a = y[t][b].qs + 16 * j;
                __m512i st = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[0], bcast32(a));
                st = _mm512_dpbusd_epi32(st, v[1], bcast32(a + 4));
                st = _mm512_dpbusd_epi32(st, v[2], bcast32(a + 8));
                st = _mm512_dpbusd_epi32(st, v[3], bcast32(a + 12));
                B[t] = _mm512_add_epi32(B[t], _mm512_mullo_epi32(st, sc32));
            }
        }
        // Offset: (sc_2p, sc_2p+1) int16 pairs per row lane times (bsum 2p, bsum 2p+1).
        R16_UNROLL
        for (int t = 0; t < T; t++)
            S[t] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            __m128i a = _mm_loadu_si128((const __m128i *)xb->scales[2 * p]);
            __m128i c = _mm_loadu_si128((const __m128i *)xb->scales[2 * p + 1]);
            __m512i pair = _mm512_cvtepi8_epi16(
                _mm256_setr_m128i(_mm_unpacklo_epi8(a, c), _mm_unpackhi_epi8(a, c)));
            R16_UNROLL
            for (int t = 0; t < T; t++)
                S[t] = _mm512_dpwssd_epi32(S[t], pair, bcast32(&y[t][b].bsums[2 * p]));
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)xb->d));
        R16_UNROLL
        for (int t = 0; t < T; t++) {
            __m512i q = _mm512_sub_epi32(B[t], _mm512_slli_epi32(S[t], 5));
            F[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q),
                                   _mm512_mul_ps(d, _mm512_set1_ps(y[t][b].d)), F[t]);
        }
    }
    R16_UNROLL
    for (int t = 0; t < T; t++)
        _mm512_storeu_ps(out + t * out_stride, F[t]);
}

GL_X86_R16_ENTRY(gemm_r16_q4_K, q4k_r16, struct gl_block_q4_K_r16)
GL_X86_R16_ENTRY(gemm_r16_q6_K, q6k_r16, struct gl_block_q6_K_r16)

void gl_kernels__register_avx512_r16(struct gl_kernels *k)
{
    k->gemm_r16[GL_TYPE_Q4_K] = gemm_r16_q4_K;
    k->gemm_r16[GL_TYPE_Q6_K] = gemm_r16_q6_K;
}
