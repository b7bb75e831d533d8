// SPDX-License-Identifier: MIT
// grammar IR (internal to src/grammar/): every constraint kind (JSON Schema, JSON object, regex,
// choice, GBNF, the ATEM tool-call grammar) compiles to one immutable graph of nodes, and one
// byte-level matcher (match.c) runs it. Nodes live in a flat array and refer to each other by
// index, so recursion ($ref cycles, recursive GBNF rules) is just a cycle in the graph.
//
// Generic nodes (EMPTY..REPEAT, TOKEN) give a context-free grammar over bytes. The JSON nodes
// (WS, JSTRING, JNUMBER, JOBJECT, JARRAY) are JSON values that check their schema while they are
// read: strings are matched on their DECODED content (escape-equivalence: "\u0061" is "a"),
// object keys in any order without duplicates, numbers against exact ranges. They exist because
// those constraints have no compact CFG (key permutations, numeric ranges) and because their
// hot states (inside a string) have a vocabulary-wide fast path in the mask.
//
// Ownership: a struct gl_gir and everything it points to is one arena owned by the grammar;
// strings are byte strings with explicit lengths (may contain NUL).
// Invariants after gl_gir_validate: every index is in range, no left recursion (a cycle reachable
// without consuming a byte), root valid.
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

enum gl_gnode_kind {
    GN_EMPTY,   // matches the empty string
    GN_BYTES,   // literal bytes u.bytes
    GN_REGEX,   // bytes fully matched by regex u.regex.re (raw bytes, not JSON-decoded)
    GN_TOKEN,   // one token by id (u.token.id): only that token, never its text spelled in bytes
    GN_SEQ,     // u.list.kids in order
    GN_ALT,     // exactly one of u.list.kids (ambiguity allowed: the matcher tracks all)
    GN_REPEAT,  // u.rep.kid repeated min..max times (max < 0: unbounded), optional separator
    GN_WS,      // JSON whitespace run [ \t\n\r], 0..grammar ws_max bytes (ws_max 0: matches "")
    GN_JSTRING, // one JSON string literal "..." whose decoded value satisfies u.str
    GN_JNUMBER, // one JSON number satisfying u.num; never directly followed by a number byte
                // (0-9 + - . e E): JSON ends a value with whitespace or punctuation, and the
                // mask's number walk (gl_mstate_nframes) relies on it
    GN_JOBJECT, // one JSON object satisfying u.obj (whitespace inside: bounded GN_WS semantics)
    GN_JARRAY,  // one JSON array satisfying u.arr (whitespace inside: bounded GN_WS semantics)
    // Free text: any run of bytes, possibly empty, of any values (no UTF-8 check: tokens split
    // characters), so any run of non-special tokens. Its frame never changes; while a thread sits
    // in it every token is allowed (the mask's fast path in mask.c).
    GN_ANYBYTES,
};

struct gl_gbytes {
    const uint8_t *p;
    uint32_t len;
};

// Decoded string value constraint. All regexes must fully match the decoded UTF-8 value (so
// `pattern` search semantics are compiled into the regex by the schema compiler). Lengths count
// Unicode code points, as JSON Schema does.
struct gl_gstr {
    const int32_t *regexes; // indices into gir.regexes, all must match; n_regex 0 = any string
    int32_t n_regex;
    int32_t min_chars; // >= 0
    int32_t max_chars; // < 0: unbounded
    uint8_t raw;       // 1: no quotes and no escapes: the value is raw bytes that never contain '<'
                       // (ATEM tool-call parameter values, which end at "</atem:parameter>")
    // 1: the string is an item of a uniqueItems array (the GN_JARRAY frame directly below its
    // frame, u.arr.unique): its closing quote is refused when the decoded value equals an earlier
    // item. Only where every prefix keeps a completion no earlier item takes: no maxLength and
    // no regex or one whose every state has infinitely many completions (schema.c), or names
    // set (then a prefix is viable iff a name not yet an item extends it).
    uint8_t uniq;
    // The language exactly, when it is a finite set of values (an enum of strings): sorted by
    // bytes (memcmp order, a prefix first), distinct. NULL otherwise.
    const struct gl_gbytes *names;
    int32_t n_names;
};

struct gl_gnum {
    uint8_t integer; // 1: only integers, spelled -?(0|[1-9][0-9]*) (no fraction, no exponent)
    uint8_t has_min, has_max;
    uint8_t excl_min, excl_max; // exclusive bounds
    double min, max;            // when integer, bounds are exact integers within +-2^53
    // Decimal grid (multipleOf mult_a / 10^mult_s on a bounded non-integer number; mult_a 0:
    // none): the value is N / 10^mult_s with mult_a | N, so fraction digits past mult_s are 0.
    // The scaled value N stays below 10^GL_GNUM_GRID_DIGITS (a narrowing: larger numbers are
    // refused), so that it fits a uint64_t.
    uint32_t mult_a;
    uint8_t mult_s; // <= GL_GNUM_GRID_MAX_SCALE
};
#define GL_GNUM_GRID_DIGITS    19
#define GL_GNUM_GRID_MAX_SCALE 6

