// SPDX-License-Identifier: MIT
// engine: requests -> sequences (one per choice) -> FCFS scheduler -> one batched forward pass
// per step -> sampling -> stop handling -> events. Invariants: a WAITING sequence holds no KV
// pages; a RUNNING one has computed exactly n_computed of its n_tok tokens (prompt + generated)
// into its gl_kv_seq, and n_computed == n_tok - 1 means "decode" (one token pending); more than
// one pending is a prefill: the prompt, a recompute after preemption, or a sampled token plus
// the tokens a logits processor forced after it (jump-forward), all scheduled alike. Everything
// except the inbox (new requests, cancel ids, live ids, published stats) belongs to the step
// thread; the inbox is guarded by `mu`.
// Scheduling decisions: decodes go first (one token each, oldest first) so a long prompt costs
// running streams at most one step's budget; then partial prefills (and jump-forward chunks);
// then FCFS admission, which stops at the first request that does not fit (no overtaking) and is
// skipped in a step that preempted (vLLM does the same, else the victim's freed pages would be
// grabbed right back).
// Stop strings: decoded text is held back while its tail could still begin a stop string, so
// a match across token boundaries is cut before any of it was emitted.
#define _GNU_SOURCE // pthread_setname_np, pthread_setaffinity_np, CPU_* (the encoder thread)
#include "engine/engine.h"

#include "base/host.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// ---- types ----

// One encoder job and its result, shared by every part in flight with the same content (engine.h
// "Deferred encoding"). state and rows/patches are guarded by enc_mu (the worker writes them);
// ready/failed are the step thread's copies, refreshed at the start of each step.
enum enc_state { ENC_QUEUED, ENC_DISPATCHED, ENC_RUNNING, ENC_DONE, ENC_FAILED };
struct enc_entry {
    uint64_t digest;
    int32_t n_rows, gh, gw;
    float *patches; // [(2gh)(2gw)][patch_dim], owned until encoded
    float *rows;    // [n_rows][n_embd] once ENC_DONE
    enum enc_state state;
    int32_t refs;      // requests holding it (0 and DONE: kept for encoder_cache_bytes, LRU)
    uint64_t last_use; // LRU tick
    int ready, failed; // step thread's snapshot of state
    char why[200];     // ENC_FAILED: the encoder's message
    struct enc_entry *prev, *next;
};

struct req {
    uint64_t id;
    struct gl_sample_params sp; // owned deep copy
    gl_event_fn on_event;
    void *user;
    int32_t *prompt; // [n_prompt] owned
    int32_t n_prompt;
    int32_t n_live;    // choices not finished yet
    int32_t *stop_ids; // effective stop set (EOS unless ignore_eos, + request ids), < n_vocab
    int32_t n_stop_ids;
    int32_t max_tokens;                // resolved: <= max_model_len - n_prompt
    struct gl_logits_processor *procs; // [sp.n] or NULL, owned
    struct gl_request_media *media;    // [n_media] sorted by pos, rows owned
    int32_t n_media;
    struct enc_entry **enc; // [n_media]: deferred media's shared entry (one ref each), else NULL
    int32_t *keys;          // [n_prompt] prefix-cache key ids (media rows: derived ids), or NULL
    uint64_t seed;
    struct gl_engine *eng; // for the encoder entries' release
    int prefilled;         // some choice has computed the whole prompt (n > 1 waits for it)
    struct req *next;      // inbox link
};

struct seq {
    struct req *req;
    int32_t index;         // choice
    int32_t *tok;          // [n_tok]: prompt then generated
    int32_t *key;          // [cap] prefix-cache key ids of tok (NULL: tok itself; media only)
    int64_t n_tok, cap;    // tokens, allocated
    int64_t n_computed;    // positions in kv
    struct gl_kv_seq *kv;  // NULL while waiting
    struct gl_kv_seq *dfl; // GL_SPEC_DFLASH: the drafter's projected context in e->dfl_pool
    int64_t cap_row0;      // GL_SPEC_DFLASH: first row of this step's captures
    struct gl_rng rng;
    struct gl_detok dt;
    char *held; // text decoded but not emitted (may start a stop string)
    size_t n_held, cap_held;
    int32_t n_gen;
    int64_t chunk;           // tokens scheduled this step (0: not scheduled)
    int64_t t_scheduled_us;  // first admission to the running set (gl_time_us; 0: never)
    int64_t n_prompt_cached; // prompt positions reused from the prefix cache at that admission
    int32_t logits_row;      // first row of this step's logits, or -1
    int32_t sample_row;      // row to sample from (the chunk ends the pending tokens), or -1
    int64_t pos0;            // first position of this step's chunk
    int32_t plp_done;        // prompt positions 1 .. plp_done have had their prompt logprobs sent
    int32_t n_draft; // speculative: draft tokens this step, at tok[n_tok .. n_tok + n_draft)
};

struct gl_engine {
    const struct gl_model *m;
    const struct gl_tokenizer *tok;
    struct gl_engine_params p;
    int32_t n_vocab, n_layer;
    struct gl_kv_pool *pool;
    struct gl_model_ctx *ctx;
    int64_t pool_pages;
    int pin_caller; // 1: the next gl_engine_step pins its thread to p.cpus[0]
    // step thread
    struct seq **waiting; // FIFO, [0] first; capacity cap_seqs
    int32_t n_waiting;
    struct seq **running; // admission order, newest last
    int32_t n_running;
    int32_t cap_seqs;
    struct seq **sched; // this step's batch, [max_num_seqs]
    int32_t n_sched;
    struct gl_batch_seq *bs;
    struct gl_kv_view *views; // [max_num_seqs * n_layer]
    float *logits;            // [(max_num_seqs * (1 + spec k) + GL_ENGINE_PLP_ROWS) * n_vocab]
    int32_t plp_left;         // this step's logits rows left for prompt logprobs
    float *raw;               // [n_vocab] unmodified row for raw logprobs (process_row keeps it)
    // The logprobs of the event being built, one entry per token in order (a plain sample: 1; a
    // verified draft: up to k + 1; gl_event.logprobs etc. point here): the chosen token's, the
    // top sp.logprobs ids and logprobs ([i * top_n ..]), and the event text's length after it.
    float ev_lp[GL_SPEC_MAX_K + 1];
    int32_t ev_top_id[(GL_SPEC_MAX_K + 1) * GL_SAMPLE_MAX_LOGPROBS];
    float ev_top_lp[(GL_SPEC_MAX_K + 1) * GL_SAMPLE_MAX_LOGPROBS];
    size_t ev_text_end[GL_SPEC_MAX_K + 1];
    // GL_SPEC_DFLASH: the drafter's scratch, the step's captured target layers
    // ([n_target][max_num_batched_tokens * n_embd]), their rows concatenated per token
    // ([max_num_batched_tokens * n_target * n_embd]) and one block's logits.
    struct gl_dflash_ctx *dfl_ctx;
    struct gl_kv_pool *dfl_pool;       // the projected context K/V of every sequence (f32 pages)
    struct gl_kv_view *dfl_views;      // [drafter n_layer]: one sequence's, for the call at hand
    struct gl_model_config dfl_kv_cfg; // gl_dflash_kv_config: the pool's shape
    float *dfl_cap[GL_DFLASH_MAX_TARGETS];
    float *dfl_in, *dfl_logits;
    int64_t dfl_audits, dfl_tick; // test_dflash_audit: drafts checked, drafts made
    const float **embd;           // [max_num_batched_tokens] given input rows of the step (or NULL)
    struct gl_sample_work work;
    char *text; // event text scratch
    size_t cap_text;
    struct gl_engine_stats st;
    // inbox, guarded by mu
    pthread_mutex_t mu;
    pthread_cond_t cv; // signalled on submit, cancel and wake (CLOCK_MONOTONIC)
    int woken;
    struct req *in_head, *in_tail;
    int32_t n_in;
    uint64_t *cancels;
    int32_t n_cancels, cap_cancels;
    uint64_t *live; // ids submitted and not finished
    int32_t n_live, cap_live;
    uint64_t next_id, next_seed;
    int32_t n_waiting_pub; // sequences waiting, as of the last step
    int preempted_now;     // a preemption happened this step: admit nothing new
    struct gl_engine_stats st_pub;
    // encoder worker and cache (engine.h "Encoder"), guarded by enc_mu
    pthread_mutex_t enc_mu;
    pthread_cond_t enc_cv; // worker: a part was dispatched, or stop; starter: pool ready
    pthread_t enc_thread;
    int enc_started, enc_ready, enc_stop;  // worker started / its pool made (-1: failed) / stop
    struct gl_pool *enc_pool;              // the worker's, made on its thread (inherits its nice)
    struct enc_entry *enc_head, *enc_tail; // every entry, oldest first
    int64_t enc_inflight;                  // rows of DISPATCHED + RUNNING entries
    int64_t enc_kept;                      // bytes of DONE entries no request holds
    uint64_t enc_tick;
    int64_t enc_queries, enc_hits, enc_runs, enc_pending, enc_entries, enc_bytes;
    int enc_any; // step thread: some entry existed at this step's enc_schedule
    // speculation's cost model (engine.h): this step's draft length and probe
    struct gl_spec_cost cost;
    int32_t spec_len;   // the draft length chosen for this step
    int32_t spec_probe; // 1: one sequence may still draft a single-token probe this step
};

const char *gl_finish_name(enum gl_finish f)
{
    switch (f) {
    case GL_FINISH_STOP:
        return "stop";
    case GL_FINISH_LENGTH:
        return "length";
    case GL_FINISH_ABORT:
        return "abort";
    case GL_FINISH_ERROR:
        return "error";
    default:
        return "none";
    }
}

// ---- parameters ----

void gl_engine_model_dev(const struct gl_engine_params *p, struct gl_model_dev *out)
{
    // Speculation: k + 1 logits rows per sequence (the pending token and k drafts), else one;
    // prompt logprobs add up to GL_ENGINE_PLP_ROWS (gl_engine_new's logits buffer).
    const int32_t rows_per_seq = 1 + (p->spec.method != GL_SPEC_NONE ? p->spec.k : 0);
    *out = (struct gl_model_dev){.device = p->device,
                                 .n_gpu_layers = p->n_gpu_layers,
                                 .max_seqs = p->max_num_seqs,
                                 .max_len = p->max_model_len,
                                 .block_size = p->kv.block_size,
                                 .head_rows = p->max_num_seqs * rows_per_seq + GL_ENGINE_PLP_ROWS};
}

struct gl_kv_params gl_engine_kv_params(const struct gl_engine_params *p)
{
    struct gl_kv_params kv = p->kv;
    kv.n_dev_layers = p->device >= 0 && p->n_gpu_layers >= 0 ? p->n_gpu_layers : 0;
    return kv;
}

struct gl_kv_params gl_engine_dflash_kv_params(const struct gl_engine_params *p)
{
    struct gl_kv_params kv = {.block_size = p->kv.block_size, .dtype = GL_KV_F32};
    kv.budget_bytes = gl_engine_dflash_kv_bytes(p);
    return kv;
}

int64_t gl_engine_dflash_kv_bytes(const struct gl_engine_params *p)
{
    if (p->spec.method != GL_SPEC_DFLASH || !p->spec.dflash)
        return 0;
    if (p->spec.dflash_kv_bytes > 0)
        return p->spec.dflash_kv_bytes;
    struct gl_model_config cfg;
    gl_dflash_kv_config(p->spec.dflash, &cfg);
    struct gl_kv_params kv = {
        .budget_bytes = 1, .block_size = p->kv.block_size, .dtype = GL_KV_F32};
    struct gl_kv_plan pl;
    if (gl_kv_plan_compute(&cfg, &kv, p->max_model_len > 0 ? p->max_model_len : 1, &pl, NULL) !=
        GL_OK)
        return 0; // the pool then refuses the block size with its own message
    // Every sequence at max_model_len, plus what a step's chunks hold until they are committed
    // (a sliding group keeps window - 1 + n positions then): the step's rows and one partial
    // block per sequence, in every group.
    const int64_t bs = p->kv.block_size, T = p->max_num_batched_tokens;
    const int64_t extra = (int64_t)pl.n_groups * ((T + bs - 1) / bs + p->max_num_seqs);
    return ((int64_t)p->max_num_seqs * pl.pages_per_seq + extra) * (int64_t)pl.page_bytes;
}

gl_status gl_engine_dev_kv_room(const struct gl_gguf *g, const struct gl_model_config *cfg,
                                const struct gl_engine_params *p, double util, int64_t *room,
                                uint64_t *heap_bytes, uint64_t *range_bytes,
                                struct gl_model_dev_mem *dm, struct gl_err *err)
{
    struct gl_model_dev md;
    gl_engine_model_dev(p, &md);
    gl_status st = gl_model_dev_mem_plan(g, cfg, p->max_num_batched_tokens, &md, 0, dm, err);
    if (st != GL_OK)
        return st;
    return gl_model_dev_kv_room(dm, p->device, util, room, heap_bytes, range_bytes, err);
}

