// SPDX-License-Identifier: MIT
// safetensors reader (contract in safetensors.h). The header is parsed with jansson and checked
// completely before any tensor is handed out, so callers may trust every pointer and size.
#include "safetensors/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_NAME  "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define MAX_INDEX   (64u * 1024u * 1024u) // bytes of index JSON we accept

struct st_meta {
    char *key, *value;
};

struct st_shard {
    char *path;      // owned
    void *map;       // owned mapping (NULL for a memory image or an empty data area)
    size_t map_size; // bytes mapped
    struct st_meta *meta;
    int64_t n_meta;
};

struct gl_safetensors {
    struct st_shard *shards;
    int n_shards;
    struct gl_safetensors_tensor *t; // sorted by name; names owned
    int64_t n_t, cap_t;
};

const char *gl_safetensors_dtype_name(enum gl_safetensors_dtype t)
{
    switch (t) {
    case GL_SAFETENSORS_DTYPE_F32:
        return "F32";
    case GL_SAFETENSORS_DTYPE_F16:
        return "F16";
    case GL_SAFETENSORS_DTYPE_BF16:
        return "BF16";
    }
    return "?";
}

size_t gl_safetensors_dtype_size(enum gl_safetensors_dtype t)
{
    return t == GL_SAFETENSORS_DTYPE_F32 ? 4 : 2;
}

// dtype strings of the safetensors spec that we know but do not compute with.
static const char *const other_dtypes[] = {
    "F64",  "I64",     "I32",     "I16",     "I8", "U64",     "U32",     "U16", "U8",
    "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

void gl_safetensors_close(struct gl_safetensors *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_shards; i++) {
        struct st_shard *sh = &s->shards[i];
        if (sh->map)
            munmap(sh->map, sh->map_size);
        for (int64_t j = 0; j < sh->n_meta; j++) {
            gl_free(sh->meta[j].key);
            gl_free(sh->meta[j].value);
        }
        gl_free(sh->meta);
        gl_free(sh->path);
    }
    gl_free(s->shards);
    for (int64_t i = 0; i < s->n_t; i++)
        gl_free((char *)s->t[i].name);
    gl_free(s->t);
    gl_free(s);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct gl_safetensors_tensor *)a)->name,
                  ((const struct gl_safetensors_tensor *)b)->name);
}

