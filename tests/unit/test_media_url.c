// SPDX-License-Identifier: MIT
// Tests for gl_api_media_load (api/media_url.c): data: URLs decode exactly and every malformed
// one is a 400 naming the part; local files load only from inside the allowed root, and "..",
// symlinks that leave it, %2e%2e in file:// URLs, relative paths, directories, FIFOs (without
// blocking), devices and other schemes are refused with a message saying why; paths outside the
// root are refused before the file system is consulted (same message whether they exist or not);
// remote URLs are refused.
#include "api/api.h"
#include "test.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[PATH_MAX]; // the test's scratch directory: root/ inside it is the allowed root

// Loads url; returns the HTTP status (0 on success) and checks the message names the part.
static int load(const struct gl_api_media_opts *o, const char *url, uint8_t **b, size_t *n)
{
    struct gl_api_error e = {0};
    gl_status st =
        gl_api_media_load(o, url, strlen(url), "messages[0].content[1].image_url", b, n, &e);
    if (st == GL_OK)
        return 0;
    CHECKF(strncmp(e.msg, "messages[0].content[1].image_url: ", 34) == 0, "message: %s", e.msg);
    CHECK(*b == NULL && *n == 0);
    return e.http;
}

// Loads url, which must be refused with a 400 whose message contains want.
static void refused(const struct gl_api_media_opts *o, const char *url, const char *want, int line)
{
    struct gl_api_error e = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    gl_status st = gl_api_media_load(o, url, strlen(url), "p", &b, &n, &e);
    if (st == GL_OK)
        gl_free(b);
    CHECKF(st != GL_OK && e.http == 400 && strstr(e.msg, want) != NULL,
           "line %d: %s: got %s (HTTP %d), want a 400 containing '%s'", line, url,
           st == GL_OK ? "success" : e.msg, e.http, want);
}
#define REFUSED(o, url, want) refused(o, url, want, __LINE__)

static void write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    GL_ASSERT(f != NULL);
    GL_ASSERT(fwrite(data, 1, n, f) == n);
    fclose(f);
}

TEST(test_data_urls)
{
    struct gl_api_media_opts o = {.max_bytes = 16};
    uint8_t *b = NULL;
    size_t n = 0;
    // "hello, world" = aGVsbG8sIHdvcmxk; "hi!?" = aGkhPw==
    CHECK(load(&o, "data:image/png;base64,aGVsbG8sIHdvcmxk", &b, &n) == 0);
    CHECK(n == 12 && b && memcmp(b, "hello, world", 12) == 0);
    gl_free(b);
    CHECK(load(&o, "DATA:image/jpeg;BASE64,aGkhPw==", &b, &n) == 0);
    CHECK(n == 4 && b && memcmp(b, "hi!?", 4) == 0);
    gl_free(b);
    CHECK(load(&o, "data:image/png;base64,", &b, &n) == 400);           // empty payload
    CHECK(load(&o, "data:image/png,aGVsbG8=", &b, &n) == 400);          // not base64
    CHECK(load(&o, "data:image/png;base64aGVsbG8=", &b, &n) == 400);    // no comma
    CHECK(load(&o, "data:image/png;base64,aGVsbG8", &b, &n) == 400);    // length % 4
    CHECK(load(&o, "data:image/png;base64,aGV*bG8=", &b, &n) == 400);   // bad character
    CHECK(load(&o, "data:image/png;base64,aGVs\nbG8=", &b, &n) == 400); // whitespace
    CHECK(load(&o, "data:image/png;base64,====", &b, &n) == 400);
    // 18 bytes against a 16-byte limit
    CHECK(load(&o, "data:image/png;base64,aGVsbG8sIHdvcmxkLCBoaSEh", &b, &n) == 400);
    struct gl_api_error e = {0};
    CHECK(gl_api_media_load(&o, "data:x;base64,AAAA", 0, "p", &b, &n, &e) == GL_E_INVAL);
    CHECK(gl_api_media_load(&o, "data:\0;base64,AAAA", 18, "p", &b, &n, &e) == GL_E_INVAL);
}

TEST(test_remote_and_schemes_refused)
{
    struct gl_api_media_opts o = {.local_root = g_dir, .max_bytes = 1 << 20};
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK(load(&o, "http://127.0.0.1/cat.png", &b, &n) == 400);
    CHECK(load(&o, "HTTPS://example.com/cat.png", &b, &n) == 400);
    CHECK(load(&o, "ftp://example.com/cat.png", &b, &n) == 400);
    CHECK(load(&o, "cat.png", &b, &n) == 400); // relative
    CHECK(load(&o, "", &b, &n) == 400);
}

