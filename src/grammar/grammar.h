// SPDX-License-Identifier: MIT
// grammar: structured-output constraints for generation, with no dependency on the model.
// A constraint (JSON Schema, any JSON object, regex, choice, GBNF) compiles to an immutable
// struct gl_grammar (shared, refcounted, cached by a canonical hash). A struct gl_matcher follows
// one sequence's tokens and answers, at every step, which of the 202,048 tokens may come next as
// a bitset. It works on bytes, so tokens that split UTF-8 or JSON syntax are handled exactly.
//
// Semantics (docs/GRAMMAR.md has the full list with the bugs they answer):
//  - every allowed prefix can still be completed (no dead ends);
//  - object keys in any order (schema order is opt-in), no duplicates, keys compared decoded;
//  - whitespace: none in compact mode (ws_max 0), else runs of at most ws_max bytes;
//  - special tokens (ids flagged special by the tokenizer) are never allowed inside the
//    constrained region unless the grammar names them by id;
//  - every token of the stop set is masked until the document may end, then allowed.
//
// Errors: compile errors are GL_E_INVAL (bad input: message names the keyword and its JSON
// pointer, or the GBNF line:column), GL_E_UNSUPPORTED (a keyword we cannot enforce, same naming),
// GL_E_LIMIT (time, node or DFA-state budget exceeded). Matchers never fail on tokens: a token
// that is not allowed is refused and leaves the state unchanged.
// Threads: a grammar may be shared by matchers on one thread; the vocabulary index is read-only
// after creation and may be shared by all threads.
#pragma once

#include "base/base.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

enum gl_grammar_kind {
    GL_GRAMMAR_JSON_SCHEMA, // src: a JSON Schema document (JSON text)
    GL_GRAMMAR_JSON_OBJECT, // src ignored: any JSON object (OpenAI json_object mode)
    GL_GRAMMAR_REGEX,       // src: a regex (regex.h dialect), whole output must match
    GL_GRAMMAR_CHOICE,      // src: a JSON array of strings; the output is exactly one of them
    GL_GRAMMAR_GBNF,        // src: llama.cpp GBNF text, start rule "root"
    GL_GRAMMAR_ATEM_TURN,   // src: a turn spec (JSON, below): the whole ATEM assistant turn
};

// GL_GRAMMAR_ATEM_TURN: everything the model writes after the generation prompt
// `<|start|>assistant` (arch doc §5), header included, as one grammar. Why: the model writes its
// own header, so a constraint armed by detecting the header in the output can arm late, on the
// wrong message, or not at all (sglang #34631-style bugs); here arming is exact by construction
// and nothing is detected. Language (special tokens by id, as GN_TOKEN; TO, SELF, USER, ASSISTANT
// are header pieces, below):
//   TURN      := REASONING? ARM
//   REASONING := TO SELF <|message|> FREE <|eom|> <|start|> ASSISTANT
//   ARM       := TO USER <|message|> BODY                                         (user arm)
//              | TO CALL (<|eom|> <|start|> ASSISTANT TO CALL)*                   (tool arm)
// then a stop token (the matcher's stop set: <|eot|> 200008, <|end_of_text|> 200001). CALL is
// gl_grammar_compile_atem_tools' grammar from "=NAME<|message|>..." (bytes: tool names are never
// pinned); the repetition only when parallel. FREE: any run of non-special tokens (any bytes:
// tokens may split UTF-8). BODY: FREE, or the body constraint. Ids: <|eom|> 200007, <|start|>
// 200022, <|message|> 200023.
// Header pieces: TO is " to", SELF "=self", USER "=user", ASSISTANT "assistant" -- as bytes (any
// tokens that spell them), or pinned by "header_tokens" to one token id (GN_TOKEN: only that
// token, never its bytes spelled otherwise). Pinned, each header position allows exactly one
// token, so jump-forward (gl_matcher_forced_tokens) takes <|start|>, "assistant", " to" after the
// reasoning's <|eom|>, and <|message|> after "=self"/"=user"; the model is trained on these
// canonical spellings (o200k: " to" 328, "=self" 19669, "=user" 76976, "assistant" 140680).
// Spec: {"body": null | {"kind": "json_schema"|"json_object"|"regex"|"choice"|"gbnf",
//                        "source": regex/GBNF text, or the JSON text (or value) of a schema or
//                                  choice list; ignored for json_object},
//        "tools": null | OpenAI tools array, "tool_choice": "none"|"auto"|"required"|{"name": N}
//        (OpenAI's {"type":"function","function":{"name":N}} too), "parallel": bool,
//        "reasoning": bool,
//        "header_tokens": null | {"to": ID, "self": ID, "user": ID, "assistant": ID}}.
// Arms: "none" (or no tools): user; "auto": user | tool (any tool); "required": tool (any);
// named: tool with N only. reasoning false: no REASONING. Missing fields: body null,
// tool_choice "auto" with tools else "none", parallel true, reasoning true, header_tokens null.
// header_tokens: each piece optional; ID an integer 0..INT32_MAX pins the piece, -1, null or
// absence keeps its bytes. The grammar has no tokenizer and cannot check an ID: the caller
// guarantees that the token's bytes are exactly the piece's (encode the piece; pin it only when
// that gives one token) and that it is inside the vocabulary (a pinned id the vocabulary lacks
// is never allowed, so the header could not be written). SELF / USER stay bytes when the tool arm
// has a tool whose name starts with "self" / "user": the matcher reads a pinned token as the
// literal, so "=user" would always open the answer, never "=user_lookup". The canonical
// form (the cache key) keeps only the pinned pieces the language uses, and null when none.
// Errors (GL_E_INVAL) name the field: "tool_choice: function 'x' is not in tools", "body: " +
// the body front end's own message, "tools[i]: ..." as for forced calls, "header_tokens: ..." for
// an unknown piece or an ID outside -1..INT32_MAX; tools named "self" or "user" are refused (they
// would read back as reasoning or the answer).

