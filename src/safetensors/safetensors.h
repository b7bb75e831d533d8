// SPDX-License-Identifier: MIT
// safetensors: reader and writer for HF .safetensors files and sharded model folders.
// File layout: u64 little-endian header length N, N bytes of JSON (an object: tensor name ->
// {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional "__metadata__" object of
// string values), then the data area; offsets are bytes relative to the start of the data area.
// The reader maps each file read-only (mmap) and validates the whole header before returning:
// header length (<= GL_SAFETENSORS_MAX_HEADER and inside the file), JSON syntax and member types,
// no duplicate names, every offset pair inside the data area with begin <= end, end - begin ==
// product(shape) * dtype size (overflow-checked), no two tensors overlapping. Only F32, F16 and
// BF16 tensors are accepted (another dtype: GL_E_UNSUPPORTED naming the tensor and the dtype).
// Every error message starts with "safetensors: " and names the file and, where there is one,
// the tensor. A folder is read through model.safetensors.index.json (its "weight_map" names the
// shard of every tensor) or, without an index, as the single file model.safetensors.
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#define GL_SAFETENSORS_MAX_DIMS 8
#define GL_SAFETENSORS_MAX_HEADER                                                                  \
    (100u * 1024u * 1024u) // bytes of JSON header we accept (HF: 100 MB)
#define GL_SAFETENSORS_MAX_SHARDS 4096

enum gl_safetensors_dtype {
    GL_SAFETENSORS_DTYPE_F32,
    GL_SAFETENSORS_DTYPE_F16,
    GL_SAFETENSORS_DTYPE_BF16
};

const char *gl_safetensors_dtype_name(enum gl_safetensors_dtype t); // "F32", "F16", "BF16"
size_t gl_safetensors_dtype_size(enum gl_safetensors_dtype t);      // bytes per element: 4, 2, 2

// One tensor as the reader sees it; every field borrowed from the open gl_safetensors.
struct gl_safetensors_tensor {
    const char *name;
    enum gl_safetensors_dtype dtype;
    int ndim; // 0..GL_SAFETENSORS_MAX_DIMS (0: a scalar, one element)
    int64_t
        shape[GL_SAFETENSORS_MAX_DIMS]; // row-major (PyTorch) order: shape[ndim-1] varies fastest
    const void *data;                   // nbytes bytes inside the mapping; no alignment promised
    uint64_t nbytes;                    // product(shape) * dtype size
    int shard;                          // index of the file holding it (gl_safetensors_shard_path)
};

// An open file or folder. Owns its mappings, names and metadata; freed with gl_safetensors_close.
struct gl_safetensors;

// Opens one .safetensors file. GL_E_IO when it cannot be opened or mapped, GL_E_LIMIT for a
// header over GL_SAFETENSORS_MAX_HEADER, GL_E_FORMAT for any malformed header, GL_E_UNSUPPORTED for
// a dtype other than F32/F16/BF16.
GL_MUST_USE gl_status gl_safetensors_open_file(struct gl_safetensors **out, const char *path,
                                               struct gl_err *err);
// Same checks on a file image in memory (borrowed: buf must outlive the handle); `label` names
// it in messages. For tests and fuzzing.
GL_MUST_USE gl_status gl_safetensors_open_memory(struct gl_safetensors **out, const void *buf,
                                                 size_t size, const char *label,
                                                 struct gl_err *err);
// Opens a model folder: model.safetensors.index.json when present (every shard it names is a
// plain file name inside dir; every tensor must sit in the shard the weight_map gives, and every
// shard tensor must be listed), else dir/model.safetensors. Tensor names are unique across shards.
GL_MUST_USE gl_status gl_safetensors_open_dir(struct gl_safetensors **out, const char *dir,
                                              struct gl_err *err);
// A folder (gl_safetensors_open_dir) or a file (gl_safetensors_open_file), decided by stat.
GL_MUST_USE gl_status gl_safetensors_open(struct gl_safetensors **out, const char *path,
                                          struct gl_err *err);
void gl_safetensors_close(
    struct gl_safetensors *s); // NULL-safe; invalidates every pointer handed out

// Lookup by exact name (binary search); NULL when absent.
const struct gl_safetensors_tensor *gl_safetensors_find(const struct gl_safetensors *s,
                                                        const char *name);
int64_t gl_safetensors_n_tensors(const struct gl_safetensors *s);
// Tensors in name order; i in [0, gl_safetensors_n_tensors).
const struct gl_safetensors_tensor *gl_safetensors_tensor_at(const struct gl_safetensors *s,
                                                             int64_t i);
// The "__metadata__" string value of key in the first shard that has it; NULL when absent.
const char *gl_safetensors_metadata(const struct gl_safetensors *s, const char *key);
int gl_safetensors_n_shards(const struct gl_safetensors *s);
const char *gl_safetensors_shard_path(const struct gl_safetensors *s, int shard);

// ---- writer ----
// Collects tensor declarations and metadata, then writes one file: the JSON header (tensors in
// declaration order and back to back, as HF's reader requires; the header padded with spaces so
// the data area starts 8-byte aligned, as HF does) followed by the data produced by a fill callback
// in chunks of rows, so multi-GB tensors never sit in memory whole. Strings passed in are copied.
struct gl_safetensors_writer;
struct gl_safetensors_writer *gl_safetensors_writer_new(void);      // NULL on OOM
void gl_safetensors_writer_delete(struct gl_safetensors_writer *w); // NULL-safe
// GL_E_INVAL for a duplicate key or name, a bad shape or "__metadata__" as a tensor name.
GL_MUST_USE gl_status gl_safetensors_writer_add_meta(struct gl_safetensors_writer *w,
                                                     const char *key, const char *value,
                                                     struct gl_err *err);
// Declares a tensor; returns its index (0, 1, ... in call order) or -1 with err set.
int64_t gl_safetensors_writer_add_tensor(struct gl_safetensors_writer *w, const char *name,
                                         enum gl_safetensors_dtype dtype, int ndim,
                                         const int64_t *shape, struct gl_err *err);
// Fill callback: writes rows [row0, row0 + n_rows) of tensor ti into dst (a row is
// shape[ndim-1] elements; a 0/1-dim tensor is one row).
typedef gl_status (*gl_safetensors_fill_fn)(void *ctx, int64_t ti, int64_t row0, int64_t n_rows,
                                            void *dst, struct gl_err *err);
// Writes path (replaced; removed again on failure). fill NULL: zeros.
GL_MUST_USE gl_status gl_safetensors_writer_write(struct gl_safetensors_writer *w, const char *path,
                                                  gl_safetensors_fill_fn fill, void *ctx,
                                                  struct gl_err *err);

// Writes dir/model.safetensors.index.json: {"metadata": {"total_size": total_size},
// "weight_map": {names[i]: files[i]}}. Strings are JSON-escaped. GL_E_IO on a write failure.
GL_MUST_USE gl_status gl_safetensors_write_index(const char *dir, const char *const *names,
                                                 const char *const *files, int64_t n,
                                                 uint64_t total_size, struct gl_err *err);
