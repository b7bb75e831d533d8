// SPDX-License-Identifier: MIT
// shortest (internal to src/grammar/): the shortest completion of a match state -- the fewest
// units that take it to a complete document -- for the reasoning budget and
// finish_within_max_tokens (grammar.h gl_matcher_shortest, gl_matcher_fill_mask_within).
//
// Units: a byte costs w_byte, a token literal (GN_TOKEN) w_token. Per IR node a table holds the
// fewest units of any string the node matches (a least fixed point over the graph, so recursion
// is fine); a state's value is the minimum over its live threads of the rest of the top frame
// (from its progress: bytes of a literal left, the string, number, key or DFA state read so far)
// plus, for each frame below, what its node still needs once the frame above it completes.
// Strings with regexes or length bounds and regex nodes are searched (A* over the frame or the
// DFA state, with the regexes' code-point minima as the admissible estimate); bounded numbers
// by the decimal grid of each (integer digits, fraction digits) split, checked by the matcher's
// own final test.
// Inside an object key's escape the key's character is still open, so the whole state is stepped
// through each way of ending the escape with one printable ASCII character (esc_rest), and the
// value is the cheapest such ending plus the rest after it.
// Exact (what the brute-force test checks) for every node kind and state except these, where
// the value is an upper bound (a completion that long exists): objects that need members beyond
// their required ones (minProperties: extra keys are costed as one-byte keys), keys that must
// still match a pattern, and a key escape whose cheapest ending is not printable ASCII. A search
// that exceeds its budget (GL_SHORT_SEARCH_MAX states, or a regex with no DFA room left) gives
// GL_SHORT_INF for that thread, never a lower value.
// Threads: one gl_short is used by one thread at a time (it steps regexes, as matching does).
#pragma once

#include "grammar/ir.h"
#include "grammar/match.h"

#include <stdint.h>

#define GL_SHORT_INF        (INT64_MAX / 4) // cannot complete (or a search gave up)
#define GL_SHORT_SEARCH_MAX 8192            // states per search

struct gl_short;
// Tables for ir under the given unit weights (>= 0). The IR must outlive it.
GL_MUST_USE gl_status gl_short_new(struct gl_short **out, const struct gl_gir *ir, int64_t w_byte,
                                   int64_t w_token, struct gl_err *err);
void gl_short_free(struct gl_short *sh); // NULL-safe
// Fewest units of a string node matches (GL_SHORT_INF: none).
int64_t gl_short_node(const struct gl_short *sh, int32_t node);
// Fewest units from s (a state of the same IR) to a complete document; 0 when it is complete.
int64_t gl_short_state(struct gl_short *sh, const struct gl_mstate *s);

struct gl_gvocab;
// Keeps in mask (the allowed tokens of state s, stop tokens included) only the tokens after which
// s can still complete within budget units; a stop token ends the document and is always kept.
// When none fits (a budget short from the start), keeps those whose completion is shortest, so
// the mask is never emptied. tmp: a scratch state of the same grammar; stop: the matcher's stop
// ids. Plain tokens are judged without stepping where the state makes their cost plain: in free
// text (the thread stays where it is) and inside free JSON string values (the cost moves by the
// bytes a split character still owes and the characters a minLength still needs); where every
// plain token fits, only the non-plain tokens (excluded, or with '"', '\\' or a control byte;
// listed once per vocabulary) and the stop tokens are judged.
// Where every token must be stepped (keys, numbers, grammars other than JSON), the tokens s
// accepts by bytes are stepped in one walk of the vocabulary's trie with g's scratch states
// (mask.h gl_mask_each_token; g NULL: one by one from s).
struct gl_grammar;
void gl_short_filter(struct gl_grammar *g, struct gl_short *sh, const struct gl_gvocab *v,
                     const struct gl_mstate *s, struct gl_mstate *tmp, uint32_t *mask,
                     int64_t budget, const int32_t *stop, int n_stop);
// Tests: 1 makes gl_short_filter judge every token one by one from s (the reference the walk
// must equal), 0 restores the walk. Process-wide; set it between masks.
void gl_short_filter_reference(int on);
