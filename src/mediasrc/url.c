// SPDX-License-Identifier: MIT
// mediasrc/url: the bytes behind an image_url / video_url part (mediasrc.h, gl_mediasrc_load).
// Sources, as vLLM takes them: a data: URL with a base64 payload, or a local file under the
// operator's --allowed-local-media-path. Local paths are checked three times, each closing a
// hole the others leave (docs/SECURITY.md):
//  1. lexically ("." and ".." folded, nothing touched on disk): a path that does not name
//     something under the root is refused before any file-system call, so a client cannot probe
//     which files exist elsewhere through the difference between "no such file" and "outside";
//  2. realpath() (every symlink): the resolved file must still lie inside the resolved root, so
//     a symlink inside the root that points outside is refused like a "../" path;
//  3. the open itself: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) of the resolved path
//     relative to the root, so a directory swapped for a symlink between 2 and 3 is refused
//     (plain open with O_NOFOLLOW where the kernel lacks openat2). O_NONBLOCK keeps a FIFO from
//     blocking the open; anything but a regular file is then refused.
// file:// URLs are percent-decoded (RFC 8089) before these checks; plain paths are taken as is.
// http(s) URLs go to fetch.c (only hosts in --allowed-media-domains).
#include "base/buf.h"
#include "mediasrc/mediasrc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// "data:[<mime>][;param=v]*;base64,<payload>" -> decoded payload.
static gl_status load_data_url(const struct gl_mediasrc_opts *o, const char *url, size_t len,
                               uint8_t **bytes, size_t *n, struct gl_err *err)
{
    const char *comma = memchr(url, ',', len);
    if (!comma)
        return gl_err_set(err, GL_E_INVAL, "a data: URL needs a ',' before its payload");
    size_t head = (size_t)(comma - url);
    if (head < 12 || strncasecmp(comma - 7, ";base64", 7) != 0)
        return gl_err_set(err, GL_E_INVAL,
                          "only base64 data: URLs are accepted (data:<type>;base64,<payload>)");
    const uint8_t *p = (const uint8_t *)comma + 1;
    size_t plen = len - head - 1;
    if (plen == 0)
        return gl_err_set(err, GL_E_INVAL, "the data: URL's payload is empty");
    if (plen / 4 * 3 > o->max_bytes + 2)
        return gl_err_set(err, GL_E_LIMIT,
                          "the data: URL's payload (%zu base64 characters) is over the %zu-byte "
                          "limit for one media part",
                          plen, o->max_bytes);
    uint8_t *buf = gl_malloc(plen / 4 * 3 + 1);
    if (!buf)
        return gl_err_set(err, GL_E_NOMEM, "no memory for a %zu-byte payload", plen);
    size_t bad = 0;
    long got = gl_b64_decode(p, plen, buf, &bad);
    if (got < 0) {
        gl_free(buf);
        if (bad >= plen)
            return gl_err_set(err, GL_E_FORMAT,
                              "the base64 payload's length (%zu) is not a multiple of 4", plen);
        return gl_err_set(err, GL_E_FORMAT, "invalid base64 character 0x%02x at payload offset %zu",
                          p[bad], bad);
    }
    if ((size_t)got > o->max_bytes) {
        gl_free(buf);
        return gl_err_set(err, GL_E_LIMIT,
                          "%ld bytes is over the %zu-byte limit for one media part", got,
                          o->max_bytes);
    }
    *bytes = buf;
    *n = (size_t)got;
    return GL_OK;
}

// Folds "//", "/./" and "/../" of the absolute path p in place, as a path string ("/.." stays
// "/"); no file-system access.
static void lexical_normalize(char *p)
{
    char *out = p; // p[0] == '/'
    const char *in = p;
    while (*in) {
        while (*in == '/')
            in++;
        const char *seg = in;
        while (*in && *in != '/')
            in++;
        size_t n = (size_t)(in - seg);
        if (n == 0 || (n == 1 && seg[0] == '.'))
            continue;
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > p && *--out != '/') {
            }
            continue;
        }
        *out++ = '/';
        memmove(out, seg, n);
        out += n;
    }
    if (out == p)
        *out++ = '/';
    *out = 0;
}

// 1 when path is root or lies below it (both normalized, absolute).
static int path_under(const char *path, const char *root)
{
    size_t rl = strlen(root);
    if (rl == 1) // root is "/"
        return 1;
    return strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == 0);
}

// Opens the symlink-free path real (inside root) for reading, without following any symlink
// and without blocking on a FIFO. -1 with errno on failure.
static int open_beneath(const char *root, const char *real)
{
    size_t rl = strlen(root);
    const char *rel = real + (rl == 1 ? 1 : rl + (real[rl] == '/'));
    int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
#ifdef SYS_openat2
    int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    struct open_how how = {.flags = (uint64_t)flags,
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dfd, rel[0] ? rel : ".", &how, sizeof how);
    int saved = errno;
    close(dfd);
    errno = saved;
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
        return fd;
#else
    (void)rel;
#endif
    return open(real, flags | O_NOFOLLOW); // kernels before 5.6: the last component only
}

