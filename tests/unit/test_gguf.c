// SPDX-License-Identifier: MIT
// gguf tests: writer -> reader round trips (every value type, arrays, string arrays, tensors with
// alignment, header-only files, mmap and heap reads) and hostile files, each of which must be
// refused with a status and a message that names the offending key or tensor. Hostile files are
// opened from an exact-size heap copy (so a sanitizer build catches any over-read) and, for the
// crafted cases, from a temporary file through mmap as well. Temporary files live in $TMPDIR.
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- helpers ----

static void tmp_path(char *buf, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, cap, "%s/glint-test-gguf-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(buf);
    if (fd >= 0)
        close(fd);
}

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n;
}

static int contains(const char *hay, const char *needle)
{
    return needle == NULL || strstr(hay, needle) != NULL;
}

// A byte builder for hand-made (mostly broken) files.
struct bb {
    uint8_t p[8192];
    size_t n;
};

static void bb_le(struct bb *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b->p[b->n++] = (uint8_t)(v >> (8 * i));
}

static void bb_str(struct bb *b, const char *s)
{
    size_t n = strlen(s);
    bb_le(b, n, 8);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void bb_header(struct bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    memcpy(b->p, "GGUF", 4);
    b->n = 4;
    bb_le(b, version, 4);
    bb_le(b, n_tensors, 8);
    bb_le(b, n_kv, 8);
}

static void bb_kv_u32(struct bb *b, const char *key, uint32_t v)
{
    bb_str(b, key);
    bb_le(b, GL_GGUF_U32, 4);
    bb_le(b, v, 4);
}

static void bb_tensor(struct bb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                      uint32_t type, uint64_t offset)
{
    bb_str(b, name);
    bb_le(b, n_dims, 4);
    for (uint32_t d = 0; d < n_dims; d++)
        bb_le(b, ne[d], 8);
    bb_le(b, type, 4);
    bb_le(b, offset, 8);
}

static void bb_pad_data(struct bb *b, uint32_t align, size_t data_bytes)
{
    while (b->n % align)
        b->p[b->n++] = 0;
    for (size_t i = 0; i < data_bytes; i++)
        b->p[b->n++] = (uint8_t)i;
}

// Opens n bytes from an exact-size heap copy; on success *keep owns the copy.
static gl_status open_copy(const void *bytes, size_t n, int allow_no_data, struct gl_gguf **g,
                           void **keep, struct gl_err *err)
{
    struct gl_gguf_open_params prm = {.use_mmap = 0, .allow_no_data = allow_no_data};
    void *copy = malloc(n ? n : 1);
    memcpy(copy, bytes, n);
    gl_status st = gl_gguf_open_memory(g, copy, n, &prm, err);
    if (st != GL_OK) {
        free(copy);
        copy = NULL;
    }
    *keep = copy;
    return st;
}

// The bytes must be refused from memory and from a file (mmap), with a message containing both
// needles (NULL = any).
static int expect_refused(const struct bb *b, const char *n1, const char *n2)
{
    struct gl_gguf *g = NULL;
    struct gl_err err = {0};
    void *keep;
    int ok = 1;
    gl_status st = open_copy(b->p, b->n, 0, &g, &keep, &err);
    if (st == GL_OK || g != NULL || !contains(err.msg, "gguf: ") || !contains(err.msg, n1) ||
        !contains(err.msg, n2)) {
        fprintf(stderr, "  memory: status %d, message: %s\n", (int)st, err.msg);
        ok = 0;
    }
    gl_gguf_close(g);
    free(keep);

    char path[256];
    tmp_path(path, sizeof path);
    struct gl_gguf_open_params prm = {.use_mmap = 1, .allow_no_data = 0};
    memset(&err, 0, sizeof err);
    g = NULL;
    if (!write_file(path, b->p, b->n))
        ok = 0;
    st = gl_gguf_open(&g, path, &prm, &err);
    if (st == GL_OK || !contains(err.msg, path) || !contains(err.msg, n1) ||
        !contains(err.msg, n2)) {
        fprintf(stderr, "  file: status %d, message: %s\n", (int)st, err.msg);
        ok = 0;
    }
    gl_gguf_close(g);
    unlink(path);
    return ok;
}

static int expect_accepted(const struct bb *b)
{
    struct gl_gguf *g = NULL;
    struct gl_err err = {0};
    void *keep;
    gl_status st = open_copy(b->p, b->n, 0, &g, &keep, &err);
    if (st != GL_OK)
        fprintf(stderr, "  unexpected refusal: %s\n", err.msg);
    gl_gguf_close(g);
    free(keep);
    return st == GL_OK;
}

// ---- the reference file written by the writer ----

#define N_REF_TENSORS 4
static const char *const ref_names[N_REF_TENSORS] = {"tok.w", "blk.0.q8", "blk.0.q4k", "f16.3d"};
static const int64_t ref_ne[N_REF_TENSORS][4] = {
    {7, 3, 1, 1}, {64, 2, 1, 1}, {256, 1, 1, 1}, {5, 2, 3, 1}};
static const uint32_t ref_dims[N_REF_TENSORS] = {2, 2, 1, 3};
static const uint32_t ref_types[N_REF_TENSORS] = {GL_TYPE_F32, GL_TYPE_Q8_0, GL_TYPE_Q4_K,
                                                  GL_TYPE_F16};

static uint8_t pattern(int64_t ti, uint64_t byte)
{
    return (uint8_t)(ti * 31 + byte * 7 + (byte >> 8));
}

struct fill_ctx {
    int calls;
    int fail_at; // call number that fails (0 = never)
};

static gl_status fill_pattern(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                              struct gl_err *err)
{
    struct fill_ctx *fc = ctx;
    if (++fc->calls == fc->fail_at)
        return gl_err_set(err, GL_E_CANCELLED, "test fill refused tensor %lld", (long long)ti);
    size_t row = gl_type_row_size(ref_types[ti], ref_ne[ti][0]);
    for (size_t i = 0; i < (size_t)n_rows * row; i++)
        ((uint8_t *)dst)[i] = pattern(ti, (uint64_t)row0 * row + i);
    return GL_OK;
}

static const uint8_t arr_u8[3] = {0, 200, 255};
static const int8_t arr_i8[3] = {-128, 0, 127};
static const uint16_t arr_u16[2] = {1, 65535};
static const int16_t arr_i16[2] = {-32768, 32767};
static const uint32_t arr_u32[3] = {0, 1, 4000000000u};
static const int32_t arr_i32[3] = {INT32_MIN, -1, INT32_MAX};
static const float arr_f32[3] = {1.5f, -0.25f, 3e38f};
static const uint8_t arr_bool[4] = {1, 0, 0, 7}; // 7 is stored as true (1)
static const uint64_t arr_u64[2] = {0, UINT64_MAX};
static const int64_t arr_i64[2] = {INT64_MIN, INT64_MAX};
static const double arr_f64[2] = {0.19611613513818404, -1e300};
static const char *const arr_strs[3] = {"hello", "", "w\0rld"};
static const uint64_t arr_lens[3] = {5, 0, 5};

static gl_status build_ref(const char *path, int header_only, uint32_t alignment,
                           struct fill_ctx *fc, struct gl_err *err)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    gl_status st = GL_OK;
#define ADD(call)                                                                                  \
    if (st == GL_OK)                                                                               \
    st = (call)
    ADD(gl_gguf_writer_add_str(w, "general.architecture", "muse-glimmer"));
    if (alignment)
        ADD(gl_gguf_writer_add_u32(w, "general.alignment", alignment));
    ADD(gl_gguf_writer_add_u32(w, "k.u32", 4000000000u));
    ADD(gl_gguf_writer_add_i32(w, "k.i32", -7));
    ADD(gl_gguf_writer_add_u64(w, "k.u64", UINT64_MAX));
    ADD(gl_gguf_writer_add_f32(w, "k.f32", 0.19611614f));
    ADD(gl_gguf_writer_add_bool(w, "k.bool", 1));
    ADD(gl_gguf_writer_add_str(w, "k.empty", ""));
    ADD(gl_gguf_writer_add_arr(w, "a.u8", GL_GGUF_U8, arr_u8, 3));
    ADD(gl_gguf_writer_add_arr(w, "a.i8", GL_GGUF_I8, arr_i8, 3));
    ADD(gl_gguf_writer_add_arr(w, "a.u16", GL_GGUF_U16, arr_u16, 2));
    ADD(gl_gguf_writer_add_arr(w, "a.i16", GL_GGUF_I16, arr_i16, 2));
    ADD(gl_gguf_writer_add_arr(w, "a.u32", GL_GGUF_U32, arr_u32, 3));
    ADD(gl_gguf_writer_add_arr(w, "a.i32", GL_GGUF_I32, arr_i32, 3));
    ADD(gl_gguf_writer_add_arr(w, "a.f32", GL_GGUF_F32, arr_f32, 3));
    ADD(gl_gguf_writer_add_arr(w, "a.bool", GL_GGUF_BOOL, arr_bool, 4));
    ADD(gl_gguf_writer_add_arr(w, "a.u64", GL_GGUF_U64, arr_u64, 2));
    ADD(gl_gguf_writer_add_arr(w, "a.i64", GL_GGUF_I64, arr_i64, 2));
    ADD(gl_gguf_writer_add_arr(w, "a.f64", GL_GGUF_F64, arr_f64, 2));
    ADD(gl_gguf_writer_add_arr(w, "a.empty", GL_GGUF_I32, NULL, 0));
    ADD(gl_gguf_writer_add_arr_str(w, "a.str", arr_strs, arr_lens, 3));
    ADD(gl_gguf_writer_add_arr_str(w, "a.cstr", arr_strs, NULL, 2));
#undef ADD
    for (int i = 0; i < N_REF_TENSORS && st == GL_OK; i++)
        if (gl_gguf_writer_add_tensor(w, ref_names[i], ref_dims[i], ref_ne[i], ref_types[i]) != i)
            st = GL_E_INTERNAL;
    if (st == GL_OK)
        st = gl_gguf_writer_write(w, path, header_only, fill_pattern, fc, err);
    gl_gguf_writer_delete(w);
    return st;
}

