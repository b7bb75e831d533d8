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
// For the mask's fast paths (mask.h): next-byte sets that prune the trie walk, the free-string
// condition (plain tokens from precomputed classes), and the string-body frames that are walked
// alone (gl_mstate_sframes and the functions after it).
#pragma once

#include "grammar/ir.h"
#include "grammar/regex.h"

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
// A superset of the bytes gl_mstate_advance_byte may accept next (bit b of set[b / 64]): the
// trie walk skips every child whose byte is outside it without stepping. Narrowed for literal
// bytes, whitespace, numbers, JSON punctuation and keys of objects with declared keys only; every
// byte elsewhere. Costs one pass over the threads (and a key's candidate names).
void gl_mstate_next_bytes(const struct gl_mstate *s, uint64_t set[4]);
// 1 when some live thread sits in a GN_ANYBYTES run: it takes every byte and stays as it is, so
// s accepts every byte string (the mask is every byte-matchable token plus the token literals).
int gl_mstate_any_bytes(const struct gl_mstate *s);
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
// The string-body walk. When every live thread's top frame is the body of a (non-raw) JSON
// string or of an object key, every byte other than '"' only changes that frame (a '"' is the
// only way out of the body), and a quote-free token is accepted iff some thread's frame accepts it.
// So the quote-free part of the mask is the union over threads of a function of each frame alone.
// gl_mstate_sframes returns the thread count in that case (when at most cap), writing each
// thread's handle to th[], else 0; th below is such a handle.
#define GL_SFRAME_MAX 512 // bytes of a frame walked alone (larger: the whole state is walked)
int gl_mstate_sframes(const struct gl_mstate *s, uint32_t *th, int cap);
// The number walk. A JSON number frame consumes only number bytes (0-9 + - . e E) and ends by
// a closure branch. When every other thread's next bytes are narrowed (gl_mstate_next_bytes)
// and hold no number byte, a token of number bytes only is accepted iff some number thread's
// frame takes it whole. Returns the number threads' count (at most cap, handles in th[]; the
// functions below, but for the string-only ones, take them), else 0.
int gl_mstate_nframes(const struct gl_mstate *s, uint32_t *th, int cap);
// Thread th's frame value as a cache key (node, counters, decoder and DFA states; not its
// position): its length (<= cap), or 0 when it does not fit.
size_t gl_mstate_string_key(const struct gl_mstate *s, uint32_t th, uint8_t *key, size_t cap);
// Copies thread th's frame to frame (cap bytes) and returns its size (0: larger than cap).
size_t gl_mstate_sframe(const struct gl_mstate *s, uint32_t th, uint64_t *frame, size_t cap);
// 1 when thread th's frame meets gl_mstate_string_fast's condition (a free string or key body at
// a character boundary); *min_more / *max_more as there.
int gl_mstate_sframe_free(const struct gl_mstate *s, uint32_t th, int32_t *min_more,
                          int32_t *max_more);
// 1 when thread th's frame is a JSON string body (not a key) without maxLength, at a character
// boundary and outside an escape, whose regexes each take every run of plain characters from
// their current states (as a search `pattern` does): then, as for a free body, every plain token
// is accepted and only the other tokens need a walk.
int gl_mstate_sframe_universal(const struct gl_mstate *s, uint32_t th);
// Steps such a frame copy on byte b != '"' exactly as its thread would: 1 accepted (frame
// updated), 0 rejected (frame contents then unspecified: step a fresh copy instead).
int gl_mstate_sframe_step(const struct gl_mstate *s, uint64_t *frame, uint8_t b);
// For a key frame (a copy as gl_mstate_sframe writes it) of an object with declared names only,
// at a character boundary outside an escape: 1, and set holds a superset of the bytes the frame
// takes next (the candidate names' next bytes, '"', '\\'). 0 for any other frame (not narrowed).
int gl_mstate_sframe_next_bytes(const struct gl_mstate *s, const uint64_t *frame, uint64_t set[4]);
// For such a key frame (gl_mstate_sframe_next_bytes 1): the rest of each declared name the key
// may still become (bytes after the decoded prefix; names it already equals are left out), at
// most cap of them into p[] / len[]; returns their count, or -1 when the frame is not such a
// key or there are more. A raw byte (not '"', '\\' or a control byte) is then accepted iff it
// continues one of them.
int gl_mstate_sframe_names(const struct gl_mstate *s, const uint64_t *frame, const uint8_t **p,
                           uint32_t *len, int cap);