TEST(test_local_paths)
{
    char root[PATH_MAX + 8], p[PATH_MAX + 64], url[PATH_MAX + 80];
    snprintf(root, sizeof root, "%s/root", g_dir);
    snprintf(p, sizeof p, "%s/sub", root);
    REQUIRE(mkdir(root, 0700) == 0 && mkdir(p, 0700) == 0);
    snprintf(p, sizeof p, "%s/sub/a.png", root);
    write_file(p, "PNGDATA", 7);
    snprintf(p, sizeof p, "%s/secret.txt", g_dir); // outside the root
    write_file(p, "SECRET", 6);
    snprintf(p, sizeof p, "%s/empty.png", root);
    write_file(p, "", 0);
    char link[PATH_MAX + 64];
    snprintf(link, sizeof link, "%s/escape.png", root); // a symlink that leaves the root
    snprintf(p, sizeof p, "%s/secret.txt", g_dir);
    REQUIRE(symlink(p, link) == 0);
    snprintf(link, sizeof link, "%s/inside.png", root); // a symlink that stays inside is fine
    snprintf(p, sizeof p, "%s/sub/a.png", root);
    REQUIRE(symlink(p, link) == 0);

    uint8_t *b = NULL;
    size_t n = 0;
    struct gl_api_media_opts none = {.max_bytes = 1 << 20},
                             o = {.local_root = root, .max_bytes = 1 << 20},
                             tiny = {.local_root = root, .max_bytes = 4};
    snprintf(url, sizeof url, "%s/sub/a.png", root);
    CHECK(load(&none, url, &b, &n) == 400); // no root configured
    CHECK(load(&o, url, &b, &n) == 0 && n == 7 && memcmp(b, "PNGDATA", 7) == 0);
    gl_free(b);
    snprintf(url, sizeof url, "file://%s/sub/../sub/a.png", root);
    CHECK(load(&o, url, &b, &n) == 0 && n == 7);
    gl_free(b);
    snprintf(url, sizeof url, "%s/inside.png", root);
    CHECK(load(&o, url, &b, &n) == 0 && n == 7);
    gl_free(b);
    CHECK(load(&tiny, url, &b, &n) == 400); // over the byte limit
    snprintf(url, sizeof url, "%s/../secret.txt", root);
    CHECK(load(&o, url, &b, &n) == 400); // ".." out of the root
    snprintf(url, sizeof url, "%s/escape.png", root);
    CHECK(load(&o, url, &b, &n) == 400); // symlink out of the root
    snprintf(url, sizeof url, "%s/secret.txt", g_dir);
    CHECK(load(&o, url, &b, &n) == 400); // absolute path outside
    snprintf(url, sizeof url, "%sX/sub/a.png", root);
    CHECK(load(&o, url, &b, &n) == 400); // a sibling whose name extends the root's
    snprintf(url, sizeof url, "%s/missing.png", root);
    CHECK(load(&o, url, &b, &n) == 400);
    snprintf(url, sizeof url, "%s/sub", root);
    CHECK(load(&o, url, &b, &n) == 400); // a directory
    snprintf(url, sizeof url, "%s/empty.png", root);
    CHECK(load(&o, url, &b, &n) == 400);
}

