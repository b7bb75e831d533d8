// SPDX-License-Identifier: MIT
// server/metrics: counters and histograms rendered in the Prometheus text format. Bucket bounds
// are vLLM's, so dashboards built for vLLM read ours unchanged.
#include "server/metrics.h"

#include "base/buf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double k_ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                20.0,  40.0,  80.0, 160., 640., 2560.};
static const double k_itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                               0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double k_e2e[] = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,  2.5,   5.0,   10.0,  15.0, 20.0,
                               30.0, 40.0, 50.0, 60.0, 120., 240., 480.0, 960.0, 1920., 7680.};
static const double k_grammar[] = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                   0.025,  0.05,   0.1,   0.25,   0.5,   1.0};
static const double k_iter[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
static const double k_n[] = {1, 2, 5, 10, 20};
static const char *k_reasons[GL_REASON_N] = {"stop", "length", "tool_calls", "abort"};

void gl_metrics_init(struct gl_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
#define HB(a) a, (int)(sizeof a / sizeof *a)
    static const struct {
        int id;
        const double *b;
        int n;
    } k[] = {{GL_HIST_TTFT, HB(k_ttft)},  {GL_HIST_ITL, HB(k_itl)},
             {GL_HIST_E2E, HB(k_e2e)},    {GL_HIST_GRAMMAR, HB(k_grammar)},
             {GL_HIST_QUEUE, HB(k_e2e)},  {GL_HIST_PREFILL, HB(k_e2e)},
             {GL_HIST_DECODE, HB(k_e2e)}, {GL_HIST_INFERENCE, HB(k_e2e)},
             {GL_HIST_ITER, HB(k_iter)},  {GL_HIST_PARAMS_N, HB(k_n)}};
#undef HB
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        GL_ASSERT(k[i].n < 32);
        m->h[k[i].id].bounds = k[i].b;
        m->h[k[i].id].n = k[i].n;
    }
    gl_metrics_set_max_model_len(m, 1);
}

void gl_metrics_set_max_model_len(struct gl_metrics *m, int64_t max_model_len)
{
    int n = 0; // vLLM's build_1_2_5_buckets: 1, 2, 5 times powers of ten, up to the maximum
    for (double e = 1; n < 31; e *= 10) {
        const double mant[3] = {1, 2, 5};
        int i = 0;
        for (; i < 3 && mant[i] * e <= (double)max_model_len; i++)
            m->b125[n++] = mant[i] * e;
        if (i < 3)
            break;
    }
    const int tok[] = {GL_HIST_PROMPT_TOK, GL_HIST_GEN_TOK, GL_HIST_MAX_TOK, GL_HIST_MAX_GEN};
    for (size_t i = 0; i < sizeof tok / sizeof *tok; i++) {
        m->h[tok[i]].bounds = m->b125;
        m->h[tok[i]].n = n;
    }
}

void gl_metrics_destroy(struct gl_metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

void gl_metrics_observe(struct gl_metrics *m, int hist, double s)
{
    pthread_mutex_lock(&m->mu);
    struct gl_hist *h = &m->h[hist];
    int i = 0;
    while (i < h->n && s > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += s;
    h->count++;
    pthread_mutex_unlock(&m->mu);
}

void gl_metrics_finish(struct gl_metrics *m, const char *reason)
{
    int k = GL_REASON_ABORT;
    for (int i = 0; i < GL_REASON_N; i++)
        if (reason && strcmp(reason, k_reasons[i]) == 0)
            k = i;
    pthread_mutex_lock(&m->mu);
    m->success[k]++;
    pthread_mutex_unlock(&m->mu);
}

void gl_metrics_reject(struct gl_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->rejected++;
    pthread_mutex_unlock(&m->mu);
}

static void series(struct gl_buf *o, const char *name, const char *type, const char *help,
                   const char *model, double v)
{
    gl_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"%s\"} %.17g\n", name, help, name,
                  type, name, model, v);
}

static void hist(struct gl_buf *o, const char *name, const char *help, const char *model,
                 const struct gl_hist *h)
{
    gl_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->counts[i];
        if (i < h->n) {
            // Python's float repr, as vLLM's prometheus_client prints it: "1.0", "0.3", "2560.0"
            char le[32];
            double b = h->bounds[i];
            snprintf(le, sizeof le, b == floor(b) && fabs(b) < 1e15 ? "%.1f" : "%g", b);
            gl_buf_printf(o, "%s_bucket{le=\"%s\",model_name=\"%s\"} %lld\n", name, le, model,
                          (long long)cum);
        } else
            gl_buf_printf(o, "%s_bucket{le=\"+Inf\",model_name=\"%s\"} %lld\n", name, model,
                          (long long)cum);
    }
    gl_buf_printf(o, "%s_sum{model_name=\"%s\"} %.17g\n%s_count{model_name=\"%s\"} %lld\n", name,
                  model, h->sum, name, model, (long long)h->count);
}