// Tensor extents of one file for the overlap check.
struct span {
    uint64_t begin, end;
    const char *name;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static gl_status add_shard(struct gl_safetensors *s, const char *path, struct gl_err *err)
{
    if (s->n_shards >= GL_SAFETENSORS_MAX_SHARDS)
        return gl_err_set(err, GL_E_LIMIT, "safetensors: %s: more than %d shards", path,
                          GL_SAFETENSORS_MAX_SHARDS);
    struct st_shard *sh = gl_realloc(s->shards, (size_t)(s->n_shards + 1) * sizeof *sh);
    if (!sh)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory", path);
    s->shards = sh;
    sh = &s->shards[s->n_shards];
    memset(sh, 0, sizeof *sh);
    sh->path = gl_strdup(path);
    if (!sh->path)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory", path);
    s->n_shards++;
    return GL_OK;
}

// Non-negative JSON integer -> u64; 0 when it is not one.
static int json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static gl_status parse_metadata(struct st_shard *sh, const json_t *md, const char *path,
                                struct gl_err *err)
{
    if (!json_is_object(md))
        return gl_err_set(err, GL_E_FORMAT, "safetensors: %s: __metadata__ is not an object", path);
    size_t n = json_object_size(md);
    sh->meta = gl_calloc(n ? n : 1, sizeof *sh->meta);
    if (!sh->meta)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory for metadata", path);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)md, k, v)
    {
        if (!json_is_string(v))
            return gl_err_set(err, GL_E_FORMAT,
                              "safetensors: %s: __metadata__ value of \"%.64s\" is not a string",
                              path, k);
        struct st_meta *m = &sh->meta[sh->n_meta++];
        m->key = gl_strdup(k);
        m->value = gl_strdup(json_string_value(v));
        if (!m->key || !m->value)
            return gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory for metadata", path);
    }
    return GL_OK;
}

// dtype string -> enum; other dtypes of the spec are GL_E_UNSUPPORTED, unknown ones GL_E_FORMAT.
static gl_status parse_dtype(const char *ds, const char *path, const char *name,
                             enum gl_safetensors_dtype *out, struct gl_err *err)
{
    static const struct {
        const char *s;
        enum gl_safetensors_dtype t;
    } ok[] = {{"F32", GL_SAFETENSORS_DTYPE_F32},
              {"F16", GL_SAFETENSORS_DTYPE_F16},
              {"BF16", GL_SAFETENSORS_DTYPE_BF16}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(ds, ok[i].s)) {
            *out = ok[i].t;
            return GL_OK;
        }
    for (size_t i = 0; i < sizeof other_dtypes / sizeof other_dtypes[0]; i++)
        if (!strcmp(ds, other_dtypes[i]))
            return gl_err_set(err, GL_E_UNSUPPORTED,
                              "safetensors: %s: tensor %.128s: dtype %s is not supported (only "
                              "F32, F16, BF16)",
                              path, name, ds);
    return gl_err_set(err, GL_E_FORMAT, "safetensors: %s: tensor %.128s: unknown dtype \"%.32s\"",
                      path, name, ds);
}

// Validates one tensor entry and appends it. data_size: bytes of the data area.
static gl_status parse_tensor(struct gl_safetensors *s, int shard, const uint8_t *data,
                              uint64_t data_size, const char *name, const json_t *e,
                              struct span *sp, struct gl_err *err)
{
    const char *path = s->shards[shard].path;
    if (!json_is_object(e))
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: entry is not an object", path, name);
    const json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
                 *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: needs string \"dtype\", array \"shape\" "
                          "and array \"data_offsets\"",
                          path, name);
    if (json_object_size(e) != 3)
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: unexpected members besides dtype, "
                          "shape, data_offsets",
                          path, name);
    const char *ds = json_string_value(jd);
    enum gl_safetensors_dtype dt = GL_SAFETENSORS_DTYPE_F32;
    gl_status st = parse_dtype(ds, path, name, &dt, err);
    if (st != GL_OK)
        return st;
    size_t nd = json_array_size(js);
    if (nd > GL_SAFETENSORS_MAX_DIMS)
        return gl_err_set(err, GL_E_LIMIT, "safetensors: %s: tensor %.128s: %zu dims (max %d)",
                          path, name, nd, GL_SAFETENSORS_MAX_DIMS);
    struct gl_safetensors_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = (int)nd;
    t.shard = shard;
    uint64_t n = gl_safetensors_dtype_size(dt);
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!json_u64(json_array_get(js, i), &d) || d > INT64_MAX)
            return gl_err_set(err, GL_E_FORMAT,
                              "safetensors: %s: tensor %.128s: shape[%zu] is not a non-negative "
                              "integer",
                              path, name, i);
        if (!gl_mul_ok(n, d, &n))
            return gl_err_set(err, GL_E_FORMAT,
                              "safetensors: %s: tensor %.128s: byte size of the shape overflows",
                              path, name);
        t.shape[i] = (int64_t)d;
    }
    uint64_t b, en;
    if (json_array_size(jo) != 2 || !json_u64(json_array_get(jo, 0), &b) ||
        !json_u64(json_array_get(jo, 1), &en))
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: data_offsets must be two non-negative "
                          "integers",
                          path, name);
    if (b > en)
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: data_offsets [%llu, %llu] end before "
                          "begin",
                          path, name, (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: data_offsets [%llu, %llu] outside the "
                          "data area of %llu bytes",
                          path, name, (unsigned long long)b, (unsigned long long)en,
                          (unsigned long long)data_size);
    if (en - b != n)
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: tensor %.128s: data_offsets span %llu bytes but shape "
                          "x %s needs %llu",
                          path, name, (unsigned long long)(en - b), ds, (unsigned long long)n);
    t.data = data + b;
    t.nbytes = n;
    t.name = gl_strdup(name);
    if (!t.name)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory", path);
    if (s->n_t == s->cap_t) {
        int64_t cap = s->cap_t ? 2 * s->cap_t : 64;
        struct gl_safetensors_tensor *nt = gl_realloc(s->t, (size_t)cap * sizeof *nt);
        if (!nt) {
            gl_free((char *)t.name);
            return gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory", path);
        }
        s->t = nt;
        s->cap_t = cap;
    }
    s->t[s->n_t++] = t;
    *sp = (struct span){b, en, s->t[s->n_t - 1].name};
    return GL_OK;
}

