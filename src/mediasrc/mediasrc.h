// SPDX-License-Identifier: MIT
// mediasrc: the bytes behind an image_url / video_url part's URL, read from where vLLM allows
// them to come from. This is the I/O of a chat request's media, kept out of api/ (issue 23), which
// calls it while it parses a request and turns its errors into a 400 or 500 naming the part.
// Sources:
//  - "data:<type>;base64,<payload>": strict padded base64, decoded (no I/O);
//  - a local regular file, as an absolute path or a file:// URL (percent-decoded, RFC 8089), that
//    lies inside local_root both as written and once ".", ".." and symlinks are resolved, opened
//    without following a symlink and without blocking on a FIFO (url.c says how each escape is
//    closed; docs/SECURITY.md);
//  - an http(s) URL whose host is in allowed_domains, fetched with libcurl: no redirects followed,
//    the body cut past max_bytes, timeout_ms for the whole transfer (fetch.c).
// Threads: no state shared between calls except libcurl's global init, run once
// (pthread_once); any number of threads may call at once. A call blocks its thread while it reads
// a file or fetches (up to fetch_timeout_ms).
// Ownership: opts and url are borrowed for the call; on GL_OK *bytes is gl_malloc'ed (the caller
// frees it) and holds 1 .. max_bytes bytes.
// Errors: a status and err->msg saying what is wrong, without the request field (the caller
// names it: "messages[0].content[1].image_url: " + msg). The status says whose fault it is:
// GL_E_NOMEM, and GL_E_INTERNAL for the server's own setup (its local root cannot be resolved,
// the HTTP client cannot start), are the server's (HTTP 500); every other status is the
// client's (HTTP 400): GL_E_INVAL (the URL, path, scheme or host is refused, not a regular file,
// empty), GL_E_FORMAT (malformed base64), GL_E_LIMIT (over max_bytes), GL_E_IO (the file cannot
// be opened or read, the fetch failed, timed out or was not a 200), GL_E_UNSUPPORTED (the server
// serves no local files, or fetches no remote URLs). gl_mediasrc_http_status maps them.
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

struct gl_mediasrc_opts {
    const char *local_root;      // --allowed-local-media-path, or NULL: no local files
    size_t max_bytes;            // per part
    const char *allowed_domains; // --allowed-media-domains: "host1,host2" or "*"; NULL: none
    long fetch_timeout_ms;       // whole remote transfer; <= 0: 10 s
};

// The bytes behind url[0..len) (not NUL-terminated; a NUL inside is refused). On error *bytes
// is NULL, *n is 0 and err (may be NULL) says why.
GL_MUST_USE gl_status gl_mediasrc_load(const struct gl_mediasrc_opts *o, const char *url,
                                       size_t len, uint8_t **bytes, size_t *n, struct gl_err *err);

// 1 when host may be fetched under the --allowed-media-domains list: the comma-separated list
// (spaces around entries ignored) has "*" or an entry equal to host, case-insensitively and
// exactly ("example.com" does not allow "a.example.com"). No I/O.
int gl_mediasrc_host_allowed(const char *list, const char *host);

// The HTTP status of a gl_mediasrc_load error: 500 for GL_E_NOMEM and GL_E_INTERNAL, else 400.
int gl_mediasrc_http_status(gl_status st);
