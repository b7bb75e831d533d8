// SPDX-License-Identifier: MIT
// Token bucket per client address in a fixed, keyed table (ratelimit.h).
#include "server/ratelimit.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

struct slot {
    uint8_t addr[16];
    uint8_t len;     // 0: free
    double tokens;   // in [0, burst]
    int64_t seen_us; // last refill (and last request)
};

struct gl_ratelimit {
    double rate;  // tokens per second
    double burst; // bucket size
    pthread_mutex_t mu;
    struct slot slots[GL_RL_SLOTS];
};

gl_status gl_ratelimit_new(struct gl_ratelimit **out, double rate_per_s, double burst,
                           struct gl_err *err)
{
    *out = NULL;
    if (!(rate_per_s > 0 && isfinite(rate_per_s)) || !(burst >= 1 && isfinite(burst)))
        return gl_err_set(err, GL_E_INVAL,
                          "rate limit: the rate (%g/s) must be positive and the burst (%g) at "
                          "least 1",
                          rate_per_s, burst);
    struct gl_ratelimit *rl = gl_calloc(1, sizeof *rl);
    if (!rl)
        return gl_err_set(err, GL_E_NOMEM, "rate limit: no memory for %d records", GL_RL_SLOTS);
    rl->rate = rate_per_s;
    rl->burst = burst;
    pthread_mutex_init(&rl->mu, NULL);
    *out = rl;
    return GL_OK;
}

void gl_ratelimit_free(struct gl_ratelimit *rl)
{
    if (!rl)
        return;
    pthread_mutex_destroy(&rl->mu);
    gl_free(rl);
}

// The record for addr: its own, else a free one, else the least recently seen of its window
// (reset to a full bucket). Called under rl->mu.
static struct slot *find(struct gl_ratelimit *rl, const uint8_t *addr, size_t len, int64_t now_us)
{
    struct gl_siphash h;
    gl_siphash_init(&h, gl_hash_key());
    gl_siphash_update(&h, addr, len);
    size_t base = (size_t)(gl_siphash_final(&h) % GL_RL_SLOTS);
    struct slot *victim = NULL;
    for (size_t i = 0; i < GL_RL_PROBE; i++) {
        struct slot *s = &rl->slots[(base + i) % GL_RL_SLOTS];
        if (s->len == len && memcmp(s->addr, addr, len) == 0)
            return s;
        if (!victim || (victim->len && (!s->len || s->seen_us < victim->seen_us)))
            victim = s;
    }
    memcpy(victim->addr, addr, len);
    victim->len = (uint8_t)len;
    victim->tokens = rl->burst;
    victim->seen_us = now_us;
    return victim;
}

int gl_ratelimit_take(struct gl_ratelimit *rl, const void *addr, size_t len, int64_t now_us,
                      int *retry_after_s)
{
    GL_ASSERT(len > 0 && len <= 16);
    pthread_mutex_lock(&rl->mu);
    struct slot *s = find(rl, addr, len, now_us);
    if (now_us > s->seen_us) {
        s->tokens = fmin(rl->burst, s->tokens + (double)(now_us - s->seen_us) * 1e-6 * rl->rate);
        s->seen_us = now_us;
    }
    int ok = s->tokens >= 1.0;
    if (ok)
        s->tokens -= 1.0;
    else
        *retry_after_s = (int)ceil((1.0 - s->tokens) / rl->rate);
    pthread_mutex_unlock(&rl->mu);
    if (!ok && *retry_after_s < 1)
        *retry_after_s = 1;
    return ok;
}
