// SPDX-License-Identifier: MIT
// server/metrics: Prometheus series with vLLM's names and a model_name label (serving.md §2.9),
// plus glint: series for the grammar engine. Internal to server/. Thread-safe (one mutex).
#pragma once

#include "api/api.h"
#include "engine/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

// Seconds histograms (fixed vLLM buckets) then token counts (vLLM's 1-2-5 buckets up to
// max_model_len, set by gl_metrics_set_max_model_len).
enum {
    GL_HIST_TTFT,
    GL_HIST_ITL,
    GL_HIST_E2E,
    GL_HIST_GRAMMAR,
    GL_HIST_QUEUE,      // submit -> first admission to the running batch, per choice
    GL_HIST_PREFILL,    // admission -> first token
    GL_HIST_DECODE,     // first token -> last token
    GL_HIST_INFERENCE,  // admission -> last token
    GL_HIST_ITER,       // tokens computed per engine step
    GL_HIST_PARAMS_N,   // the n parameter, per prompt
    GL_HIST_PROMPT_TOK, // prompt tokens, per finished choice
    GL_HIST_GEN_TOK,    // generated tokens, per finished choice
    GL_HIST_MAX_TOK,    // the max_tokens parameter when given, per finished choice
    GL_HIST_MAX_GEN,    // the most tokens any choice of a prompt generated, per prompt
    GL_HIST_N
};
enum { GL_REASON_STOP, GL_REASON_LENGTH, GL_REASON_TOOLS, GL_REASON_ABORT, GL_REASON_N };

struct gl_metrics {
    pthread_mutex_t mu;
    int64_t success[GL_REASON_N];
    int64_t rejected; // requests answered 503 because the waiting queue was full
    struct gl_hist {
        const double *bounds; // upper bounds, seconds
        int n;
        int64_t counts[32]; // per bucket (not cumulative); counts[n] is +Inf
        double sum;
        int64_t count;
    } h[GL_HIST_N];
    // The KV pool's configuration, set once after the engine starts and rendered as
    // vllm:cache_config_info (the Gateway API Inference Extension's endpoint picker reads
    // block_size from it for prefix-aware scoring). block_size 0: not rendered.
    int32_t block_size;      // positions per KV page
    int32_t prefix_caching;  // 1: on
    int32_t spec_k;          // speculative tokens per draft; 0: off (no spec metrics)
    const char *cache_dtype; // static string (gl_kv_dtype_name)
    int encoder; // the model has a vision tower: glint:mm_cache_* and glint:encoder_* series
    struct gl_grammar_cache *gcache; // compiled grammars (glint:grammar_cache_*), or NULL
    pthread_mutex_t *grammar_lock;   // its lock
    double b125[32];                 // 1, 2, 5, 10, ... <= max_model_len (token histograms)
    // Counters bumped without the lock (connection threads, libmicrohttpd's logger).
    _Atomic int64_t rate_limited;    // requests answered 429 by --limit-request-rate-per-ip
    _Atomic int64_t tls_failures;    // TLS handshakes or records libmicrohttpd/GnuTLS refused
    _Atomic int64_t mhd_log_dropped; // libmicrohttpd log lines not written (rate limit)
};

void gl_metrics_init(struct gl_metrics *m);
void gl_metrics_destroy(struct gl_metrics *m);
// The token histograms' buckets (vLLM's build_1_2_5_buckets(max_model_len)); call once, before
// any observation.
void gl_metrics_set_max_model_len(struct gl_metrics *m, int64_t max_model_len);
void gl_metrics_observe(struct gl_metrics *m, int hist, double seconds);
void gl_metrics_finish(struct gl_metrics *m, const char *finish_reason);
void gl_metrics_reject(struct gl_metrics *m); // vllm:admission_rejections_total
// The whole /metrics page (gl_malloc'ed text), with the grammar mask histogram ms.
char *gl_metrics_render(struct gl_metrics *m, const char *model_name,
                        const struct gl_engine_stats *st, struct gl_api_mask_stats *ms,
                        size_t *len);
