// SPDX-License-Identifier: MIT
// api: the OpenAI / vLLM protocol, without sockets, files or threads of its own. A request body
// (chat, completions, or the Responses API's, which is translated into the chat request it means:
// responses.c) becomes engine work (prompt token ids, sampling parameters, a grammar) or an
// error that says what, where and why with its HTTP status; engine events become response JSON
// or SSE chunks. The server (server/) owns sockets, threads and the engine. What api/ still does
// besides transforming, all of it on the caller's thread:
// - an image or video part's bytes come from mediasrc/ (gl_mediasrc_load: data: URLs, files
//   under --allowed-local-media-path, http(s) from allowed hosts), so gl_api_parse blocks while
//   it reads a file or fetches a URL; api/ itself opens nothing;
// - it takes the caller's locks: config->grammar_lock around every grammar call (request.c, and
//   proc.c's logits processors on the engine thread), config->media_lock only when it encodes;
// - it owns one mutex: the once-per-name log of ignored fields (request.c, GL_LOGW to stderr);
// - it reads the clock (ids, created, grammar and mask timings).
// Encoding is the engine's (deferred media): the server sets defer_encode. Only a caller that
// sets media_pool without defer_encode gets the encoder run at parse time (no caller in src/
// does today). The request is opaque outside api/ (accessors below; fields in api_int.h), and
// engine / media types appear only behind pointers, so an includer gets neither the model nor
// the KV headers through this one.
//
// Field semantics follow vLLM (shared/docs/serving.md §1.2-1.6). Decisions:
// - Fields (request.c's table): implemented; accepted and ignored when ignoring them cannot
//   change the output (a hosted platform's bookkeeping such as store, metadata, service_tier,
//   and any field glint does not know: vLLM accepts unknown fields too), each named in the log
//   and in gl_api_req.ignored (the X-Glint-Ignored-Fields header); or a 400 naming the field
//   when ignoring it would silently change the output (audio, prompt_logprobs, ...).
//   config.strict_fields makes every field outside the implemented ones a 400.
// - Structured output: response_format, structured_outputs and the legacy guided_* spellings all
//   compile through the same grammar engine; at most one constraint per request.
// - Chat framing: every chat request (unless the server turns it off) runs ONE grammar over the
//   whole assistant turn (grammar.h GL_GRAMMAR_ATEM_TURN): optional reasoning, then the answer
//   with the request's body constraint, or tool calls as tool_choice allows. Nothing detects
//   headers and arms late, so the body constraint cannot miss its start (sglang #34631) and every
//   reply parses.
// - Reasoning budget: thinking_token_budget when given; else at most half of the effective
//   max_tokens (max_tokens, or the context left after the prompt), so the body keeps room.
//   When it runs out, <|eom|> is the only allowed token, which closes the reasoning message.
//   It also closes (or is never opened) as soon as the tokens left reach the shortest way to
//   finish the turn (grammar.h gl_matcher_shortest: framing + shortest body + stop), and a
//   constrained request whose max_tokens is below that shortest answer's lower bound is a 400.
//   structured_outputs.finish_within_max_tokens extends the rule to the body's mask.
// - Chat stop strings apply to the answer text (content), matched by the server, not to headers
//   or reasoning; completions stop strings apply to the generated text (engine).
// Ownership: gl_api_req owns everything it points to (free with gl_api_req_free); it holds one
// grammar reference. Grammars are not thread-safe: every call that touches one (cache lookups,
// matchers, refcounts) happens under config->grammar_lock.
#pragma once

#include "base/base.h"
#include "grammar/grammar.h"
#include "mediasrc/mediasrc.h"
#include "sampling/sampling.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// The engine's and media's types appear here only behind pointers (engine/engine.h,
// media/media.h): an includer of api.h does not get the model, KV, kernels or video headers.
struct gl_request;
struct gl_spec_params;
struct gl_logits_processor;
struct gl_event;
struct gl_model;
struct gl_pool;
struct gl_media_cache;

#define GL_API_MAX_PROMPTS  64 // prompts in one completions request
#define GL_API_MAX_EOS      8  // stop ids of the model (= GL_ENGINE_MAX_EOS, checked in api_int.h)
#define GL_API_WS_MAX       16 // bytes per whitespace run when bounded whitespace is asked for
#define GL_API_MAX_STOP_IDS 64 // request stop_token_ids
// logit_bias entries per request (OpenAI allows 300, vLLM has no limit: 100,000 entries would be
// parsed, copied per choice and applied at every step)
#define GL_API_MAX_LOGIT_BIAS 1024

