// SPDX-License-Identifier: MIT
// api_int: what the api module's files share (not for other modules). The helpers of the first
// block (through gl_api_check_text_len), with gl_api_fail and gl_api_error_json (api.h), live in
// util.c, which calls no other api file; calls between the other files run one way: endpoints ->
// request, responses; response -> responses -> request (which reads media parts through
// mediasrc/).
#pragma once

#include "api/api.h"
#include "chat/atem_parse.h"
#include "engine/engine.h"
#include "media/media.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

_Static_assert(GL_API_MAX_EOS == GL_ENGINE_MAX_EOS, "api.h mirrors the engine's stop-set size");

struct gl_api_prompt {
    int32_t *ids; // owned
    int32_t n;
    char *text; // completions echo: the prompt text (decoded for token prompts); owned
    size_t text_len;
};

struct gl_api_req {
    enum gl_api_endpoint ep;
    char id[48]; // "chatcmpl-<hex>" / "cmpl-<hex>", or the client's id (gl_api_set_request_id)
    // Fields accepted but ignored, "a, b" (header-safe bytes), for X-Glint-Ignored-Fields; ""
    // when none.
    char ignored[GL_API_IGNORED_CAP];
    int64_t created;
    int stream, include_usage, continuous_usage;
    int echo; // completions: prompt text first; chat: see echo_text
    // chat echo (vLLM): the last message's content when it is the assistant's, put before the
    // reply's content; owned, NULL when none
    char *echo_text;
    size_t echo_len;
    // chat continue_final_message: the prompt ends inside the final assistant message's answer
    // body (chat/render.h), so the reply continues it: no turn grammar, and the output parser
    // starts in that body
    int continue_final;
    int return_token_ids; // vLLM extra: choices carry token_ids (and prompt_token_ids)
    uint64_t cache_salt;  // vLLM extra cache_salt: keyed hash of the string, 0 when absent
    struct gl_api_prompt *prompts;
    int32_t n_prompts;          // chat: 1
    struct gl_sample_params sp; // engine parameters; arrays point into the storage below
    int32_t max_tokens_set;     // the client gave max_tokens / max_completion_tokens
    // chat
    int chat_logprobs; // logprobs: true
    int32_t top_logprobs;
    int include_reasoning;
    int skip_special_tokens;
    int parallel_tool_calls;
    // Responses API (responses.c): the request came to /v1/responses; id is "resp_<hex>" and echo
    // holds the request fields the response object repeats (instructions, tools, text, ...).
    int responses;
    json_t *resp_echo; // owned
    // media caps: the server's, then mm_processor_kwargs (max_image_tokens, fps, num_frames,
    // max_video_frame_tokens)
    struct gl_media_params mm;
    // chat images and videos while the request is parsed: each part's bytes (owned), a video's
    // preprocessed clip in clips[k] (owned; parts[k].clip points at it); then the expanded
    // prompt's soft-token rows (prompts[0] holds its ids), handed to the engine at submit
    struct gl_media_part *parts; // [GL_MEDIA_MAX_PARTS]
    struct gl_video *clips;      // [GL_MEDIA_MAX_PARTS]
    struct gl_image *pixels;     // [GL_MEDIA_MAX_PARTS] an image's resized pixels (decoded once)
    int32_t n_parts;
    struct gl_media_prompt media;
    char *chat_stop[GL_SAMPLE_MAX_STOP]; // applied to content by the server (sp.n_stop = 0)
    int32_t n_chat_stop;
    // structured output
    struct gl_grammar *grammar; // NULL: unconstrained; a GL_GRAMMAR_ATEM_TURN grammar for chat
    int turn;                   // grammar covers the whole assistant turn
    int32_t reasoning_budget;   // tokens of reasoning body; < 0: none
    int finish_within;          // structured_outputs.finish_within_max_tokens (proc.c)
    int64_t grammar_us;         // time to compile or find the grammar (metrics)
    // storage for sp
    struct gl_logit_bias *bias;
    int32_t *stop_ids, *allowed_ids, *bad_ids;
    char *stops[GL_SAMPLE_MAX_STOP];
};

