// SPDX-License-Identifier: MIT
// regex (internal to src/grammar/): regular expressions compiled to a lazily built byte-level
// DFA. Used for JSON Schema `pattern` and `format`, the `regex` constraint kind, GBNF character
// classes, and object keys under patternProperties.
//
// Dialect: ECMA-262 as JSON Schema uses it, over Unicode code points: literals and escapes
// (\n \t \r \f \v \0 \xHH \uHHHH \u{H..} \/ and escaped punctuation), `.` (any code point except
// \n \r U+2028 U+2029), classes [...] with ranges and negation, \d \D \w \W \s \S (ECMA
// meanings, \s includes the Unicode spaces), groups (...) (?:...) and named (?<n>...) (no
// capture semantics needed), alternation, * + ? {n} {n,} {n,m} and their lazy forms (same
// language), anchors ^ $ anywhere (also per branch, `^a|b$`). Lookahead (?=..) (?!..) only at
// the start of an anchored pattern (or of any pattern in full-match mode; then the DFA is built
// whole at compile time), and a positive lookahead at the end in search mode. \p{..}: L, Z, Zs,
// Zl, Zp, N, Nd, Nl, No (long names, `gc=`), Unicode 14 tables like PCRE2 10.42. Unsupported
// (GL_E_UNSUPPORTED naming the construct and its byte offset): backreferences, other lookaround,
// \b \B, \p{Lu/Ll/Lt/Lm/Lo/P/S}, flags. Surrogate code points (\u{D800}) match nothing.
// Budgets: NFA size, group nesting (200), repeat counts (<= 100,000), DFA states and DFA build
// work (max_states x 1024 steps) -- GL_E_LIMIT with the offset.
//
// Matching is on UTF-8 bytes: code-point sets compile to byte sequences, so the DFA never
// accepts a byte string that is not valid UTF-8 (when compiled from a Unicode pattern).
// GL_RE_SEARCH gives JSON Schema `pattern` semantics (the pattern may match anywhere: the
// compiled language is .*(?:p).* unless ^/$ anchor it); without it the whole input must match.
//
// Ownership: a gl_regex owns its NFA and its DFA cache. The DFA is built lazily on step(); state
// ids are stable for the life of the regex. NOT thread-safe while the cache grows: one grammar is
// used by one matcher thread at a time, or gl_regex_build_all() first (then read-only).
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

enum {
    GL_RE_SEARCH = 1,  // unanchored search semantics (JSON Schema `pattern`)
    GL_RE_LITERAL = 2, // the source is a literal byte string, not a pattern
    // The complement: matches exactly the byte strings the pattern (with the other flags) does
    // not (JSON Schema `not: {pattern}`). The DFA is built whole at compile time (GL_E_LIMIT past
    // the state budget, GL_E_UNSUPPORTED with lookaheads), states from which every continuation
    // matched the pattern become the dead state, and the pattern's dead state a state that takes
    // everything. gl_regex_min_chars counts bytes there (at least the code points: a bound that
    // only narrows maxLength), and gl_regex_takes_any answers 0.
    GL_RE_NEGATE = 4,
};

struct gl_regex;

#define GL_RE_DEAD 0 // the dead state: no continuation can ever match

// Compiles src[0..len). max_states bounds the DFA (and the NFA size) so hostile patterns fail
// with GL_E_LIMIT instead of exhausting memory; 0 = default (65536).
GL_MUST_USE gl_status gl_regex_compile(struct gl_regex **out, const char *src, size_t len,
                                       int flags, int32_t max_states, struct gl_err *err);
void gl_regex_free(struct gl_regex *re); // NULL-safe

