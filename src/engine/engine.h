// SPDX-License-Identifier: MIT
// engine: continuous batching over one model, like vLLM's LLMEngine. Requests (token ids plus
// sampling parameters) are queued FCFS; each step the scheduler picks running decodes first and
// then prefill chunks up to max_num_batched_tokens tokens and max_num_seqs sequences, runs ONE
// batched forward pass (weights read once per step for the whole batch), samples, and emits
// events. KV lives in the paged pool (kv.h); when it runs dry the newest running sequence is
// preempted (pages freed, recomputed later from its prompt + generated tokens), never dropped.
//
// Threads: gl_engine_submit, gl_engine_cancel, gl_engine_stats and gl_engine_wake may be called
// from any thread; gl_engine_step / gl_engine_run / gl_engine_wait from exactly one thread, which
// also runs every callback. Ownership: the engine borrows the model and tokenizer (they outlive
// it; the tokenizer may be NULL: no text then, and stop strings are refused) and copies every
// request parameter it keeps.
//
// Decisions (why / cost / what if it hurts):
// - Preemption is recompute-only (vLLM V1): the victim's pages go back to the pool and its prompt
//   + generated tokens are prefilled again later (prefix cache hits make that cheap). Its RNG,
//   detokenizer and stop-string state are kept, so its output is identical to an uninterrupted
//   run. Swapping to host memory would cost a copy per page and is pointless on a CPU.
// - Seeds: a request without a seed gets one from an engine counter (deterministic per run);
//   choice i of a request uses gl_sample_choice_seed(seed, i). The RNG lives in the sequence,
//   so tokens never depend on which other sequences share a step.
// - Media (image soft tokens, struct gl_request_media) stay as rows in the request, not in the
//   KV: every forward chunk that covers a media position (a prefill chunk cut anywhere, or a
//   recompute after preemption) points that position at its row (gl_batch_seq embd). Cost: the
//   rows live until the request retires (N x n_embd floats per image). The prefix cache needs no
//   change: blocks are keyed by a parallel array of key ids in which media positions carry ids
//   derived from the content digest (negative, never a token id), so kv.c stays token-agnostic.
// - Encoder (vLLM V1's encoder scheduling): media may come as patch vectors (deferred) instead of
//   rows. The engine owns one encoder worker thread (started at the first such part) with its
//   own kernel pool at a lower priority (encoder_nice), so text sequences keep decoding while
//   images encode; the step thread never waits for it. Each step hands queued parts to the
//   worker FCFS within max_num_encoder_input_tokens rows in flight, takes finished rows, and cuts
//   every prefill chunk before the first position whose rows do not exist yet (the text before an
//   image is prefilled; a running sequence blocked at an image holds its pages and waits; a waiting
//   one with nothing to compute before an image is not admitted and lets those behind pass). Parts
//   are shared by (digest, grid) among all requests in flight (one encode; counted in enc_hits) and
//   kept after them within encoder_cache_bytes. A cancel drops a queued part at once; a part in
//   the encoder (gl_vision_encode cannot stop midway) is discarded when it finishes, unless
//   another request holds it. A failed encode ends the sequences that need it (finish ERROR).
//   Cost: the rows are n_rows x n_embd floats per distinct part while any holder lives.
// - Nothing is lost silently. A request whose prompt + max_tokens (unset: max_model_len - prompt)
//   cannot fit the whole pool is refused at submit (GL_E_LIMIT): it could never finish, and
//   ending it early with "length" would pass the pool off as a length limit (vLLM refuses to
//   start with such a pool; glint starts, warns, and refuses only the requests that cannot fit).
//   "length" therefore always means max_tokens or max_model_len. Whatever fails inside the
//   engine for one sequence (out of memory, a logits processor refusing or forcing a bad token,
//   no pages even alone) ends it with GL_FINISH_ERROR and a message, which the caller must turn
//   into an explicit error; GL_FINISH_ABORT means cancelled (gl_engine_cancel, gl_engine_free).
#pragma once

#include "base/base.h"
#include "kv/kv.h"
#include "model/dflash.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "tokenizer/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#define GL_ENGINE_MAX_EOS 8