// Parses and validates the image buf[0..size) of shard `shard`, appending its tensors.
static gl_status parse_image(struct gl_safetensors *s, int shard, const uint8_t *buf, uint64_t size,
                             struct gl_err *err)
{
    const char *path = s->shards[shard].path;
    if (size < 8)
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: %llu bytes, too short for the 8-byte header length",
                          path, (unsigned long long)size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | buf[i];
    if (hl > GL_SAFETENSORS_MAX_HEADER)
        return gl_err_set(err, GL_E_LIMIT,
                          "safetensors: %s: header length %llu over the %u-byte limit", path,
                          (unsigned long long)hl, GL_SAFETENSORS_MAX_HEADER);
    if (hl > size - 8)
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: header length %llu runs past the end of the %llu-byte "
                          "file",
                          path, (unsigned long long)hl, (unsigned long long)size);
    if (hl < 2 || buf[8] != '{')
        return gl_err_set(err, GL_E_FORMAT,
                          "safetensors: %s: header does not start with a JSON object", path);
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return gl_err_set(err, GL_E_FORMAT, "safetensors: %s: header JSON invalid at byte %d: %s",
                          path, je.position + 8, je.text);
    gl_status st = GL_OK;
    struct span *spans = NULL;
    size_t n_spans = 0;
    if (!json_is_object(root)) {
        st = gl_err_set(err, GL_E_FORMAT, "safetensors: %s: header is not a JSON object", path);
        goto done;
    }
    spans = gl_malloc((json_object_size(root) + 1) * sizeof *spans);
    if (!spans) {
        st = gl_err_set(err, GL_E_NOMEM, "safetensors: %s: no memory", path);
        goto done;
    }
    const uint8_t *data = buf + 8 + hl;
    const uint64_t data_size = size - 8 - hl;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (!strcmp(k, "__metadata__"))
            st = parse_metadata(&s->shards[shard], v, path, err);
        else if (!k[0])
            st = gl_err_set(err, GL_E_FORMAT, "safetensors: %s: a tensor has an empty name", path);
        else
            st = parse_tensor(s, shard, data, data_size, k, v, &spans[n_spans++], err);
        if (st != GL_OK)
            goto done;
    }
    // Overlap: sorted by begin, each non-empty tensor must start at or after the previous end.
    qsort(spans, n_spans, sizeof *spans, cmp_span);
    uint64_t prev_end = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < n_spans; i++) {
        if (spans[i].begin == spans[i].end)
            continue;
        if (prev && spans[i].begin < prev_end) {
            st = gl_err_set(err, GL_E_FORMAT,
                            "safetensors: %s: tensor %.128s [%llu, %llu) overlaps tensor %.128s "
                            "(ends at %llu)",
                            path, spans[i].name, (unsigned long long)spans[i].begin,
                            (unsigned long long)spans[i].end, prev, (unsigned long long)prev_end);
            goto done;
        }
        prev_end = spans[i].end;
        prev = spans[i].name;
    }
done:
    gl_free(spans);
    json_decref(root);
    return st;
}

