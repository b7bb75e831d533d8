// SPDX-License-Identifier: MIT
// tokenizer tests: the real llama4 ranks file (vocab size, specials, derived merges, known ids,
// special parsing, BPE vs a direct tiktoken-rank reference on short and long pieces, byte-exact
// round trips on random bytes incl. invalid UTF-8, concurrent encodes, speed), the streaming
// detokenizer, the tiktoken loader's errors on malformed files, and the GGUF loader on small
// vocabularies written with gl_gguf_writer (agreement with the tiktoken loader, refusals).
// The ranks file: $GLINT_VOCAB, else ../shared/data/tokenizer/llama4-tokenizer.model.
#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- helpers ----

static struct gl_tokenizer *g_tok; // the real vocabulary, loaded once

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static void tmp_path(char *buf, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, cap, "%s/glint-test-tok-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(buf);
    if (fd >= 0)
        close(fd);
}

static int write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t n = strlen(s), w = fwrite(s, 1, n, f);
    return fclose(f) == 0 && w == n;
}

// Encodes and compares with the expected ids.
static int encodes_to(const struct gl_tokenizer *t, const char *s, size_t n, int special,
                      const gl_token *want, size_t n_want)
{
    gl_token *ids;
    size_t n_ids;
    if (gl_tokenizer_encode(t, s, n, special, 0, &ids, &n_ids, NULL) != GL_OK)
        return 0;
    int ok = n_ids == n_want && (n_want == 0 || !memcmp(ids, want, n_want * sizeof *ids));
    if (!ok) {
        fprintf(stderr, "  got:");
        for (size_t i = 0; i < n_ids; i++)
            fprintf(stderr, " %d", (int)ids[i]);
        fprintf(stderr, "\n");
    }
    gl_free(ids);
    return ok;
}

// Concatenated token bytes of ids (what a decoder must produce); returns the length.
static size_t decode_all(const struct gl_tokenizer *t, const gl_token *ids, size_t n, char *out,
                         size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = gl_tokenizer_token_bytes(t, ids[i], &len);
        if (!p || o + len > cap)
            return SIZE_MAX;
        memcpy(out + o, p, len);
        o += len;
    }
    return o;
}

// Id of the single-byte token for c (via the encoder: one byte is always one token).
static gl_token byte_id(const struct gl_tokenizer *t, uint8_t c)
{
    gl_token *ids, id = -1;
    size_t n;
    if (gl_tokenizer_encode(t, (const char *)&c, 1, 0, 0, &ids, &n, NULL) == GL_OK) {
        if (n == 1)
            id = ids[0];
        gl_free(ids);
    }
    return id;
}

// ---- the real vocabulary ----

TEST(test_load_real_vocab)
{
    struct gl_err err = {0};
    int64_t t0 = gl_time_us();
    gl_status st = gl_tokenizer_load_tiktoken(&g_tok, t_vocab_path(), &err);
    double secs = (double)(gl_time_us() - t0) / 1e6;
    CHECKF(st == GL_OK, "%s", err.msg);
    REQUIRE(g_tok);
    printf("# load %s: %.3f s\n", t_vocab_path(), secs);
    CHECK(gl_tokenizer_n_vocab(g_tok) == GL_TOK_N_BASE + GL_TOK_N_SPECIAL);
    CHECK(gl_tokenizer_bos(g_tok) == GL_TOK_BOS);
    CHECK(gl_tokenizer_eos(g_tok) == GL_TOK_EOS);
    CHECK(gl_tokenizer_eot(g_tok) == GL_TOK_EOT);
    CHECK(gl_tokenizer_add_bos(g_tok) == 0);
    CHECK(gl_tokenizer_find_special(g_tok, "<|eot|>") == GL_TOK_EOT);
    CHECK(gl_tokenizer_find_special(g_tok, "<|eom|>") == GL_TOK_EOM);
    CHECK(gl_tokenizer_find_special(g_tok, "<|finetune_right_pad|>") == GL_TOK_PAD);
    CHECK(gl_tokenizer_find_special(g_tok, "<|patch|>") == 200092);
    CHECK(gl_tokenizer_find_special(g_tok, "<|vid_frame_separator|>") == 200087);
    CHECK(gl_tokenizer_find_special(g_tok, "<|reserved_special_token_2|>") == 200002);
    CHECK(gl_tokenizer_find_special(g_tok, "<|reserved_special_token_1818|>") == 201818);
    CHECK(gl_tokenizer_find_special(g_tok, "<|reserved_special_token_2047|>") == 202047);
    CHECK(gl_tokenizer_find_special(g_tok, "<|reserved_special_token_8|>") == -1); // named eot
    CHECK(gl_tokenizer_find_special(g_tok, "hello") == -1);
    CHECK(gl_tokenizer_is_special(g_tok, 200000) && !gl_tokenizer_is_special(g_tok, 199999));
    CHECK(gl_tokenizer_token_type(g_tok, 202047) == GL_TOKTYPE_CONTROL);
    CHECK(gl_tokenizer_token_type(g_tok, 0) == GL_TOKTYPE_NORMAL);
    size_t len;
    CHECK(gl_tokenizer_token_bytes(g_tok, 202048, &len) == NULL && len == 0);
    CHECK(gl_tokenizer_token_bytes(g_tok, -1, &len) == NULL);
}

