// SPDX-License-Identifier: MIT
// gguf reader: maps (or reads) a GGUF v2/v3 file and validates all of it at open time, so every
// accessor afterwards is a plain lookup. The parser treats the bytes as hostile: each read is
// checked against the bytes left, every count is capped by a named limit and by what the rest of
// the file could hold (so allocations stay O(file size)), and every tensor's [offset, end) is
// checked against the data section. Errors name the key or tensor and its byte offset.
// Format: see the layout comment in gguf.h (ggml's GGUF v3, little-endian).
#include "gguf/gguf.h"

#include "gguf/gguf_int.h"
#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Smallest encodings, used to bound counts by the bytes left before allocating anything:
// a KV is key length (8) + type (4) + a 1-byte value; a tensor info is name length (8) + n_dims
// (4) + one ne (8) + type (4) + offset (8); a string is its length field (8).
#define MIN_KV_BYTES     13u
#define MIN_TENSOR_BYTES 32u
#define MIN_STR_BYTES    8u
#define HEADER_BYTES     24u
#define NAME_SHOW_MAX    80 // longest key/tensor name echoed in an error message

struct gl_gguf {
    const uint8_t *base; // whole file: the mapping, the heap copy, or the caller's buffer
    uint64_t size;
    void *map;  // owned mapping (NULL unless mmapped)
    void *heap; // owned heap copy (NULL unless read with use_mmap = 0)
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; // file offset of the data section (may equal or pass size if no data)
    int64_t n_kv;
    int64_t n_tensors;
    struct gl_gguf_kv *kvs;         // n_kv, owned; STR arrays own their arr.strs tables
    struct gl_gguf_tensor *tensors; // n_tensors, owned
    // Open-addressing hash indexes: slot holds index + 1, 0 = empty; capacity = mask + 1.
    uint32_t *kv_slots;
    uint64_t kv_mask;
    uint32_t *tensor_slots;
    uint64_t tensor_mask;
};

// Parse state: a cursor over the file plus the "where" of the item being parsed, so that every
// error message can say which key or tensor was at fault without threading names everywhere.
struct parser {
    const uint8_t *p;
    uint64_t size;
    uint64_t pos;
    const char *src; // file path or "<memory>"
    char where[160];
    struct gl_err *err;
};

// ---- small helpers ----