// GL_API_RESPONSES (POST /v1/responses, responses.c) is translated into a chat request: the parsed
// request has ep GL_API_CHAT and responses set, and its output is shaped as Responses objects.
enum gl_api_endpoint { GL_API_CHAT, GL_API_COMPLETIONS, GL_API_RESPONSES };

// Server-wide settings, read-only while requests are parsed (shared by HTTP threads).
// Structured-output defaults for every request (glint serve --structured-outputs-config, vLLM's
// StructuredOutputsConfig); a request's structured_outputs fields of the same names override
// them. All zero is glint's default: compact JSON, objects closed where the schema says nothing
// about additionalProperties (vLLM's default xgrammar backend), unenforceable keywords refused.
struct gl_api_so {
    int ws_bounded;   // disable_any_whitespace false: runs of at most GL_API_WS_MAX bytes
    int open_objects; // disable_additional_properties false: full JSON Schema semantics
    int lenient;      // lenient_keywords true: drop what cannot be enforced, and say so
};
// Parses the --structured-outputs-config JSON object into *out (starting from *out): keys
// backend (a string, accepted and ignored: glint has one engine; *backend_ignored set to 1),
// disable_fallback (boolean, ignored: there is nothing to fall back to), disable_any_whitespace,
// disable_additional_properties, lenient_keywords (booleans). vLLM's reasoning keys
// (reasoning_parser, reasoning_parser_plugin, enable_in_reasoning) and unknown keys are
// GL_E_INVAL naming the key: glint parses reasoning itself and never constrains it.
GL_MUST_USE gl_status gl_api_so_config(const char *json, struct gl_api_so *out,
                                       int *backend_ignored, struct gl_err *err);
// Parses vLLM's --speculative-config JSON object into *out (engine.h gl_spec_params). Built:
// method "ngram" with num_speculative_tokens (required, 1..GL_SPEC_MAX_K), prompt_lookup_min /
// prompt_lookup_max (1..64; both missing: 5 and 5, one missing: the other, as vLLM); method
// "dflash" with num_speculative_tokens and "model" (required: the drafter GGUF's path, into
// dflash_path; the server opens it, the engine checks k <= block_size - 1). Other methods (eagle,
// eagle3, medusa, mtp, draft_model, ...) are GL_E_INVAL saying they are not built yet; unknown
// keys are GL_E_INVAL naming the key.
GL_MUST_USE gl_status gl_api_spec_config(const char *json, struct gl_spec_params *out,
                                         struct gl_err *err);
// The unenforced-keyword list of a lenient grammar as an HTTP header value: "keyword at
// /pointer; ..." with bytes outside printable ASCII %XX-escaped (pointers quote schema keys) and
// cut at cap - 1 bytes with "..."; "" when nothing was dropped. Writes into out[cap].
void gl_api_unenforced_header(const struct gl_grammar *g, char *out, size_t cap);

struct gl_api_config {
    const struct gl_tokenizer *tok;
    const struct gl_gvocab *gvocab;  // vocabulary index for grammars
    struct gl_grammar_cache *gcache; // compiled grammars, guarded by grammar_lock
    pthread_mutex_t *grammar_lock;
    int64_t grammar_compile_bytes; // per compile (gl_grammar_opts.max_compile_bytes); 0: default
    const char *model_name;        // served name
    int32_t max_model_len;
    // Bytes of the longest token (special names included; gl_api_max_token_bytes), or 0. A prompt
    // text longer than 2 * max_token_bytes * max_model_len bytes cannot fit the context, and is
    // refused before it is tokenized (tokenizing 10 MB takes seconds).
    int32_t max_token_bytes;
    int32_t max_logprobs;             // top logprobs cap (vLLM --max-logprobs; 20)
    struct gl_sample_params defaults; // generation_config defaults (temperature, top_p, ...)
    int32_t eos_ids[GL_API_MAX_EOS];  // the model's stop set (generation_config / GGUF)
    int32_t n_eos;
    int framing;         // 1: chat requests run the whole-turn grammar (default)
    int strict_fields;   // 1: an unknown request field is a 400 (--strict-request-fields);
                         // 0 (default): ignored with a warning and X-Glint-Ignored-Fields, as
                         // vLLM ignores extra fields (output-changing ones are refused either way)
    struct gl_api_so so; // structured-output defaults
    // Media parts (image_url, video_url): where their bytes may come from and the default image
    // cap. They need model (with a vision tower: gl_model_vision) and either defer_encode (the
    // server: parsing decodes, resizes and patchifies each part once and the engine's encoder
    // worker encodes, engine.h "Deferred encoding") or media_pool, on which the encoder runs at
    // parse time, one request at a time (media_lock).
    struct gl_mediasrc_opts media; // read by mediasrc/ (gl_mediasrc_load)
    int32_t max_image_tokens;      // default cap on merged tokens per image (4096)
    const struct gl_model *model;
    struct gl_pool *media_pool;
    pthread_mutex_t *media_lock;
    struct gl_media_cache *media_cache; // encoded rows to reuse across requests, or NULL
    int defer_encode;
};