// Every multi-byte token of this file splits into exactly two lower-ranked parts, so there is one
// merge per multi-byte token, in rank order, and each joins to exactly the next such token.
TEST(test_derived_merges)
{
    REQUIRE(g_tok);
    int64_t n_multi = 0;
    for (gl_token id = 0; id < GL_TOK_N_BASE; id++) {
        size_t len;
        (void)gl_tokenizer_token_bytes(g_tok, id, &len);
        n_multi += len >= 2;
    }
    printf("# %lld multi-byte tokens, %lld merges\n", (long long)n_multi,
           (long long)gl_tokenizer_n_merges(g_tok));
    CHECK(n_multi == 199744);
    CHECK(gl_tokenizer_n_merges(g_tok) == n_multi);
    gl_token want = 0;
    int bad = 0;
    for (int64_t i = 0; i < gl_tokenizer_n_merges(g_tok) && bad < 5; i++) {
        gl_token l, r;
        gl_tokenizer_merge_at(g_tok, i, &l, &r);
        size_t nl, nr, nw;
        for (;; want++) { // the next multi-byte token in rank order
            (void)gl_tokenizer_token_bytes(g_tok, want, &nw);
            if (nw >= 2)
                break;
        }
        const char *pl = gl_tokenizer_token_bytes(g_tok, l, &nl);
        const char *pr = gl_tokenizer_token_bytes(g_tok, r, &nr);
        const char *pw = gl_tokenizer_token_bytes(g_tok, want, &nw);
        int ok = l < want && r < want && nl + nr == nw && !memcmp(pl, pw, nl) &&
                 !memcmp(pr, pw + nl, nr);
        CHECKF(ok, "merge %lld = (%d, %d) does not make token %d", (long long)i, (int)l, (int)r,
               (int)want);
        bad += !ok;
        want++;
    }
}

TEST(test_known_ids)
{
    REQUIRE(g_tok);
    // Ids confirmed by js-tiktoken over the same ranks file (tests/oracle/check_tokenizer.sh).
    const char *s = "Hello, world! Muse Glimmer \xF0\x9F\xA4\x96 \xC3\xA7\xC3\xA0 12345";
    const gl_token want[] = {19873,  24,  3817, 13,  50353, 5342, 36886,
                             119281, 244, 4241, 696, 220,   7235, 2127};
    CHECK(encodes_to(g_tok, s, strlen(s), 0, want, 14));
    CHECK(encodes_to(g_tok, "", 0, 0, NULL, 0));
    gl_token *ids;
    size_t n;
    REQUIRE(gl_tokenizer_encode(g_tok, "", 0, 0, 1, &ids, &n, NULL) == GL_OK);
    CHECK(n == 1 && ids[0] == GL_TOK_BOS);
    gl_free(ids);
    REQUIRE(gl_tokenizer_encode(g_tok, "Hi", 2, 0, 1, &ids, &n, NULL) == GL_OK);
    CHECK(n == 2 && ids[0] == GL_TOK_BOS && ids[1] == 25181);
    gl_free(ids);
}

