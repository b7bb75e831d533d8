// SPDX-License-Identifier: MIT
// cli: argument parsing helpers shared by the subcommands.
#include "cli.h"

#include "base/base.h"
#include "kv/kv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gl_cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

int gl_cli_parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(x) || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

int gl_cli_parse_bytes(const char *s, int64_t *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0.0) || !isfinite(v))
        return -1;
    static const struct {
        const char *suf;
        double mul;
    } sufs[] = {{"", 1.0},       {"B", 1.0},    {"K", 0x1p10},   {"KiB", 0x1p10},
                {"k", 0x1p10},   {"M", 0x1p20}, {"MiB", 0x1p20}, {"G", 0x1p30},
                {"GiB", 0x1p30}, {"T", 0x1p40}, {"TiB", 0x1p40}, {"KB", 1e3},
                {"kB", 1e3},     {"MB", 1e6},   {"GB", 1e9},     {"TB", 1e12}};
    for (size_t i = 0; i < sizeof sufs / sizeof sufs[0]; i++)
        if (!strcmp(end, sufs[i].suf)) {
            double b = floor(v * sufs[i].mul);
            if (b < 1.0 || b > 0x1p62)
                return -1;
            *out = (int64_t)b;
            return 0;
        }
    return -1;
}

// Reads at most max + 1 bytes, so an over-limit file is reported by the decoder's own check.
uint8_t *gl_cli_read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        size_t want = cap - n < max + 1 - n ? cap - n : max + 1 - n;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want || n > max)
            break;
        uint8_t *nb = n == cap ? realloc(buf, cap *= 2) : buf;
        if (!nb)
            free(buf);
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int gl_cli_write_file(const char *who, const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f))
        ok = 0;
    if (!ok)
        fprintf(stderr, "%s: cannot write %s\n", who, path);
    return ok ? 0 : 1;
}

void gl_cli_load_progress(void *user, int done, int total)
{
    const struct gl_cli_progress *pr = user;
    if (!isatty(STDERR_FILENO) || total <= 0)
        return;
    fprintf(stderr, "\r%s: loading layer %d/%d (%d%%), %.1f s%s", pr->who, done, total,
            (int)(100LL * done / total), (double)(gl_time_us() - pr->t0_us) / 1e6,
            done >= total ? "\n" : "");
    fflush(stderr);
}

int gl_cli_device(const char *who, const char *v, int vk_ok, int *device)
{
    *device = -1;
    if (!strcmp(v, "cpu"))
        return 0;
    if (!strncmp(v, "vulkan", 6) && (v[6] == 0 || v[6] == ':')) {
        long idx = 0;
        char *end = NULL;
        if (v[6] == ':') {
            idx = strtol(v + 7, &end, 10);
            if (end == v + 7 || *end || idx < 0 || idx > 255) {
                fprintf(stderr, "%s: --device %s: INDEX must be a number of `glint devices`\n", who,
                        v);
                return 2;
            }
        }
        if (vk_ok) {
            *device = (int)idx;
            return 0;
        }
        fprintf(stderr,
                "%s: --device %s: the Vulkan backend runs `glint run`, `eval`, `serve` and `bench` "
                "so far "
                "(issue 20: not yet wired into this command); use --device cpu\n",
                who, v);
    } else {
        fprintf(stderr, "%s: --device: '%s' is not a device (cpu or vulkan[:INDEX])\n", who, v);
    }
    return 2;
}

// ---------------------------------------------------------------------------------------------
// The flag parser: tables of struct gl_opt (cli.h).

static void store_int(void *dst, size_t size, long long v)
{
    switch (size) {
    case 1: {
        int8_t x = (int8_t)v;
        memcpy(dst, &x, 1);
        break;
    }
    case 2: {
        int16_t x = (int16_t)v;
        memcpy(dst, &x, 2);
        break;
    }
    case 4: {
        int32_t x = (int32_t)v;
        memcpy(dst, &x, 4);
        break;
    }
    default:
        GL_ASSERT(size == 8);
        memcpy(dst, &v, 8);
    }
}

// Does arg (up to len bytes) name o, as its name or one of its aliases?
static int opt_is(const struct gl_opt *o, const char *arg, size_t len)
{
    if (strlen(o->name) == len && !strncmp(o->name, arg, len))
        return 1;
    for (const char *a = o->alias; a && *a;) {
        size_t n = strcspn(a, " ");
        if (n == len && !strncmp(a, arg, len))
            return 1;
        a += n;
        a += strspn(a, " ");
    }
    return 0;
}

