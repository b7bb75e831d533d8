// SPDX-License-Identifier: MIT
// match (internal to src/grammar/): the byte-level recogniser that runs a struct gl_gir. Its
// state is the set of live parse threads (each a stack of frames: SEQ position, REPEAT count,
// string/number/object/array progress), deduplicated, so ambiguity (anyOf, GBNF alternatives)
// costs one thread per live reading and nothing more.
//
// The contract the mask (mask.c) and the public matcher (grammar.c) rely on:
//  - Viability: a state is alive only if SOME continuation reaches a complete document. Every
//    byte the recogniser accepts keeps it alive, so a token mask built from accepted bytes never
//    leads into a dead end (xgrammar #831). Where exact viability is not computed, the language
//    is restricted instead (documented at the node) -- never the other way round.
//  - can_end: the bytes so far are a complete document (stop tokens may be allowed).
//  - Tokens: GN_TOKEN positions accept exactly that token id via gl_mstate_advance_token; the
//    bytes of a special token never match anything else.
//  - States are plain values: copying one (gl_mstate_copy) is the snapshot used for rollback and
//    for the depth-first walk of the token trie, so it must be cheap (no pointers into
//    per-state heap memory other than the state's own buffer).
//
// Fast path for the mask: when every live thread sits inside a JSON string body whose only
// constraint is a character budget (no regex), gl_mstate_string_fast reports it, and the mask
// ORs a precomputed vocabulary class instead of walking the trie for those tokens.
#pragma once

#include "grammar/ir.h"

#include <stddef.h>
#include <stdint.h>

struct gl_mstate; // opaque; allocated by gl_mstate_new, sized for the grammar

// limits: max threads and max stack depth; exceeding them at run time makes the byte rejected
// (the state stays alive and unchanged) and sets a sticky flag that gl_mstate_overflowed reports.
struct gl_mlimits {
    int32_t max_threads; // default 1024 (anyOf-heavy schemas keep hundreds of readings alive)
    int32_t max_depth;   // default 128
};

GL_MUST_USE gl_status gl_mstate_new(struct gl_mstate **out, const struct gl_gir *ir,
                                    const struct gl_mlimits *lim, struct gl_err *err);
void gl_mstate_free(struct gl_mstate *s);  // NULL-safe
void gl_mstate_reset(struct gl_mstate *s); // start state (root, nothing read)
void gl_mstate_copy(struct gl_mstate *dst, const struct gl_mstate *src); // same grammar

// 1: byte accepted, state advanced (and still viable); 0: rejected, state UNCHANGED.
int gl_mstate_advance_byte(struct gl_mstate *s, uint8_t b);
// Same for a token-level literal (GN_TOKEN); 0 if no live thread expects exactly this id.
int gl_mstate_advance_token(struct gl_mstate *s, int32_t token_id);
// Token ids that some live thread accepts next as a GN_TOKEN; returns count (<= cap written).
int gl_mstate_expected_tokens(const struct gl_mstate *s, int32_t *ids, int cap);
int gl_mstate_can_end(const struct gl_mstate *s);
int gl_mstate_is_dead(const struct gl_mstate *s); // no live thread (only after reset on a
                                                  // grammar whose language is empty)
// 64-bit hash of the full state (equal states hash equal), for the mask cache.
uint64_t gl_mstate_hash(const struct gl_mstate *s);
int gl_mstate_equal(const struct gl_mstate *a, const struct gl_mstate *b);
int gl_mstate_overflowed(const struct gl_mstate *s);

// The string fast path. Returns 1 when ALL live threads are inside the body of a JSON string
// (or of an object key where any key may still follow) with no regex constraint and at a UTF-8
// boundary (not after a backslash or inside a multi-byte sequence); then *min_more / *max_more are
// the code points still required / allowed before the closing quote (max_more < 0: unbounded), the
// same for all threads (else 0 is returned). In that state any run of "plain" characters (not '"',
// not '\\', not < 0x20, valid UTF-8) of n code points with n <= max_more is accepted (a key's
// decoded-prefix range and hash change too, which the mask does not need).
int gl_mstate_string_fast(const struct gl_mstate *s, int32_t *min_more, int32_t *max_more);
// The string-body key: when s is one thread whose top frame is the body of a (non-raw) JSON
// string, every byte other than '"' only changes that frame (a '"' is the only way out of the
// body), so which quote-free tokens s accepts is a function of the frame alone. Writes the frame's
// value (node, counters, decoder and DFA states; not its position) to key and returns its length
// (<= cap); 0 when s is not such a state.
size_t gl_mstate_string_key(const struct gl_mstate *s, uint8_t *key, size_t cap);
// For such a state at a UTF-8 boundary: 1 when every run of plain characters (as in
// gl_mstate_string_fast) of at most *max_more code points (< 0: unbounded) is accepted and no
// longer one is. Holds for a string without maxLength whose regexes never die or lose viability
// on plain text (a search `pattern` before or after its match), and for a bounded one whose
// regexes stay in their DFA state on every plain character. Costs up to a few hundred thousand
// DFA steps: call it once per cached frame.
int gl_mstate_string_loops(const struct gl_mstate *s, int32_t *max_more);