struct gl_engine_params gl_engine_default_params(const struct gl_model *m)
{
    struct gl_engine_params p;
    memset(&p, 0, sizeof p);
    p.kv.budget_bytes = (int64_t)1 << 30;
    p.kv.block_size = 16;
    p.kv.dtype = GL_KV_F16;
    p.kv.prefix_cache = 1;
    p.device = -1;
    p.n_gpu_layers = -1;
    p.max_num_seqs = 16;
    p.max_num_batched_tokens = 512;
    p.max_model_len = m ? m->cfg.n_ctx_train : 4096;
    p.max_waiting = 256;
    p.max_num_encoder_input_tokens = 4096; // one image at the default max_image_tokens
    p.encoder_nice = 10;
    // One kernel thread per physical core this process may use (base/host.h), pinned there.
    const struct gl_host_cpus *hc = gl_host_cpus();
    p.n_threads = hc->n < 256 ? hc->n : 256; // gl_model_ctx_new's limit
    p.encoder_threads = p.n_threads;
    p.cpus = hc->cpus[0] >= 0 ? hc->cpus : NULL;
    p.n_cpus = hc->cpus[0] >= 0 ? hc->n : 0;
    // The model's stop ids (GGUF eos/eot keys, or an HF folder's generation_config.json).
    for (int i = 0; m && i < m->n_stop && p.n_eos < (int)(sizeof p.eos_ids / sizeof p.eos_ids[0]);
         i++)
        p.eos_ids[p.n_eos++] = m->stop_ids[i];
    return p;
}

// ---- inbox helpers (caller holds mu) ----

static int grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *n = gl_realloc(*arr, (size_t)nc * elem);
    if (!n)
        return -1;
    *arr = n;
    *cap = nc;
    return 0;
}

static int live_find(const struct gl_engine *e, uint64_t id)
{
    for (int32_t i = 0; i < e->n_live; i++)
        if (e->live[i] == id)
            return i;
    return -1;
}

// ---- encoder cache and worker (engine.h "Encoder") ----

static size_t enc_bytes(const struct gl_engine *e, const struct enc_entry *x)
{
    return (size_t)x->n_rows * (size_t)e->m->cfg.n_embd * sizeof(float);
}

// Unlinks and frees x (caller holds enc_mu; x is not RUNNING).
static void enc_drop(struct gl_engine *e, struct enc_entry *x)
{
    GL_ASSERT(x->state != ENC_RUNNING);
    if (x->state == ENC_DISPATCHED)
        e->enc_inflight -= x->n_rows;
    if (x->state == ENC_DONE) {
        e->enc_bytes -= (int64_t)enc_bytes(e, x);
        if (x->refs == 0)
            e->enc_kept -= (int64_t)enc_bytes(e, x);
    }
    if (x->prev)
        x->prev->next = x->next;
    else
        e->enc_head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        e->enc_tail = x->prev;
    e->enc_entries--;
    gl_free(x->patches);
    gl_free(x->rows);
    gl_free(x);
}

// Evicts the least recently used unheld rows until all rows, those in use included, fit
// encoder_cache_bytes, or none unheld is left (rows in use are never evicted: while they alone
// are over the budget, nothing is kept).
static void enc_evict(struct gl_engine *e)
{
    while (e->enc_kept > 0 && e->enc_bytes > e->p.encoder_cache_bytes) {
        struct enc_entry *lru = NULL;
        for (struct enc_entry *x = e->enc_head; x; x = x->next)
            if (x->state == ENC_DONE && x->refs == 0 && (!lru || x->last_use < lru->last_use))
                lru = x;
        GL_ASSERT(lru);
        enc_drop(e, lru);
    }
}

// A request lets go of x (caller holds enc_mu). Nobody else holding it: a queued job is dropped
// at once, a running one when the worker finishes (its rows are not kept: nobody asked for them),
// rows are kept under encoder_cache_bytes.
static void enc_unref(struct gl_engine *e, struct enc_entry *x)
{
    GL_ASSERT(x->refs > 0);
    if (--x->refs > 0 || x->state == ENC_RUNNING)
        return;
    if (x->state != ENC_DONE) {
        enc_drop(e, x);
        return;
    }
    e->enc_kept += (int64_t)enc_bytes(e, x);
    enc_evict(e);
}

// The worker: takes dispatched entries oldest first and encodes them on its own pool, at the
// encoder's nice (set before the pool is made, so its threads inherit it).
static void *enc_main(void *arg)
{
    struct gl_engine *e = arg;
    // Started from whichever thread submitted first (an HTTP thread, or the pinned step thread
    // in a CLI run): name it, and let it and its pool threads (which inherit both) float over
    // every core the engine uses instead of that thread's pin.
    (void)pthread_setname_np(pthread_self(), "glint-encoder");
    if (e->p.cpus && e->p.n_cpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int32_t i = 0; i < e->p.n_cpus; i++)
            if (e->p.cpus[i] >= 0 && e->p.cpus[i] < CPU_SETSIZE)
                CPU_SET(e->p.cpus[i], &set);
        if (CPU_COUNT(&set) > 0)
            (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    errno = 0;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), e->p.encoder_nice) != 0)
        GL_LOGW("engine: cannot set the encoder's nice to %d: errno %d", e->p.encoder_nice, errno);
    struct gl_pool *pool = gl_pool_new(e->p.encoder_threads > 0 ? e->p.encoder_threads : 1);
    pthread_mutex_lock(&e->enc_mu);
    e->enc_pool = pool;
    e->enc_ready = pool ? 1 : -1;
    pthread_cond_broadcast(&e->enc_cv);
    while (pool && !e->enc_stop) {
        struct enc_entry *x = e->enc_head;
        while (x && x->state != ENC_DISPATCHED)
            x = x->next;
        if (!x) {
            pthread_cond_wait(&e->enc_cv, &e->enc_mu);
            continue;
        }
        x->state = ENC_RUNNING;
        pthread_mutex_unlock(&e->enc_mu);
        if (e->p.encoder_hook)
            e->p.encoder_hook(e->p.encoder_hook_user);
        struct gl_err err = {0};
        float *rows = gl_malloc(enc_bytes(e, x));
        gl_status st =
            rows ? gl_vision_encode(pool, gl_model_vision_config(e->m), gl_model_vision(e->m),
                                    x->patches, 2 * x->gh, 2 * x->gw, rows, &err)
                 : gl_err_set(&err, GL_E_NOMEM, "no memory for %d soft-token rows", (int)x->n_rows);
        pthread_mutex_lock(&e->enc_mu);
        e->enc_inflight -= x->n_rows;
        e->enc_runs++;
        gl_free(x->patches);
        x->patches = NULL;
        if (st == GL_OK) {
            x->rows = rows;
            x->state = ENC_DONE;
            e->enc_bytes += (int64_t)enc_bytes(e, x);
            enc_evict(e); // new rows in use push kept ones out
        } else {
            gl_free(rows);
            x->state = ENC_FAILED;
            snprintf(x->why, sizeof x->why, "engine: the vision encoder failed: %.150s", err.msg);
        }
        if (x->refs == 0) // cancelled while it ran
            enc_drop(e, x);
        pthread_mutex_unlock(&e->enc_mu);
        gl_engine_wake(e);
        pthread_mutex_lock(&e->enc_mu);
    }
    pthread_mutex_unlock(&e->enc_mu);
    gl_pool_delete(pool);
    return NULL;
}

// Starts the worker on the first deferred part (caller holds enc_mu). GL_E_NOMEM if it cannot.
static gl_status enc_start(struct gl_engine *e, struct gl_err *err)
{
    if (!e->enc_started) {
        if (pthread_create(&e->enc_thread, NULL, enc_main, e) != 0)
            return gl_err_set(err, GL_E_NOMEM, "engine: cannot start the encoder thread");
        e->enc_started = 1;
    }
    while (e->enc_ready == 0)
        pthread_cond_wait(&e->enc_cv, &e->enc_mu);
    return e->enc_ready > 0 ? GL_OK
                            : gl_err_set(err, GL_E_NOMEM, "engine: cannot start the encoder pool");
}

// Step thread, start of a step: hands queued parts to the worker FCFS while the rows in flight
// stay within max_num_encoder_input_tokens (a part larger than that runs alone), and refreshes
// the entries' ready / failed snapshot.
static void enc_schedule(struct gl_engine *e)
{
    pthread_mutex_lock(&e->enc_mu);
    e->enc_any = e->enc_head != NULL;
    int dispatched = 0, blocked = 0; // FCFS: nothing passes a part that must wait
    int64_t pending = 0;
    for (struct enc_entry *x = e->enc_head; x; x = x->next) {
        if (x->state == ENC_QUEUED && !blocked) {
            if (e->enc_inflight == 0 ||
                e->enc_inflight + x->n_rows <= e->p.max_num_encoder_input_tokens) {
                x->state = ENC_DISPATCHED;
                e->enc_inflight += x->n_rows;
                dispatched = 1;
            } else {
                blocked = 1;
            }
        }
        x->ready = x->state == ENC_DONE;
        x->failed = x->state == ENC_FAILED;
        pending += x->state <= ENC_RUNNING;
    }
    e->enc_pending = pending;
    if (dispatched)
        pthread_cond_broadcast(&e->enc_cv);
    pthread_mutex_unlock(&e->enc_mu);
}

// The first position >= from of s's prompt whose rows are not encoded yet (s->n_tok if none):
// prefill chunks stop there.
static int64_t enc_limit(const struct seq *s, int64_t from);
// The message of a failed encode s needs, or NULL.
static const char *enc_failed(const struct seq *s);

// ---- requests and sequences ----

static void req_free(struct req *r)
{
    if (!r)
        return;
    if (r->procs) {
        for (int32_t i = 0; i < r->sp.n; i++)
            if (r->procs[i].free)
                r->procs[i].free(r->procs[i].user);
        gl_free(r->procs);
    }
    for (int32_t i = 0; i < r->n_media; i++) {
        gl_free(r->media[i].embd);
        gl_free(r->media[i].patches);
    }
    if (r->enc) {
        pthread_mutex_lock(&r->eng->enc_mu);
        for (int32_t i = 0; i < r->n_media; i++)
            if (r->enc[i])
                enc_unref(r->eng, r->enc[i]);
        pthread_mutex_unlock(&r->eng->enc_mu);
        gl_free(r->enc);
    }
    gl_free(r->media);
    gl_free(r->keys);
    gl_sample_params_free(&r->sp);
    gl_free(r->prompt);
    gl_free(r->stop_ids);
    gl_free(r);
}

static void seq_free(struct seq *s)
{
    if (!s)
        return;
    gl_kv_seq_free(s->kv);
    gl_kv_seq_free(s->dfl);
    gl_free(s->tok);
    gl_free(s->key);
    gl_free(s->held);
    gl_free(s);
}

static int seq_push_tok(struct seq *s, int32_t t)
{
    if (s->n_tok == s->cap) {
        int64_t nc = s->cap * 2;
        if (s->key) { // first: if tok then fails, key merely has spare room
            int32_t *k = gl_realloc(s->key, (size_t)nc * sizeof *k);
            if (!k)
                return -1;
            s->key = k;
        }
        int32_t *n = gl_realloc(s->tok, (size_t)nc * sizeof *n);
        if (!n)
            return -1;
        s->tok = n;
        s->cap = nc;
    }
    if (s->key) // a generated token is its own key
        s->key[s->n_tok] = t;
    s->tok[s->n_tok++] = t;
    return 0;
}

// The ids the prefix cache keys s's positions by: its tokens, except soft (media) positions.
static const int32_t *seq_keys(const struct seq *s)
{
    return s->key ? s->key : s->tok;
}

// Input rows of s's chunk [n_computed, n_computed + chunk) into out[0..chunk) (NULL: the token's
// own row). Returns 1 if any position of the chunk is a media row (0: the chunk is all text).
static int seq_embd(const struct seq *s, const float **out, int32_t n_embd)
{
    const struct req *r = s->req;
    const int64_t a = s->n_computed, b = s->n_computed + s->chunk;
    int any = 0;
    for (int64_t p = a; p < b; p++)
        out[p - a] = NULL;
    for (int32_t i = 0; i < r->n_media; i++) {
        const struct gl_request_media *md = &r->media[i];
        const int64_t lo = md->pos > a ? md->pos : a;
        const int64_t hi = md->pos + md->n_rows < b ? md->pos + md->n_rows : b;
        // deferred: the scheduler cut the chunk before rows that are not encoded yet
        const float *rows = r->enc && r->enc[i] ? r->enc[i]->rows : md->embd;
        GL_ASSERT(lo >= hi || (rows && (!r->enc || !r->enc[i] || r->enc[i]->ready)));
        for (int64_t p = lo; p < hi; p++) // row p - pos of the image, n_embd floats each
            out[p - a] = rows + (p - md->pos) * (int64_t)n_embd;
        any |= lo < hi;
    }
    return any;
}

static int64_t enc_limit(const struct seq *s, int64_t from)
{
    const struct req *r = s->req;
    for (int32_t i = 0; r->enc && i < r->n_media; i++) {
        const struct gl_request_media *md = &r->media[i];
        if (md->pos + md->n_rows <= from || !r->enc[i] || r->enc[i]->ready)
            continue;
        return md->pos > from ? md->pos : from;
    }
    return s->n_tok;
}

static const char *enc_failed(const struct seq *s)
{
    const struct req *r = s->req;
    for (int32_t i = 0; r->enc && i < r->n_media; i++)
        if (r->enc[i] && r->enc[i]->failed)
            return r->enc[i]->why;
    return NULL;
}

static int held_reserve(struct seq *s, size_t extra)
{
    if (s->n_held + extra <= s->cap_held)
        return 0;
    size_t nc = s->cap_held ? s->cap_held * 2 : 256;
    while (nc < s->n_held + extra)
        nc *= 2;
    char *n = gl_realloc(s->held, nc);
    if (!n)
        return -1;
    s->held = n;
    s->cap_held = nc;
    return 0;
}