// Checks every value and tensor of the reference file.
static void check_ref(const struct gl_gguf *g, uint32_t alignment, int with_data)
{
    struct gl_err err = {0};
    CHECK(gl_gguf_version(g) == 3);
    CHECK(gl_gguf_alignment(g) == (alignment ? alignment : 32));
    CHECK(gl_gguf_data_offset(g) % gl_gguf_alignment(g) == 0);
    CHECK(gl_gguf_n_kv(g) == (alignment ? 22 : 21));
    CHECK(gl_gguf_n_tensors(g) == N_REF_TENSORS);
    CHECK(gl_gguf_find_kv(g, "absent") == NULL);
    CHECK(gl_gguf_find_kv(g, "k.u3") == NULL);

    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, "general.architecture");
    REQUIRE(kv && kv->type == GL_GGUF_STR && gl_gguf_str_eq(kv->v.str, "muse-glimmer"));
    CHECK(gl_gguf_kv_at(g, 0) == kv && kv->file_offset == 24);
    kv = gl_gguf_find_kv(g, "k.u32");
    REQUIRE(kv && kv->type == GL_GGUF_U32 && kv->v.u64 == 4000000000u);
    kv = gl_gguf_find_kv(g, "k.i32");
    REQUIRE(kv && kv->type == GL_GGUF_I32 && kv->v.i64 == -7);
    kv = gl_gguf_find_kv(g, "k.u64");
    REQUIRE(kv && kv->type == GL_GGUF_U64 && kv->v.u64 == UINT64_MAX);
    kv = gl_gguf_find_kv(g, "k.f32");
    REQUIRE(kv && kv->type == GL_GGUF_F32 && (float)kv->v.f64 == 0.19611614f);
    kv = gl_gguf_find_kv(g, "k.bool");
    REQUIRE(kv && kv->type == GL_GGUF_BOOL && kv->v.u64 == 1);
    kv = gl_gguf_find_kv(g, "k.empty");
    REQUIRE(kv && kv->type == GL_GGUF_STR && kv->v.str.len == 0);

    struct {
        const char *key;
        enum gl_gguf_vtype t;
        uint64_t n;
    } arrs[] = {{"a.u8", GL_GGUF_U8, 3},   {"a.i8", GL_GGUF_I8, 3},     {"a.u16", GL_GGUF_U16, 2},
                {"a.i16", GL_GGUF_I16, 2}, {"a.u32", GL_GGUF_U32, 3},   {"a.i32", GL_GGUF_I32, 3},
                {"a.f32", GL_GGUF_F32, 3}, {"a.bool", GL_GGUF_BOOL, 4}, {"a.u64", GL_GGUF_U64, 2},
                {"a.i64", GL_GGUF_I64, 2}, {"a.f64", GL_GGUF_F64, 2},   {"a.empty", GL_GGUF_I32, 0},
                {"a.str", GL_GGUF_STR, 3}, {"a.cstr", GL_GGUF_STR, 2}};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        kv = gl_gguf_find_kv(g, arrs[i].key);
        CHECKF(kv && kv->type == GL_GGUF_ARR && kv->v.arr.type == arrs[i].t &&
                   kv->v.arr.n == arrs[i].n,
               "%s", arrs[i].key);
    }
    for (int i = 0; i < 3; i++) {
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.u8"), (uint64_t)i) == arr_u8[i]);
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.i8"), (uint64_t)i) == arr_i8[i]);
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.u32"), (uint64_t)i) == arr_u32[i]);
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.i32"), (uint64_t)i) == arr_i32[i]);
        CHECK(gl_gguf_arr_get_float(gl_gguf_find_kv(g, "a.f32"), (uint64_t)i) ==
              (double)arr_f32[i]);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.u16"), (uint64_t)i) == arr_u16[i]);
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.i16"), (uint64_t)i) == arr_i16[i]);
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.i64"), (uint64_t)i) == arr_i64[i]);
        CHECK(gl_gguf_arr_get_float(gl_gguf_find_kv(g, "a.f64"), (uint64_t)i) == arr_f64[i]);
    }
    CHECK((uint64_t)gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.u64"), 1) == UINT64_MAX);
    CHECK(gl_gguf_arr_get_float(gl_gguf_find_kv(g, "a.u64"), 1) == 18446744073709551615.0);
    CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.f32"), 0) == 1);
    for (int i = 0; i < 4; i++)
        CHECK(gl_gguf_arr_get_int(gl_gguf_find_kv(g, "a.bool"), (uint64_t)i) == (arr_bool[i] != 0));
    kv = gl_gguf_find_kv(g, "a.str");
    REQUIRE(kv && kv->v.arr.strs);
    CHECK(gl_gguf_str_eq(kv->v.arr.strs[0], "hello") && kv->v.arr.strs[1].len == 0);
    CHECK(kv->v.arr.strs[2].len == 5 && memcmp(kv->v.arr.strs[2].ptr, "w\0rld", 5) == 0);
    kv = gl_gguf_find_kv(g, "a.cstr");
    REQUIRE(kv && kv->v.arr.strs);
    CHECK(gl_gguf_str_eq(kv->v.arr.strs[0], "hello") && gl_gguf_str_eq(kv->v.arr.strs[1], ""));

    uint32_t u;
    float f;
    int b;
    char *s = NULL;
    CHECK(gl_gguf_get_u32(g, "k.u32", &u, &err) == GL_OK && u == 4000000000u);
    CHECK(gl_gguf_get_u32(g, "k.i32", &u, &err) == GL_E_FORMAT && contains(err.msg, "k.i32"));
    CHECK(gl_gguf_get_u32(g, "k.u64", &u, &err) == GL_E_FORMAT && contains(err.msg, "u32"));
    CHECK(gl_gguf_get_u32(g, "k.f32", &u, &err) == GL_E_FORMAT);
    CHECK(gl_gguf_get_u32(g, "nope", &u, &err) == GL_E_INVAL && contains(err.msg, "missing"));
    CHECK(gl_gguf_get_f32(g, "k.f32", &f, &err) == GL_OK && f == 0.19611614f);
    CHECK(gl_gguf_get_f32(g, "k.i32", &f, &err) == GL_OK && f == -7.0f);
    CHECK(gl_gguf_get_f32(g, "general.architecture", &f, &err) == GL_E_FORMAT);
    CHECK(gl_gguf_get_bool(g, "k.bool", &b, &err) == GL_OK && b == 1);
    CHECK(gl_gguf_get_bool(g, "k.u32", &b, &err) == GL_E_FORMAT);
    CHECK(gl_gguf_get_str(g, "general.architecture", &s, &err) == GL_OK && s &&
          strcmp(s, "muse-glimmer") == 0);
    gl_free(s);
    CHECK(gl_gguf_get_str(g, "k.u32", &s, &err) == GL_E_FORMAT && contains(err.msg, "k.u32"));

    CHECK(gl_gguf_find_tensor(g, "tok") == NULL);
    uint64_t prev_end = 0;
    for (int i = 0; i < N_REF_TENSORS; i++) {
        const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, ref_names[i]);
        REQUIRE(t && t == gl_gguf_tensor_at(g, i));
        CHECK(t->n_dims == ref_dims[i] && t->type == ref_types[i]);
        for (int d = 0; d < 4; d++)
            CHECK(t->ne[d] == ref_ne[i][d]);
        size_t row = gl_type_row_size(ref_types[i], ref_ne[i][0]);
        CHECK(t->n_bytes == row * (uint64_t)(ref_ne[i][1] * ref_ne[i][2] * ref_ne[i][3]));
        CHECK(t->offset % gl_gguf_alignment(g) == 0 && t->offset >= prev_end);
        prev_end = t->offset + t->n_bytes;
        if (!with_data) {
            CHECK(t->data == NULL);
            continue;
        }
        REQUIRE(t->data != NULL);
        int same = 1;
        for (uint64_t k = 0; k < t->n_bytes; k++)
            same &= ((const uint8_t *)t->data)[k] == pattern(i, k);
        CHECKF(same, "tensor %s data", ref_names[i]);
    }
}