struct gl_gprop {
    struct gl_gbytes name; // decoded key bytes (UTF-8)
    int32_t value;         // node of the value
    uint8_t required;
};
struct gl_gpattern_prop {
    int32_t re;    // regex (search semantics already compiled in) over the decoded key
    int32_t value; // node the value must match
};
struct gl_gobj {
    const struct gl_gprop *props; // sorted by name bytes (memcmp order, prefix first), unique
    int32_t n_props;
    const struct gl_gpattern_prop *patterns;
    int32_t n_patterns;
    int32_t additional;   // node for keys matching neither a prop nor a pattern; -1: forbidden
    int32_t min_props;    // >= 0
    int32_t max_props;    // < 0: unbounded
    const int32_t *order; // when non-NULL: props must appear in this order (indices into
                          // props; declaration order), the opt-in "schema order" mode
};

struct gl_garr {
    const int32_t *prefix; // prefixItems nodes
    int32_t n_prefix;
    int32_t items;     // node for items after the prefix; -1: no more items allowed
    int32_t min_items; // >= 0
    int32_t max_items; // < 0: unbounded
    // uniqueItems: no prefix, and items is a GN_JSTRING with uniq set; the frame keeps the hash
    // of each item read (match.c).
    uint8_t unique;
};

struct gl_gnode {
    enum gl_gnode_kind kind;
    union {
        struct gl_gbytes bytes;
        struct {
            int32_t re;
        } regex;
        struct {
            int32_t id;
        } token;
        struct {
            const int32_t *kids;
            int32_t n;
        } list;
        struct {
            int32_t kid;
            int32_t sep; // node between repetitions, -1: none
            int32_t min, max;
        } rep;
        struct gl_gstr str;
        struct gl_gnum num;
        struct gl_gobj obj;
        struct gl_garr arr;
    } u;
};

struct gl_regex; // src/grammar/regex.h

struct gl_gir {
    struct gl_gnode *nodes;
    int32_t n_nodes;
    int32_t root;
    struct gl_regex **regexes; // owned
    int32_t n_regexes;
    int32_t ws_max; // bytes per whitespace run for GN_WS and inside JOBJECT/JARRAY; 0 = compact
    struct gl_arena *arena; // owns nodes, lists, strings
};

// ---- building (used by the front ends: schema.c, gbnf.c, frontends.c) ----
// A bump allocator whose memory is freed at once; allocation failure returns NULL.
struct gl_arena;
struct gl_arena *gl_arena_new(void);
void gl_arena_free(struct gl_arena *a);             // NULL-safe
void *gl_arena_alloc(struct gl_arena *a, size_t n); // zeroed, 16-byte aligned
uint8_t *gl_arena_memdup(struct gl_arena *a, const void *p, size_t n);

// Builder: append nodes, returns the node index or -1 (GL_E_LIMIT / GL_E_NOMEM in err) when the
// node budget (max_nodes) is exceeded. Lists passed in are copied into the arena.
struct gl_gir_builder {
    struct gl_gir *ir;
    int32_t cap_nodes, cap_regexes;
    int32_t max_nodes; // budget; exceeding it is GL_E_LIMIT "grammar: more than N nodes"
    struct gl_err *err;
};
GL_MUST_USE gl_status gl_gir_builder_init(struct gl_gir_builder *b, struct gl_gir *ir,
                                          int32_t max_nodes, struct gl_err *err);
int32_t gl_gir_add(struct gl_gir_builder *b, const struct gl_gnode *n); // copies *n (shallow)
int32_t gl_gir_add_bytes(struct gl_gir_builder *b, const void *p, size_t len);
int32_t gl_gir_add_list(struct gl_gir_builder *b, enum gl_gnode_kind k, const int32_t *kids,
                        int32_t n); // GN_SEQ / GN_ALT
// Reserve a node to fill later (for recursion: refer to it before it is built); then set it.
int32_t gl_gir_reserve(struct gl_gir_builder *b);
void gl_gir_set(struct gl_gir_builder *b, int32_t idx, const struct gl_gnode *n);
// Takes ownership of re (freed with the IR even on failure); returns its regex index or -1.
int32_t gl_gir_add_regex(struct gl_gir_builder *b, struct gl_regex *re);

// Checks the invariants listed above; GL_E_INVAL "grammar: left recursion through node N" etc.
GL_MUST_USE gl_status gl_gir_validate(const struct gl_gir *ir, struct gl_err *err);
void gl_gir_free(struct gl_gir *ir); // frees regexes and the arena; NULL-safe; zeroes *ir