static int takes_value(const struct gl_opt *o)
{
    return o->kind == GL_OPT_FN ? o->has_value : o->kind != GL_OPT_BOOL;
}

// A number for a range in messages: integers without a fraction, others as %g.
static void put_num(char *out, size_t cap, double x)
{
    if (x == floor(x) && fabs(x) < 1e18)
        snprintf(out, cap, "%lld", (long long)x);
    else
        snprintf(out, cap, "%g", x);
}

// What a good value of o is ("an integer in 1..4096"), for the bad-value message.
static void want_text(const struct gl_opt *o, char *out, size_t cap)
{
    char lo[32], hi[32];
    put_num(lo, sizeof lo, o->lo);
    put_num(hi, sizeof hi, o->hi);
    switch (o->kind) {
    case GL_OPT_INT:
    case GL_OPT_SECS:
        snprintf(out, cap, "an integer in %lld..%lld", o->ilo, o->ihi);
        break;
    case GL_OPT_DBL:
        snprintf(out, cap, "a number in %s..%s", lo, hi);
        break;
    case GL_OPT_BYTES:
        snprintf(out, cap, "a byte count such as 512MiB, 6G or 5905580032");
        break;
    default:
        snprintf(out, cap, "%s", o->want ? o->want : "see --help");
    }
}

// Applies value v (NULL for a flag without one) to o: 0, -1 bad value, 2 (FN printed already).
static int apply(const struct gl_opt *o, const char *v, const char *name, const char *cmd)
{
    long long x;
    double d;
    int64_t b;
    switch (o->kind) {
    case GL_OPT_BOOL:
        if (o->dst)
            store_int(o->dst, o->size, o->set);
        return 0;
    case GL_OPT_STR:
        if (o->dst)
            *(const char **)o->dst = v;
        return 0;
    case GL_OPT_INT:
        if (gl_cli_parse_int(v, o->ilo, o->ihi, &x))
            return -1;
        store_int(o->dst, o->size, x);
        return 0;
    case GL_OPT_SECS:
        if (gl_cli_parse_int(v, o->ilo, o->ihi, &x))
            return -1;
        *(double *)o->dst = (double)x;
        return 0;
    case GL_OPT_DBL:
        if (gl_cli_parse_double(v, o->lo, o->hi, &d))
            return -1;
        *(double *)o->dst = d;
        return 0;
    case GL_OPT_BYTES:
        if (gl_cli_parse_bytes(v, &b))
            return -1;
        store_int(o->dst, o->size, b);
        return 0;
    case GL_OPT_FN:
        return o->fn(o->dst, v, name, cmd);
    }
    return -1;
}

static int fail(const struct gl_cli_spec *s)
{
    gl_cli_usage(s, stderr);
    return 2;
}

// One "--name[=v]" or "--name v" at argv[*i]: 0 taken, 2 error (printed).
static int parse_opt(const struct gl_cli_spec *s, int argc, char **argv, int *i, char *seen)
{
    const char *a = argv[*i];
    const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    size_t k = 0;
    while (k < s->n_opts && !opt_is(&s->opts[k], a, len))
        k++;
    if (k == s->n_opts) {
        fprintf(stderr, "%s: unknown option '%.*s'\n", s->cmd, (int)len, a);
        return fail(s);
    }
    const struct gl_opt *o = &s->opts[k];
    char name[96];
    snprintf(name, sizeof name, "%.*s", (int)len, a);
    const char *v = NULL;
    if (takes_value(o)) {
        if (eq)
            v = eq + 1;
        else if (*i + 1 < argc)
            v = argv[++*i];
        else {
            fprintf(stderr, "%s: %s needs a value (%s)\n", s->cmd, name, o->meta ? o->meta : "");
            return fail(s);
        }
    } else if (eq) {
        fprintf(stderr, "%s: %s takes no value\n", s->cmd, name);
        return fail(s);
    }
    int rc = apply(o, v, name, s->cmd);
    if (rc == -1) {
        char want[128];
        want_text(o, want, sizeof want);
        fprintf(stderr, "%s: bad value '%s' for %s: %s\n", s->cmd, v ? v : "", name, want);
        return 2;
    }
    if (rc)
        return 2;
    seen[k] = 1;
    return 0;
}