// Speculative decoding (issue 22; off by default: method NONE leaves every step as before).
// A decoding sequence with a draft of k tokens runs k + 1 positions in one step (its pending
// token and the draft; the step budget counts k + 1) with a logits row each; the rows are
// verified in order through the same per-token path as plain decoding (grammar mask, min_tokens,
// bias, penalties, temperature, min_p, top-k, top-p): greedy keeps the argmax chain; sampling
// accepts draft d with probability p(d) and otherwise draws from p without d, renormalised (the
// residual of a one-hot draft), from the sequence's own RNG, so the output distribution is that
// of plain sampling; when all k are accepted one more token is drawn from the last row.
// Jump-forward (below): a sequence whose pending tokens are a sampled token and the m tokens
// forced after it speculates too: the draft continues after the last forced token (ngram and
// replay read the tokens including the forced ones; draft_ok cuts it from the processor's state,
// which is already past them), the chunk of 1 + m + k positions is scheduled un-split only when
// the step budget and the pool (without preemption) take it whole, else it runs as a plain
// jump-forward chunk; logits rows are computed for the last forced position and the k draft
// positions only, and verified as a decode's (that row decides the first new token). DFlash
// does not draft there: its context covers only computed positions (the anchor would be the
// last forced token with the others not yet in it); it drafts again at the next decode. Only
// accepted positions are committed to the KV (gl_kv_seq_commit), so sliding pages are released
// only for real positions, and the pages reserved for rejected ones go back (gl_kv_seq_trim).
// Stop ids, stop strings, max_tokens, min_tokens and max_model_len are checked per token and the
// first that ends the sequence ends it. Logprobs: each emitted token reports those of the row
// that decided it, the raw logits of the same position a plain step computes (gl_event: one
// entry per token, n_tokens up to k + 1). Not speculating (the plain step): a prefill (prompt
// positions pending), a sequence whose prompt logprobs are not all sent yet (its prefill; once
// decoding it speculates), sequences whose logits processor has no draft_ok (it could not cut a
// draft), and a step whose pool cannot reserve the chunk (k + 1, or 1 + m + k positions) while
// leaving each later decode a page per layer group (speculation never causes a preemption); a
// draft also leaves each later decode its token of the step budget.
// GL_SPEC_REPLAY (benchmarks and tests only, not reachable from the server): every sequence's
// draft is the given continuation replay[n_gen .. n_gen + k) (its known greedy output), each
// token replaced by another with probability 1 - alpha (a fixed hash of the position and seed),
// so the acceptance of a greedy run is about alpha per position: the cost curve of issue 22.
// GL_SPEC_DFLASH: the DFlash drafter (model/dflash.h; arch doc §7). Every step's forward also
// captures the drafter's target layers; the rows each sequence commits (prefill chunks, decodes,
// the verified prefix of a draft) are appended to its projected context, and a decoding sequence
// whose context covers all its computed positions drafts k tokens (k <= block_size - 1) as the
// argmax of block rows 1..k with its pending token as the anchor. The prefix cache is not used
// for reuse under DFLASH (a reused prefix has no captured hidden states). The projected contexts
// live in the engine's drafter pool (spec.dflash_kv_bytes below; model/dflash.h).
enum gl_spec_method { GL_SPEC_NONE, GL_SPEC_NGRAM, GL_SPEC_REPLAY, GL_SPEC_DFLASH };
#define GL_SPEC_MAX_K 16
struct gl_spec_params {
    enum gl_spec_method method;
    int32_t k;                      // num_speculative_tokens, 1..GL_SPEC_MAX_K
    int32_t lookup_min, lookup_max; // ngram: prompt_lookup_min / max, 1 <= min <= max <= 64
    // Tests only, wrong rules for the chi-square negative controls: 1 resamples from p WITHOUT
    // removing the rejected draft; 2 applies min_p before temperature (on the untempered
    // logits) to every row it verifies.
    int32_t test_wrong_rule;
    const int32_t *replay; // GL_SPEC_REPLAY: [n_replay] borrowed, outlives the engine
    int32_t n_replay;
    float alpha;     // GL_SPEC_REPLAY: probability that a drafted token is kept, [0, 1]
    uint64_t seed;   // GL_SPEC_REPLAY: corruption hash seed
    int32_t fixed_k; // 1: every step drafts up to k (tests, the cost-curve bench); 0 (default):
                     // the cost model below chooses each step's draft length 0..k
    // GL_SPEC_DFLASH: the drafter (borrowed, outlives the engine; gl_dflash_check_target'ed
    // against the model at gl_engine_new).
    const struct gl_dflash *dflash;
    // GL_SPEC_DFLASH from --speculative-config: the drafter file ("model"), which the server
    // opens into .dflash before creating the engine (the engine reads only .dflash).
    char dflash_path[1024];
    // Tests only (GL_SPEC_DFLASH): N > 0: every N-th draft also rebuilds the sequence's drafter
    // context from scratch (one target forward over its computed tokens, captured, appended anew)
    // and aborts when that block's logits differ from the incremental one's by > 1e-4 relative.
    int32_t test_dflash_audit;
    // GL_SPEC_DFLASH: bytes of the drafter's context pool (the projected K/V of every sequence,
    // paged: model/dflash.h); 0: gl_engine_dflash_kv_bytes (max_num_seqs sequences of
    // max_model_len). A sequence whose next rows find no free page stops drafting (its context
    // pages go back) until it is readmitted; it is never preempted or failed for the drafter.
    int64_t dflash_kv_bytes;
};
// vLLM's ngram proposer (prompt lookup): for n = lookup_max down to lookup_min, the most recent
// earlier occurrence of the last n tokens of tok[0..n_tok) (starting before n_tok - n); the first
// n that has one proposes the up to k tokens that followed it (fewer when tok ends first).
// Writes them to out[0..k) and returns how many (0: no match). O(n_tok * lookup_max).
int32_t gl_spec_ngram_propose(const int32_t *tok, int64_t n_tok, int32_t lookup_min,
                              int32_t lookup_max, int32_t k, int32_t *out);

