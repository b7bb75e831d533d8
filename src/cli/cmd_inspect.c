// SPDX-License-Identifier: MIT
// glint inspect FILE [--json] [--no-mmap] [--allow-no-data]: dumps a GGUF as the reader sees it
// after full validation: file facts (version, alignment, data offset, size, mmap or heap), every
// KV (arrays as type, count and the first elements; long strings cut), and every tensor with its
// type, shape, bytes, offsets and where its bytes live (mmap'ed region, heap copy, or absent for
// header-only files). A file the reader refuses exits 1 with the reader's message.
// Vision GGUFs are checked as glint would load them (src/vision/vision_gguf.h), unless
// --no-vision-check: an mmproj (llama.cpp's layout) must pass gl_vgguf_mmproj_read and gets a
// "vision:" line saying whether it serves video (the full temporal kernel) or still images only
// (the summed kernel); a glint "muse-glimmer-vision" file without the temporal axis is refused.
#include "cli.h"

#include "base/buf.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "vision/vision_gguf.h"

#include <stdio.h>
#include <string.h>

#define SHOW_STR_BYTES  96 // string values longer than this are cut in the dump
#define SHOW_ARR_ELEMS  8  // array elements shown
#define SHOW_JSON_BYTES 1024

// Prints a quoted, escaped view of s cut at about max bytes (never inside a UTF-8 sequence).
// JSON mode writes only valid JSON (invalid UTF-8 becomes U+FFFD); text mode shows it as \xNN.
static void put_str(FILE *f, struct gl_gguf_str s, size_t max, int json)
{
    const unsigned char *p = (const unsigned char *)s.ptr;
    size_t n = (size_t)s.len, i = 0;
    fputc('"', f);
    while (i < n && i < max) {
        unsigned char c = p[i];
        size_t u = c >= 0x80 ? gl_utf8_seq(p + i, n - i, NULL) : 1;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, json ? "\\u%04x" : "\\x%02x", c);
        else if (u == 0)
            fprintf(f, json ? "\\ufffd" : "\\x%02x", c);
        else
            fwrite(p + i, 1, u, f);
        i += u ? u : 1;
    }
    fputc('"', f);
    if (i < n && !json)
        fprintf(f, "... (%zu bytes)", n);
}

static void put_double(FILE *f, double d, int json)
{
    if (json && (d != d || d > 1.7976931348623157e308 || d < -1.7976931348623157e308))
        fputs("null", f); // NaN and inf have no JSON spelling
    else
        fprintf(f, "%.9g", d);
}

static int is_float(enum gl_gguf_vtype t)
{
    return t == GL_GGUF_F32 || t == GL_GGUF_F64;
}

static void put_scalar(FILE *f, const struct gl_gguf_kv *kv, int json)
{
    switch (kv->type) {
    case GL_GGUF_U8:
    case GL_GGUF_U16:
    case GL_GGUF_U32:
    case GL_GGUF_U64:
        fprintf(f, "%llu", (unsigned long long)kv->v.u64);
        break;
    case GL_GGUF_I8:
    case GL_GGUF_I16:
    case GL_GGUF_I32:
    case GL_GGUF_I64:
        fprintf(f, "%lld", (long long)kv->v.i64);
        break;
    case GL_GGUF_F32:
    case GL_GGUF_F64:
        put_double(f, kv->v.f64, json);
        break;
    case GL_GGUF_BOOL:
        fputs(kv->v.u64 ? "true" : "false", f);
        break;
    case GL_GGUF_STR:
        put_str(f, kv->v.str, json ? SHOW_JSON_BYTES : SHOW_STR_BYTES, json);
        break;
    default:
        fputs("null", f);
        break;
    }
}

static void put_arr_elem(FILE *f, const struct gl_gguf_kv *kv, uint64_t i, int json)
{
    enum gl_gguf_vtype t = kv->v.arr.type;
    if (t == GL_GGUF_STR)
        put_str(f, kv->v.arr.strs[i], SHOW_STR_BYTES, json);
    else if (is_float(t))
        put_double(f, gl_gguf_arr_get_float(kv, i), json);
    else if (t == GL_GGUF_BOOL)
        fputs(gl_gguf_arr_get_int(kv, i) ? "true" : "false", f);
    else if (t == GL_GGUF_U64)
        fprintf(f, "%llu", (unsigned long long)gl_gguf_arr_get_int(kv, i));
    else
        fprintf(f, "%lld", (long long)gl_gguf_arr_get_int(kv, i));
}