TEST(test_specials_only_when_asked)
{
    REQUIRE(g_tok);
    const char *s = "<|begin_of_text|>Hi<|eot|>x<|reserved_special_token_2047|>";
    const gl_token want[] = {200000, 25181, 200008, 100, 202047};
    CHECK(encodes_to(g_tok, s, strlen(s), 1, want, 5));
    gl_token *ids;
    size_t n;
    REQUIRE(gl_tokenizer_encode(g_tok, s, strlen(s), 0, 0, &ids, &n, NULL) == GL_OK);
    int any_special = 0;
    for (size_t i = 0; i < n; i++)
        any_special |= gl_tokenizer_is_special(g_tok, ids[i]);
    CHECK(!any_special && n > 5);
    char buf[256];
    CHECK(decode_all(g_tok, ids, n, buf, sizeof buf) == strlen(s) && !memcmp(buf, s, strlen(s)));
    gl_free(ids);
    // Near misses stay text; the longest name wins; "<|<|eot|>" finds the inner name.
    const char *near = "<|eot|<|reserved_special_token_2048|><|<|eot|>";
    REQUIRE(gl_tokenizer_encode(g_tok, near, strlen(near), 1, 0, &ids, &n, NULL) == GL_OK);
    int n_special = 0;
    for (size_t i = 0; i < n; i++)
        n_special += gl_tokenizer_is_special(g_tok, ids[i]);
    CHECK(n_special == 1 && ids[n - 1] == GL_TOK_EOT);
    gl_free(ids);
}

// The tiktoken definition of BPE, straight from the ranks: merge the adjacent pair whose byte
// concatenation has the lowest rank (leftmost on ties). Needs a bytes -> id lookup, done here by
// linear-probe over a private table so the test does not trust the tokenizer's own hash.
struct ref_table {
    int32_t *slot;
    uint32_t mask;
};

static uint32_t ref_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

static int32_t ref_find(const struct ref_table *rt, const char *p, size_t n)
{
    for (uint32_t i = ref_hash(p, n) & rt->mask;; i = (i + 1) & rt->mask) {
        if (rt->slot[i] < 0)
            return -1;
        size_t m;
        const char *q = gl_tokenizer_token_bytes(g_tok, rt->slot[i], &m);
        if (m == n && !memcmp(p, q, n))
            return rt->slot[i];
    }
}

static size_t ref_bpe(const struct ref_table *rt, const char *p, size_t n, gl_token *out)
{
    size_t start[1024], np = n; // parts [start[i], start[i + 1])
    for (size_t i = 0; i <= n; i++)
        start[i] = i;
    for (;;) {
        int32_t best_rank = INT32_MAX;
        size_t best = 0;
        for (size_t i = 0; i + 1 < np; i++) {
            int32_t r = ref_find(rt, p + start[i], start[i + 2] - start[i]);
            if (r >= 0 && r < best_rank) {
                best_rank = r;
                best = i;
            }
        }
        if (best_rank == INT32_MAX)
            break;
        memmove(&start[best + 1], &start[best + 2], (np - best - 1) * sizeof *start);
        np--;
    }
    for (size_t i = 0; i < np; i++)
        out[i] = ref_find(rt, p + start[i], start[i + 1] - start[i]);
    return np;
}

TEST(test_bpe_matches_rank_reference)
{
    REQUIRE(g_tok);
    struct ref_table rt = {malloc((1u << 19) * sizeof(int32_t)), (1u << 19) - 1};
    REQUIRE(rt.slot);
    memset(rt.slot, 0xff, (1u << 19) * sizeof(int32_t));
    for (gl_token id = 0; id < GL_TOK_N_BASE; id++) {
        size_t n;
        const char *p = gl_tokenizer_token_bytes(g_tok, id, &n);
        uint32_t i = ref_hash(p, n) & rt.mask;
        while (rt.slot[i] >= 0)
            i = (i + 1) & rt.mask;
        rt.slot[i] = id;
    }
    // Lowercase-letter runs are single regex pieces: short ones take the quadratic path, those
    // over 64 bytes the heap path. Letters from a small alphabet make many merge ties.
    static const char *alpha[] = {"abcdefghijklmnopqrstuvwxyz", "aeinst", "ab"};
    char s[700];
    gl_token want[700];
    int bad = 0;
    for (int k = 0; k < 300 && bad < 3; k++) {
        const char *a = alpha[k % 3];
        size_t na = strlen(a), n = 2 + rng() % (k < 150 ? 63 : 600);
        for (size_t i = 0; i < n; i++)
            s[i] = a[rng() % na];
        size_t nw = ref_bpe(&rt, s, n, want);
        int ok = encodes_to(g_tok, s, n, 0, want, nw);
        CHECKF(ok, "piece of %zu bytes '%.40s...'", n, s);
        bad += !ok;
    }
    free(rt.slot);
}