// ---- construction ----

gl_status gl_engine_new(struct gl_engine **out, const struct gl_model *m,
                        const struct gl_tokenizer *tok, const struct gl_engine_params *p,
                        struct gl_err *err)
{
    *out = NULL;
    if (p->max_num_seqs < 1 || p->max_num_seqs > 4096)
        return gl_err_set(err, GL_E_INVAL, "engine: max_num_seqs %d not in 1..4096",
                          p->max_num_seqs);
    if (p->max_num_batched_tokens < p->max_num_seqs || p->max_num_batched_tokens > 65536)
        return gl_err_set(err, GL_E_INVAL,
                          "engine: max_num_batched_tokens %d not in max_num_seqs (%d)..65536",
                          p->max_num_batched_tokens, p->max_num_seqs);
    if (p->max_model_len < 2 || p->max_model_len > m->cfg.n_ctx_train)
        return gl_err_set(err, GL_E_INVAL, "engine: max_model_len %d not in 2..%d (context_length)",
                          p->max_model_len, m->cfg.n_ctx_train);
    if (p->max_waiting < 1 || p->n_eos < 0 || p->n_eos > GL_ENGINE_MAX_EOS)
        return gl_err_set(err, GL_E_INVAL, "engine: max_waiting %d / n_eos %d out of range",
                          p->max_waiting, p->n_eos);
    const struct gl_spec_params *sp = &p->spec;
    if (sp->method == GL_SPEC_REPLAY &&
        (sp->k < 1 || sp->k > GL_SPEC_MAX_K || sp->n_replay < 0 ||
         (sp->n_replay > 0 && !sp->replay) || !(sp->alpha >= 0.0f && sp->alpha <= 1.0f)))
        return gl_err_set(err, GL_E_INVAL, "engine: replay speculation: bad k %d / replay / alpha",
                          sp->k);
    if (sp->method == GL_SPEC_DFLASH && (!sp->dflash || sp->k < 1 || sp->k > GL_SPEC_MAX_K ||
                                         sp->k > sp->dflash->cfg.block_size - 1))
        return gl_err_set(err, GL_E_INVAL,
                          "engine: dflash speculation: no drafter, or k %d not in 1..min(%d, "
                          "block_size - 1)",
                          sp->k, GL_SPEC_MAX_K);
    if (sp->method != GL_SPEC_NONE && sp->method != GL_SPEC_NGRAM && sp->method != GL_SPEC_REPLAY &&
        sp->method != GL_SPEC_DFLASH)
        return gl_err_set(err, GL_E_INVAL, "engine: speculative method %d unknown",
                          (int)sp->method);
    if (sp->method == GL_SPEC_NGRAM && (sp->k < 1 || sp->k > GL_SPEC_MAX_K || sp->lookup_min < 1 ||
                                        sp->lookup_max < sp->lookup_min || sp->lookup_max > 64))
        return gl_err_set(err, GL_E_INVAL,
                          "engine: ngram speculation: num_speculative_tokens %d not in 1..%d or "
                          "prompt_lookup_min %d / max %d not 1 <= min <= max <= 64",
                          sp->k, GL_SPEC_MAX_K, sp->lookup_min, sp->lookup_max);
    if (p->max_num_encoder_input_tokens < 1 || p->encoder_threads < 0 || p->encoder_threads > 256 ||
        p->encoder_nice < -20 || p->encoder_nice > 19 || p->encoder_cache_bytes < 0)
        return gl_err_set(err, GL_E_INVAL,
                          "engine: max_num_encoder_input_tokens %d < 1, encoder_threads %d not in "
                          "0..256, encoder_nice %d not in -20..19 or a negative encoder cache",
                          p->max_num_encoder_input_tokens, p->encoder_threads, p->encoder_nice);
    struct gl_engine *e = gl_calloc(1, sizeof *e);
    if (!e)
        return gl_err_set(err, GL_E_NOMEM, "engine: no memory");
    pthread_mutex_init(&e->enc_mu, NULL);
    pthread_cond_init(&e->enc_cv, NULL);
    e->m = m;
    e->tok = tok;
    e->p = *p;
    gl_spec_cost_init(&e->cost);
    e->n_vocab = m->cfg.n_vocab;
    e->n_layer = m->cfg.n_layer;
    e->next_id = 1;
    e->next_seed = p->seed;
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    const int32_t S = p->max_num_seqs;
    // Partial offload: the pool's device side holds only the device layers' K/V.
    e->p.kv = gl_engine_kv_params(p);
    gl_status st = gl_kv_pool_new(&e->pool, &m->cfg, &e->p.kv, err);
    struct gl_model_dev md;
    gl_engine_model_dev(p, &md);
    if (st == GL_OK) {
        md.kv_base = gl_kv_pool_base(e->pool);
        md.kv_bytes = gl_kv_pool_dev_bytes(e->pool);
    }
    if (st == GL_OK)
        st = gl_model_ctx_new_ex(&e->ctx, m, p->max_num_batched_tokens, p->n_threads,
                                 p->max_model_len, &md, err);
    if (st == GL_OK && p->cpus && p->n_threads <= p->n_cpus) {
        (void)gl_pool_pin(gl_model_ctx_pool(e->ctx), p->cpus, p->n_cpus);
        e->pin_caller = 1;
    }
    if (st == GL_OK)
        st = gl_sample_work_init(&e->work, e->n_vocab, err);
    if (st != GL_OK) {
        gl_engine_free(e);
        return st;
    }
    e->cap_seqs = 64;
    e->waiting = gl_malloc((size_t)e->cap_seqs * sizeof *e->waiting);
    e->running = gl_malloc((size_t)S * sizeof *e->running);
    e->sched = gl_malloc((size_t)S * sizeof *e->sched);
    e->bs = gl_malloc((size_t)S * sizeof *e->bs);
    e->views = gl_malloc((size_t)S * (size_t)e->n_layer * sizeof *e->views);
    // Speculation: k + 1 rows per sequence (the pending token and k drafts), else one.
    const int32_t rows_per_seq = 1 + (p->spec.method != GL_SPEC_NONE ? p->spec.k : 0);
    e->logits = gl_malloc((size_t)(S * rows_per_seq + GL_ENGINE_PLP_ROWS) * (size_t)e->n_vocab *
                          sizeof(float));
    e->raw = gl_malloc((size_t)e->n_vocab * sizeof(float));
    e->embd = gl_malloc((size_t)p->max_num_batched_tokens * sizeof *e->embd);
    e->cap_text = 4096;
    e->text = gl_malloc(e->cap_text);
    int dfl_ok = 1;
    if (p->spec.method == GL_SPEC_DFLASH) {
        const struct gl_dflash *d = p->spec.dflash;
        const size_t T = (size_t)p->max_num_batched_tokens, E = (size_t)m->cfg.n_embd;
        gl_status dst =
            gl_dflash_ctx_new(&e->dfl_ctx, d, m, p->max_num_batched_tokens, p->n_threads, err);
        const struct gl_kv_params dkp = gl_engine_dflash_kv_params(p);
        gl_dflash_kv_config(d, &e->dfl_kv_cfg);
        if (dst == GL_OK)
            dst = gl_kv_pool_new(&e->dfl_pool, &e->dfl_kv_cfg, &dkp, err);
        if (dst != GL_OK) {
            gl_engine_free(e);
            return dst;
        }
        for (int t = 0; t < d->cfg.n_target; t++)
            dfl_ok &= (e->dfl_cap[t] = gl_malloc(T * E * sizeof(float))) != NULL;
        dfl_ok &= (e->dfl_views = gl_malloc((size_t)d->cfg.n_layer * sizeof *e->dfl_views)) != NULL;
        dfl_ok &= (e->dfl_in = gl_malloc(T * E * (size_t)d->cfg.n_target * sizeof(float))) != NULL;
        dfl_ok &= (e->dfl_logits = gl_malloc((size_t)d->cfg.block_size * (size_t)e->n_vocab *
                                             sizeof(float))) != NULL;
    }
    if (!e->waiting || !e->running || !e->sched || !e->bs || !e->views || !e->logits || !e->raw ||
        !e->embd || !e->text || !dfl_ok) {
        gl_engine_free(e);
        return gl_err_set(err, GL_E_NOMEM, "engine: no memory for %d sequences' step buffers", S);
    }
    e->pool_pages = gl_kv_pool_total_pages(e->pool);
    struct gl_kv_plan plan;
    if (gl_kv_plan_compute(&m->cfg, &e->p.kv, p->max_model_len, &plan, NULL) == GL_OK &&
        plan.pages_per_seq > e->pool_pages)
        GL_LOGW("engine: the KV pool (%lld pages) holds less than one %d-token sequence (%lld "
                "pages); requests whose prompt + max_tokens cannot fit it are refused",
                (long long)e->pool_pages, p->max_model_len, (long long)plan.pages_per_seq);
    e->st.kv_pages_total = e->pool_pages;
    e->st_pub = e->st;
    *out = e;
    return GL_OK;
}

uint64_t gl_engine_device_bytes(const struct gl_engine *e, int host)
{
    return gl_model_ctx_device_bytes(e->ctx, host);
}

struct gl_kv_pool *gl_engine_kv_pool(struct gl_engine *e)
{
    return e->pool;
}

struct gl_kv_pool *gl_engine_dflash_kv_pool(struct gl_engine *e)
{
    return e->dfl_pool;
}

void gl_engine_stats(struct gl_engine *e, struct gl_engine_stats *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->st_pub;
    out->n_waiting += e->n_in;
    pthread_mutex_unlock(&e->mu);
    // The encoder's counters live (submit counts lookups before any step publishes): a client
    // that reads /metrics right after its reply sees its own request's lookup.
    pthread_mutex_lock(&e->enc_mu);
    out->enc_queries = e->enc_queries;
    out->enc_hits = e->enc_hits;
    out->enc_runs = e->enc_runs;
    out->enc_entries = e->enc_entries;
    out->enc_bytes = e->enc_bytes;
    pthread_mutex_unlock(&e->enc_mu);
}

// ---- submit / cancel (any thread) ----

// Stop set of a request: tokenizer EOS + engine EOS ids (unless ignore_eos) + its stop ids,
// deduplicated, only ids the model can produce.
static gl_status build_stop_ids(struct gl_engine *e, struct req *r, struct gl_err *err)
{
    int32_t cand[GL_ENGINE_MAX_EOS + 2], n = 0;
    if (!r->sp.ignore_eos) {
        if (e->tok) {
            cand[n++] = gl_tokenizer_eos(e->tok);
            cand[n++] = gl_tokenizer_eot(e->tok);
        }
        for (int32_t i = 0; i < e->p.n_eos; i++)
            cand[n++] = e->p.eos_ids[i];
    }
    r->stop_ids = gl_malloc((size_t)(n + r->sp.n_stop_ids + 1) * sizeof(int32_t));
    if (!r->stop_ids)
        return gl_err_set(err, GL_E_NOMEM, "engine: no memory for the stop set");
    for (int32_t i = 0; i < n + r->sp.n_stop_ids; i++) {
        int32_t id = i < n ? cand[i] : r->sp.stop_token_ids[i - n];
        int dup = id < 0 || id >= e->n_vocab;
        for (int32_t j = 0; j < r->n_stop_ids && !dup; j++)
            dup = r->stop_ids[j] == id;
        if (!dup)
            r->stop_ids[r->n_stop_ids++] = id;
    }
    return GL_OK;
}

// Media of a request: inside the prompt, sorted, not overlapping, each with rows.
static gl_status check_media(const struct gl_engine *e, const struct gl_request *r,
                             struct gl_err *err)
{
    if (r->n_media < 0 || (r->n_media > 0 && !r->media))
        return gl_err_set(err, GL_E_INVAL, "engine: %d media items without an array", r->n_media);
    int64_t end = 0;
    for (int32_t i = 0; i < r->n_media; i++) {
        const struct gl_request_media *md = &r->media[i];
        const int deferred = !md->embd && md->patches;
        if ((!md->embd && !deferred) || md->n_rows < 1 || md->pos < end ||
            (int64_t)md->pos + md->n_rows > r->n_prompt)
            return gl_err_set(err, GL_E_INVAL,
                              "engine: media %d: %d rows at prompt position %d (prompt of %d "
                              "tokens): rows must be given, inside the prompt, sorted and not "
                              "overlapping",
                              i, md->n_rows, md->pos, r->n_prompt);
        if (deferred && ((int64_t)md->gh * md->gw != md->n_rows || md->gh < 1))
            return gl_err_set(err, GL_E_INVAL, "engine: media %d: grid %dx%d for %d rows", i,
                              md->gh, md->gw, md->n_rows);
        if (deferred && !gl_model_vision(e->m))
            return gl_err_set(err, GL_E_UNSUPPORTED,
                              "engine: media %d: patches to encode, but the model has no vision "
                              "tower",
                              i);
        end = (int64_t)md->pos + md->n_rows;
    }
    return GL_OK;
}

// Frees the rows of r's media: they belong to the engine from submit on, also when it refuses.
static void free_media(const struct gl_request *r)
{
    for (int32_t i = 0; r->media && i < r->n_media; i++) {
        gl_free(r->media[i].embd);
        gl_free(r->media[i].patches);
    }
}