// ---- round trips ----

TEST(test_roundtrip_mmap_heap_memory)
{
    char path[256];
    struct gl_err err = {0};
    struct fill_ctx fc = {0};
    tmp_path(path, sizeof path);
    REQUIRE(build_ref(path, 0, 64, &fc, &err) == GL_OK);
    CHECK(fc.calls == N_REF_TENSORS); // small tensors: one chunk each

    for (int use_mmap = 0; use_mmap <= 1; use_mmap++) {
        struct gl_gguf_open_params prm = {.use_mmap = use_mmap, .allow_no_data = 0};
        struct gl_gguf *g = NULL;
        gl_status st = gl_gguf_open(&g, path, &prm, &err);
        CHECKF(st == GL_OK, "%s", err.msg);
        if (st != GL_OK)
            continue;
        CHECK(gl_gguf_is_mmapped(g) == use_mmap);
        check_ref(g, 64, 1);
        gl_gguf_close(g);
    }
    size_t n;
    uint8_t *bytes = t_read_file(path, &n);
    REQUIRE(bytes);
    struct gl_gguf *g = NULL;
    void *keep;
    REQUIRE(open_copy(bytes, n, 0, &g, &keep, &err) == GL_OK);
    CHECK(gl_gguf_file_size(g) == n && !gl_gguf_is_mmapped(g));
    check_ref(g, 64, 1);
    gl_gguf_close(g);
    free(keep);
    free(bytes);
    unlink(path);
}