TEST(test_roundtrip_random_bytes)
{
    REQUIRE(g_tok);
    static const char *frags[] = {"a",
                                  " ",
                                  "  ",
                                  "\n",
                                  "\r\n",
                                  "\t",
                                  "'s",
                                  "1234",
                                  "\xC3\xA9",
                                  "e\xCC\x81",
                                  "\xE2\x82\xAC",
                                  "\xF0\x9F\xA4\x96",
                                  "\xE4\xB8\xAD",
                                  "\xD0\x96",
                                  "<|eot|>",
                                  "\xE2\x82",
                                  "\xF0\x9F",
                                  "\xC0\xAF",
                                  "\xED\xA0\x80",
                                  "\xFF",
                                  "\x80",
                                  "Ab",
                                  "!?",
                                  "\x00"};
    char s[600], back[1200];
    int bad = 0;
    for (int k = 0; k < 400 && bad < 3; k++) {
        size_t n = 0, target = rng() % 500;
        while (n < target) {
            if (rng() % 3 == 0) {
                s[n++] = (char)(rng() & 0xFF); // raw random byte: mostly invalid UTF-8
            } else {
                const char *f = frags[rng() % (sizeof frags / sizeof frags[0])];
                size_t fl = f[0] ? strlen(f) : 1;
                if (n + fl > sizeof s)
                    break;
                memcpy(s + n, f, fl);
                n += fl;
            }
        }
        gl_token *ids;
        size_t n_ids;
        REQUIRE(gl_tokenizer_encode(g_tok, s, n, k & 1, 0, &ids, &n_ids, NULL) == GL_OK);
        size_t m = decode_all(g_tok, ids, n_ids, back, sizeof back);
        int ok = m == n && !memcmp(back, s, n);
        // The streaming decoder must give the same bytes in total.
        struct gl_detok d = {0};
        size_t o = 0;
        for (size_t i = 0; i < n_ids && ok; i++) {
            int w = gl_detok_feed(&d, g_tok, ids[i], 0, back + o, sizeof back - o);
            ok = w >= 0;
            o += w > 0 ? (size_t)w : 0;
        }
        int w = ok ? gl_detok_flush(&d, back + o, sizeof back - o) : -1;
        ok = ok && w >= 0 && o + (size_t)w == n && !memcmp(back, s, n);
        CHECKF(ok, "round trip failed on random string %d (%zu bytes)", k, n);
        bad += !ok;
        gl_free(ids);
    }
}

// ---- streaming detokenizer ----

static int utf8_complete(const char *s, int n)
{
    // 1 if s holds only whole, valid UTF-8 sequences
    for (int i = 0; i < n;) {
        uint8_t b = (uint8_t)s[i];
        int len = b < 0x80                 ? 1
                  : b >= 0xC2 && b <= 0xDF ? 2
                  : b >= 0xE0 && b <= 0xEF ? 3
                  : b >= 0xF0 && b <= 0xF4 ? 4
                                           : 0;
        if (!len || i + len > n)
            return 0;
        for (int k = 1; k < len; k++)
            if (((uint8_t)s[i + k] & 0xC0) != 0x80)
                return 0;
        i += len;
    }
    return 1;
}

