// SPDX-License-Identifier: MIT
// harness/run_harness.c: what `glint run` and `glint eval` do once their flags are parsed
// (harness.h; the flags are cli/cmd_run.c's).
// `glint run`: prompt -> prefill (batched) -> decode loop with the sampler, streaming UTF-8-safe
// text to stdout; stops at EOS/EOT or -n tokens. `glint run --batch IN.jsonl`: every line a
// /v1/completions request body (api/ parses it) run concurrently through the engine, one JSON
// result per line. `glint eval`: teacher-forced logits for given ids (all positions, optionally
// chunked with --batch) and per-layer hidden-state dumps for the reference checks. Flags are a
// contract used by the oracle scripts: keep them stable.
#include "api/api.h"
#include "engine/engine.h"
#include "grammar/grammar.h"
#include "harness.h"
#include "media/media.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFILL_BATCH 512

// Model + tokenizer + step context + KV cache of one command.
struct cli_model {
    struct gl_model *model;
    struct gl_tokenizer *tok;
    struct gl_model_ctx *ctx;
    struct gl_kv_cache *kv;
};

static gl_status cli_model_open(struct cli_model *cm, const struct gl_run_opts *o, const char *path,
                                const char *mmproj, int want_tok, struct gl_err *err)
{
    memset(cm, 0, sizeof *cm);
    struct gl_model_params mp = gl_model_default_params();
    mp.mmproj = mmproj;
    mp.progress = o->progress;
    mp.progress_user = o->progress_user;
    gl_status st = gl_model_open(&cm->model, path, &mp, err);
    if (st == GL_OK && want_tok)
        st = gl_model_load_tokenizer(cm->model, &cm->tok, err);
    return st;
}

static gl_status cli_model_start(struct cli_model *cm, int n_batch, int n_threads, int64_t n_ctx,
                                 int device, int n_gpu_layers, struct gl_err *err)
{
    const struct gl_model_dev d = {.device = device, .n_gpu_layers = n_gpu_layers};
    gl_status st = gl_model_ctx_new_ex(&cm->ctx, cm->model, n_batch, n_threads, n_ctx, &d, err);
    if (st == GL_OK)
        st = gl_kv_cache_new(&cm->kv, &cm->model->cfg, n_ctx, err);
    return st;
}

static void cli_model_close(struct cli_model *cm)
{
    gl_kv_cache_delete(cm->kv);
    gl_model_ctx_delete(cm->ctx);
    gl_tokenizer_free(cm->tok);
    gl_model_delete(cm->model);
    memset(cm, 0, sizeof *cm);
}

static int parse_ids(const char *s, int32_t **ids, int64_t *n)
{
    int64_t cap = 16, cnt = 0;
    int32_t *v = gl_malloc((size_t)cap * sizeof *v);
    if (!v)
        return -1;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n' || *p == '[' || *p == ']')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            gl_free(v);
            return -1;
        }
        if (cnt == cap) {
            cap *= 2;
            int32_t *nv = gl_realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                gl_free(v);
                return -1;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = cnt;
    return 0;
}