TEST(test_roundtrip_default_alignment_and_env)
{
    char path[256];
    struct gl_err err = {0};
    struct fill_ctx fc = {0};
    tmp_path(path, sizeof path);
    REQUIRE(build_ref(path, 0, 0, &fc, &err) == GL_OK);
    setenv("GLINT_MMAP", "0", 1);
    struct gl_gguf_open_params prm = gl_gguf_default_open_params();
    CHECK(prm.use_mmap == 0 && prm.allow_no_data == 0);
    struct gl_gguf *g = NULL;
    CHECK(gl_gguf_open(&g, path, NULL, &err) == GL_OK && g && !gl_gguf_is_mmapped(g));
    gl_gguf_close(g);
    unsetenv("GLINT_MMAP");
    CHECK(gl_gguf_default_open_params().use_mmap == 1);
    g = NULL;
    REQUIRE(gl_gguf_open(&g, path, NULL, &err) == GL_OK);
    CHECK(gl_gguf_is_mmapped(g));
    check_ref(g, 0, 1);
    gl_gguf_close(g);
    unlink(path);
}

TEST(test_header_only)
{
    char path[256];
    struct gl_err err = {0};
    struct fill_ctx fc = {0};
    tmp_path(path, sizeof path);
    REQUIRE(build_ref(path, 1, 0, &fc, &err) == GL_OK);
    CHECK(fc.calls == 0);
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params prm = {.use_mmap = 1, .allow_no_data = 0};
    CHECK(gl_gguf_open(&g, path, &prm, &err) == GL_E_FORMAT && g == NULL);
    CHECK(contains(err.msg, "tensor \"tok.w\"") && contains(err.msg, "exceeds data section"));
    prm.allow_no_data = 1;
    REQUIRE(gl_gguf_open(&g, path, &prm, &err) == GL_OK);
    CHECK(gl_gguf_data_offset(g) >= gl_gguf_file_size(g));
    check_ref(g, 0, 0);
    gl_gguf_close(g);
    unlink(path);
}