TEST(test_detok_streaming)
{
    REQUIRE(g_tok);
    struct gl_detok d = {0};
    char out[64];
    // "€" = E2 82 AC as three single-byte tokens: nothing until the last byte arrives.
    gl_token b[3];
    for (int i = 0; i < 3; i++)
        b[i] = byte_id(g_tok, (uint8_t) "\xE2\x82\xAC"[i]);
    CHECK(gl_detok_feed(&d, g_tok, b[0], 0, out, sizeof out) == 0);
    CHECK(gl_detok_feed(&d, g_tok, b[1], 0, out, sizeof out) == 0);
    CHECK(gl_detok_feed(&d, g_tok, b[2], 0, out, sizeof out) == 3 &&
          !memcmp(out, "\xE2\x82\xAC", 3));
    CHECK(gl_detok_flush(&d, out, sizeof out) == 0);
    // An unfinished tail followed by ASCII is emitted as is (it can no longer complete).
    CHECK(gl_detok_feed(&d, g_tok, b[0], 0, out, sizeof out) == 0);
    CHECK(gl_detok_feed(&d, g_tok, b[1], 0, out, sizeof out) == 0);
    gl_token a = byte_id(g_tok, 'a');
    CHECK(gl_detok_feed(&d, g_tok, a, 0, out, sizeof out) == 3);
    CHECK(!memcmp(out,
                  "\xE2\x82"
                  "a",
                  3));
    // Flush releases a held tail; a too-small buffer consumes nothing.
    CHECK(gl_detok_feed(&d, g_tok, b[0], 0, out, sizeof out) == 0);
    CHECK(gl_detok_feed(&d, g_tok, a, 0, out, 1) == -1);
    CHECK(gl_detok_flush(&d, out, sizeof out) == 1 && (uint8_t)out[0] == 0xE2);
    // Specials: named unless skipped.
    CHECK(gl_detok_feed(&d, g_tok, GL_TOK_EOT, 0, out, sizeof out) == 7 &&
          !memcmp(out, "<|eot|>", 7));
    CHECK(gl_detok_feed(&d, g_tok, GL_TOK_EOT, 1, out, sizeof out) == 0);
    CHECK(gl_detok_feed(&d, g_tok, -5, 0, out, sizeof out) == 0);
    // Real multi-byte text split across tokens: every chunk released is whole UTF-8.
    const char *s = "\xF0\x9F\xA4\x96\xF0\x9F\xA4\x96 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5"
                    "\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xEC\x95\x88\xEB\x85\x95 \xF0\x9F\x91\xA8\xE2\x80"
                    "\x8D\xF0\x9F\x91\xA9";
    gl_token *ids;
    size_t n;
    REQUIRE(gl_tokenizer_encode(g_tok, s, strlen(s), 0, 0, &ids, &n, NULL) == GL_OK);
    char all[256];
    size_t o = 0;
    int split = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = gl_tokenizer_token_bytes(g_tok, ids[i], &len);
        split += !utf8_complete(p, (int)len);
        int w = gl_detok_feed(&d, g_tok, ids[i], 0, all + o, sizeof all - o);
        CHECK(w >= 0 && utf8_complete(all + o, w));
        o += w > 0 ? (size_t)w : 0;
    }
    CHECK(split > 0); // the string must really exercise partial tokens
    CHECK(gl_detok_flush(&d, all + o, sizeof all - o) == 0);
    CHECK(o == strlen(s) && !memcmp(all, s, o));
    gl_free(ids);
}

// ---- small tiktoken files ----

