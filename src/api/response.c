// SPDX-License-Identifier: MIT
// api/response: engine events -> OpenAI response objects and SSE chunks (serving.md §1.4-1.5).
// Chat output is parsed from token ids by the ATEM parser (chat/atem_parse.h), never from
// decoded text, so framing tokens and header text cannot reach content under either
// skip_special_tokens setting. Completions output is the engine's text.
#include "api/api.h"
#include "api/api_int.h"
#include "base/buf.h"
#include "chat/atem_parse.h"

#include <stdio.h>
#include <string.h>

struct choice {
    struct gl_api_resp *s;
    int32_t index;
    int finished;
    const char *finish; // "stop" "length" "tool_calls" "abort"
    json_t *stop_reason;
    int32_t n_generated;
    int32_t n_cached;    // prompt tokens found in the prefix cache (engine event)
    int32_t n_reasoning; // chat: generated tokens inside the reasoning body
    // chat
    struct gl_atem_parser *parser;
    struct gl_atem_accum acc;
    size_t deltas_sent;
    struct gl_buf held; // answer text that may begin a stop string
    int stop_hit;
    // completions
    struct gl_buf text;
    size_t text_sent;
    // echo with logprobs, streamed: the prompt's entries open the choice's first chunk, which
    // waits (echo_wait) until its prompt's logprobs are all in; echo_sent once they went out
    int echo_wait, echo_sent;
    // logprobs: chat content[] entries, or completions {tokens, token_logprobs, top_logprobs,
    // text_offset}; entries not yet streamed start at lp_sent
    json_t *lp;
    size_t lp_sent;
    // completions text_offset, in characters as vLLM counts them (Python str lengths): the next
    // token's offset when it is not the first of a stream chunk, and the text's length
    size_t lp_off, text_chars;
    json_t *ids; // return_token_ids: every generated id
    size_t ids_sent;
};

struct gl_api_resp {
    const struct gl_api_config *c;
    const struct gl_api_req *r;
    struct choice *ch; // [n_prompts * n]
    int32_t n_ch, n_done;
    int64_t prompt_tokens;
    struct gl_sample_params stop_sp; // chat stop strings, for the shared matcher
    struct gl_buf sse;
    json_t *plp; // prompt_logprobs: per prompt, vLLM's list ([null, {id: {logprob, rank,
                 // decoded_token}}, ...]); NULL when not asked
    struct gl_api_rs_stream rs; // Responses API streaming: the open output item
    int64_t rs_seq;             // its events' sequence_number
    int echo_flush;             // the stream ends: no choice waits for prompt logprobs any more
    int failed;
    struct gl_api_error error; // when failed
};

// The token's text as logprobs show it; bytes the list of its bytes.
static json_t *tok_json(const struct gl_tokenizer *t, int32_t id, json_t **bytes)
{
    size_t n = 0;
    const char *p = gl_tokenizer_token_bytes(t, id, &n);
    if (!p)
        p = "", n = 0;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; *bytes && i < n; i++)
            json_array_append_new(*bytes, json_integer((unsigned char)p[i]));
    }
    return gl_api_jstr(p, n);
}

// Characters of valid UTF-8 (what gl_api_jstr returns): the bytes that start a code point.
static size_t u8_chars(const char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)p[i] & 0xC0) != 0x80;
    return k;
}

// ---- construction ----

static void chat_sink(void *user, const struct gl_atem_event *ev);
// The Responses API's streaming (below, before the events).
static void rs_start(struct gl_api_resp *s);
static void rs_deltas(struct gl_api_resp *s, struct choice *ch);
static void rs_end(struct gl_api_resp *s);
static void rs_fail(struct gl_api_resp *s);
static void content_event(struct choice *ch, const char *p, size_t n);

// continue_final_message: the prompt already holds the answer's header (`<|start|>assistant`
// then ` to=user<|message|>`, chat/render.h), so the parser reads that header first and then
// takes every generated token as answer text. The header emits no event.
static gl_status enter_answer_body(const struct gl_api_config *c, struct gl_atem_parser *p,
                                   struct gl_err *err)
{
    gl_token *ids = NULL;
    size_t n = 0;
    gl_status st = gl_tokenizer_encode(c->tok, " to=user", 8, 0, 0, &ids, &n, err);
    for (size_t i = 0; st == GL_OK && i < n; i++)
        st = gl_atem_parser_feed(p, ids[i], err);
    gl_free(ids);
    if (st == GL_OK)
        st = gl_atem_parser_feed(p, GL_ATEM_TOK_MESSAGE, err);
    if (st == GL_OK && gl_atem_parser_state(p) != GL_ATEM_ST_ANSWER)
        st = gl_err_set(err, GL_E_INVAL, "api: the ATEM parser did not enter the answer body");
    return st;
}