// A local path (absolute, or file:// + absolute) inside o->local_root.
static gl_status load_local(const struct gl_mediasrc_opts *o, char *path, uint8_t **bytes,
                            size_t *n, struct gl_err *err)
{
    if (!o->local_root)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "local files are not served (start the server with "
                          "--allowed-local-media-path DIR to allow files under DIR)");
    if (path[0] != '/')
        return gl_err_set(err, GL_E_INVAL, "a local media path must be absolute");
    char root[PATH_MAX], given[PATH_MAX], real[PATH_MAX];
    if (!realpath(o->local_root, root))
        return gl_err_set(err, GL_E_INTERNAL, "the allowed local media path cannot be resolved: %s",
                          strerror(errno));
    snprintf(given, sizeof given, "%s", o->local_root);
    lexical_normalize(given);
    lexical_normalize(path);
    if (!path_under(path, root) && !path_under(path, given))
        return gl_err_set(err, GL_E_INVAL, "the path is outside the allowed local media path");
    if (!realpath(path, real))
        return gl_err_set(err, GL_E_IO, "cannot open the local file: %s", strerror(errno));
    if (!path_under(real, root))
        return gl_err_set(err, GL_E_INVAL,
                          "the file is outside the allowed local media path (after resolving "
                          "symlinks)");
    int fd = open_beneath(root, real);
    if (fd < 0)
        return gl_err_set(err, GL_E_IO, "cannot open the local file: %s",
                          errno == ELOOP || errno == EXDEV
                              ? "a path component changed into a symlink while it was opened"
                              : strerror(errno));
    struct stat sb;
    gl_status st = GL_OK;
    uint8_t *buf = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st =
            gl_err_set(err, GL_E_INVAL, "not a regular file (a directory, FIFO, socket or device)");
    } else if ((uint64_t)sb.st_size > o->max_bytes) {
        st = gl_err_set(err, GL_E_LIMIT,
                        "the file's %lld bytes are over the %zu-byte limit for one media part",
                        (long long)sb.st_size, o->max_bytes);
    } else if (sb.st_size == 0) {
        st = gl_err_set(err, GL_E_INVAL, "the file is empty");
    } else if (!(buf = gl_malloc((size_t)sb.st_size))) {
        st = gl_err_set(err, GL_E_NOMEM, "no memory for the file");
    } else {
        size_t got = 0, want = (size_t)sb.st_size;
        while (got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got != want) {
            st = gl_err_set(err, GL_E_IO, "read %zu of %zu bytes of the file", got, want);
            gl_free(buf);
            buf = NULL;
        }
    }
    close(fd);
    if (st == GL_OK) {
        *bytes = buf;
        *n = (size_t)sb.st_size;
    }
    return st;
}

// Decodes %XX escapes of a file:// URL's path in place (RFC 3986 §2.1). 0, or -1 for a
// malformed escape or an encoded NUL.
static int percent_decode(char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '%') {
            *o++ = *p;
            continue;
        }
        int hi = gl_hex_val(p[1]), lo = hi < 0 ? -1 : gl_hex_val(p[2]);
        if (lo < 0 || (hi == 0 && lo == 0))
            return -1;
        *o++ = (char)(hi << 4 | lo);
        p += 2;
    }
    *o = 0;
    return 0;
}

gl_status gl_mediasrc_load(const struct gl_mediasrc_opts *o, const char *url, size_t len,
                           uint8_t **bytes, size_t *n, struct gl_err *err)
{
    *bytes = NULL;
    *n = 0;
    if (len == 0)
        return gl_err_set(err, GL_E_INVAL, "the URL is empty");
    if (memchr(url, 0, len))
        return gl_err_set(err, GL_E_INVAL, "the URL contains a NUL byte");
    if (len > 5 && strncasecmp(url, "data:", 5) == 0)
        return load_data_url(o, url, len, bytes, n, err);
    if (len >= PATH_MAX + 7)
        return gl_err_set(err, GL_E_INVAL, "the %s is too long",
                          strncasecmp(url, "http", 4) == 0 ? "URL" : "path");
    char path[PATH_MAX + 8];
    memcpy(path, url, len);
    path[len] = 0;
    if (len > 7 && (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0))
        return gl_mediasrc_fetch(o, path, bytes, n, err);
    char *p = path;
    if (len > 7 && strncasecmp(path, "file://", 7) == 0) {
        p = path + 7;
        if (percent_decode(p) != 0)
            return gl_err_set(err, GL_E_INVAL, "the file:// URL has a malformed or NUL %%-escape");
    } else if (strchr(path, ':') && path[0] != '/') {
        return gl_err_set(err, GL_E_INVAL,
                          "unsupported URL scheme (data: URLs, or local paths under "
                          "--allowed-local-media-path)");
    }
    return load_local(o, p, bytes, n, err);
}

int gl_mediasrc_http_status(gl_status st)
{
    return st == GL_E_NOMEM || st == GL_E_INTERNAL ? 500 : 400;
}