// An error for the client: HTTP status, OpenAI error type, the offending field (or "") and a
// message that names the field and the reason.
struct gl_api_error {
    int http;
    char type[32];
    char param[96];
    char msg[640];
};
// {"error": {"message", "type", "param", "code": http}} (vLLM puts the status in code).
json_t *gl_api_error_json(const struct gl_api_error *e);
// Fills e and returns GL_E_INVAL (400 family) or the given status; printf-style message.
gl_status gl_api_fail(struct gl_api_error *e, int http, const char *param, const char *fmt, ...)
    GL_PRINTF(4, 5);

// A parsed request: opaque outside api/ (its fields are api_int.h's). Ownership: it owns
// everything it points to (free with gl_api_req_free) and holds one grammar reference.
struct gl_api_req;

#define GL_API_IGNORED_CAP 512 // bytes of the ignored-fields list (the rest becomes "...")

// What the server and the harnesses read of a request.
int32_t gl_api_req_n_prompts(const struct gl_api_req *r); // completions: up to 64; chat: 1
// Sampling parameters for the engine (n choices, max_tokens, logprobs, ...); arrays point into
// the request, valid while it lives.
const struct gl_sample_params *gl_api_req_sp(const struct gl_api_req *r);
const char *gl_api_req_id(const struct gl_api_req *r); // "chatcmpl-<hex>", "cmpl-<hex>", ...
// Fields accepted but ignored, "a, b" (header-safe), for X-Glint-Ignored-Fields; "" when none.
const char *gl_api_req_ignored(const struct gl_api_req *r);
int gl_api_req_stream(const struct gl_api_req *r);
// The compiled grammar (NULL: unconstrained) and the time it took to compile or find (µs).
const struct gl_grammar *gl_api_req_grammar(const struct gl_api_req *r);
int64_t gl_api_req_grammar_us(const struct gl_api_req *r);
// The engine request of prompt i (0 <= i < n_prompts): its ids, the media rows with prompt 0,
// the sampling parameters and cache salt. The caller sets on_event, user and procs. Borrowed:
// valid while r lives; once prompt 0 is submitted, gl_api_req_media_moved.
void gl_api_req_engine_request(const struct gl_api_req *r, int32_t i, struct gl_request *out);
// The engine took prompt 0's media rows (gl_engine_submit moves them): r no longer frees them.
void gl_api_req_media_moved(struct gl_api_req *r);

// Parses and validates one request body. On GL_OK *out is a new request (prompt tokens
// rendered and tokenized, grammar compiled or taken from the cache); on error *out is NULL and e
// says why (400 validation, 404 unknown model, 500 only for out-of-memory).
GL_MUST_USE gl_status gl_api_parse(const struct gl_api_config *c, enum gl_api_endpoint ep,
                                   const char *body, size_t len, struct gl_api_req **out,
                                   struct gl_api_error *e);
void gl_api_req_free(const struct gl_api_config *c, struct gl_api_req *r); // NULL-safe
// The longest token's byte length in tok (for gl_api_config.max_token_bytes).
int32_t gl_api_max_token_bytes(const struct gl_tokenizer *tok);

// Grammar mask times for metrics: a histogram with fixed upper bounds (µs), written by the
// engine thread and read by /metrics.
#define GL_API_MASK_BUCKETS 12
extern const double gl_api_mask_bounds_us[GL_API_MASK_BUCKETS];
struct gl_api_mask_stats {
    _Atomic int64_t buckets[GL_API_MASK_BUCKETS + 1]; // per bucket; the last is +Inf
    _Atomic int64_t count, us_total;
};

