// SPDX-License-Identifier: MIT
// Tests for mediasrc/ (gl_mediasrc_load), without sockets: data: URLs decode exactly and every
// malformed one is a client error (400) saying why; local files load only from inside the allowed
// root, and "..", symlinks that leave it, %2e%2e in file:// URLs, relative paths, directories,
// FIFOs (without blocking), devices and other schemes are refused with a message saying why;
// paths outside the root are refused before the file system is consulted (same message whether
// they exist or not); remote URLs are refused unless their host is allowed (the allow-list
// matching is tested on gl_mediasrc_host_allowed, so nothing is fetched); an unresolvable root is
// the server's fault (500).
#include "mediasrc/mediasrc.h"
#include "test.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[PATH_MAX]; // the test's scratch directory: root/ inside it is the allowed root

// Loads url; returns the HTTP status (0 on success) and checks that a refusal says why and leaves
// the outputs empty.
static int load(const struct gl_mediasrc_opts *o, const char *url, uint8_t **b, size_t *n)
{
    struct gl_err e = {0};
    gl_status st = gl_mediasrc_load(o, url, strlen(url), b, n, &e);
    if (st == GL_OK)
        return 0;
    CHECKF(e.code == st && e.msg[0] != 0, "status %s, message '%s'", gl_status_name(st), e.msg);
    CHECK(*b == NULL && *n == 0);
    return gl_mediasrc_http_status(st);
}

// Loads url, which must be refused with a 400 whose message contains want.
static void refused(const struct gl_mediasrc_opts *o, const char *url, const char *want, int line)
{
    struct gl_err e = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    gl_status st = gl_mediasrc_load(o, url, strlen(url), &b, &n, &e);
    if (st == GL_OK)
        gl_free(b);
    const int http = st == GL_OK ? 0 : gl_mediasrc_http_status(st);
    CHECKF(st != GL_OK && http == 400 && strstr(e.msg, want) != NULL,
           "line %d: %s: got %s (HTTP %d), want a 400 containing '%s'", line, url,
           st == GL_OK ? "success" : e.msg, http, want);
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
    struct gl_mediasrc_opts o = {.max_bytes = 16};
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
    struct gl_err e = {0};
    CHECK(gl_mediasrc_load(&o, "data:x;base64,AAAA", 0, &b, &n, &e) == GL_E_INVAL);
    CHECK(gl_mediasrc_load(&o, "data:\0;base64,AAAA", 18, &b, &n, &e) == GL_E_INVAL);
    // The reason is in the message (the caller prefixes the request field).
    REFUSED(&o, "data:image/png;base64,aGVsbG8", "is not a multiple of 4");
    REFUSED(&o, "data:image/png;base64,aGV*bG8=",
            "invalid base64 character 0x2a at payload "
            "offset 3");
    REFUSED(&o, "data:image/png;base64,", "payload is empty");
    REFUSED(&o, "data:image/png,aGVsbG8=", "only base64 data: URLs");
    REFUSED(&o, "data:image/png;base64,aGVsbG8sIHdvcmxkLCBoaSEh", "18 bytes is over the 16-byte");
}

TEST(test_remote_and_schemes_refused)
{
    struct gl_mediasrc_opts o = {.local_root = g_dir, .max_bytes = 1 << 20};
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK(load(&o, "http://127.0.0.1/cat.png", &b, &n) == 400);
    CHECK(load(&o, "HTTPS://example.com/cat.png", &b, &n) == 400);
    CHECK(load(&o, "ftp://example.com/cat.png", &b, &n) == 400);
    CHECK(load(&o, "cat.png", &b, &n) == 400); // relative
    CHECK(load(&o, "", &b, &n) == 400);
    REFUSED(&o, "http://127.0.0.1/cat.png", "started without --allowed-media-domains");
    REFUSED(&o, "cat.png", "a local media path must be absolute");
    REFUSED(&o, "sub/cat.png", "a local media path must be absolute");
    REFUSED(&o, "./cat.png", "a local media path must be absolute");
    REFUSED(&o, "file://cat.png", "a local media path must be absolute");
    // With an allow-list, a host not on it is refused before anything is sent (no socket: curl's
    // URL parser only), and the message names the host.
    struct gl_mediasrc_opts r = {.max_bytes = 1 << 20, .allowed_domains = "example.com"};
    REFUSED(&r, "http://a.example.com/cat.png", "host 'a.example.com' is not in");
    REFUSED(&r, "https://example.com.evil.test/x", "host 'example.com.evil.test' is not in");
    REFUSED(&r, "http://127.0.0.1/cat.png", "host '127.0.0.1' is not in");
    REFUSED(&r, "ftp://example.com/cat.png", "unsupported URL scheme");
    REFUSED(&r, "http://[::1/x", "the URL does not parse");
}

