// SPDX-License-Identifier: MIT
#include "base.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

gl_status gl_err_set(struct gl_err *err, gl_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *gl_status_name(gl_status s)
{
    switch (s) {
    case GL_OK:
        return "ok";
    case GL_E_INVAL:
        return "invalid argument";
    case GL_E_FORMAT:
        return "format error";
    case GL_E_IO:
        return "i/o error";
    case GL_E_NOMEM:
        return "out of memory";
    case GL_E_LIMIT:
        return "limit exceeded";
    case GL_E_UNSUPPORTED:
        return "unsupported";
    case GL_E_AGAIN:
        return "try again";
    case GL_E_CANCELLED:
        return "cancelled";
    case GL_E_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

void gl_panic(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "glint: fatal: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

static int log_threshold(void)
{
    static int lvl = -1;
    if (lvl < 0) {
        const char *e = getenv("GLINT_LOG");
        lvl = GL_LOG_INFO;
        if (e) {
            if (!strcmp(e, "error"))
                lvl = GL_LOG_ERROR;
            else if (!strcmp(e, "warn"))
                lvl = GL_LOG_WARN;
            else if (!strcmp(e, "debug"))
                lvl = GL_LOG_DEBUG;
        }
    }
    return lvl;
}

void gl_log(enum gl_log_level lvl, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if ((int)lvl > log_threshold())
        return;
    va_list ap;
    fprintf(stderr, "glint %s: ", names[lvl]);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

// The armed meter of this thread (base.h).
static _Thread_local struct gl_alloc_meter *t_meter;

struct gl_alloc_meter *gl_alloc_meter_swap(struct gl_alloc_meter *m)
{
    struct gl_alloc_meter *old = t_meter;
    t_meter = m;
    return old;
}

void gl_alloc_meter_charge(int64_t n)
{
    struct gl_alloc_meter *m = t_meter;
    if (m) {
        m->live += n;
        if (m->live > m->peak)
            m->peak = m->live;
    }
}

size_t gl_alloc_size(const void *p)
{
    return p ? malloc_usable_size((void *)(uintptr_t)p) : 0;
}

// Freed bytes not yet trimmed (gl_mem_release). Each thread sums its frees in t_freed and adds
// them to the shared count once they reach FREED_FLUSH_BYTES, so a free costs a thread-local
// add, not an atomic one; what a thread holds back is under 64 KiB.
#define FREED_FLUSH_BYTES ((int64_t)64 << 10)
static _Atomic int64_t g_freed_pending;
static _Thread_local int64_t t_freed;
static _Atomic int64_t g_last_trim_us;

static inline void count_freed(size_t n)
{
    t_freed += (int64_t)n;
    if (t_freed >= FREED_FLUSH_BYTES) {
        atomic_fetch_add_explicit(&g_freed_pending, t_freed, memory_order_relaxed);
        t_freed = 0;
    }
}

static inline void *metered(void *p)
{
    if (t_meter && p)
        gl_alloc_meter_charge((int64_t)malloc_usable_size(p));
    return p;
}

void *gl_malloc(size_t n)
{
    return metered(malloc(n ? n : 1));
}
void *gl_calloc(size_t n, size_t size)
{
    return metered(calloc(n ? n : 1, size ? size : 1));
}
void *gl_realloc(void *p, size_t n)
{
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = realloc(p, n ? n : 1);
    if (!q)
        return NULL; // p is untouched and still charged
    if (q != p)
        count_freed(old); // moved: the old block went back to the heap
    if (!t_meter)
        return q;
    t_meter->live -= (int64_t)old;
    return metered(q);
}
void gl_free(void *p)
{
    if (!p)
        return;
    size_t n = malloc_usable_size(p);
    if (t_meter)
        t_meter->live -= (int64_t)n;
    count_freed(n);
    free(p);
}

void *gl_malloc_unmetered(size_t n)
{
    return malloc(n ? n : 1);
}
void gl_free_unmetered(void *p)
{
    if (p)
        count_freed(malloc_usable_size(p));
    free(p);
}

void *gl_malloc_aligned(size_t n)
{
    void *p = NULL;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0)
        return NULL;
    return metered(p);
}
void gl_free_aligned(void *p)
{
    gl_free(p);
}

int64_t gl_mem_freed_pending(void)
{
    return atomic_load_explicit(&g_freed_pending, memory_order_relaxed);
}

int gl_mem_release(void)
{
    static _Atomic int off = -1; // GLINT_MALLOC_TRIM=0: never trim (to measure what it gives)
    if (off < 0) {
        const char *e = getenv("GLINT_MALLOC_TRIM");
        off = e && !strcmp(e, "0");
    }
    if (off || atomic_load_explicit(&g_freed_pending, memory_order_relaxed) < GL_TRIM_MIN_BYTES)
        return 0;
    int64_t now = gl_time_us(), last = atomic_load(&g_last_trim_us);
    // One caller per second wins the trim; the others return at once.
    if ((last != 0 && now - last < 1000000) ||
        !atomic_compare_exchange_strong(&g_last_trim_us, &last, now))
        return 0;
    int64_t pending = atomic_exchange_explicit(&g_freed_pending, 0, memory_order_relaxed);
    malloc_trim(0);
    GL_LOGD("malloc_trim after %lld bytes freed: %lld us", (long long)pending,
            (long long)(gl_time_us() - now));
    return 1;
}

#define HUGE_UNIT ((size_t)2 << 20)

void *gl_alloc_huge(size_t n)
{
    if (n == 0 || n > SIZE_MAX - 2 * HUGE_UNIT)
        return NULL;
    size_t len = (n + HUGE_UNIT - 1) & ~(HUGE_UNIT - 1);
    // Over-map by one unit and trim so the buffer starts on a 2 MiB boundary (THP needs aligned
    // 2 MiB ranges; mmap only promises 4 KiB).
    uint8_t *raw =
        mmap(NULL, len + HUGE_UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_UNIT - 1) & ~(uintptr_t)(HUGE_UNIT - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + HUGE_UNIT > p)
        munmap(p + len, (size_t)(raw + HUGE_UNIT - p));
#ifdef MADV_HUGEPAGE
    const char *e = getenv("GLINT_HUGEPAGES");
    if (e != NULL && strcmp(e, "1") == 0)
        (void)madvise(p, len, MADV_HUGEPAGE); // advisory: 4 KiB pages still work
#endif
    return p;
}

void gl_free_huge(void *p, size_t n)
{
    if (p != NULL)
        munmap(p, (n + HUGE_UNIT - 1) & ~(HUGE_UNIT - 1));
}

char *gl_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = gl_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int64_t gl_time_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

float gl_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal: normalise
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                exp--;
            }
            mant &= 0x3ff;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gl_f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t mant = x & 0x7fffff;
    if (exp == 255)
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { // subnormal or zero in fp16
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = 1u << (shift - 1);
        uint32_t r = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (uint32_t)(e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++; // may carry into the exponent, which is the correct rounding
    return (uint16_t)(sign | r);
}

float gl_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gl_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 64); // quiet NaN
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

int gl_utf8_encode(uint32_t cp, uint8_t out[4])
{
    GL_ASSERT(cp <= 0x10FFFF);
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

// ---- base64 ----

static int b64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long gl_b64_decode(const uint8_t *s, size_t n, uint8_t *dst, size_t *bad)
{
    if (n == 0 || n % 4 != 0) {
        *bad = n;
        return -1;
    }
    size_t pad = s[n - 1] != '=' ? 0 : s[n - 2] == '=' ? 2 : 1;
    long o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = (i + k >= n - pad) ? 0 : b64_value(s[i + k]);
            if (d < 0) {
                *bad = i + k;
                return -1;
            }
            v = v << 6 | (uint32_t)d;
        }
        dst[o++] = (uint8_t)(v >> 16);
        if (i + 4 < n || pad < 2)
            dst[o++] = (uint8_t)(v >> 8);
        if (i + 4 < n || pad < 1)
            dst[o++] = (uint8_t)v;
    }
    return o;
}

int gl_secret_equal(const void *given, size_t n, const void *secret, size_t secret_len)
{
    // volatile: the compiler may not turn the loop into memcmp or stop early once diff != 0.
    const volatile uint8_t *g = given, *s = secret;
    volatile size_t diff = n ^ secret_len;
    if (secret_len == 0) // nothing to read from (and nothing to leak)
        return n == 0;
    for (size_t i = 0; i < n; i++) {
        // inside: all ones while i < secret_len, else 0; past the secret, byte 0 is read, so the
        // addresses touched do not show where the secret ends (diff already records the
        // length mismatch).
        size_t inside = (size_t)0 - (size_t)(i < secret_len);
        diff |= (size_t)(g[i] ^ s[i & inside]);
    }
    return diff == 0;
}

#define ROTL64(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t *v)
{
    v[0] += v[1];
    v[1] = ROTL64(v[1], 13) ^ v[0];
    v[0] = ROTL64(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL64(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = ROTL64(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = ROTL64(v[1], 17) ^ v[2];
    v[2] = ROTL64(v[2], 32);
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

static void sip_block(struct gl_siphash *h, uint64_t m)
{
    h->v[3] ^= m;
    sip_round(h->v);
    sip_round(h->v);
    h->v[0] ^= m;
}

void gl_siphash_init(struct gl_siphash *h, const uint8_t key[16])
{
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    h->v[0] = k0 ^ 0x736f6d6570736575ull;
    h->v[1] = k1 ^ 0x646f72616e646f6dull;
    h->v[2] = k0 ^ 0x6c7967656e657261ull;
    h->v[3] = k1 ^ 0x7465646279746573ull;
    h->tail = 0;
    h->n = 0;
}

void gl_siphash_update(struct gl_siphash *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t i = 0;
    while (i < n && (h->n & 7)) { // finish a partial word
        h->tail |= (uint64_t)p[i++] << (8 * (h->n & 7));
        if ((++h->n & 7) == 0) {
            sip_block(h, h->tail);
            h->tail = 0;
        }
    }
    for (; i + 8 <= n; i += 8, h->n += 8)
        sip_block(h, load_le64(p + i));
    for (; i < n; i++, h->n++)
        h->tail |= (uint64_t)p[i] << (8 * (h->n & 7));
}

uint64_t gl_siphash_final(struct gl_siphash *h)
{
    sip_block(h, h->tail | (uint64_t)(h->n & 0xff) << 56);
    h->v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sip_round(h->v);
    return h->v[0] ^ h->v[1] ^ h->v[2] ^ h->v[3];
}

static uint8_t g_hash_key[16];
static pthread_once_t g_hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void)
{
    size_t got = 0;
    while (got < sizeof g_hash_key) {
        ssize_t r = getrandom(g_hash_key + got, sizeof g_hash_key - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        GL_ASSERT_MSG(r > 0, "getrandom failed: errno %d", errno);
        got += (size_t)r;
    }
}

const uint8_t *gl_hash_key(void)
{
    pthread_once(&g_hash_key_once, hash_key_init);
    return g_hash_key;
}
