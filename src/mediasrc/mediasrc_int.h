// SPDX-License-Identifier: MIT
// mediasrc_int: what the module's files share (not for other modules). url.c (data: URLs, local
// files, the dispatch of gl_mediasrc_load) calls fetch.c; fetch.c calls no other file.
#pragma once

#include "mediasrc/mediasrc.h"

// The http(s) branch of gl_mediasrc_load (url NUL-terminated): libcurl, only hosts in
// o->allowed_domains, http/https only, no redirects followed, the body cut past max_bytes,
// fetch_timeout_ms for the whole transfer. Errors as gl_mediasrc_load's.
GL_MUST_USE gl_status gl_mediasrc_fetch(const struct gl_mediasrc_opts *o, const char *url,
                                        uint8_t **bytes, size_t *n, struct gl_err *err);