gl_status gl_api_resp_new(struct gl_api_resp **out, const struct gl_api_config *c,
                          const struct gl_api_req *r, struct gl_err *err)
{
    *out = NULL;
    struct gl_api_resp *s = gl_calloc(1, sizeof *s);
    if (!s)
        return gl_err_set(err, GL_E_NOMEM, "api: no memory for a response");
    s->c = c;
    s->r = r;
    s->n_ch = r->n_prompts * r->sp.n;
    s->ch = gl_calloc((size_t)s->n_ch, sizeof *s->ch);
    s->stop_sp = gl_sample_default_params();
    for (int32_t i = 0; i < r->n_chat_stop; i++)
        s->stop_sp.stop[s->stop_sp.n_stop++] = r->chat_stop[i];
    s->stop_sp.include_stop_str_in_output = r->sp.include_stop_str_in_output;
    for (int32_t i = 0; i < r->n_prompts; i++)
        s->prompt_tokens += r->prompts[i].n;
    gl_status st = s->ch ? GL_OK : gl_err_set(err, GL_E_NOMEM, "api: no memory for choices");
    if (st == GL_OK && r->sp.prompt_logprobs >= 0) { // position 0 has no logprob: null
        s->plp = json_array();
        for (int32_t i = 0; s->plp && i < r->n_prompts; i++)
            if (json_array_append_new(s->plp, json_pack("[n]")))
                json_decref(s->plp), s->plp = NULL;
        if (!s->plp)
            st = gl_err_set(err, GL_E_NOMEM, "api: no memory for prompt logprobs");
    }
    for (int32_t i = 0; st == GL_OK && i < s->n_ch; i++) {
        struct choice *ch = &s->ch[i];
        ch->s = s;
        ch->index = i;
        ch->stop_reason = json_null();
        if (r->sp.logprobs >= 0) {
            ch->lp = r->ep == GL_API_CHAT
                         ? json_array()
                         : json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs",
                                     "top_logprobs", "text_offset");
            if (!ch->lp)
                st = gl_err_set(err, GL_E_NOMEM, "api: no memory for logprobs");
        }
        if (st == GL_OK && r->return_token_ids && !(ch->ids = json_array()))
            st = gl_err_set(err, GL_E_NOMEM, "api: no memory for token ids");
        if (st == GL_OK && r->ep == GL_API_CHAT) {
            char prefix[64];
            gl_api_new_id(prefix, sizeof prefix - 1, "chatcmpl-tool-");
            strcat(prefix, "-");
            st = gl_atem_accum_init(&ch->acc);
            if (st == GL_OK)
                st = gl_atem_parser_new(&ch->parser, c->tok, prefix, chat_sink, ch, err);
            if (st == GL_OK && r->continue_final)
                st = enter_answer_body(c, ch->parser, err);
            if (st == GL_OK && r->echo_text && r->echo_len) // before any generated text
                content_event(ch, r->echo_text, r->echo_len);
        }
        if (st == GL_OK && r->ep == GL_API_COMPLETIONS && r->echo) {
            const struct gl_api_prompt *p = &r->prompts[i / r->sp.n];
            gl_buf_put(&ch->text, p->text ? p->text : "", p->text_len);
            // a stream's first offsets count the echoed text (vLLM's previous_text_lens)
            ch->text_chars = u8_chars(p->text ? p->text : "", p->text_len);
        }
    }
    if (st == GL_OK && r->responses && r->stream)
        rs_start(s);
    if (st != GL_OK || s->sse.oom) {
        gl_api_resp_free(s);
        return st != GL_OK ? st : gl_err_set(err, GL_E_NOMEM, "api: no memory for events");
    }
    *out = s;
    return GL_OK;
}

void gl_api_resp_free(struct gl_api_resp *s)
{
    if (!s)
        return;
    for (int32_t i = 0; s->ch && i < s->n_ch; i++) {
        struct choice *ch = &s->ch[i];
        gl_atem_parser_free(ch->parser);
        if (s->r->ep == GL_API_CHAT)
            gl_atem_accum_free(&ch->acc);
        gl_free(ch->held.p);
        gl_free(ch->text.p);
        json_decref(ch->lp);
        json_decref(ch->ids);
        json_decref(ch->stop_reason);
    }
    gl_free(s->ch);
    json_decref(s->plp);
    gl_free(s->sse.p);
    gl_free(s);
}

// ---- chat: answer text through the stop-string matcher ----

static void content_event(struct choice *ch, const char *p, size_t n)
{
    struct gl_atem_event ev = {.kind = GL_ATEM_EV_CONTENT, .text = p, .len = n};
    if (n)
        gl_atem_accum_sink(&ch->acc, &ev);
}

