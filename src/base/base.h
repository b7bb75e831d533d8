// SPDX-License-Identifier: MIT
// base: status codes, error records, assertions, logging and allocation hooks shared by every
// module. Invariant violations abort with file:line (GL_ASSERT); input errors return a
// gl_status and fill a caller-provided struct gl_err with a message that says what, where, why.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum gl_status {
    GL_OK = 0,
    GL_E_INVAL,       // bad argument or request
    GL_E_FORMAT,      // malformed file or data
    GL_E_IO,          // open/read/mmap failed
    GL_E_NOMEM,       // allocation failed
    GL_E_LIMIT,       // a size or count over a named limit
    GL_E_UNSUPPORTED, // well-formed but not supported (architecture, tensor type)
    GL_E_AGAIN,
    GL_E_CANCELLED,
    GL_E_INTERNAL,
} gl_status;

#define GL_ERR_MSG_CAP 512

// Error detail, filled at the failure site. Owned by the caller; may be NULL where a function
// takes it, in which case only the status is returned.
struct gl_err {
    gl_status code;
    char msg[GL_ERR_MSG_CAP];
};

#if defined(__GNUC__)
#define GL_MUST_USE     __attribute__((warn_unused_result))
#define GL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define GL_NORETURN     __attribute__((noreturn))
#define GL_LIKELY(x)    __builtin_expect(!!(x), 1)
#define GL_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#else
#define GL_MUST_USE
#define GL_PRINTF(a, b)
#define GL_NORETURN
#define GL_LIKELY(x)   (x)
#define GL_UNLIKELY(x) (x)
#endif

// Sets err (if non-NULL) to code and a formatted message; returns code so callers can write
// `return gl_err_set(err, GL_E_FORMAT, "gguf: ...")`.
gl_status gl_err_set(struct gl_err *err, gl_status code, const char *fmt, ...) GL_PRINTF(3, 4);
const char *gl_status_name(gl_status s);

GL_NORETURN void gl_panic(const char *file, int line, const char *fmt, ...) GL_PRINTF(3, 4);

// Always compiled in: a broken invariant is a bug, never an input error.
#define GL_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (GL_UNLIKELY(!(cond)))                                                                  \
            gl_panic(__FILE__, __LINE__, "assertion failed: %s", #cond);                           \
    } while (0)
#define GL_ASSERT_MSG(cond, ...)                                                                   \
    do {                                                                                           \
        if (GL_UNLIKELY(!(cond)))                                                                  \
            gl_panic(__FILE__, __LINE__, __VA_ARGS__);                                             \
    } while (0)

// Logging to stderr. Level from GLINT_LOG=error|warn|info|debug (default info).
enum gl_log_level { GL_LOG_ERROR, GL_LOG_WARN, GL_LOG_INFO, GL_LOG_DEBUG };
void gl_log(enum gl_log_level lvl, const char *fmt, ...) GL_PRINTF(2, 3);
#define GL_LOGE(...) gl_log(GL_LOG_ERROR, __VA_ARGS__)
#define GL_LOGW(...) gl_log(GL_LOG_WARN, __VA_ARGS__)
#define GL_LOGI(...) gl_log(GL_LOG_INFO, __VA_ARGS__)
#define GL_LOGD(...) gl_log(GL_LOG_DEBUG, __VA_ARGS__)