// The --allowed-media-domains matching alone (no I/O): exact, case-insensitive names in a comma
// list with spaces around entries ignored, or "*".
TEST(test_host_allow_list)
{
    CHECK(gl_mediasrc_host_allowed("example.com", "example.com"));
    CHECK(gl_mediasrc_host_allowed("example.com", "EXAMPLE.com"));
    CHECK(gl_mediasrc_host_allowed("a.test, example.com ,b.test", "example.com"));
    CHECK(gl_mediasrc_host_allowed(",,example.com,", "example.com"));
    CHECK(gl_mediasrc_host_allowed("a.test,*", "anything.at.all"));
    CHECK(gl_mediasrc_host_allowed("*", "127.0.0.1"));
    CHECK(!gl_mediasrc_host_allowed("example.com", "a.example.com")); // no subdomains
    CHECK(!gl_mediasrc_host_allowed("example.com", "example.co"));    // no prefixes
    CHECK(!gl_mediasrc_host_allowed("example.com", "example.com.evil.test"));
    CHECK(!gl_mediasrc_host_allowed("*.example.com", "a.example.com")); // no wildcards but "*"
    CHECK(!gl_mediasrc_host_allowed("ex ample.com", "example.com"));
    CHECK(!gl_mediasrc_host_allowed("", "example.com"));
    CHECK(!gl_mediasrc_host_allowed(" , ", "example.com"));
    CHECK(!gl_mediasrc_host_allowed("example.com", ""));
    CHECK(!gl_mediasrc_host_allowed("a.test,b.test", "a.tes"));
}

// Whose fault: memory and the server's own setup are 500, everything else the client's 400.
TEST(test_status_mapping)
{
    CHECK(gl_mediasrc_http_status(GL_E_NOMEM) == 500);
    CHECK(gl_mediasrc_http_status(GL_E_INTERNAL) == 500);
    CHECK(gl_mediasrc_http_status(GL_E_INVAL) == 400);
    CHECK(gl_mediasrc_http_status(GL_E_FORMAT) == 400);
    CHECK(gl_mediasrc_http_status(GL_E_LIMIT) == 400);
    CHECK(gl_mediasrc_http_status(GL_E_IO) == 400);
    CHECK(gl_mediasrc_http_status(GL_E_UNSUPPORTED) == 400);
    char root[PATH_MAX + 16], url[PATH_MAX + 32];
    snprintf(root, sizeof root, "%s/no-such-root", g_dir);
    snprintf(url, sizeof url, "%s/a.png", root);
    struct gl_mediasrc_opts o = {.local_root = root, .max_bytes = 1 << 20};
    struct gl_err e = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    gl_status st = gl_mediasrc_load(&o, url, strlen(url), &b, &n, &e);
    CHECKF(st == GL_E_INTERNAL && strstr(e.msg, "allowed local media path cannot be resolved"),
           "%s: %s", gl_status_name(st), e.msg);
    CHECK(gl_mediasrc_http_status(st) == 500 && b == NULL && n == 0);
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
    struct gl_mediasrc_opts none = {.max_bytes = 1 << 20},
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
    struct gl_mediasrc_opts o = {.local_root = root, .max_bytes = 1 << 20};

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
    struct gl_mediasrc_opts r = {.local_root = rroot, .max_bytes = 1 << 20};
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
    struct gl_mediasrc_opts dev = {.local_root = "/dev", .max_bytes = 1 << 20};
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
    RUN_TESTS(test_data_urls, test_remote_and_schemes_refused, test_host_allow_list,
              test_status_mapping, test_local_paths, test_local_escapes);
}