static void chat_sink(void *user, const struct gl_atem_event *ev)
{
    struct choice *ch = user;
    const struct gl_sample_params *sp = &ch->s->stop_sp;
    if (ch->stop_hit)
        return;
    if (ev->kind == GL_ATEM_EV_REASONING && !ch->s->r->include_reasoning)
        return;
    if (ev->kind != GL_ATEM_EV_CONTENT || sp->n_stop == 0) {
        if (ev->kind == GL_ATEM_EV_MSG_END && ch->held.len) { // no stop string can start now
            content_event(ch, ch->held.p, ch->held.len);
            ch->held.len = 0;
        }
        gl_atem_accum_sink(&ch->acc, ev);
        return;
    }
    gl_buf_put(&ch->held, ev->text, ev->len);
    if (ch->held.oom) {
        ch->acc.status = GL_E_NOMEM;
        return;
    }
    size_t at = 0;
    int32_t k = gl_stop_match(sp, ch->held.p, ch->held.len, &at);
    if (k >= 0) {
        size_t keep = at + (sp->include_stop_str_in_output ? strlen(sp->stop[k]) : 0);
        content_event(ch, ch->held.p, keep);
        ch->held.len = 0;
        ch->stop_hit = 1;
        json_decref(ch->stop_reason);
        ch->stop_reason = json_string(sp->stop[k]);
        return;
    }
    size_t release = ch->held.len - gl_stop_holdback(sp, ch->held.p, ch->held.len);
    content_event(ch, ch->held.p, release);
    memmove(ch->held.p, ch->held.p + release, ch->held.len - release);
    ch->held.len -= release;
}

// ---- SSE ----

static void sse_json(struct gl_api_resp *s, json_t *o)
{
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t) {
        s->sse.oom = 1;
        return;
    }
    gl_buf_put(&s->sse, "data: ", 6);
    gl_buf_put(&s->sse, t, strlen(t));
    gl_buf_put(&s->sse, "\n\n", 2);
    free(t);
}

static json_t *chunk_base(const struct gl_api_resp *s)
{
    const struct gl_api_req *r = s->r;
    return json_pack("{s:s,s:s,s:I,s:s}", "id", r->id, "object",
                     r->ep == GL_API_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)r->created, "model", s->c->model_name);
}

// OpenAI's usage with both detail objects (vLLM shows prompt_tokens_details with
// --enable-prompt-tokens-details and completion_tokens_details with a reasoning parser; glint
// always knows both).
static json_t *usage_json(const struct gl_api_resp *s)
{
    int64_t p = 0, c = 0, cached = 0, reasoning = 0;
    gl_api_resp_usage(s, &p, &c);
    gl_api_resp_usage_details(s, &cached, &reasoning);
    return json_pack("{s:I,s:I,s:I,s:{s:I},s:{s:I}}", "prompt_tokens", (json_int_t)p,
                     "completion_tokens", (json_int_t)c, "total_tokens", (json_int_t)(p + c),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)cached,
                     "completion_tokens_details", "reasoning_tokens", (json_int_t)reasoning);
}

// Logprob entries added since the last chunk, in the endpoint's shape (NULL: none).
// Completions echo with logprobs (vLLM): the prompt's tokens open the lists, from its prompt
// logprobs list pl: the first token has null logprob and top_logprobs; each other token its
// logprob and {decoded token: logprob} of itself and the top sp.logprobs. text_offset counts
// the token strings' characters from 0 through the prompt and on into the generated tokens:
// lp's own offsets (counted from `base` characters) move to follow the prompt's tokens.
static void echo_logprobs(const struct gl_api_resp *s, const struct gl_api_prompt *p, json_t *pl,
                          json_t *lp, size_t base)
{
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = 0;
    for (int32_t k = 0; tokens && lps && tops && offs && k < p->n; k++) {
        json_t *tk = tok_json(s->c->tok, p->ids[k], NULL);
        char key[16];
        snprintf(key, sizeof key, "%d", (int)p->ids[k]);
        json_t *entry = json_object_get(json_array_get(pl, (size_t)k), key), *top = NULL;
        if (entry) {
            top = json_object();
            const char *id;
            json_t *v;
            json_object_foreach(json_array_get(pl, (size_t)k), id, v)
            {
                if (v == entry ||
                    json_integer_value(json_object_get(v, "rank")) <= s->r->sp.logprobs)
                    json_object_set(top, json_string_value(json_object_get(v, "decoded_token")),
                                    json_object_get(v, "logprob"));
            }
        }
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += u8_chars(json_string_value(tk), json_string_length(tk));
        json_array_append_new(tokens, tk);
        json_array_append_new(lps, entry ? json_deep_copy(json_object_get(entry, "logprob"))
                                         : json_null());
        json_array_append_new(tops, top ? top : json_null());
    }
    const char *names[4] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    json_t *pre[4] = {tokens, lps, tops, offs}, *gen = json_object_get(lp, "text_offset"), *v;
    size_t j;
    json_array_foreach(gen, j, v)
        json_integer_set(v, json_integer_value(v) - (json_int_t)base + (json_int_t)off);
    for (int i = 0; i < 4; i++) {
        json_t *all = pre[i];
        if (all)
            json_array_extend(all, json_object_get(lp, names[i]));
        json_object_set_new(lp, names[i], all ? all : json_array());
    }
}