// Allocation: these return NULL on failure (callers turn that into GL_E_NOMEM); the
// *_or_die forms are for start-up-sized internal buffers only, never on request paths.
void *gl_malloc(size_t n);
void *gl_calloc(size_t n, size_t size);
void *gl_realloc(void *p, size_t n);
void gl_free(void *p);
// Allocation meters: the bytes a component really holds (malloc's usable sizes, so rounding and
// reallocation slack count), for caches charged in bytes and for per-request allocation ceilings.
// A thread arms at most one meter at a time (gl_alloc_meter_swap); while one is armed, every
// gl_malloc / gl_calloc / gl_realloc / gl_strdup / gl_malloc_aligned on the thread adds the
// block's usable size to it and every gl_free / gl_free_aligned subtracts it. Contract: a block
// is freed under the meter it was allocated under (or both times under none); memory owned by
// something else (thread scratch, process-wide tables) is allocated with the meter swapped out.
// A meter is plain data: whoever arms it serialises its users (the grammar lock for grammars).
struct gl_alloc_meter {
    int64_t live; // bytes held now
    int64_t peak; // most held at once since the last reset of peak
};
// Arms m (NULL: none) on the calling thread; returns the meter armed before, to restore.
struct gl_alloc_meter *gl_alloc_meter_swap(struct gl_alloc_meter *m);
// Adds n (may be negative) to the armed meter, if any: for memory that is allocated unmetered
// and then owned by the meter's owner (a table that may turn out shared or private).
void gl_alloc_meter_charge(int64_t n);
// Usable size of a block from gl_malloc and friends (0 for NULL).
size_t gl_alloc_size(const void *p);
// Memory that comes back. Every gl_free (and gl_realloc that moves, and gl_free_unmetered)
// counts the block's usable size as freed; gl_mem_release(): once at least GL_TRIM_MIN_BYTES
// have been freed since the last trim, and at most once a second, gives free heap pages back to
// the kernel (glibc malloc_trim, which walks every arena: milliseconds on a big heap, so call it
// holding no lock). Returns 1 when it trimmed. Why: free() returns memory only from the top of a
// heap, so the pages of evicted cache entries and of one request's large transient data (a 2 MB
// schema parses into ~30 MB of JSON nodes, twice, beside its compile scratch), spread over the
// many arenas of a thread-per-connection server, otherwise stay in RSS (docs/SECURITY.md has the
// measurements). Call it after a request lets go of its data and periodically (the server's guard
// thread does, so a trim held back by the once-a-second limit still happens).
// GLINT_MALLOC_TRIM=0 turns it off (to measure the difference). gl_mem_freed_pending(): bytes
// freed since the last trim (each thread holds back under 64 KiB of its count).
#define GL_TRIM_MIN_BYTES ((int64_t)16 << 20)
int gl_mem_release(void);
int64_t gl_mem_freed_pending(void);
// malloc / free for other libraries' allocation hooks (jansson's json_set_alloc_funcs): never
// charged to an armed meter (the library's objects are not the meter owner's), but their frees
// count for gl_mem_release like gl_free's.
void *gl_malloc_unmetered(size_t n);
void gl_free_unmetered(void *p);
// 64-byte aligned (SIMD rows, KV). Free with gl_free_aligned.
void *gl_malloc_aligned(size_t n);
void gl_free_aligned(void *p);
// Large long-lived buffers (repacked weights): anonymous memory in whole 2 MiB units starting on
// a 2 MiB boundary. Transparent huge pages only when GLINT_HUGEPAGES=1: on this project's VMs a
// huge-page first touch ran at 0.1-0.6 GB/s against 1-2 GB/s for 4 KiB pages (the kernel zeroes
// 2 MiB per fault), which would add a minute to loading a 17 GB model. NULL on failure. Free with
// gl_free_huge(p, n) and the same n.
void *gl_alloc_huge(size_t n);
void gl_free_huge(void *p, size_t n);
char *gl_strdup(const char *s);

// Monotonic clock in microseconds.
int64_t gl_time_us(void);

// Checked size arithmetic: returns 0 and leaves *out untouched on overflow.
// FNV-1a over n bytes: a short, well-spread key hash for in-process tables (not stable across
// versions; never written anywhere).
// Decodes padded standard base64 (RFC 4648 §4, no whitespace) s[0..n) into dst, which has room
// for n / 4 * 3 bytes. Returns the byte count, or -1 with *bad = the offending offset (n when n
// is 0 or not a multiple of 4).
long gl_b64_decode(const uint8_t *s, size_t n, uint8_t *dst, size_t *bad);
// SipHash-2-4 (Aumasson & Bernstein, 2012): a keyed 64-bit PRF. Content keys that clients can
// choose inputs for (the prefix cache's block keys, image digests) use it with gl_hash_key(), so
// nobody without the key can compute a key offline, let alone craft a second input with the key
// of someone else's prompt or image (cache poisoning). Incremental: init, update*, final.
struct gl_siphash {
    uint64_t v[4];
    uint64_t tail; // pending bytes, little-endian
    size_t n;      // bytes absorbed so far
};
void gl_siphash_init(struct gl_siphash *h, const uint8_t key[16]);
void gl_siphash_update(struct gl_siphash *h, const void *data, size_t n);
uint64_t gl_siphash_final(struct gl_siphash *h);
// A random 16-byte key drawn once per process (getrandom); aborts if the kernel has none.
const uint8_t *gl_hash_key(void);

// Compares a presented credential given[0..n) with secret[0..secret_len) in constant time: 1 when
// equal. The work (loads, their addresses, branches) depends only on n, which the presenter
// already knows: no exit at the first differing byte, and neither the secret's bytes nor its
// length change the timing (an API key cannot be guessed byte by byte, nor its length probed).
int gl_secret_equal(const void *given, size_t n, const void *secret, size_t secret_len);

static inline uint64_t gl_fnv1a(const void *p, size_t n)
{
    const uint8_t *s = (const uint8_t *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static inline int gl_mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}
static inline int gl_add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a)
        return 0;
    *out = a + b;
    return 1;
}

// Writes the UTF-8 encoding of code point cp (<= 0x10FFFF; surrogates are the caller's business)
// to out and returns its length, 1..4.
int gl_utf8_encode(uint32_t cp, uint8_t out[4]);

// fp16 / bf16 conversions (IEEE binary16 with round-to-nearest-even; bf16 by RNE truncation).
float gl_fp16_to_f32(uint16_t h);
uint16_t gl_f32_to_fp16(float f);
float gl_bf16_to_f32(uint16_t h);
uint16_t gl_f32_to_bf16(float f);