uint32_t gl_regex_start(struct gl_regex *re);
// Next state after byte b; GL_RE_DEAD once nothing can match. May grow the DFA; if the state
// budget is exhausted at match time, returns GL_RE_DEAD and sets a sticky overflow flag.
uint32_t gl_regex_step(struct gl_regex *re, uint32_t state, uint8_t b);
// The DFA's transition table as it stands, for stepping inline in hot loops: the next state of
// s on byte b is trans[s * ncls + cls[b]], or GL_RE_UNFILLED where not built yet -- then call
// gl_regex_step, which may move the table (take the view again).
#define GL_RE_UNFILLED UINT32_MAX
struct gl_regex_view {
    const uint32_t *trans;
    const uint8_t *cls;
    uint32_t ncls;
};
void gl_regex_view(const struct gl_regex *re, struct gl_regex_view *v);
// 1 when the pattern has lookaheads. Without them every state but GL_RE_DEAD has
// gl_regex_min_chars >= 0 (a DFA state holds only NFA states that reach a match).
int gl_regex_has_lookahead(const struct gl_regex *re);
// gl_regex_step and gl_regex_min_chars of the result in one call (the string walks' hot path).
uint32_t gl_regex_step_mc(struct gl_regex *re, uint32_t state, uint8_t b, int32_t *min_chars);
int gl_regex_is_accept(struct gl_regex *re, uint32_t state);
// Fewest further code points STARTED before an accepting state (0 if accepting, and also inside
// the last multi-byte character of a match); -1 if none (dead).
int32_t gl_regex_min_chars(struct gl_regex *re, uint32_t state);
// 1 if accepting states can be reached with arbitrarily many more code points (a cycle).
int gl_regex_unbounded(struct gl_regex *re, uint32_t state);
// 1 when state holds one of the search wrapper's any-code-point loops (and the pattern has no
// lookahead): then every valid UTF-8 byte string read from it, also one stopping inside a
// character, leads to a state from which a match is reachable. 0: not known to.
int gl_regex_takes_any(const struct gl_regex *re, uint32_t state);
// A byte the caller may keep per DFA state (0 when the state is made; never read by the regex):
// match.c memoizes an analysis of the state there. Same threading rule as step().
uint8_t gl_regex_tag(const struct gl_regex *re, uint32_t state);
void gl_regex_set_tag(struct gl_regex *re, uint32_t state, uint8_t tag);
// Whole-string match (for tests and final checks).
int gl_regex_match(struct gl_regex *re, const void *s, size_t len);
int gl_regex_overflowed(const struct gl_regex *re);
// A number no other regex of this process had or will have (memo keys outlive a pointer).
uint64_t gl_regex_serial(const struct gl_regex *re);
// What decides DFA state `state` across regexes: two regexes compiled from the same source and
// flags (fp, two 64-bit hashes of them) whose states have the same NFA set (*set, *n entries,
// sorted; pointers into re, valid until its DFA grows) and accept mask (*amask) behave alike from
// there on, whatever order their lazy DFAs grew in. 0 when not available (negated or lookahead
// regexes, a state not built). Read-only; the same threading rule as step().
int gl_regex_state_canon(const struct gl_regex *re, uint32_t state, uint64_t fp[2],
                         const uint32_t **set, uint32_t *n, uint32_t *amask);
// The byte classes (256 entries): bytes in one class take the same transition from every DFA
// state, so they are interchangeable for this regex (fixed at compile time). *ncls: the class
// count; *rep: a byte of each class (either may be NULL).
const uint8_t *gl_regex_classes(const struct gl_regex *re, uint32_t *ncls, const uint8_t **rep);
// 1 when building n more DFA states (and their transitions) would still leave half of the state
// and work budgets: speculative exploration must not spend the budget matching needs.
int gl_regex_room(const struct gl_regex *re, uint32_t n);
// Eagerly builds every reachable state (bounded by max_states); GL_E_LIMIT if it does not fit.
GL_MUST_USE gl_status gl_regex_build_all(struct gl_regex *re, struct gl_err *err);

// Appends to out (cap bytes, NUL-terminated) the pattern that matches exactly the given byte
// string (escaping metacharacters); returns the length needed (like snprintf).
size_t gl_regex_escape(const void *lit, size_t len, char *out, size_t cap);