// The prompt logprobs of choice ch's prompt when its echo still has to open the logprobs
// (completions, echo, logprobs): NULL otherwise.
static json_t *echo_plp(const struct gl_api_resp *s, const struct choice *ch)
{
    const struct gl_api_req *r = s->r;
    if (!ch->lp || r->ep != GL_API_COMPLETIONS || !r->echo || !s->plp || ch->echo_sent)
        return NULL;
    return json_array_get(s->plp, (size_t)((ch - s->ch) / r->sp.n));
}

static json_t *lp_delta(struct choice *ch)
{
    if (!ch->lp)
        return json_null();
    if (ch->s->r->ep == GL_API_CHAT) {
        json_t *a = json_array();
        for (size_t i = ch->lp_sent; a && i < json_array_size(ch->lp); i++)
            json_array_append(a, json_array_get(ch->lp, i));
        ch->lp_sent = json_array_size(ch->lp);
        return json_pack("{s:o}", "content", a);
    }
    json_t *o = json_object();
    static const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    size_t n = json_array_size(json_object_get(ch->lp, "tokens"));
    for (int k = 0; o && k < 4; k++) {
        json_t *a = json_array(), *src = json_object_get(ch->lp, keys[k]);
        for (size_t i = ch->lp_sent; a && i < n; i++)
            json_array_append(a, json_array_get(src, i));
        json_object_set_new(o, keys[k], a);
    }
    ch->lp_sent = n;
    return o;
}

// Token ids produced since the last chunk of ch (return_token_ids), set on choice c.
static void ids_delta(struct choice *ch, json_t *c)
{
    if (!ch->ids || !c || ch->ids_sent == json_array_size(ch->ids))
        return;
    json_t *a = json_array();
    for (size_t i = ch->ids_sent; a && i < json_array_size(ch->ids); i++)
        json_array_append(a, json_array_get(ch->ids, i));
    ch->ids_sent = json_array_size(ch->ids);
    json_object_set_new(c, "token_ids", a);
}

static void sse_choice(struct gl_api_resp *s, struct choice *ch, json_t *choice)
{
    ids_delta(ch, choice);
    json_t *o = chunk_base(s);
    if (o && choice)
        json_object_set_new(o, "choices", json_pack("[o]", choice));
    if (o && s->r->continuous_usage)
        json_object_set_new(o, "usage", usage_json(s));
    sse_json(s, o);
}

// Chunks for what this event added to choice ch (streaming only).
static void stream_choice(struct gl_api_resp *s, struct choice *ch)
{
    if (s->r->responses) {
        rs_deltas(s, ch);
        return;
    }
    if (s->r->ep == GL_API_CHAT) {
        int sent_lp = 0;
        size_t nd = ch->acc.n_deltas;
        for (size_t i = ch->deltas_sent; i < nd; i++) {
            json_t *d = gl_atem_delta_json(&ch->acc, &ch->acc.deltas[i]);
            json_t *lp = i + 1 == nd ? (sent_lp = 1, lp_delta(ch)) : json_null();
            sse_choice(s, ch,
                       json_pack("{s:i,s:o,s:o,s:n}", "index", ch->index, "delta", d, "logprobs",
                                 lp, "finish_reason"));
        }
        ch->deltas_sent = nd;
        if (!sent_lp && ch->lp && ch->lp_sent < json_array_size(ch->lp))
            sse_choice(s, ch,
                       json_pack("{s:i,s:{},s:o,s:n}", "index", ch->index, "delta", "logprobs",
                                 lp_delta(ch), "finish_reason"));
    } else {
        json_t *pl = echo_plp(s, ch);
        const struct gl_api_prompt *p = &s->r->prompts[(ch - s->ch) / s->r->sp.n];
        // Another choice of the prompt (n > 1) may run ahead of choice 0, whose prefill brings
        // the prompt's logprobs: this choice's chunks wait for them (gl_api_resp_event).
        if ((ch->echo_wait = pl && json_array_size(pl) < (size_t)p->n && !s->echo_flush))
            return;
        if (ch->text_sent < ch->text.len || (ch->lp && !ch->finished) || pl) {
            json_t *t = gl_api_jstr(ch->text.p + ch->text_sent, ch->text.len - ch->text_sent);
            json_t *lp = lp_delta(ch);
            if (pl && lp) // the first chunk's offsets count from 0 through the prompt's tokens
                echo_logprobs(s, p, pl, lp, u8_chars(p->text ? p->text : "", p->text_len));
            ch->echo_sent = 1;
            ch->text_sent = ch->text.len;
            sse_choice(s, ch,
                       json_pack("{s:i,s:o,s:o,s:n,s:n}", "index", ch->index, "text", t, "logprobs",
                                 lp, "finish_reason", "stop_reason"));
        }
    }
    if (ch->finished) {
        json_t *c =
            s->r->ep == GL_API_CHAT
                ? json_pack("{s:i,s:{},s:n,s:s,s:O}", "index", ch->index, "delta", "logprobs",
                            "finish_reason", ch->finish, "stop_reason", ch->stop_reason)
                : json_pack("{s:i,s:s,s:n,s:s,s:O}", "index", ch->index, "text", "", "logprobs",
                            "finish_reason", ch->finish, "stop_reason", ch->stop_reason);
        sse_choice(s, ch, c);
    }
}

