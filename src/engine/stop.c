// SPDX-License-Identifier: MIT
// stop: stop-string matching over a sequence's detokenized text. The engine appends each token's
// text to a held buffer, cuts at the earliest match, and releases only the part of the buffer no
// stop string can still start in (gl_stop_holdback), so matches across token boundaries are
// caught before any of their bytes is emitted. Byte-exact, no normalization (as vLLM). Public
// (engine.h) so that the server can cut text it assembles itself with the same rules.
#include "engine/engine.h"

#include <string.h>

static const char *find_bytes(const char *h, size_t hn, const char *n, size_t nn)
{
    for (size_t i = 0; nn <= hn && i <= hn - nn; i++)
        if (h[i] == n[0] && memcmp(h + i, n, nn) == 0)
            return h + i;
    return NULL;
}

size_t gl_stop_holdback(const struct gl_sample_params *sp, const char *held, size_t n)
{
    size_t best = 0;
    for (int32_t i = 0; i < sp->n_stop; i++) {
        size_t len = sp->stop[i] ? strlen(sp->stop[i]) : 0;
        if (len == 0) // never accepted by gl_sample_params_check; ignored, not a crash
            continue;
        for (size_t k = (len - 1 < n ? len - 1 : n); k > best; k--)
            if (memcmp(held + n - k, sp->stop[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

int32_t gl_stop_match(const struct gl_sample_params *sp, const char *held, size_t n, size_t *at)
{
    int32_t which = -1;
    for (int32_t i = 0; i < sp->n_stop; i++) {
        size_t len = sp->stop[i] ? strlen(sp->stop[i]) : 0;
        if (len == 0)
            continue;
        const char *p = find_bytes(held, n, sp->stop[i], len);
        if (!p)
            continue;
        size_t off = (size_t)(p - held);
        if (which < 0 || off < *at || (off == *at && len > strlen(sp->stop[which]))) {
            which = i;
            *at = off;
        }
    }
    return which;
}