static int stream_bytes(const char *buf, int n)
{
    if (n > 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
    return 0;
}

// --show-tensors: where each tensor's bytes live (stderr). Weights are borrowed from the file
// mapping (or the in-memory copy with GLINT_MMAP=0) unless they were repacked into resident
// memory (Q4_K/Q6_K, GLINT_REPACK) or GLINT_GGUF_KEEP_QUANT=0 expanded them into f32 heap copies.
static void show_tensors(const struct gl_model *m)
{
    const struct gl_gguf *g = m->gguf;
    if (!g) {
        for (int64_t i = 0; i < gl_safetensors_n_tensors(m->st); i++) {
            const struct gl_safetensors_tensor *t = gl_safetensors_tensor_at(m->st, i);
            fprintf(stderr, "tensor %-48s %-4s %12llu B in %s (mmap)\n", t->name,
                    gl_safetensors_dtype_name(t->dtype), (unsigned long long)t->nbytes,
                    gl_safetensors_shard_path(m->st, t->shard));
        }
        return;
    }
    const char *src = gl_gguf_is_mmapped(g) ? "mmap" : "heap (file read into memory)";
    uint64_t total = 0;
    for (int64_t i = 0; i < gl_gguf_n_tensors(g); i++) {
        const struct gl_gguf_tensor *t = gl_gguf_tensor_at(g, i);
        const struct gl_type_traits *tr = gl_type_traits_of(t->type);
        const char *where = src;
        if (!m->keep_quant && t->type != GL_TYPE_F32 && t->n_dims == 2)
            where = "heap (f32 copy)";
        else if (gl_model_is_repacked(m, t->data))
            where = "resident (r16 repack)";
        fprintf(stderr, "tensor %-32.*s %-5s [%lld, %lld] %12llu B at file offset %llu: %s\n",
                (int)t->name.len, t->name.ptr, tr && tr->name ? tr->name : "?", (long long)t->ne[0],
                (long long)t->ne[1], (unsigned long long)t->n_bytes,
                (unsigned long long)(gl_gguf_data_offset(g) + t->offset), where);
        total += t->n_bytes;
    }
    fprintf(stderr, "tensors: %lld, %.3f GiB of weights, %s\n", (long long)gl_gguf_n_tensors(g),
            (double)total / (1024.0 * 1024.0 * 1024.0),
            m->keep_quant ? "kept in their file types" : "expanded to f32");
}

// ---- batch (JSONL) ----
// One /v1/completions request per input line, parsed by api/ (the server's parser: same fields,
// limits and messages, structured output included); all lines run concurrently through the
// engine and one result line per input line is written in input order. A bad line gets an error
// object; the others still run.

struct choice_out {
    int32_t *ids;
    int64_t n_ids;
    size_t cap_ids, cap_lp;
    char *text;
    size_t n_text, cap_text;
    float *lp;        // [n_ids] when logprobs were requested
    int32_t *top_ids; // [n_ids * top_n]
    float *top_lp;    // [n_ids * top_n]
    size_t cap_top_ids, cap_top_lp;
    enum gl_finish finish;
    char *stop_str; // owned copy
    int32_t stop_token;
    int oom;
};

struct line_out {
    struct gl_api_error err; // err.msg non-empty: this line failed
    int32_t n_prompt, n_choices, want_lp, top_n;
    struct choice_out *ch;
};

static int grow_buf(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *n = gl_realloc(*p, nc * elem);
    if (!n)
        return -1;
    *p = n;
    *cap = nc;
    return 0;
}

static void batch_event(void *user, const struct gl_event *ev)
{
    struct line_out *lo = user;
    struct choice_out *c = &lo->ch[ev->index];
    size_t need = (size_t)(c->n_ids + ev->n_tokens);
    if (grow_buf((void **)&c->ids, &c->cap_ids, need, sizeof *c->ids) ||
        (lo->want_lp && grow_buf((void **)&c->lp, &c->cap_lp, need, sizeof *c->lp)) ||
        (lo->top_n > 0 && (grow_buf((void **)&c->top_ids, &c->cap_top_ids, need * (size_t)lo->top_n,
                                    sizeof *c->top_ids) ||
                           grow_buf((void **)&c->top_lp, &c->cap_top_lp, need * (size_t)lo->top_n,
                                    sizeof *c->top_lp))) ||
        grow_buf((void **)&c->text, &c->cap_text, c->n_text + ev->text_len + 1, 1)) {
        c->oom = 1;
    } else {
        for (int32_t i = 0; i < ev->n_tokens; i++) {
            if (lo->want_lp)
                c->lp[c->n_ids] = ev->logprobs ? ev->logprobs[i] : 0.0f;
            for (int32_t k = 0; k < lo->top_n; k++) {
                int ok = ev->top_ids && k < ev->top_n;
                c->top_ids[c->n_ids * lo->top_n + k] = ok ? ev->top_ids[i * ev->top_n + k] : -1;
                c->top_lp[c->n_ids * lo->top_n + k] = ok ? ev->top_logprobs[i * ev->top_n + k] : 0;
            }
            c->ids[c->n_ids++] = ev->tokens[i];
        }
        memcpy(c->text + c->n_text, ev->text, ev->text_len);
        c->n_text += ev->text_len;
    }
    if (ev->finish != GL_FINISH_NONE) {
        c->finish = ev->finish;
        c->stop_token = ev->stop_token;
        if (ev->stop_matched) {
            size_t n = strlen(ev->stop_matched) + 1;
            c->stop_str = gl_malloc(n);
            if (c->stop_str)
                memcpy(c->stop_str, ev->stop_matched, n);
        }
    }
}

// Writes s as a JSON string; invalid UTF-8 becomes U+FFFD (as a lossy decode would).
static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            i++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            i++;
        } else if (c < 0x80) {
            fputc(c, f);
            i++;
        } else {
            int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            int ok = len > 0 && i + (size_t)len <= n;
            for (int k = 1; ok && k < len; k++)
                ok = ((unsigned char)s[i + (size_t)k] & 0xC0) == 0x80;
            if (ok && len == 3) { // no overlongs or surrogates
                unsigned char d = (unsigned char)s[i + 1];
                ok = !(c == 0xE0 && d < 0xA0) && !(c == 0xED && d >= 0xA0);
            } else if (ok && len == 4) {
                unsigned char d = (unsigned char)s[i + 1];
                ok = !(c == 0xF0 && d < 0x90) && !(c == 0xF4 && d >= 0x90);
            }
            if (ok) {
                fwrite(s + i, 1, (size_t)len, f);
                i += (size_t)len;
            } else {
                fputs("\xEF\xBF\xBD", f);
                i++;
            }
        }
    }
    fputc('"', f);
}