// vLLM's spec_decode counters, only with speculation configured (as vLLM); per position: draft
// tokens accepted at position 0 .. k - 1 of their drafts. Beside them the cost model's
// (engine.h): steps by the draft length it chose (len 0: speculation turned off), the probes, its
// running acceptance and the last length; drafts after jump-forward runs; with DFlash, its
// context pool's pages and the sequences it turned away.
static void render_spec(struct gl_buf *o, const struct gl_metrics *m, const char *model,
                        const struct gl_engine_stats *st)
{
    if (m->spec_k <= 0)
        return;
    series(o, "vllm:spec_decode_num_drafts_total", "counter", "Drafts verified.", model,
           (double)st->spec_drafts);
    series(o, "vllm:spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.", model,
           (double)st->spec_draft_tokens);
    series(o, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
           model, (double)st->spec_accepted_tokens);
    gl_buf_printf(o, "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Draft tokens "
                     "accepted, by position in the draft.\n"
                     "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n");
    for (int i = 0; i < m->spec_k && i < GL_SPEC_MAX_K; i++)
        gl_buf_printf(o,
                      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"%s\","
                      "position=\"%d\"} %lld\n",
                      model, i, (long long)st->spec_accepted_per_pos[i]);
    gl_buf_printf(o, "# HELP glint:spec_decode_draft_len_steps_total Steps by the draft length the "
                     "cost model chose (0: speculation turned off).\n"
                     "# TYPE glint:spec_decode_draft_len_steps_total counter\n");
    for (int j = 0; j <= m->spec_k && j <= GL_SPEC_MAX_K; j++)
        gl_buf_printf(o,
                      "glint:spec_decode_draft_len_steps_total{model_name=\"%s\",len=\"%d\"} "
                      "%lld\n",
                      model, j, (long long)st->spec_len_steps[j]);
    series(o, "glint:spec_decode_off_steps_total", "counter",
           "Steps where the cost model turned speculation off (draft length 0).", model,
           (double)st->spec_len_steps[0]);
    series(o, "glint:spec_decode_probe_drafts_total", "counter",
           "Single-token probe drafts made while the cost model chose 0.", model,
           (double)st->spec_probes);
    series(o, "glint:spec_decode_acceptance", "gauge",
           "The cost model's running acceptance per draft position, 0-1.", model,
           st->spec_acceptance);
    series(o, "glint:spec_decode_draft_len", "gauge", "The draft length chosen for the last step.",
           model, (double)st->spec_len);
    series(o, "glint:spec_decode_jump_forward_drafts_total", "counter",
           "Drafts verified in the step that computed a jump-forward run.", model,
           (double)st->spec_jf_drafts);
    if (st->dfl_pages_total <= 0) // the DFlash drafter's context pool (engine.h)
        return;
    series(o, "glint:spec_decode_dflash_pages_used", "gauge",
           "Pages of the DFlash drafter's context pool in use.", model, (double)st->dfl_pages_used);
    series(o, "glint:spec_decode_dflash_pages_total", "gauge",
           "Pages of the DFlash drafter's context pool.", model, (double)st->dfl_pages_total);
    series(o, "glint:spec_decode_dflash_no_pages_total", "counter",
           "Sequences that stopped drafting because the drafter's context pool was full.", model,
           (double)st->dfl_no_pages);
}

