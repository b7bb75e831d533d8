// SPDX-License-Identifier: MIT
// kv: the paged KV cache shared by all sequences of an engine, shaped for Muse Glimmer's hybrid
// attention (vLLM's hybrid allocator idea). Layers are split into GROUPS of equal size g, each
// group all-sliding or all-global (g = gcd(n_sliding, n_global); the release: 39 sliding + 13
// global -> 4 groups of 13). A PAGE holds block_size positions of K and V for the g layers of
// one group, so every page has the same byte size and one free list serves all groups (one per
// side of a split pool, partial offload: gl_kv_pool_dev_bytes):
//   page = [layer in group g][K|V][position in block][Hkv][D] elements of `dtype`
//          (+ fp8: then [layer in group][K|V][position in block] one bf16 scale per row -- see
//           kv.c for why; the page is padded to 64 bytes).
// Each sequence has one block table per group. Global groups keep every block; sliding groups
// release a block (at commit) as soon as all its positions are older than the window: the next
// query at position len sees keys len-window+1..len (arch doc §2.3: 2048 keys incl. itself), so
// block b goes once (b+1)*bs <= len-window+1, and a decoding sequence's sliding group holds at
// most ceil((window-1)/bs)+1 blocks (129 for 2048/16). A prefill chunk of n tokens holds the
// blocks of its window-1+n positions until it is committed.
//
// Prefix caching: a FULL block of the prompt is keyed by h_i = H(h_{i-1}, tokens of block i)
// (64-bit SipHash-2-4 under a random per-process key, chained, so equal keys mean equal whole
// prefixes and clients cannot craft a collision: docs/SECURITY.md). Released or finished
// blocks stay keyed in an LRU of evictable pages until reused. A hit of k blocks is usable only
// if every global group has blocks 0..k-1 cached and every sliding group has the blocks covering
// positions k*bs-window+1..k*bs-1 (what the query at k*bs reads); the match is shortened until
// that holds.
//
// Ownership: the pool owns one aligned allocation (budget bytes, rounded down to pages) and all
// metadata; sequences are handles into it. Errors: GL_E_LIMIT when the pool cannot supply the
// pages a call needs (nothing is changed then: the caller preempts), GL_E_INVAL for bad params.
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include "base/base.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

// enum gl_kv_dtype lives in model/model.h (the view attention reads carries it).
const char *gl_kv_dtype_name(enum gl_kv_dtype t);
// "auto" (= f16, the default) | "f32" | "f16" | "bf16" | "fp8" | "fp8_e4m3" (vLLM spelling);
// GL_E_INVAL naming the text.
GL_MUST_USE gl_status gl_kv_dtype_parse(const char *s, enum gl_kv_dtype *out, struct gl_err *err);

struct gl_kv_params {
    int64_t budget_bytes; // pool memory (vLLM --kv-cache-memory)
    int32_t block_size;   // positions per page; default 16
    enum gl_kv_dtype dtype;
    int32_t prefix_cache; // 1: key full prompt blocks and reuse them
    // Partial offload (--n-gpu-layers): the last n_dev_layers layers run on the device. With
    // 0 < n_dev_layers < n_layer the pool is split in two sides (see gl_kv_pool_dev_bytes);
    // 0 or >= n_layer: one side, as without a device.
    int32_t n_dev_layers;
    // Split pool only: the device side's pages when > 0 (sized from the device heap, the rest of
    // budget_bytes the host side's: gl_kv_fit.n_dev_pages), kept to at least one page per group
    // on each side; 0: the device groups' proportional share of the pages.
    int64_t dev_pages;
};

// Sizing from the config alone (works on a header-only GGUF): page size, pages in the budget,
// pages one sequence of n_tok positions needs, capacity in tokens and concurrency at max_len.
struct gl_kv_plan {
    int32_t n_groups, group_size, n_sliding_groups, n_global_groups;
    size_t page_bytes;
    int64_t n_pages;
    int64_t n_dev_pages;        // of n_pages, the device side's (0: no split)
    int32_t n_dev_groups;       // of n_groups, the device side's (0: no split)
    int64_t kv_capacity_tokens; // tokens of global-layer KV the pool holds (positions a single
                                // long sequence could reach, sliding pages accounted)
    double max_concurrency;     // sequences of max_model_len that fit at once
    int64_t pages_per_seq;      // at max_model_len
    int64_t dev_pages_per_seq;  // of pages_per_seq, the device side's (0: no split)
    size_t bytes_per_token_global, bytes_per_token_all; // per position, global / all layers
};
GL_MUST_USE gl_status gl_kv_plan_compute(const struct gl_model_config *cfg,
                                         const struct gl_kv_params *p, int64_t max_model_len,
                                         struct gl_kv_plan *out, struct gl_err *err);

