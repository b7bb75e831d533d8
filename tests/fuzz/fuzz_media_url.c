// SPDX-License-Identifier: MIT
// Fuzz target for gl_mediasrc_load (mediasrc/): the input is a part's URL (data: URLs, schemes,
// paths, file:// URLs with %-escapes). Odd-length inputs run with no local root; even-length ones
// with an empty scratch directory as the root, so the path checks (lexical folding, realpath, the
// open beneath the root) run on arbitrary paths while nothing but that empty directory could
// ever be opened. A success must return between 1 and max_bytes bytes, each of which is
// touched; a refusal must leave the outputs empty, say why and be the client's fault (400).
#include "mediasrc/mediasrc.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;
static char g_root[PATH_MAX];

static void remove_root(void)
{
    rmdir(g_root);
}

// The empty scratch root, made on first use.
static const char *root(void)
{
    if (!g_root[0]) {
        snprintf(g_root, sizeof g_root, "%s/glint_fuzz_media_XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(g_root))
            abort();
        atexit(remove_root);
    }
    return g_root;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size ? size : 1); // exact size: reads past the end hit the redzone
    if (!url)
        return 0;
    memcpy(url, data, size);
    struct gl_mediasrc_opts o = {.local_root = size % 2 ? NULL : root(), .max_bytes = 1 << 16};
    struct gl_err e = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    gl_status st = gl_mediasrc_load(&o, url, size, &b, &n, &e);
    if (st == GL_OK) {
        if (!b || n == 0 || n > o.max_bytes)
            abort();
        uint64_t acc = 0;
        for (size_t i = 0; i < n; i++)
            acc += b[i];
        sink += acc;
        gl_free(b);
    } else if (b || n || !e.msg[0] || e.code != st || gl_mediasrc_http_status(st) != 400) {
        abort();
    }
    free(url);
    return 0;
}