struct gl_grammar_opts {
    int32_t ws_max;       // bytes per whitespace run; 0 = compact; default 16
    int32_t ordered_keys; // 1: properties in schema order; default 0 (any order)
    int32_t lenient;      // 1: drop unsupported keywords (listed by gl_grammar_warnings)
    // 1: an object schema that says nothing about additionalProperties takes no undeclared key
    // (what vLLM's default xgrammar backend does); 0 (default): JSON Schema, such keys take any
    // value. `additionalProperties: true` or a schema opens an object either way; json_object
    // mode and the any-value schema ({} / true) stay open.
    int32_t closed_objects;
    int64_t compile_budget_us; // default 1,000,000
    int32_t max_nodes;         // default 1,000,000
    int32_t max_regex_states;  // per regex DFA; default 65,536
    // Most bytes one compile may hold at once (its IR, regex NFAs and DFAs, scratch; jansson's
    // own parse of the source is not counted); default 256 MiB. Over it: GL_E_LIMIT naming the
    // schema part being compiled (or "the constraint" outside JSON Schema). Checked at the same
    // points as the time budget, so a compile can overshoot it by what one regex or one
    // sub-schema allocates (bounded by max_regex_states and max_nodes).
    int64_t max_compile_bytes;
};
struct gl_grammar_opts gl_grammar_default_opts(void);

struct gl_grammar;
GL_MUST_USE gl_status gl_grammar_compile(struct gl_grammar **out, enum gl_grammar_kind kind,
                                         const char *src, size_t len,
                                         const struct gl_grammar_opts *opts, struct gl_err *err);
struct gl_grammar *gl_grammar_ref(struct gl_grammar *g);
void gl_grammar_unref(struct gl_grammar *g); // NULL-safe; frees at zero
// Lenient mode: "keyword at /json/pointer; ..." for what was dropped, or "" (owned by g).
const char *gl_grammar_warnings(const struct gl_grammar *g);
// vLLM's whitespace_pattern: the ws_max (0..16) whose whitespace (runs of at most ws_max bytes of
// [ \t\n\r], gl_grammar_opts) is always matched by the regex src (regex.h dialect, matched whole):
// 16 when the pattern takes every such run, else 0 (compact) when it takes the empty string.
// GL_E_INVAL when it takes neither (or does not compile); the message says why.
GL_MUST_USE gl_status gl_grammar_ws_pattern(const char *src, size_t len, int32_t *ws_max,
                                            struct gl_err *err);
// Canonical hash of (kind, opts, source with JSON canonicalised) -- the cache key.
uint64_t gl_grammar_hash(const struct gl_grammar *g);
// Bytes g holds now (malloc's usable sizes, gl_alloc_meter): what the compile left (IR, regexes,
// key) plus everything built lazily since -- regex DFA states, cached masks and string-frame
// parts, class-walk memos and class tries built for g alone -- and the states of its live
// matchers. Every grammar call charges what it allocates to its grammar, so this grows as
// matchers run; read it where the grammar's users are serialised (the grammar lock).
int64_t gl_grammar_bytes(const struct gl_grammar *g);