// Default pool sizing (glint serve and glint plan without --kv-cache-memory), llama.cpp-style
// fitting: the pool takes `utilization` of the memory free after the weights, but no more than
// max_num_seqs sequences of max_model_len need (more could only hold prefix-cache pages). When
// that pool cannot hold one sequence of max_model_len and the length is not the user's,
// max_model_len is lowered to the longest that fits (vLLM refuses to start instead); a
// user-given length is kept (the engine then refuses only requests that cannot fit).
struct gl_kv_fit_in {
    int64_t mem_free;      // bytes free for the pool after the weights (base/host.h)
    double utilization;    // fraction of mem_free to take, (0, 1] (--gpu-memory-utilization)
    int64_t budget_fixed;  // > 0: the pool is this size (--kv-cache-memory); only the length fits
    int64_t max_model_len; // wanted positions per sequence
    int max_len_fixed;     // 1: max_model_len is the user's: never lowered
    int32_t max_num_seqs;  // sequences of max_model_len worth holding at once
    // Device sizing (--device vulkan, no budget_fixed): dev_sized 1 and dev_mem_free the bytes
    // the device side may take (heap x --gpu-memory-utilization minus the weights and scratch
    // there, at most the storage binding: not scaled again). Without a split (p->n_dev_layers 0
    // or all layers) the whole pool comes from it; with a split the device side's pages come
    // from it and the host side's from mem_free x utilization, each capped at max_num_seqs
    // sequences' pages of its side.
    int dev_sized;
    int64_t dev_mem_free;
};
struct gl_kv_fit {
    int64_t budget_bytes;  // whole pages
    int64_t max_model_len; // <= the wanted one
    int lowered;           // 1: max_model_len was lowered to fit the pool
    int capped;            // 1: the budget is max_num_seqs full sequences, not the free memory
    int64_t n_dev_pages;   // dev_sized split: the device side's pages (gl_kv_params.dev_pages)
};
// GL_E_LIMIT (saying how much memory is free and what one block needs) when not even one block
// of every layer group fits; GL_E_INVAL for bad parameters. p: block_size and dtype (its
// budget_bytes is ignored).
GL_MUST_USE gl_status gl_kv_fit_compute(const struct gl_model_config *cfg,
                                        const struct gl_kv_params *p, const struct gl_kv_fit_in *in,
                                        struct gl_kv_fit *out, struct gl_err *err);

struct gl_kv_pool;
struct gl_kv_seq;

GL_MUST_USE gl_status gl_kv_pool_new(struct gl_kv_pool **out, const struct gl_model_config *cfg,
                                     const struct gl_kv_params *p, struct gl_err *err);
void gl_kv_pool_free(struct gl_kv_pool *pool); // NULL-safe; all seqs must be freed first
int64_t gl_kv_pool_free_pages(const struct gl_kv_pool *pool); // free + evictable cached
int64_t gl_kv_pool_total_pages(const struct gl_kv_pool *pool);
// The pool's memory (every view's base) and its size, n_pages x page_bytes: a device backend
// mirrors it (gl_model_dev.kv_base).
const void *gl_kv_pool_base(const struct gl_kv_pool *pool);
uint64_t gl_kv_pool_bytes(const struct gl_kv_pool *pool);
// Split pool (gl_kv_params.n_dev_layers): groups never mix host and device layers (the group
// size also divides each side's sliding and global layer counts), pages 0..n_dev_pages-1 serve
// the device groups only and the rest the host groups, each side with its own free stack and
// LRU, so the device copy is pages 0..n_dev_pages-1 at the same offsets: n_dev_pages x
// page_bytes from base (the whole pool without a split). Device layers' views say n_pages =
// n_dev_pages. n_dev_pages = floor(n_pages x device groups / groups), at least one page per
// group on each side.
uint64_t gl_kv_pool_dev_bytes(const struct gl_kv_pool *pool);
// Audit: recounts every page's owner/refcount from the sequences' tables and the cache; aborts
// (GL_ASSERT) on any inconsistency. Returns pages in use by live sequences.
int64_t gl_kv_pool_audit(const struct gl_kv_pool *pool);

// A new empty sequence (no pages yet).
GL_MUST_USE gl_status gl_kv_seq_new(struct gl_kv_pool *pool, struct gl_kv_seq **out,
                                    struct gl_err *err);
void gl_kv_seq_free(struct gl_kv_seq *s); // releases every page (cached ones become evictable)
int64_t gl_kv_seq_len(const struct gl_kv_seq *s); // positions stored
// Prefix cache lookup for a new (empty) sequence: maps the longest usable cached prefix of
// tokens[0..n) (whole blocks, and never all n: at least one token is left to compute so the
// step has logits) and sets the length to it. Returns the number of positions reused.
int64_t gl_kv_seq_reuse_prefix(struct gl_kv_seq *s, const int32_t *tokens, int64_t n);
// Makes room for positions [len, len+n): allocates pages (and releases out-of-window sliding
// pages first). GL_E_LIMIT if the pool cannot supply them (state unchanged).
GL_MUST_USE gl_status gl_kv_seq_reserve(struct gl_kv_seq *s, int64_t n, struct gl_err *err);
// Pages gl_kv_seq_reserve(s, n) would newly take (for admission decisions), both sides.
int64_t gl_kv_seq_pages_needed(const struct gl_kv_seq *s, int64_t n);
// 1 when reserve(s, n) would succeed and still leave spare_per_group free pages per layer group
// on each side (speculative drafts: never preempt a later decode).
int gl_kv_seq_can_reserve(const struct gl_kv_seq *s, int64_t n, int64_t spare_per_group);
// After the forward pass wrote positions [len, len+n): advances len, keys newly full blocks of
// the prompt (tokens = the tokens at those positions) into the prefix cache.
void gl_kv_seq_commit(struct gl_kv_seq *s, const int32_t *tokens, int64_t n);
// Gives back what was reserved beyond len (speculative decoding: the positions of rejected draft
// tokens were written but never committed): pages of blocks that start at or after len return
// to the pool, and the reserved end drops to len. The block holding len stays (its committed
// positions are real). No-op when nothing is reserved beyond len.
void gl_kv_seq_trim(struct gl_kv_seq *s);
// Pages held by the sequence in group kind (sliding = 1 / global = 0), for the window test.
int64_t gl_kv_seq_pages_held(const struct gl_kv_seq *s, int sliding);

// The view attention reads and writes for one layer of one sequence (model.h struct gl_kv_view),
// covering positions [0, len + reserved). Valid until the next reserve / reuse / free of s.
struct gl_kv_view gl_kv_seq_view(const struct gl_kv_seq *s, int layer);