// The same names for any key frame, whatever else it may take (patterns, additional keys): a
// raw byte continuing one of them is accepted. -1 for a frame that is not a key, or more than
// cap names.
int gl_mstate_sframe_key_names(const struct gl_mstate *s, const uint64_t *frame, const uint8_t **p,
                               uint32_t *len, int cap);
// For a string-value frame (not a key) outside an escape: 1 when a '"' now would end the
// string, 0 when not. -1 inside an escape (a '"' there is no end), for a key frame and for an
// item of a uniqueItems array (whose ends depend on the rest of the state: duplicates, the
// value's schema). A string value's end pops its frame, so the state after it does not depend
// on the text read.
int gl_mstate_sframe_closes(const struct gl_mstate *s, const uint64_t *frame);
// For a key frame (an object in a key, outside an escape): what a '"' now would do, as the
// thread's step decides it. 0: refused (inside a UTF-8 sequence, duplicate, out of order, over
// budget, no schema for such a key). 1: the key is declared prop *member. 2: a non-declared key
// whose value is node *member. Every key of outcome 1 and prop i leaves the same state after
// the quote; keys of outcome 2 and one node leave states that differ only in the key's hash
// appended to the object's list (gl_mstate_key_canon). -1: not such a frame.
int gl_mstate_sframe_key_close(const struct gl_mstate *s, const uint64_t *frame, int32_t *member);
// gl_mstate_sframe_key_close's outcome after the frame took the n bytes b (no '"'), without
// stepping it, for a key of an object whose non-declared keys are all allowed now and all take
// the additional schema (no pattern properties), at a character boundary outside an escape: 0
// refused (b is not whole code points a string takes raw, a duplicate, out of order, over
// budget), 1 declared prop *member, 2 a non-declared key with value node *member. -1 for any
// other frame, or when b holds an escape (step b on a copy instead). The same answers as the steps,
// without the frame copy and the generic step per byte: an open object's key quote tokens were a
// fifth of all mask time on the MaskBench set.
int gl_mstate_sframe_key_quote(const struct gl_mstate *s, const uint64_t *frame, const uint8_t *b,
                               uint32_t n, int32_t *member);
// For a one-thread state just after the closing quote of a non-declared key (outcome 2 above):
// zeroes that key's hash in the object's list, so that it stands for every such key. Only the
// closing quote of another key of this object reads the list (duplicates): bytes with fewer
// than two more quotes are accepted from it exactly as from the real state. 1 done, 0 when s is
// not such a state (one thread, an object after a key with a hash in its list).
int gl_mstate_key_canon(struct gl_mstate *s);
// A string-value frame reduced to what a byte other than '"', '\\' or a control byte changes
// (outside an escape): the UTF-8 decoder, the code-point count and the DFA states. Stepping it
// (gl_sfast_step) is exactly str_step on such bytes, without the frame's indirections: the
// string walks of the mask step it once per trie node.
#define GL_SFAST_RX 8
struct gl_sfast { // fixed for the frame's node (but for the views, which follow DFA growth)
    int32_t n_rx, max_chars, min_chars;
    int key; // a key's pattern: the key also takes its declared names (gl_mstate_sframe_key_names)
    int need_mc; // the DFA states' min_chars matter: maxLength, or a lookahead pattern
    struct gl_regex *rx[GL_SFAST_RX];
    struct gl_regex_view view[GL_SFAST_RX];
};
struct gl_sfast_st { // the part a byte changes
    uint32_t count;
    uint8_t need, lo, hi, pad;
    uint32_t re[GL_SFAST_RX];
};
// 1 when thread th's frame is a (non-raw) JSON string body outside an escape with at most
// GL_SFAST_RX regexes, or a key outside an escape under its object's one pattern property (no
// additional properties; f->key: the stepper is the pattern's, and a token is also accepted on
// the path of a declared name still possible): fills *f and *st. 0 otherwise (walk the frame).
int gl_mstate_sfast(const struct gl_mstate *s, uint32_t th, struct gl_sfast *f,
                    struct gl_sfast_st *st);
