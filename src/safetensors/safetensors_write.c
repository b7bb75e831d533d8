// SPDX-License-Identifier: MIT
// safetensors writer (contract in safetensors.h). The header is built with jansson (so names and
// metadata are escaped correctly), tensors in declaration order and back to back (the header is
// padded so the data area starts 8-byte aligned); data is streamed row chunk by row chunk through
// the caller's fill callback.
#include "safetensors/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN       8
#define CHUNK_BYTES (16u << 20) // data generated per fill call, at most (plus one row)

struct wt {
    char *name;
    enum gl_safetensors_dtype dtype;
    int ndim;
    int64_t shape[GL_SAFETENSORS_MAX_DIMS];
    uint64_t nbytes, offset; // offset: inside the data area, right after the previous tensor
};

struct gl_safetensors_writer {
    json_t *meta; // object of strings (owned)
    struct wt *t;
    int64_t n_t, cap_t;
};

struct gl_safetensors_writer *gl_safetensors_writer_new(void)
{
    struct gl_safetensors_writer *w = gl_calloc(1, sizeof *w);
    if (w && !(w->meta = json_object())) {
        gl_free(w);
        return NULL;
    }
    return w;
}

void gl_safetensors_writer_delete(struct gl_safetensors_writer *w)
{
    if (!w)
        return;
    json_decref(w->meta);
    for (int64_t i = 0; i < w->n_t; i++)
        gl_free(w->t[i].name);
    gl_free(w->t);
    gl_free(w);
}

gl_status gl_safetensors_writer_add_meta(struct gl_safetensors_writer *w, const char *key,
                                         const char *value, struct gl_err *err)
{
    if (json_object_get(w->meta, key))
        return gl_err_set(err, GL_E_INVAL, "safetensors: metadata key %.128s added twice", key);
    json_t *v = json_string(value);
    if (!v || json_object_set_new(w->meta, key, v) != 0)
        return gl_err_set(err, GL_E_INVAL, "safetensors: metadata %.128s is not valid UTF-8", key);
    return GL_OK;
}

int64_t gl_safetensors_writer_add_tensor(struct gl_safetensors_writer *w, const char *name,
                                         enum gl_safetensors_dtype dtype, int ndim,
                                         const int64_t *shape, struct gl_err *err)
{
    if (!name[0] || !strcmp(name, "__metadata__") || ndim < 0 || ndim > GL_SAFETENSORS_MAX_DIMS) {
        gl_err_set(err, GL_E_INVAL, "safetensors: bad tensor name %.128s or %d dims", name, ndim);
        return -1;
    }
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) {
            gl_err_set(err, GL_E_INVAL, "safetensors: tensor %.128s added twice", name);
            return -1;
        }
    struct wt t = {.dtype = dtype, .ndim = ndim};
    uint64_t n = gl_safetensors_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || !gl_mul_ok(n, (uint64_t)shape[i], &n)) {
            gl_err_set(err, GL_E_INVAL, "safetensors: tensor %.128s: bad shape", name);
            return -1;
        }
        t.shape[i] = shape[i];
    }
    t.nbytes = n;
    uint64_t off = 0;
    if (w->n_t > 0) {
        const struct wt *p = &w->t[w->n_t - 1];
        off = p->offset + p->nbytes; // no gaps: HF's reader rejects them (it checks coverage)
    }
    t.offset = off;
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct wt *nt = gl_realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) {
            gl_err_set(err, GL_E_NOMEM, "safetensors: no memory");
            return -1;
        }
        w->t = nt;
        w->cap_t = cap;
    }
    if (!(t.name = gl_strdup(name))) {
        gl_err_set(err, GL_E_NOMEM, "safetensors: no memory");
        return -1;
    }
    w->t[w->n_t] = t;
    return w->n_t++;
}

// The header JSON (owned, NUL-terminated) or NULL with err set.
static char *build_header(const struct gl_safetensors_writer *w, struct gl_err *err)
{
    json_t *root = json_object();
    int ok = root != NULL;
    if (ok && json_object_size(w->meta) > 0)
        ok = json_object_set(root, "__metadata__", w->meta) == 0;
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        const struct wt *t = &w->t[i];
        json_t *e = json_object(), *sh = json_array(), *off = json_array();
        ok = e && sh && off;
        for (int d = 0; ok && d < t->ndim; d++)
            ok = json_array_append_new(sh, json_integer(t->shape[d])) == 0;
        ok = ok && json_array_append_new(off, json_integer((json_int_t)t->offset)) == 0 &&
             json_array_append_new(off, json_integer((json_int_t)(t->offset + t->nbytes))) == 0 &&
             json_object_set_new(e, "dtype", json_string(gl_safetensors_dtype_name(t->dtype))) ==
                 0 &&
             json_object_set(e, "shape", sh) == 0 && json_object_set(e, "data_offsets", off) == 0;
        json_decref(sh);
        json_decref(off);
        ok = ok && json_object_set_new(root, t->name, e) == 0;
        if (!ok && e)
            json_decref(e);
    }
    char *s = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!s)
        gl_err_set(err, GL_E_NOMEM,
                   "safetensors: building the header failed (invalid UTF-8 name?)");
    return s;
}