int gl_cli_parse(const struct gl_cli_spec *s, int argc, char **argv)
{
    char seen[256] = {0};
    GL_ASSERT(s->n_opts <= sizeof seen);
    if (s->n_pos)
        *s->n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            gl_cli_usage(s, stdout);
            return 0;
        }
        if (a[0] == '-' && a[1] != '\0') {
            if (parse_opt(s, argc, argv, &i, seen))
                return 2;
        } else if (s->n_pos && *s->n_pos < s->max_pos) {
            s->pos[(*s->n_pos)++] = a;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n", s->cmd, a);
            return fail(s);
        }
    }
    for (size_t k = 0; k < s->n_opts; k++)
        if (s->opts[k].required && !seen[k]) {
            fprintf(stderr, "%s: %s is required\n", s->cmd, s->opts[k].name);
            return fail(s);
        }
    if ((s->n_pos ? *s->n_pos : 0) < s->min_pos) {
        fprintf(stderr, "%s: missing argument (usage: %s %s)\n", s->cmd, s->cmd, s->synopsis);
        return fail(s);
    }
    return -1;
}

#define USAGE_COL   30  // help text column
#define USAGE_WIDTH 100 // wrap help at this column

// Writes text from column col (the cursor is at column at), wrapped at USAGE_WIDTH; '\n' in the
// text starts a new line at col.
static void put_wrapped(FILE *f, const char *text, int col, int at)
{
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            fprintf(f, "\n%*s", col, "");
            at = col;
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (at > col && at + 1 + (int)w > USAGE_WIDTH) {
            fprintf(f, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', f);
            at++;
        }
        fwrite(p, 1, w, f);
        at += (int)w;
        p += w;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

void gl_cli_usage(const struct gl_cli_spec *s, FILE *f)
{
    fprintf(f, "usage: %s %s\n", s->cmd, s->synopsis);
    if (s->about) {
        fputc('\n', f);
        put_wrapped(f, s->about, 0, 0);
    }
    if (s->n_opts)
        fprintf(f, "\noptions:\n");
    for (size_t k = 0; k < s->n_opts; k++) {
        const struct gl_opt *o = &s->opts[k];
        if (!o->help)
            continue;
        // "--name META / --alias META": each spelling followed by a space or the line's end.
        char left[256];
        int n = snprintf(left, sizeof left, "  %s%s%s", o->name, o->meta ? " " : "",
                         o->meta ? o->meta : "");
        for (const char *a = o->alias; a && *a && n < (int)sizeof left;) {
            size_t w = strcspn(a, " ");
            n += snprintf(left + n, sizeof left - (size_t)n, " / %.*s%s%s", (int)w, a,
                          o->meta ? " " : "", o->meta ? o->meta : "");
            a += w;
            a += strspn(a, " ");
        }
        if (n >= (int)sizeof left)
            n = (int)sizeof left - 1;
        fputs(left, f);
        if (n + 2 > USAGE_COL) {
            fprintf(f, "\n%*s", USAGE_COL, "");
            n = USAGE_COL;
        } else {
            fprintf(f, "%*s", USAGE_COL - n, "");
            n = USAGE_COL;
        }
        char help[1024];
        snprintf(help, sizeof help, "%s%s", o->required ? "(required) " : "", o->help);
        put_wrapped(f, help, USAGE_COL, n);
    }
    if (s->epilog)
        fprintf(f, "%s%s", s->n_opts || s->about ? "\n" : "", s->epilog);
}

int gl_cli_opt_device(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    return gl_cli_device(cmd, v, 1, user);
}

void gl_cli_ngl_check(const char *who, int device, int64_t ngl)
{
    if (device < 0 && ngl != -1)
        GL_LOGW("%s: --n-gpu-layers %lld ignored: no --device, the CPU runs every layer (give "
                "--device vulkan to offload layers; `glint devices` lists them)",
                who, (long long)ngl);
}

int gl_cli_opt_kv_dtype(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    return gl_kv_dtype_parse(v, user, NULL) != GL_OK ? -1 : 0;
}

int gl_cli_opt_fraction(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    char *end;
    double f = strtod(v, &end);
    if (end == v || *end || !(f > 0.0 && f <= 1.0))
        return -1;
    *(double *)user = f;
    return 0;
}

int gl_cli_parse_sub(const struct gl_cli_spec *s, const char *sub, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], sub)) {
        const int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        gl_cli_usage(s, help ? stdout : stderr);
        return help ? 0 : 2;
    }
    return gl_cli_parse(s, argc - 1, argv + 1);
}
