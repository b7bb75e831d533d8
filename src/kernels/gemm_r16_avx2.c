// SPDX-License-Identifier: MIT
// gemm_r16_avx2: AVX2 kernels for the 16-row interleaved Q4_K / Q6_K layouts (quant.h), spec
// gl_gemm_r16_ref, bit for bit. Without VNNI, the row-layout dots spend two multiplies per 32
// products (vpmaddubsw to int16 pairs, then vpmaddwd by the sub-block scale to int32), and from 2
// tokens on those multiplies, not memory, set the time: vec_dot4 at 4 tokens cost 1.8x one token
// (bench/microbench_r16 ... row, Zen 3). In the r16 layout one ymm holds 4 consecutive weights of 8
// rows, so vpmaddubsw against a broadcast dword of 4 activations leaves 2 products of one row per
// int16 lane: a sub-block's lanes are summed with plain vpaddw and take one vpmaddwd by the
// scales at its end. The int16 sums are exact:
//   Q4_K: a sub-block (32 elements) is 8 vpmaddubsw per token, 16 products per int16 lane:
//         |lane| <= 16 * 15 * 127 = 30480 < 2^15.
//   Q6_K: a sub-block (16 elements) is 4 vpmaddubsw; two are summed per lane before vpmaddwd:
//         |lane| <= 4 * 63 * 127 = 32004 < 2^15 (a third would overflow: test_matmul's
//         extremes check).
// Activations are q8_K, in [-127, 127] (quantize_q8_K).
//
// A block's 16 rows are two halves of 8 (bytes 0..31 and 32..63 of each 64-byte group), both
// taken per sub-block so that each broadcast feeds two vpmaddubsw: on Zen 3 a broadcast is not
// free, and both halves at once took 0.90x the time of one half at a time at 1 token and 0.95x at
// 4 (L2-resident, the vpaddw barrier in both).
//
// Software prefetch R16_PF_BYTES ahead, one line per 64 bytes read, issued beside the loads that
// read them (not as a burst per block, as the AVX-512 file does). From DRAM, 13 x 75 MB Q4_K and
// 9 x 109 MB Q6_K matrices (6,656 x 19,968), each variant alternated pass by pass in one process
// with the other, both orders (Zen 3, 2 threads): Q4_K 0.84x the time at 1 token and 0.83x at 4,
// Q6_K 0.80-0.86x and 0.83-0.84x. 1 KB ahead was 1.02-1.07x slower than 2 KB, 4 KB within 5% of
// it either way. A burst of the whole block 3 blocks ahead (the AVX-512 form) was within the
// noise here (0.95-1.05x).
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define R16_UNROLL _Pragma("GCC unroll 8")

#define R16_PF_BYTES 2048

GL_X86_INLINE __m256i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// The scale bytes of half h (rows 8h..8h+7 of a 16-row byte vector, present in both 128-bit
// lanes) as 16 int16 lanes, row r's byte in lanes 2r and 2r + 1: the layout of a vpmaddubsw
// result, so vpmaddwd multiplies both of a row's lanes by its scale. One vpshufb (control byte -1
// zeroes the high bytes); the widen-shift-or it replaced was 3 vector ops per half and sub-block,
// and at 4 tokens the vector ops, not memory, set the time: 0.97x at 4 tokens and 0.94x at 1-3
// (L2-resident), 0.94x at 4 from DRAM (Q4_K, Zen 3).
GL_X86_INLINE __m256i dup_rows_u8(__m256i v16, int h)
{
    int8_t c[32];
    for (int i = 0; i < 32; i++)
        c[i] = (int8_t)(i % 2 ? -1 : 8 * h + i / 4);
    __m256i ctl;
    memcpy(&ctl, c, sizeof ctl);
    return _mm256_shuffle_epi8(v16, ctl);
}

// 8 signed bytes (q6_K's scales, one per row of a half) as int16 pairs, widened. The vpshufb form
// (bytes to the high halves, then an arithmetic shift for the sign) was not faster in the Q6_K
// kernel (1.02-1.06x the time at 3-4 tokens, L2-resident).
GL_X86_INLINE __m256i dup_rows_i8(__m128i v8)
{
    __m256i w = _mm256_cvtepi8_epi32(v8);
    return _mm256_blend_epi16(w, _mm256_slli_epi32(w, 16), 0xAA);
}