// The cost model ("never a slowdown"; spec.fixed_k 0). Speculation is a bet that pays only while
// a step stays bandwidth-bound: verifying j more rows per sequence costs little while reading the
// weights dominates and about j rows' compute once the step is compute-bound (a large batch, long
// drafts). Before scheduling each step the engine picks ONE draft length j in 0..k for the
// n_spec sequences that may speculate (decodes, forced runs that fit the step), maximising
// generated tokens per microsecond:
//     G(j) / T(j),   G(j) = n_spec * (1 - a^(j+1)) / (1 - a)   tokens (n_spec * (j + 1) at a = 1)
//                    T(j) = t(R0 + n_spec * j)                  microseconds
// and drafts only when some j > 0 beats j = 0 strictly (ties: no draft).
// - a: the running acceptance (engine-wide), the probability that a draft token is accepted
//   when the ones before it were: accepted draft tokens over tested ones (a draft of j with n
//   accepted tested n + 1 positions when one was rejected, else n), both counts decayed by 0.99
//   per verified draft (half-life ~70 drafts), prior 0 accepted of 1 tested.
// - t(R): the measured time of a step that computed R rows (decodes, drafts and prefill tokens;
//   forward pass plus sampling and verification, gl_time_us), learned from the engine's own
//   steps: a moving average (weight 1/8) per rows bucket (one per R below 32, then 16 per power
//   of two). An unmeasured R takes linear interpolation between the nearest measured buckets
//   around it, or the nearest one below when none is above (optimistic: still bandwidth-bound,
//   so an untried length gets tried once and measured); t is non-decreasing in R (running max
//   from below): more rows never look cheaper, so with a = 0 the choice is always 0.
// - Stale buckets: one not measured in the last GL_SPEC_STALE steps was measured under another
//   load or bandwidth (this machine's drifts 25-59 GB/s within minutes). A single slow step there
//   would otherwise bar its length for good: that length is never chosen again, so never
//   measured again, and through the running max it also raises every longer one (seen on the
//   4-layer file: one 5-row step of 116 ms, with 4-row steps at 78-85 ms, kept k 4 out for good;
//   on the 52-layer file the model gave 1.65x by median where fixed k 3 gave 2.04x a quarter
//   hour before, and 1.92x against 1.84x with this rule). So a stale bucket's next measurement
//   replaces it, the running max skips a stale bucket below a fresh one, and every
//   GL_SPEC_PROBE_EVERY steps that draft, the length one below or above the chosen one
//   (alternately) is tried when its bucket is stale (gl_spec_cost_explore): at most one step in
//   16 at a neighbouring length.
// - R0: the step's rows without drafts: its decodes plus the prefill tokens it is expected to
//   schedule (pending prompts of running sequences, and waiting ones while a slot is free),
//   within max_num_batched_tokens.
// - Probes: a is learned only from drafts, so after GL_SPEC_PROBE_EVERY steps in a row that chose
//   0, one sequence drafts a single token (one extra row in 16 steps) to keep a current.
#define GL_SPEC_COST_BUCKETS 256
#define GL_SPEC_PROBE_EVERY  16
#define GL_SPEC_STALE        64 // steps
struct gl_spec_cost {
    double t_us[GL_SPEC_COST_BUCKETS];  // moving average step time per rows bucket; 0: unmeasured
    int64_t t_at[GL_SPEC_COST_BUCKETS]; // steps measured when the bucket was last measured
    int64_t steps;                      // steps measured (gl_spec_cost_step)
    double acc, tested;                 // decayed accepted / tested draft tokens
    int32_t since_probe;                // steps in a row the model chose 0
    int32_t since_explore;              // steps that drafted since the last neighbour check
    int32_t explore_up;                 // the next neighbour tried: 1 above, 0 below
};
void gl_spec_cost_init(struct gl_spec_cost *c);
void gl_spec_cost_step(struct gl_spec_cost *c, int64_t rows, double us); // a step's time
void gl_spec_cost_verified(struct gl_spec_cost *c, int32_t n_accepted, int32_t n_tested);
double gl_spec_cost_acceptance(const struct gl_spec_cost *c);         // a in [0, 1]
double gl_spec_cost_time(const struct gl_spec_cost *c, int64_t rows); // t(R) us; 0: no data
// The j in 0..k above (0 when n_spec or k is 0 or t(rows0) is unmeasured).
int32_t gl_spec_cost_choose(const struct gl_spec_cost *c, int64_t rows0, int32_t n_spec, int32_t k);
// The length to run this step given the choice j > 0: j, or every GL_SPEC_PROBE_EVERY calls a
// neighbour (j - 1 or j + 1 within 0..k, alternately) whose bucket is stale. j = 0 is returned
// as it is (the engine's single-token probes keep a current there).
int32_t gl_spec_cost_explore(struct gl_spec_cost *c, int64_t rows0, int32_t n_spec, int32_t k,
                             int32_t j);

