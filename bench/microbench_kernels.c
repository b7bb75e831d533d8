// SPDX-License-Identifier: MIT
// microbench_kernels: single-thread GB/s of weight bytes streamed through each ISA's vec_dot
// (decode shape: one activation row against a ~128 MiB weight matrix of 6656-wide rows, far
// larger than cache), next to a plain AVX2 read-bandwidth probe for the same buffer. Not part of
// the test suite. An optional argument sets the matrix size in KiB (e.g. 512: cache-resident,
// which measures the kernel rather than DRAM). Build after the library (one line):
//   gcc -std=c11 -O2 -Isrc -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
//       bench/microbench_kernels.c build/libglint_core.a -lm -lpthread -o /tmp/microbench_kernels
#include "kernels/kernels.h"

#include "base/base.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_IN 6656
#define REPS 5

// Thread CPU time: the machine is shared, so wall time would also count time spent descheduled.
static int64_t cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

// Random block bytes with small finite fp16 scales (the speed of a block is data-independent).
static void fill_weights(enum gl_type t, unsigned char *w, size_t bytes)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t r = next();
        memcpy(w + i, &r, 8);
    }
    const struct gl_type_traits *tt = gl_type_traits_of(t);
    uint16_t d = gl_f32_to_fp16(0.01f);
    size_t off = t == GL_TYPE_Q6_K ? offsetof(struct gl_block_q6_K, d) : 0;
    for (size_t b = 0; b + tt->type_size <= bytes; b += tt->type_size) {
        memcpy(w + b + off, &d, 2);
        if (t == GL_TYPE_Q4_K)
            memcpy(w + b + 2, &d, 2);
    }
}

__attribute__((target("avx2"))) static double read_gbps(const unsigned char *p, size_t bytes,
                                                        int reps)
{
    double best = 0;
    int passes = bytes < ((size_t)64 << 20) ? (int)(((size_t)64 << 20) / bytes) : 1;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = cpu_us();
        __m256i acc = _mm256_setzero_si256();
        for (size_t i = 0; i + 128 <= bytes * (size_t)passes; i += 128) {
            const unsigned char *q = p + (i & (bytes - 1)); // bytes: a power of two
            __m256i a = _mm256_loadu_si256((const __m256i *)q);
            __m256i b = _mm256_loadu_si256((const __m256i *)(q + 32));
            __m256i c = _mm256_loadu_si256((const __m256i *)(q + 64));
            __m256i d = _mm256_loadu_si256((const __m256i *)(q + 96));
            acc = _mm256_add_epi64(
                acc, _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d)));
        }
        int64_t dt = cpu_us() - t0;
        volatile long long sink = _mm256_extract_epi64(acc, 0);
        (void)sink;
        double g = (double)bytes * passes / ((double)dt * 1e3);
        best = g > best ? g : best;
    }
    return best;
}

static double dot_gbps(const struct gl_kernels *k, enum gl_type t, const unsigned char *w,
                       size_t row_bytes, int64_t rows, const void *act, int reps)
{
    double best = 0;
    volatile float sink = 0;
    size_t bytes = row_bytes * (size_t)rows;
    int passes = bytes < ((size_t)64 << 20) ? (int)(((size_t)64 << 20) / bytes) : 1;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = cpu_us();
        float total = 0;
        for (int64_t i = 0; i < rows * passes; i++) {
            float s;
            k->vec_dot[t](N_IN, &s, w + (size_t)(i % rows) * row_bytes, act);
            total += s;
        }
        int64_t dt = cpu_us() - t0;
        sink = total;
        double g = (double)bytes * passes / ((double)dt * 1e3);
        best = g > best ? g : best;
    }
    (void)sink;
    return best;
}

int main(int argc, char **argv)
{
    size_t matrix_bytes = argc > 1 ? (size_t)atol(argv[1]) << 10 : (size_t)128 << 20;
    int reps = REPS;
    const enum gl_type types[] = {GL_TYPE_Q4_K, GL_TYPE_Q6_K, GL_TYPE_Q8_0, GL_TYPE_Q4_0,
                                  GL_TYPE_Q5_K, GL_TYPE_F16,  GL_TYPE_BF16};
    const char *isas[] = {"ref", "avx2", "avx512"};
    float *x = gl_malloc(N_IN * sizeof(float));
    for (int i = 0; i < N_IN; i++)
        x[i] = (float)((int64_t)(next() % 2001) - 1000) / 1000.0f;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        enum gl_type t = types[ti];
        size_t row_bytes = gl_type_row_size(t, N_IN);
        int64_t rows = (int64_t)(matrix_bytes / row_bytes);
        unsigned char *w = gl_malloc_aligned(matrix_bytes);
        enum gl_type at = gl_type_vec_dot_type(t);
        void *act = gl_malloc_aligned(gl_type_row_size(at, N_IN));
        if (!w || !act)
            return 1;
        fill_weights(t, w, matrix_bytes);
        gl_quantize_row_ref(at, x, act, N_IN);
        printf("%-5s %6.1f MiB  read-probe %5.1f GB/s", gl_type_traits_of(t)->name,
               (double)(row_bytes * (size_t)rows) / (1 << 20), read_gbps(w, matrix_bytes, reps));
        for (int j = getenv("NOREF") ? 1 : 0; j < 3; j++) {
            struct gl_kernels k;
            if (!gl_kernels_init_isa(&k, isas[j]))
                continue;
            double g = dot_gbps(&k, t, w, row_bytes, rows, act, j == 0 ? 1 : reps);
            printf("  %s %5.2f GB/s", isas[j], g);
        }
        printf("\n");
        gl_free_aligned(w);
        gl_free_aligned(act);
    }
    gl_free(x);
    return 0;
}
