// SPDX-License-Identifier: MIT
// A minimal test harness: TEST(name) { ... CHECK(cond); } and RUN_TESTS(test_a, test_b, ...) in
// main. Each test prints "ok"/"not ok" (TAP-like); the program ends with "N passed, N failed"
// and exits non-zero if any failed. CHECK records a failure and continues; REQUIRE returns.
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int t_failures_in_test;

// Loop counts by build: under AddressSanitizer each 200k-token mask, and each reference mask or
// search a test holds it to, costs several times more, and the sanitiser looks for memory errors,
// which the first walks of every case already take; the Release build runs the full counts (the
// two lanes of tests/run_all.sh). An integer constant expression: usable in enums and #if.
#if defined(__SANITIZE_ADDRESS__)
#define T_SANITIZED 1
#else
#define T_SANITIZED 0
#endif
#define T_BY_BUILD(release, sanitized) (T_SANITIZED ? (sanitized) : (release))
#define TEST(name)                     static void name(void)
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);             \
            t_failures_in_test++;                                                                  \
        }                                                                                          \
    } while (0)
#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            t_failures_in_test++;                                                                  \
        }                                                                                          \
    } while (0)
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);           \
            t_failures_in_test++;                                                                  \
            return;                                                                                \
        }                                                                                          \
    } while (0)

// The whole file at path in a malloc'd buffer (caller frees with free), *n its size; NULL (and
// *n = 0) when it cannot be read, is empty or reads short.
static inline void *t_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    void *p = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = malloc((size_t)len)) && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    if (f)
        fclose(f);
    *n = p ? (size_t)len : 0;
    return p;
}

// The real vocabulary (Llama 4's tiktoken ranks): $GLINT_VOCAB, else shared/ beside the
// repository (tests run from its root; a missing file is reported by the loader).
static inline const char *t_vocab_path(void)
{
    const char *env = getenv("GLINT_VOCAB");
    if (env && env[0])
        return env;
    return "../shared/data/tokenizer/llama4-tokenizer.model";
}

typedef void (*t_test_fn)(void);
static int t_run(const char *names, t_test_fn *fns, int n)
{
    int passed = 0, failed = 0;
    const char *p = names;
    // GLINT_TEST_ONLY=name runs that test alone (by hand: profiling, timing one test).
    const char *only = getenv("GLINT_TEST_ONLY");
    for (int i = 0; i < n; i++) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (only && only[0] &&
            (strlen(only) != (size_t)(e - p) || strncmp(only, p, (size_t)(e - p)))) {
            p = e;
            continue;
        }
        t_failures_in_test = 0;
        // Each test's wall time goes on its line: the suite's budget (tests/run_all.sh) is spent
        // per test, and a sanitised build multiplies some far more than others.
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        fns[i]();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("%s %d - %.*s (%.2f s)\n", t_failures_in_test ? "not ok" : "ok", i + 1, (int)(e - p),
               p, sec);
        fflush(stdout);
        if (t_failures_in_test)
            failed++;
        else
            passed++;
        p = e;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#define RUN_TESTS(...)                                                                             \
    do {                                                                                           \
        t_test_fn fns_[] = {__VA_ARGS__};                                                          \
        return t_run(#__VA_ARGS__, fns_, (int)(sizeof fns_ / sizeof fns_[0]));                     \
    } while (0)