// Sorts all tensors by name and rejects a name held by two shards.
static gl_status finish(struct gl_safetensors *s, struct gl_err *err)
{
    if (s->n_t > 1)
        qsort(s->t, (size_t)s->n_t, sizeof *s->t, cmp_name);
    for (int64_t i = 1; i < s->n_t; i++)
        if (!strcmp(s->t[i - 1].name, s->t[i].name))
            return gl_err_set(
                err, GL_E_FORMAT, "safetensors: tensor %.128s appears twice (in %s and %s)",
                s->t[i].name, s->shards[s->t[i - 1].shard].path, s->shards[s->t[i].shard].path);
    return GL_OK;
}

gl_status gl_safetensors_open_memory(struct gl_safetensors **out, const void *buf, size_t size,
                                     const char *label, struct gl_err *err)
{
    *out = NULL;
    struct gl_safetensors *s = gl_calloc(1, sizeof *s);
    if (!s)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: no memory");
    gl_status st = add_shard(s, label ? label : "<memory>", err);
    if (st == GL_OK)
        st = parse_image(s, 0, buf, size, err);
    if (st == GL_OK)
        st = finish(s, err);
    if (st != GL_OK) {
        gl_safetensors_close(s);
        return st;
    }
    *out = s;
    return GL_OK;
}

// Maps path as a new shard and parses it.
static gl_status load_file(struct gl_safetensors *s, const char *path, struct gl_err *err)
{
    gl_status st = add_shard(s, path, err);
    if (st != GL_OK)
        return st;
    struct st_shard *sh = &s->shards[s->n_shards - 1];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gl_err_set(err, GL_E_IO, "safetensors: %s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gl_err_set(err, GL_E_IO, "safetensors: %s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return gl_err_set(err, GL_E_LIMIT, "safetensors: %s: too large to map", path);
    }
    const uint8_t *buf = (const uint8_t *)"";
    if (sb.st_size > 0) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return gl_err_set(err, GL_E_IO, "safetensors: %s: mmap of %lld bytes failed: %s", path,
                              (long long)sb.st_size, strerror(e));
        }
        sh->map = m;
        sh->map_size = (size_t)sb.st_size;
        buf = m;
    }
    close(fd); // the mapping stays valid without the descriptor
    return parse_image(s, s->n_shards - 1, buf, (uint64_t)sb.st_size, err);
}

gl_status gl_safetensors_open_file(struct gl_safetensors **out, const char *path,
                                   struct gl_err *err)
{
    *out = NULL;
    struct gl_safetensors *s = gl_calloc(1, sizeof *s);
    if (!s)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: no memory");
    gl_status st = load_file(s, path, err);
    if (st == GL_OK)
        st = finish(s, err);
    if (st != GL_OK) {
        gl_safetensors_close(s);
        return st;
    }
    *out = s;
    return GL_OK;
}