GL_X86_INLINE void q4k_r16(int64_t nb, const struct gl_block_q4_K_r16 *x, const uint8_t *act,
                           size_t act_stride, const int T, float *out, int64_t out_stride)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const struct gl_block_q8_K *y[GL_R16_MAX_TOK];
    R16_UNROLL
    for (int t = 0; t < T; t++) { // the float sums live in out: 16 ymm hold no more
        y[t] = (const struct gl_block_q8_K *)(act + (size_t)t * act_stride);
        _mm256_storeu_ps(out + t * out_stride, _mm256_setzero_ps());
        _mm256_storeu_ps(out + t * out_stride + 8, _mm256_setzero_ps());
    }
    for (int64_t b = 0; b < nb; b++) {
        const struct gl_block_q4_K_r16 *xb = &x[b];
        // The 6-bit scales and mins of all 16 rows, decoded once for both halves.
        __m128i s[12], sc[8], mn[8];
        R16_UNROLL
        for (int i = 0; i < 12; i++)
            s[i] = _mm_loadu_si128((const __m128i *)xb->scales[i]);
        R16_UNROLL
        for (int j = 0; j < 8; j++)
            x86_q4k_r16_scale_min(s, j, &sc[j], &mn[j]);
        // (bsum 4p + bsum 4p+1, bsum 4p+2 + bsum 4p+3) per dword: sub-blocks 2p and 2p + 1.
        int32_t bs32[GL_R16_MAX_TOK][4];
        R16_UNROLL
        for (int t = 0; t < T; t++) {
            const int16_t *bs = y[t][b].bsums;
            _mm_storeu_si128((__m128i *)bs32[t],
                             _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                            _mm_loadu_si128((const __m128i *)(bs + 8))));
        }
        // Both halves per sub-block: each activation broadcast feeds two vpmaddubsw.
        __m256i B[GL_R16_MAX_TOK][2];
        R16_UNROLL
        for (int t = 0; t < T; t++)
            B[t][0] = B[t][1] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            __m256i S[GL_R16_MAX_TOK][2];
            R16_UNROLL
            for (int t = 0; t < T; t++)
                S[t][0] = S[t][1] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int cc = 0; cc < 4; cc++)
            {
                const int c = 4 * j + cc;
                x86_prefetch_ahead(xb->qs[c], sizeof xb->qs[c], R16_PF_BYTES); // one line
                __m256i w0 = _mm256_loadu_si256((const __m256i *)xb->qs[c][0]);
                __m256i w1 = _mm256_loadu_si256((const __m256i *)xb->qs[c][8]);
                __m256i lo0 = _mm256_and_si256(w0, m4), lo1 = _mm256_and_si256(w1, m4);
                __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(w0, 4), m4);
                __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(w1, 4), m4);
                R16_UNROLL
                for (int t = 0; t < T; t++) {
                    const int8_t *a = y[t][b].qs + 8 * c;
                    const __m256i al = bcast32(a), ah = bcast32(a + 4);
                    S[t][0] = _mm256_add_epi16(S[t][0], _mm256_maddubs_epi16(lo0, al));
                    S[t][1] = _mm256_add_epi16(S[t][1], _mm256_maddubs_epi16(lo1, al));
                    S[t][0] = _mm256_add_epi16(S[t][0], _mm256_maddubs_epi16(hi0, ah));
                    S[t][1] = _mm256_add_epi16(S[t][1], _mm256_maddubs_epi16(hi1, ah));
                    // An empty asm on the sums keeps each vpaddw chain in order: without it GCC
                    // reassociates the 16 products of an unrolled sub-block into a tree and
                    // spills the partial sums (1.07-1.12x slower at 1 and 4 tokens, L2-resident).
                    __asm__("" : "+x"(S[t][0]), "+x"(S[t][1]));
                }
            }
            const __m256i scj = _mm256_broadcastsi128_si256(sc[j]);
            const __m256i sc0 = dup_rows_u8(scj, 0), sc1 = dup_rows_u8(scj, 1);
            R16_UNROLL
            for (int t = 0; t < T; t++) {
                B[t][0] = _mm256_add_epi32(B[t][0], _mm256_madd_epi16(S[t][0], sc0));
                B[t][1] = _mm256_add_epi32(B[t][1], _mm256_madd_epi16(S[t][1], sc1));
            }
        }
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
        {
            // Mins: (m_2p, m_2p+1) per row as an int16 pair times the pair's bsums.
            __m256i M[GL_R16_MAX_TOK];
            R16_UNROLL
            for (int t = 0; t < T; t++)
                M[t] = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                __m256i mm = _mm256_cvtepu8_epi16(h ? _mm_unpackhi_epi8(mn[2 * p], mn[2 * p + 1])
                                                    : _mm_unpacklo_epi8(mn[2 * p], mn[2 * p + 1]));
                R16_UNROLL
                for (int t = 0; t < T; t++)
                    M[t] = _mm256_add_epi32(M[t],
                                            _mm256_madd_epi16(mm, _mm256_set1_epi32(bs32[t][p])));
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)&xb->d[8 * h]));
            const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)&xb->dmin[8 * h]));
            R16_UNROLL
            for (int t = 0; t < T; t++) {
                __m256 yd = _mm256_set1_ps(y[t][b].d),
                       F = _mm256_loadu_ps(out + t * out_stride + 8 * h);
                F = _mm256_fmadd_ps(_mm256_cvtepi32_ps(B[t][h]), _mm256_mul_ps(d, yd), F);
                F = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M[t]), _mm256_mul_ps(dm, yd), F);
                _mm256_storeu_ps(out + t * out_stride + 8 * h, F);
            }
        }
    }
}