// Deferred media of q (its patches) join the encoder cache: an entry with the same content in
// flight or kept is shared (its patches are dropped), else a new one is queued. q->enc holds one
// reference per deferred part.
static gl_status enc_attach(struct gl_engine *e, struct req *q, struct gl_err *err)
{
    int any = 0;
    for (int32_t i = 0; i < q->n_media; i++)
        any |= q->media[i].patches != NULL;
    if (!any)
        return GL_OK;
    if (!(q->enc = gl_calloc((size_t)q->n_media, sizeof *q->enc)))
        return gl_err_set(err, GL_E_NOMEM, "engine: no memory");
    pthread_mutex_lock(&e->enc_mu);
    gl_status st = enc_start(e, err);
    for (int32_t i = 0; st == GL_OK && i < q->n_media; i++) {
        struct gl_request_media *md = &q->media[i];
        if (!md->patches)
            continue;
        struct enc_entry *x = e->enc_head;
        while (x && !(x->digest == md->digest && x->gh == md->gh && x->gw == md->gw &&
                      x->state != ENC_FAILED))
            x = x->next;
        e->enc_queries++;
        if (x) {
            e->enc_hits++;
            if (x->refs++ == 0 && x->state == ENC_DONE)
                e->enc_kept -= (int64_t)enc_bytes(e, x);
            gl_free(md->patches);
        } else {
            if (!(x = gl_calloc(1, sizeof *x))) {
                st = gl_err_set(err, GL_E_NOMEM, "engine: no memory");
                break;
            }
            *x = (struct enc_entry){.digest = md->digest,
                                    .n_rows = md->n_rows,
                                    .gh = md->gh,
                                    .gw = md->gw,
                                    .patches = md->patches,
                                    .state = ENC_QUEUED,
                                    .refs = 1,
                                    .prev = e->enc_tail};
            if (e->enc_tail)
                e->enc_tail->next = x;
            else
                e->enc_head = x;
            e->enc_tail = x;
            e->enc_entries++;
        }
        x->last_use = ++e->enc_tick;
        md->patches = NULL;
        q->enc[i] = x;
    }
    pthread_mutex_unlock(&e->enc_mu);
    return st;
}

// Prefix-cache key id of row j of the media with this digest (engine.h): a 64-bit mix of both,
// folded to a negative int32 so it never equals a token id (kv.c hashes ids as uint32).
static int32_t media_key(uint64_t digest, int32_t j)
{
    uint64_t x = digest ^ ((uint64_t)(uint32_t)j + 1) * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (int32_t)(-1 - (int64_t)(x & 0x7FFFFFFFu));
}

static gl_status check_request(struct gl_engine *e, const struct gl_request *r, struct gl_err *err)
{
    gl_status st = gl_sample_params_check(&r->sp, e->n_vocab, err);
    if (st != GL_OK)
        return st;
    if (r->n_prompt < 1 || !r->prompt)
        return gl_err_set(err, GL_E_INVAL, "engine: empty prompt");
    if ((st = check_media(e, r, err)) != GL_OK)
        return st;
    for (int32_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab)
            return gl_err_set(err, GL_E_INVAL, "engine: prompt[%d] = %d not in [0, %d)", i,
                              r->prompt[i], e->n_vocab);
    if (r->n_prompt >= e->p.max_model_len)
        return gl_err_set(err, GL_E_INVAL,
                          "engine: prompt of %d tokens leaves no room in max_model_len %d",
                          r->n_prompt, e->p.max_model_len);
    if (r->sp.n_stop > 0 && !e->tok)
        return gl_err_set(err, GL_E_INVAL, "engine: stop strings need a tokenizer");
    // The whole sequence must fit the pool when it runs alone, else it could only end early
    // (engine.h: no "length" that is really the pool). Positions: the prompt and every
    // generated token (the last one is never computed: one spare position).
    int32_t room = e->p.max_model_len - r->n_prompt;
    int32_t max_tokens = r->sp.max_tokens < 0 || r->sp.max_tokens > room ? room : r->sp.max_tokens;
    struct gl_kv_plan plan;
    st = gl_kv_plan_compute(&e->m->cfg, &e->p.kv, (int64_t)r->n_prompt + max_tokens, &plan, err);
    if (st != GL_OK)
        return st;
    // A split pool (partial offload): each side must hold its groups' pages.
    const int64_t dev_have = plan.n_dev_pages, host_have = e->pool_pages - plan.n_dev_pages;
    if (dev_have > 0 && (plan.dev_pages_per_seq > dev_have ||
                         plan.pages_per_seq - plan.dev_pages_per_seq > host_have))
        return gl_err_set(err, GL_E_LIMIT,
                          "engine: a prompt of %d tokens plus max_tokens %d needs %lld KV pages "
                          "on the device and %lld on the host; the pool has %lld and %lld: lower "
                          "max_tokens or give the KV cache more memory",
                          r->n_prompt, max_tokens, (long long)plan.dev_pages_per_seq,
                          (long long)(plan.pages_per_seq - plan.dev_pages_per_seq),
                          (long long)dev_have, (long long)host_have);
    if (plan.pages_per_seq > e->pool_pages)
        return gl_err_set(err, GL_E_LIMIT,
                          "engine: a prompt of %d tokens plus max_tokens %d%s needs %lld KV pages; "
                          "the pool has %lld: lower max_tokens or give the KV cache more memory",
                          r->n_prompt, max_tokens,
                          r->sp.max_tokens < 0 ? " (unset: up to max_model_len)" : "",
                          (long long)plan.pages_per_seq, (long long)e->pool_pages);
    return GL_OK;
}

static void free_procs(const struct gl_request *r)
{
    for (int32_t i = 0; r->procs && i < r->sp.n; i++)
        if (r->procs[i].free)
            r->procs[i].free(r->procs[i].user);
}

gl_status gl_engine_submit(struct gl_engine *e, const struct gl_request *r, uint64_t *id,
                           struct gl_err *err)
{
    gl_status st = check_request(e, r, err);
    if (st != GL_OK) {
        free_procs(r);
        free_media(r);
        return st;
    }
    struct req *q = gl_calloc(1, sizeof *q);
    if (!q || (st = gl_sample_params_copy(&q->sp, &r->sp, err)) != GL_OK) {
        gl_free(q);
        free_procs(r);
        free_media(r);
        return st != GL_OK ? st : gl_err_set(err, GL_E_NOMEM, "engine: no memory");
    }
    const int32_t n_media = r->media ? r->n_media : 0;
    q->prompt = gl_malloc((size_t)r->n_prompt * sizeof *q->prompt);
    // calloc: req_free below must see no processor (their users are freed from r) and no rows.
    q->procs = r->procs ? gl_calloc((size_t)r->sp.n, sizeof *q->procs) : NULL;
    q->media = n_media > 0 ? gl_calloc((size_t)n_media, sizeof *q->media) : NULL;
    const int keyed = n_media > 0 || r->cache_salt != 0; // keys differ from the tokens
    q->keys = keyed ? gl_malloc((size_t)r->n_prompt * sizeof *q->keys) : NULL;
    if (!q->prompt || (r->procs && !q->procs) || (n_media > 0 && !q->media) ||
        (keyed && !q->keys)) {
        free_procs(r);
        free_media(r);
        req_free(q);
        return gl_err_set(err, GL_E_NOMEM, "engine: no memory for a %d-token prompt", r->n_prompt);
    }
    if (r->procs)
        memcpy(q->procs, r->procs, (size_t)r->sp.n * sizeof *q->procs);
    memcpy(q->prompt, r->prompt, (size_t)r->n_prompt * sizeof *q->prompt);
    if (keyed)
        memcpy(q->keys, r->prompt, (size_t)r->n_prompt * sizeof *q->keys);
    if (n_media > 0) { // the rows are the request's from here on (req_free frees them)
        memcpy(q->media, r->media, (size_t)n_media * sizeof *q->media);
        q->n_media = n_media;
        for (int32_t i = 0; i < n_media; i++)
            for (int32_t j = 0; j < q->media[i].n_rows; j++)
                q->keys[q->media[i].pos + j] = media_key(q->media[i].digest, j);
    }
    // cache_salt: two derived ids (62 bits) replace the first two keys; every block key chains
    // from block 0, so no block is shared with another salt or with unsalted requests.
    for (int32_t j = 0; r->cache_salt && j < 2 && j < r->n_prompt; j++)
        q->keys[j] = media_key(r->cache_salt ^ 0x73616C74ull, j);
    q->n_prompt = r->n_prompt;
    q->on_event = r->on_event;
    q->user = r->user;
    int32_t room = e->p.max_model_len - r->n_prompt;
    q->max_tokens = r->sp.max_tokens < 0 || r->sp.max_tokens > room ? room : r->sp.max_tokens;
    q->eng = e;
    if ((st = build_stop_ids(e, q, err)) != GL_OK || (st = enc_attach(e, q, err)) != GL_OK) {
        req_free(q);
        return st;
    }
    pthread_mutex_lock(&e->mu);
    if (e->n_in + e->n_waiting_pub >= e->p.max_waiting) {
        pthread_mutex_unlock(&e->mu);
        req_free(q);
        return gl_err_set(err, GL_E_AGAIN, "engine: overloaded (%d requests waiting)",
                          e->p.max_waiting);
    }
    if (grow((void **)&e->live, &e->cap_live, e->n_live + 1, sizeof *e->live)) {
        pthread_mutex_unlock(&e->mu);
        req_free(q);
        return gl_err_set(err, GL_E_NOMEM, "engine: no memory");
    }
    q->id = e->next_id++;
    q->seed = r->sp.has_seed ? r->sp.seed : e->next_seed++;
    e->live[e->n_live++] = q->id;
    if (e->in_tail)
        e->in_tail->next = q;
    else
        e->in_head = q;
    e->in_tail = q;
    e->n_in++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (id)
        *id = q->id;
    return GL_OK;
}

