// SPDX-License-Identifier: MIT
// bench: the speed-test harness behind `glint bench` (the CLI only parses flags and prints).
// Layer L8: uses model/ (single-sequence forward), engine/ (batched decode) and sampling/.
//
// pp<P> = one batched forward of P random token ids (last-token logits only) after D tokens of
// depth; tg<N> = N single-token steps (full logits and a greedy pick each) after D depth tokens
// and one more prompt token. Like llama-bench: one untimed warm-up pass (pp, or one token) from
// an empty cache, then the depth (D random ids, untimed) is written ONCE into the cache and every
// repetition runs at positions D.. over it (later repetitions overwrite the same rows), so the
// depth is paid once per run, as llama-bench's cached depth state.
//
// Errors: GL_E_NOMEM, and whatever the model returns (GL_E_LIMIT for a context too long).
// Ownership: a result's samples belong to the result; free with gl_bench_result_free.
#pragma once

#include "base/base.h"
#include "model/model.h"

#include <stdint.h>

struct gl_bench_params {
    int64_t n_prompt; // P, 0 = skip pp
    int64_t n_gen;    // N, 0 = skip tg
    int64_t n_depth;  // D, tokens already in the cache before each timed run (0 = empty)
    int n_threads;
    int reps;   // >= 1
    int device; // -1: the CPU; N >= 0: Vulkan device N (gl_model_ctx_new_dev)
};

struct gl_bench_result {
    char name[48]; // "pp512", "tg128", "pp512 @ d4096"
    int64_t n_prompt, n_gen, n_depth;
    double *samples; // tokens/s per repetition [reps]
    int n_samples;
    double mean, sd; // sample sd (0 for one repetition)
};

// Runs pp then tg as asked; fills out[0..*n_out) (at most 2) and *isa (static string, the
// kernel table used). On error every result already filled is freed and *n_out is 0.
GL_MUST_USE gl_status gl_bench_pp_tg(const struct gl_model *m, const struct gl_bench_params *p,
                                     struct gl_bench_result out[2], int *n_out, const char **isa,
                                     struct gl_err *err);
void gl_bench_result_free(struct gl_bench_result *r); // NULL-safe

// Aggregate decode of B concurrent greedy sequences through the engine (16-id prompts from
// xoshiro256** seeded 99, ids mod min(vocab, 200000), ignore_eos, n_gen tokens each,
// max_num_seqs B, 256 MiB KV; device as gl_bench_params.device): the clock starts after the step in
// which every sequence has its first token (prefill excluded) and stops after the last step. *ts =
// decode tokens / seconds.
#define GL_BENCH_BATCH_PROMPT 16
GL_MUST_USE gl_status gl_bench_batch_decode(const struct gl_model *m, int B, int64_t n_gen,
                                            int n_threads, int device, double *ts, int64_t *n_tok,
                                            int64_t *n_steps, struct gl_err *err);