// The hostile cases of the security item, each with the reason the message must give.
TEST(test_local_escapes)
{
    char root[PATH_MAX + 8], p[PATH_MAX + 64], url[PATH_MAX + 80];
    snprintf(root, sizeof root, "%s/esc", g_dir);
    REQUIRE(mkdir(root, 0700) == 0);
    snprintf(p, sizeof p, "%s/sub", root);
    REQUIRE(mkdir(p, 0700) == 0);
    snprintf(p, sizeof p, "%s/a b.png", root);
    write_file(p, "SPACED", 6);
    snprintf(p, sizeof p, "%s/secret.txt", g_dir);
    write_file(p, "SECRET", 6);
    char link[PATH_MAX + 64];
    snprintf(link, sizeof link, "%s/out.png", root); // a symlink inside pointing outside
    REQUIRE(symlink(p, link) == 0);
    snprintf(link, sizeof link, "%s/outdir", root); // a directory symlink pointing outside
    REQUIRE(symlink(g_dir, link) == 0);
    snprintf(p, sizeof p, "%s/fifo.png", root);
    REQUIRE(mkfifo(p, 0600) == 0);
    struct gl_api_media_opts o = {.local_root = root, .max_bytes = 1 << 20};

    snprintf(url, sizeof url, "%s/../secret.txt", root);
    REFUSED(&o, url, "outside the allowed local media path");
    snprintf(url, sizeof url, "%s/sub/../../secret.txt", root);
    REFUSED(&o, url, "outside the allowed local media path");
    snprintf(url, sizeof url, "file://%s/%%2e%%2e/secret.txt", root); // "%2e%2e" is ".."
    REFUSED(&o, url, "outside the allowed local media path");
    snprintf(url, sizeof url, "file://%s/%%2E%%2e/%%2e%%2E/secret.txt", root);
    REFUSED(&o, url, "outside the allowed local media path");
    snprintf(url, sizeof url, "file://%s/sub%%2f..%%2f..%%2fsecret.txt", root); // "%2f" is "/"
    REFUSED(&o, url, "outside the allowed local media path");
    snprintf(url, sizeof url, "file://%s/a%%00.png", root);
    REFUSED(&o, url, "malformed or NUL %-escape");
    snprintf(url, sizeof url, "file://%s/a%%zz.png", root);
    REFUSED(&o, url, "malformed or NUL %-escape");
    snprintf(url, sizeof url, "%s/out.png", root);
    REFUSED(&o, url, "outside the allowed local media path (after resolving symlinks)");
    snprintf(url, sizeof url, "%s/outdir/secret.txt", root);
    REFUSED(&o, url, "outside the allowed local media path (after resolving symlinks)");
    snprintf(url, sizeof url, "%s/secret.txt", g_dir); // absolute, outside
    REFUSED(&o, url, "outside the allowed local media path");
    REFUSED(&o, "/etc/passwd", "outside the allowed local media path");
    REFUSED(&o, "file:///etc/passwd", "outside the allowed local media path");
    // A file that does not exist outside the root gets the same answer as one that does.
    snprintf(url, sizeof url, "%s/no-such-file", g_dir);
    REFUSED(&o, url, "outside the allowed local media path");
    char rroot[PATH_MAX + 8];
    snprintf(rroot, sizeof rroot, "%s/root", g_dir);
    struct gl_api_media_opts r = {.local_root = rroot, .max_bytes = 1 << 20};
    snprintf(url, sizeof url, "%s/rootX/sub/a.png", g_dir); // prefix sibling of .../root
    REFUSED(&r, url, "outside the allowed local media path");
    snprintf(url, sizeof url, "%s/sub", root);
    REFUSED(&o, url, "not a regular file");
    snprintf(url, sizeof url, "%s/", root);
    REFUSED(&o, url, "not a regular file");
    snprintf(url, sizeof url, "%s/fifo.png", root); // must not block waiting for a writer
    REFUSED(&o, url, "not a regular file");
    snprintf(url, sizeof url, "%s/missing.png", root);
    REFUSED(&o, url, "No such file");
    // A character device under the root (an operator who allowed /dev).
    struct gl_api_media_opts dev = {.local_root = "/dev", .max_bytes = 1 << 20};
    REFUSED(&dev, "/dev/null", "not a regular file");
    REFUSED(&dev, "/dev/zero", "not a regular file");
    // file:// URLs are percent-decoded; plain paths are taken literally.
    uint8_t *b = NULL;
    size_t n = 0;
    snprintf(url, sizeof url, "file://%s/a%%20b.png", root);
    CHECK(load(&o, url, &b, &n) == 0 && n == 6 && memcmp(b, "SPACED", 6) == 0);
    gl_free(b);
    snprintf(url, sizeof url, "%s/a b.png", root);
    CHECK(load(&o, url, &b, &n) == 0 && n == 6);
    gl_free(b);
    snprintf(url, sizeof url, "%s/a%%20b.png", root);
    REFUSED(&o, url, "No such file");
}

static void cleanup(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed: %s\n", g_dir);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s/glint_test_media_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    GL_ASSERT(mkdtemp(g_dir) != NULL);
    atexit(cleanup);
    char sib[PATH_MAX + 32];
    snprintf(sib, sizeof sib, "%s/rootX", g_dir); // for the prefix test
    GL_ASSERT(mkdir(sib, 0700) == 0);
    snprintf(sib, sizeof sib, "%s/rootX/sub", g_dir);
    GL_ASSERT(mkdir(sib, 0700) == 0);
    snprintf(sib, sizeof sib, "%s/rootX/sub/a.png", g_dir);
    write_file(sib, "OTHER", 5);
    RUN_TESTS(test_data_urls, test_remote_and_schemes_refused, test_local_paths,
              test_local_escapes);
}