int gl_engine_cancel(struct gl_engine *e, uint64_t id)
{
    int found = 0;
    pthread_mutex_lock(&e->mu);
    if (live_find(e, id) >= 0 &&
        !grow((void **)&e->cancels, &e->cap_cancels, e->n_cancels + 1, sizeof *e->cancels)) {
        e->cancels[e->n_cancels++] = id;
        found = 1;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return found;
}

// ---- events and finishing (step thread) ----

static gl_status text_reserve(struct gl_engine *e, size_t n)
{
    if (n <= e->cap_text)
        return GL_OK;
    size_t nc = e->cap_text * 2;
    while (nc < n)
        nc *= 2;
    char *t = gl_realloc(e->text, nc);
    if (!t)
        return GL_E_NOMEM;
    e->text = t;
    e->cap_text = nc;
    return GL_OK;
}

static void emit(struct seq *s, struct gl_event *ev)
{
    ev->request_id = s->req->id;
    ev->index = s->index;
    ev->n_prompt = s->req->n_prompt;
    ev->n_generated = s->n_gen;
    ev->t_scheduled_us = s->t_scheduled_us;
    ev->n_prompt_cached = s->n_prompt_cached;
    if (s->req->on_event)
        s->req->on_event(s->req->user, ev);
}

static void remove_from(struct seq **arr, int32_t *n, struct seq *s)
{
    for (int32_t i = 0; i < *n; i++) {
        if (arr[i] == s) {
            memmove(arr + i, arr + i + 1, (size_t)(*n - i - 1) * sizeof *arr);
            (*n)--;
            return;
        }
    }
}

// Ends a sequence that is in no list any more: frees its pages and, with its last sibling, the
// request (and its id for cancel).
static void retire(struct gl_engine *e, struct seq *s)
{
    struct req *r = s->req;
    seq_free(s);
    if (--r->n_live > 0)
        return;
    pthread_mutex_lock(&e->mu);
    int i = live_find(e, r->id);
    if (i >= 0)
        e->live[i] = e->live[--e->n_live];
    pthread_mutex_unlock(&e->mu);
    req_free(r);
}

// Final event without a new token (abort, or an error: why says what failed).
static void finish_now(struct gl_engine *e, struct seq *s, enum gl_finish f, const char *why)
{
    struct gl_event ev = {0};
    ev.error = f == GL_FINISH_ERROR ? why : NULL;
    if (e->tok && held_reserve(s, 16) == 0)
        s->n_held += (size_t)gl_detok_flush(&s->dt, s->held + s->n_held, 16);
    ev.text = s->n_held ? s->held : "";
    ev.text_len = s->n_held;
    ev.finish = f;
    ev.stop_token = -1;
    emit(s, &ev);
    retire(e, s);
}

// ---- sampling one sequence (step thread) ----

static int is_stop_id(const struct req *r, int32_t t)
{
    for (int32_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == t)
            return 1;
    return 0;
}

// Adds the token's text to held; returns 0, or -1 when out of memory.
static int feed_text(struct gl_engine *e, struct seq *s, int32_t t)
{
    size_t tl = 0;
    if (!e->tok || !gl_tokenizer_token_bytes(e->tok, t, &tl))
        return 0;
    if (held_reserve(s, tl + 16))
        return -1;
    int w = gl_detok_feed(&s->dt, e->tok, t, s->req->sp.skip_special_tokens, s->held + s->n_held,
                          s->cap_held - s->n_held);
    GL_ASSERT(w >= 0);
    s->n_held += (size_t)w;
    return 0;
}

// Stop and length handling of the token t just appended to s (sampled or forced), then the text
// release: what no stop string can still begin in is appended to the event text e->text[0..
// ev->text_len). ev->finish may already be ABORT (processor refusal, out of memory): then only
// the held text is flushed. Per token, so a jump-forward run of tokens ends exactly where a
// token-by-token run would (same stop matches, same held-back text).
static void end_token(struct gl_engine *e, struct seq *s, int32_t t, struct gl_event *ev)
{
    const struct req *r = s->req;
    const struct gl_sample_params *sp = &r->sp;
    size_t emit_len = 0;
    if (ev->finish != GL_FINISH_NONE) {
        // failed before any check (ERROR)
    } else if (is_stop_id(r, t) && s->n_gen > sp->min_tokens) {
        ev->finish = GL_FINISH_STOP;
        ev->stop_token = t;
    } else if (feed_text(e, s, t)) {
        ev->finish = GL_FINISH_ERROR;
        ev->error = "engine: out of memory decoding the text";
    } else if (sp->n_stop > 0 && s->n_gen >= sp->min_tokens) {
        size_t at = 0;
        int32_t k = gl_stop_match(sp, s->held, s->n_held, &at);
        if (k >= 0) {
            ev->finish = GL_FINISH_STOP;
            ev->stop_matched = sp->stop[k];
            s->n_held = at + (sp->include_stop_str_in_output ? strlen(sp->stop[k]) : 0);
            emit_len = s->n_held;
        }
    }
    if (ev->finish == GL_FINISH_NONE &&
        (s->n_gen >= r->max_tokens || s->n_tok >= e->p.max_model_len))
        ev->finish = GL_FINISH_LENGTH;
    if (ev->finish != GL_FINISH_NONE && !ev->stop_matched) {
        if (e->tok && held_reserve(s, 16) == 0)
            s->n_held += (size_t)gl_detok_flush(&s->dt, s->held + s->n_held, 16);
        emit_len = s->n_held;
    } else if (ev->finish == GL_FINISH_NONE) {
        emit_len = s->n_held - gl_stop_holdback(sp, s->held, s->n_held);
    }
    if (emit_len == 0) // also: held is NULL while nothing was ever decoded (no tokenizer)
        return;
    if (text_reserve(e, ev->text_len + emit_len + 1) == GL_OK) { // else this text is lost
        memcpy(e->text + ev->text_len, s->held, emit_len);
        ev->text_len += emit_len;
    }
    memmove(s->held, s->held + emit_len, s->n_held - emit_len);
    s->n_held -= emit_len;
}

// Appends a generated token; returns 0, or -1 when out of memory (s unchanged).
static int push_generated(struct gl_engine *e, struct seq *s, int32_t t)
{
    if (seq_push_tok(s, t)) {
        GL_LOGE("engine: request %llu: out of memory", (unsigned long long)s->req->id);
        return -1;
    }
    s->n_gen++;
    e->st.generated_tokens++;
    return 0;
}

// Jump-forward after the sampled token (see engine.h, forced): appends the processor's forced
// tokens one by one until one ends the sequence. Returns how many were appended.
static int32_t jump_forward(struct gl_engine *e, struct seq *s, struct gl_logits_processor *proc,
                            struct gl_event *ev)
{
    const struct req *r = s->req;
    int64_t room = r->max_tokens - s->n_gen;
    if (e->p.max_model_len - s->n_tok < room)
        room = e->p.max_model_len - s->n_tok;
    int32_t cap = room < GL_ENGINE_MAX_FORCED ? (int32_t)room : GL_ENGINE_MAX_FORCED;
    if (cap <= 0) // not reached: end_token finished the sequence at this room
        return 0;
    int32_t buf[GL_ENGINE_MAX_FORCED];
    int32_t n = proc->forced(proc->user, buf, cap);
    int bad = n < 0 || n > cap;
    for (int32_t i = 0; !bad && i < n; i++)
        bad = buf[i] < 0 || buf[i] >= e->n_vocab;
    if (bad) {
        GL_LOGE("engine: request %llu: logits processor forced %d tokens (cap %d) or an id "
                "outside the vocabulary",
                (unsigned long long)r->id, n, cap);
        ev->finish = GL_FINISH_ERROR;
        ev->error = "engine: the logits processor (grammar) forced an invalid run of tokens";
        end_token(e, s, -1, ev);
        return 0;
    }
    int32_t added = 0;
    for (int32_t i = 0; i < n && ev->finish == GL_FINISH_NONE; i++) {
        if (push_generated(e, s, buf[i])) {
            ev->finish = GL_FINISH_ERROR;
            ev->error = "engine: out of memory";
        } else {
            added++;
        }
        end_token(e, s, buf[i], ev);
    }
    return added;
}

// Prompt logprobs of this step's chunk (rows logits_row.. for positions pos0..): position p's
// row scores prompt token p + 1. Positions already sent (before a preemption) are skipped.
// Returns 0, or -1 after finishing s with an error (out of memory).
static int emit_plp(struct gl_engine *e, struct seq *s)
{
    const struct req *r = s->req;
    const int32_t V = e->n_vocab, k = r->sp.prompt_logprobs;
    const int32_t first = s->plp_done + 1; // the next prompt position to score
    int64_t end = s->pos0 + s->chunk;      // one past the last position this chunk scores
    end = end < r->n_prompt - 1 ? end : r->n_prompt - 1;
    const int32_t n = (int32_t)end - first + 1;
    if (n <= 0)
        return 0;
    float *lp = gl_malloc((size_t)n * sizeof *lp);
    int32_t *rank = gl_malloc((size_t)n * sizeof *rank);
    int32_t *top_id = gl_malloc((size_t)n * (size_t)(k + 1) * sizeof *top_id);
    float *top_lp = gl_malloc((size_t)n * (size_t)(k + 1) * sizeof *top_lp);
    int ok = lp && rank && top_id && top_lp;
    for (int32_t i = 0; ok && i < n; i++) {
        const int32_t p = first + i; // scored by the logits of position p - 1
        const float *row = e->logits + (size_t)(s->logits_row + (p - 1 - s->pos0)) * (size_t)V;
        gl_sample_logprobs(row, V, r->prompt[p], k, &lp[i], top_id + (size_t)i * (size_t)k,
                           top_lp + (size_t)i * (size_t)k);
        rank[i] = gl_sample_rank(row, V, r->prompt[p]);
    }
    if (ok) {
        struct gl_event ev = {.text = "",
                              .stop_token = -1,
                              .plp_pos = first,
                              .n_plp = n,
                              .plp_k = k,
                              .plp_logprobs = lp,
                              .plp_ranks = rank,
                              .plp_top_ids = top_id,
                              .plp_top_logprobs = top_lp};
        s->plp_done = (int32_t)end;
        emit(s, &ev);
    }
    gl_free(lp);
    gl_free(rank);
    gl_free(top_id);
    gl_free(top_lp);
    if (ok)
        return 0;
    remove_from(e->running, &e->n_running, s);
    finish_now(e, s, GL_FINISH_ERROR, "engine: out of memory for prompt logprobs");
    return -1;
}

// What every row of s gets before the draw, in vLLM's order: the processor's mask, the min_tokens
// stop mask, then allowed / banned ids, bias and penalties over the tokens generated so far.
// With logprobs asked, the unmodified row is kept in e->raw first (token_logprobs reads it).
static void process_row(struct gl_engine *e, struct seq *s, float *row)
{
    struct req *r = s->req;
    const struct gl_sample_params *sp = &r->sp;
    struct gl_logits_processor *proc = r->procs ? &r->procs[s->index] : NULL;
    if (sp->logprobs >= 0)
        memcpy(e->raw, row, (size_t)e->n_vocab * sizeof *row);
    if (proc && proc->mask)
        proc->mask(proc->user, row, e->n_vocab);
    if (s->n_gen < sp->min_tokens) // vLLM: no EOS / stop id before min_tokens outputs
        for (int32_t i = 0; i < r->n_stop_ids; i++)
            row[r->stop_ids[i]] = -INFINITY;
    const int32_t *out = s->tok + r->n_prompt;
    gl_sample_process(sp, row, &e->work, s->tok, r->n_prompt, out, s->n_gen);
}

// Logprobs (sp.logprobs >= 0) of token t, the i-th of the event being built, chosen from the
// row process_row last kept in e->raw (raw logprobs, sampling.h), into e->ev_*[i]. Called after
// the token's end_token, so the event text's length then is where its text ends.
static void token_logprobs(struct gl_engine *e, const struct seq *s, int32_t i, int32_t t,
                           const struct gl_event *ev)
{
    const int32_t k = s->req->sp.logprobs, top_n = k < e->n_vocab ? k : e->n_vocab;
    GL_ASSERT(k >= 0 && i >= 0 && i <= GL_SPEC_MAX_K);
    gl_sample_logprobs(e->raw, e->n_vocab, t, top_n, &e->ev_lp[i],
                       e->ev_top_id + (size_t)i * (size_t)top_n,
                       e->ev_top_lp + (size_t)i * (size_t)top_n);
    e->ev_text_end[i] = ev->text_len;
}

// The end of a sampling event: n_new tokens (the last ones of s), jump-forward first when the
// sequence goes on, then the event; a finished sequence leaves the running set and retires.
// With logprobs, token_logprobs has filled entries 0 .. n_new - 1.
static void sample_event(struct gl_engine *e, struct seq *s, struct gl_event *ev, int32_t n_new)
{
    const struct req *r = s->req;
    struct gl_logits_processor *proc = r->procs ? &r->procs[s->index] : NULL;
    // Jump-forward: never with logprobs (a forced token has no logits to report).
    if (ev->finish == GL_FINISH_NONE && proc && proc->forced && r->sp.logprobs < 0)
        n_new += jump_forward(e, s, proc, ev);
    if (r->sp.logprobs >= 0) {
        ev->logprobs = e->ev_lp;
        ev->top_n = r->sp.logprobs < e->n_vocab ? r->sp.logprobs : e->n_vocab;
        ev->top_ids = e->ev_top_id;
        ev->top_logprobs = e->ev_top_lp;
        ev->text_ends = e->ev_text_end;
    }
    // Only now: the pushes above may have moved s->tok.
    ev->tokens = &s->tok[s->n_tok - n_new];
    ev->n_tokens = n_new;
    e->text[ev->text_len] = 0; // text_reserve kept room for it (cap_text >= 1 always)
    ev->text = e->text;
    const enum gl_finish f = ev->finish;
    if (f != GL_FINISH_NONE)
        remove_from(e->running, &e->n_running, s);
    emit(s, ev);
    if (f != GL_FINISH_NONE)
        retire(e, s);
}

// GL_SPEC_DFLASH: appends the first n captured rows of s's chunk (the positions it commits
// now, from n_computed) to its drafter context. A context that is not exactly n_computed long
// (no drafter sequence, or rows it never saw) is left alone: that sequence does not draft.
// The drafter's pages for the rows come from e->dfl_pool: when it has none free the sequence
// gives all its drafter pages back and stops drafting until readmitted (its earlier rows' hidden
// states are gone, so the context cannot be completed later); the target step goes on.
static void dflash_views(struct gl_engine *e, const struct seq *s, struct gl_dflash_kv *kv)
{
    for (int l = 0; l < e->dfl_kv_cfg.n_layer; l++)
        e->dfl_views[l] = gl_kv_seq_view(s->dfl, l);
    kv->views = e->dfl_views;
    kv->len = gl_kv_seq_len(s->dfl);
}

static void dflash_feed(struct gl_engine *e, struct seq *s, int64_t n)
{
    if (!e->dfl_ctx || !s->dfl || n <= 0 || gl_kv_seq_len(s->dfl) != s->n_computed)
        return;
    if (gl_kv_seq_reserve(s->dfl, n, NULL) != GL_OK) {
        gl_kv_seq_free(s->dfl);
        s->dfl = NULL;
        e->st.dfl_no_pages++;
        return;
    }
    const struct gl_dflash_config *cf = &e->p.spec.dflash->cfg;
    const size_t E = (size_t)e->m->cfg.n_embd, TE = (size_t)cf->n_target * E;
    for (int64_t r = 0; r < n; r++)
        for (int t = 0; t < cf->n_target; t++)
            memcpy(e->dfl_in + (size_t)r * TE + (size_t)t * E,
                   e->dfl_cap[t] + (size_t)(s->cap_row0 + r) * E, E * sizeof(float));
    struct gl_err err = {0};
    struct gl_dflash_kv kv;
    dflash_views(e, s, &kv);
    if (gl_dflash_append_kv(e->dfl_ctx, &kv, e->dfl_in, n, &err) != GL_OK) {
        GL_LOGW("engine: dflash context not extended: %s", err.msg);
        gl_kv_seq_free(s->dfl);
        s->dfl = NULL;
        return;
    }
    gl_kv_seq_commit(s->dfl, NULL, n); // releases sliding pages the window has passed
}

// test_wrong_rule 2 (engine.h, tests only): min_p on the untempered logits, i.e. before
// temperature: drops every id with logit < max + log(min_p) (p < min_p * p_max at temperature 1).
static void wrong_min_p(const struct gl_sample_params *sp, float *row, int32_t V)
{
    if (sp->min_p <= 0.0f || sp->temperature <= 0.0f)
        return;
    float mx = -INFINITY;
    for (int32_t v = 0; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    const float thr = mx + logf(sp->min_p);
    for (int32_t v = 0; v < V; v++)
        row[v] = row[v] < thr ? -INFINITY : row[v];
}

// Verification of a speculative step (engine.h): rows logits_row .. logits_row + n_draft hold
// the logits after the last pending token (the only one of a decode; the last forced one of a
// jump-forward chunk) and after each draft token. Row i decides generated token
// i through the plain per-token path (process_row, pick, accept, end_token, token_logprobs: its
// logprobs are row i's raw ones, as a plain step computing that position reports); it stops at the
// first token that differs from its draft (the correction) or ends the sequence, or after the
// bonus token of row n_draft. The KV then commits exactly the positions whose input was a real
// token (the pending ones and the accepted drafts) and gives back the rest.
static void spec_verify(struct gl_engine *e, struct seq *s)
{
    struct req *r = s->req;
    const struct gl_sample_params *sp = &r->sp;
    const int32_t V = e->n_vocab, k = s->n_draft;
    const int64_t pending = s->n_tok - s->n_computed; // 1, or 1 + forced tokens (jump-forward)
    struct gl_logits_processor *proc = r->procs ? &r->procs[s->index] : NULL;
    int32_t draft[GL_SPEC_MAX_K];
    memcpy(draft, s->tok + s->n_tok, (size_t)k * sizeof *draft); // the pushes overwrite them
    s->n_draft = 0;
    struct gl_event ev = {0};
    ev.stop_token = -1;
    int32_t n_new = 0, n_acc = 0, n_rejected = 0;
    for (int32_t i = 0; i <= k; i++) {
        float *row = e->logits + (size_t)(s->logits_row + i) * (size_t)V;
        process_row(e, s, row);
        if (e->p.spec.test_wrong_rule == 2)
            wrong_min_p(sp, row, V);
        // A draft is one token d (q one-hot), so rejection sampling (keep d with probability
        // p(d), else draw from p without d, renormalised) and its maximal coupling "draw t from p
        // as plain decoding does; d is accepted iff t == d" give every token the same
        // probability. The coupling is used: it spends the sequence's RNG exactly as decoding
        // without speculation (one draw per token), so a seeded request's tokens do not depend
        // on how many drafts each step verified (alone or batched, streamed or not).
        int32_t t, pushed = 0;
        if (i == k || e->p.spec.test_wrong_rule != 1)
            t = gl_sample_pick(sp, row, &e->work, &s->rng);
        else { // the wrong rule (tests only): on rejection, draw from p with the draft kept
            gl_sample_filter(sp, row, &e->work);
            double pd = 0.0;
            for (int32_t c = 0; c < e->work.n_cand; c++)
                pd = e->work.cand[c].id == draft[i] ? (double)e->work.cand[c].p : pd;
            t = gl_rng_uniform(&s->rng) < pd ? draft[i]
                                             : gl_sample_pick(sp, row, &e->work, &s->rng);
        }
        if (push_generated(e, s, t)) {
            ev.finish = GL_FINISH_ERROR;
            ev.error = "engine: out of memory";
        } else {
            n_new++;
            pushed = 1;
        }
        if (ev.finish == GL_FINISH_NONE && proc && proc->accept &&
            proc->accept(proc->user, t) != 0) {
            GL_LOGE("engine: request %llu: the logits processor refused sampled token %d",
                    (unsigned long long)r->id, t);
            ev.finish = GL_FINISH_ERROR;
            ev.error = "engine: the logits processor (grammar) refused the sampled token";
        }
        end_token(e, s, t, &ev);
        if (sp->logprobs >= 0 && pushed) // this row's, exactly as a plain step reports them
            token_logprobs(e, s, n_new - 1, t, &ev);
        const int accepted = i < k && t == draft[i] && ev.error == NULL;
        if (accepted) {
            n_acc++;
            e->st.spec_accepted_per_pos[i]++;
        }
        n_rejected += i < k && !accepted && ev.error == NULL;
        if (!accepted || ev.finish != GL_FINISH_NONE)
            break;
    }
    e->st.spec_drafts++;
    e->st.spec_jf_drafts += pending > 1;
    e->st.spec_draft_tokens += k;
    e->st.spec_accepted_tokens += n_acc;
    gl_spec_cost_verified(&e->cost, n_acc, n_acc + n_rejected);
    // Inputs 0 .. pending + n_new - 2 of the chunk were the pending tokens and n_new - 1
    // accepted drafts (every pushed token but the last is an accepted draft): as after any
    // decode, the newest token is pending (n_computed == n_tok - 1).
    dflash_feed(e, s, pending - 1 + n_new);
    gl_kv_seq_commit(s->kv, seq_keys(s) + s->n_computed, pending - 1 + n_new);
    s->n_computed += pending - 1 + n_new;
    GL_ASSERT(s->n_computed == s->n_tok - 1);
    gl_kv_seq_trim(s->kv);
    sample_event(e, s, &ev, n_new);
}

// Samples the next token of s from its logits row, then (jump-forward) the processor's forced
// tokens, and emits one event for all of them.
static void sample_one(struct gl_engine *e, struct seq *s, float *row)
{
    struct req *r = s->req;
    const struct gl_sample_params *sp = &r->sp;
    struct gl_logits_processor *proc = r->procs ? &r->procs[s->index] : NULL;
    process_row(e, s, row);
    int32_t t = gl_sample_pick(sp, row, &e->work, &s->rng);

    struct gl_event ev = {0};
    ev.stop_token = -1;
    int32_t n_new = 0;
    if (push_generated(e, s, t)) {
        ev.finish = GL_FINISH_ERROR;
        ev.error = "engine: out of memory";
    } else {
        n_new = 1;
    }
    if (ev.finish == GL_FINISH_NONE && proc && proc->accept && proc->accept(proc->user, t) != 0) {
        GL_LOGE("engine: request %llu: the logits processor refused sampled token %d",
                (unsigned long long)r->id, t);
        ev.finish = GL_FINISH_ERROR;
        ev.error = "engine: the logits processor (grammar) refused the sampled token";
    }
    end_token(e, s, t, &ev);
    if (sp->logprobs >= 0)
        token_logprobs(e, s, 0, t, &ev);
    sample_event(e, s, &ev, n_new);
}

// ---- scheduling (step thread) ----

static int push_waiting(struct gl_engine *e, struct seq *s, int front)
{
    if (e->n_waiting == e->cap_seqs) {
        struct seq **n = gl_realloc(e->waiting, (size_t)e->cap_seqs * 2 * sizeof *n);
        if (!n)
            return -1;
        e->waiting = n;
        e->cap_seqs *= 2;
    }
    if (front) {
        memmove(e->waiting + 1, e->waiting, (size_t)e->n_waiting * sizeof *e->waiting);
        e->waiting[0] = s;
    } else {
        e->waiting[e->n_waiting] = s;
    }
    e->n_waiting++;
    return 0;
}

// Choice 0 of a prompt_logprobs request whose prompt logprobs are not all sent: every position
// of its prompt needs its logits row, so it takes no prefix-cache hit and its chunks are cut to
// the rows left (GL_ENGINE_PLP_ROWS beyond the one row every sequence has).
static int wants_plp(const struct seq *s)
{
    return s->index == 0 && s->req->sp.prompt_logprobs >= 0 && s->plp_done < s->req->n_prompt - 1;
}

static void unschedule(struct gl_engine *e, struct seq *s, int32_t *budget)
{
    if (s->chunk == 0)
        return;
    *budget += (int32_t)s->chunk;
    s->chunk = 0;
    s->n_draft = 0;
    remove_from(e->sched, &e->n_sched, s);
}

// Recompute preemption: the victim keeps its tokens, RNG and text state and waits at the front.
static void preempt(struct gl_engine *e, struct seq *v, int32_t *budget)
{
    unschedule(e, v, budget);
    remove_from(e->running, &e->n_running, v);
    gl_kv_seq_free(v->kv);
    v->kv = NULL;
    gl_kv_seq_free(v->dfl); // its drafter pages go back too (rebuilt from 0 on readmission)
    v->dfl = NULL;
    v->n_computed = 0;
    e->st.n_preempted_total++;
    e->preempted_now = 1;
    GL_ASSERT(push_waiting(e, v, 1) == 0); // capacity: waiting + running never shrinks below
}

static void add_sched(struct gl_engine *e, struct seq *s, int64_t n, int32_t *budget)
{
    if (wants_plp(s) && n > 1 + e->plp_left) // the pages reserved for n cover the shorter chunk
        n = 1 + e->plp_left;
    if (wants_plp(s))
        e->plp_left -= (int32_t)n - 1;
    s->chunk = n;
    *budget -= (int32_t)n;
    e->sched[e->n_sched++] = s;
}

// Reserves n positions for running sequence s, preempting the newest running sequences while
// the pool is dry. Returns 1 if s was scheduled, 0 if s itself left the running set.
static int sched_running(struct gl_engine *e, struct seq *s, int64_t n, int32_t *budget)
{
    for (;;) {
        if (gl_kv_seq_reserve(s->kv, n, NULL) == GL_OK) {
            add_sched(e, s, n, budget);
            return 1;
        }
        struct seq *v = e->running[e->n_running - 1];
        if (v != s) {
            preempt(e, v, budget);
            continue;
        }
        // Alone and still no room: a smaller chunk may fit (a chunk holds window - 1 + chunk
        // positions of each sliding group until committed). At one token nothing can help;
        // not reached, since submit refuses sequences the pool cannot hold (engine.h).
        if (e->n_running == 1 && n > 1) {
            n /= 2;
            continue;
        }
        if (e->n_running == 1) {
            GL_LOGE("engine: request %llu: no KV pages for position %lld even alone in the pool",
                    (unsigned long long)s->req->id, (long long)s->n_computed);
            remove_from(e->running, &e->n_running, s);
            finish_now(e, s, GL_FINISH_ERROR, "engine: the KV pool cannot hold this sequence");
        } else {
            preempt(e, s, budget);
        }
        return 0;
    }
}

// Room for n more tokens in s->tok (and s->key) beyond n_tok, without changing n_tok.
static int seq_room(struct seq *s, int64_t n)
{
    if (s->n_tok + n <= s->cap)
        return 0;
    int64_t nc = s->cap * 2 > s->n_tok + n ? s->cap * 2 : s->n_tok + n;
    if (s->key) {
        int32_t *k = gl_realloc(s->key, (size_t)nc * sizeof *k);
        if (!k)
            return -1;
        s->key = k;
    }
    int32_t *t = gl_realloc(s->tok, (size_t)nc * sizeof *t);
    if (!t)
        return -1;
    s->tok = t;
    s->cap = nc;
    return 0;
}

// GL_SPEC_REPLAY (engine.h): replay[n_gen ..], each token kept with probability alpha (a
// splitmix hash of seed and position, so on and off runs see the same drafts).
static int32_t replay_propose(const struct gl_spec_params *p, int32_t n_gen, int32_t k,
                              int32_t n_vocab, int32_t *out)
{
    int32_t n = 0;
    for (; n < k && n_gen + n < p->n_replay; n++) {
        uint64_t x = p->seed ^ ((uint64_t)(n_gen + n) + 1) * 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        x ^= x >> 31;
        const int32_t t = p->replay[n_gen + n];
        const double u = (double)(x >> 11) * 0x1.0p-53;
        out[n] = u < (double)p->alpha ? t : (int32_t)((t + 1 + (int64_t)(x % 97)) % n_vocab);
    }
    return n;
}

struct audit_cap {
    const struct gl_dflash_config *cf;
    float *rows; // [n][n_target * E]
};

static void audit_dump(void *user, int layer, int64_t pos0, const float *x, int64_t n_tok,
                       int64_t width)
{
    const struct audit_cap *a = user;
    const int64_t TE = (int64_t)a->cf->n_target * width;
    for (int t = 0; t < a->cf->n_target; t++)
        for (int64_t r = 0; a->cf->target_layers[t] == layer && r < n_tok; r++)
            memcpy(a->rows + (pos0 + r) * TE + t * width, x + r * width,
                   (size_t)width * sizeof(float));
}

// test_dflash_audit (engine.h): the block of e->dfl_logits (k + 1 rows, just computed from s's
// incremental context) against one from a context rebuilt from scratch.
static void dflash_audit(struct gl_engine *e, struct seq *s, int32_t k)
{
    const struct gl_dflash *d = e->p.spec.dflash;
    const int64_t n = s->n_computed, E = e->m->cfg.n_embd, V = e->n_vocab;
    const int64_t TE = (int64_t)d->cfg.n_target * E;
    struct gl_err err = {0};
    struct gl_model_ctx *mc = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_dflash_seq *ds = NULL;
    struct audit_cap a = {&d->cfg, gl_malloc((size_t)(n * TE) * sizeof(float))};
    float *lg = gl_malloc((size_t)(k + 1) * (size_t)V * sizeof(float));
    GL_ASSERT(a.rows && lg);
    GL_ASSERT(gl_model_ctx_new(&mc, e->m, (int)n, 1, n, &err) == GL_OK);
    GL_ASSERT(gl_kv_cache_new(&kv, &e->m->cfg, n, &err) == GL_OK);
    GL_ASSERT(gl_dflash_seq_new(&ds, d, n, &err) == GL_OK);
    struct gl_model_dump dump = {audit_dump, &a};
    GL_ASSERT(gl_model_forward(mc, kv, s->tok, n, 0, NULL, 0, &dump, &err) == GL_OK);
    for (int64_t r = 0; r < n; r += e->p.max_num_batched_tokens) {
        int64_t m = n - r < e->p.max_num_batched_tokens ? n - r : e->p.max_num_batched_tokens;
        GL_ASSERT(gl_dflash_append(e->dfl_ctx, ds, a.rows + r * TE, m, &err) == GL_OK);
    }
    GL_ASSERT(gl_dflash_block(e->dfl_ctx, ds, s->tok[n], k + 1, NULL, lg, &err) == GL_OK);
    double dmax = 0.0, rmax = 0.0;
    for (int64_t i = 0; i < (k + 1) * V; i++) {
        double df = fabs((double)lg[i] - (double)e->dfl_logits[i]);
        dmax = df > dmax ? df : dmax;
        rmax = fabs((double)lg[i]) > rmax ? fabs((double)lg[i]) : rmax;
    }
    GL_ASSERT_MSG(dmax <= 1e-4 * rmax,
                  "engine: dflash context of request %llu at %lld positions differs from a "
                  "rebuilt one (max |diff| %g of %g)",
                  (unsigned long long)s->req->id, (long long)n, dmax, rmax);
    e->dfl_audits++;
    gl_dflash_seq_delete(ds);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(mc);
    gl_free(a.rows);
    gl_free(lg);
}

// GL_SPEC_DFLASH (engine.h): one drafter block [pending token, mask x k] at s's next position;
// the draft is the argmax of rows 1..k. 0 when the drafter context does not cover s's computed
// positions (the pending token is the anchor at position n_computed).
static int32_t dflash_propose(struct gl_engine *e, struct seq *s, int32_t k, int32_t *out)
{
    if (!s->dfl || gl_kv_seq_len(s->dfl) != s->n_computed || s->n_computed != s->n_tok - 1)
        return 0;
    struct gl_err err = {0};
    struct gl_dflash_kv kv;
    dflash_views(e, s, &kv);
    if (gl_dflash_block_kv(e->dfl_ctx, &kv, s->tok[s->n_tok - 1], k + 1, NULL, e->dfl_logits,
                           &err) != GL_OK) {
        GL_LOGW("engine: dflash draft failed: %s", err.msg);
        return 0;
    }
    if (e->p.spec.test_dflash_audit > 0 && e->dfl_tick++ % e->p.spec.test_dflash_audit == 0)
        dflash_audit(e, s, k);
    const int32_t V = e->n_vocab;
    for (int32_t i = 1; i <= k; i++) {
        const float *row = e->dfl_logits + (size_t)i * (size_t)V;
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            best = row[v] > row[best] ? v : best;
        out[i - 1] = best;
    }
    return k;
}

// Whether running sequence s may speculate. Its pending tokens must all be generated ones: one
// (a decode) or several (a sampled token and the ones jump-forward forced after it, or the
// generated tail of a recompute), never prompt positions (a prefill samples its first token
// plainly). Not while prompt logprobs are still to be sent (their rows are the prefill's). A
// processor without draft_ok cannot say where a draft leaves its grammar. Logprobs need nothing:
// every verified row reports its token's (spec_verify).
static int spec_eligible(const struct seq *s)
{
    const struct req *r = s->req;
    const struct gl_logits_processor *proc = r->procs ? &r->procs[s->index] : NULL;
    const int64_t pending = s->n_tok - s->n_computed;
    return (pending == 1 || (pending > 1 && s->n_computed >= r->n_prompt)) && !wants_plp(s) &&
           !(proc && !proc->draft_ok);
}

// This step's draft length (engine.h, the cost model): k with fixed_k, else the model's choice
// for the n_spec sequences that may speculate over the step's other rows (now and then a stale
// neighbouring length instead: gl_spec_cost_explore); after
// GL_SPEC_PROBE_EVERY steps in a row at 0, a single-token probe.
static void spec_choose(struct gl_engine *e, int32_t n_dec, int32_t budget)
{
    e->spec_len = e->spec_probe = 0;
    int32_t n_spec = 0;
    int64_t rows0 = n_dec;
    for (int32_t i = 0; i < e->n_running; i++) {
        const struct seq *s = e->running[i];
        const int64_t pending = s->n_tok - s->n_computed;
        // A forced run must fit un-split; DFlash never drafts after one (dflash_propose).
        n_spec += (pending == 1 || pending < budget) && spec_eligible(s) &&
                  (pending == 1 || e->p.spec.method != GL_SPEC_DFLASH);
        rows0 += pending > 1 ? pending : 0;
    }
    for (int32_t w = 0; e->n_running < e->p.max_num_seqs && w < e->n_waiting && rows0 < budget; w++)
        rows0 += e->waiting[w]->n_tok;
    rows0 = rows0 < budget ? rows0 : budget;
    if (n_spec == 0)
        return;
    int32_t j = e->p.spec.k;
    if (!e->p.spec.fixed_k) {
        j = gl_spec_cost_choose(&e->cost, rows0, n_spec, e->p.spec.k);
        j = gl_spec_cost_explore(&e->cost, rows0, n_spec, e->p.spec.k, j);
    }
    e->spec_len = j;
    e->st.spec_len = j;
    e->st.spec_len_steps[j]++;
    if (j > 0 || ++e->cost.since_probe < GL_SPEC_PROBE_EVERY) {
        e->cost.since_probe = j > 0 ? 0 : e->cost.since_probe;
        return;
    }
    e->cost.since_probe = 0;
    e->spec_probe = 1;
}

// Speculation for running sequence s (engine.h): a draft of up to k tokens written after its
// tokens, cut where its processor would refuse, bounded by the step budget and by what max_tokens
// and max_model_len leave (the chunk's last position is n_tok - 1 + n_draft); scheduled as one
// chunk of pending + n_draft (pending: 1 for a decode, 1 + m after m forced tokens) when the
// budget takes it un-split and the pool has the pages without preempting. later_decodes: decodes
// not scheduled yet this step, whose one token each the draft leaves room for (a draft never
// pushes a plain decode out of the step). Returns 1 if scheduled.
static int spec_schedule(struct gl_engine *e, struct seq *s, int32_t *budget, int32_t later_decodes)
{
    const struct req *r = s->req;
    const struct gl_spec_params *p = &e->p.spec;
    const struct gl_logits_processor *proc = r->procs ? &r->procs[s->index] : NULL;
    // The cost model's length for this step, or a single-token probe while it chose 0.
    int64_t k = e->spec_len > 0 ? e->spec_len : e->spec_probe;
    const int64_t pending = s->n_tok - s->n_computed;
    if (k <= 0 || !spec_eligible(s))
        return 0;
    k = k < *budget - pending - later_decodes ? k : *budget - pending - later_decodes;
    k = k < r->max_tokens - s->n_gen - 1 ? k : r->max_tokens - s->n_gen - 1;
    k = k < e->p.max_model_len - s->n_tok ? k : e->p.max_model_len - s->n_tok;
    if (k <= 0 || seq_room(s, k))
        return 0;
    int32_t *draft = s->tok + s->n_tok;
    int32_t n =
        p->method == GL_SPEC_REPLAY   ? replay_propose(p, s->n_gen, (int32_t)k, e->n_vocab, draft)
        : p->method == GL_SPEC_DFLASH ? dflash_propose(e, s, (int32_t)k, draft)
                                      : gl_spec_ngram_propose(s->tok, s->n_tok, p->lookup_min,
                                                              p->lookup_max, (int32_t)k, draft);
    if (n > 0 && proc)
        n = proc->draft_ok(proc->user, draft, n);
    // The draft's pages must leave every later decode its worst case (a new block in each
    // group), so speculation never causes a preemption (on each side of a split pool).
    if (n <= 0 || !gl_kv_seq_can_reserve(s->kv, pending + n, later_decodes) ||
        gl_kv_seq_reserve(s->kv, pending + n, NULL) != GL_OK)
        return 0;
    s->n_draft = n;
    add_sched(e, s, pending + n, budget);
    if (e->spec_len == 0) { // the probe
        e->spec_probe = 0;
        e->st.spec_probes++;
    }
    return 1;
}

// Admits waiting[w] with a prefix-cache lookup and a first prefill chunk. Returns 1 if admitted,
// 0 if the pool has no room for it, -1 if it waits for a sibling, -2 if its next position is an
// image still being encoded (it stays queued and takes no slot; those behind it may pass).
static int admit_one(struct gl_engine *e, int32_t w, int32_t *budget)
{
    struct seq *s = e->waiting[w];
    // n > 1: later choices wait until one choice has the prompt in the cache, then share its
    // full blocks through the prefix cache instead of computing the prompt n times.
    if (s->index > 0 && !s->req->prefilled && e->p.kv.prefix_cache &&
        s->req->n_prompt >= 2 * e->p.kv.block_size)
        return -1;
    if (gl_kv_seq_new(e->pool, &s->kv, NULL) != GL_OK)
        return 0;
    const int dfl = e->p.spec.method == GL_SPEC_DFLASH;
    int64_t reused = e->p.kv.prefix_cache && !wants_plp(s) && !dfl
                         ? gl_kv_seq_reuse_prefix(s->kv, seq_keys(s), s->n_tok)
                         : 0;
    int64_t n = enc_limit(s, reused) - reused; // not past rows still being encoded
    if (n == 0) {
        gl_kv_seq_free(s->kv);
        s->kv = NULL;
        return -2;
    }
    n = n < *budget ? n : *budget;
    // Into an empty pool a first chunk too big for it is split (each sliding group holds the
    // blocks of window - 1 + n positions until the chunk is committed, far more than the
    // sequence needs later); with others running, it waits for their pages instead (FCFS).
    while (n > 0 && gl_kv_seq_reserve(s->kv, n, NULL) != GL_OK) {
        if (e->n_running > 0 || n == 1) {
            gl_kv_seq_free(s->kv);
            s->kv = NULL;
            return 0;
        }
        n = (n + 1) / 2;
    }
    memmove(e->waiting + w, e->waiting + w + 1,
            (size_t)(e->n_waiting - w - 1) * sizeof *e->waiting);
    e->n_waiting--;
    s->n_computed = reused;
    if (dfl) { // (re)admitted: the drafter context restarts with the KV (reused is 0 here)
        GL_ASSERT(s->dfl == NULL); // a waiting sequence holds no pages, the drafter's included
        if (gl_kv_seq_new(e->dfl_pool, &s->dfl, NULL) != GL_OK) // no pages yet: a handle only
            GL_LOGW("engine: no memory for a dflash context handle; the sequence will not draft");
    }
    if (!s->t_scheduled_us) { // a preempted sequence keeps its first admission
        s->t_scheduled_us = gl_time_us();
        s->n_prompt_cached = reused;
    }
    e->st.prefix_hit_tokens += reused;
    e->st.prefix_query_tokens += e->p.kv.prefix_cache ? s->n_tok : 0;
    e->running[e->n_running++] = s;
    add_sched(e, s, n, budget);
    return 1;
}

// Decodes first (one token each, oldest first), then partial prefills, then FCFS admission,
// within max_num_batched_tokens and max_num_seqs.
static void schedule(struct gl_engine *e)
{
    enc_schedule(e);
    for (int list = 0; e->enc_any && list < 2; list++) { // a failed encode ends its sequences
        struct seq **arr = list ? e->running : e->waiting;
        int32_t *n = list ? &e->n_running : &e->n_waiting;
        for (int32_t i = 0; i < *n; i++) {
            const char *why = arr[i]->req->enc ? enc_failed(arr[i]) : NULL;
            if (!why)
                continue;
            struct seq *s = arr[i];
            remove_from(arr, n, s);
            i--;
            finish_now(e, s, GL_FINISH_ERROR, why);
        }
    }
    int32_t budget = e->p.max_num_batched_tokens;
    e->n_sched = 0;
    e->preempted_now = 0;
    e->plp_left = GL_ENGINE_PLP_ROWS;
    int32_t n_dec = 0; // decodes not yet scheduled (speculation leaves them their token)
    for (int32_t i = 0; e->p.spec.method != GL_SPEC_NONE && i < e->n_running; i++)
        n_dec += e->running[i]->n_tok - e->running[i]->n_computed == 1;
    if (e->p.spec.method != GL_SPEC_NONE)
        spec_choose(e, n_dec, budget);
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < e->n_running && budget > 0; i++) {
            struct seq *s = e->running[i];
            int64_t pending = s->n_tok - s->n_computed;
            if (s->chunk > 0 || (pass == 0) != (pending == 1))
                continue;
            // Pass 1 speculates only after forced tokens (spec_eligible); every decode has had its
            // chance at the budget by then.
            const int32_t later = pass == 0 ? --n_dec : 0;
            if (e->p.spec.method != GL_SPEC_NONE && spec_schedule(e, s, &budget, later))
                continue;
            if (s->req->enc && (pending = enc_limit(s, s->n_computed) - s->n_computed) == 0)
                continue; // its next position is an image still being encoded
            if (!sched_running(e, s, pending < budget ? pending : budget, &budget))
                i--; // s left the running set; the next one moved into slot i
        }
    }
    int32_t w = 0; // waiting[0..w) wait for the encoder
    while (!e->preempted_now && w < e->n_waiting && budget > 0 &&
           e->n_running < e->p.max_num_seqs) {
        int a = admit_one(e, w, &budget);
        if (a > 0)
            continue;
        if (a == -2) {
            w++;
            continue;
        }
        if (a == 0 && e->n_running == 0) { // an empty pool cannot take even its first chunk
            struct seq *s = e->waiting[w];
            GL_LOGE("engine: request %llu cannot get KV pages in an empty pool",
                    (unsigned long long)s->req->id);
            memmove(e->waiting + w, e->waiting + w + 1,
                    (size_t)(e->n_waiting - w - 1) * sizeof *e->waiting);
            e->n_waiting--;
            finish_now(e, s, GL_FINISH_ERROR, "engine: the KV pool cannot hold this prompt");
            continue;
        }
        break;
    }
}