// One input line -> the /v1/completions body gl_api_parse reads: "prompt_token_ids" becomes a
// token-id "prompt" (*ids_prompt = 1) and "model" is dropped (the batch has one model). Exactly
// one prompt per line: a text or one list of ids. NULL with e filled on a bad line.
static char *completions_body(const char *line, int *ids_prompt, struct gl_api_error *e)
{
    json_error_t je;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
    json_t *pt = json_object_get(o, "prompt"), *pi = json_object_get(o, "prompt_token_ids");
    json_t *id0 = json_array_get(pi, 0); // a list or a string here would make several prompts
    char *body = NULL;
    *ids_prompt = pi != NULL;
    if (!json_is_object(o))
        (void)gl_api_fail(e, 400, "", "not a JSON object: %s", o ? "wrong type" : je.text);
    else if (!pt == !pi)
        (void)gl_api_fail(e, 400, "prompt",
                          "need exactly one of \"prompt\" and \"prompt_token_ids\"");
    else if (pt && !json_is_string(pt))
        (void)gl_api_fail(e, 400, "prompt", "prompt: expected a string");
    else if (pi && (!json_is_array(pi) || json_is_array(id0) || json_is_string(id0)))
        (void)gl_api_fail(e, 400, "prompt_token_ids",
                          "prompt_token_ids: expected an array of token ids");
    else if (pi && (json_object_set(o, "prompt", pi) || json_object_del(o, "prompt_token_ids")))
        (void)gl_api_fail(e, 500, NULL, "out of memory");
    else {
        (void)json_object_del(o, "model"); // -1 when absent
        if (!(body = json_dumps(o, JSON_COMPACT)))
            (void)gl_api_fail(e, 500, NULL, "out of memory");
    }
    json_decref(o);
    return body;
}

static void line_free(struct line_out *lo)
{
    for (int32_t i = 0; lo->ch && i < lo->n_choices; i++) {
        gl_free(lo->ch[i].ids);
        gl_free(lo->ch[i].text);
        gl_free(lo->ch[i].lp);
        gl_free(lo->ch[i].top_ids);
        gl_free(lo->ch[i].top_lp);
        gl_free(lo->ch[i].stop_str);
    }
    gl_free(lo->ch);
}

static void write_choice(FILE *f, const struct choice_out *c, int32_t top_n)
{
    fputs("\"text\": ", f);
    json_str(f, c->text ? c->text : "", c->n_text);
    fputs(", \"token_ids\": [", f);
    for (int64_t i = 0; i < c->n_ids; i++)
        fprintf(f, "%s%d", i ? ", " : "", c->ids[i]);
    fprintf(f, "], \"finish_reason\": \"%s\", \"stop_reason\": ", gl_finish_name(c->finish));
    if (c->stop_str)
        json_str(f, c->stop_str, strlen(c->stop_str));
    else if (c->stop_token >= 0 && c->finish == GL_FINISH_STOP)
        fprintf(f, "%d", c->stop_token);
    else
        fputs("null", f);
    if (c->lp) {
        fputs(", \"logprobs\": [", f);
        for (int64_t i = 0; i < c->n_ids; i++)
            fprintf(f, "%s%.6g", i ? ", " : "", (double)c->lp[i]);
        fputc(']', f);
    }
    if (c->top_ids) { // vLLM's shape: per token, {token id: logprob} of the top_n
        fputs(", \"top_logprobs\": [", f);
        for (int64_t i = 0; i < c->n_ids; i++) {
            fputs(i ? ", {" : "{", f);
            for (int32_t k = 0, first = 1; k < top_n; k++) {
                if (c->top_ids[i * top_n + k] < 0)
                    continue;
                fprintf(f, "%s\"%d\": %.6g", first ? "" : ", ", c->top_ids[i * top_n + k],
                        (double)c->top_lp[i * top_n + k]);
                first = 0;
            }
            fputc('}', f);
        }
        fputc(']', f);
    }
}