struct gl_engine_params {
    struct gl_kv_params kv;
    int32_t max_num_seqs;           // running sequences per step; default 16
    int32_t max_num_batched_tokens; // tokens per step (decodes + prefill chunks); default 512
    int32_t max_model_len;          // prompt + output positions per sequence; default n_ctx_train
    int32_t max_waiting;            // queued choices bound; submit past it is GL_E_AGAIN; def 256
    int32_t n_threads;              // kernel threads; default: the physical cores this
                                    // process may use (base/host.h gl_host_cpus)
    // Cores to pin the kernel threads to (borrowed, [n_cpus]; NULL: no pinning): the thread
    // that calls gl_engine_step takes cpus[0], pool worker i cpus[i]. Used only when n_threads <=
    // n_cpus (more threads than cores are left to the OS). Default: gl_host_cpus.
    const int32_t *cpus;
    int32_t n_cpus;
    // The model's stop set besides the tokenizer EOS: generation_config / GGUF EOS ids
    // (the release: <|end_of_text|> 200001, <|eot|> 200008). <|eom|> never belongs here.
    int32_t eos_ids[GL_ENGINE_MAX_EOS];
    int32_t n_eos;
    uint64_t seed;              // base of the unseeded-request seed counter (default 0)
    struct gl_spec_params spec; // speculative decoding; default method GL_SPEC_NONE (off)
    // The forward pass's backend: -1 the CPU (default), N >= 0 Vulkan device N (one device
    // submission per step; gl_model_ctx_new_dev).
    int32_t device;
    // With a device: the last n_gpu_layers layers run there, the rest on the CPU, n_layer + 1
    // the output head too (llama.cpp's --n-gpu-layers); -1 (default): all.
    int32_t n_gpu_layers;
    // Encoder (models with a vision tower; deferred media, gl_request_media):
    // - max_num_encoder_input_tokens (vLLM's name): soft-token rows handed to the encoder worker
    //   and not finished yet, at most; each step dispatches queued parts FCFS under it (one part
    //   larger than it runs alone). Default 4096, one image at the default max_image_tokens.
    // - encoder_threads: the worker's own kernel pool (default n_threads). It is not pinned and
    //   runs at encoder_nice (default 10, CFS weight 110 vs 1024): the step threads take the
    //   cores when they have work, the encoder takes what they leave (text keeps decoding).
    // - encoder_cache_bytes: the budget of encoded rows, those in use included, as vLLM's
    //   encoder cache: rows stay after the last request using them ends while all fit, and the
    //   least recently used unheld ones go first (default 0: freed at once). Rows in use are
    //   never evicted, so requests in flight alone can be over it; then nothing is kept.
    int32_t max_num_encoder_input_tokens;
    int32_t encoder_threads;
    int32_t encoder_nice;
    int64_t encoder_cache_bytes;
    // Tests: called on the encoder worker before each encode (it may block, holding the encoder
    // mid-job, so that cancel and sharing are checked in a known state). NULL: none.
    void (*encoder_hook)(void *user);
    void *encoder_hook_user;
};
// Defaults above; eos_ids from tokenizer.ggml.eos_token_id and .eot_token_id of the model's
// GGUF; kv: 1 GiB of f16, block 16, prefix cache on; threads and cpus from gl_host_cpus.
struct gl_engine_params gl_engine_default_params(const struct gl_model *m);
// The placement and step bounds the engine creates its model context with (device,
// n_gpu_layers, and the most sequences, positions and logits rows of a step): what `glint plan
// --device` sizes the device memory with (gl_model_dev_mem_plan).
void gl_engine_model_dev(const struct gl_engine_params *p, struct gl_model_dev *out);
// The pool the engine makes: p->kv with n_dev_layers = n_gpu_layers under partial offload (the
// device copy then holds only the device layers' K/V: kv.h gl_kv_pool_dev_bytes), else 0.
struct gl_kv_params gl_engine_kv_params(const struct gl_engine_params *p);
// GL_SPEC_DFLASH: the drafter context pool's parameters (p->kv's block size, f32, no prefix
// cache, one side) and its bytes: p->spec.dflash_kv_bytes, or when 0 enough for max_num_seqs
// sequences of max_model_len (a sliding drafter's pages per sequence stop at its window). 0
// without a drafter. What the engine allocates and serve counts before sizing the target's pool.
struct gl_kv_params gl_engine_dflash_kv_params(const struct gl_engine_params *p);
int64_t gl_engine_dflash_kv_bytes(const struct gl_engine_params *p);
// The room for that pool's device side on p->device (gl_model_dev_kv_room, under
// --gpu-memory-utilization util): the device memory plan of model file g at p's step bounds
// (gl_engine_model_dev, p->max_num_batched_tokens) without the KV, into *dm, then the device's
// heap. What serve sizes the pool from and `glint plan --device` prints. Errors: the plan's and
// the device lookup's.
GL_MUST_USE gl_status gl_engine_dev_kv_room(const struct gl_gguf *g,
                                            const struct gl_model_config *cfg,
                                            const struct gl_engine_params *p, double util,
                                            int64_t *room, uint64_t *heap_bytes,
                                            uint64_t *range_bytes, struct gl_model_dev_mem *dm,
                                            struct gl_err *err);