static char *read_small(const char *path, size_t cap, size_t *len, struct gl_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gl_err_set(err, GL_E_IO, "safetensors: %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *b = gl_malloc(cap + 1);
    size_t n = b ? fread(b, 1, cap + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!b || bad || n > cap) {
        gl_err_set(err,
                   !b    ? GL_E_NOMEM
                   : bad ? GL_E_IO
                         : GL_E_LIMIT,
                   "safetensors: %s: unreadable or over %zu bytes", path, cap);
        gl_free(b);
        return NULL;
    }
    *len = n;
    return b;
}

// A shard name from an index must stay inside the folder.
static int plain_file_name(const char *f)
{
    return f[0] && f[0] != '.' && !strchr(f, '/') && strlen(f) < 1024;
}

static gl_status load_index(struct gl_safetensors *s, const char *dir, const char *ipath,
                            struct gl_err *err)
{
    size_t len = 0;
    char *text = read_small(ipath, MAX_INDEX, &len, err);
    if (!text)
        return err ? err->code : GL_E_IO;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    gl_free(text);
    if (!root)
        return gl_err_set(err, GL_E_FORMAT, "safetensors: %s: invalid JSON at byte %d: %s", ipath,
                          je.position, je.text);
    gl_status st = GL_OK;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        st = gl_err_set(err, GL_E_FORMAT, "safetensors: %s: no non-empty \"weight_map\" object",
                        ipath);
        goto done;
    }
    const char *k;
    json_t *v;
    // Pass 1: open every distinct shard, in order of first mention.
    json_object_foreach(wm, k, v)
    {
        if (!json_is_string(v) || !plain_file_name(json_string_value(v))) {
            st = gl_err_set(err, GL_E_FORMAT,
                            "safetensors: %s: weight_map entry %.128s is not a plain file name",
                            ipath, k);
            goto done;
        }
        const char *f = json_string_value(v);
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, f);
        int seen = 0;
        for (int i = 0; i < s->n_shards && !seen; i++)
            seen = !strcmp(s->shards[i].path, p);
        if (!seen && (st = load_file(s, p, err)) != GL_OK)
            goto done;
    }
    if ((st = finish(s, err)) != GL_OK)
        goto done;
    // Pass 2: every mapped tensor is in its shard, and nothing is unlisted.
    json_object_foreach(wm, k, v)
    {
        const struct gl_safetensors_tensor *t = gl_safetensors_find(s, k);
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, json_string_value(v));
        if (!t || strcmp(s->shards[t->shard].path, p) != 0) {
            st = gl_err_set(err, GL_E_FORMAT,
                            "safetensors: %s: tensor %.128s is mapped to %s but not found there",
                            ipath, k, json_string_value(v));
            goto done;
        }
    }
    if ((size_t)s->n_t != json_object_size(wm))
        st = gl_err_set(err, GL_E_FORMAT,
                        "safetensors: %s: shards hold %lld tensors, weight_map lists %zu", ipath,
                        (long long)s->n_t, json_object_size(wm));
done:
    json_decref(root);
    return st;
}

gl_status gl_safetensors_open_dir(struct gl_safetensors **out, const char *dir, struct gl_err *err)
{
    *out = NULL;
    struct gl_safetensors *s = gl_calloc(1, sizeof *s);
    if (!s)
        return gl_err_set(err, GL_E_NOMEM, "safetensors: no memory");
    char p[4096];
    snprintf(p, sizeof p, "%s/" INDEX_NAME, dir);
    gl_status st;
    if (access(p, F_OK) == 0) {
        st = load_index(s, dir, p, err);
    } else {
        snprintf(p, sizeof p, "%s/" SINGLE_NAME, dir);
        st = load_file(s, p, err);
        if (st == GL_OK)
            st = finish(s, err);
    }
    if (st != GL_OK) {
        gl_safetensors_close(s);
        return st;
    }
    *out = s;
    return GL_OK;
}

gl_status gl_safetensors_open(struct gl_safetensors **out, const char *path, struct gl_err *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return gl_safetensors_open_dir(out, path, err);
    return gl_safetensors_open_file(out, path, err);
}

const struct gl_safetensors_tensor *gl_safetensors_find(const struct gl_safetensors *s,
                                                        const char *name)
{
    struct gl_safetensors_tensor key;
    key.name = name;
    return s->n_t ? bsearch(&key, s->t, (size_t)s->n_t, sizeof *s->t, cmp_name) : NULL;
}

int64_t gl_safetensors_n_tensors(const struct gl_safetensors *s)
{
    return s->n_t;
}

const struct gl_safetensors_tensor *gl_safetensors_tensor_at(const struct gl_safetensors *s,
                                                             int64_t i)
{
    GL_ASSERT(i >= 0 && i < s->n_t);
    return &s->t[i];
}

const char *gl_safetensors_metadata(const struct gl_safetensors *s, const char *key)
{
    for (int i = 0; i < s->n_shards; i++)
        for (int64_t j = 0; j < s->shards[i].n_meta; j++)
            if (!strcmp(s->shards[i].meta[j].key, key))
                return s->shards[i].meta[j].value;
    return NULL;
}

int gl_safetensors_n_shards(const struct gl_safetensors *s)
{
    return s->n_shards;
}

const char *gl_safetensors_shard_path(const struct gl_safetensors *s, int shard)
{
    GL_ASSERT(shard >= 0 && shard < s->n_shards);
    return s->shards[shard].path;
}