static void stream_end(struct gl_api_resp *s)
{
    if (s->r->responses) {
        rs_end(s);
        return;
    }
    // A choice 0 that ended before its prompt's logprobs were all in (an abort): the choices
    // that waited for them go out with what there is.
    s->echo_flush = 1;
    for (int32_t i = 0; i < s->n_ch; i++)
        if (s->ch[i].echo_wait)
            stream_choice(s, &s->ch[i]);
    if (s->r->include_usage) {
        json_t *o = chunk_base(s);
        if (o) {
            json_object_set_new(o, "choices", json_array());
            json_object_set_new(o, "usage", usage_json(s));
        }
        sse_json(s, o);
    }
    gl_buf_put(&s->sse, "data: [DONE]\n\n", 14);
}

// ---- the Responses API's events (responses.c builds them; here they are numbered and sent) ----

// The one choice of a Responses request (n is always 1) as responses.c sees it.
static struct gl_api_rs_result rs_result(const struct gl_api_resp *s)
{
    const struct choice *ch = &s->ch[0];
    int64_t p = 0, c = 0, cached = 0, reasoning = 0;
    gl_api_resp_usage(s, &p, &c);
    gl_api_resp_usage_details(s, &cached, &reasoning);
    return (struct gl_api_rs_result){.acc = &ch->acc,
                                     .finish = ch->finish,
                                     .input_tokens = p,
                                     .cached_tokens = cached,
                                     .output_tokens = c,
                                     .reasoning_tokens = reasoning};
}

// "event: TYPE\ndata: {...,"sequence_number": N}\n\n" for each event of ev (taken).
static void rs_send(struct gl_api_resp *s, json_t *ev)
{
    if (!ev) {
        s->sse.oom = 1;
        return;
    }
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *o = json_array_get(ev, i);
        const char *ty = json_string_value(json_object_get(o, "type"));
        json_object_set_new(o, "sequence_number", json_integer(s->rs_seq++));
        gl_buf_put(&s->sse, "event: ", 7);
        gl_buf_put(&s->sse, ty ? ty : "", ty ? strlen(ty) : 0);
        gl_buf_put(&s->sse, "\n", 1);
        sse_json(s, json_incref(o));
    }
    json_decref(ev);
}

static void rs_start(struct gl_api_resp *s)
{
    json_t *ev = json_array();
    struct gl_api_rs_result res = rs_result(s);
    json_t *snap = gl_api_rs_response(s->c, s->r, &res, NULL, 1);
    if (ev && snap) {
        json_array_append_new(ev,
                              json_pack("{s:s,s:O}", "type", "response.created", "response", snap));
        json_array_append_new(
            ev, json_pack("{s:s,s:O}", "type", "response.in_progress", "response", snap));
    }
    json_decref(snap);
    rs_send(s, ev);
}

static void rs_deltas(struct gl_api_resp *s, struct choice *ch)
{
    json_t *ev = json_array();
    if (ev)
        gl_api_rs_deltas(&s->rs, s->r, &ch->acc, ch->deltas_sent, ch->acc.n_deltas, ev);
    ch->deltas_sent = ch->acc.n_deltas;
    rs_send(s, ev);
}

static void rs_end(struct gl_api_resp *s)
{
    json_t *ev = json_array();
    struct gl_api_rs_result res = rs_result(s);
    json_t *final = gl_api_rs_response(s->c, s->r, &res, NULL, 0);
    if (ev && final)
        gl_api_rs_finish(&s->rs, s->r, &res, final, ev);
    else
        json_decref(final);
    rs_send(s, ev);
}