// Cuts the reference file at every byte: below the end of the last tensor's data the open must
// fail cleanly (naming a tensor once the header is complete); from there on it must succeed.
TEST(test_truncated_everywhere)
{
    char path[256];
    struct gl_err err = {0};
    struct fill_ctx fc = {0};
    tmp_path(path, sizeof path);
    REQUIRE(build_ref(path, 0, 0, &fc, &err) == GL_OK);
    size_t n;
    uint8_t *bytes = t_read_file(path, &n);
    REQUIRE(bytes);
    struct gl_gguf *g = NULL;
    void *keep;
    REQUIRE(open_copy(bytes, n, 0, &g, &keep, &err) == GL_OK);
    const struct gl_gguf_tensor *last = gl_gguf_tensor_at(g, N_REF_TENSORS - 1);
    size_t data_end = (size_t)(gl_gguf_data_offset(g) + last->offset + last->n_bytes);
    // The header ends where the last tensor info (offset is its last field) ends.
    size_t header_end = 0;
    for (size_t i = 0; i + 8 <= n; i++)
        if (memcmp(bytes + i, "f16.3d", 6) == 0)
            header_end = i + 6 + 4 + 3 * 8 + 4 + 8;
    gl_gguf_close(g);
    free(keep);
    REQUIRE(header_end > 24 && data_end <= n);

    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        memset(&err, 0, sizeof err);
        g = NULL;
        gl_status st = open_copy(bytes, len, 0, &g, &keep, &err);
        int ok;
        if (len < header_end)
            ok = st != GL_OK && g == NULL && contains(err.msg, "gguf: <memory>: ");
        else if (len < data_end)
            ok = st == GL_E_FORMAT && contains(err.msg, "tensor \"") &&
                 contains(err.msg, "exceeds data section");
        else
            ok = st == GL_OK;
        if (!ok && bad++ < 5)
            fprintf(stderr, "  truncated at %zu: status %d: %s\n", len, (int)st, err.msg);
        gl_gguf_close(g);
        free(keep);
        // With allow_no_data every cut after the header opens.
        g = NULL;
        st = open_copy(bytes, len, 1, &g, &keep, &err);
        if ((st == GL_OK) != (len >= header_end) && bad++ < 5)
            fprintf(stderr, "  allow_no_data truncated at %zu: status %d\n", len, (int)st);
        gl_gguf_close(g);
        free(keep);
    }
    CHECK(bad == 0);

    // A few cuts through the file path (mmap and read).
    const size_t cuts[] = {0, 3, 23, header_end - 1, data_end - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char p2[256];
        tmp_path(p2, sizeof p2);
        REQUIRE(write_file(p2, bytes, cuts[i]));
        for (int m = 0; m <= 1; m++) {
            struct gl_gguf_open_params prm = {.use_mmap = m, .allow_no_data = 0};
            g = NULL;
            CHECK(gl_gguf_open(&g, p2, &prm, &err) != GL_OK && g == NULL && contains(err.msg, p2));
        }
        unlink(p2);
    }
    free(bytes);
    unlink(path);
}

// ---- hand-made files ----

static const uint64_t ne_64x2[2] = {64, 2};

TEST(test_valid_handmade)
{
    struct bb b;
    // Version 2, every scalar value type, no tensors, no data section at all.
    bb_header(&b, 2, 0, 6);
    bb_str(&b, "u8");
    bb_le(&b, GL_GGUF_U8, 4);
    bb_le(&b, 250, 1);
    bb_str(&b, "i8");
    bb_le(&b, GL_GGUF_I8, 4);
    bb_le(&b, 0x80, 1);
    bb_str(&b, "u16");
    bb_le(&b, GL_GGUF_U16, 4);
    bb_le(&b, 65000, 2);
    bb_str(&b, "i16");
    bb_le(&b, GL_GGUF_I16, 4);
    bb_le(&b, 0xfffe, 2);
    bb_str(&b, "i64");
    bb_le(&b, GL_GGUF_I64, 4);
    bb_le(&b, (uint64_t)-5, 8);
    bb_str(&b, "f64");
    bb_le(&b, GL_GGUF_F64, 4);
    double d = -2.5;
    uint64_t bits;
    memcpy(&bits, &d, 8);
    bb_le(&b, bits, 8);
    struct gl_gguf *g = NULL;
    struct gl_err err = {0};
    void *keep;
    REQUIRE(open_copy(b.p, b.n, 0, &g, &keep, &err) == GL_OK);
    CHECK(gl_gguf_version(g) == 2);
    CHECK(gl_gguf_find_kv(g, "u8")->v.u64 == 250);
    CHECK(gl_gguf_find_kv(g, "i8")->v.i64 == -128);
    CHECK(gl_gguf_find_kv(g, "u16")->v.u64 == 65000);
    CHECK(gl_gguf_find_kv(g, "i16")->v.i64 == -2);
    CHECK(gl_gguf_find_kv(g, "i64")->v.i64 == -5);
    CHECK(gl_gguf_find_kv(g, "f64")->v.f64 == -2.5);
    uint32_t u;
    float f;
    CHECK(gl_gguf_get_u32(g, "u16", &u, &err) == GL_OK && u == 65000);
    CHECK(gl_gguf_get_u32(g, "i8", &u, &err) == GL_E_FORMAT && contains(err.msg, "-128"));
    CHECK(gl_gguf_get_f32(g, "f64", &f, &err) == GL_OK && f == -2.5f);
    gl_gguf_close(g);
    free(keep);

    // A well-formed file with one Q8_0 tensor and a 16-byte alignment.
    bb_header(&b, 3, 1, 1);
    bb_kv_u32(&b, "general.alignment", 16);
    bb_tensor(&b, "w", 2, ne_64x2, GL_TYPE_Q8_0, 0);
    bb_pad_data(&b, 16, 2 * 2 * 34);
    CHECK(expect_accepted(&b));
}