static gl_status write_all(FILE *f, const void *p, size_t n, const char *path, struct gl_err *err)
{
    if (n && fwrite(p, 1, n, f) != n)
        return gl_err_set(err, GL_E_IO, "safetensors: %s: write failed: %s", path, strerror(errno));
    return GL_OK;
}

static gl_status write_body(const struct gl_safetensors_writer *w, FILE *f, const char *path,
                            gl_safetensors_fill_fn fill, void *ctx, struct gl_err *err)
{
    char *hdr = build_header(w, err);
    if (!hdr)
        return err ? err->code : GL_E_NOMEM;
    size_t hl = strlen(hdr);
    size_t padded = (8 + hl + ALIGN - 1) / ALIGN * ALIGN - 8; // data area starts ALIGN-aligned
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    static const char spaces[ALIGN] = "        ";
    gl_status st = write_all(f, len8, 8, path, err);
    if (st == GL_OK)
        st = write_all(f, hdr, hl, path, err);
    if (st == GL_OK)
        st = write_all(f, spaces, padded - hl, path, err);
    gl_free(hdr);
    uint8_t *buf = NULL;
    size_t buf_cap = 0;
    for (int64_t i = 0; st == GL_OK && i < w->n_t; i++) {
        const struct wt *t = &w->t[i];
        int64_t n_rows = 1, row_elems = t->ndim ? t->shape[t->ndim - 1] : 1;
        for (int d = 0; d + 1 < t->ndim; d++)
            n_rows *= t->shape[d];
        if (t->nbytes == 0)
            n_rows = 0;
        const size_t row_bytes = (size_t)row_elems * gl_safetensors_dtype_size(t->dtype);
        int64_t chunk = row_bytes ? (int64_t)(CHUNK_BYTES / row_bytes) : 1;
        chunk = chunk < 1 ? 1 : chunk;
        for (int64_t r = 0; st == GL_OK && r < n_rows; r += chunk) {
            int64_t nr = n_rows - r < chunk ? n_rows - r : chunk;
            size_t nb = (size_t)nr * row_bytes;
            if (nb > buf_cap) {
                gl_free(buf);
                buf_cap = nb;
                if (!(buf = gl_malloc(buf_cap))) {
                    st = gl_err_set(err, GL_E_NOMEM, "safetensors: no memory for %zu bytes", nb);
                    break;
                }
            }
            if (fill)
                st = fill(ctx, i, r, nr, buf, err);
            else
                memset(buf, 0, nb);
            if (st == GL_OK)
                st = write_all(f, buf, nb, path, err);
        }
    }
    gl_free(buf);
    return st;
}

gl_status gl_safetensors_writer_write(struct gl_safetensors_writer *w, const char *path,
                                      gl_safetensors_fill_fn fill, void *ctx, struct gl_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return gl_err_set(err, GL_E_IO, "safetensors: %s: cannot create: %s", path,
                          strerror(errno));
    gl_status st = write_body(w, f, path, fill, ctx, err);
    if (fclose(f) != 0 && st == GL_OK)
        st = gl_err_set(err, GL_E_IO, "safetensors: %s: close failed: %s", path, strerror(errno));
    if (st != GL_OK)
        unlink(path);
    return st;
}

gl_status gl_safetensors_write_index(const char *dir, const char *const *names,
                                     const char *const *files, int64_t n, uint64_t total_size,
                                     struct gl_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_t *root = json_object(), *md = json_object(), *wm = json_object();
    int ok = root && md && wm &&
             json_object_set_new(md, "total_size", json_integer((json_int_t)total_size)) == 0;
    for (int64_t i = 0; ok && i < n; i++)
        ok = json_object_set_new(wm, names[i], json_string(files[i])) == 0;
    ok = ok && json_object_set(root, "metadata", md) == 0 &&
         json_object_set(root, "weight_map", wm) == 0;
    json_decref(md);
    json_decref(wm);
    gl_status st = GL_OK;
    if (!ok)
        st = gl_err_set(err, GL_E_NOMEM, "safetensors: %s: building the index failed", path);
    else if (json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
        st = gl_err_set(err, GL_E_IO, "safetensors: %s: write failed", path);
    json_decref(root);
    return st;
}