static void write_line(FILE *f, int64_t index, const struct line_out *lo)
{
    fprintf(f, "{\"index\": %lld, ", (long long)index);
    if (lo->err.msg[0]) {
        fputs("\"error\": {\"message\": ", f);
        json_str(f, lo->err.msg, strlen(lo->err.msg));
        fprintf(f, ", \"type\": \"%s\", \"code\": %d}}\n", lo->err.type, lo->err.http);
        return;
    }
    write_choice(f, &lo->ch[0], lo->top_n);
    int64_t n_gen = 0;
    for (int32_t i = 0; i < lo->n_choices; i++)
        n_gen += lo->ch[i].n_ids;
    if (lo->n_choices > 1) {
        fputs(", \"outputs\": [", f);
        for (int32_t i = 0; i < lo->n_choices; i++) {
            fprintf(f, "%s{\"index\": %d, ", i ? ", " : "", i);
            write_choice(f, &lo->ch[i], lo->top_n);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fprintf(f, ", \"usage\": {\"prompt_tokens\": %d, \"completion_tokens\": %lld}}\n", lo->n_prompt,
            (long long)n_gen);
}

struct batch_opts {
    const char *in, *out, *model;
    long long max_seqs, max_tokens, threads;
    int64_t kv_bytes;
    enum gl_kv_dtype kv_dtype;
    int device, n_gpu_layers;
};

// Reads every line of path (a trailing line without '\n' counts; blank lines are skipped).
static char **read_lines(const char *path, int64_t *n_lines)
{
    FILE *f = !strcmp(path, "-") ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    char **lines = NULL, *buf = NULL;
    size_t cap = 0, bcap = 0;
    int64_t n = 0;
    ssize_t len;
    while ((len = getline(&buf, &bcap, f)) >= 0) {
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            buf[--len] = 0;
        if (len == 0)
            continue;
        if (grow_buf((void **)&lines, &cap, (size_t)n + 1, sizeof *lines))
            break;
        lines[n] = gl_malloc((size_t)len + 1);
        if (!lines[n])
            break;
        memcpy(lines[n++], buf, (size_t)len + 1);
    }
    free(buf);
    if (f != stdin)
        fclose(f);
    *n_lines = n;
    return lines ? lines : gl_calloc(1, sizeof *lines);
}

// Parses one line into lo and submits it (a bad line only fills lo->err). Returns -1 when the
// engine itself failed (err).
static int submit_line(struct gl_engine *e, const struct gl_api_config *cfg,
                       struct gl_api_mask_stats *ms, const char *line, struct line_out *lo,
                       struct gl_err *err)
{
    int ids_prompt = 0;
    struct gl_api_req *r = NULL;
    char *body = completions_body(line, &ids_prompt, &lo->err);
    if (body && gl_api_parse(cfg, GL_API_COMPLETIONS, body, strlen(body), &r, &lo->err) != GL_OK &&
        ids_prompt && !strncmp(lo->err.msg, "prompt", 6) && lo->err.msg[6] != '_') {
        char m[sizeof lo->err.msg]; // name the field the line used
        snprintf(m, sizeof m, "prompt_token_ids%s", lo->err.msg + 6);
        memcpy(lo->err.msg, m, sizeof m);
    }
    free(body);
    if (!r)
        return 0;
    struct gl_request rq;
    gl_api_req_engine_request(r, 0, &rq);
    rq.on_event = batch_event;
    rq.user = lo;
    lo->n_prompt = rq.n_prompt;
    lo->n_choices = rq.sp.n;
    lo->want_lp = rq.sp.logprobs >= 0;
    lo->top_n = rq.sp.logprobs > 0 ? rq.sp.logprobs : 0;
    lo->ch = gl_calloc((size_t)rq.sp.n, sizeof *lo->ch);
    gl_status st = lo->ch ? GL_E_AGAIN : gl_err_set(err, GL_E_NOMEM, "out of memory");
    int rc = 0;
    while (st == GL_E_AGAIN) {
        // The engine frees the processors when it refuses them: new ones for every try.
        if ((st = gl_api_make_procs(cfg, r, ms, &rq.procs, err)) != GL_OK)
            break;
        st = gl_engine_submit(e, &rq, NULL, err);
        gl_free(rq.procs);
        int n_active; // queue full: run the engine until there is room
        if (st == GL_E_AGAIN && gl_engine_step(e, &n_active, err) != GL_OK) {
            rc = -1;
            break;
        }
    }
    if (st != GL_OK && rc == 0)
        (void)gl_api_fail(&lo->err, st == GL_E_NOMEM ? 500 : 400, "", "%s", err->msg);
    gl_api_req_free(cfg, r); // the engine copied what it keeps
    return rc;
}

static int run_batch(struct cli_model *cm, const struct batch_opts *bo)
{
    struct gl_err err = {0};
    int64_t n = 0;
    char **lines = read_lines(bo->in, &n);
    if (!lines) {
        fprintf(stderr, "glint run: cannot read %s: %s\n", bo->in, strerror(errno));
        return 1;
    }
    struct line_out *lo = gl_calloc((size_t)(n ? n : 1), sizeof *lo);
    struct gl_engine *e = NULL;
    struct gl_gvocab *gvocab = NULL;
    struct gl_grammar_cache *gcache = NULL;
    pthread_mutex_t grammar_lock = PTHREAD_MUTEX_INITIALIZER;
    struct gl_api_mask_stats ms = {0};
    struct gl_engine_params ep = gl_engine_default_params(cm->model);
    ep.max_num_seqs = (int32_t)bo->max_seqs;
    ep.max_num_batched_tokens = (int32_t)bo->max_tokens;
    ep.n_threads = (int)bo->threads;
    ep.kv.budget_bytes = bo->kv_bytes;
    ep.kv.dtype = bo->kv_dtype;
    ep.device = bo->device;
    ep.n_gpu_layers = bo->n_gpu_layers;
    // The server's request settings (server.c load()): the model's EOS set, default sampling.
    struct gl_api_config cfg = {.tok = cm->tok,
                                .grammar_lock = &grammar_lock,
                                .model_name = bo->model, // unused: lines' "model" is dropped
                                .max_model_len = ep.max_model_len,
                                .max_logprobs = GL_SAMPLE_MAX_LOGPROBS,
                                .defaults = gl_sample_default_params(),
                                .n_eos = ep.n_eos,
                                .framing = 1};
    memcpy(cfg.eos_ids, ep.eos_ids, sizeof cfg.eos_ids);
    int rc = 1;
    if (!lo || gl_gvocab_new(&gvocab, cm->tok, &err) != GL_OK ||
        gl_grammar_cache_new(&gcache, 64, &err) != GL_OK ||
        gl_engine_new(&e, cm->model, cm->tok, &ep, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", lo ? err.msg : "out of memory");
        goto done;
    }
    cfg.gvocab = gvocab;
    cfg.gcache = gcache;
    int64_t t0 = gl_time_us();
    for (int64_t i = 0; i < n; i++) {
        if (submit_line(e, &cfg, &ms, lines[i], &lo[i], &err)) {
            fprintf(stderr, "glint run: %s\n", err.msg);
            goto done;
        }
    }
    if (gl_engine_run(e, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        goto done;
    }
    double secs = (double)(gl_time_us() - t0) / 1e6;
    FILE *out = bo->out ? fopen(bo->out, "wb") : stdout;
    if (!out) {
        fprintf(stderr, "glint run: cannot create %s: %s\n", bo->out, strerror(errno));
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        write_line(out, i, &lo[i]);
    if ((out != stdout && fclose(out) != 0) || (out == stdout && fflush(out) != 0)) {
        fprintf(stderr, "glint run: short write to %s\n", bo->out ? bo->out : "stdout");
        goto done;
    }
    struct gl_engine_stats st;
    gl_engine_stats(e, &st);
    fprintf(stderr,
            "batch: %lld requests in %.2f s; prompt %lld tokens, generated %lld (%.2f tok/s); "
            "%lld steps, %d preemptions, %lld prefix-hit tokens\n",
            (long long)n, secs, (long long)st.prompt_tokens, (long long)st.generated_tokens,
            secs > 0 ? (double)st.generated_tokens / secs : 0.0, (long long)st.steps,
            st.n_preempted_total, (long long)st.prefix_hit_tokens);
    rc = 0;
done:
    gl_engine_free(e); // frees the processors: their grammar references go
    gl_grammar_cache_free(gcache);
    gl_gvocab_free(gvocab); // after every grammar (grammar.h)
    for (int64_t i = 0; i < n; i++) {
        if (lo)
            line_free(&lo[i]);
        gl_free(lines[i]);
    }
    gl_free(lo);
    gl_free(lines);
    return rc;
}

// --image / --video: the whole file, at most max + 1 bytes (an over-limit file then fails the
// decoder's byte limit with its own message). NULL if it cannot be read.
static uint8_t *read_media(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 1 << 16;
            nc = nc < max + 1 ? nc : max + 1; // never more than the limit + 1
            uint8_t *nb = nc > cap ? gl_realloc(buf, nc) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        gl_free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

// Expands the prompt's <|patch|> / <|video|> placeholders with the --image / --video files
// (media/): *prompt becomes the expanded ids, *embd ([n_prompt] pointers, NULL for text
// positions) points into mp's rows.
static gl_status expand_media(const struct cli_model *cm, const struct gl_run_opts *o,
                              int32_t **prompt, int64_t *n_prompt, struct gl_media_prompt *mp,
                              const float ***embd, struct gl_err *err)
{
    const struct gl_media_params p = gl_media_default_params();
    struct gl_media_part parts[GL_MEDIA_MAX_PARTS];
    uint8_t *bytes[GL_MEDIA_MAX_PARTS] = {0};
    gl_status st = GL_OK;
    for (int i = 0; i < o->n_media && st == GL_OK; i++) {
        const int video = o->media_kind[i] == GL_MEDIA_VIDEO;
        size_t n = 0;
        if (!(bytes[i] = read_media(o->media[i],
                                    video ? p.video_limits.max_bytes : p.limits.max_bytes, &n)))
            st = gl_err_set(err, GL_E_IO, "--%s %s: cannot read it", video ? "video" : "image",
                            o->media[i]);
        parts[i] = (struct gl_media_part){.data = bytes[i], .n = n, .kind = o->media_kind[i]};
    }
    struct gl_pool *pool = st == GL_OK ? gl_pool_new((int)o->threads) : NULL;
    if (st == GL_OK && !pool)
        st = gl_err_set(err, GL_E_NOMEM, "cannot start %lld threads", o->threads);
    if (st == GL_OK && *n_prompt > INT32_MAX)
        st = gl_err_set(err, GL_E_LIMIT, "prompt of %lld tokens", (long long)*n_prompt);
    if (st == GL_OK)
        st = gl_media_expand(cm->model, cm->tok, pool, *prompt, (int32_t)*n_prompt, parts,
                             o->n_media, &p, mp, err);
    gl_pool_delete(pool);
    for (int i = 0; i < o->n_media; i++)
        gl_free(bytes[i]);
    if (st == GL_OK && !(*embd = gl_calloc((size_t)mp->n_ids, sizeof **embd)))
        st = gl_err_set(err, GL_E_NOMEM, "no memory for %d row pointers", mp->n_ids);
    if (st != GL_OK)
        return st;
    const int64_t E = cm->model->cfg.n_embd;
    for (int32_t i = 0; i < mp->n_media; i++)
        for (int32_t r = 0; r < mp->media[i].n_rows; r++)
            (*embd)[mp->media[i].pos + r] = mp->media[i].embd + r * E;
    gl_free(*prompt);
    *prompt = mp->ids;
    *n_prompt = mp->n_ids;
    mp->ids = NULL;
    return GL_OK;
}

int gl_harness_run(const struct gl_run_opts *po)
{
    struct gl_run_opts o = *po;
    struct gl_err err = {0};
    struct cli_model cm;
    int rc = 1;
    int32_t *prompt = NULL, *gen = NULL;
    int64_t n_prompt = 0;
    struct gl_media_prompt mp = {0};
    const float **embd = NULL; // --image: input rows per prompt position
    float *logits = NULL;
    struct gl_sample_work smp = {0};
    struct gl_rng rng;
    gl_rng_seed(&rng, o.sp.seed);
    if (cli_model_open(&cm, &o, o.model, o.mmproj, 1, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        cli_model_close(&cm);
        return 1;
    }
    const struct gl_model_config *cf = &cm.model->cfg;
    if (o.show_tensors)
        show_tensors(cm.model);
    if (o.batch) {
        struct batch_opts bo = {o.batch,   o.out,      o.model,    o.max_seqs, o.max_tokens,
                                o.threads, o.kv_bytes, o.kv_dtype, o.device,   o.n_gpu_layers};
        if (bo.max_tokens < bo.max_seqs)
            bo.max_tokens = bo.max_seqs;
        rc = run_batch(&cm, &bo);
        cli_model_close(&cm);
        return rc;
    }
    if (o.prompt_ids) {
        if (parse_ids(o.prompt_ids, &prompt, &n_prompt)) {
            fprintf(stderr, "glint run: --prompt-ids: not a list of token ids\n");
            rc = 2;
            goto done;
        }
    } else {
        gl_token *ids = NULL;
        size_t n_ids = 0;
        if (gl_tokenizer_encode(cm.tok, o.prompt, strlen(o.prompt), o.special,
                                gl_tokenizer_add_bos(cm.tok), &ids, &n_ids, &err) != GL_OK) {
            fprintf(stderr, "glint run: %s\n", err.msg);
            goto done;
        }
        prompt = ids;
        n_prompt = (int64_t)n_ids;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "glint run: the prompt is empty\n");
        rc = 2;
        goto done;
    }
    if (o.n_media > 0 && expand_media(&cm, &o, &prompt, &n_prompt, &mp, &embd, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        goto done;
    }
    int64_t n_ctx = n_prompt + o.n_gen;
    if (n_ctx > cf->n_ctx_train) {
        fprintf(stderr, "glint run: prompt %lld + %lld tokens exceeds context_length %d\n",
                (long long)n_prompt, o.n_gen, cf->n_ctx_train);
        rc = 2;
        goto done;
    }
    int n_batch = n_prompt < PREFILL_BATCH ? (int)n_prompt : PREFILL_BATCH;
    if (cli_model_start(&cm, n_batch, (int)o.threads, n_ctx, o.device, o.n_gpu_layers, &err) !=
            GL_OK ||
        gl_sample_params_check(&o.sp, cf->n_vocab, &err) != GL_OK ||
        gl_sample_work_init(&smp, cf->n_vocab, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        goto done;
    }
    logits = gl_malloc((size_t)cf->n_vocab * sizeof(float));
    gen = gl_malloc((size_t)(o.n_gen + 1) * sizeof *gen);
    if (!logits || !gen) {
        fprintf(stderr, "glint run: out of memory\n");
        goto done;
    }

    const gl_token eos = gl_tokenizer_eos(cm.tok), eot = gl_tokenizer_eot(cm.tok);
    int64_t t0 = gl_time_us();
    if (gl_model_forward_embd(cm.ctx, cm.kv, prompt, embd, n_prompt, 0, logits, 0, NULL, &err) !=
        GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        goto done;
    }
    int64_t t1 = gl_time_us();
    struct gl_detok dt = {0};
    char buf[1024];
    int64_t n_out = 0;
    int64_t pos = n_prompt;
    while (n_out < o.n_gen) {
        gl_sample_process(&o.sp, logits, &smp, prompt, n_prompt, gen, n_out);
        int32_t id = gl_sample_pick(&o.sp, logits, &smp, &rng);
        gen[n_out++] = id;
        if (id == GL_TOK_EOS || id == GL_TOK_EOT || id == eos || (eot >= 0 && id == eot))
            break;
        size_t tl = 0;
        if (gl_tokenizer_token_bytes(cm.tok, id, &tl) && tl + 8 <= sizeof buf)
            stream_bytes(buf, gl_detok_feed(&dt, cm.tok, id, !o.special, buf, sizeof buf));
        if (n_out == o.n_gen)
            break;
        if (gl_model_forward(cm.ctx, cm.kv, &id, 1, pos, logits, 0, NULL, &err) != GL_OK) {
            fprintf(stderr, "\nglint run: %s\n", err.msg);
            goto done;
        }
        pos++;
    }
    stream_bytes(buf, gl_detok_flush(&dt, buf, sizeof buf));
    int64_t t2 = gl_time_us();
    if (o.print_ids) {
        printf("\n");
        for (int64_t i = 0; i < n_out; i++)
            printf("%s%d", i ? " " : "", gen[i]);
        printf("\n");
    } else {
        printf("\n");
    }
    fflush(stdout);
    double pp_s = (double)(t1 - t0) / 1e6, tg_s = (double)(t2 - t1) / 1e6;
    fprintf(stderr, "prompt: %lld tokens, %.2f tok/s; gen: %lld tokens, %.2f tok/s\n",
            (long long)n_prompt, pp_s > 0 ? (double)n_prompt / pp_s : 0.0, (long long)n_out,
            tg_s > 0 ? (double)n_out / tg_s : 0.0);
    rc = 0;
done:
    gl_sample_work_free(&smp);
    gl_media_prompt_free(&mp);
    gl_free(embd);
    gl_free(logits);
    gl_free(gen);
    gl_free(prompt);
    cli_model_close(&cm);
    return rc;
}

// ---- eval ----

struct dump_files {
    FILE **f; // [n_layer + 2]: embed, layers..., logits
    int n_layer;
    int failed;
};

static void dump_cb(void *user, int layer, int64_t pos0, const float *x, int64_t n_tok,
                    int64_t width)
{
    (void)pos0;
    struct dump_files *d = user;
    FILE *f = d->f[layer + 1];
    if (f && fwrite(x, sizeof(float), (size_t)(n_tok * width), f) != (size_t)(n_tok * width))
        d->failed = 1;
}

static gl_status write_f32(const char *path, const float *x, size_t n, struct gl_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return gl_err_set(err, GL_E_IO, "cannot create %s: %s", path, strerror(errno));
    size_t w = fwrite(x, sizeof(float), n, f);
    if (fclose(f) != 0 || w != n)
        return gl_err_set(err, GL_E_IO, "short write to %s", path);
    return GL_OK;
}

int gl_harness_eval(const struct gl_run_opts *o)
{
    const char *model = o->model, *ids_s = o->prompt_ids, *out = o->logits, *dump_dir = o->dump_dir;
    long long threads = o->threads, batch = o->eval_batch;
    struct gl_run_opts mo = *o; // --image / --video / --mmproj, as glint run takes them
    int device = o->device;
    int32_t *ids = NULL;
    int64_t n = 0;
    if (parse_ids(ids_s, &ids, &n) || n == 0) {
        fprintf(stderr, "glint eval: --prompt-ids: not a non-empty list of token ids\n");
        gl_free(ids);
        return 2;
    }
    struct gl_err err = {0};
    struct cli_model cm;
    int rc = 1;
    float *logits = NULL;
    struct dump_files df = {0};
    struct gl_media_prompt mp = {0};
    const float **embd = NULL; // --image / --video: input rows per prompt position
    mo.threads = threads;
    if (cli_model_open(&cm, o, model, mo.mmproj, mo.n_media > 0, &err) != GL_OK ||
        (mo.n_media > 0 && expand_media(&cm, &mo, &ids, &n, &mp, &embd, &err) != GL_OK)) {
        fprintf(stderr, "glint eval: %s\n", err.msg);
        cli_model_close(&cm);
        gl_media_prompt_free(&mp);
        gl_free(embd);
        gl_free(ids); // still the parsed ids: expand_media swaps them only on success
        return 1;
    }
    const struct gl_model_config *cf = &cm.model->cfg;
    if (batch == 0 || batch > n)
        batch = n > 65536 ? 65536 : n;
    if (cli_model_start(&cm, (int)batch, (int)threads, n, device, o->n_gpu_layers, &err) != GL_OK) {
        fprintf(stderr, "glint eval: %s\n", err.msg);
        goto done;
    }
    logits = gl_malloc((size_t)n * (size_t)cf->n_vocab * sizeof(float));
    if (!logits) {
        fprintf(stderr, "glint eval: no memory for %lld x %d logits\n", (long long)n, cf->n_vocab);
        goto done;
    }
    struct gl_model_dump dump = {dump_cb, &df};
    if (dump_dir) {
        df.n_layer = cf->n_layer;
        df.f = gl_calloc((size_t)cf->n_layer + 2, sizeof(FILE *));
        if (!df.f)
            goto done;
        for (int l = -1; l <= cf->n_layer; l++) {
            char path[4096];
            if (l < 0)
                snprintf(path, sizeof path, "%s/embed.f32", dump_dir);
            else if (l == cf->n_layer)
                snprintf(path, sizeof path, "%s/logits.f32", dump_dir);
            else
                snprintf(path, sizeof path, "%s/layer_%02d.f32", dump_dir, l);
            df.f[l + 1] = fopen(path, "wb");
            if (!df.f[l + 1]) {
                fprintf(stderr, "glint eval: cannot create %s: %s\n", path, strerror(errno));
                goto done;
            }
        }
    }
    int64_t t0 = gl_time_us();
    if (gl_model_forward_embd(cm.ctx, cm.kv, ids, embd, n, 0, logits, 1, dump_dir ? &dump : NULL,
                              &err) != GL_OK) {
        fprintf(stderr, "glint eval: %s\n", err.msg);
        goto done;
    }
    int64_t t1 = gl_time_us();
    if (df.failed) {
        fprintf(stderr, "glint eval: short write in %s\n", dump_dir);
        goto done;
    }
    if (out && write_f32(out, logits, (size_t)n * (size_t)cf->n_vocab, &err) != GL_OK) {
        fprintf(stderr, "glint eval: %s\n", err.msg);
        goto done;
    }
    if (!out) { // no file requested: print each position's argmax
        for (int64_t t = 0; t < n; t++)
            printf("%s%d", t ? " " : "",
                   gl_sample_argmax(logits + t * (int64_t)cf->n_vocab, cf->n_vocab));
        printf("\n");
    }
    fprintf(stderr, "eval: %lld tokens, batch %lld, %.2f tok/s\n", (long long)n, batch,
            (double)n / ((double)(t1 - t0) / 1e6 + 1e-9));
    rc = 0;
done:
    if (df.f) {
        for (int l = 0; l < cf->n_layer + 2; l++)
            if (df.f[l] && fclose(df.f[l]) != 0)
                rc = 1;
        gl_free(df.f);
    }
    gl_free(logits);
    gl_free(ids);
    gl_free(embd);
    gl_media_prompt_free(&mp);
    cli_model_close(&cm);
    return rc;
}
