// SPDX-License-Identifier: MIT
// Streaming detokenizer: token bytes go out as soon as they cannot be the start of an unfinished
// UTF-8 sequence. Only a trailing proper prefix of a valid sequence (at most 3 bytes) is held
// back; invalid bytes are passed through unchanged so the output is always the exact byte
// concatenation of the tokens (after flush). Ids outside the vocabulary contribute no bytes.
#include "tokenizer/tokenizer_int.h"

#include <string.h>

// Number of trailing bytes of s[0..n) that form a proper prefix of a valid UTF-8 sequence.
static size_t incomplete_tail(const uint8_t *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        uint8_t b = s[n - k];
        if ((b & 0xC0) == 0x80)
            continue; // continuation byte: the lead may be further back
        size_t need = b >= 0xC2 && b <= 0xDF   ? 2
                      : b >= 0xE0 && b <= 0xEF ? 3
                      : b >= 0xF0 && b <= 0xF4 ? 4
                                               : 0;
        if (need <= k)
            return 0; // ASCII, invalid lead, or a sequence that is already complete
        // The second byte of E0/ED/F0/F4 has a narrower range; reject prefixes that cannot
        // complete so they are emitted now rather than held.
        if (k >= 2) {
            uint8_t c = s[n - k + 1];
            if ((b == 0xE0 && c < 0xA0) || (b == 0xED && c > 0x9F) || (b == 0xF0 && c < 0x90) ||
                (b == 0xF4 && c > 0x8F))
                return 0;
        }
        return k;
    }
    return 0;
}

int gl_detok_feed(struct gl_detok *d, const struct gl_tokenizer *t, gl_token id, int skip_special,
                  char *out, size_t cap)
{
    GL_ASSERT(d->n_pending >= 0 && d->n_pending <= 3);
    size_t len;
    const char *p = gl_tokenizer_token_bytes(t, id, &len);
    if (!p || (skip_special && gl_tok_is_special_type(t->type[id])))
        return 0;
    size_t total = (size_t)d->n_pending + len;
    if (cap < total)
        return -1;
    memcpy(out, d->pending, (size_t)d->n_pending);
    memcpy(out + d->n_pending, p, len);
    size_t hold = incomplete_tail((const uint8_t *)out, total);
    memcpy(d->pending, out + total - hold, hold);
    d->n_pending = (int)hold;
    return (int)(total - hold);
}

int gl_detok_flush(struct gl_detok *d, char *out, size_t cap)
{
    GL_ASSERT(d->n_pending >= 0 && d->n_pending <= 3);
    if (cap < (size_t)d->n_pending)
        return -1;
    int n = d->n_pending;
    memcpy(out, d->pending, (size_t)n);
    d->n_pending = 0;
    return n;
}
