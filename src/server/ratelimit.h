// SPDX-License-Identifier: MIT
// ratelimit: a token bucket per client address, for `--limit-request-rate-per-ip` (server-internal;
// only server.c includes it). Each address may start `burst` requests at once and then `rate` per
// second; a request over that is answered 429 with Retry-After.
// Memory is fixed at creation: a table of GL_RL_SLOTS records (address, tokens, last refill),
// probed in windows of GL_RL_PROBE from a keyed hash of the address (base/ SipHash with the
// per-process key, so a client cannot aim its addresses at one window). A new address whose window
// is full takes the record seen least recently: a client that cycles through many addresses can
// only evict others into a full bucket (it errs toward admitting), never lock one out.
// Thread-safe: one mutex, held for a few dozen loads per request.
// Errors: gl_ratelimit_new returns GL_E_INVAL for a rate or burst that is not positive and finite,
// GL_E_NOMEM when the table cannot be allocated.
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#define GL_RL_SLOTS 8192 // 8192 x 40 B = 320 KiB
#define GL_RL_PROBE 8

struct gl_ratelimit;
GL_MUST_USE gl_status gl_ratelimit_new(struct gl_ratelimit **out, double rate_per_s, double burst,
                                       struct gl_err *err);
void gl_ratelimit_free(struct gl_ratelimit *rl); // NULL-safe

// Takes one token for the client at addr[0..len) (an IPv4 or IPv6 address, len <= 16) at time
// now_us (monotonic microseconds). Returns 1 when the request may proceed; 0 when the bucket is
// empty, with *retry_after_s = whole seconds until a token is back (at least 1).
int gl_ratelimit_take(struct gl_ratelimit *rl, const void *addr, size_t len, int64_t now_us,
                      int *retry_after_s);