// prefix + 24 hex digits from a process-wide counter mixed with the clock (unique per process
// run, not secret).
void gl_api_new_id(char *out, size_t cap, const char *prefix);
// Text of ids (complete UTF-8; specials dropped when skip_special). *text gl_malloc'ed and
// NUL-terminated. Returns 0, or -1 when out of memory.
int gl_api_detok(const struct gl_tokenizer *t, const int32_t *ids, int32_t n, int skip_special,
                 char **text, size_t *len);
// Parses v as a list of at most cap token ids in [0, n_vocab) into *out (gl_malloc'ed, *n of
// them); errors name the field k and the index.
gl_status gl_api_get_ids(json_t *v, const char *k, int32_t n_vocab, int32_t cap, int32_t **out,
                         int32_t *n, struct gl_api_error *e);
// A JSON string of arbitrary bytes: invalid UTF-8 becomes U+FFFD (jansson refuses it). NULL
// only when out of memory.
json_t *gl_api_jstr(const char *p, size_t n);
// The id of the one token that encodes text exactly (no specials, no BOS), or -1.
int32_t gl_api_single_token(const struct gl_tokenizer *t, const char *text);
// The context-length check that needs no tokenizing: GL_OK when len bytes of text may fit
// max_model_len tokens, else a 400 naming param (each token spells at most max_token_bytes of
// the text; x2 for normalisers that drop bytes: api.h). Generation prompts and /tokenize share it.
gl_status gl_api_check_text_len(const struct gl_api_config *c, size_t len, const char *param,
                                struct gl_api_error *e);

// gl_api_parse after the body was loaded (b: a JSON value, borrowed); ep is chat or completions.
gl_status gl_api_parse_json(const struct gl_api_config *c, enum gl_api_endpoint ep, json_t *b,
                            struct gl_api_req **out, struct gl_api_error *e);

// ---- the Responses API (responses.c) ----
// Translates a /v1/responses body into the chat request it means and parses that
// (gl_api_parse_json); errors name the Responses field (e.g. "input[2].content[0].type").
gl_status gl_api_responses_parse(const struct gl_api_config *c, json_t *b, struct gl_api_req **out,
                                 struct gl_api_error *e);

// What a finished (or failed) chat choice becomes in a response object.
struct gl_api_rs_result {
    const struct gl_atem_accum *acc; // the parsed turn
    const char *finish;              // "stop" "length" "tool_calls" "abort" "error"
    int64_t input_tokens, cached_tokens, output_tokens, reasoning_tokens;
};
// The response object: status "completed", "incomplete" (finish "length": incomplete_details
// {reason: "max_output_tokens"}) or "failed" (error given); in_progress: the snapshot sent by
// response.created (no output, no usage). NULL when out of memory.
json_t *gl_api_rs_response(const struct gl_api_config *c, const struct gl_api_req *r,
                           const struct gl_api_rs_result *res, const struct gl_api_error *error,
                           int in_progress);

// Streaming: which output item is open, so that deltas of one kind go to one item and a change
// of kind closes it (reasoning, then the message or the calls: the whole-turn grammar's order).
struct gl_api_rs_stream {
    int open;        // 0 none, else the open item's kind (1 reasoning, 2 message, 3 call)
    int call;        // the open call's index in acc->calls
    int32_t n_items; // output items opened so far (the next output_index)
};
// Appends to ev the events (objects with a "type"; the caller numbers and sends them) for the
// accumulator's deltas [from, to).
void gl_api_rs_deltas(struct gl_api_rs_stream *st, const struct gl_api_req *r,
                      const struct gl_atem_accum *acc, size_t from, size_t to, json_t *ev);
// Appends the closing events: the open item's done events, then response.completed or
// response.incomplete with the final object (final: gl_api_rs_response's, taken).
void gl_api_rs_finish(struct gl_api_rs_stream *st, const struct gl_api_req *r,
                      const struct gl_api_rs_result *res, json_t *final, json_t *ev);
