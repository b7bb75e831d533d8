// SPDX-License-Identifier: MIT
// gguf writer: collects metadata (encoded on add, so the writer owns plain bytes) and tensor
// infos, then streams a GGUF v3 file through buffered stdio: header, KVs, tensor infos, zero
// padding to the alignment, and each tensor's data produced by the caller's fill callback in
// chunks of whole rows of at most WRITE_CHUNK_BYTES, each tensor padded to the alignment.
// Invariant: what it writes is accepted by gl_gguf_open (same limits, same validation rules).
// A failed write removes the partial file.
#include "gguf/gguf.h"

#include "gguf/gguf_int.h"
#include "quant/quant.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WRITE_CHUNK_BYTES ((uint64_t)64 << 20) // fill granularity: bounds the row buffer
#define STDIO_BUF_BYTES   ((size_t)1 << 20)

struct wkv {
    char *key;    // owned, NUL-terminated
    uint8_t *enc; // owned: u32 value type + value, exactly as on disk
    size_t enc_len;
};

struct wtensor {
    char *name; // owned, NUL-terminated
    uint32_t n_dims;
    int64_t ne[GL_GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t row_bytes; // bytes of ne[0] elements
    uint64_t n_rows;    // ne[1] * ne[2] * ne[3]
    uint64_t offset;    // in the data section, assigned at write time
};

struct gl_gguf_writer {
    struct wkv *kvs;
    int64_t n_kv, cap_kv;
    struct wtensor *tensors;
    int64_t n_tensors, cap_tensors;
};

// Output state: every put goes through here so one error check covers the whole stream.
struct wout {
    FILE *f;
    uint64_t pos;
    int failed;
};

struct gl_gguf_writer *gl_gguf_writer_new(void)
{
    return gl_calloc(1, sizeof(struct gl_gguf_writer));
}

void gl_gguf_writer_delete(struct gl_gguf_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        gl_free(w->kvs[i].key);
        gl_free(w->kvs[i].enc);
    }
    for (int64_t i = 0; i < w->n_tensors; i++)
        gl_free(w->tensors[i].name);
    gl_free(w->kvs);
    gl_free(w->tensors);
    gl_free(w);
}

// ---- encoding ----

static void put_le(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

// Linear scan: writers hold tens of keys; the reader's limit caps the worst case.
static const struct wkv *find_wkv(const struct gl_gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0)
            return &w->kvs[i];
    return NULL;
}

// Appends key with enc (taking ownership of enc in all cases).
static gl_status add_encoded(struct gl_gguf_writer *w, const char *key, uint8_t *enc,
                             size_t enc_len)
{
    gl_status st = GL_OK;
    if (!enc)
        return GL_E_NOMEM;
    if (!key || !key[0] || find_wkv(w, key))
        st = GL_E_INVAL;
    else if (w->n_kv >= GL_GGUF_MAX_KV)
        st = GL_E_LIMIT;
    if (st == GL_OK && w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        struct wkv *k = gl_realloc(w->kvs, (size_t)cap * sizeof *k);
        if (k) {
            w->kvs = k;
            w->cap_kv = cap;
        } else {
            st = GL_E_NOMEM;
        }
    }
    char *kcopy = st == GL_OK ? gl_strdup(key) : NULL;
    if (st == GL_OK && !kcopy)
        st = GL_E_NOMEM;
    if (st != GL_OK) {
        gl_free(enc);
        return st;
    }
    w->kvs[w->n_kv++] = (struct wkv){.key = kcopy, .enc = enc, .enc_len = enc_len};
    return GL_OK;
}

static gl_status add_scalar(struct gl_gguf_writer *w, const char *key, enum gl_gguf_vtype t,
                            uint64_t bits)
{
    size_t sz = gl_gguf__scalar_size(t);
    uint8_t *enc = gl_malloc(4 + sz);
    if (enc) {
        put_le(enc, t, 4);
        put_le(enc + 4, bits, sz);
    }
    return add_encoded(w, key, enc, 4 + sz);
}

gl_status gl_gguf_writer_add_u32(struct gl_gguf_writer *w, const char *key, uint32_t v)
{
    return add_scalar(w, key, GL_GGUF_U32, v);
}

gl_status gl_gguf_writer_add_i32(struct gl_gguf_writer *w, const char *key, int32_t v)
{
    return add_scalar(w, key, GL_GGUF_I32, (uint32_t)v);
}