// A byte b >= 0x80 that starts a UTF-8 code point: *need continuation bytes follow, the first
// in lo..hi (which excludes overlongs, surrogates and code points above U+10FFFF). 0 for bytes
// that cannot start one (continuations, C0/C1 overlongs, F5..FF).
static inline int gl_utf8_lead(uint8_t b, uint8_t *need, uint8_t *lo, uint8_t *hi)
{
    uint8_t n, l = 0x80, h = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        n = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 2;
        if (b == 0xE0)
            l = 0xA0; // overlong
        if (b == 0xED)
            h = 0x9F; // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 3;
        if (b == 0xF0)
            l = 0x90; // overlong
        if (b == 0xF4)
            h = 0x8F; // > U+10FFFF
    } else {
        return 0; // outputs untouched
    }
    *need = n;
    *lo = l;
    *hi = h;
    return 1;
}

// Steps state from on byte b into to (which may be from): 1 accepted, 0 rejected (to then
// unspecified). '"' and '\\' are always refused (they end the body or open an escape): walk
// tokens with them on the frame itself. It is jdec_step's E_NONE case and str_feed for one byte;
// inline, since the string walks take it once per trie node. It reads from and writes to: the
// walk keeps one state per depth, and field-sized loads of what the last step stored keep the
// CPU's store-to-load forwarding (a struct copy of freshly written bytes stalls on it).
// Forced inline: with three walks calling it GCC kept one out-of-line copy, a call per trie node
// in every class and exact walk.
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
gl_sfast_step(struct gl_sfast *f, const struct gl_sfast_st *from, struct gl_sfast_st *to, uint8_t b)
{
    int lead;
    uint8_t need = from->need, lo = from->lo, hi = from->hi;
    if (need) {
        if (b < lo || b > hi)
            return 0;
        need--;
        lo = 0x80;
        hi = 0xBF;
        lead = 0;
    } else if (b < 0x80) {
        if (b < 0x20 || b == '"' || b == '\\')
            return 0; // a quote may end the string, a backslash starts an escape: not ours
        lead = 1;
    } else {
        if (!gl_utf8_lead(b, &need, &lo, &hi))
            return 0;
        lead = 1;
    }
    uint32_t count = from->count;
    if (lead) {
        if (f->max_chars >= 0 && (int64_t)count + 1 > f->max_chars)
            return 0;
        if (f->max_chars >= 0 || (int32_t)count < f->min_chars)
            count++;
    }
    for (int32_t r = 0; r < f->n_rx; r++) {
        uint32_t t;
        if (f->need_mc) {
            int32_t mc;
            t = gl_regex_step_mc(f->rx[r], from->re[r], b, &mc);
            if (mc < 0 || (f->max_chars >= 0 && (int64_t)count + mc > f->max_chars))
                return 0;
        } else {
            // No budget and no lookahead: a live state's min_chars is >= 0, so skip its load
            // (a cache miss per node in a large DFA, a third of the step), and read the table
            // inline (the call is a quarter of a class walk's node).
            const struct gl_regex_view *w = &f->view[r];
            t = w->trans[(size_t)from->re[r] * w->ncls + w->cls[b]];
            if (t == GL_RE_UNFILLED) {
                t = gl_regex_step(f->rx[r], from->re[r], b);
                gl_regex_view(f->rx[r], &f->view[r]); // the table may have moved
            }
        }
        if (t == GL_RE_DEAD)
            return 0;
        to->re[r] = t;
    }
    to->count = count;
    to->need = need;
    to->lo = lo;
    to->hi = hi;
    return 1;
}

// Byte classes of thread th's frame: bytes in one class are interchangeable for that frame in
// every state it can reach (the same transition in each of the node's regexes and the same UTF-8
// role); '"', '\\' and control bytes get GL_SCLS_NONE. Classes are numbered by first byte, so
// equal partitions give equal maps. Returns the class count, or 0 when the frame is inside an
// escape (the next byte is read as an escape letter: bytes are not interchangeable).
#define GL_SCLS_NONE 255
int gl_mstate_sframe_classes(const struct gl_mstate *s, uint32_t th, uint8_t cls[256]);