// Per-sequence logits processor (the grammar plugs in here): mask is called before sampling
// with the sequence's logits (n_vocab floats, modifiable: set -INFINITY to ban), before bias,
// penalties and the min_tokens stop mask; accept after a token is chosen; free once, when the
// request ends (all its choices). Returning non-zero from accept aborts the sequence with
// finish GL_FINISH_ERROR. A preempted sequence keeps its processor state: recompute replays
// no tokens through it.
//
// Jump-forward (forced): when a processor knows that the next tokens are each the only allowed
// continuation (a grammar's literal run: a JSON key, a closing quote), sampling them one decode
// step each is wasted work. After accept of a sampled token (the sequence not finished), the
// engine calls forced(user, out, cap) once; the processor writes up to cap such tokens to out,
// advances its own state over them (accept is NOT called for them) and returns how many (0: none).
// The engine appends them as generated tokens -- stop ids (after min_tokens), stop strings,
// max_tokens and max_model_len are checked after each one and the first that ends the sequence
// ends it (the rest are dropped) -- and emits them in the same event as the sampled token
// (n_tokens > 1). The next step computes the sampled token and the forced ones as one chunk (like
// a prefill chunk, split under max_num_batched_tokens) and samples from the last position, or,
// with speculation, verifies a draft after it (GL_SPEC_* above; counted in spec_jf_drafts).
// The output distribution is unchanged: a position with one allowed token draws no random
// number (sampling.h), so a seeded run gives the same tokens with or without forced; the only
// differences are that a forced token bypasses the request's allowed_ids / bad_ids and the
// min_tokens stop-id mask (the processor is trusted), and that no logits exist for it.
// cap is at most GL_ENGINE_MAX_FORCED and never more than the max_tokens / max_model_len room
// left. Returning < 0, > cap or an id outside [0, n_vocab) ends the sequence (GL_FINISH_ERROR).
// forced is never called when the request asks for logprobs (sp.logprobs >= 0): a forced token's
// logprob cannot be reported without computing the logits it skips; such requests decode every
// token (mask still restricts each position, so the output is the same).
//
// Partial head (allowed, optional): before a step computes a sequence's logits, the engine asks
// allowed(user, n_vocab) for a bitset ([ceil(n_vocab / 32)] words, owned by the processor, valid
// until its next callback) that holds every token mask() will leave finite, or NULL when the
// processor does not know it yet. The model may then compute only those logits (gl_batch_seq
// head_mask): the ones mask() keeps are bit-identical, so the output does not change. Not used
// when the request asks for logprobs (they are of the unmasked logits).
#define GL_ENGINE_MAX_FORCED 64
// Logits rows a step may spend on prompt logprobs beyond one per sequence (sp.prompt_logprobs:
// choice 0 computes every prompt position's row, so it takes no prefix-cache hit and its prefill
// chunks are cut to what fits; 32 rows of a 202k vocabulary are 26 MB).
#define GL_ENGINE_PLP_ROWS 32
struct gl_logits_processor {
    void *user;
    void (*mask)(void *user, float *logits, int32_t n_vocab);
    int (*accept)(void *user, int32_t token);
    void (*free)(void *user);
    int32_t (*forced)(void *user, int32_t *out, int32_t cap); // optional: jump-forward, above
    const uint32_t *(*allowed)(void *user, int32_t n_vocab);  // optional: partial head, above
    // Optional (speculative decoding): how many leading tokens of draft[0..n) the processor
    // would accept one after another from its current state, which it leaves unchanged (it walks
    // and rolls back). A draft is cut there; the verified positions still get their masks from
    // mask() after accept() of the tokens really accepted. Without it the sequence does not
    // speculate.
    int32_t (*draft_ok)(void *user, const int32_t *draft, int32_t n);
};