// ---- the step ----

// Moves new requests into the waiting queue (one sequence per choice) and applies cancels.
static gl_status drain_inbox(struct gl_engine *e, struct gl_err *err)
{
    pthread_mutex_lock(&e->mu);
    struct req *head = e->in_head;
    e->in_head = e->in_tail = NULL;
    e->n_in = 0;
    int32_t n_cancel = e->n_cancels;
    uint64_t cancel_buf[64];
    uint64_t *cancels =
        n_cancel <= 64 ? cancel_buf : gl_malloc((size_t)n_cancel * sizeof(uint64_t));
    if (cancels && n_cancel > 0)
        memcpy(cancels, e->cancels, (size_t)n_cancel * sizeof *cancels);
    e->n_cancels = cancels ? 0 : n_cancel; // on OOM keep them for the next step
    pthread_mutex_unlock(&e->mu);
    gl_status st = GL_OK;
    while (head) {
        struct req *r = head;
        head = r->next;
        r->next = NULL;
        e->st.prompt_tokens += (int64_t)r->n_prompt * r->sp.n;
        for (int32_t i = 0; i < r->sp.n; i++) {
            struct seq *s = gl_calloc(1, sizeof *s);
            if (s) {
                s->cap = r->n_prompt + 16;
                s->tok = gl_malloc((size_t)s->cap * sizeof *s->tok);
                s->key = r->keys ? gl_malloc((size_t)s->cap * sizeof *s->key) : NULL;
            }
            if (!s || !s->tok || (r->keys && !s->key) || push_waiting(e, s, 0)) {
                gl_free(s ? s->tok : NULL);
                gl_free(s ? s->key : NULL);
                gl_free(s);
                st = gl_err_set(err, GL_E_NOMEM, "engine: no memory for request %llu",
                                (unsigned long long)r->id);
                r->sp.n = i; // choices created so far
                break;
            }
            s->req = r;
            s->index = i;
            memcpy(s->tok, r->prompt, (size_t)r->n_prompt * sizeof *s->tok);
            if (s->key)
                memcpy(s->key, r->keys, (size_t)r->n_prompt * sizeof *s->key);
            s->n_tok = r->n_prompt;
            gl_rng_seed(&s->rng, gl_sample_choice_seed(r->seed, i));
            r->n_live++;
        }
        if (r->n_live == 0)
            req_free(r);
    }
    for (int32_t c = 0; cancels && c < n_cancel; c++) {
        for (int list = 0; list < 2; list++) {
            struct seq **arr = list ? e->running : e->waiting;
            int32_t *n = list ? &e->n_running : &e->n_waiting;
            for (int32_t i = 0; i < *n; i++) {
                struct seq *s = arr[i];
                if (s->req->id != cancels[c])
                    continue;
                remove_from(arr, n, s);
                i--;
                finish_now(e, s, GL_FINISH_ABORT, NULL);
            }
        }
    }
    if (cancels != cancel_buf)
        gl_free(cancels);
    return st;
}