// Logits processors for one prompt of r: n of them (one per choice), or *out NULL when the
// request is unconstrained. The array is gl_malloc'ed: the engine takes ownership of each
// processor, the caller frees the array. Every mask (and jump-forward walk) is timed into ms.
GL_MUST_USE gl_status gl_api_make_procs(const struct gl_api_config *c, const struct gl_api_req *r,
                                        struct gl_api_mask_stats *ms,
                                        struct gl_logits_processor **out, struct gl_err *err);

// ---- responses ----

// One request's output being built: per choice accumulators (chat: ATEM parser + OpenAI message
// accumulator; completions: text + logprobs), usage, and the SSE bytes not yet sent.
struct gl_api_resp;
GL_MUST_USE gl_status gl_api_resp_new(struct gl_api_resp **out, const struct gl_api_config *c,
                                      const struct gl_api_req *r, struct gl_err *err);
void gl_api_resp_free(struct gl_api_resp *s);
// Folds one engine event of prompt `prompt` (completions list index; 0 for chat) into the
// response. Returns 1 when this event made a chat stop string match, or when it is an engine
// error (GL_FINISH_ERROR: the response fails with a 500 error, gl_api_resp_fail): the caller
// cancels that engine request (its other choices are of no use any more); else 0.
int gl_api_resp_event(struct gl_api_resp *s, int32_t prompt, const struct gl_event *ev);
// 1 when every choice has finished.
int gl_api_resp_done(const struct gl_api_resp *s);
// Streaming: takes the SSE bytes produced so far (gl_malloc'ed, caller frees; NULL when there
// are none). After done, the final bytes include the usage chunk and "data: [DONE]".
char *gl_api_resp_take_sse(struct gl_api_resp *s, size_t *len);
// Non-streaming: the whole response object (after done).
json_t *gl_api_resp_json(const struct gl_api_resp *s);
// Ends the response with an error (idempotent): streaming queues an SSE error event then [DONE]
// (the status line was already sent); gl_api_resp_error returns it for a non-streamed answer.
void gl_api_resp_fail(struct gl_api_resp *s, const struct gl_api_error *e);
const struct gl_api_error *gl_api_resp_error(const struct gl_api_resp *s); // NULL: no failure
// Per-choice finish reasons for metrics (count n; "stop" "length" "tool_calls" "abort").
int32_t gl_api_resp_n_choices(const struct gl_api_resp *s);
const char *gl_api_resp_finish(const struct gl_api_resp *s, int32_t choice);
void gl_api_resp_usage(const struct gl_api_resp *s, int64_t *prompt, int64_t *completion);
// usage details: prompt tokens found in the prefix cache (vLLM's num_cached_tokens, per prompt
// at its first admission) and reasoning-body tokens (chat; 0 for completions).
void gl_api_resp_usage_details(const struct gl_api_resp *s, int64_t *cached, int64_t *reasoning);

// Request ids chosen by the client (vLLM: the X-Request-Id header, else the body's request_id): 1
// when rid[0..len) may be one: 1 to GL_API_RID_MAX bytes of [A-Za-z0-9._:-] (it is echoed in a
// header and the log). gl_api_set_request_id makes r's id its prefix ("chatcmpl-", "cmpl-",
// "resp_") + rid, or returns a 400 naming param.
#define GL_API_RID_MAX 36
int gl_api_request_id_ok(const char *rid, size_t len);
gl_status gl_api_set_request_id(struct gl_api_req *r, const char *rid, size_t len,
                                const char *param, struct gl_api_error *e);

// ---- the other endpoints ----
// POST /tokenize {prompt | messages, add_special_tokens, return_token_strs} and
// POST /detokenize {tokens}: the whole response object or an error.
json_t *gl_api_tokenize(const struct gl_api_config *c, const char *body, size_t len,
                        struct gl_api_error *e);
json_t *gl_api_detokenize(const struct gl_api_config *c, const char *body, size_t len,
                          struct gl_api_error *e);
// The largest /tokenize or /detokenize body that can still hold a request that fits max_model_len:
// 6 body bytes per text byte (JSON's \u00XX) up to the text cap of gl_api_check_text_len, or 12
// per id for max_model_len ids, plus 64 KiB for the other fields. A larger body is refused before
// it is read: parsing 10 MB of JSON alone takes ~100 ms of a connection thread.
size_t gl_api_tokenize_body_limit(const struct gl_api_config *c);
// GET /v1/models.
json_t *gl_api_models(const struct gl_api_config *c, int64_t created);