TEST(test_bad_header)
{
    struct bb b;
    bb_header(&b, 3, 0, 0);
    b.p[0] = 'X';
    CHECK(expect_refused(&b, "magic", "byte 0"));
    bb_header(&b, 1, 0, 0);
    CHECK(expect_refused(&b, "version 1 ", "not supported"));
    bb_header(&b, 99, 0, 0);
    CHECK(expect_refused(&b, "version 99 ", NULL));
    bb_header(&b, 0x03000000, 0, 0);
    CHECK(expect_refused(&b, "big-endian", NULL));
    bb_header(&b, 3, 0, (uint64_t)1 << 60);
    CHECK(expect_refused(&b, "n_kv = 1152921504606846976", "limits"));
    bb_header(&b, 3, (uint64_t)1 << 60, 0);
    CHECK(expect_refused(&b, "n_tensors = 1152921504606846976", "limits"));
    bb_header(&b, 3, 1000, 1000); // under the limits, but the file is 24 bytes
    CHECK(expect_refused(&b, "cannot fit", NULL));
    b.n = 0;
    CHECK(expect_refused(&b, "truncated", NULL));
    bb_header(&b, 3, 0, 0);
    b.n = 20;
    CHECK(expect_refused(&b, "truncated", NULL));
}

TEST(test_bad_kv)
{
    struct bb b;
    bb_header(&b, 3, 0, 1);
    bb_le(&b, (uint64_t)1 << 60, 8); // key length
    bb_le(&b, 0, 8);
    CHECK(expect_refused(&b, "key 0 (at byte 24)", "has length 1152921504606846976"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "my.key");
    bb_le(&b, 13, 4);
    bb_le(&b, 0, 4);
    CHECK(expect_refused(&b, "key \"my.key\" (at byte 24)", "unknown value type 13"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "my.str");
    bb_le(&b, GL_GGUF_STR, 4);
    bb_le(&b, UINT64_MAX, 8);
    CHECK(expect_refused(&b, "key \"my.str\"", "length 18446744073709551615"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "nest");
    bb_le(&b, GL_GGUF_ARR, 4);
    bb_le(&b, GL_GGUF_ARR, 4);
    bb_le(&b, 1, 8);
    bb_le(&b, GL_GGUF_U8, 4);
    bb_le(&b, 0, 8);
    CHECK(expect_refused(&b, "key \"nest\"", "nested"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "arr.elem");
    bb_le(&b, GL_GGUF_ARR, 4);
    bb_le(&b, 77, 4);
    bb_le(&b, 0, 8);
    CHECK(expect_refused(&b, "key \"arr.elem\"", "unknown array element type 77"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "arr.big");
    bb_le(&b, GL_GGUF_ARR, 4);
    bb_le(&b, GL_GGUF_U64, 4);
    bb_le(&b, (uint64_t)1 << 61, 8); // * 8 bytes overflows u64
    bb_le(&b, 0, 8);
    CHECK(expect_refused(&b, "key \"arr.big\"", "2305843009213693952 u64"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "arr.strs");
    bb_le(&b, GL_GGUF_ARR, 4);
    bb_le(&b, GL_GGUF_STR, 4);
    bb_le(&b, UINT64_MAX / 4, 8);
    bb_str(&b, "a");
    CHECK(expect_refused(&b, "key \"arr.strs\"", "cannot fit"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "arr.str2");
    bb_le(&b, GL_GGUF_ARR, 4);
    bb_le(&b, GL_GGUF_STR, 4);
    bb_le(&b, 2, 8);
    bb_str(&b, "a");
    bb_le(&b, 1000, 8);
    CHECK(expect_refused(&b, "key \"arr.str2\"", "has length 1000"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "flag");
    bb_le(&b, GL_GGUF_BOOL, 4);
    bb_le(&b, 2, 1);
    CHECK(expect_refused(&b, "key \"flag\"", "not 0 or 1"));

    bb_header(&b, 3, 0, 1);
    bb_str(&b, "");
    bb_le(&b, GL_GGUF_U8, 4);
    bb_le(&b, 2, 1);
    CHECK(expect_refused(&b, "empty key", NULL));

    bb_header(&b, 3, 0, 2);
    bb_kv_u32(&b, "dup", 1);
    bb_kv_u32(&b, "dup", 2);
    CHECK(expect_refused(&b, "duplicate key \"dup\"", "bytes 24 and 43"));

    // Names with control bytes are echoed safely.
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "a\nb");
    bb_le(&b, 99, 4);
    CHECK(expect_refused(&b, "key \"a?b\"", NULL));
}

TEST(test_bad_alignment)
{
    const uint32_t bad[] = {0, 3, 48};
    struct bb b;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bb_header(&b, 3, 0, 1);
        bb_kv_u32(&b, "general.alignment", bad[i]);
        CHECK(expect_refused(&b, "general.alignment", "power of two"));
    }
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "general.alignment");
    bb_le(&b, GL_GGUF_U64, 4);
    bb_le(&b, 32, 8);
    CHECK(expect_refused(&b, "general.alignment", "must be u32"));
}

TEST(test_bad_tensor_info)
{
    struct bb b;
    const uint64_t ne5[5] = {32, 1, 1, 1, 1};
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.dims0", 0, ne5, GL_TYPE_F32, 0);
    bb_pad_data(&b, 32, 128);
    CHECK(expect_refused(&b, "tensor \"t.dims0\" (info at byte 24)", "n_dims = 0"));

    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.dims5", 5, ne5, GL_TYPE_F32, 0);
    bb_pad_data(&b, 32, 128);
    CHECK(expect_refused(&b, "tensor \"t.dims5\"", "n_dims = 5"));

    const uint64_t ne_big[2] = {(uint64_t)1 << 32, (uint64_t)1 << 32};
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.ovf", 2, ne_big, GL_TYPE_F32, 0);
    CHECK(expect_refused(&b, "tensor \"t.ovf\"", "overflow"));

    const uint64_t ne_bytes[2] = {(uint64_t)1 << 40, (uint64_t)1 << 22}; // 2^62 elems * 4 bytes
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.bytes", 2, ne_bytes, GL_TYPE_F32, 0);
    CHECK(expect_refused(&b, "tensor \"t.bytes\"", "byte size overflows"));

    const uint64_t ne_neg[1] = {UINT64_MAX};
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.neg", 1, ne_neg, GL_TYPE_F32, 0);
    CHECK(expect_refused(&b, "tensor \"t.neg\"", "ne[0] = 18446744073709551615"));

    const uint64_t ne_zero[2] = {32, 0};
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.zero", 2, ne_zero, GL_TYPE_F32, 0);
    CHECK(expect_refused(&b, "tensor \"t.zero\"", "ne[1] = 0"));

    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.type", 2, ne_64x2, 99, 0);
    bb_pad_data(&b, 32, 512);
    CHECK(expect_refused(&b, "tensor \"t.type\"", "unknown ggml type 99"));

    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.type4", 2, ne_64x2, 4, 0); // Q4_2: removed from ggml, never sizable
    bb_pad_data(&b, 32, 512);
    CHECK(expect_refused(&b, "tensor \"t.type4\"", "unknown ggml type 4"));

    const uint64_t ne_33[1] = {33};
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.blk", 1, ne_33, GL_TYPE_Q8_0, 0);
    bb_pad_data(&b, 32, 128);
    CHECK(expect_refused(&b, "tensor \"t.blk\"", "not a multiple of the Q8_0 block size 32"));

    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "", 2, ne_64x2, GL_TYPE_F32, 0);
    bb_pad_data(&b, 32, 512);
    CHECK(expect_refused(&b, "tensor 0", "empty tensor name"));

    bb_header(&b, 3, 1, 0); // cut inside the tensor info
    bb_str(&b, "t.cut");
    bb_le(&b, 3, 4);
    bb_le(&b, 64, 8);
    bb_le(&b, 64, 8);
    CHECK(expect_refused(&b, "tensor \"t.cut\"", "truncated"));
}

TEST(test_bad_tensor_placement)
{
    struct bb b;
    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.mis", 2, ne_64x2, GL_TYPE_F32, 4);
    bb_pad_data(&b, 32, 1024);
    CHECK(expect_refused(&b, "tensor \"t.mis\" (info at byte 24)",
                         "not a multiple of the "
                         "alignment 32"));

    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.range", 2, ne_64x2, GL_TYPE_F32, 512);
    bb_pad_data(&b, 32, 1000);
    CHECK(expect_refused(&b, "tensor \"t.range\"",
                         "data [512, 1024) exceeds data section of "
                         "1000 bytes"));

    bb_header(&b, 3, 1, 0);
    bb_tensor(&b, "t.wrap", 2, ne_64x2, GL_TYPE_F32, UINT64_MAX - 31);
    bb_pad_data(&b, 32, 512);
    CHECK(expect_refused(&b, "tensor \"t.wrap\"", "overflows"));

    bb_header(&b, 3, 2, 0);
    bb_tensor(&b, "t.dup", 2, ne_64x2, GL_TYPE_F32, 0);
    bb_tensor(&b, "t.dup", 2, ne_64x2, GL_TYPE_F32, 512);
    bb_pad_data(&b, 32, 1024);
    CHECK(expect_refused(&b, "duplicate tensor name \"t.dup\"", "tensors 0 and 1"));

    // Alignment from the key applies to offsets: 32 is fine at alignment 32, not at 64.
    bb_header(&b, 3, 1, 1);
    bb_kv_u32(&b, "general.alignment", 64);
    bb_tensor(&b, "t.a64", 2, ne_64x2, GL_TYPE_F32, 32);
    bb_pad_data(&b, 64, 1024);
    CHECK(expect_refused(&b, "tensor \"t.a64\"", "alignment 64"));
}

// ---- writer ----

TEST(test_writer_errors)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    REQUIRE(w);
    const int64_t ne[4] = {64, 2, 1, 1}, ne0[2] = {64, 0}, ne33[1] = {33};
    CHECK(gl_gguf_writer_add_u32(w, "a", 1) == GL_OK);
    CHECK(gl_gguf_writer_add_u32(w, "a", 2) == GL_E_INVAL);
    CHECK(gl_gguf_writer_add_str(w, "", "x") == GL_E_INVAL);
    CHECK(gl_gguf_writer_add_arr(w, "b", GL_GGUF_STR, "x", 1) == GL_E_INVAL);
    CHECK(gl_gguf_writer_add_arr(w, "b", GL_GGUF_ARR, "x", 1) == GL_E_INVAL);
    CHECK(gl_gguf_writer_add_arr(w, "b", GL_GGUF_U64, "x", UINT64_MAX / 4) == GL_E_LIMIT);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 0, ne, GL_TYPE_F32) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 5, ne, GL_TYPE_F32) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 2, ne0, GL_TYPE_F32) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 1, ne33, GL_TYPE_Q8_0) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 2, ne, 99) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "", 2, ne, GL_TYPE_F32) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 2, ne, GL_TYPE_F32) == 0);
    CHECK(gl_gguf_writer_add_tensor(w, "t", 2, ne, GL_TYPE_F32) == -1);
    CHECK(gl_gguf_writer_add_tensor(w, "u", 2, ne, GL_TYPE_F32) == 1);

    // A failing fill aborts the write, keeps the callback's message and removes the file.
    char path[256];
    struct gl_err err = {0};
    tmp_path(path, sizeof path);
    struct fill_ctx fc = {.fail_at = 2};
    CHECK(gl_gguf_writer_write(w, path, 0, fill_pattern, &fc, &err) == GL_E_CANCELLED);
    CHECK(contains(err.msg, "test fill refused tensor 1"));
    CHECK(access(path, F_OK) != 0);
    CHECK(gl_gguf_writer_write(w, "/nonexistent-dir/x.gguf", 0, NULL, NULL, &err) == GL_E_IO &&
          contains(err.msg, "/nonexistent-dir/x.gguf"));

    // NULL fill writes zeros.
    CHECK(gl_gguf_writer_write(w, path, 0, NULL, NULL, &err) == GL_OK);
    struct gl_gguf *g = NULL;
    REQUIRE(gl_gguf_open(&g, path, NULL, &err) == GL_OK);
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, "u");
    REQUIRE(t && t->data && t->offset == 512);
    CHECK(((const float *)t->data)[127] == 0.0f);
    gl_gguf_close(g);
    unlink(path);

    // A general.alignment the reader would refuse is refused by the writer.
    struct gl_gguf_writer *w2 = gl_gguf_writer_new();
    REQUIRE(w2);
    CHECK(gl_gguf_writer_add_u64(w2, "general.alignment", 64) == GL_OK);
    CHECK(gl_gguf_writer_write(w2, path, 1, NULL, NULL, &err) == GL_E_INVAL &&
          contains(err.msg, "general.alignment"));
    CHECK(access(path, F_OK) != 0);
    gl_gguf_writer_delete(w2);
    gl_gguf_writer_delete(w);
}