static void publish(struct gl_engine *e)
{
    e->st.n_waiting = e->n_waiting;
    e->st.n_running = e->n_running;
    e->st.kv_pages_total = e->pool_pages;
    e->st.kv_pages_used = e->pool_pages - gl_kv_pool_free_pages(e->pool);
    if (e->dfl_pool) {
        e->st.dfl_pages_total = gl_kv_pool_total_pages(e->dfl_pool);
        e->st.dfl_pages_used = e->st.dfl_pages_total - gl_kv_pool_free_pages(e->dfl_pool);
    }
    {
        pthread_mutex_lock(&e->enc_mu);
        e->st.enc_queries = e->enc_queries;
        e->st.enc_hits = e->enc_hits;
        e->st.enc_runs = e->enc_runs;
        e->st.enc_pending = e->enc_pending;
        e->st.enc_entries = e->enc_entries;
        e->st.enc_bytes = e->enc_bytes;
        pthread_mutex_unlock(&e->enc_mu);
    }
    pthread_mutex_lock(&e->mu);
    e->st_pub = e->st;
    e->n_waiting_pub = e->n_waiting;
    pthread_mutex_unlock(&e->mu);
}

// The processor's allowed set for s's next logits (engine.h, partial head), or NULL.
static const uint32_t *head_mask(const struct gl_engine *e, const struct seq *s)
{
    const struct req *r = s->req;
    if (s->logits_row < 0 || !r->procs || r->sp.logprobs >= 0 || wants_plp(s))
        return NULL;
    const struct gl_logits_processor *proc = &r->procs[s->index];
    return proc->allowed ? proc->allowed(proc->user, e->n_vocab) : NULL;
}