// An error event, then response.failed (the stream's last event).
static void rs_fail(struct gl_api_resp *s)
{
    const struct gl_api_error *e = &s->error;
    json_t *ev = json_array();
    struct gl_api_rs_result res = rs_result(s);
    json_t *failed = gl_api_rs_response(s->c, s->r, &res, e, 0);
    if (ev && failed) {
        json_array_append_new(
            ev, json_pack("{s:s,s:s,s:o,s:o}", "type", "error", "code",
                          e->http == 500 ? "server_error" : "invalid_request", "message",
                          gl_api_jstr(e->msg, strlen(e->msg)), "param",
                          e->param[0] ? gl_api_jstr(e->param, strlen(e->param)) : json_null()));
        json_array_append_new(
            ev, json_pack("{s:s,s:O}", "type", "response.failed", "response", failed));
    }
    json_decref(failed);
    rs_send(s, ev);
}

// ---- events ----

static void add_logprobs(struct choice *ch, const struct gl_event *ev, int32_t i)
{
    const struct gl_tokenizer *t = ch->s->c->tok;
    if (!ev->logprobs || !ch->lp)
        return;
    if (ch->s->r->ep == GL_API_CHAT) {
        json_t *top = json_array();
        for (int32_t k = 0; top && k < ev->top_n; k++) {
            json_t *b = NULL, *tk = tok_json(t, ev->top_ids[(size_t)i * ev->top_n + k], &b);
            json_array_append_new(
                top, json_pack("{s:o,s:f,s:o}", "token", tk, "logprob",
                               (double)ev->top_logprobs[(size_t)i * ev->top_n + k], "bytes", b));
        }
        json_t *b = NULL, *tk = tok_json(t, ev->tokens[i], &b);
        json_array_append_new(ch->lp,
                              json_pack("{s:o,s:f,s:o,s:o}", "token", tk, "logprob",
                                        (double)ev->logprobs[i], "bytes", b, "top_logprobs", top));
        return;
    }
    json_t *top = json_object();
    for (int32_t k = 0; top && k < ev->top_n; k++) {
        json_t *tk = tok_json(t, ev->top_ids[(size_t)i * ev->top_n + k], NULL);
        if (tk && json_string_value(tk))
            json_object_set_new(top, json_string_value(tk),
                                json_real((double)ev->top_logprobs[(size_t)i * ev->top_n + k]));
        json_decref(tk);
    }
    // vLLM: a chunk's first offset is the text streamed before it (0 without streaming), each
    // later one the previous offset plus the previous token string's length. An event of several
    // tokens (speculation) gives each token the offset its own one-token event would have had:
    // the text before the event plus what the tokens before it added (gl_event text_ends).
    size_t off = ch->lp_off;
    if (ch->s->r->stream && i == 0)
        off = ch->text_chars;
    else if (ch->s->r->stream && ev->text_ends)
        off = ch->text_chars + u8_chars(ev->text, ev->text_ends[i - 1]);
    json_t *tk = tok_json(t, ev->tokens[i], NULL);
    ch->lp_off = off + u8_chars(json_string_value(tk), json_string_length(tk));
    json_array_append_new(json_object_get(ch->lp, "tokens"), tk);
    json_array_append_new(json_object_get(ch->lp, "token_logprobs"),
                          json_real((double)ev->logprobs[i]));
    json_array_append_new(json_object_get(ch->lp, "top_logprobs"), top);
    json_array_append_new(json_object_get(ch->lp, "text_offset"), json_integer((json_int_t)off));
}

// One prompt position as vLLM's Logprob dict: the prompt token (its rank) and the top k (ranks
// 1..k), keyed by token id; the token appears once when it is among the top.
static json_t *plp_entry(const struct gl_tokenizer *t, const struct gl_event *ev, int32_t i,
                         int32_t token)
{
    json_t *o = json_object();
    for (int32_t k = -1; o && k < ev->plp_k; k++) {
        int32_t id = k < 0 ? token : ev->plp_top_ids[(size_t)i * (size_t)ev->plp_k + (size_t)k];
        float lp = k < 0 ? ev->plp_logprobs[i]
                         : ev->plp_top_logprobs[(size_t)i * (size_t)ev->plp_k + (size_t)k];
        char key[16];
        snprintf(key, sizeof key, "%d", (int)id);
        if (k >= 0 && id == token)
            continue;
        json_object_set_new(o, key,
                            json_pack("{s:f,s:i,s:o}", "logprob", (double)lp, "rank",
                                      k < 0 ? ev->plp_ranks[i] : k + 1, "decoded_token",
                                      tok_json(t, id, NULL)));
    }
    return o;
}