// Many tensors and keys: every one is found through the index, and chunked fills cover a big
// tensor exactly once.
TEST(test_many_tensors_and_chunks)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    REQUIRE(w);
    char name[64];
    const int n = 3000;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "blk.%d.w", i);
        const int64_t ne[1] = {32};
        CHECK(gl_gguf_writer_add_tensor(w, name, 1, ne, GL_TYPE_Q8_0) == i);
        snprintf(name, sizeof name, "key.%d", i);
        CHECK(gl_gguf_writer_add_i32(w, name, -i) == GL_OK);
    }
    char path[256];
    struct gl_err err = {0};
    tmp_path(path, sizeof path);
    REQUIRE(gl_gguf_writer_write(w, path, 1, NULL, NULL, &err) == GL_OK);
    gl_gguf_writer_delete(w);
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params prm = {.use_mmap = 1, .allow_no_data = 1};
    REQUIRE(gl_gguf_open(&g, path, &prm, &err) == GL_OK);
    int found = 0;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "blk.%d.w", i);
        const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, name);
        found += t == gl_gguf_tensor_at(g, i) && t->offset == (uint64_t)i * 64;
        snprintf(name, sizeof name, "key.%d", i);
        const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, name);
        found += kv && kv->v.i64 == -i;
    }
    CHECK(found == 2 * n);
    gl_gguf_close(g);
    unlink(path);
}

