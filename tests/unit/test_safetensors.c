// SPDX-License-Identifier: MIT
// safetensors reader/writer: writer -> reader round trip (file and sharded folder), and hostile
// headers, each of which must be refused with a "safetensors: " message, never a crash.
#include "safetensors/safetensors.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static gl_status fill_seq(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                          struct gl_err *err)
{
    (void)ctx;
    (void)err;
    // Tensor 0: F32 3x4 of value 100*ti + element index; tensor 1: BF16 bytes 0, 1, 2, ...
    if (ti == 0) {
        float *f = dst;
        for (int64_t i = 0; i < n_rows * 4; i++)
            f[i] = (float)(row0 * 4 + i);
    } else {
        uint8_t *b = dst;
        for (int64_t i = 0; i < n_rows * 2 * 5; i++)
            b[i] = (uint8_t)(row0 * 10 + i);
    }
    return GL_OK;
}

static const char *tmp_dir(void)
{
    static char d[64];
    if (!d[0]) {
        snprintf(d, sizeof d, "/tmp/glint_st_test_%d", (int)getpid());
        mkdir(d, 0755);
    }
    return d;
}

static struct gl_safetensors_writer *make_writer(void)
{
    struct gl_safetensors_writer *w = gl_safetensors_writer_new();
    struct gl_err err = {0};
    const int64_t s0[2] = {3, 4}, s1[2] = {7, 5};
    if (!w || gl_safetensors_writer_add_meta(w, "format", "pt", &err) != GL_OK ||
        gl_safetensors_writer_add_tensor(w, "a.weight", GL_SAFETENSORS_DTYPE_F32, 2, s0, &err) !=
            0 ||
        gl_safetensors_writer_add_tensor(w, "b \"quoted\" \xc3\xa9", GL_SAFETENSORS_DTYPE_BF16, 2,
                                         s1, &err) != 1)
        return NULL;
    return w;
}

static void check_content(const struct gl_safetensors *s)
{
    CHECK(gl_safetensors_n_tensors(s) == 2);
    const struct gl_safetensors_tensor *a = gl_safetensors_find(s, "a.weight");
    const struct gl_safetensors_tensor *b = gl_safetensors_find(s, "b \"quoted\" \xc3\xa9");
    REQUIRE(a && b);
    CHECK(a->dtype == GL_SAFETENSORS_DTYPE_F32 && a->ndim == 2 && a->shape[0] == 3 &&
          a->shape[1] == 4);
    CHECK(a->nbytes == 48 && b->nbytes == 70 && b->dtype == GL_SAFETENSORS_DTYPE_BF16);
    float f[12];
    memcpy(f, a->data, sizeof f);
    for (int i = 0; i < 12; i++)
        CHECK(f[i] == (float)i);
    for (int i = 0; i < 70; i++)
        CHECK(((const uint8_t *)b->data)[i] == (uint8_t)i);
    CHECK(gl_safetensors_find(s, "missing") == NULL);
    CHECK(strcmp(gl_safetensors_tensor_at(s, 0)->name, "a.weight") == 0); // name order
}

TEST(test_round_trip_file)
{
    struct gl_safetensors_writer *w = make_writer();
    REQUIRE(w);
    char path[128];
    snprintf(path, sizeof path, "%s/one.safetensors", tmp_dir());
    struct gl_err err = {0};
    CHECKF(gl_safetensors_writer_write(w, path, fill_seq, NULL, &err) == GL_OK, "%s", err.msg);
    gl_safetensors_writer_delete(w);
    struct gl_safetensors *s = NULL;
    REQUIRE(gl_safetensors_open(&s, path, &err) == GL_OK);
    check_content(s);
    CHECK(gl_safetensors_metadata(s, "format") &&
          !strcmp(gl_safetensors_metadata(s, "format"), "pt"));
    CHECK(gl_safetensors_metadata(s, "nope") == NULL);
    // Data area 8-byte aligned: header length is a multiple of 8.
    FILE *f = fopen(path, "rb");
    uint8_t l8[8] = {0};
    REQUIRE(f && fread(l8, 1, 8, f) == 8);
    fclose(f);
    CHECK(l8[0] % 8 == 0);
    gl_safetensors_close(s);
    remove(path);
}

