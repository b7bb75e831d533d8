// SPDX-License-Identifier: MIT
// sampling: next-token selection from one row of logits, in vLLM's order:
//   (logits processors: grammar mask, by the engine) -> allowed / banned ids -> logit_bias ->
//   repetition (prompt + output), presence and frequency (output only) penalties ->
//   temperature -> min_p (on the temperature-scaled distribution: keep p >= min_p * p_max) ->
//   top-k -> top-p -> draw.
// temperature == 0 is greedy: argmax of the processed logits (ties -> lowest id), so bias and
// penalties still apply, as in vLLM. The functions are pure in (params, logits, token history,
// RNG): the only per-sequence state is its xoshiro256** stream, which is why results never
// depend on batch composition. Logprobs are vLLM's default "raw_logprobs": log_softmax of the
// UNMODIFIED model logits (before bias, penalties, temperature and filters).
#pragma once

#include "base/base.h"

#include <stdint.h>

#define GL_SAMPLE_MAX_STOP     16  // stop strings per request (vLLM has no limit; we name one)
#define GL_SAMPLE_MAX_STOP_LEN 256 // bytes per stop string
#define GL_SAMPLE_MAX_LOGPROBS 20  // top logprobs per token (OpenAI's cap)
#define GL_SAMPLE_MAX_N        16  // choices per request

// xoshiro256** state; seed with gl_rng_seed (splitmix64 expansion, never all-zero).
struct gl_rng {
    uint64_t s[4];
};
void gl_rng_seed(struct gl_rng *r, uint64_t seed);
uint64_t gl_rng_next(struct gl_rng *r);
double gl_rng_uniform(struct gl_rng *r); // [0, 1), 53 random bits
// The stream of choice `index` of a request seeded with `seed`: index 0 is seed itself, others
// a splitmix64 mix of (seed, index), so choices are independent and reproducible.
uint64_t gl_sample_choice_seed(uint64_t seed, int32_t index);

struct gl_logit_bias {
    int32_t id;
    float bias; // added to the logit; vLLM clamps to [-100, 100]
};

// Request-level parameters (vLLM SamplingParams names). Arrays and strings are borrowed by the
// caller's struct; gl_sample_params_copy makes an owned deep copy (the engine keeps that one).
struct gl_sample_params {
    int32_t n;          // choices, 1..GL_SAMPLE_MAX_N (default 1)
    int32_t max_tokens; // < 0: up to max_model_len - prompt (default -1)
    int32_t min_tokens; // stops (EOS, stop ids, stop strings) suppressed before this many
    int32_t ignore_eos; // EOS ids do not stop (request stop ids still do)
    float temperature;  // >= 0; 0 = greedy (default 1.0 as vLLM)
    float top_p;        // (0, 1]; 1 = off
    int32_t top_k;      // <= 0 (0 or -1): off
    float min_p;        // [0, 1]; 0 = off
    uint64_t seed;
    int32_t has_seed;                          // 0: engine picks one
    float presence_penalty, frequency_penalty; // [-2, 2]; output only
    float repetition_penalty;                  // > 0; 1 = off
    const struct gl_logit_bias *logit_bias;    // [n_logit_bias]
    int32_t n_logit_bias;
    const int32_t *allowed_ids; // [n_allowed]; 0 = all
    int32_t n_allowed;
    const int32_t *bad_ids; // [n_bad] never sampled
    int32_t n_bad;
    const char *stop[GL_SAMPLE_MAX_STOP]; // NUL-terminated
    int32_t n_stop;
    const int32_t *stop_token_ids; // [n_stop_ids]
    int32_t n_stop_ids;
    int32_t include_stop_str_in_output; // keep the stop string
    int32_t logprobs; // < 0: none; k in 0..20: chosen token + top k (raw logprobs)
    // vLLM's prompt_logprobs: < 0: none; k in 0..20: every prompt token after the first gets its
    // raw logprob and rank under the logits of the position before it, and the top k there
    int32_t prompt_logprobs;
    int32_t skip_special_tokens; // default 1: special tokens add no text
};
struct gl_sample_params gl_sample_default_params(void);

// Validates every field against n_vocab (GL_E_INVAL naming the field and value; GL_E_LIMIT for
// too many / too long stop strings).
GL_MUST_USE gl_status gl_sample_params_check(const struct gl_sample_params *p, int32_t n_vocab,
                                             struct gl_err *err);
// Deep copy (arrays and stop strings owned by dst; allowed_ids sorted); free with
// gl_sample_params_free. dst is zeroed on failure.
GL_MUST_USE gl_status gl_sample_params_copy(struct gl_sample_params *dst,
                                            const struct gl_sample_params *src, struct gl_err *err);
void gl_sample_params_free(struct gl_sample_params *p); // only for copies; idempotent

// One candidate after filtering: token id and its probability (renormalised over survivors).
struct gl_tok_prob {
    int32_t id;
    float p;
};

// Scratch shared by every sequence sampled on one thread (the engine's step thread): candidates
// and the penalty count table, n_vocab entries each (~2.4 MB for the 202k vocabulary).
struct gl_sample_work {
    int32_t n_vocab;
    struct gl_tok_prob *cand; // [n_vocab]
    int32_t n_cand;           // survivors of the last gl_sample_filter
    int32_t *count;           // [n_vocab] all zero between calls
};
GL_MUST_USE gl_status gl_sample_work_init(struct gl_sample_work *w, int32_t n_vocab,
                                          struct gl_err *err);
void gl_sample_work_free(struct gl_sample_work *w); // idempotent

// Applies allowed/banned ids, logit_bias and the penalties to logits (n_vocab, in place).
// prompt/out: the sequence's prompt and generated tokens (repetition over both, presence and
// frequency over out only). Cost O(n_vocab) only when allowed_ids is set, else O(n_prompt + n_out
// + n_bias + n_bad).
void gl_sample_process(const struct gl_sample_params *p, float *logits, struct gl_sample_work *w,
                       const int32_t *prompt, int64_t n_prompt, const int32_t *out, int64_t n_out);
// Temperature, min_p, top-k, top-p over (processed) logits, not modified: leaves the surviving
// distribution in w->cand[0..w->n_cand), probabilities summing to 1, sorted by probability
// (descending, ties by id) when top-k or top-p is active, else in id order. Greedy leaves the
// argmax alone with p = 1; all -inf falls back to the argmax (token 0 if every logit is -inf).
void gl_sample_filter(const struct gl_sample_params *p, const float *logits,
                      struct gl_sample_work *w);
// Filter, then draw one survivor with rng (no draw is consumed for greedy or one survivor).
int32_t gl_sample_pick(const struct gl_sample_params *p, const float *logits,
                       struct gl_sample_work *w, struct gl_rng *rng);
// Argmax with ties to the lowest id.
int32_t gl_sample_argmax(const float *logits, int32_t n_vocab);

// Raw logprobs of one row: *chosen_lp = log_softmax(logits)[chosen]; the top_n best ids (by
// logit, ties by id, descending) and their logprobs into top_ids/top_lps (top_n <= 20).
void gl_sample_logprobs(const float *logits, int32_t n_vocab, int32_t chosen, int32_t top_n,
                        float *chosen_lp, int32_t *top_ids, float *top_lps);
// vLLM's rank of id in a row: how many entries are >= logits[id] (1 for the argmax).
int32_t gl_sample_rank(const float *logits, int32_t n_vocab, int32_t id);