// The engine's gauges and counters (vLLM's names) and the speculative-decoding ones.
static void render_engine(struct gl_buf *o, const struct gl_metrics *m, const char *model,
                          const struct gl_engine_stats *st)
{
    double usage =
        st->kv_pages_total > 0 ? (double)st->kv_pages_used / (double)st->kv_pages_total : 0.0;
    series(o, "vllm:num_requests_running", "gauge", "Sequences in the running batch.", model,
           st->n_running);
    series(o, "vllm:num_requests_waiting", "gauge", "Sequences waiting to be scheduled.", model,
           st->n_waiting);
    series(o, "vllm:kv_cache_usage_perc", "gauge",
           "KV-cache usage, 0-1 (pages held by requests; prefix-cache-only pages count as free).",
           model, usage);
    series(o, "vllm:gpu_cache_usage_perc", "gauge",
           "KV-cache usage, 0-1 (vLLM's older name of vllm:kv_cache_usage_perc).", model, usage);
    series(o, "glint:kv_pages_held_by_requests", "gauge",
           "KV pages held by queued or running requests.", model, (double)st->kv_pages_used);
    series(o, "glint:kv_pages_total", "gauge", "KV pages in the pool.", model,
           (double)st->kv_pages_total);
    series(o, "vllm:prompt_tokens_total", "counter", "Prefill tokens processed.", model,
           (double)st->prompt_tokens);
    series(o, "vllm:generation_tokens_total", "counter", "Generated tokens.", model,
           (double)st->generated_tokens);
    series(o, "vllm:num_preemptions_total", "counter", "Preemptions (recompute).", model,
           st->n_preempted_total);
    series(o, "vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up.", model,
           (double)st->prefix_query_tokens);
    series(o, "vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the cache.", model,
           (double)st->prefix_hit_tokens);
    render_spec(o, m, model, st);
}

// The encoder and grammar caches, the connection guards, and vLLM's cache_config_info.
static void render_caches(struct gl_buf *o, struct gl_metrics *m, const char *model,
                          const struct gl_engine_stats *st)
{
    if (m->encoder) {
        series(o, "glint:mm_cache_queries_total", "counter",
               "Images and video frame pairs looked up in the encoder cache.", model,
               (double)st->enc_queries);
        series(o, "glint:mm_cache_hits_total", "counter",
               "Encoder cache lookups that skipped the vision encoder (the same content in "
               "flight or kept).",
               model, (double)st->enc_hits);
        series(o, "glint:mm_cache_bytes", "gauge", "Soft-token rows held by the encoder cache.",
               model, (double)st->enc_bytes);
        series(o, "glint:encoder_runs_total", "counter",
               "Images and video frame pairs the vision encoder has encoded.", model,
               (double)st->enc_runs);
        series(o, "glint:encoder_pending", "gauge",
               "Images and video frame pairs queued for or in the vision encoder.", model,
               (double)st->enc_pending);
    }
    if (m->gcache) {
        struct gl_grammar_cache_stats gc;
        gl_grammar_cache_stats(m->gcache, m->grammar_lock, &gc);
        series(o, "glint:grammar_cache_bytes", "gauge",
               "Bytes the compiled-grammar cache holds, masks and DFA states included "
               "(--grammar-cache-bytes bounds it).",
               model, (double)gc.bytes);
        series(o, "glint:grammar_cache_entries", "gauge", "Grammars in the cache.", model,
               (double)gc.entries);
        series(o, "glint:grammar_cache_evictions_total", "counter",
               "Grammars dropped to keep the cache within --grammar-cache-bytes.", model,
               (double)gc.evictions);
    }
    series(o, "glint:rate_limited_requests_total", "counter",
           "Requests answered 429 by the per-address rate limit (--limit-request-rate-per-ip).",
           model, (double)atomic_load(&m->rate_limited));
    series(o, "glint:tls_handshake_failures_total", "counter",
           "TLS handshakes (or records) refused: plain HTTP or garbage on the HTTPS port, bad "
           "versions or ciphers, clients that left mid-handshake.",
           model, (double)atomic_load(&m->tls_failures));
    series(o, "glint:server_log_lines_dropped_total", "counter",
           "libmicrohttpd error lines not written by the log rate limit (one line per 10 s).",
           model, (double)atomic_load(&m->mhd_log_dropped));
    if (m->block_size > 0) // vLLM's info-style gauge: value 1, the configuration in labels
        gl_buf_printf(o,
                      "# HELP vllm:cache_config_info Information of the KV cache configuration.\n"
                      "# TYPE vllm:cache_config_info gauge\n"
                      "vllm:cache_config_info{block_size=\"%d\",cache_dtype=\"%s\","
                      "enable_prefix_caching=\"%s\",num_gpu_blocks=\"%lld\",model_name=\"%s\"} 1\n",
                      (int)m->block_size, m->cache_dtype ? m->cache_dtype : "auto",
                      m->prefix_caching ? "True" : "False", (long long)st->kv_pages_total, model);
}