static gl_status fill_count(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                            struct gl_err *err)
{
    (void)ti;
    (void)err;
    int64_t *next = ctx;
    if (row0 != *next)
        return GL_E_INTERNAL;
    for (int64_t r = 0; r < n_rows; r++)
        for (int k = 0; k < 1024; k++)
            ((float *)dst)[r * 1024 + k] = (float)(row0 + r);
    *next = row0 + n_rows;
    return GL_OK;
}

TEST(test_chunked_fill)
{
    // 20000 rows of 4 KiB = 78 MiB: more than one 64 MiB chunk.
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    REQUIRE(w);
    const int64_t ne[2] = {1024, 20000};
    REQUIRE(gl_gguf_writer_add_tensor(w, "big", 2, ne, GL_TYPE_F32) == 0);
    char path[256];
    struct gl_err err = {0};
    tmp_path(path, sizeof path);
    int64_t next = 0;
    REQUIRE(gl_gguf_writer_write(w, path, 0, fill_count, &next, &err) == GL_OK);
    gl_gguf_writer_delete(w);
    CHECK(next == 20000);
    struct gl_gguf *g = NULL;
    REQUIRE(gl_gguf_open(&g, path, NULL, &err) == GL_OK);
    const float *x = gl_gguf_find_tensor(g, "big")->data;
    CHECK(x[0] == 0.0f && x[16383 * 1024 + 5] == 16383.0f && x[19999 * 1024 + 1023] == 19999.0f);
    gl_gguf_close(g);
    unlink(path);
}

int main(void)
{
    RUN_TESTS(test_roundtrip_mmap_heap_memory, test_roundtrip_default_alignment_and_env,
              test_header_only, test_truncated_everywhere, test_valid_handmade, test_bad_header,
              test_bad_kv, test_bad_alignment, test_bad_tensor_info, test_bad_tensor_placement,
              test_writer_errors, test_many_tensors_and_chunks, test_chunked_fill);
}