gl_status gl_gguf_writer_add_u64(struct gl_gguf_writer *w, const char *key, uint64_t v)
{
    return add_scalar(w, key, GL_GGUF_U64, v);
}

gl_status gl_gguf_writer_add_f32(struct gl_gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return add_scalar(w, key, GL_GGUF_F32, bits);
}

gl_status gl_gguf_writer_add_bool(struct gl_gguf_writer *w, const char *key, int v)
{
    return add_scalar(w, key, GL_GGUF_BOOL, v != 0);
}

gl_status gl_gguf_writer_add_str(struct gl_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return GL_E_INVAL;
    size_t len = strlen(v);
    uint8_t *enc = gl_malloc(12 + len);
    if (enc) {
        put_le(enc, GL_GGUF_STR, 4);
        put_le(enc + 4, len, 8);
        memcpy(enc + 12, v, len);
    }
    return add_encoded(w, key, enc, 12 + len);
}

gl_status gl_gguf_writer_add_arr(struct gl_gguf_writer *w, const char *key,
                                 enum gl_gguf_vtype elem_type, const void *data, uint64_t n)
{
    size_t esz = gl_gguf__scalar_size(elem_type);
    uint64_t bytes;
    if (esz == 0 || (n > 0 && !data))
        return GL_E_INVAL;
    if (!gl_mul_ok(n, esz, &bytes) || bytes > SIZE_MAX - 16)
        return GL_E_LIMIT;
    uint8_t *enc = gl_malloc((size_t)bytes + 16);
    if (enc) {
        put_le(enc, GL_GGUF_ARR, 4);
        put_le(enc + 4, elem_type, 4);
        put_le(enc + 8, n, 8);
        // Elements are taken in host order; the format and every supported host are little-endian.
        if (bytes)
            memcpy(enc + 16, data, (size_t)bytes);
        for (uint64_t i = 0; elem_type == GL_GGUF_BOOL && i < n; i++)
            enc[16 + i] = enc[16 + i] != 0; // the reader accepts only 0 and 1
    }
    return add_encoded(w, key, enc, (size_t)bytes + 16);
}

gl_status gl_gguf_writer_add_arr_str(struct gl_gguf_writer *w, const char *key,
                                     const char *const *strs, const uint64_t *lens, uint64_t n)
{
    uint64_t bytes = 16;
    if (n > 0 && !strs)
        return GL_E_INVAL;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i])
            return GL_E_INVAL;
        uint64_t len = lens ? lens[i] : strlen(strs[i]);
        if (!gl_add_ok(bytes, 8, &bytes) || !gl_add_ok(bytes, len, &bytes) || bytes > SIZE_MAX)
            return GL_E_LIMIT;
    }
    uint8_t *enc = gl_malloc((size_t)bytes);
    if (enc) {
        put_le(enc, GL_GGUF_ARR, 4);
        put_le(enc + 4, GL_GGUF_STR, 4);
        put_le(enc + 8, n, 8);
        uint8_t *p = enc + 16;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t len = lens ? lens[i] : strlen(strs[i]);
            put_le(p, len, 8);
            if (len)
                memcpy(p + 8, strs[i], (size_t)len);
            p += 8 + len;
        }
    }
    return add_encoded(w, key, enc, (size_t)bytes);
}

// ---- tensors ----

// Same rules as the reader: n_dims 1..4, every ne >= 1, a sizable type, whole blocks per row,
// and no overflow of the element count or the byte size.
static int tensor_shape_ok(struct wtensor *t)
{
    const struct gl_type_traits *tr = gl_type_traits_of(t->type);
    if (!tr || !tr->name || tr->blck_size <= 0 || tr->type_size == 0)
        return 0;
    if (t->n_dims < 1 || t->n_dims > GL_GGUF_MAX_DIMS)
        return 0;
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (t->ne[d] < 1 || !gl_mul_ok(n_elems, (uint64_t)t->ne[d], &n_elems) ||
            n_elems > (uint64_t)INT64_MAX)
            return 0;
    if (t->ne[0] % tr->blck_size != 0)
        return 0;
    uint64_t n_bytes;
    t->n_rows = n_elems / (uint64_t)t->ne[0];
    return gl_mul_ok((uint64_t)(t->ne[0] / tr->blck_size), tr->type_size, &t->row_bytes) &&
           gl_mul_ok(t->row_bytes, t->n_rows, &n_bytes);
}