// ABORT: cancelled by the caller. ERROR: the engine failed this sequence (gl_event.error says
// why); never a finished reply -- the caller reports an error.
enum gl_finish {
    GL_FINISH_NONE,
    GL_FINISH_STOP,
    GL_FINISH_LENGTH,
    GL_FINISH_ABORT,
    GL_FINISH_ERROR
};
const char *gl_finish_name(enum gl_finish f); // "stop" "length" "abort" "error"

// Valid only during the callback (tokens and text point into engine buffers).
struct gl_event {
    uint64_t request_id;
    int32_t index; // choice index for n > 1
    // New tokens this step: 1, or 1 + forced ones (jump-forward), or the verified tokens of a
    // speculative step (accepted drafts + 1, up to GL_SPEC_MAX_K + 1).
    const int32_t *tokens;
    int32_t n_tokens;
    const char *text; // new text (stop strings held back and cut); may be ""
    size_t text_len;
    // With logprobs requested (sp.logprobs >= 0; never jump-forward then), per token i in order,
    // exactly what a step emitting that token alone would report: logprobs[i] of the chosen
    // token, top_ids / top_logprobs [i * top_n .. (i + 1) * top_n), and text_ends[i], the length
    // of text[0 ..) once token i was added (text a one-token event would have carried ends
    // there; the last is text_len). All NULL without logprobs.
    const float *logprobs;
    const int32_t *top_ids;
    const float *top_logprobs;
    int32_t top_n;
    const size_t *text_ends;
    enum gl_finish finish;         // != NONE on the last event of this choice
    const char *stop_matched;      // the stop string, or NULL
    int32_t stop_token;            // the stop token id that ended it, or -1
    int32_t n_prompt, n_generated; // usage so far
    const char *error;             // finish ERROR: what failed (engine text); else NULL
    int64_t t_scheduled_us;        // when the choice first entered the running batch
                                   // (gl_time_us; 0: not yet): queue time ends, prefill begins
    int64_t n_prompt_cached;       // prompt positions the prefix cache supplied then
    // Prompt logprobs (sp.prompt_logprobs >= 0; choice 0 only, before its first token; events
    // with n_plp > 0 carry no tokens): prompt positions plp_pos .. plp_pos + n_plp - 1, each the
    // raw logprob and rank (gl_sample_rank) of its prompt token under the logits of the position
    // before it, and the top plp_k ids and logprobs there ([n_plp * plp_k]). Every position
    // 1 .. n_prompt - 1 is sent exactly once, in order, also across preemption.
    int32_t plp_pos, n_plp, plp_k;
    const float *plp_logprobs;
    const int32_t *plp_ranks;
    const int32_t *plp_top_ids;
    const float *plp_top_logprobs;
};
typedef void (*gl_event_fn)(void *user, const struct gl_event *ev);

