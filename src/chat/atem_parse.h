// SPDX-License-Identifier: MIT
// ATEM output parser: turns the token ids a Muse Glimmer model generates after the generation
// prompt `<|start|>assistant` into typed events (reasoning text, answer text, tool calls with
// JSON arguments, message ends), one token at a time, keyed on the special-token ids and never on
// decoded text (arch doc §5.1, §5.5). Invariants: framing (headers, specials) never reaches text
// events; text events are valid UTF-8; each token is looked at once (no re-parsing). The
// accumulator folds events into the OpenAI chat message and its streaming deltas (issue 4 item 3).
#pragma once

#include "base/base.h"
#include "base/buf.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define GL_ATEM_TOK_START   200022 // <|start|>
#define GL_ATEM_TOK_MESSAGE 200023 // <|message|>

enum gl_atem_ev_kind {
    GL_ATEM_EV_REASONING,  // text: a piece of reasoning (recipient `self`)
    GL_ATEM_EV_CONTENT,    // text: a piece of the answer (recipient `user`)
    GL_ATEM_EV_TOOL_START, // tool_index, id, name: a call begins (its header was read)
    GL_ATEM_EV_TOOL_ARGS,  // tool_index, text: the next piece of the arguments JSON object
    GL_ATEM_EV_TOOL_END,   // tool_index, truncated: the arguments object is complete
    GL_ATEM_EV_MSG_END,    // truncated: a message ended (end token, or finish() mid-message)
};

// Strings are valid only during the callback. text is not NUL-terminated (len bytes).
struct gl_atem_event {
    enum gl_atem_ev_kind kind;
    const char *text;
    size_t len;
    int tool_index;   // 0-based over the whole generation
    const char *id;   // "call_<index>" unless a prefix was configured
    const char *name; // function name (from the header, or a later <atem:invoke> in the body)
    int truncated;    // the call or message was cut before its end
};

typedef void (*gl_atem_sink)(void *user, const struct gl_atem_event *ev);

enum gl_atem_state {
    GL_ATEM_ST_HEADER,    // reading ` to=RECIPIENT` up to <|message|>
    GL_ATEM_ST_REASONING, // body of a `self` message
    GL_ATEM_ST_ANSWER,    // body of a `user` message
    GL_ATEM_ST_TOOL,      // body of a tool-call message
    GL_ATEM_ST_BETWEEN,   // after <|eom|>, waiting for <|start|>
    GL_ATEM_ST_DONE,      // after <|eot|> / <|end_of_text|> / finish()
};

struct gl_atem_parser;

// The parser starts inside the header of the generation prompt (`<|start|>assistant` already
// consumed). id_prefix: tool call ids are id_prefix + counter (NULL: "call_"). The tokenizer must
// outlive the parser.
GL_MUST_USE gl_status gl_atem_parser_new(struct gl_atem_parser **out, const struct gl_tokenizer *t,
                                         const char *id_prefix, gl_atem_sink sink, void *user,
                                         struct gl_err *err);
void gl_atem_parser_free(struct gl_atem_parser *p); // NULL-safe
// Consumes one generated token; events go to the sink before it returns. Errors: GL_E_NOMEM,
// GL_E_LIMIT (a header or tool body over its size limit; the parser stays usable and drops the
// excess).
GL_MUST_USE gl_status gl_atem_parser_feed(struct gl_atem_parser *p, gl_token id,
                                          struct gl_err *err);
// End of generation (stop, length, or after <|eot|>); idempotent. A cut header emits nothing; a
// cut reasoning/answer body emits what it held back; a cut call ends with truncated = 1.
GL_MUST_USE gl_status gl_atem_parser_finish(struct gl_atem_parser *p, struct gl_err *err);

enum gl_atem_state gl_atem_parser_state(const struct gl_atem_parser *p);
int64_t gl_atem_parser_n_consumed(const struct gl_atem_parser *p);
// 1 once the <|message|> of a `to=user` header was consumed: the next token is the first answer
// body token (where a structured-output grammar arms; never on header tokens).
int gl_atem_parser_answer_body_started(const struct gl_atem_parser *p);
// Index (0-based count of tokens fed before it) of the first answer-body token; -1 if none yet.
int64_t gl_atem_parser_answer_body_index(const struct gl_atem_parser *p);
// Same for the body of the first tool-call message (where a forced-tool-call grammar arms).
int64_t gl_atem_parser_tool_body_index(const struct gl_atem_parser *p);

// ---- OpenAI shapes ----
struct gl_atem_tool_call {
    char *id, *name;
    char *arguments; // JSON object text, parameters in order
    size_t arguments_len;
    int truncated;
};

enum gl_atem_delta_kind {
    GL_ATEM_DELTA_ROLE,      // {"role": "assistant"} (always first)
    GL_ATEM_DELTA_CONTENT,   // text
    GL_ATEM_DELTA_REASONING, // text (sent as both reasoning and reasoning_content)
    GL_ATEM_DELTA_TOOL_HEAD, // index, id, name, arguments ""
    GL_ATEM_DELTA_TOOL_ARGS, // index, text: an arguments piece
};

struct gl_atem_delta {
    enum gl_atem_delta_kind kind;
    int index;
    char *text; // NUL-terminated copy (len bytes); TOOL_HEAD: id/name live in calls[index]
    size_t len;
};

struct gl_atem_accum {
    struct gl_buf content, reasoning; // text so far (p NULL until some arrives)
    int has_content, has_reasoning;
    struct gl_atem_tool_call *calls;
    int n_calls, cap_calls;
    struct gl_atem_delta *deltas;
    size_t n_deltas, cap_deltas;
    gl_status status; // first allocation failure seen by the sink (GL_OK otherwise)
};

// init also records the role delta.
GL_MUST_USE gl_status gl_atem_accum_init(struct gl_atem_accum *a);
void gl_atem_accum_free(struct gl_atem_accum *a);
// A gl_atem_sink: pass it with the accumulator as user.
void gl_atem_accum_sink(void *accum, const struct gl_atem_event *ev);
// "tool_calls" when calls were made, else given ("stop" / "length").
const char *gl_atem_accum_finish_reason(const struct gl_atem_accum *a, const char *given);
// {"role":"assistant","content":..,"reasoning":..,"reasoning_content":..,"tool_calls":[..]};
// content is null when there was none and calls were made. NULL on allocation failure.
json_t *gl_atem_accum_message_json(const struct gl_atem_accum *a);
// The `delta` object of one streaming chunk. NULL on allocation failure.
json_t *gl_atem_delta_json(const struct gl_atem_accum *a, const struct gl_atem_delta *d);
