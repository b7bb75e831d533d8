// SPDX-License-Identifier: MIT
// api/media_url: the bytes behind an image_url / video_url part (api.h, gl_api_media_load).
// Sources, as vLLM takes them: a data: URL with a base64 payload, or a local file under the
// operator's --allowed-local-media-path. The path check resolves the candidate with realpath()
// (every "..", "." and symlink) and requires the result to lie inside the resolved root, then
// opens that resolved path with O_NOFOLLOW and re-checks the opened file is a regular file: a
// symlink inside the root that points outside is refused like a "../" path. http(s) URLs go to
// media_fetch.c (only hosts in --allowed-media-domains).
#include "api/api.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MEDIA_FAIL(...) gl_api_fail(e, 400, param, __VA_ARGS__)

// "data:[<mime>][;param=v]*;base64,<payload>" -> decoded payload.
static gl_status load_data_url(const struct gl_api_media_opts *o, const char *url, size_t len,
                               const char *param, uint8_t **bytes, size_t *n,
                               struct gl_api_error *e)
{
    const char *comma = memchr(url, ',', len);
    if (!comma)
        return MEDIA_FAIL("%s: a data: URL needs a ',' before its payload", param);
    size_t head = (size_t)(comma - url);
    if (head < 12 || strncasecmp(comma - 7, ";base64", 7) != 0)
        return MEDIA_FAIL("%s: only base64 data: URLs are accepted (data:<type>;base64,<payload>)",
                          param);
    const uint8_t *p = (const uint8_t *)comma + 1;
    size_t plen = len - head - 1;
    if (plen == 0)
        return MEDIA_FAIL("%s: the data: URL's payload is empty", param);
    if (plen / 4 * 3 > o->max_bytes + 2)
        return MEDIA_FAIL(
            "%s: the data: URL's payload (%zu base64 characters) is over the %zu-byte "
            "limit for one media part",
            param, plen, o->max_bytes);
    uint8_t *buf = gl_malloc(plen / 4 * 3 + 1);
    if (!buf)
        return gl_api_fail(e, 500, param, "%s: no memory for a %zu-byte payload", param, plen);
    size_t bad = 0;
    long got = gl_b64_decode(p, plen, buf, &bad);
    if (got < 0) {
        gl_free(buf);
        if (bad >= plen)
            return MEDIA_FAIL("%s: the base64 payload's length (%zu) is not a multiple of 4", param,
                              plen);
        return MEDIA_FAIL("%s: invalid base64 character 0x%02x at payload offset %zu", param,
                          p[bad], bad);
    }
    if ((size_t)got > o->max_bytes) {
        gl_free(buf);
        return MEDIA_FAIL("%s: %ld bytes is over the %zu-byte limit for one media part", param, got,
                          o->max_bytes);
    }
    *bytes = buf;
    *n = (size_t)got;
    return GL_OK;
}

// A local path (absolute, or file:// + absolute) inside o->local_root.
static gl_status load_local(const struct gl_api_media_opts *o, const char *path, const char *param,
                            uint8_t **bytes, size_t *n, struct gl_api_error *e)
{
    if (!o->local_root)
        return MEDIA_FAIL("%s: local files are not served (start the server with "
                          "--allowed-local-media-path DIR to allow files under DIR)",
                          param);
    if (path[0] != '/')
        return MEDIA_FAIL("%s: a local media path must be absolute", param);
    char root[PATH_MAX], real[PATH_MAX];
    if (!realpath(o->local_root, root))
        return gl_api_fail(e, 500, param, "%s: the allowed local media path cannot be resolved: %s",
                           param, strerror(errno));
    if (!realpath(path, real))
        return MEDIA_FAIL("%s: cannot open the local file: %s", param, strerror(errno));
    size_t rl = strlen(root);
    int inside = strncmp(real, root, rl) == 0 && (real[rl] == '/' || (rl == 1 && root[0] == '/'));
    if (!inside)
        return MEDIA_FAIL("%s: the file is outside the allowed local media path (after resolving "
                          "'..' and symlinks)",
                          param);
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return MEDIA_FAIL("%s: cannot open the local file: %s", param, strerror(errno));
    struct stat sb;
    gl_status st = GL_OK;
    uint8_t *buf = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = MEDIA_FAIL("%s: not a regular file", param);
    } else if ((uint64_t)sb.st_size > o->max_bytes) {
        st = MEDIA_FAIL("%s: the file's %lld bytes are over the %zu-byte limit for one media part",
                        param, (long long)sb.st_size, o->max_bytes);
    } else if (sb.st_size == 0) {
        st = MEDIA_FAIL("%s: the file is empty", param);
    } else if (!(buf = gl_malloc((size_t)sb.st_size))) {
        st = gl_api_fail(e, 500, param, "%s: no memory for the file", param);
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
            st = MEDIA_FAIL("%s: read %zu of %zu bytes of the file", param, got, want);
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

gl_status gl_api_media_load(const struct gl_api_media_opts *o, const char *url, size_t len,
                            const char *param, uint8_t **bytes, size_t *n, struct gl_api_error *e)
{
    *bytes = NULL;
    *n = 0;
    if (len == 0)
        return MEDIA_FAIL("%s: the URL is empty", param);
    if (memchr(url, 0, len))
        return MEDIA_FAIL("%s: the URL contains a NUL byte", param);
    if (len > 5 && strncasecmp(url, "data:", 5) == 0)
        return load_data_url(o, url, len, param, bytes, n, e);
    if (len >= PATH_MAX + 7)
        return MEDIA_FAIL("%s: the %s is too long", param,
                          strncasecmp(url, "http", 4) == 0 ? "URL" : "path");
    char path[PATH_MAX + 8];
    memcpy(path, url, len);
    path[len] = 0;
    if (len > 7 && (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0))
        return gl_api_media_fetch(o, path, param, bytes, n, e);
    const char *p = path;
    if (len > 7 && strncasecmp(path, "file://", 7) == 0)
        p = path + 7;
    else if (strchr(path, ':') && path[0] != '/')
        return MEDIA_FAIL("%s: unsupported URL scheme (data: URLs, or local paths under "
                          "--allowed-local-media-path)",
                          param);
    return load_local(o, p, param, bytes, n, e);
}
