// SPDX-License-Identifier: MIT
// Fuzz target for the tiktoken ranks-file loader. Input byte 0 is a mode: bit 0 prepends the 256
// single-byte tokens as ranks 0..255 (so mutations of the rest reach merge derivation and the
// encoder instead of stopping at "no token for byte"); the rest is the file, written to a temp
// file because the loader takes a path. A refusal must come with a message and no tokenizer.
// A loaded one must have N + 2,048 ids, valid merges, and encode text -- a fixed string, with
// and without specials, and the input itself -- to ids whose bytes concatenate back to the text.
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 512 // bytes of the input also encoded with the loaded vocabulary

static void write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            abort();
        s += w;
        n -= (size_t)w;
    }
}

// "base64(b) rank\n" for every byte b at rank b.
static void write_byte_ranks(int fd)
{
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char line[32];
    for (int b = 0; b < 256; b++) {
        int n = snprintf(line, sizeof line, "%c%c== %d\n", B64[b >> 2], B64[(b & 3) << 4], b);
        write_all(fd, line, (size_t)n);
    }
}

// Encodes text and checks that the ids are in range and decode to exactly the text.
static void check_round_trip(const struct gl_tokenizer *t, const char *text, size_t len,
                             int parse_special)
{
    gl_token *ids = NULL;
    size_t n = 0;
    struct gl_err err = {0};
    if (gl_tokenizer_encode(t, text, len, parse_special, 1, &ids, &n, &err) != GL_OK)
        abort();
    if (n < 1 || ids[0] != gl_tokenizer_bos(t))
        abort();
    size_t at = 0;
    for (size_t i = 1; i < n; i++) {
        size_t tl;
        const char *p = gl_tokenizer_token_bytes(t, ids[i], &tl);
        if (!p || tl == 0 || tl > len - at || memcmp(p, text + at, tl) != 0)
            abort();
        if (gl_tokenizer_is_special(t, ids[i]) && !parse_special)
            abort();
        at += tl;
    }
    if (at != len)
        abort();
    gl_free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char path[] = "/tmp/glint-fuzz-tt-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    if (data[0] & 1)
        write_byte_ranks(fd);
    write_all(fd, data + 1, size - 1);
    close(fd);

    struct gl_tokenizer *t = NULL;
    struct gl_err err = {0};
    gl_status st = gl_tokenizer_load_tiktoken(&t, path, &err);
    unlink(path);
    if (st != GL_OK) {
        if (t || err.msg[0] == '\0')
            abort();
        return 0;
    }
    int32_t nv = gl_tokenizer_n_vocab(t);
    if (nv <= GL_TOK_N_SPECIAL || gl_tokenizer_bos(t) != nv - GL_TOK_N_SPECIAL ||
        gl_tokenizer_find_special(t, "<|eot|>") != gl_tokenizer_eot(t))
        abort();
    for (int64_t i = 0; i < gl_tokenizer_n_merges(t); i++) {
        gl_token l, r;
        gl_tokenizer_merge_at(t, i, &l, &r);
        if (l < 0 || r < 0 || l >= nv || r >= nv || gl_tokenizer_is_special(t, l) ||
            gl_tokenizer_is_special(t, r))
            abort();
    }
    static const char FIXED[] = "Hello, world! It's 2024<|eot|> \xe4\xbd\xa0\xe5\xa5\xbd\n\n  \xff";
    check_round_trip(t, FIXED, sizeof FIXED - 1, 0);
    check_round_trip(t, FIXED, sizeof FIXED - 1, 1);
    size_t tl = size - 1 < MAX_TEXT ? size - 1 : MAX_TEXT;
    check_round_trip(t, (const char *)data + 1, tl, 0);
    gl_tokenizer_free(t);
    return 0;
}