int64_t gl_gguf_writer_add_tensor(struct gl_gguf_writer *w, const char *name, uint32_t n_dims,
                                  const int64_t *ne, uint32_t type)
{
    if (!name || !name[0] || !ne || n_dims < 1 || n_dims > GL_GGUF_MAX_DIMS ||
        w->n_tensors >= GL_GGUF_MAX_TENSORS)
        return -1;
    // Linear duplicate scan: O(n^2) over ~1k tensors is well under a millisecond.
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return -1;
    struct wtensor t = {.n_dims = n_dims, .type = type, .ne = {1, 1, 1, 1}};
    memcpy(t.ne, ne, n_dims * sizeof *ne);
    if (!tensor_shape_ok(&t))
        return -1;
    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        struct wtensor *p = gl_realloc(w->tensors, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        w->tensors = p;
        w->cap_tensors = cap;
    }
    t.name = gl_strdup(name);
    if (!t.name)
        return -1;
    w->tensors[w->n_tensors] = t;
    return w->n_tensors++;
}

// ---- output ----

static void out_put(struct wout *o, const void *p, size_t n)
{
    if (!o->failed && n > 0 && fwrite(p, 1, n, o->f) != n)
        o->failed = 1;
    o->pos += n;
}

static void out_u32(struct wout *o, uint32_t v)
{
    uint8_t b[4];
    put_le(b, v, 4);
    out_put(o, b, 4);
}

static void out_u64(struct wout *o, uint64_t v)
{
    uint8_t b[8];
    put_le(b, v, 8);
    out_put(o, b, 8);
}

static void out_pad(struct wout *o, uint32_t alignment)
{
    static const uint8_t zeros[256];
    uint64_t pad = (alignment - o->pos % alignment) % alignment;
    while (pad > 0) {
        size_t n = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        out_put(o, zeros, n);
        pad -= n;
    }
}

static gl_status pick_alignment(const struct gl_gguf_writer *w, uint32_t *out, struct gl_err *err)
{
    const struct wkv *kv = find_wkv(w, GL_GGUF__ALIGNMENT_KEY);
    *out = GL_GGUF__DEFAULT_ALIGNMENT;
    if (!kv)
        return GL_OK;
    uint32_t a = 0;
    if (get_le(kv->enc, 4) == GL_GGUF_U32)
        a = (uint32_t)get_le(kv->enc + 4, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return gl_err_set(err, GL_E_INVAL, "gguf: writer: %s must be a u32 non-zero power of two",
                          GL_GGUF__ALIGNMENT_KEY);
    *out = a;
    return GL_OK;
}

// Lays the tensors out back to back, each starting on a multiple of the alignment.
static gl_status assign_offsets(struct gl_gguf_writer *w, uint32_t alignment, struct gl_err *err)
{
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        struct wtensor *t = &w->tensors[i];
        t->offset = off;
        if (!gl_add_ok(off, t->row_bytes * t->n_rows, &off) || !gl_add_ok(off, alignment - 1, &off))
            return gl_err_set(err, GL_E_LIMIT, "gguf: writer: tensor \"%s\" ends past 2^64 bytes",
                              t->name);
        off = off / alignment * alignment;
    }
    return GL_OK;
}

static void write_header(const struct gl_gguf_writer *w, struct wout *o)
{
    out_u32(o, GL_GGUF__MAGIC);
    out_u32(o, GL_GGUF__VERSION);
    out_u64(o, (uint64_t)w->n_tensors);
    out_u64(o, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        size_t klen = strlen(w->kvs[i].key);
        out_u64(o, klen);
        out_put(o, w->kvs[i].key, klen);
        out_put(o, w->kvs[i].enc, w->kvs[i].enc_len);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        size_t nlen = strlen(t->name);
        out_u64(o, nlen);
        out_put(o, t->name, nlen);
        out_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            out_u64(o, (uint64_t)t->ne[d]);
        out_u32(o, t->type);
        out_u64(o, t->offset);
    }
}