// Media in a prompt (an image's soft tokens, built by src/media): positions pos .. pos + n_rows - 1
// of the prompt take the given input embeddings instead of their token rows (gl_batch_seq embd).
// The prompt ids at those positions are still what the request reports and what penalties see
// (the <|patch|> placeholder). Prefix cache: the KV of those positions is keyed by ids derived
// from (digest, row index), negative so they never equal a real token id, so two requests
// share an image's KV blocks exactly when their digests (and everything before) agree. The
// digest must therefore identify the rows' content (src/media hashes the pixels the encoder
// saw and the grid); a 64-bit digest folded to 31 bits per position: a wrong hit needs every
// soft position of a block to collide (about 2^-31 for a block holding one soft position).
//
// Deferred encoding (vLLM's encoder scheduling): embd NULL and patches set hands the engine the
// part's patch vectors instead of its rows. The engine's encoder worker (a thread of its own,
// see "Encoder" below) runs gl_vision_encode on them; until their rows exist the sequence is not
// prefilled past pos (text before it is). Parts with the same (digest, gh, gw) share one encode
// and one set of rows, also across requests in flight (the encoder cache).
struct gl_request_media {
    int32_t pos;     // prompt index of the first row
    int32_t n_rows;  // >= 1; pos + n_rows <= n_prompt; media sorted by pos, not overlapping
    float *embd;     // [n_rows][n_embd] f32 from gl_malloc; see gl_request.media for ownership
    uint64_t digest; // content id of the rows
    float *patches;  // deferred: [(2 gh) (2 gw)][patch_dim] f32 from gl_malloc (ownership as embd)
    int32_t gh, gw;  // deferred: merged-token grid, gh * gw == n_rows
};

struct gl_request {
    const int32_t *prompt; // copied
    int32_t n_prompt;
    // Optional media (NULL / 0: text only). The array is copied; the rows (embd) pass to the
    // engine at submit, whatever its result: freed when the request retires (or is refused), so
    // the caller must not free or reuse them after calling gl_engine_submit.
    const struct gl_request_media *media;
    int32_t n_media;
    struct gl_sample_params sp; // sampling.h: temperature... penalties, stops, n, logprobs, seed
    // vLLM's cache_salt, as a keyed hash of the client's string (0: none). The prompt's first two
    // prefix-cache key ids are derived from it, so its blocks are shared only with requests of
    // the same salt (docs/SECURITY.md: the prefix cache's timing side channel).
    uint64_t cache_salt;
    gl_event_fn on_event;
    void *user;
    // Optional: one processor per choice (n of them), created by the caller; ownership passes to
    // the engine (free called at the end, also on rejection).
    struct gl_logits_processor *procs;
};

struct gl_engine;
// GL_E_INVAL names the bad spec field (k, lookup bounds, method).
GL_MUST_USE gl_status gl_engine_new(struct gl_engine **out, const struct gl_model *m,
                                    const struct gl_tokenizer *tok,
                                    const struct gl_engine_params *p, struct gl_err *err);
void gl_engine_free(struct gl_engine *e); // aborts everything still queued (events "abort")

// Queues a request. GL_E_AGAIN ("overloaded": waiting queue full -> HTTP 503), GL_E_INVAL for
// bad parameters or a prompt longer than max_model_len, GL_E_LIMIT when one sequence of prompt +
// max_tokens (unset: up to max_model_len) can never fit the pool. *id identifies it for cancel.
GL_MUST_USE gl_status gl_engine_submit(struct gl_engine *e, const struct gl_request *r,
                                       uint64_t *id, struct gl_err *err);
