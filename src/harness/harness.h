// SPDX-License-Identifier: MIT
// harness: test and benchmark harnesses that drive the library's modules from outside, behind
// thin `glint` commands (issue 23: cli/ only parses flags and prints).
//   grammar check  -- the MaskBench harness (grammar_harness.c): compile each case file's schema,
//                     walk every instance through the matcher token by token, classify, time
//                     every compile and every mask; police the matcher's contract on every step.
//   grammar sample -- random walks under a JSON Schema's mask, for independent validators.
//   run / eval     -- generation from a prompt (greedy or sampled, with images and videos), a
//                     JSONL file of /v1/completions bodies through the engine, and teacher-forced
//                     logits / per-layer hidden-state dumps for the reference checks
//                     (run_harness.c; the oracle scripts read these outputs).
//   bench          -- speed: pp / tg at a depth on one sequence, aggregate decode of B sequences
//                     through the engine (speed_harness.c; llama-bench's definitions, below).
// Ownership: the options and the strings in them belong to the caller and are only read. Each
// call owns everything it loads (tokenizer, vocabulary index, grammars) and frees it before it
// returns. Output: the report goes to stdout (grammar: the formats of docs/GRAMMAR.md §4; run:
// the text; eval: argmax ids unless --logits), unchanged from the commands'; errors go to stderr
// as "glint grammar check: ...", "glint run: ..." and so on.
// Errors: each returns a process exit code: 0 done (all contracts held), 1 an input could not be
// read or compiled where that is fatal, out of memory, or a contract breach (the report still
// printed where the run finished).
#pragma once

#include "media/media.h"
#include "model/model.h"
#include "sampling/sampling.h"

#include <stdio.h>

// glint grammar check. Defaults (the command's): every 1, limit -1 (all), ws_max -1 (the
// grammar's default, 16), verify 0 (off).
struct gl_grammar_check_opts {
    const char *tokenizer, *cases, *per_file, *digest; // tokenizer: GGUF or tiktoken ranks
    int json, ws_max, verbose, dump, cpu_time;
    long long limit, every, verify;
};
int gl_harness_grammar_check(const struct gl_grammar_check_opts *o);

// glint grammar sample. Defaults (the command's): n 10, seed 1, max_tokens 512, ws_max 0.
struct gl_grammar_sample_opts {
    const char *tokenizer, *schema;
    long long n, seed, max_tokens, ws_max;
    int verbose, closed;
};
#define GL_GRAMMAR_SAMPLE_MAX_TOKENS 100000 // the largest max_tokens
int gl_harness_grammar_sample(const struct gl_grammar_sample_opts *o);

// glint run / glint eval. Defaults (the commands'): device -1 (cpu), n_gen 32, threads 2,
// sp = gl_sample_default_params() with temperature 0 (greedy), max_seqs 16, max_tokens 512,
// kv_bytes 1 GiB, kv_dtype GL_KV_F16, eval_batch 0 (the whole prompt at once). run: exactly one
// of prompt / prompt_ids / batch (the caller checks); eval: prompt_ids.
struct gl_run_opts {
    const char *model, *prompt, *prompt_ids, *batch, *out;
    long long max_seqs, max_tokens;
    int64_t kv_bytes;
    enum gl_kv_dtype kv_dtype;
    long long n_gen, threads;
    int device;       // -1: cpu, else the Vulkan device index
    int n_gpu_layers; // with a device: the last N layers there (n_layer + 1: the head too); -1 all
    struct gl_sample_params sp;
    int print_ids, special, show_tensors;
    const char *mmproj;                    // --mmproj: vision GGUF for a GGUF model
    const char *media[GL_MEDIA_MAX_PARTS]; // --image / --video files, in placeholder order
    enum gl_media_kind media_kind[GL_MEDIA_MAX_PARTS];
    int n_media;
    const char *logits, *dump_dir;                     // eval: --logits OUT.f32, --dump-layers DIR
    long long eval_batch;                              // eval: --batch N (0: all at once)
    void (*progress)(void *user, int done, int total); // model loading (may be NULL)
    void *progress_user;
};
int gl_harness_run(const struct gl_run_opts *o);
int gl_harness_eval(const struct gl_run_opts *o);