// Cache of compiled grammars by canonical hash, LRU, bounded by capacity entries and, once
// gl_grammar_cache_set_budget gives one, by bytes: the sum of gl_grammar_bytes over its entries,
// re-read on every lookup, insertion and gl_grammar_cache_trim (entries grow after insertion).
// Over the budget, least recently used entries are dropped until it fits (an entry bigger than
// the whole budget is dropped too: its requests keep their reference). Returns a new reference.
struct gl_grammar_cache;
GL_MUST_USE gl_status gl_grammar_cache_new(struct gl_grammar_cache **out, int capacity,
                                           struct gl_err *err);
void gl_grammar_cache_free(struct gl_grammar_cache *c);
void gl_grammar_cache_set_budget(struct gl_grammar_cache *c, int64_t max_bytes); // 0: none
// Drops least recently used entries while the cache is over its byte budget (mu as for
// gl_grammar_cache_get_locked; may be NULL), then gives freed memory back to the system when
// enough was freed (gl_mem_release). Call it when matchers finish (their growth is charged).
void gl_grammar_cache_trim(struct gl_grammar_cache *c, pthread_mutex_t *mu);
// What the cache holds: entries, bytes (as charged at the last lookup or trim), and evictions
// for the byte budget since it was created. mu as above.
struct gl_grammar_cache_stats {
    int64_t entries, bytes, evictions;
};
void gl_grammar_cache_stats(struct gl_grammar_cache *c, pthread_mutex_t *mu,
                            struct gl_grammar_cache_stats *out);
GL_MUST_USE gl_status gl_grammar_cache_get(struct gl_grammar_cache *c, struct gl_grammar **out,
                                           enum gl_grammar_kind kind, const char *src, size_t len,
                                           const struct gl_grammar_opts *opts, struct gl_err *err);
// The same for a cache shared by threads: mu guards the cache and the refcounts of its grammars
// (the caller's grammar lock, not held on entry). It is held for the lookup and the insertion
// only: a miss compiles without it, so a slow compile stalls no other user of the lock.
GL_MUST_USE gl_status gl_grammar_cache_get_locked(struct gl_grammar_cache *c, pthread_mutex_t *mu,
                                                  struct gl_grammar **out,
                                                  enum gl_grammar_kind kind, const char *src,
                                                  size_t len, const struct gl_grammar_opts *opts,
                                                  struct gl_err *err);

// Vocabulary index for one tokenizer: token byte strings in a trie, special-token set, and the
// precomputed token classes of the string fast path. Built once (tens of ms), then read-only.
struct gl_gvocab;
GL_MUST_USE gl_status gl_gvocab_new(struct gl_gvocab **out, const struct gl_tokenizer *tok,
                                    struct gl_err *err);
// Free it after every grammar that computed masks with it: their mask caches hold references
// into its shared tables.
void gl_gvocab_free(struct gl_gvocab *v);
int32_t gl_gvocab_n_vocab(const struct gl_gvocab *v);
// Words of a mask for this vocabulary: (n_vocab + 31) / 32.
size_t gl_gvocab_mask_words(const struct gl_gvocab *v);

// One sequence's constraint state. stop_ids: the model's full stop set (tokenizer EOS, every
// generation_config EOS, request stop ids); copied.
struct gl_matcher;
GL_MUST_USE gl_status gl_matcher_new(struct gl_matcher **out, struct gl_grammar *g,
                                     const struct gl_gvocab *v, const int32_t *stop_ids, int n_stop,
                                     struct gl_err *err);
void gl_matcher_free(struct gl_matcher *m); // NULL-safe
void gl_matcher_reset(struct gl_matcher *m);