// ---- Read-only views of a state's threads, for the shortest-completion query (shortest.c) ----
// Phases of the frames that have them, as gl_mframe.phase.
enum {
    GL_MF_REP_ITEM = 1, // REPEAT: an item is read (the frame above it)
    GL_MF_REP_SEP,      // REPEAT: a separator is read
    GL_MF_STR_OPEN,     // JSTRING: before the opening quote
    GL_MF_STR_BODY,     // JSTRING: inside (raw strings: always)
    GL_MF_OBJ_START,    // JOBJECT: before '{'
    GL_MF_OBJ_FIRST,    // after '{' (whitespace)
    GL_MF_OBJ_KEY,      // inside a key
    GL_MF_OBJ_COLON,    // after a key, before ':'
    GL_MF_OBJ_VALUE_WS, // after ':', before the value
    GL_MF_OBJ_IN_VALUE, // the value is read (the frame above it)
    GL_MF_OBJ_NEXT,     // after a value: ',' or '}'
    GL_MF_OBJ_COMMA,    // after ',': a key must follow
    GL_MF_ARR_START,    // JARRAY: before '['
    GL_MF_ARR_FIRST,    // after '['
    GL_MF_ARR_IN_ITEM,  // an item is read (the frame above it)
    GL_MF_ARR_NEXT,     // after an item: ',' or ']'
    GL_MF_ARR_COMMA,    // after ',': an item must follow
};
// JNUMBER phases (gl_mframe.phase of a number frame).
enum {
    GL_MF_NUM_START,
    GL_MF_NUM_MINUS,
    GL_MF_NUM_ZERO,
    GL_MF_NUM_INT,
    GL_MF_NUM_DOT,
    GL_MF_NUM_FRAC,
    GL_MF_NUM_EXP,
    GL_MF_NUM_EXPSIGN,
    GL_MF_NUM_EXPD
};
struct gl_mframe {
    int32_t node;
    uint32_t a, b;      // SEQ: a = next kid; REPEAT: a = items read; BYTES: a = bytes read; REGEX:
                        // a = DFA state; JSTRING: a = code points read; JNUMBER: b = text bytes;
                        // JARRAY: b = items read
    int phase;          // above; 0 for other kinds
    int pending;        // JSTRING body / JOBJECT key: bytes that finish the current code point
    int esc;            // ... and 1 when that is an escape (0: a UTF-8 sequence or nothing)
    const uint32_t *re; // JSTRING: DFA state per regex; JOBJECT: per pattern (in a key)
    const char *text;   // bounded JNUMBER: the text read (b bytes); NULL when unbounded
    int32_t count, req; // JOBJECT: members read (capped as match.c keeps it), required unseen
    int32_t lo, hi;    // JOBJECT key: declared props [lo, hi) whose name starts with the key so far
    int32_t cur;       // JOBJECT: value node of the member being read
    uint32_t keylen;   // JOBJECT key: decoded bytes so far
    const void *frame; // the frame itself, for the functions below (valid while s is unchanged)
    uint32_t size;     // its bytes (a gl_mstate_sframe_step-able copy for string frames)
};
// Views of the frames of the thread at offset *th (0 for the first), top first, into out
// (cap); advances *th to the next thread. Returns the frame count, -1 past the last thread, -2
// when the stack is deeper than cap. A thread with no frame is a complete document.
int gl_mstate_thread_frames(const struct gl_mstate *s, uint32_t *th, struct gl_mframe *out,
                            int cap);
// The view of a frame copy (as gl_mstate_sframe / gl_mstate_node_frame write them).
void gl_mframe_view(const struct gl_mstate *s, const uint64_t *frame, struct gl_mframe *v);
// A fresh JSTRING frame for node, inside the string (after the quote for a non-raw one): its
// size, 0 when not a string or larger than cap bytes. Steps with gl_mstate_sframe_step.
size_t gl_mstate_node_frame(const struct gl_mstate *s, int32_t node, uint64_t *frame, size_t cap);
// A JSTRING frame copy may end here: closing quote next (raw: nothing more needed).
int gl_mframe_str_done(const struct gl_mstate *s, const uint64_t *frame);
// JOBJECT views: declared prop i may be the next key (unseen, in order, within max_props); it was
// read; a non-declared key may be next; the key read so far repeats a non-declared key.
int gl_mframe_prop_ok(const struct gl_mstate *s, const struct gl_mframe *v, int32_t i);
int gl_mframe_seen(const struct gl_mframe *v, int32_t i); // declared prop i was read
int gl_mframe_extra_ok(const struct gl_mstate *s, const struct gl_mframe *v);
int gl_mframe_key_dup(const struct gl_mstate *s, const struct gl_mframe *v);
// A bounded number's effective range (exclusive bounds applied; integers exact in long double)
// and the final check of a complete number text, as the matcher decides them.
void gl_mnum_range(const struct gl_gnum *nm, long double *lo, long double *hi);
int gl_mnum_text_ok(const struct gl_gnum *nm, const char *t, int len);