// ---- glint bench (speed_harness.c) ----
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
struct gl_bench_params {
    int64_t n_prompt; // P, 0 = skip pp
    int64_t n_gen;    // N, 0 = skip tg
    int64_t n_depth;  // D, tokens already in the cache before each timed run (0 = empty)
    int n_threads;
    int reps;         // >= 1
    int device;       // -1: the CPU; N >= 0: Vulkan device N (gl_model_ctx_new_dev)
    int n_gpu_layers; // with a device: the last N layers there (n_layer + 1: the head too); -1 all
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
                                            int n_threads, int device, int n_gpu_layers, double *ts,
                                            int64_t *n_tok, int64_t *n_steps, struct gl_err *err);

// One run of the speculative-decoding cost curve (issue 22): B concurrent greedy sequences, all
// with the SAME 16-id prompt (as gl_bench_batch_decode's first), n_gen tokens each, ignore_eos,
// max_num_seqs B; spec NULL (or method GL_SPEC_NONE) decodes without speculation. The clock
// starts after the step in which every sequence has its first token; out->us_per_tok = decode
// microseconds / decode tokens (all B sequences). greedy (NULL: not wanted) receives sequence
// 0's n_gen tokens: the replay a GL_SPEC_REPLAY run then drafts from. warm: the same B sequences
// run once first through the same engine, untimed, so the timed ones find its cost model's
// acceptance and step times learned, as a server's later requests do. Speculation counters are
// the engine's (gl_engine_stats) over the timed sequences.
struct gl_spec_params; // engine/engine.h
struct gl_bench_spec_run {
    double us_per_tok;
    int64_t n_tok, n_steps;
    int64_t drafts, draft_tokens, accepted;
    int64_t off_steps; // steps where the cost model chose no draft (gl_engine_stats)
};
GL_MUST_USE gl_status gl_bench_spec_decode(const struct gl_model *m, int B, int64_t n_gen,
                                           int n_threads, const struct gl_spec_params *spec,
                                           int warm, int32_t *greedy, struct gl_bench_spec_run *out,
                                           struct gl_err *err);

// The cost curve (issue 22; `glint bench --spec-curve`): per batch size B, the greedy
// continuation first (a run with speculation off, sequence 0's tokens: the replay), then `rounds`
// rounds of   off, on(alpha_1, k_1), off, on(alpha_1, k_2), ..., off   so every speculative run
// sits between two runs without speculation (memory bandwidth drifts on a shared machine). Per
// (alpha, k): decode microseconds per generated token, the ratio on / mean(the two offs around
// it), median over rounds (< 1 is a speed-up), and the ratio of the summed times over all rounds
// (the expected speed-up: a round's realised acceptance varies with its replay seed), and its two
// factors over all rounds: tokens per step (per sequence) over the step cost c (a verify step's
// mean time over an off step's); with cost_model (1 or 2) every run is warm (gl_bench_spec_decode);
// a markdown row and a JSON line each to out, progress to stderr. The lists are borrowed; batch and
// k hold whole numbers (B >= 1, 1 <= k <= GL_SPEC_MAX_K), alpha in [0, 1]; rounds >= 1. GL_E_NOMEM,
// or a run's error.
struct gl_bench_curve {
    const double *batch, *alpha, *k;
    int n_batch, n_alpha, n_k;
    int64_t n_gen;
    int n_threads, rounds;
    // 0: always draft k (spec.fixed_k); 1: the engine's cost model chooses 0..k; 2: both, as
    // two cells per (alpha, k) in the same rounds (fixed, then the model), for a comparison
    // that the machine's drift between runs does not decide.
    int cost_model;
};
GL_MUST_USE gl_status gl_bench_spec_curve(const struct gl_model *m, const struct gl_bench_curve *c,
                                          FILE *out, struct gl_err *err);
