// SPDX-License-Identifier: MIT
// sampling: next-token selection from one row of logits, in vLLM's order:
//   [logit processors: penalties / bias, later] -> temperature -> min_p (on the temperature-scaled
//   distribution: keep p >= min_p * p_max) -> top-k -> top-p -> draw.
// temperature <= 0 is greedy (argmax, ties -> lowest id) and ignores the other filters. Each
// sequence owns a sampler with its own xoshiro256** stream seeded by splitmix64(seed), so a
// (seed, logits) sequence always yields the same tokens. Not thread-safe per sampler.
#pragma once

#include "base/base.h"

#include <stdint.h>

// xoshiro256** state; seed with gl_rng_seed (splitmix64 expansion, never all-zero).
struct gl_rng {
    uint64_t s[4];
};
void gl_rng_seed(struct gl_rng *r, uint64_t seed);
uint64_t gl_rng_next(struct gl_rng *r);
double gl_rng_uniform(struct gl_rng *r); // [0, 1), 53 random bits

struct gl_sampling_params {
    float temperature; // <= 0: greedy
    float top_p;       // (0, 1]; 1 = off
    int32_t top_k;     // <= 0: off
    float min_p;       // [0, 1]; 0 = off
    uint64_t seed;
};
struct gl_sampling_params gl_sampling_default_params(void); // greedy, top_p 1, top_k 0, min_p 0

// One candidate after filtering: token id and its probability (renormalised over survivors).
struct gl_tok_prob {
    int32_t id;
    float p;
};

struct gl_sampler {
    struct gl_sampling_params params;
    struct gl_rng rng;
    int32_t n_vocab;
    struct gl_tok_prob *cand; // [n_vocab] scratch
    int32_t n_cand;           // survivors of the last gl_sampler_filter call
};

// Validates params (GL_E_INVAL naming the field) and allocates scratch for n_vocab candidates.
GL_MUST_USE gl_status gl_sampler_init(struct gl_sampler *s, const struct gl_sampling_params *p,
                                      int32_t n_vocab, struct gl_err *err);
void gl_sampler_free(struct gl_sampler *s);

// Applies temperature, min_p, top-k and top-p to logits (n_vocab floats, not modified) and leaves
// the surviving distribution in s->cand[0..s->n_cand), probabilities summing to 1: sorted by
// probability (descending, ties by id) when top-k or top-p is active, else in id order. Greedy
// leaves the argmax alone with p = 1.
void gl_sampler_filter(struct gl_sampler *s, const float *logits);
// Filter, then draw one token from the survivors with the sampler's RNG.
int32_t gl_sampler_sample(struct gl_sampler *s, const float *logits);
// Argmax with ties to the lowest id.
int32_t gl_sampler_argmax(const float *logits, int32_t n_vocab);