// Writes the allowed-token bitset (bit i of word i/32 = token i allowed). After a stop token has
// been accepted the mask is all zero. Never all zero before that: a live state always allows
// some token (or a stop token).
void gl_matcher_fill_mask(struct gl_matcher *m, uint32_t *mask);
// 1 and advance if the token is allowed; 0 (state unchanged) if not. A stop token is allowed iff
// the document may end; accepting it finishes the matcher.
int gl_matcher_accept(struct gl_matcher *m, int32_t token);
int gl_matcher_accept_bytes(struct gl_matcher *m, const void *p, size_t len); // all or nothing
int gl_matcher_can_end(const struct gl_matcher *m);     // document complete so far
int gl_matcher_is_finished(const struct gl_matcher *m); // a stop token was accepted
// Undoes the last n accepted tokens exactly (n <= gl_matcher_n_accepted); GL_E_INVAL otherwise.
GL_MUST_USE gl_status gl_matcher_rollback(struct gl_matcher *m, int n, struct gl_err *err);
int64_t gl_matcher_n_accepted(const struct gl_matcher *m);
// Jump-forward: the longest byte string every continuation must start with (e.g. the rest of a
// forced key); writes up to cap bytes, returns the length (0 when the next byte is not forced).
size_t gl_matcher_forced_bytes(struct gl_matcher *m, char *out, size_t cap);
// Jump-forward on tokens: while exactly one token is allowed and it is not in the stop set,
// accepts it and appends it to out (at most cap). Returns how many were accepted. mask: scratch
// of gl_gvocab_mask_words words; on return it holds the current state's mask. Sampling is
// unchanged: each skipped step had one choice.
int32_t gl_matcher_forced_tokens(struct gl_matcher *m, int32_t *out, int32_t cap, uint32_t *mask);

// Shortest completion (docs/GRAMMAR.md): the fewest tokens, the stop token included, that take
// the document from the current state to its end (0 once finished; -1 when no bound is known).
// *upper counts each byte as a token and each token literal and the stop token as one. It is an
// upper bound on tokens because every byte is a token of its own in the vocabulary (checked on
// first use: a vocabulary without all 256 single-byte tokens gives -1), so that many tokens
// always suffice; exact in those units except the states shortest.h lists, where it is still an
// upper bound; never below. *lower (never above the true count in tokens): token literals plus
// the stop token, plus the bytes over the longest token's length rounded up. Either may be NULL.
// The first call on a grammar builds its tables (a pass over the IR); later calls walk the
// threads of the current state.
void gl_matcher_shortest(struct gl_matcher *m, int64_t *lower, int64_t *upper);
// Keeps in mask (the current state's allowed tokens, as gl_matcher_fill_mask or
// gl_matcher_forced_tokens left them) only the tokens t after which the document still ends
// within `remaining` tokens, t and the stop token included: upper(after t) <= remaining - 1.
// From a state with upper <= remaining, following such masks ends with a stop token in time
// (the first unit of a shortest completion, a single byte or a literal, is always kept). When no
// token fits (remaining below upper from the start) the tokens with the smallest upper are kept:
// the mask is never emptied. No bound known (upper -1): the mask is left as it is.
void gl_matcher_filter_within(struct gl_matcher *m, uint32_t *mask, int64_t remaining);
// gl_matcher_fill_mask, then gl_matcher_filter_within.
void gl_matcher_fill_mask_within(struct gl_matcher *m, uint32_t *mask, int64_t remaining);

// Counters for benchmarks: masks computed, cache hits, trie nodes visited.
struct gl_matcher_stats {
    int64_t masks, cache_hits, fast_path, nodes_visited;
};
void gl_matcher_stats(const struct gl_matcher *m, struct gl_matcher_stats *out);

// Forced tool calls (OpenAI tool_choice "required" or a named function) for the ATEM format.
// tools: the request's `tools` array (jansson json_t*, as OpenAI sends it; each entry
// {"type":"function","function":{name, parameters}} or a bare function object). only_name: NULL
// for "required" (any of the tools), else the one function that must be called.
// The grammar starts right after the model's own " to" token in the assistant header and forces
//   =NAME <|message|> <atem:function_calls>\n<atem:invoke name="NAME">\n
//   (<atem:parameter name="KEY">VALUE</atem:parameter>\n)* </atem:invoke>\n</atem:function_calls>
// then a stop token. Parameters follow the tool's `parameters` schema (required ones present, no
// unknown ones unless additionalProperties allows, any order); VALUE is JSON for objects, arrays,
// numbers, booleans and null, and raw text without '<' for strings. It includes the '=' because
// the vocabulary merges it with the recipient (" to=get_weather" is [" to"]["=get"]["_weather"]),
// so " to=" never ends on a token boundary. Reasoning is never constrained: whoever arms the
// grammar (the server's per-request state machine) lets the "=self" reading through unmasked
// and arms only on the header that follows it. message_token: the id of
// <|message|>. GL_E_INVAL names the tool index and the schema keyword when a schema is bad.
GL_MUST_USE gl_status gl_grammar_compile_atem_tools(struct gl_grammar **out, const void *tools_json,
                                                    const char *only_name, int32_t message_token,
                                                    const struct gl_grammar_opts *opts,
                                                    struct gl_err *err);