GL_X86_INLINE void q6k_r16(int64_t nb, const struct gl_block_q6_K_r16 *x, const uint8_t *act,
                           size_t act_stride, const int T, float *out, int64_t out_stride)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const struct gl_block_q8_K *y[GL_R16_MAX_TOK];
    R16_UNROLL
    for (int t = 0; t < T; t++) {
        y[t] = (const struct gl_block_q8_K *)(act + (size_t)t * act_stride);
        _mm256_storeu_ps(out + t * out_stride, _mm256_setzero_ps());
        _mm256_storeu_ps(out + t * out_stride + 8, _mm256_setzero_ps());
    }
    for (int64_t b = 0; b < nb; b++) {
        const struct gl_block_q6_K_r16 *xb = &x[b];
        // Both halves per sub-block: each activation broadcast feeds two vpmaddubsw.
        __m256i B[GL_R16_MAX_TOK][2];
        R16_UNROLL
        for (int t = 0; t < T; t++)
            B[t][0] = B[t][1] = _mm256_setzero_si256();
        for (int j = 0; j < 16; j++) {
            __m256i v[2][4], sc16[2];
            x86_prefetch_ahead(&xb->sub[j], sizeof xb->sub[j], R16_PF_BYTES); // 3 lines
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            {
                __m256i l0 = _mm256_loadu_si256((const __m256i *)xb->sub[j].ql[0][8 * h]);
                __m256i l1 = _mm256_loadu_si256((const __m256i *)xb->sub[j].ql[1][8 * h]);
                __m256i qh = _mm256_loadu_si256((const __m256i *)xb->sub[j].qh[8 * h]);
                // Elements 16j + 4i .. 16j + 4i + 3: low nibble | the two high bits at 4..5.
                v[h][0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
                v[h][1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
                v[h][2] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(qh, m30));
                v[h][3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
                sc16[h] = dup_rows_i8(_mm_loadl_epi64((const __m128i *)&xb->scales[j][8 * h]));
            }
            R16_UNROLL
            for (int t = 0; t < T; t++) {
                const int8_t *a = y[t][b].qs + 16 * j;
                const __m256i a0 = bcast32(a), a1 = bcast32(a + 4);
                const __m256i a2 = bcast32(a + 8), a3 = bcast32(a + 12);
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
                {
                    __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(v[h][0], a0),
                                                 _mm256_maddubs_epi16(v[h][1], a1));
                    __m256i q = _mm256_add_epi16(_mm256_maddubs_epi16(v[h][2], a2),
                                                 _mm256_maddubs_epi16(v[h][3], a3));
                    B[t][h] =
                        _mm256_add_epi32(B[t][h], _mm256_add_epi32(_mm256_madd_epi16(p, sc16[h]),
                                                                   _mm256_madd_epi16(q, sc16[h])));
                }
            }
        }
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
        {
            __m256i O[GL_R16_MAX_TOK];
            R16_UNROLL
            for (int t = 0; t < T; t++)
                O[t] = _mm256_setzero_si256();
            // Offset: (sc_2p, sc_2p+1) int16 pairs per row times (bsum 2p, bsum 2p+1).
            for (int p = 0; p < 8; p++) {
                __m128i a = _mm_loadl_epi64((const __m128i *)&xb->scales[2 * p][8 * h]);
                __m128i c = _mm_loadl_epi64((const __m128i *)&xb->scales[2 * p + 1][8 * h]);
                __m256i pair = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, c));
                R16_UNROLL
                for (int t = 0; t < T; t++)
                    O[t] = _mm256_add_epi32(
                        O[t], _mm256_madd_epi16(pair, bcast32(&y[t][b].bsums[2 * p])));
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)&xb->d[8 * h]));
            R16_UNROLL
            for (int t = 0; t < T; t++) {
                __m256i q = _mm256_sub_epi32(B[t][h], _mm256_slli_epi32(O[t], 5));
                float *o = out + t * out_stride + 8 * h;
                _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q),
                                                    _mm256_mul_ps(d, _mm256_set1_ps(y[t][b].d)),
                                                    _mm256_loadu_ps(o)));
            }
        }
    }
}

GL_X86_R16_ENTRY(gemm_r16_q4_K, q4k_r16, struct gl_block_q4_K_r16)
GL_X86_R16_ENTRY(gemm_r16_q6_K, q6k_r16, struct gl_block_q6_K_r16)

void gl_kernels__register_avx2_r16(struct gl_kernels *k)
{
    k->gemm_r16[GL_TYPE_Q4_K] = gemm_r16_q4_K;
    k->gemm_r16[GL_TYPE_Q6_K] = gemm_r16_q6_K;
}