// 256 single-byte lines in a shuffled-free order, then extra multi-byte tokens.
static char *small_ranks(const char *extra_b64[], int n_extra)
{
    static const char *B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t cap = 256 * 12 + (size_t)n_extra * 64 + 64;
    char *s = malloc(cap);
    size_t o = 0;
    for (int b = 0; b < 256; b++)
        o += (size_t)snprintf(s + o, cap - o, "%c%c== %d\n", B64[b >> 2], B64[(b & 3) << 4], b);
    for (int i = 0; i < n_extra; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s %d\n", extra_b64[i], 256 + i);
    return s;
}

static gl_status load_text(const char *text, struct gl_tokenizer **t, struct gl_err *err)
{
    char path[256];
    tmp_path(path, sizeof path);
    if (!write_text(path, text))
        return GL_E_IO;
    gl_status st = gl_tokenizer_load_tiktoken(t, path, err);
    unlink(path);
    return st;
}

TEST(test_tiktoken_small_valid)
{
    const char *extra[] = {"YWI=" /* ab */, "YWJj" /* abc */, "Y2Q=" /* cd */};
    char *text = small_ranks(extra, 3);
    struct gl_tokenizer *t = NULL;
    struct gl_err err = {0};
    CHECKF(load_text(text, &t, &err) == GL_OK, "%s", err.msg);
    free(text);
    REQUIRE(t);
    CHECK(gl_tokenizer_n_vocab(t) == 259 + GL_TOK_N_SPECIAL);
    CHECK(gl_tokenizer_bos(t) == 259 && gl_tokenizer_eot(t) == 259 + 8);
    CHECK(gl_tokenizer_n_merges(t) == 3);
    gl_token l, r;
    gl_tokenizer_merge_at(t, 1, &l, &r);
    CHECK(l == 256 && r == 'c');
    const gl_token w1[] = {257, 256}; // "abcab": ab ab merge first, then (ab, c)
    CHECK(encodes_to(t, "abcab", 5, 0, w1, 2));
    const gl_token w2[] = {'a', 258, 'x'}; // "acdx": only cd merges
    CHECK(encodes_to(t, "acdx", 4, 0, w2, 3));
    const gl_token w3[] = {259 + 8, 'a'};
    CHECK(encodes_to(t, "<|eot|>a", 8, 1, w3, 2));
    gl_tokenizer_free(t);
}

static void expect_load_error(const char *text, gl_status want, const char *needle)
{
    struct gl_tokenizer *t = NULL;
    struct gl_err err = {0};
    gl_status st = load_text(text, &t, &err);
    CHECKF(st == want, "status %s, want %s (%s)", gl_status_name(st), gl_status_name(want),
           err.msg);
    CHECKF(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    CHECK(t == NULL);
    gl_tokenizer_free(t);
}

TEST(test_tiktoken_errors)
{
    char *base = small_ranks(NULL, 0);
    size_t nb = strlen(base);
    char *s = malloc(nb + 8192);

    snprintf(s, nb + 8192, "%sYW!= 256\n", base); // bad base64 on line 257
    expect_load_error(s, GL_E_FORMAT, ":257: invalid base64 at column 3");
    snprintf(s, nb + 8192, "%sYWI 256\n", base); // length not a multiple of 4
    expect_load_error(s, GL_E_FORMAT, ":257: invalid base64");
    snprintf(s, nb + 8192, "%sYWI= 255\n", base); // duplicate rank
    expect_load_error(s, GL_E_FORMAT, ":257: rank 255 already on line 256");
    snprintf(s, nb + 8192, "%sYWI= 257\n", base); // rank 256 missing
    expect_load_error(s, GL_E_FORMAT, "rank 256 is missing");
    snprintf(s, nb + 8192, "%sYWI=256\n", base); // no separator
    expect_load_error(s, GL_E_FORMAT, ":257: expected 'base64 rank'");
    snprintf(s, nb + 8192, "%sYWI= 2x6\n", base);
    expect_load_error(s, GL_E_FORMAT, ":257: rank '2x6' is not an integer");
    snprintf(s, nb + 8192, "%sAA== 256\n", base); // the bytes of rank 0 again
    expect_load_error(s, GL_E_FORMAT, "tokens 0 and 256 have the same bytes");
    snprintf(s, nb + 8192, "%s", base); // long line
    size_t o = strlen(s);
    memset(s + o, 'Q', 5000);
    snprintf(s + o + 5000, 16, " 256\n");
    expect_load_error(s, GL_E_LIMIT, ":257: line is 5004 bytes");
    // Byte 0x41 missing: rank 65 replaced by a two-byte token.
    char *nl = base;
    for (int i = 0; i < 65; i++)
        nl = strchr(nl, '\n') + 1;
    memcpy(nl, "YWI=", 4);
    expect_load_error(base, GL_E_FORMAT, "no token for byte 0x41");
    expect_load_error("", GL_E_FORMAT, "no tokens");
    struct gl_tokenizer *t = NULL;
    struct gl_err err = {0};
    CHECK(gl_tokenizer_load_tiktoken(&t, "/nonexistent/x.model", &err) == GL_E_IO);
    CHECK(strstr(err.msg, "/nonexistent/x.model") != NULL);
    free(s);
    free(base);
}

// ---- GGUF loader ----

// GPT-2 byte-to-unicode: printable Latin-1 bytes are themselves, the other 68 become U+0100...
static size_t gpt2_encode(const uint8_t *p, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int b = p[i], cp = b;
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
            int k = 0;
            for (int c = 0; c < b; c++)
                k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
            cp = 256 + k;
        }
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else {
            out[o++] = (char)(0xC0 | cp >> 6);
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[o] = '\0';
    return o;
}

enum gguf_flaw { FLAW_NONE, FLAW_MODEL, FLAW_PRE, FLAW_TYPES_LEN, FLAW_MERGE, FLAW_BOS, FLAW_TYPE };

// Vocab: 256 bytes, "ab", "abc", " a", then <|eot|> (control), <|x|> (user-defined).
static gl_status gguf_vocab(enum gguf_flaw flaw, struct gl_tokenizer **t, struct gl_err *err)
{
    static char strs[262][8];
    const char *ptrs[262];
    int32_t types[262];
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        gpt2_encode(&c, 1, strs[b]);
    }
    gpt2_encode((const uint8_t *)"ab", 2, strs[256]);
    gpt2_encode((const uint8_t *)"abc", 3, strs[257]);
    gpt2_encode((const uint8_t *)" a", 2, strs[258]);
    strcpy(strs[259], "<|eot|>");
    strcpy(strs[260], "<|x|>");
    strcpy(strs[261], "[PAD]");
    for (int i = 0; i < 262; i++) {
        ptrs[i] = strs[i];
        types[i] = i == 259   ? GL_TOKTYPE_CONTROL
                   : i == 260 ? GL_TOKTYPE_USER_DEFINED
                   : i == 261 ? GL_TOKTYPE_UNUSED
                              : GL_TOKTYPE_NORMAL;
    }
    if (flaw == FLAW_TYPE)
        types[7] = 9;
    const char *merges[] = {"a b", "ab c", "\xC4\xA0 a", flaw == FLAW_MERGE ? "a zz" : "a b"};
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    if (!w)
        return GL_E_NOMEM;
    gl_status st =
        gl_gguf_writer_add_str(w, "tokenizer.ggml.model", flaw == FLAW_MODEL ? "llama" : "gpt2");
    if (st == GL_OK)
        st = gl_gguf_writer_add_str(w, "tokenizer.ggml.pre", flaw == FLAW_PRE ? "qwen2" : "llama4");
    if (st == GL_OK)
        st = gl_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", ptrs, NULL, 262);
    if (st == GL_OK)
        st = gl_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GL_GGUF_I32, types,
                                    flaw == FLAW_TYPES_LEN ? 261 : 262);
    if (st == GL_OK)
        st = gl_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 4);
    if (st == GL_OK)
        st = gl_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", flaw == FLAW_BOS ? 262 : 259);
    if (st == GL_OK)
        st = gl_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 259);
    if (st == GL_OK)
        st = gl_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 1);
    char path[256];
    tmp_path(path, sizeof path);
    if (st == GL_OK)
        st = gl_gguf_writer_write(w, path, 0, NULL, NULL, err);
    gl_gguf_writer_delete(w);
    struct gl_gguf *g = NULL;
    if (st == GL_OK)
        st = gl_gguf_open(&g, path, NULL, err);
    unlink(path);
    if (st == GL_OK)
        st = gl_tokenizer_load_gguf(t, g, err);
    gl_gguf_close(g);
    return st;
}