static void put_arr_head(FILE *f, const struct gl_gguf_kv *kv, int json)
{
    uint64_t n = kv->v.arr.n < SHOW_ARR_ELEMS ? kv->v.arr.n : SHOW_ARR_ELEMS;
    fputc('[', f);
    for (uint64_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        put_arr_elem(f, kv, i, json);
    }
    if (!json && n < kv->v.arr.n)
        fputs(", ...", f);
    fputc(']', f);
}

static const char *type_name(uint32_t type)
{
    const struct gl_type_traits *tr = gl_type_traits_of(type);
    return tr && tr->name ? tr->name : "?";
}

// Where the tensor's bytes live: the mapped file, the heap copy, or nowhere (header-only).
static const char *residence(const struct gl_gguf *g, const struct gl_gguf_tensor *t)
{
    if (!t->data)
        return "absent";
    return gl_gguf_is_mmapped(g) ? "mmap" : "heap";
}

static void dump_text(FILE *f, const char *path, const struct gl_gguf *g)
{
    fprintf(f, "file:        %s\n", path);
    fprintf(f, "version:     %u\n", gl_gguf_version(g));
    fprintf(f, "alignment:   %u\n", gl_gguf_alignment(g));
    fprintf(f, "data offset: %llu\n", (unsigned long long)gl_gguf_data_offset(g));
    fprintf(f, "file size:   %llu\n", (unsigned long long)gl_gguf_file_size(g));
    fprintf(f, "storage:     %s\n",
            gl_gguf_is_mmapped(g) ? "mmap (read-only, shared page cache)"
                                  : "heap copy (read into memory)");
    fprintf(f, "\nmetadata: %lld keys\n", (long long)gl_gguf_n_kv(g));
    for (int64_t i = 0; i < gl_gguf_n_kv(g); i++) {
        const struct gl_gguf_kv *kv = gl_gguf_kv_at(g, i);
        fprintf(f, "  %4lld ", (long long)i);
        put_str(f, kv->key, 200, 0);
        if (kv->type == GL_GGUF_ARR) {
            fprintf(f, " arr[%s, %llu] = ", gl_gguf_vtype_name(kv->v.arr.type),
                    (unsigned long long)kv->v.arr.n);
            put_arr_head(f, kv, 0);
        } else {
            fprintf(f, " %s = ", gl_gguf_vtype_name(kv->type));
            put_scalar(f, kv, 0);
        }
        fputc('\n', f);
    }
    uint64_t total = 0, n_absent = 0;
    fprintf(f, "\ntensors: %lld\n", (long long)gl_gguf_n_tensors(g));
    for (int64_t i = 0; i < gl_gguf_n_tensors(g); i++) {
        const struct gl_gguf_tensor *t = gl_gguf_tensor_at(g, i);
        uint64_t at = gl_gguf_data_offset(g) + t->offset;
        fprintf(f, "  %4lld ", (long long)i);
        put_str(f, t->name, 200, 0);
        fprintf(f, " %-5s ne=[%lld", type_name(t->type), (long long)t->ne[0]);
        for (uint32_t d = 1; d < t->n_dims; d++)
            fprintf(f, ", %lld", (long long)t->ne[d]);
        fprintf(f, "] bytes=%llu offset=%llu file=[%llu, %llu) %s\n",
                (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                (unsigned long long)at, (unsigned long long)(at + t->n_bytes), residence(g, t));
        total += t->n_bytes;
        n_absent += t->data == NULL;
    }
    fprintf(f, "tensor bytes: %llu (%.2f GiB), %llu absent\n", (unsigned long long)total,
            (double)total / (1024.0 * 1024.0 * 1024.0), (unsigned long long)n_absent);
    int64_t frames = 0;
    struct gl_vision_config vc;
    struct gl_vgguf_info info;
    struct gl_err err = {0};
    if (gl_vgguf_is_mmproj(g) && gl_vgguf_mmproj_read(g, &vc, &info, &err) == GL_OK)
        fprintf(f, "vision: llama.cpp mmproj (%s), %d blocks of %d: %s\n", GL_MMPROJ_PROJECTOR,
                (int)vc.n_layers, (int)vc.hidden,
                info.video ? "full temporal patch kernel (images and video)"
                           : "summed patch kernel (still images only)");
    else if (gl_vgguf_kind(g, &frames) == GL_VGGUF_TEMPORAL)
        fprintf(f, "vision: patch embedding keeps %lld temporal slabs (video-capable)\n",
                (long long)frames);
}

static void dump_json(FILE *f, const char *path, const struct gl_gguf *g)
{
    struct gl_gguf_str p = {path, strlen(path)};
    fputs("{\"file\": ", f);
    put_str(f, p, SIZE_MAX, 1);
    fprintf(f,
            ", \"version\": %u, \"alignment\": %u, \"data_offset\": %llu, \"file_size\": %llu, "
            "\"mmapped\": %s,\n \"kv\": [",
            gl_gguf_version(g), gl_gguf_alignment(g), (unsigned long long)gl_gguf_data_offset(g),
            (unsigned long long)gl_gguf_file_size(g), gl_gguf_is_mmapped(g) ? "true" : "false");
    for (int64_t i = 0; i < gl_gguf_n_kv(g); i++) {
        const struct gl_gguf_kv *kv = gl_gguf_kv_at(g, i);
        fputs(i ? ",\n  {\"key\": " : "\n  {\"key\": ", f);
        put_str(f, kv->key, SIZE_MAX, 1);
        fprintf(f, ", \"type\": \"%s\"", gl_gguf_vtype_name(kv->type));
        if (kv->type == GL_GGUF_ARR) {
            fprintf(f, ", \"elem_type\": \"%s\", \"count\": %llu, \"head\": ",
                    gl_gguf_vtype_name(kv->v.arr.type), (unsigned long long)kv->v.arr.n);
            put_arr_head(f, kv, 1);
        } else {
            fputs(", \"value\": ", f);
            put_scalar(f, kv, 1);
            if (kv->type == GL_GGUF_STR)
                fprintf(f, ", \"len\": %llu", (unsigned long long)kv->v.str.len);
        }
        fputc('}', f);
    }
    fputs("],\n \"tensors\": [", f);
    for (int64_t i = 0; i < gl_gguf_n_tensors(g); i++) {
        const struct gl_gguf_tensor *t = gl_gguf_tensor_at(g, i);
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
        put_str(f, t->name, SIZE_MAX, 1);
        fprintf(f, ", \"type\": \"%s\", \"type_id\": %u, \"ne\": [%lld", type_name(t->type),
                t->type, (long long)t->ne[0]);
        for (uint32_t d = 1; d < t->n_dims; d++)
            fprintf(f, ", %lld", (long long)t->ne[d]);
        fprintf(f,
                "], \"n_bytes\": %llu, \"offset\": %llu, \"file_offset\": %llu, "
                "\"where\": \"%s\"}",
                (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                (unsigned long long)(gl_gguf_data_offset(g) + t->offset), residence(g, t));
    }
    fputs("]}\n", f);
}

int gl_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0, vision_check = 1, n_pos = 0;
    struct gl_gguf_open_params prm = gl_gguf_default_open_params();
    struct gl_opt t[] = {
        GL_OPT_B("--json", NULL, json, 1, "machine-readable output"),
        GL_OPT_B("--no-mmap", NULL, prm.use_mmap, 0,
                 "read the file into memory instead of mapping it (or GLINT_MMAP=0)"),
        GL_OPT_B("--allow-no-data", NULL, prm.allow_no_data, 1,
                 "accept header-only files (tensor data past the end of the file)"),
        GL_OPT_B("--no-vision-check", NULL, vision_check, 0,
                 "dump a vision GGUF that glint would refuse (e.g. an mmproj whose patch "
                 "embedding lost its temporal axis)"),
    };
    struct gl_cli_spec s = {.cmd = "glint inspect",
                            .synopsis = "FILE [--json] [--no-mmap] [--allow-no-data] "
                                        "[--no-vision-check]",
                            .about = "Prints a GGUF's metadata and tensors.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t),
                            .min_pos = 1,
                            .max_pos = 1,
                            .pos = &path,
                            .n_pos = &n_pos};
    GL_CLI_PARSE(&s, argc, argv);
    struct gl_gguf *g = NULL;
    struct gl_err err = {0};
    if (gl_gguf_open(&g, path, &prm, &err) != GL_OK) {
        fprintf(stderr, "glint inspect: %s\n", err.msg);
        if (!prm.allow_no_data && strstr(err.msg, "exceeds data section"))
            fprintf(stderr, "glint inspect: (a header-only file? try --allow-no-data)\n");
        return 1;
    }
    struct gl_vision_config vc;
    struct gl_vgguf_info info;
    if (vision_check && (gl_vgguf_is_mmproj(g) ? gl_vgguf_mmproj_read(g, &vc, &info, &err)
                                               : gl_vgguf_check(path, g, &err)) != GL_OK) {
        fprintf(stderr, "glint inspect: %s\n", err.msg);
        gl_gguf_close(g);
        return 1;
    }
    if (json)
        dump_json(stdout, path, g);
    else
        dump_text(stdout, path, g);
    gl_gguf_close(g);
    return fflush(stdout) == 0 ? 0 : 1;
}
