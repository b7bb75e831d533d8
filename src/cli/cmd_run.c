// SPDX-License-Identifier: MIT
// `glint run`: prompt -> prefill (batched) -> decode loop with the sampler, streaming UTF-8-safe
// text to stdout; stops at EOS/EOT or -n tokens. `glint eval`: teacher-forced logits for given
// ids (all positions, optionally chunked with --batch) and per-layer hidden-state dumps for the
// reference checks. Flags are a contract used by the oracle scripts: keep them stable.
#include "cli.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
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

static gl_status cli_model_open(struct cli_model *cm, const char *path, int want_tok,
                                struct gl_err *err)
{
    memset(cm, 0, sizeof *cm);
    struct gl_model_params mp = gl_model_default_params();
    gl_status st = gl_model_open(&cm->model, path, &mp, err);
    if (st == GL_OK && want_tok)
        st = gl_tokenizer_load_gguf(&cm->tok, cm->model->gguf, err);
    return st;
}

static gl_status cli_model_start(struct cli_model *cm, int n_batch, int n_threads, int64_t n_ctx,
                                 struct gl_err *err)
{
    gl_status st = gl_model_ctx_new(&cm->ctx, cm->model, n_batch, n_threads, n_ctx, err);
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

static int usage_run(FILE *f)
{
    fprintf(f, "usage: glint run --model F (--prompt P | --prompt-ids \"1 2 3\") [-n N]\n"
               "                 [--temp T] [--top-p P] [--top-k K] [--min-p M] [--seed S]\n"
               "                 [--ids] [--special] [--threads N] [--show-tensors]\n"
               "  --prompt      text, tokenized with BOS per tokenizer.ggml.add_bos_token;\n"
               "                special-token names are parsed only with --special\n"
               "  --prompt-ids  token ids used verbatim (no BOS added)\n"
               "  -n N          max tokens to generate (default 32); stops at EOS/EOT\n"
               "  --temp T      0 = greedy (default); then min-p, top-k, top-p (vLLM order)\n"
               "  --ids         print the generated ids, space-separated, as the last line\n"
               "  --special     parse specials in --prompt and print special tokens' text\n"
               "  --threads N   worker threads (default 2)\n"
               "  --show-tensors  print where every tensor lives (mmap / heap) to stderr\n");
    return f == stdout ? 0 : 2;
}

static int usage_eval(FILE *f)
{
    fprintf(f,
            "usage: glint eval --model F --prompt-ids \"1 2 3\" [--logits OUT.f32]\n"
            "                  [--dump-layers DIR] [--threads N] [--batch N]\n"
            "  --logits       write n_tok x n_vocab float32 logits (row-major) to OUT\n"
            "  --dump-layers  write DIR/embed.f32, DIR/layer_XX.f32 (n_tok x n_embd) and\n"
            "                 DIR/logits.f32\n"
            "  --batch N      process the prompt in chunks of N tokens (default: all at once)\n");
    return f == stdout ? 0 : 2;
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

static int parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno)
        return -1;
    *out = (float)x;
    return 0;
}

struct run_opts {
    const char *model, *prompt, *prompt_ids;
    long long n_gen, threads;
    struct gl_sampling_params sp;
    int print_ids, special, show_tensors;
};