int gl_api_resp_event(struct gl_api_resp *s, int32_t prompt, const struct gl_event *ev)
{
    const struct gl_api_req *r = s->r;
    if (prompt < 0 || prompt >= r->n_prompts || ev->index < 0 || ev->index >= r->sp.n)
        return 0;
    if (ev->n_plp > 0) { // prompt logprobs (engine.h): positions in order, no tokens
        json_t *list = json_array_get(s->plp, (size_t)prompt);
        const struct gl_api_prompt *p = &r->prompts[prompt];
        for (int32_t i = 0; list && i < ev->n_plp; i++) {
            int32_t pos = ev->plp_pos + i;
            GL_ASSERT(pos >= 1 && pos < p->n && (size_t)pos == json_array_size(list));
            json_array_append_new(list, plp_entry(s->c->tok, ev, i, p->ids[pos]));
        }
        for (int32_t j = 0; r->stream && j < r->sp.n; j++) // choices that waited for the list
            if (s->ch[prompt * r->sp.n + j].echo_wait)
                stream_choice(s, &s->ch[prompt * r->sp.n + j]);
        return 0;
    }
    struct choice *ch = &s->ch[prompt * r->sp.n + ev->index];
    if (ch->finished || s->failed)
        return 0;
    if (ev->finish == GL_FINISH_ERROR) {
        // The engine failed this choice: the whole reply is an error, never a short answer
        // (streaming: an error event then [DONE], as vLLM does when its generator raises).
        struct gl_api_error e;
        (void)gl_api_fail(&e, 500, NULL, "%s", ev->error ? ev->error : "engine error");
        ch->finished = 1;
        ch->finish = "error";
        s->n_done++;
        gl_api_resp_fail(s, &e);
        return 1;
    }
    int was_hit = ch->stop_hit;
    int32_t n_used = ev->n_tokens; // tokens this choice takes from the event
    for (int32_t i = 0; i < ev->n_tokens; i++) {
        add_logprobs(ch, ev, i);
        if (ch->ids)
            json_array_append_new(ch->ids, json_integer(ev->tokens[i]));
        if (r->ep == GL_API_CHAT && !ch->stop_hit) {
            // GL_E_LIMIT (a header or call over its size limit) drops the excess and goes on.
            int in_body = gl_atem_parser_state(ch->parser) == GL_ATEM_ST_REASONING;
            gl_status st = gl_atem_parser_feed(ch->parser, ev->tokens[i], NULL);
            (void)st;
            // reasoning_tokens: the body's tokens, not the header or the token that closes it
            // (vLLM counts the tokens between the reasoning markers)
            ch->n_reasoning += in_body && gl_atem_parser_state(ch->parser) == GL_ATEM_ST_REASONING;
            // A chat stop string ends the choice at this token: the event's later tokens
            // (speculation, jump-forward) are dropped, as the events after it would be.
            if (ch->stop_hit) {
                n_used = i + 1;
                break;
            }
        }
    }
    if (r->ep == GL_API_COMPLETIONS) {
        gl_buf_put(&ch->text, ev->text ? ev->text : "", ev->text_len);
        ch->text_chars += u8_chars(ev->text ? ev->text : "", ev->text_len);
    }
    ch->n_generated = ev->n_generated - (ev->n_tokens - n_used);
    ch->n_cached =
        (int32_t)(ev->n_prompt_cached < ev->n_prompt ? ev->n_prompt_cached : ev->n_prompt);
    int hit_now = ch->stop_hit && !was_hit;
    if (ev->finish != GL_FINISH_NONE || hit_now) {
        ch->finished = 1;
        s->n_done++;
        const char *f = hit_now ? "stop" : gl_finish_name(ev->finish);
        if (!hit_now && ev->stop_matched) {
            json_decref(ch->stop_reason);
            ch->stop_reason = json_string(ev->stop_matched);
        } else if (!hit_now && ev->stop_token >= 0 && ev->finish == GL_FINISH_STOP) {
            // vLLM reports EOS as stop_reason null and other stop ids by their id.
            int eos = 0;
            for (int32_t k = 0; k < s->c->n_eos; k++)
                eos |= s->c->eos_ids[k] == ev->stop_token;
            eos |= ev->stop_token == gl_tokenizer_eos(s->c->tok);
            if (!eos) {
                json_decref(ch->stop_reason);
                ch->stop_reason = json_integer(ev->stop_token);
            }
        }
        if (r->ep == GL_API_CHAT) {
            gl_status st = gl_atem_parser_finish(ch->parser, NULL); // fails only without memory
            (void)st;
            if (ch->held.len) {
                content_event(ch, ch->held.p, ch->held.len);
                ch->held.len = 0;
            }
            // A call cut by max_tokens is not a finished call: the reason stays "length".
            int cut = ch->acc.n_calls > 0 && ch->acc.calls[ch->acc.n_calls - 1].truncated;
            if (!cut)
                f = gl_atem_accum_finish_reason(&ch->acc, f);
        }
        ch->finish = f;
    }
    if (r->stream) {
        stream_choice(s, ch);
        if (gl_api_resp_done(s))
            stream_end(s);
    }
    return hit_now;
}

int gl_api_resp_done(const struct gl_api_resp *s)
{
    return s->n_done == s->n_ch || s->failed;
}