size_t gl_gguf__scalar_size(uint32_t t)
{
    switch (t) {
    case GL_GGUF_U8:
    case GL_GGUF_I8:
    case GL_GGUF_BOOL:
        return 1;
    case GL_GGUF_U16:
    case GL_GGUF_I16:
        return 2;
    case GL_GGUF_U32:
    case GL_GGUF_I32:
    case GL_GGUF_F32:
        return 4;
    case GL_GGUF_U64:
    case GL_GGUF_I64:
    case GL_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

// Copies a (possibly hostile) name into buf for an error message: control bytes and quotes become
// '?', long names are cut with "...".
static const char *show_name(char *buf, size_t cap, const char *s, uint64_t len)
{
    size_t n = len < cap - 4 ? (size_t)len : cap - 4, o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    if (n < len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static gl_status perr(struct parser *ps, gl_status code, const char *fmt, ...) GL_PRINTF(3, 4);
static gl_status perr(struct parser *ps, gl_status code, const char *fmt, ...)
{
    char why[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return gl_err_set(ps->err, code, "gguf: %s: %s%s%s", ps->src, ps->where,
                      ps->where[0] ? ": " : "", why);
}

static uint64_t left(const struct parser *ps)
{
    return ps->size - ps->pos;
}

// Fails unless n more bytes are there; `what` names the field being read.
static gl_status need(struct parser *ps, uint64_t n, const char *what)
{
    if (n <= left(ps))
        return GL_OK;
    return perr(ps, GL_E_FORMAT, "truncated: %s needs %llu bytes at byte %llu, file has %llu", what,
                (unsigned long long)n, (unsigned long long)ps->pos, (unsigned long long)ps->size);
}

static gl_status rd_u32(struct parser *ps, uint32_t *out, const char *what)
{
    gl_status st = need(ps, 4, what);
    if (st != GL_OK)
        return st;
    *out = le32(ps->p + ps->pos);
    ps->pos += 4;
    return GL_OK;
}

static gl_status rd_u64(struct parser *ps, uint64_t *out, const char *what)
{
    gl_status st = need(ps, 8, what);
    if (st != GL_OK)
        return st;
    *out = le64(ps->p + ps->pos);
    ps->pos += 8;
    return GL_OK;
}

static gl_status rd_str(struct parser *ps, struct gl_gguf_str *out, const char *what)
{
    uint64_t at = ps->pos, len;
    gl_status st = rd_u64(ps, &len, what);
    if (st != GL_OK)
        return st;
    if (len > left(ps))
        return perr(ps, GL_E_FORMAT, "%s at byte %llu has length %llu but only %llu bytes are left",
                    what, (unsigned long long)at, (unsigned long long)len,
                    (unsigned long long)left(ps));
    out->ptr = (const char *)ps->p + ps->pos;
    out->len = len;
    ps->pos += len;
    return GL_OK;
}

static uint64_t hash_bytes(const char *s, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a 64
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int str_same(struct gl_gguf_str a, const char *b, uint64_t blen)
{
    return a.len == blen && (blen == 0 || memcmp(a.ptr, b, (size_t)blen) == 0);
}

// ---- values ----

static gl_status parse_scalar(struct parser *ps, uint32_t type, struct gl_gguf_kv *kv)
{
    size_t sz = gl_gguf__scalar_size(type);
    gl_status st = need(ps, sz, "the value");
    if (st != GL_OK)
        return st;
    const uint8_t *q = ps->p + ps->pos;
    switch (type) {
    case GL_GGUF_U8:
        kv->v.u64 = q[0];
        break;
    case GL_GGUF_I8:
        kv->v.i64 = (int8_t)q[0];
        break;
    case GL_GGUF_U16:
        kv->v.u64 = le16(q);
        break;
    case GL_GGUF_I16:
        kv->v.i64 = (int16_t)le16(q);
        break;
    case GL_GGUF_U32:
        kv->v.u64 = le32(q);
        break;
    case GL_GGUF_I32:
        kv->v.i64 = (int32_t)le32(q);
        break;
    case GL_GGUF_U64:
        kv->v.u64 = le64(q);
        break;
    case GL_GGUF_I64:
        kv->v.i64 = (int64_t)le64(q);
        break;
    case GL_GGUF_F32: {
        uint32_t bits = le32(q);
        float f;
        memcpy(&f, &bits, 4);
        kv->v.f64 = (double)f;
        break;
    }
    case GL_GGUF_F64: {
        uint64_t bits = le64(q);
        memcpy(&kv->v.f64, &bits, 8);
        break;
    }
    case GL_GGUF_BOOL:
        if (q[0] > 1)
            return perr(ps, GL_E_FORMAT, "bool value at byte %llu is %u, not 0 or 1",
                        (unsigned long long)ps->pos, q[0]);
        kv->v.u64 = q[0];
        break;
    default:
        GL_ASSERT(!"parse_scalar called with a non-scalar type");
    }
    ps->pos += sz;
    return GL_OK;
}

static gl_status parse_str_array(struct parser *ps, struct gl_gguf_kv *kv, uint64_t n)
{
    // Each string takes at least its 8-byte length, so n is bounded by the bytes left and the
    // table (16 bytes per entry) by twice the file size.
    uint64_t min_bytes;
    if (!gl_mul_ok(n, MIN_STR_BYTES, &min_bytes) || min_bytes > left(ps))
        return perr(
            ps, GL_E_FORMAT, "array of %llu strings at byte %llu cannot fit in the %llu bytes left",
            (unsigned long long)n, (unsigned long long)ps->pos, (unsigned long long)left(ps));
    struct gl_gguf_str *t = gl_malloc((size_t)n * sizeof *t);
    if (!t)
        return perr(ps, GL_E_NOMEM, "no memory for a table of %llu strings", (unsigned long long)n);
    kv->v.arr.strs = t;
    for (uint64_t i = 0; i < n; i++) {
        gl_status st = rd_str(ps, &t[i], "string array element");
        if (st != GL_OK)
            return st;
    }
    return GL_OK;
}

static gl_status parse_array(struct parser *ps, struct gl_gguf_kv *kv)
{
    uint32_t et;
    uint64_t n;
    gl_status st = rd_u32(ps, &et, "the array element type");
    if (st == GL_OK)
        st = rd_u64(ps, &n, "the array count");
    if (st != GL_OK)
        return st;
    if (et == GL_GGUF_ARR)
        return perr(ps, GL_E_FORMAT, "nested arrays are not supported");
    if (et >= GL_GGUF_VTYPE_COUNT)
        return perr(ps, GL_E_FORMAT, "unknown array element type %u", et);
    kv->v.arr.type = (enum gl_gguf_vtype)et;
    kv->v.arr.n = n;
    kv->v.arr.data = ps->p + ps->pos;
    kv->v.arr.strs = NULL;
    if (et == GL_GGUF_STR)
        return parse_str_array(ps, kv, n);

    uint64_t esz = gl_gguf__scalar_size(et), bytes;
    if (!gl_mul_ok(n, esz, &bytes) || bytes > left(ps))
        return perr(ps, GL_E_FORMAT,
                    "array of %llu %s at byte %llu needs more than the %llu bytes left",
                    (unsigned long long)n, gl_gguf_vtype_name(kv->v.arr.type),
                    (unsigned long long)ps->pos, (unsigned long long)left(ps));
    if (et == GL_GGUF_BOOL) {
        for (uint64_t i = 0; i < n; i++)
            if (ps->p[ps->pos + i] > 1)
                return perr(ps, GL_E_FORMAT, "bool element %llu at byte %llu is %u, not 0 or 1",
                            (unsigned long long)i, (unsigned long long)(ps->pos + i),
                            ps->p[ps->pos + i]);
    }
    ps->pos += bytes;
    return GL_OK;
}

static gl_status parse_kv(struct parser *ps, int64_t i, struct gl_gguf_kv *kv)
{
    char name[NAME_SHOW_MAX];
    kv->file_offset = ps->pos;
    snprintf(ps->where, sizeof ps->where, "key %lld (at byte %llu)", (long long)i,
             (unsigned long long)kv->file_offset);
    gl_status st = rd_str(ps, &kv->key, "the key");
    if (st != GL_OK)
        return st;
    if (kv->key.len == 0)
        return perr(ps, GL_E_FORMAT, "empty key");
    snprintf(ps->where, sizeof ps->where, "key \"%s\" (at byte %llu)",
             show_name(name, sizeof name, kv->key.ptr, kv->key.len),
             (unsigned long long)kv->file_offset);
    uint32_t type;
    st = rd_u32(ps, &type, "the value type");
    if (st != GL_OK)
        return st;
    if (type >= GL_GGUF_VTYPE_COUNT)
        return perr(ps, GL_E_FORMAT, "unknown value type %u", type);
    kv->type = (enum gl_gguf_vtype)type;
    if (type == GL_GGUF_STR)
        return rd_str(ps, &kv->v.str, "the string value");
    if (type == GL_GGUF_ARR)
        return parse_array(ps, kv);
    return parse_scalar(ps, type, kv);
}

// ---- tensor infos ----

// Element count and byte size of a tensor; fails on overflow, unknown type or a partial block.
static gl_status size_tensor(struct parser *ps, struct gl_gguf_tensor *t)
{
    const struct gl_type_traits *tr = gl_type_traits_of(t->type);
    if (!tr || !tr->name || tr->blck_size <= 0 || tr->type_size == 0)
        return perr(ps, GL_E_FORMAT, "unknown ggml type %u", t->type);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (!gl_mul_ok(n_elems, (uint64_t)t->ne[d], &n_elems) || n_elems > (uint64_t)INT64_MAX)
            return perr(ps, GL_E_FORMAT, "element count overflows (ne = %lld x %lld x %lld x %lld)",
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3]);
    if (t->ne[0] % tr->blck_size != 0)
        return perr(ps, GL_E_FORMAT, "ne[0] = %lld is not a multiple of the %s block size %lld",
                    (long long)t->ne[0], tr->name, (long long)tr->blck_size);
    uint64_t row_bytes, n_rows = n_elems / (uint64_t)t->ne[0];
    if (!gl_mul_ok((uint64_t)(t->ne[0] / tr->blck_size), tr->type_size, &row_bytes) ||
        !gl_mul_ok(row_bytes, n_rows, &t->n_bytes))
        return perr(ps, GL_E_FORMAT, "byte size overflows");
    return GL_OK;
}

static gl_status parse_tensor_info(struct parser *ps, int64_t i, struct gl_gguf_tensor *t)
{
    char name[NAME_SHOW_MAX];
    uint64_t at = ps->pos;
    snprintf(ps->where, sizeof ps->where, "tensor %lld (info at byte %llu)", (long long)i,
             (unsigned long long)at);
    gl_status st = rd_str(ps, &t->name, "the tensor name");
    if (st != GL_OK)
        return st;
    if (t->name.len == 0)
        return perr(ps, GL_E_FORMAT, "empty tensor name");
    snprintf(ps->where, sizeof ps->where, "tensor \"%s\" (info at byte %llu)",
             show_name(name, sizeof name, t->name.ptr, t->name.len), (unsigned long long)at);
    st = rd_u32(ps, &t->n_dims, "n_dims");
    if (st != GL_OK)
        return st;
    if (t->n_dims < 1 || t->n_dims > GL_GGUF_MAX_DIMS)
        return perr(ps, GL_E_FORMAT, "n_dims = %u, must be 1..%d", t->n_dims, GL_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < GL_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        st = rd_u64(ps, &ne, "ne");
        if (st != GL_OK)
            return st;
        // Zero-sized tensors are refused (the writer refuses them too): no model needs one and
        // they would make "row" arithmetic divide by zero downstream.
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return perr(ps, GL_E_FORMAT, "ne[%u] = %llu, must be 1..2^63-1", d,
                        (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    st = rd_u32(ps, &t->type, "the ggml type");
    if (st == GL_OK)
        st = rd_u64(ps, &t->offset, "the data offset");
    if (st == GL_OK)
        st = size_tensor(ps, t);
    t->data = NULL;
    return st;
}

// ---- indexes ----

static gl_status index_new(uint64_t n, uint32_t **slots, uint64_t *mask)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    *slots = gl_calloc((size_t)cap, sizeof **slots);
    *mask = cap - 1;
    return *slots ? GL_OK : GL_E_NOMEM;
}

// Probes for name; returns the slot holding it, or the empty slot where it would go.
static uint64_t index_probe(const uint32_t *slots, uint64_t mask, const char *s, uint64_t len,
                            const struct gl_gguf_str *(*name_of)(const struct gl_gguf *, uint32_t),
                            const struct gl_gguf *g)
{
    uint64_t h = hash_bytes(s, len) & mask;
    while (slots[h] != 0 && !str_same(*name_of(g, slots[h] - 1), s, len))
        h = (h + 1) & mask;
    return h;
}

static const struct gl_gguf_str *kv_name(const struct gl_gguf *g, uint32_t i)
{
    return &g->kvs[i].key;
}

static const struct gl_gguf_str *tensor_name(const struct gl_gguf *g, uint32_t i)
{
    return &g->tensors[i].name;
}

static gl_status build_kv_index(struct gl_gguf *g, struct parser *ps)
{
    char name[NAME_SHOW_MAX];
    if (index_new((uint64_t)g->n_kv, &g->kv_slots, &g->kv_mask) != GL_OK)
        return perr(ps, GL_E_NOMEM, "no memory for the key index");
    for (int64_t i = 0; i < g->n_kv; i++) {
        const struct gl_gguf_kv *kv = &g->kvs[i];
        uint64_t h = index_probe(g->kv_slots, g->kv_mask, kv->key.ptr, kv->key.len, kv_name, g);
        if (g->kv_slots[h] != 0) {
            const struct gl_gguf_kv *first = &g->kvs[g->kv_slots[h] - 1];
            return perr(ps, GL_E_FORMAT, "duplicate key \"%s\" at bytes %llu and %llu",
                        show_name(name, sizeof name, kv->key.ptr, kv->key.len),
                        (unsigned long long)first->file_offset,
                        (unsigned long long)kv->file_offset);
        }
        g->kv_slots[h] = (uint32_t)i + 1;
    }
    return GL_OK;
}

static gl_status build_tensor_index(struct gl_gguf *g, struct parser *ps)
{
    char name[NAME_SHOW_MAX];
    if (index_new((uint64_t)g->n_tensors, &g->tensor_slots, &g->tensor_mask) != GL_OK)
        return perr(ps, GL_E_NOMEM, "no memory for the tensor index");
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct gl_gguf_tensor *t = &g->tensors[i];
        uint64_t h =
            index_probe(g->tensor_slots, g->tensor_mask, t->name.ptr, t->name.len, tensor_name, g);
        if (g->tensor_slots[h] != 0)
            return perr(ps, GL_E_FORMAT, "duplicate tensor name \"%s\" (tensors %u and %lld)",
                        show_name(name, sizeof name, t->name.ptr, t->name.len),
                        g->tensor_slots[h] - 1, (long long)i);
        g->tensor_slots[h] = (uint32_t)i + 1;
    }
    return GL_OK;
}

// ---- whole file ----

static gl_status parse_header(struct gl_gguf *g, struct parser *ps)
{
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    snprintf(ps->where, sizeof ps->where, "header");
    gl_status st = rd_u32(ps, &magic, "the magic");
    if (st != GL_OK)
        return st;
    if (magic != GL_GGUF__MAGIC)
        return perr(ps, GL_E_FORMAT, "bad magic %02x %02x %02x %02x at byte 0 (want \"GGUF\")",
                    ps->p[0], ps->p[1], ps->p[2], ps->p[3]);
    st = rd_u32(ps, &g->version, "the version");
    if (st != GL_OK)
        return st;
    if (g->version != 2 && g->version != 3)
        return perr(ps, GL_E_UNSUPPORTED, "version %u at byte 4 is not supported (want 2 or 3%s)",
                    g->version, g->version > 0xffff ? "; big-endian file?" : "");
    st = rd_u64(ps, &n_tensors, "n_tensors");
    if (st == GL_OK)
        st = rd_u64(ps, &n_kv, "n_kv");
    if (st != GL_OK)
        return st;
    if (n_tensors > GL_GGUF_MAX_TENSORS || n_kv > GL_GGUF_MAX_KV)
        return perr(ps, GL_E_LIMIT, "n_tensors = %llu, n_kv = %llu (limits %d and %d)",
                    (unsigned long long)n_tensors, (unsigned long long)n_kv, GL_GGUF_MAX_TENSORS,
                    GL_GGUF_MAX_KV);
    // Within the limits this cannot overflow; it keeps the allocations below O(file size).
    if (n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_BYTES > left(ps))
        return perr(ps, GL_E_FORMAT,
                    "n_tensors = %llu and n_kv = %llu cannot fit in the %llu bytes after the "
                    "header",
                    (unsigned long long)n_tensors, (unsigned long long)n_kv,
                    (unsigned long long)left(ps));
    g->n_tensors = (int64_t)n_tensors;
    g->n_kv = (int64_t)n_kv;
    return GL_OK;
}

static gl_status read_alignment(struct gl_gguf *g, struct parser *ps)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, GL_GGUF__ALIGNMENT_KEY);
    g->alignment = GL_GGUF__DEFAULT_ALIGNMENT;
    if (!kv)
        return GL_OK;
    snprintf(ps->where, sizeof ps->where, "key \"%s\" (at byte %llu)", GL_GGUF__ALIGNMENT_KEY,
             (unsigned long long)kv->file_offset);
    if (kv->type != GL_GGUF_U32)
        return perr(ps, GL_E_FORMAT, "type %s, must be u32", gl_gguf_vtype_name(kv->type));
    uint64_t a = kv->v.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return perr(ps, GL_E_FORMAT, "alignment %llu is not a non-zero power of two",
                    (unsigned long long)a);
    g->alignment = (uint32_t)a;
    return GL_OK;
}

static gl_status place_tensors(struct gl_gguf *g, struct parser *ps, int allow_no_data,
                               const uint64_t *info_at)
{
    char name[NAME_SHOW_MAX];
    uint64_t data_size = g->size > g->data_offset ? g->size - g->data_offset : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct gl_gguf_tensor *t = &g->tensors[i];
        snprintf(ps->where, sizeof ps->where, "tensor \"%s\" (info at byte %llu)",
                 show_name(name, sizeof name, t->name.ptr, t->name.len),
                 (unsigned long long)info_at[i]);
        if (t->offset % g->alignment != 0)
            return perr(ps, GL_E_FORMAT, "data offset %llu is not a multiple of the alignment %u",
                        (unsigned long long)t->offset, g->alignment);
        uint64_t end;
        if (!gl_add_ok(t->offset, t->n_bytes, &end))
            return perr(ps, GL_E_FORMAT, "data offset %llu + %llu bytes overflows",
                        (unsigned long long)t->offset, (unsigned long long)t->n_bytes);
        if (end <= data_size)
            t->data = g->base + g->data_offset + t->offset;
        else if (!allow_no_data)
            return perr(ps, GL_E_FORMAT, "data [%llu, %llu) exceeds data section of %llu bytes",
                        (unsigned long long)t->offset, (unsigned long long)end,
                        (unsigned long long)data_size);
    }
    return GL_OK;
}

static gl_status parse_file(struct gl_gguf *g, const char *src, int allow_no_data,
                            struct gl_err *err)
{
    struct parser ps = {.p = g->base, .size = g->size, .src = src, .err = err};
    uint64_t *info_at = NULL;
    gl_status st = parse_header(g, &ps);
    if (st != GL_OK)
        return st;
    g->kvs = gl_calloc((size_t)g->n_kv, sizeof *g->kvs);
    g->tensors = gl_calloc((size_t)g->n_tensors, sizeof *g->tensors);
    info_at = gl_malloc((size_t)g->n_tensors * sizeof *info_at);
    if (!g->kvs || !g->tensors || !info_at) {
        st = perr(&ps, GL_E_NOMEM, "no memory for %lld keys and %lld tensors", (long long)g->n_kv,
                  (long long)g->n_tensors);
        goto done;
    }
    for (int64_t i = 0; i < g->n_kv && st == GL_OK; i++)
        st = parse_kv(&ps, i, &g->kvs[i]);
    for (int64_t i = 0; i < g->n_tensors && st == GL_OK; i++) {
        info_at[i] = ps.pos;
        st = parse_tensor_info(&ps, i, &g->tensors[i]);
    }
    ps.where[0] = '\0';
    if (st == GL_OK)
        st = build_kv_index(g, &ps);
    if (st == GL_OK)
        st = build_tensor_index(g, &ps);
    if (st == GL_OK)
        st = read_alignment(g, &ps);
    if (st == GL_OK) {
        // pos <= size < 2^63 and alignment <= 2^31, so this cannot overflow.
        g->data_offset = (ps.pos + g->alignment - 1) / g->alignment * g->alignment;
        st = place_tensors(g, &ps, allow_no_data, info_at);
    }
done:
    gl_free(info_at);
    return st;
}

// ---- open / close ----

struct gl_gguf_open_params gl_gguf_default_open_params(void)
{
    const char *e = getenv("GLINT_MMAP");
    struct gl_gguf_open_params p = {.use_mmap = !(e && strcmp(e, "0") == 0), .allow_no_data = 0};
    return p;
}

static gl_status finish_open(struct gl_gguf **out, struct gl_gguf *g, const char *src,
                             const struct gl_gguf_open_params *params, struct gl_err *err)
{
    gl_status st = parse_file(g, src, params ? params->allow_no_data : 0, err);
    if (st != GL_OK) {
        gl_gguf_close(g);
        return st;
    }
    *out = g;
    return GL_OK;
}

gl_status gl_gguf_open_memory(struct gl_gguf **out, const void *data, size_t size,
                              const struct gl_gguf_open_params *params, struct gl_err *err)
{
    GL_ASSERT(out && (data || size == 0));
    *out = NULL;
    struct gl_gguf *g = gl_calloc(1, sizeof *g);
    if (!g)
        return gl_err_set(err, GL_E_NOMEM, "gguf: <memory>: no memory");
    g->base = data;
    g->size = size;
    return finish_open(out, g, "<memory>", params, err);
}

static gl_status read_whole(int fd, uint8_t *dst, uint64_t size, const char *path,
                            struct gl_err *err)
{
    uint64_t got = 0;
    while (got < size) {
        size_t chunk = size - got > (1u << 30) ? (1u << 30) : (size_t)(size - got);
        ssize_t r = pread(fd, dst + got, chunk, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return gl_err_set(err, GL_E_IO, "gguf: %s: read failed at byte %llu: %s", path,
                              (unsigned long long)got, r < 0 ? strerror(errno) : "early EOF");
        got += (uint64_t)r;
    }
    return GL_OK;
}

static gl_status load_file(struct gl_gguf *g, int fd, const char *path, int use_mmap,
                           struct gl_err *err)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return gl_err_set(err, GL_E_IO, "gguf: %s: stat failed: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return gl_err_set(err, GL_E_IO, "gguf: %s: not a regular file", path);
    g->size = (uint64_t)sb.st_size;
    if (g->size < HEADER_BYTES)
        return gl_err_set(err, GL_E_FORMAT,
                          "gguf: %s: header: truncated: file has %llu bytes, a header needs %u",
                          path, (unsigned long long)g->size, HEADER_BYTES);
    if (use_mmap) {
        void *m = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            return gl_err_set(err, GL_E_IO, "gguf: %s: mmap of %llu bytes failed: %s", path,
                              (unsigned long long)g->size, strerror(errno));
        (void)madvise(m, (size_t)g->size, MADV_WILLNEED); // start read-ahead; a hint only
        g->map = m;
        g->base = m;
        return GL_OK;
    }
    // Anonymous memory, advised for transparent huge pages before it is touched: decode streams
    // every weight once per token, and 2 MiB pages cut the TLB misses of that stream ~500-fold.
    void *m =
        mmap(NULL, (size_t)g->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return gl_err_set(err, GL_E_NOMEM, "gguf: %s: no memory to read %llu bytes", path,
                          (unsigned long long)g->size);
#ifdef MADV_HUGEPAGE
    (void)madvise(m, (size_t)g->size, MADV_HUGEPAGE);
#endif
    g->heap = m;
    g->base = m;
    return read_whole(fd, g->heap, g->size, path, err);
}

gl_status gl_gguf_open(struct gl_gguf **out, const char *path,
                       const struct gl_gguf_open_params *params, struct gl_err *err)
{
    GL_ASSERT(out && path);
    *out = NULL;
    struct gl_gguf_open_params def = gl_gguf_default_open_params();
    if (!params)
        params = &def;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gl_err_set(err, GL_E_IO, "gguf: %s: cannot open: %s", path, strerror(errno));
    struct gl_gguf *g = gl_calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return gl_err_set(err, GL_E_NOMEM, "gguf: %s: no memory", path);
    }
    gl_status st = load_file(g, fd, path, params->use_mmap, err);
    close(fd); // a mapping stays valid after its descriptor is closed
    if (st != GL_OK) {
        gl_gguf_close(g);
        return st;
    }
    return finish_open(out, g, path, params, err);
}

void gl_gguf_close(struct gl_gguf *g)
{
    if (!g)
        return;
    for (int64_t i = 0; g->kvs && i < g->n_kv; i++)
        if (g->kvs[i].type == GL_GGUF_ARR)
            gl_free((void *)g->kvs[i].v.arr.strs);
    gl_free(g->kvs);
    gl_free(g->tensors);
    gl_free(g->kv_slots);
    gl_free(g->tensor_slots);
    if (g->map)
        munmap(g->map, (size_t)g->size);
    if (g->heap)
        munmap(g->heap, (size_t)g->size);
    gl_free(g);
}

// ---- accessors ----

uint32_t gl_gguf_version(const struct gl_gguf *g)
{
    return g->version;
}
uint64_t gl_gguf_file_size(const struct gl_gguf *g)
{
    return g->size;
}
uint64_t gl_gguf_data_offset(const struct gl_gguf *g)
{
    return g->data_offset;
}
uint32_t gl_gguf_alignment(const struct gl_gguf *g)
{
    return g->alignment;
}
int gl_gguf_is_mmapped(const struct gl_gguf *g)
{
    return g->map != NULL;
}
int64_t gl_gguf_n_kv(const struct gl_gguf *g)
{
    return g->n_kv;
}
int64_t gl_gguf_n_tensors(const struct gl_gguf *g)
{
    return g->n_tensors;
}

const struct gl_gguf_kv *gl_gguf_kv_at(const struct gl_gguf *g, int64_t i)
{
    GL_ASSERT(i >= 0 && i < g->n_kv);
    return &g->kvs[i];
}

const struct gl_gguf_tensor *gl_gguf_tensor_at(const struct gl_gguf *g, int64_t i)
{
    GL_ASSERT(i >= 0 && i < g->n_tensors);
    return &g->tensors[i];
}

const struct gl_gguf_kv *gl_gguf_find_kv(const struct gl_gguf *g, const char *key)
{
    uint64_t h = index_probe(g->kv_slots, g->kv_mask, key, strlen(key), kv_name, g);
    return g->kv_slots[h] ? &g->kvs[g->kv_slots[h] - 1] : NULL;
}

const struct gl_gguf_tensor *gl_gguf_find_tensor(const struct gl_gguf *g, const char *name)
{
    uint64_t h = index_probe(g->tensor_slots, g->tensor_mask, name, strlen(name), tensor_name, g);
    return g->tensor_slots[h] ? &g->tensors[g->tensor_slots[h] - 1] : NULL;
}

int gl_gguf_str_eq(struct gl_gguf_str s, const char *cstr)
{
    return str_same(s, cstr, strlen(cstr));
}

const char *gl_gguf_vtype_name(enum gl_gguf_vtype t)
{
    static const char *const names[GL_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return (unsigned)t < GL_GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

static int is_signed_int(enum gl_gguf_vtype t)
{
    return t == GL_GGUF_I8 || t == GL_GGUF_I16 || t == GL_GGUF_I32 || t == GL_GGUF_I64;
}

static int is_unsigned_int(enum gl_gguf_vtype t)
{
    return t == GL_GGUF_U8 || t == GL_GGUF_U16 || t == GL_GGUF_U32 || t == GL_GGUF_U64;
}

// ---- typed getters ----

static gl_status find_for_get(const struct gl_gguf *g, const char *key,
                              const struct gl_gguf_kv **kv, struct gl_err *err)
{
    *kv = gl_gguf_find_kv(g, key);
    if (!*kv)
        return gl_err_set(err, GL_E_INVAL, "gguf: key \"%s\" is missing", key);
    return GL_OK;
}

static gl_status bad_type(const struct gl_gguf_kv *kv, const char *key, const char *want,
                          struct gl_err *err)
{
    return gl_err_set(err, GL_E_FORMAT, "gguf: key \"%s\" (at byte %llu): type %s, expected %s",
                      key, (unsigned long long)kv->file_offset, gl_gguf_vtype_name(kv->type), want);
}

gl_status gl_gguf_get_u32(const struct gl_gguf *g, const char *key, uint32_t *out,
                          struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = find_for_get(g, key, &kv, err);
    if (st != GL_OK)
        return st;
    if (!is_unsigned_int(kv->type) && !is_signed_int(kv->type))
        return bad_type(kv, key, "an integer", err);
    if (is_signed_int(kv->type) && (kv->v.i64 < 0 || kv->v.i64 > (int64_t)UINT32_MAX))
        return gl_err_set(err, GL_E_FORMAT,
                          "gguf: key \"%s\" (at byte %llu): value %lld does not "
                          "fit in u32",
                          key, (unsigned long long)kv->file_offset, (long long)kv->v.i64);
    if (is_unsigned_int(kv->type) && kv->v.u64 > UINT32_MAX)
        return gl_err_set(err, GL_E_FORMAT,
                          "gguf: key \"%s\" (at byte %llu): value %llu does not "
                          "fit in u32",
                          key, (unsigned long long)kv->file_offset, (unsigned long long)kv->v.u64);
    *out = (uint32_t)kv->v.u64;
    return GL_OK;
}

gl_status gl_gguf_get_f32(const struct gl_gguf *g, const char *key, float *out, struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = find_for_get(g, key, &kv, err);
    if (st != GL_OK)
        return st;
    if (kv->type == GL_GGUF_F32 || kv->type == GL_GGUF_F64)
        *out = (float)kv->v.f64;
    else if (is_signed_int(kv->type))
        *out = (float)kv->v.i64;
    else if (is_unsigned_int(kv->type))
        *out = (float)kv->v.u64;
    else
        return bad_type(kv, key, "a number", err);
    return GL_OK;
}

gl_status gl_gguf_get_bool(const struct gl_gguf *g, const char *key, int *out, struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = find_for_get(g, key, &kv, err);
    if (st != GL_OK)
        return st;
    // Some writers store flags as integers; accept 0/1 from any integer type as well.
    if (kv->type == GL_GGUF_BOOL || (is_unsigned_int(kv->type) && kv->v.u64 <= 1) ||
        (is_signed_int(kv->type) && (kv->v.i64 == 0 || kv->v.i64 == 1))) {
        *out = kv->v.u64 != 0;
        return GL_OK;
    }
    return bad_type(kv, key, "bool (or integer 0/1)", err);
}

gl_status gl_gguf_get_str(const struct gl_gguf *g, const char *key, char **out, struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = find_for_get(g, key, &kv, err);
    if (st != GL_OK)
        return st;
    if (kv->type != GL_GGUF_STR)
        return bad_type(kv, key, "str", err);
    char *s = gl_malloc((size_t)kv->v.str.len + 1);
    if (!s)
        return gl_err_set(err, GL_E_NOMEM, "gguf: key \"%s\": no memory for %llu bytes", key,
                          (unsigned long long)kv->v.str.len);
    memcpy(s, kv->v.str.ptr, (size_t)kv->v.str.len);
    s[kv->v.str.len] = '\0';
    *out = s;
    return GL_OK;
}

// Elements are packed without alignment, so read them byte-wise.
int64_t gl_gguf_arr_get_int(const struct gl_gguf_kv *kv, uint64_t i)
{
    GL_ASSERT(kv->type == GL_GGUF_ARR && i < kv->v.arr.n);
    enum gl_gguf_vtype t = kv->v.arr.type;
    GL_ASSERT(t != GL_GGUF_STR);
    const uint8_t *q = kv->v.arr.data + i * gl_gguf__scalar_size(t);
    switch (t) {
    case GL_GGUF_U8:
    case GL_GGUF_BOOL:
        return q[0];
    case GL_GGUF_I8:
        return (int8_t)q[0];
    case GL_GGUF_U16:
        return le16(q);
    case GL_GGUF_I16:
        return (int16_t)le16(q);
    case GL_GGUF_U32:
        return le32(q);
    case GL_GGUF_I32:
        return (int32_t)le32(q);
    case GL_GGUF_U64:
    case GL_GGUF_I64:
        return (int64_t)le64(q); // u64 > INT64_MAX wraps
    default: {
        double d = gl_gguf_arr_get_float(kv, i);
        if (!(d > -9.2e18 && d < 9.2e18)) // NaN, inf or out of int64 range: saturate
            return d > 0 ? INT64_MAX : (d < 0 ? INT64_MIN : 0);
        return (int64_t)d;
    }
    }
}

double gl_gguf_arr_get_float(const struct gl_gguf_kv *kv, uint64_t i)
{
    GL_ASSERT(kv->type == GL_GGUF_ARR && i < kv->v.arr.n);
    enum gl_gguf_vtype t = kv->v.arr.type;
    GL_ASSERT(t != GL_GGUF_STR);
    const uint8_t *q = kv->v.arr.data + i * gl_gguf__scalar_size(t);
    if (t == GL_GGUF_F32) {
        uint32_t bits = le32(q);
        float f;
        memcpy(&f, &bits, 4);
        return (double)f;
    }
    if (t == GL_GGUF_F64) {
        uint64_t bits = le64(q);
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    if (t == GL_GGUF_U64)
        return (double)le64(q);
    return (double)gl_gguf_arr_get_int(kv, i);
}