// Streams tensor ti in chunks of whole rows through buf (buf_bytes >= one chunk).
static gl_status write_tensor(struct gl_gguf_writer *w, struct wout *o, int64_t ti, uint8_t *buf,
                              uint64_t chunk_rows, gl_gguf_fill_fn fill, void *ctx,
                              struct gl_err *err)
{
    const struct wtensor *t = &w->tensors[ti];
    for (uint64_t row0 = 0; row0 < t->n_rows && !o->failed; row0 += chunk_rows) {
        uint64_t nr = t->n_rows - row0 < chunk_rows ? t->n_rows - row0 : chunk_rows;
        size_t n = (size_t)(nr * t->row_bytes);
        if (!fill) {
            memset(buf, 0, n);
        } else {
            if (err)
                err->msg[0] = '\0';
            gl_status st = fill(ctx, ti, (int64_t)row0, (int64_t)nr, buf, err);
            if (st != GL_OK) {
                if (err && !err->msg[0])
                    gl_err_set(err, st,
                               "gguf: writer: fill failed for tensor \"%s\" rows "
                               "[%llu, %llu)",
                               t->name, (unsigned long long)row0, (unsigned long long)(row0 + nr));
                return st;
            }
        }
        out_put(o, buf, n);
    }
    return GL_OK;
}

static gl_status write_data(struct gl_gguf_writer *w, struct wout *o, uint32_t alignment,
                            gl_gguf_fill_fn fill, void *ctx, struct gl_err *err)
{
    uint64_t buf_bytes = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        uint64_t rows = WRITE_CHUNK_BYTES / t->row_bytes;
        rows = rows < 1 ? 1 : (rows > t->n_rows ? t->n_rows : rows);
        if (rows * t->row_bytes > buf_bytes)
            buf_bytes = rows * t->row_bytes;
    }
    uint8_t *buf = buf_bytes ? gl_malloc_aligned((size_t)buf_bytes) : NULL;
    if (buf_bytes && !buf)
        return gl_err_set(err, GL_E_NOMEM, "gguf: writer: no memory for a %llu-byte row buffer",
                          (unsigned long long)buf_bytes);
    gl_status st = GL_OK;
    for (int64_t i = 0; i < w->n_tensors && st == GL_OK && !o->failed; i++) {
        const struct wtensor *t = &w->tensors[i];
        uint64_t rows = WRITE_CHUNK_BYTES / t->row_bytes;
        GL_ASSERT(o->pos % alignment == 0);
        st = write_tensor(w, o, i, buf, rows < 1 ? 1 : rows, fill, ctx, err);
        out_pad(o, alignment);
    }
    gl_free_aligned(buf);
    return st;
}

gl_status gl_gguf_writer_write(struct gl_gguf_writer *w, const char *path, int header_only,
                               gl_gguf_fill_fn fill, void *ctx, struct gl_err *err)
{
    uint32_t alignment;
    gl_status st = pick_alignment(w, &alignment, err);
    if (st == GL_OK)
        st = assign_offsets(w, alignment, err);
    if (st != GL_OK)
        return st;
    struct wout o = {.f = fopen(path, "wb")};
    if (!o.f)
        return gl_err_set(err, GL_E_IO, "gguf: writer: cannot create %s: %s", path,
                          strerror(errno));
    setvbuf(o.f, NULL, _IOFBF, STDIO_BUF_BYTES);
    write_header(w, &o);
    if (!header_only) {
        out_pad(&o, alignment);
        st = write_data(w, &o, alignment, fill, ctx, err);
    }
    if (fclose(o.f) != 0)
        o.failed = 1;
    if (st == GL_OK && o.failed)
        st = gl_err_set(err, GL_E_IO, "gguf: writer: write to %s failed near byte %llu", path,
                        (unsigned long long)o.pos);
    if (st != GL_OK)
        unlink(path);
    return st;
}

// ---- sticky-status key runs ----

void gl_gguf_keys_u32(struct gl_gguf_keys *k, const char *key, uint32_t v)
{
    if (k->st == GL_OK)
        k->st = gl_gguf_writer_add_u32(k->w, key, v);
}

void gl_gguf_keys_f32(struct gl_gguf_keys *k, const char *key, float v)
{
    if (k->st == GL_OK)
        k->st = gl_gguf_writer_add_f32(k->w, key, v);
}

void gl_gguf_keys_bool(struct gl_gguf_keys *k, const char *key, int v)
{
    if (k->st == GL_OK)
        k->st = gl_gguf_writer_add_bool(k->w, key, v);
}

void gl_gguf_keys_str(struct gl_gguf_keys *k, const char *key, const char *v)
{
    if (k->st == GL_OK)
        k->st = gl_gguf_writer_add_str(k->w, key, v);
}
