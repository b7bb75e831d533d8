// SPDX-License-Identifier: MIT
// gguf: a bounds-checked GGUF v3 (and v2) reader over a read-only mapping of the file, and a
// streaming writer. The reader validates every length, count, type and offset against the file
// size at open time; after a successful open every accessor is safe. Keys and strings are
// borrowed views into the mapping, valid until gl_gguf_close(). It knows nothing about models.
//
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv; n_kv x {str key, u32 type,
// value}; n_tensors x {str name, u32 n_dims<=4, u64 ne[n_dims], u32 ggml_type, u64 offset};
// padding to general.alignment (default 32); tensor data, offsets relative to the data start.
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

enum gl_gguf_vtype {
    GL_GGUF_U8 = 0,
    GL_GGUF_I8 = 1,
    GL_GGUF_U16 = 2,
    GL_GGUF_I16 = 3,
    GL_GGUF_U32 = 4,
    GL_GGUF_I32 = 5,
    GL_GGUF_F32 = 6,
    GL_GGUF_BOOL = 7,
    GL_GGUF_STR = 8,
    GL_GGUF_ARR = 9,
    GL_GGUF_U64 = 10,
    GL_GGUF_I64 = 11,
    GL_GGUF_F64 = 12,
    GL_GGUF_VTYPE_COUNT
};

// Limits that turn absurd counts into clean errors instead of huge allocations.
#define GL_GGUF_MAX_KV      65536
#define GL_GGUF_MAX_TENSORS 1048576
#define GL_GGUF_MAX_DIMS    4

struct gl_gguf_str {
    const char *ptr; // borrowed, NOT NUL-terminated
    uint64_t len;
};

struct gl_gguf_kv {
    struct gl_gguf_str key;
    enum gl_gguf_vtype type;
    uint64_t file_offset; // byte offset of the key in the file (for error messages)
    union {
        uint64_t u64; // U8/U16/U32/U64 and BOOL (0/1), zero-extended
        int64_t i64;  // I8/I16/I32/I64, sign-extended
        double f64;   // F32/F64
        struct gl_gguf_str str;
        struct {
            enum gl_gguf_vtype type; // element type (never ARR: nested arrays are refused)
            uint64_t n;
            const uint8_t *data;            // first element (scalars packed, unaligned)
            const struct gl_gguf_str *strs; // for STR arrays: n views, owned by the gguf
        } arr;
    } v;
};

struct gl_gguf_tensor {
    struct gl_gguf_str name;
    uint32_t n_dims;
    int64_t ne[GL_GGUF_MAX_DIMS]; // ne[0] is the contiguous dimension; unused dims are 1
    uint32_t type;                // ggml type id (enum gl_type); validated to be sizable
    uint64_t offset;              // relative to the data section
    uint64_t n_bytes;             // validated: offset + n_bytes <= data size
    const void *data;             // borrowed pointer into the mapping (NULL for header-only files)
};

struct gl_gguf;

struct gl_gguf_open_params {
    int use_mmap;      // 1: mmap (default); 0: read the file into memory
    int allow_no_data; // 1: accept files whose tensor data lies past EOF (header-only files)
};
struct gl_gguf_open_params
gl_gguf_default_open_params(void); // use_mmap from GLINT_MMAP (default 1)

// Opens and fully validates a file. On failure returns a status and err names the key or tensor
// and the byte offset. *out is owned by the caller: close with gl_gguf_close().
GL_MUST_USE gl_status gl_gguf_open(struct gl_gguf **out, const char *path,
                                   const struct gl_gguf_open_params *params, struct gl_err *err);
// Same over a caller buffer (borrowed; must outlive the gguf). Used by the fuzz target.
GL_MUST_USE gl_status gl_gguf_open_memory(struct gl_gguf **out, const void *data, size_t size,
                                          const struct gl_gguf_open_params *params,
                                          struct gl_err *err);
void gl_gguf_close(struct gl_gguf *g); // NULL-safe

uint32_t gl_gguf_version(const struct gl_gguf *g);
uint64_t gl_gguf_file_size(const struct gl_gguf *g);
uint64_t gl_gguf_data_offset(const struct gl_gguf *g); // file offset of the tensor data section
uint32_t gl_gguf_alignment(const struct gl_gguf *g);
int gl_gguf_is_mmapped(const struct gl_gguf *g);

int64_t gl_gguf_n_kv(const struct gl_gguf *g);
const struct gl_gguf_kv *gl_gguf_kv_at(const struct gl_gguf *g, int64_t i); // i in range (asserted)
const struct gl_gguf_kv *gl_gguf_find_kv(const struct gl_gguf *g,
                                         const char *key); // NULL if absent

int64_t gl_gguf_n_tensors(const struct gl_gguf *g);
const struct gl_gguf_tensor *gl_gguf_tensor_at(const struct gl_gguf *g, int64_t i);
const struct gl_gguf_tensor *gl_gguf_find_tensor(const struct gl_gguf *g, const char *name);

// Typed scalar getters. Return GL_OK; GL_E_INVAL if the key is absent (err says "missing");
// GL_E_FORMAT if the stored type cannot represent the request (e.g. negative into u32, or a
// string). Integer getters accept any integer type in range; f32 accepts F32/F64 and integers.
GL_MUST_USE gl_status gl_gguf_get_u32(const struct gl_gguf *g, const char *key, uint32_t *out,
                                      struct gl_err *err);
GL_MUST_USE gl_status gl_gguf_get_f32(const struct gl_gguf *g, const char *key, float *out,
                                      struct gl_err *err);
GL_MUST_USE gl_status gl_gguf_get_bool(const struct gl_gguf *g, const char *key, int *out,
                                       struct gl_err *err);
// Returns a malloc'ed NUL-terminated copy (caller frees with gl_free).
GL_MUST_USE gl_status gl_gguf_get_str(const struct gl_gguf *g, const char *key, char **out,
                                      struct gl_err *err);
// Element i of a scalar array as integer / double (i < n asserted).
int64_t gl_gguf_arr_get_int(const struct gl_gguf_kv *kv, uint64_t i);
double gl_gguf_arr_get_float(const struct gl_gguf_kv *kv, uint64_t i);
const char *gl_gguf_vtype_name(enum gl_gguf_vtype t);
int gl_gguf_str_eq(struct gl_gguf_str s, const char *cstr);

// ---- writer ----
// Collects metadata and tensor infos, then streams the file: header, then each tensor's data
// produced by a fill callback in chunks of rows (so multi-GB tensors never sit in memory whole).
struct gl_gguf_writer;
struct gl_gguf_writer *gl_gguf_writer_new(void); // NULL on OOM
void gl_gguf_writer_delete(struct gl_gguf_writer *w);
// All add functions copy their inputs. They return GL_E_NOMEM on allocation failure.
gl_status gl_gguf_writer_add_u32(struct gl_gguf_writer *w, const char *key, uint32_t v);
gl_status gl_gguf_writer_add_i32(struct gl_gguf_writer *w, const char *key, int32_t v);
gl_status gl_gguf_writer_add_u64(struct gl_gguf_writer *w, const char *key, uint64_t v);
gl_status gl_gguf_writer_add_f32(struct gl_gguf_writer *w, const char *key, float v);
gl_status gl_gguf_writer_add_bool(struct gl_gguf_writer *w, const char *key, int v);
gl_status gl_gguf_writer_add_str(struct gl_gguf_writer *w, const char *key, const char *v);
// A run of metadata adds with one sticky status: each add is a no-op once one has failed, and st
// holds the first failure, so a writer of many keys checks once at the end.
struct gl_gguf_keys {
    struct gl_gguf_writer *w;
    gl_status st;
};
void gl_gguf_keys_u32(struct gl_gguf_keys *k, const char *key, uint32_t v);
void gl_gguf_keys_f32(struct gl_gguf_keys *k, const char *key, float v);
void gl_gguf_keys_bool(struct gl_gguf_keys *k, const char *key, int v);
void gl_gguf_keys_str(struct gl_gguf_keys *k, const char *key, const char *v);
// Scalar array: n elements of elem_type packed in data (elem_type != STR, ARR).
gl_status gl_gguf_writer_add_arr(struct gl_gguf_writer *w, const char *key,
                                 enum gl_gguf_vtype elem_type, const void *data, uint64_t n);
// String array: strs[i] of lens[i] bytes (lens may be NULL for NUL-terminated strings).
gl_status gl_gguf_writer_add_arr_str(struct gl_gguf_writer *w, const char *key,
                                     const char *const *strs, const uint64_t *lens, uint64_t n);
// Declares a tensor; returns its index (>= 0) or -1 on error. ne[0] is the contiguous dim.
int64_t gl_gguf_writer_add_tensor(struct gl_gguf_writer *w, const char *name, uint32_t n_dims,
                                  const int64_t *ne, uint32_t type);
// Produces rows [row0, row0 + n_rows) of tensor ti into dst (n_rows * row_size bytes), where a
// row is ne[0] elements. Return GL_OK or an error that aborts the write.
typedef gl_status (*gl_gguf_fill_fn)(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                                     struct gl_err *err);
// Writes the file. header_only: write metadata and tensor table only (offsets as if data
// followed), so tools can plan memory without the data. alignment from general.alignment or 32.
// fill may be NULL: tensor data is then written as zeros. On failure the partial file is removed.
GL_MUST_USE gl_status gl_gguf_writer_write(struct gl_gguf_writer *w, const char *path,
                                           int header_only, gl_gguf_fill_fn fill, void *ctx,
                                           struct gl_err *err);