static int stream_bytes(const char *buf, int n)
{
    if (n > 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
    return 0;
}

// --show-tensors: where each tensor's bytes live (stderr). Weights are borrowed from the file
// mapping (or the in-memory copy with GLINT_MMAP=0) unless GLINT_GGUF_KEEP_QUANT=0 expanded
// them into f32 heap copies.
static void show_tensors(const struct gl_model *m)
{
    const struct gl_gguf *g = m->gguf;
    const char *src = gl_gguf_is_mmapped(g) ? "mmap" : "heap (file read into memory)";
    uint64_t total = 0;
    for (int64_t i = 0; i < gl_gguf_n_tensors(g); i++) {
        const struct gl_gguf_tensor *t = gl_gguf_tensor_at(g, i);
        const struct gl_type_traits *tr = gl_type_traits_of(t->type);
        const char *where = src;
        if (!m->keep_quant && t->type != GL_TYPE_F32 && t->n_dims == 2)
            where = "heap (f32 copy)";
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

int gl_cmd_run(int argc, char **argv)
{
    struct run_opts o = {.n_gen = 32, .threads = 2, .sp = gl_sampling_default_params()};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage_run(stdout);
        if (!strcmp(a, "--ids")) {
            o.print_ids = 1;
            continue;
        }
        if (!strcmp(a, "--special")) {
            o.special = 1;
            continue;
        }
        if (!strcmp(a, "--show-tensors")) {
            o.show_tensors = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "glint run: unknown or incomplete option '%s'\n", a);
            return usage_run(stderr);
        }
        i++;
        if (!strcmp(a, "--model") || !strcmp(a, "-m"))
            o.model = v;
        else if (!strcmp(a, "--prompt") || !strcmp(a, "-p"))
            o.prompt = v;
        else if (!strcmp(a, "--prompt-ids"))
            o.prompt_ids = v;
        else if (!strcmp(a, "-n") && !gl_cli_parse_int(v, 0, 1 << 24, &x))
            o.n_gen = x;
        else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && !gl_cli_parse_int(v, 1, 256, &x))
            o.threads = x;
        else if (!strcmp(a, "--temp") && !parse_float(v, &o.sp.temperature))
            ;
        else if (!strcmp(a, "--top-p") && !parse_float(v, &o.sp.top_p))
            ;
        else if (!strcmp(a, "--min-p") && !parse_float(v, &o.sp.min_p))
            ;
        else if (!strcmp(a, "--top-k") && !gl_cli_parse_int(v, 0, INT32_MAX, &x))
            o.sp.top_k = (int32_t)x;
        else if (!strcmp(a, "--seed") && !gl_cli_parse_int(v, 0, INT64_MAX, &x))
            o.sp.seed = (uint64_t)x;
        else {
            fprintf(stderr, "glint run: bad option or value: %s %s\n", a, v);
            return usage_run(stderr);
        }
    }
    if (!o.model || (!o.prompt == !o.prompt_ids)) {
        fprintf(stderr, "glint run: need --model and exactly one of --prompt / --prompt-ids\n");
        return usage_run(stderr);
    }

    struct gl_err err = {0};
    struct cli_model cm;
    int rc = 1;
    int32_t *prompt = NULL, *gen = NULL;
    int64_t n_prompt = 0;
    float *logits = NULL;
    struct gl_sampler smp = {0};
    if (cli_model_open(&cm, o.model, 1, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        cli_model_close(&cm);
        return 1;
    }
    const struct gl_model_config *cf = &cm.model->cfg;
    if (o.show_tensors)
        show_tensors(cm.model);
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
    int64_t n_ctx = n_prompt + o.n_gen;
    if (n_ctx > cf->n_ctx_train) {
        fprintf(stderr, "glint run: prompt %lld + %lld tokens exceeds context_length %d\n",
                (long long)n_prompt, o.n_gen, cf->n_ctx_train);
        rc = 2;
        goto done;
    }
    int n_batch = n_prompt < PREFILL_BATCH ? (int)n_prompt : PREFILL_BATCH;
    if (cli_model_start(&cm, n_batch, (int)o.threads, n_ctx, &err) != GL_OK ||
        gl_sampler_init(&smp, &o.sp, cf->n_vocab, &err) != GL_OK) {
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
    if (gl_model_forward(cm.ctx, cm.kv, prompt, n_prompt, 0, logits, 0, NULL, &err) != GL_OK) {
        fprintf(stderr, "glint run: %s\n", err.msg);
        goto done;
    }
    int64_t t1 = gl_time_us();
    struct gl_detok dt = {0};
    char buf[1024];
    int64_t n_out = 0;
    int64_t pos = n_prompt;
    while (n_out < o.n_gen) {
        int32_t id = gl_sampler_sample(&smp, logits);
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
    gl_sampler_free(&smp);
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

int gl_cmd_eval(int argc, char **argv)
{
    const char *model = NULL, *ids_s = NULL, *out = NULL, *dump_dir = NULL;
    long long threads = 2, batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage_eval(stdout);
        if (!v) {
            fprintf(stderr, "glint eval: unknown or incomplete option '%s'\n", a);
            return usage_eval(stderr);
        }
        i++;
        if (!strcmp(a, "--model") || !strcmp(a, "-m"))
            model = v;
        else if (!strcmp(a, "--prompt-ids"))
            ids_s = v;
        else if (!strcmp(a, "--logits"))
            out = v;
        else if (!strcmp(a, "--dump-layers"))
            dump_dir = v;
        else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) &&
                 !gl_cli_parse_int(v, 1, 256, &threads))
            ;
        else if (!strcmp(a, "--batch") && !gl_cli_parse_int(v, 1, 65536, &batch))
            ;
        else {
            fprintf(stderr, "glint eval: bad option or value: %s %s\n", a, v);
            return usage_eval(stderr);
        }
    }
    if (!model || !ids_s) {
        fprintf(stderr, "glint eval: need --model and --prompt-ids\n");
        return usage_eval(stderr);
    }
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
    if (cli_model_open(&cm, model, 0, &err) != GL_OK) {
        fprintf(stderr, "glint eval: %s\n", err.msg);
        cli_model_close(&cm);
        gl_free(ids);
        return 1;
    }
    const struct gl_model_config *cf = &cm.model->cfg;
    if (batch == 0 || batch > n)
        batch = n > 65536 ? 65536 : n;
    if (cli_model_start(&cm, (int)batch, (int)threads, n, &err) != GL_OK) {
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
    if (gl_model_forward(cm.ctx, cm.kv, ids, n, 0, logits, 1, dump_dir ? &dump : NULL, &err) !=
        GL_OK) {
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
                   gl_sampler_argmax(logits + t * (int64_t)cf->n_vocab, cf->n_vocab));
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
    cli_model_close(&cm);
    return rc;
}