TEST(test_round_trip_sharded)
{
    char d[128], p0[256], p1[256];
    snprintf(d, sizeof d, "%s/sharded", tmp_dir());
    mkdir(d, 0755);
    snprintf(p0, sizeof p0, "%s/model-00001-of-00002.safetensors", d);
    snprintf(p1, sizeof p1, "%s/model-00002-of-00002.safetensors", d);
    struct gl_err err = {0};
    const int64_t s0[2] = {3, 4}, s1[2] = {7, 5};
    struct gl_safetensors_writer *w0 = gl_safetensors_writer_new(),
                                 *w1 = gl_safetensors_writer_new();
    REQUIRE(w0 && w1);
    CHECK(gl_safetensors_writer_add_tensor(w0, "a.weight", GL_SAFETENSORS_DTYPE_F32, 2, s0, &err) ==
          0);
    // Tensor index 1 in fill_seq terms: give it its own writer with a dummy first tensor.
    const int64_t s_empty[1] = {0};
    CHECK(gl_safetensors_writer_add_tensor(w1, "z.empty", GL_SAFETENSORS_DTYPE_F16, 1, s_empty,
                                           &err) == 0);
    CHECK(gl_safetensors_writer_add_tensor(w1, "b \"quoted\" \xc3\xa9", GL_SAFETENSORS_DTYPE_BF16,
                                           2, s1, &err) == 1);
    CHECK(gl_safetensors_writer_write(w0, p0, fill_seq, NULL, &err) == GL_OK);
    CHECK(gl_safetensors_writer_write(w1, p1, fill_seq, NULL, &err) == GL_OK);
    gl_safetensors_writer_delete(w0);
    gl_safetensors_writer_delete(w1);
    const char *names[] = {"a.weight", "z.empty", "b \"quoted\" \xc3\xa9"};
    const char *files[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model-00002-of-00002.safetensors"};
    CHECK(gl_safetensors_write_index(d, names, files, 3, 118, &err) == GL_OK);
    struct gl_safetensors *s = NULL;
    REQUIRE(gl_safetensors_open(&s, d, &err) == GL_OK);
    CHECK(gl_safetensors_n_shards(s) == 2 && gl_safetensors_n_tensors(s) == 3);
    const struct gl_safetensors_tensor *e = gl_safetensors_find(s, "z.empty");
    CHECK(e && e->nbytes == 0 && e->ndim == 1);
    const struct gl_safetensors_tensor *a = gl_safetensors_find(s, "a.weight");
    CHECK(a && a->shard == 0);
    gl_safetensors_close(s);
    // An index naming a shard that lacks the tensor, or one escaping the folder, is refused.
    const char *bad_files[] = {"model-00002-of-00002.safetensors",
                               "model-00002-of-00002.safetensors",
                               "model-00002-of-00002.safetensors"};
    CHECK(gl_safetensors_write_index(d, names, bad_files, 3, 0, &err) == GL_OK);
    CHECK(gl_safetensors_open(&s, d, &err) == GL_E_FORMAT && s == NULL);
    const char *esc_files[] = {"../x", "a", "b"};
    CHECK(gl_safetensors_write_index(d, names, esc_files, 3, 0, &err) == GL_OK);
    CHECK(gl_safetensors_open(&s, d, &err) == GL_E_FORMAT);
    CHECKF(strstr(err.msg, "plain file name") != NULL, "%s", err.msg);
    remove(p0);
    remove(p1);
    char ip[200];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", d);
    remove(ip);
    rmdir(d);
}

// Builds an image: 8-byte length, header text, then n_data bytes of zeros. hl_override != 0
// replaces the length field.
static uint8_t *image(const char *hdr, size_t n_data, uint64_t hl_override, size_t *size)
{
    size_t hl = strlen(hdr);
    *size = 8 + hl + n_data;
    uint8_t *b = calloc(1, *size);
    uint64_t v = hl_override ? hl_override : hl;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    memcpy(b + 8, hdr, hl);
    return b;
}

static gl_status try_open(const char *hdr, size_t n_data, uint64_t hl_override, char *msg,
                          size_t cap)
{
    size_t size;
    uint8_t *b = image(hdr, n_data, hl_override, &size);
    struct gl_err err = {0};
    struct gl_safetensors *s = NULL;
    gl_status st = gl_safetensors_open_memory(&s, b, size, "hostile", &err);
    if (st == GL_OK)
        gl_safetensors_close(s);
    else if (s != NULL || strncmp(err.msg, "safetensors: hostile", 20) != 0)
        st = GL_E_INTERNAL; // a refusal must leave *out NULL and name the file
    snprintf(msg, cap, "%s", err.msg);
    free(b);
    return st;
}

TEST(test_hostile_headers)
{
    char m[GL_ERR_MSG_CAP];
    const char *ok = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    CHECK(try_open(ok, 16, 0, m, sizeof m) == GL_OK);
    // Length field beyond the file, and a huge one.
    CHECK(try_open(ok, 16, 1000, m, sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "past the end") != NULL);
    CHECK(try_open(ok, 16, UINT64_MAX, m, sizeof m) == GL_E_LIMIT);
    CHECK(try_open(ok, 16, (uint64_t)GL_SAFETENSORS_MAX_HEADER + 1, m, sizeof m) == GL_E_LIMIT);
    // Too short for the length field.
    {
        struct gl_safetensors *s = NULL;
        struct gl_err err = {0};
        CHECK(gl_safetensors_open_memory(&s, "\x01\x00", 2, "hostile", &err) == GL_E_FORMAT);
    }
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",", 16, 0, m, sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "JSON") != NULL);
    CHECK(try_open("[1,2]", 0, 0, m, sizeof m) == GL_E_FORMAT);
    // Offsets outside the data area; end < begin; size != shape.
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]}}", 16, 0, m,
                   sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "outside") != NULL && strstr(m, "tensor t") != NULL);
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,0]}}", 16, 0, m,
                   sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "end before begin") != NULL);
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", 32, 0, m,
                   sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "needs 24") != NULL);
    // Shape product overflow.
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                   "\"data_offsets\":[0,16]}}",
                   16, 0, m, sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "overflow") != NULL);
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, 0, m,
                   sizeof m) == GL_E_FORMAT);
    // Overlap.
    CHECK(try_open("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   16, 0, m, sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "overlaps") != NULL);
    // Unknown and unsupported dtypes name the tensor and the dtype.
    CHECK(try_open("{\"t\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 0, m,
                   sizeof m) == GL_E_FORMAT);
    CHECK(strstr(m, "Q9") != NULL);
    CHECK(try_open("{\"t\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, 0, m,
                   sizeof m) == GL_E_UNSUPPORTED);
    CHECK(strstr(m, "I64") != NULL && strstr(m, "tensor t") != NULL);
    // Duplicate names.
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   8, 0, m, sizeof m) == GL_E_FORMAT);
    // Metadata: strings only.
    CHECK(try_open("{\"__metadata__\":{\"format\":\"pt\"}}", 0, 0, m, sizeof m) == GL_OK);
    CHECK(try_open("{\"__metadata__\":{\"format\":1}}", 0, 0, m, sizeof m) == GL_E_FORMAT);
    // Wrong member types, extra members, too many dims.
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, 0,
                   m, sizeof m) == GL_E_FORMAT);
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4, 0, m,
                   sizeof m) == GL_E_FORMAT);
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,4]}}",
                   4, 0, m, sizeof m) == GL_E_LIMIT);
    CHECK(try_open("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4, 0, m,
                   sizeof m) == GL_E_FORMAT);
    // Missing file.
    struct gl_safetensors *s = NULL;
    struct gl_err err = {0};
    CHECK(gl_safetensors_open(&s, "/nonexistent/x.safetensors", &err) == GL_E_IO);
}

int main(void)
{
    RUN_TESTS(test_round_trip_file, test_round_trip_sharded, test_hostile_headers);
}
