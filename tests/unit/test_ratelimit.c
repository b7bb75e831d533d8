// SPDX-License-Identifier: MIT
// Tests for the per-address token bucket behind --limit-request-rate-per-ip (server/ratelimit.c):
// decisions equal a plain one-bucket-per-address model over random arrival times, addresses are
// independent (IPv4 and IPv6, equal leading bytes), Retry-After is the wait for the next token,
// and a flood from many addresses neither grows the table nor refuses an address it has not seen.
#include "server/ratelimit.h"
#include "test.h"

#include <math.h>
#include <string.h>

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

TEST(test_burst_then_refill)
{
    struct gl_ratelimit *rl = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_ratelimit_new(&rl, 2.0, 3.0, &err) == GL_OK);
    const uint8_t a[4] = {127, 0, 0, 2};
    int retry = 0;
    for (int i = 0; i < 3; i++)
        CHECK(gl_ratelimit_take(rl, a, 4, 1000000, &retry) == 1);
    CHECK(gl_ratelimit_take(rl, a, 4, 1000000, &retry) == 0);
    CHECK(retry == 1);                                        // 0.5 s to the next token, rounded up
    CHECK(gl_ratelimit_take(rl, a, 4, 1200000, &retry) == 0); // 0.4 tokens
    CHECK(gl_ratelimit_take(rl, a, 4, 2300000, &retry) == 1); // 0.4 + 2.2 = 2.6
    CHECK(gl_ratelimit_take(rl, a, 4, 2300000, &retry) == 1);
    CHECK(gl_ratelimit_take(rl, a, 4, 2300000, &retry) == 0);
    // A long pause refills up to the burst, no further.
    int ok = 0;
    for (int i = 0; i < 10; i++)
        ok += gl_ratelimit_take(rl, a, 4, 100000000, &retry);
    CHECK(ok == 3);
    gl_ratelimit_free(rl);
}

TEST(test_retry_after)
{
    struct gl_ratelimit *rl = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_ratelimit_new(&rl, 0.1, 1.0, &err) == GL_OK); // one request per 10 s
    const uint8_t a[4] = {10, 1, 2, 3};
    int retry = 0;
    CHECK(gl_ratelimit_take(rl, a, 4, 0, &retry) == 1);
    CHECK(gl_ratelimit_take(rl, a, 4, 0, &retry) == 0 && retry == 10);
    CHECK(gl_ratelimit_take(rl, a, 4, 4000000, &retry) == 0 && retry == 6);
    CHECK(gl_ratelimit_take(rl, a, 4, 10000000, &retry) == 1);
    gl_ratelimit_free(rl);
}

// Three addresses (one IPv6 whose first 4 bytes equal the IPv4 one's) at random times against a
// model with one bucket each: every decision agrees.
TEST(test_against_model)
{
    const double rate = 5.0, burst = 4.0;
    struct gl_ratelimit *rl = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_ratelimit_new(&rl, rate, burst, &err) == GL_OK);
    uint8_t addrs[3][16] = {
        {192, 168, 1, 1}, {192, 168, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {192, 168, 1, 2}};
    const size_t lens[3] = {4, 16, 4};
    double tokens[3] = {burst, burst, burst};
    int64_t last[3] = {0, 0, 0}, now = 0;
    uint32_t s = 7;
    int agree = 0, refused = 0;
    for (int i = 0; i < 20000; i++) {
        now += lcg(&s) % 150000; // 0..150 ms apart: about the rate, so both answers occur
        int k = (int)(lcg(&s) % 3);
        tokens[k] = fmin(burst, tokens[k] + (double)(now - last[k]) * 1e-6 * rate);
        last[k] = now;
        int want = tokens[k] >= 1.0;
        if (want)
            tokens[k] -= 1.0;
        int retry = 0;
        int got = gl_ratelimit_take(rl, addrs[k], lens[k], now, &retry);
        agree += got == want;
        refused += !got;
    }
    CHECKF(agree == 20000, "%d of 20000 decisions agree with the model", agree);
    CHECKF(refused > 1000 && refused < 19000, "refused %d: the test must exercise both answers",
           refused);
    gl_ratelimit_free(rl);
}

// 200,000 distinct addresses (25x the table): every first request from a new address passes,
// and an address exhausted before the flood is never refused more than its own bucket allows.
TEST(test_address_flood)
{
    struct gl_ratelimit *rl = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_ratelimit_new(&rl, 1.0, 2.0, &err) == GL_OK);
    const uint8_t victim[4] = {127, 0, 0, 9};
    int retry = 0;
    CHECK(gl_ratelimit_take(rl, victim, 4, 0, &retry) == 1);
    CHECK(gl_ratelimit_take(rl, victim, 4, 0, &retry) == 1);
    CHECK(gl_ratelimit_take(rl, victim, 4, 0, &retry) == 0);
    int refused = 0;
    for (uint32_t i = 0; i < 200000; i++) {
        uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8};
        memcpy(a + 12, &i, 4);
        refused += !gl_ratelimit_take(rl, a, 16, 1, &retry);
    }
    CHECK(refused == 0);
    // Evicted or not, the victim has at most a full bucket: two requests, never a third.
    int ok = 0;
    for (int i = 0; i < 5; i++)
        ok += gl_ratelimit_take(rl, victim, 4, 2, &retry);
    CHECK(ok <= 2);
    gl_ratelimit_free(rl);
}

TEST(test_bad_params)
{
    struct gl_ratelimit *rl = NULL;
    struct gl_err err = {0};
    CHECK(gl_ratelimit_new(&rl, 0.0, 2.0, &err) == GL_E_INVAL && !rl);
    CHECK(gl_ratelimit_new(&rl, NAN, 2.0, &err) == GL_E_INVAL && !rl);
    CHECK(gl_ratelimit_new(&rl, 1.0, 0.5, &err) == GL_E_INVAL && !rl);
    CHECK(gl_ratelimit_new(&rl, INFINITY, 2.0, &err) == GL_E_INVAL && !rl);
    CHECK(strstr(err.msg, "rate") != NULL);
    gl_ratelimit_free(NULL);
}

int main(void)
{
    RUN_TESTS(test_burst_then_refill, test_retry_after, test_against_model, test_address_flood,
              test_bad_params);
}