// What finished requests recorded (caller holds m->mu): successes by reason, rejections, the
// latency and size histograms.
static void render_requests(struct gl_buf *o, const struct gl_metrics *m, const char *model)
{
    gl_buf_printf(o, "# HELP vllm:request_success_total Finished requests by finish reason.\n"
                     "# TYPE vllm:request_success_total counter\n");
    for (int i = 0; i < GL_REASON_N; i++)
        gl_buf_printf(o,
                      "vllm:request_success_total{finished_reason=\"%s\",model_name=\"%s\"} %lld\n",
                      k_reasons[i], model, (long long)m->success[i]);
    series(o, "vllm:admission_rejections_total", "counter",
           "Requests refused (503) because the waiting queue was full.", model,
           (double)m->rejected);
    hist(o, "vllm:time_to_first_token_seconds", "Time to first token.", model, &m->h[GL_HIST_TTFT]);
    hist(o, "vllm:inter_token_latency_seconds", "Time between streamed token batches.", model,
         &m->h[GL_HIST_ITL]);
    hist(o, "vllm:time_per_output_token_seconds",
         "Time between streamed token batches (vLLM's older name of the above).", model,
         &m->h[GL_HIST_ITL]);
    hist(o, "vllm:e2e_request_latency_seconds", "Arrival to last token.", model,
         &m->h[GL_HIST_E2E]);
    static const struct {
        int id;
        const char *name, *help;
    } k_vllm[] = {
        {GL_HIST_QUEUE, "vllm:request_queue_time_seconds",
         "Histogram of time spent in WAITING phase for request."},
        {GL_HIST_PREFILL, "vllm:request_prefill_time_seconds",
         "Histogram of time spent in PREFILL phase for request."},
        {GL_HIST_DECODE, "vllm:request_decode_time_seconds",
         "Histogram of time spent in DECODE phase for request."},
        {GL_HIST_INFERENCE, "vllm:request_inference_time_seconds",
         "Histogram of time spent in RUNNING phase for request."},
        {GL_HIST_PROMPT_TOK, "vllm:request_prompt_tokens", "Number of prefill tokens processed."},
        {GL_HIST_GEN_TOK, "vllm:request_generation_tokens",
         "Number of generation tokens processed."},
        {GL_HIST_ITER, "vllm:iteration_tokens_total",
         "Histogram of number of tokens per engine_step."},
        {GL_HIST_MAX_GEN, "vllm:request_max_num_generation_tokens",
         "Histogram of maximum number of requested generation tokens."},
        {GL_HIST_PARAMS_N, "vllm:request_params_n", "Histogram of the n request parameter."},
        {GL_HIST_MAX_TOK, "vllm:request_params_max_tokens",
         "Histogram of the max_tokens request parameter."},
    };
    for (size_t i = 0; i < sizeof k_vllm / sizeof *k_vllm; i++)
        hist(o, k_vllm[i].name, k_vllm[i].help, model, &m->h[k_vllm[i].id]);
    hist(o, "glint:grammar_compile_seconds", "Grammar compile or cache lookup per request.", model,
         &m->h[GL_HIST_GRAMMAR]);
}

// The grammar mask-time histogram (written by the engine thread without the lock).
static void render_mask(struct gl_buf *o, const char *model, struct gl_api_mask_stats *ms)
{
    double bounds[GL_API_MASK_BUCKETS];
    struct gl_hist mh = {.bounds = bounds, .n = GL_API_MASK_BUCKETS};
    for (int i = 0; i < GL_API_MASK_BUCKETS; i++)
        bounds[i] = gl_api_mask_bounds_us[i] / 1e6;
    for (int i = 0; i <= GL_API_MASK_BUCKETS; i++)
        mh.counts[i] = atomic_load(&ms->buckets[i]);
    mh.count = atomic_load(&ms->count);
    mh.sum = (double)atomic_load(&ms->us_total) / 1e6;
    hist(o, "glint:grammar_mask_seconds",
         "Grammar token mask time per mask (and per jump-forward walk), engine thread.", model,
         &mh);
}

char *gl_metrics_render(struct gl_metrics *m, const char *model, const struct gl_engine_stats *st,
                        struct gl_api_mask_stats *ms, size_t *len)
{
    struct gl_buf o = {0};
    render_engine(&o, m, model, st);
    render_caches(&o, m, model, st);
    pthread_mutex_lock(&m->mu);
    render_requests(&o, m, model);
    pthread_mutex_unlock(&m->mu);
    render_mask(&o, model, ms);
    return gl_buf_take(&o, len); // NULL when out of memory
}
