// SPDX-License-Identifier: MIT
// cli: argument parsing helpers shared by the subcommands.
#include "cli.h"

#include "base/base.h"

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