TEST(test_gguf_vocab)
{
    struct gl_tokenizer *t = NULL;
    struct gl_err err = {0};
    CHECKF(gguf_vocab(FLAW_NONE, &t, &err) == GL_OK, "%s", err.msg);
    REQUIRE(t);
    CHECK(gl_tokenizer_n_vocab(t) == 262 && gl_tokenizer_n_merges(t) == 4);
    CHECK(gl_tokenizer_add_bos(t) == 1 && gl_tokenizer_bos(t) == 259 && gl_tokenizer_eot(t) == -1);
    size_t len;
    const char *p = gl_tokenizer_token_bytes(t, 258, &len);
    CHECK(len == 2 && !memcmp(p, " a", 2));
    p = gl_tokenizer_token_bytes(t, 10, &len);
    CHECK(len == 1 && p[0] == '\n');
    p = gl_tokenizer_token_bytes(t, 0xE9, &len);
    CHECK(len == 1 && (uint8_t)p[0] == 0xE9);
    const gl_token w1[] = {257, ' ', 256}; // "abc ab": abc | " ab": (a, b) outranks (" ", a)
    CHECK(encodes_to(t, "abc ab", 6, 0, w1, 3));
    const gl_token w1b[] = {'x', 258, 'c'}; // "x ac": x | " ac": only (" ", a) merges
    CHECK(encodes_to(t, "x ac", 4, 0, w1b, 3));
    const gl_token w2[] = {259, 260, 'x'};
    CHECK(encodes_to(t, "<|eot|><|x|>x", 13, 1, w2, 3));
    CHECK(gl_tokenizer_find_special(t, "<|x|>") == 260);
    CHECK(gl_tokenizer_find_special(t, "[PAD]") == -1);
    gl_tokenizer_free(t);

    static const struct {
        enum gguf_flaw flaw;
        gl_status st;
        const char *needle;
    } cases[] = {
        {FLAW_MODEL, GL_E_UNSUPPORTED, "\"llama\" is not supported"},
        {FLAW_PRE, GL_E_UNSUPPORTED, "pre-tokenizer \"qwen2\""},
        {FLAW_TYPES_LEN, GL_E_FORMAT, "262 tokens and 261 token types"},
        {FLAW_MERGE, GL_E_FORMAT, "merge 3 (\"a zz\"): the right part is not a token"},
        {FLAW_BOS, GL_E_FORMAT, "bos_token_id = 262"},
        {FLAW_TYPE, GL_E_FORMAT, "token_type[7] = 9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t = NULL;
        err = (struct gl_err){0};
        gl_status st = gguf_vocab(cases[i].flaw, &t, &err);
        CHECKF(st == cases[i].st && strstr(err.msg, cases[i].needle),
               "case %zu: %s '%s' (want '%s')", i, gl_status_name(st), err.msg, cases[i].needle);
        CHECK(t == NULL);
    }
}

// ---- concurrency and speed ----

struct enc_job {
    const char *text;
    size_t len;
    gl_token *ids;
    size_t n;
    gl_status st;
};

static void *enc_thread(void *arg)
{
    struct enc_job *j = arg;
    for (int k = 0; k < 3; k++) {
        gl_free(j->ids);
        j->st = gl_tokenizer_encode(g_tok, j->text, j->len, 1, 0, &j->ids, &j->n, NULL);
    }
    return NULL;
}

static char *mixed_text(size_t target, size_t *len)
{
    static const char *parts[] = {"The quick brown fox jumps over the lazy dog. ",
                                  "int main(void) { return 0; }\n",
                                  "Привет, мир! ",
                                  "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C ",
                                  "12345 67890 ",
                                  "\xF0\x9F\xA4\x96\xF0\x9F\x91\x8D ",
                                  "It's WE'LL <|eot|>  \n\n\t"};
    char *s = malloc(target + 128);
    size_t o = 0;
    while (o < target) {
        const char *p = parts[rng() % 7];
        memcpy(s + o, p, strlen(p));
        o += strlen(p);
    }
    *len = o;
    return s;
}

TEST(test_concurrent_encode_and_speed)
{
    REQUIRE(g_tok);
    size_t len;
    char *text = mixed_text(1 << 20, &len);
    struct enc_job ref = {text, len, NULL, 0, GL_OK};
    int64_t t0 = gl_time_us();
    ref.st = gl_tokenizer_encode(g_tok, text, len, 1, 0, &ref.ids, &ref.n, NULL);
    double secs = (double)(gl_time_us() - t0) / 1e6;
    REQUIRE(ref.st == GL_OK);
    printf("# encode %zu bytes -> %zu ids in %.3f s = %.1f MB/s\n", len, ref.n, secs,
           (double)len / secs / 1e6);
    gl_free(ref.ids);
    // Two threads encode the same quarter concurrently; both must equal a single-thread run.
    ref = (struct enc_job){text, len / 4, NULL, 0, GL_OK};
    REQUIRE(gl_tokenizer_encode(g_tok, text, len / 4, 1, 0, &ref.ids, &ref.n, NULL) == GL_OK);
    struct enc_job jobs[2] = {{text, len / 4, NULL, 0, GL_OK}, {text, len / 4, NULL, 0, GL_OK}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&th[i], NULL, enc_thread, &jobs[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK(jobs[i].st == GL_OK && jobs[i].n == ref.n);
        CHECK(jobs[i].ids && !memcmp(jobs[i].ids, ref.ids, ref.n * sizeof(gl_token)));
        gl_free(jobs[i].ids);
    }
    gl_free(ref.ids);
    free(text);
}

TEST(test_free_real_vocab)
{
    gl_tokenizer_free(g_tok);
    g_tok = NULL;
    gl_tokenizer_free(NULL);
}

int main(void)
{
    RUN_TESTS(test_load_real_vocab, test_derived_merges, test_known_ids,
              test_specials_only_when_asked, test_bpe_matches_rank_reference,
              test_roundtrip_random_bytes, test_detok_streaming, test_tiktoken_small_valid,
              test_tiktoken_errors, test_gguf_vocab, test_concurrent_encode_and_speed,
              test_free_real_vocab);
}
