// SPDX-License-Identifier: MIT
// bw: memory-bandwidth probe for bench/bench.sh. Sums a 2 GiB float buffer (read-only stream,
// 16 floats per AVX-512 load) with N OpenMP threads, 5 passes, and prints the best and mean
// GB/s (1 GB = 1e9 bytes). Meant to be built by bench.sh with `gcc -O2 -march=native -fopenmp`;
// under the project's CMake build (baseline ISA, no OpenMP) it still compiles, as a portable
// single-threaded loop, so the glob over bench/*.c stays warning-free.
// usage: bw [threads] [GiB]    defaults: 2 threads, 2 GiB
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __AVX512F__
#include <immintrin.h>
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Sum of n floats (n a multiple of 64); four accumulators keep several loads in flight.
static float sum_range(const float *p, size_t n)
{
#ifdef __AVX512F__
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#else
    float a[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += p[i + (size_t)k];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
#endif
}

// One pass over the buffer split into equal contiguous chunks, one per thread.
static float pass(const float *buf, size_t n, int threads)
{
    float total = 0.0f;
    size_t chunk = n / (size_t)threads / 64 * 64;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
#endif
    for (int t = 0; t < threads; t++)
        total += sum_range(buf + (size_t)t * chunk, chunk);
    return total;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    double gib = argc > 2 ? atof(argv[2]) : 2.0;
    if (threads < 1 || threads > 256 || gib <= 0.0 || gib > 64.0) {
        fprintf(stderr, "usage: bw [threads 1..256] [GiB]\n");
        return 2;
    }
#ifndef _OPENMP
    threads = 1; // no OpenMP in this build
#endif
    size_t bytes = (size_t)(gib * 1073741824.0) / 4096 * 4096;
    size_t n = bytes / sizeof(float);
    float *buf = aligned_alloc(4096, bytes);
    if (!buf) {
        fprintf(stderr, "bw: cannot allocate %zu bytes\n", bytes);
        return 1;
    }
    // first touch from the threads that read it later, so pages are really backed
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int t = 0; t < threads; t++) {
        size_t chunk = n / (size_t)threads;
        for (size_t i = (size_t)t * chunk; i < (size_t)(t + 1) * chunk; i++)
            buf[i] = (float)(i & 7) * 0.125f;
    }
    double best = 0.0, mean = 0.0;
    float sink = 0.0f;
    const int passes = 5;
    for (int r = 0; r < passes; r++) {
        double t0 = now_s();
        sink += pass(buf, n, threads);
        double gbps =
            (double)(n / (size_t)threads / 64 * 64 * (size_t)threads) * 4.0 / (now_s() - t0) / 1e9;
        best = gbps > best ? gbps : best;
        mean += gbps / passes;
    }
    printf("bw: read-only sum, %.2f GiB, %d threads, %d passes: best %.1f GB/s mean %.1f GB/s "
           "(checksum %g)\n",
           (double)bytes / 1073741824.0, threads, passes, best, mean, (double)sink);
    free(buf);
    return 0;
}
