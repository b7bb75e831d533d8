// SPDX-License-Identifier: MIT
// engine/spec: the n-gram drafter of speculative decoding (vLLM's "ngram" method, prompt lookup).
// It needs no weights: text that copies names and numbers from its prompt proposes the tokens
// that followed the same n tokens earlier. Plain O(n_tok * n) scan from the end; at the lengths a
// CPU serves (thousands of tokens) that is microseconds against a decode step of milliseconds.
#include "engine/engine.h"

int32_t gl_spec_ngram_propose(const int32_t *tok, int64_t n_tok, int32_t lookup_min,
                              int32_t lookup_max, int32_t k, int32_t *out)
{
    if (k <= 0 || lookup_min < 1 || lookup_max < lookup_min)
        return 0;
    for (int32_t n = lookup_max; n >= lookup_min; n--) {
        if (n_tok < (int64_t)n + 1)
            continue;
        const int32_t *suf = tok + n_tok - n;
        // Most recent earlier start j (j + n <= n_tok - 1: something follows it).
        for (int64_t j = n_tok - n - 1; j >= 0; j--) {
            int32_t i = 0;
            while (i < n && tok[j + i] == suf[i])
                i++;
            if (i < n)
                continue;
            int32_t m = 0;
            for (int64_t p = j + n; p < n_tok && m < k; p++)
                out[m++] = tok[p];
            return m;
        }
    }
    return 0;
}