char *gl_api_resp_take_sse(struct gl_api_resp *s, size_t *len)
{
    *len = 0;
    if (!s->sse.len)
        return NULL;
    char *p = s->sse.p;
    *len = s->sse.len;
    memset(&s->sse, 0, sizeof s->sse);
    return p;
}

void gl_api_resp_fail(struct gl_api_resp *s, const struct gl_api_error *e)
{
    if (s->failed)
        return;
    s->failed = 1;
    s->error = *e;
    if (!s->r->stream)
        return;
    if (s->r->responses) {
        rs_fail(s);
        return;
    }
    sse_json(s, gl_api_error_json(e));
    gl_buf_put(&s->sse, "data: [DONE]\n\n", 14);
}

json_t *gl_api_resp_json(const struct gl_api_resp *s)
{
    const struct gl_api_req *r = s->r;
    if (r->responses) {
        struct gl_api_rs_result res = rs_result(s);
        return gl_api_rs_response(s->c, r, &res, NULL, 0);
    }
    json_t *choices = json_array();
    for (int32_t i = 0; choices && i < s->n_ch; i++) {
        struct choice *ch = &s->ch[i];
        json_t *lp = json_null();
        if (ch->lp)
            lp = r->ep == GL_API_CHAT ? json_pack("{s:O}", "content", ch->lp)
                                      : json_deep_copy(ch->lp);
        json_t *pl = echo_plp(s, ch);
        if (pl)
            echo_logprobs(s, &r->prompts[i / r->sp.n], pl, lp, 0);
        json_t *c;
        if (r->ep == GL_API_CHAT) {
            json_t *msg = gl_atem_accum_message_json(&ch->acc);
            if (msg && !r->include_reasoning) {
                json_object_del(msg, "reasoning");
                json_object_del(msg, "reasoning_content");
            }
            c = json_pack("{s:i,s:o,s:o,s:s,s:O}", "index", ch->index, "message", msg, "logprobs",
                          lp, "finish_reason", ch->finish ? ch->finish : "abort", "stop_reason",
                          ch->stop_reason);
        } else {
            c = json_pack("{s:i,s:o,s:o,s:s,s:O}", "index", ch->index, "text",
                          gl_api_jstr(ch->text.p ? ch->text.p : "", ch->text.len), "logprobs", lp,
                          "finish_reason", ch->finish ? ch->finish : "abort", "stop_reason",
                          ch->stop_reason);
        }
        if (c && s->plp && r->ep == GL_API_COMPLETIONS)
            json_object_set(c, "prompt_logprobs", json_array_get(s->plp, (size_t)(i / r->sp.n)));
        if (c && ch->ids) {
            json_object_set(c, "token_ids", ch->ids);
            const struct gl_api_prompt *p = &r->prompts[i / r->sp.n];
            json_t *pa = json_array();
            for (int32_t k = 0; pa && k < p->n; k++)
                json_array_append_new(pa, json_integer(p->ids[k]));
            json_object_set_new(c, "prompt_token_ids", pa);
        }
        if (!c || json_array_append_new(choices, c)) {
            json_decref(choices);
            return NULL;
        }
    }
    json_t *o = chunk_base(s);
    if (!o || !choices) {
        json_decref(o);
        json_decref(choices);
        return NULL;
    }
    json_object_set_new(o, "object",
                        json_string(r->ep == GL_API_CHAT ? "chat.completion" : "text_completion"));
    json_object_set_new(o, "choices", choices);
    if (s->plp && r->ep == GL_API_CHAT)
        json_object_set(o, "prompt_logprobs", json_array_get(s->plp, 0));
    json_object_set_new(o, "usage", usage_json(s));
    return o;
}

int32_t gl_api_resp_n_choices(const struct gl_api_resp *s)
{
    return s->n_ch;
}

const char *gl_api_resp_finish(const struct gl_api_resp *s, int32_t choice)
{
    return choice >= 0 && choice < s->n_ch && s->ch[choice].finish ? s->ch[choice].finish : "abort";
}

void gl_api_resp_usage(const struct gl_api_resp *s, int64_t *prompt, int64_t *completion)
{
    int64_t c = 0;
    for (int32_t i = 0; i < s->n_ch; i++)
        c += s->ch[i].n_generated;
    *prompt = s->prompt_tokens;
    *completion = c;
}

void gl_api_resp_usage_details(const struct gl_api_resp *s, int64_t *cached, int64_t *reasoning)
{
    *cached = *reasoning = 0;
    for (int32_t i = 0; i < s->n_ch; i++) {
        // a prompt's cache hit once (its first choice's: vLLM reports the request's), however
        // many choices share it
        if (i % s->r->sp.n == 0)
            *cached += s->ch[i].n_cached;
        *reasoning += s->ch[i].n_reasoning;
    }
}

const struct gl_api_error *gl_api_resp_error(const struct gl_api_resp *s)
{
    return s->failed ? &s->error : NULL;
}