// The stepping thread runs pool slot 0: it takes cpus[0] (engine.h), once.
static void pin_caller(struct gl_engine *e)
{
    e->pin_caller = 0;
    int rc = e->p.cpus[0] >= 0 ? gl_host_pin_thread(pthread_self(), e->p.cpus[0]) : 0;
    if (rc != 0)
        GL_LOGW("engine: cannot pin the step thread to cpu %d: errno %d", (int)e->p.cpus[0], rc);
}

gl_status gl_engine_step(struct gl_engine *e, int *n_active, struct gl_err *err)
{
    if (e->pin_caller)
        pin_caller(e);
    gl_status st = drain_inbox(e, err);
    if (st == GL_OK)
        schedule(e);
    const int32_t n_scheduled = st == GL_OK ? e->n_sched : 1;
    const int64_t t_step0 = gl_time_us();
    if (st == GL_OK && e->n_sched > 0) {
        const int32_t L = e->n_layer;
        int32_t row = 0;
        int64_t n_cap = 0;  // captured rows before this sequence's (GL_SPEC_DFLASH)
        int64_t n_rows = 0; // e->embd slots used (the chunks total at most the step budget)
        for (int32_t i = 0; i < e->n_sched; i++) {
            struct seq *s = e->sched[i];
            const float **embd = e->embd + n_rows;
            if (s->req->n_media > 0 && seq_embd(s, embd, e->m->cfg.n_embd))
                n_rows += s->chunk;
            else
                embd = NULL;
            for (int32_t l = 0; l < L; l++)
                e->views[(size_t)i * (size_t)L + (size_t)l] = gl_kv_seq_view(s->kv, l);
            // Rows: one for a chunk that ends the pending tokens (sampled), every position of a
            // prompt-logprobs chunk (add_sched bounded their sum), or the trailing n_draft + 1
            // of a speculative chunk (the last pending token and the draft; the logits buffer
            // has k + 1 per sequence; forced tokens before them need none).
            const int spec = s->n_draft > 0;
            const int ends = spec || s->n_computed + s->chunk == s->n_tok, plp = wants_plp(s);
            const int32_t n_out = spec ? s->n_draft + 1 : plp ? (int32_t)s->chunk : ends;
            s->logits_row = n_out > 0 ? row : -1;
            s->sample_row = ends ? row + n_out - 1 : -1;
            s->pos0 = s->n_computed;
            s->cap_row0 = n_cap;
            n_cap += s->chunk;
            row += n_out;
            e->bs[i] = (struct gl_batch_seq){.tokens = s->tok + s->n_computed,
                                             .n = (int32_t)s->chunk,
                                             .pos0 = s->n_computed,
                                             .views = &e->views[(size_t)i * (size_t)L],
                                             .logits_row = s->logits_row,
                                             .n_logits = n_out,
                                             .head_mask = spec ? NULL : head_mask(e, s),
                                             .embd = embd};
        }
        if (e->dfl_ctx) { // the drafter's target layers, every row of the step
            const struct gl_dflash_config *cf = &e->p.spec.dflash->cfg;
            struct gl_model_capture cap = {cf->n_target, cf->target_layers, e->dfl_cap};
            st = gl_model_forward_capture(e->ctx, e->bs, e->n_sched, e->logits, &cap, err);
        } else {
            st = gl_model_forward_batch(e->ctx, e->bs, e->n_sched, e->logits, err);
        }
        e->st.last_step_tokens = 0;
        for (int32_t i = 0; i < e->n_sched; i++)
            e->st.last_step_tokens += e->sched[i]->chunk;
        for (int32_t i = 0; st == GL_OK && i < e->n_sched; i++) {
            struct seq *s = e->sched[i];
            if (s->n_draft > 0) // committed after verification (spec_verify)
                continue;
            dflash_feed(e, s, s->chunk);
            gl_kv_seq_commit(s->kv, seq_keys(s) + s->n_computed, s->chunk);
            s->n_computed += s->chunk;
            s->req->prefilled |= s->n_computed >= s->req->n_prompt;
        }
        e->st.steps++;
        // Sampling may finish (free) sequences: take the batch list first.
        int32_t n = e->n_sched;
        e->n_sched = 0;
        for (int32_t i = 0; i < n; i++) {
            struct seq *s = e->sched[i];
            if (st == GL_OK && wants_plp(s) && emit_plp(e, s) != 0)
                continue; // s is gone
            s->chunk = 0;
            if (st == GL_OK && s->n_draft > 0) {
                spec_verify(e, s);
                continue;
            }
            s->n_draft = 0;
            if (st == GL_OK && s->sample_row >= 0)
                sample_one(e, s, e->logits + (size_t)s->sample_row * (size_t)e->n_vocab);
        }
        // The cost model's t(R): this step's forward pass, sampling and verification.
        if (st == GL_OK && e->p.spec.method != GL_SPEC_NONE)
            gl_spec_cost_step(&e->cost, e->st.last_step_tokens, (double)(gl_time_us() - t_step0));
    }
    e->st.spec_acceptance = gl_spec_cost_acceptance(&e->cost);
    publish(e);
    // Nothing to compute while images encode: sleep until the worker (or a submit or cancel)
    // wakes the engine, instead of spinning on empty steps beside the encoder.
    if (n_scheduled == 0 && e->enc_pending > 0 && e->n_running + e->n_waiting > 0)
        (void)gl_engine_wait(e, 100);
    if (n_active) {
        pthread_mutex_lock(&e->mu);
        *n_active = e->n_waiting + e->n_running + e->n_in;
        pthread_mutex_unlock(&e->mu);
    }
    return st;
}

gl_status gl_engine_run(struct gl_engine *e, struct gl_err *err)
{
    int n = 1;
    while (n > 0) {
        gl_status st = gl_engine_step(e, &n, err);
        if (st != GL_OK)
            return st;
    }
    return GL_OK;
}

int gl_engine_wait(struct gl_engine *e, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&e->mu);
    while (!e->in_head && e->n_cancels == 0 && !e->woken) {
        int rc = timeout_ms < 0 ? pthread_cond_wait(&e->cv, &e->mu)
                                : pthread_cond_timedwait(&e->cv, &e->mu, &until);
        if (rc != 0)
            break;
    }
    e->woken = 0;
    int work = e->in_head != NULL || e->n_cancels > 0;
    pthread_mutex_unlock(&e->mu);
    return work;
}

void gl_engine_wake(struct gl_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->woken = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void gl_engine_free(struct gl_engine *e)
{
    if (!e)
        return;
    if (e->enc_started) { // lets the encode in progress finish (no way to stop it midway)
        pthread_mutex_lock(&e->enc_mu);
        e->enc_stop = 1;
        pthread_cond_broadcast(&e->enc_cv);
        pthread_mutex_unlock(&e->enc_mu);
        pthread_join(e->enc_thread, NULL);
        for (struct enc_entry *x = e->enc_head; x; x = x->next)
            if (x->state == ENC_RUNNING) // the worker stopped before taking it back
                x->state = ENC_FAILED;
    }
    if (e->waiting && e->running) {
        (void)drain_inbox(e, NULL);
        while (e->n_running > 0) {
            struct seq *s = e->running[--e->n_running];
            finish_now(e, s, GL_FINISH_ABORT, NULL);
        }
        while (e->n_waiting > 0) {
            struct seq *s = e->waiting[--e->n_waiting];
            finish_now(e, s, GL_FINISH_ABORT, NULL);
        }
    }
    gl_free(e->waiting);
    gl_free(e->running);
    gl_free(e->sched);
    gl_free(e->bs);
    gl_free(e->views);
    gl_free(e->logits);
    gl_free(e->raw);
    gl_free(e->embd);
    gl_free(e->text);
    if (e->dfl_audits > 0)
        GL_LOGI("engine: dflash audit: %lld drafts matched a rebuilt context",
                (long long)e->dfl_audits);
    gl_dflash_ctx_delete(e->dfl_ctx);
    gl_free(e->dfl_views);
    for (int t = 0; t < GL_DFLASH_MAX_TARGETS; t++)
        gl_free(e->dfl_cap[t]);
    gl_free(e->dfl_in);
    gl_free(e->dfl_logits);
    gl_free(e->cancels);
    gl_free(e->live);
    gl_sample_work_free(&e->work);
    gl_model_ctx_delete(e->ctx);
    gl_kv_pool_free(e->pool);
    gl_kv_pool_free(e->dfl_pool);
    while (e->enc_head) // kept rows (every request has let go of its entries by now)
        enc_drop(e, e->enc_head);
    pthread_cond_destroy(&e->enc_cv);
    pthread_mutex_destroy(&e->enc_mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    gl_free(e);
}