// Cancels in any phase; its pages are freed at once (queued) or at the start of the next step
// (running); a final event with finish "abort" follows. Returns 0 if the id is unknown.
int gl_engine_cancel(struct gl_engine *e, uint64_t id);
// Runs one step; returns the number of sequences still queued or running.
GL_MUST_USE gl_status gl_engine_step(struct gl_engine *e, int *n_active, struct gl_err *err);
// Steps until nothing is queued or running.
GL_MUST_USE gl_status gl_engine_run(struct gl_engine *e, struct gl_err *err);
// For a step loop that idles: blocks until a submit or cancel is pending, gl_engine_wake is
// called, or timeout_ms passes (< 0: no timeout). Returns 1 if a submit or cancel is pending.
int gl_engine_wait(struct gl_engine *e, int timeout_ms);
void gl_engine_wake(struct gl_engine *e); // any thread: ends one gl_engine_wait early

struct gl_engine_stats {
    int32_t n_waiting, n_running, n_preempted_total;
    int64_t steps, prompt_tokens, generated_tokens;
    int64_t prefix_query_tokens, prefix_hit_tokens; // looked up / reused at admission
    int64_t kv_pages_used, kv_pages_total;
    int64_t last_step_tokens; // tokens computed by the latest step (prefill chunks + decodes)
    // Speculative decoding (vLLM's spec_decode counters): drafts verified, their tokens, the
    // draft tokens accepted, and accepted per draft position (0 = first draft token).
    int64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
    int64_t spec_accepted_per_pos[GL_SPEC_MAX_K];
    int64_t spec_jf_drafts; // of spec_drafts: verified after forced tokens (jump-forward)
    // The cost model: steps by the draft length chosen for them (0: speculation turned off by
    // the model; fixed_k: always k), steps with at least one sequence able to speculate only;
    // single-token probes drafted while off; the running acceptance a, the last length chosen.
    int64_t spec_len_steps[GL_SPEC_MAX_K + 1];
    int64_t spec_probes;
    double spec_acceptance;
    int32_t spec_len;
    // GL_SPEC_DFLASH: the drafter context pool's pages in use / in all, and the times a
    // sequence stopped drafting because that pool had no page for its next rows.
    int64_t dfl_pages_used, dfl_pages_total, dfl_no_pages;
    // Encoder: deferred parts submitted, of which found in the encoder cache (in flight or
    // kept), encodes run (finished), parts queued or encoding (as of the last step); entries and
    // bytes of rows held. All but enc_pending are read live.
    int64_t enc_queries, enc_hits, enc_runs, enc_pending;
    int64_t enc_entries, enc_bytes;
};
void gl_engine_stats(struct gl_engine *e, struct gl_engine_stats *out);
// The pool, for audits in tests.
struct gl_kv_pool *gl_engine_kv_pool(struct gl_engine *e);
// GL_SPEC_DFLASH: the drafter context pool (NULL without a drafter), for the same audits.
struct gl_kv_pool *gl_engine_dflash_kv_pool(struct gl_engine *e);
// Bytes of the engine's device buffers, device-local (host 0) or host-visible (host 1), as
// asked for (0 on the CPU): what `glint plan --device` predicts.
uint64_t gl_engine_device_bytes(const struct gl_engine *e, int host);

// ---- stop strings (also for callers that cut text themselves, e.g. the server's chat answer) --
// Byte-exact, no normalization (as vLLM); only sp->stop[0..n_stop) is read (NUL-terminated;
// empty or NULL entries, which gl_sample_params_check refuses, are ignored). Streaming use: append
// each new piece of text to a held buffer; if gl_stop_match finds a stop string, the output ends at
// *at (plus the stop string if include_stop_str_in_output); otherwise release held[0 .. n -
// gl_stop_holdback(...)) and keep the rest, so a match across piece boundaries is cut before any of
// its bytes was released.
//
// Longest suffix of held[0..n) that is a proper prefix of one of sp's stop strings: text that
// must wait for the next piece before it can be released. 0 when n_stop == 0.
size_t gl_stop_holdback(const struct gl_sample_params *sp, const char *held, size_t n);
// Index of the stop string that occurs earliest in held[0..n) (ties: the longer one), *at its
// byte offset; -1 if none occurs (*at unchanged then).
int32_t gl_stop_match(const struct gl_sample_params *sp, const char *held, size_t n, size_t *at);
