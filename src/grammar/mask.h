// SPDX-License-Identifier: MIT
// mask (internal to src/grammar/): token masks for a match state over one vocabulary index.
// The vocabulary is a byte trie laid out in depth-first order (each subtree is one contiguous run
// of nodes, so a rejected byte skips the whole subtree); the walk advances copies of the state
// one byte per node and skips, without stepping, every child outside the state's next-byte set
// (gl_mstate_next_bytes). Masks are cached per grammar by match state (LRU, bounded).
// When every thread sits inside a string or key body (gl_mstate_sframes), a quote-free token
// only moves a thread's top frame, so that part of the mask is the union of per-frame parts,
// cached by frame value and computed by walking the frame alone: plain tokens by character count
// for a free body (or a regex body that takes any plain run, gl_mstate_sframe_universal); else
// the class walk (a trie of the tokens' byte-class strings, shared by all grammars per
// partition, with the resulting masks cached by accepted class strings) when the frame accepts
// much, or the exact walk. Quote tokens are split at their first quote: the prefixes the frame
// may end after, times the suffixes the state after the quote takes (per set of threads that end,
// for several string threads). Stop tokens are the matcher's business (grammar.c): gl_mask_fill
// never sets a stop bit by itself, and never sets a special token unless the state expects it as
// a GN_TOKEN literal.
#pragma once

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/match.h"
#include "grammar/shortest.h"

#include <stdint.h>

#define GL_MASK_CACHE_DEFAULT 256 // masks per grammar (<= 25 KB each at 202,048 tokens)
// Only masks whose walk visited at least this many trie nodes are cached by default: a cheaper
// walk costs about as much as storing its result (MaskBench states rarely repeat exactly).
#define GL_MASK_CACHE_MIN_NODES 256

struct gl_mcache; // per-grammar mask cache + trie-walk scratch states (mask.c)

// The compiled grammar (shared by grammar.c and mask.c). Immutable after compile except for the
// mask cache, which is why a grammar is used by one thread at a time (grammar.h).
struct gl_grammar {
    int32_t refs;
    int32_t kind; // enum gl_grammar_kind, or GL_GRAMMAR__ATEM_TOOLS
    struct gl_grammar_opts opts;
    struct gl_gir ir;
    char *warnings; // never NULL after compile ("" when none)
    uint64_t hash;
    char *key; // canonical source (see grammar.c), key_len bytes; compared on cache hits
    size_t key_len;
    struct gl_mcache *mcache; // created by the first mask
    int32_t mcache_cap;       // entries; 0 disables the mask cache
    int32_t mcache_min_nodes; // only masks whose walk visited at least this many nodes are kept
    // What g holds (gl_grammar_bytes): armed by every grammar call on g (gl_alloc_meter), so all
    // of the above that is allocated after compile start is charged as it grows.
    struct gl_alloc_meter mem;

    // shortest.c tables (grammar.c: upper, tokens, bytes), built on first use, and the
    // vocabulary they were last measured against (grammar.c vocab_scan)
    struct gl_short *shortest[3];
    const struct gl_gvocab *sv;
    int32_t sv_max_bytes;
    int sv_all_bytes;
};
#define GL_GRAMMAR__ATEM_TOOLS 100

// The class walk of string bodies (mask.c): frames whose exact walk could visit more than
// exact_max_nodes trie nodes use the class trie of their byte partition, which is built once
// exact walks of that partition have visited rent_nodes nodes. -1 restores a default. Process-
// wide; for tests (0, 0: the class walk wherever it applies), set before masks are computed.
void gl_mask_set_class_policy(int64_t exact_max_nodes, int64_t rent_nodes);
// Mask cache size for g (entries); 0 turns caching off; masks are kept only when their walk
// visited >= min_nodes trie nodes. Drops the cached masks.
void gl_mask_set_cache(struct gl_grammar *g, int entries, int min_nodes);
void gl_mask_cache_free(struct gl_mcache *c); // NULL-safe
// Creates g's cache and the walk's per-depth states for v (once per grammar and vocabulary);
// gl_matcher_new calls it so that gl_mask_fill never needs to allocate to be correct.
GL_MUST_USE gl_status gl_mask_prepare(struct gl_grammar *g, const struct gl_gvocab *v,
                                      struct gl_err *err);

// The state-dependent part of the mask of state s (mask: gl_gvocab_mask_words words, fully
// written): every non-special token whose bytes s accepts, plus the GN_TOKEN ids s expects.
// Stop tokens are not handled here. Uses and fills g's cache; counts into st (may be NULL).
void gl_mask_fill(struct gl_grammar *g, const struct gl_gvocab *v, const struct gl_mstate *s,
                  uint32_t *mask, struct gl_matcher_stats *st);
// The reference for tests: every token tried byte by byte on a copy of s (scratch: any state of
// the same grammar). Same contract as gl_mask_fill; slow (the whole vocabulary).
void gl_mask_fill_ref(const struct gl_gvocab *v, const struct gl_mstate *s,
                      struct gl_mstate *scratch, uint32_t *mask);

// Calls fn(user, id, after) for every token id set in `in` that is matched by bytes (not
// excluded) and whose bytes s accepts, with `after` the state after its last byte (valid only
// during the call). One walk of v's trie with g's per-depth scratch states: a prefix shared by
// many tokens is stepped once (shortest.c's finish-within filter, which otherwise stepped every
// allowed token from s). gl_mask_prepare must have run for (g, v).
typedef void (*gl_mask_token_fn)(void *user, int32_t id, const struct gl_mstate *after);
void gl_mask_each_token(struct gl_grammar *g, const struct gl_gvocab *v, const struct gl_mstate *s,
                        const uint32_t *in, gl_mask_token_fn fn, void *user);

// 1 for tokens that are never matched by bytes: specials (incl. every id >= 200000) and tokens
// with no bytes.
int gl_gvocab_is_excluded(const struct gl_gvocab *v, int32_t id);
// Bytes of token id (NULL with *len 0 for ids out of range).
const uint8_t *gl_gvocab_token(const struct gl_gvocab *v, int32_t id, size_t *len);
// Sizes of the index, for tests and reports: trie nodes, tokens outside the plain classes.
void gl_gvocab_sizes(const struct gl_gvocab *v, int64_t *trie_nodes, int64_t *slow_tokens,
                     int64_t *slow_nodes);
