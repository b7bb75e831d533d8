// SPDX-License-Identifier: MIT
// server: libmicrohttpd in thread-per-connection mode. A connection thread may block: a
// non-streamed request waits for its response, a streamed one waits inside the content reader.
// Both wait in 50 ms slices and poll the socket for a hang-up (POLLRDHUP) between slices, so a
// client that disconnects cancels its request in every phase (queued, prefill, decode) within
// one slice plus one engine step; the engine frees its pages at the next step.
#define _GNU_SOURCE // POLLRDHUP
#include "server/server.h"
#include "api/api.h"
#include "base/host.h"
#include "grammar/grammar.h"
#include "image/image.h"
#include "mediasrc/mediasrc.h"
#include "model/model.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/ratelimit.h"
#include "server/route.h"
#include "tokenizer/tokenizer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GL_VERSION  "0.1.0"
#define SLICE_MS    50
#define PROBE_ITEMS 80 // deep probe: array length (>= 384 tokens however the model spells it)
// Room the probe needs: 80 items of at most ~24 tokens each (digits, booleans, compact JSON).
#define PROBE_MIN_CONTEXT 2048
#define GRAMMAR_CACHE     256

enum state { ST_LOADING, ST_READY, ST_DRAINING, ST_FAILED };
struct guard;

struct server {
    struct gl_server_params p;
    struct gl_model *model;
    struct gl_tokenizer *tok;
    struct gl_gvocab *gvocab;
    struct gl_grammar_cache *gcache;
    pthread_mutex_t grammar_lock;
    pthread_mutex_t media_lock; // one image encode at a time on media_pool
    struct gl_engine *engine;
    struct gl_dflash *dflash; // --speculative-config method dflash: the drafter (owned)
    struct gl_api_config api;
    struct gl_api_so so; // parsed --structured-outputs-config
    struct gl_metrics metrics;
    struct gl_api_mask_stats mask_stats;
    struct gl_cors cors; // read-only after start
    _Atomic int state;
    _Atomic int stop_engine;
    _Atomic int64_t in_flight; // client requests not yet answered (the probe is not counted)
    pthread_mutex_t reg_mu;    // guards the registry; taken before any request's mu
    struct sreq *reg;          // every live request, for failing them when the engine fails
    int64_t fault_step;        // GLINT_FAULT_STEP=N: step N reports a failure (tests)
    int32_t max_waiting;
    char model_name[512];
    int64_t started; // unix time
    pthread_t engine_thread, probe_thread;
    int engine_started, probe_started;
    // deep probe
    pthread_mutex_t probe_mu;
    pthread_cond_t probe_cv;
    int probe_state; // 0 pending, 1 ok, -1 failed
    int64_t probe_done_us;
    char probe_msg[768];
    int64_t probe_tokens;
    double probe_seconds;
    // connection guard (limits and read deadlines, see guard_main)
    pthread_mutex_t guard_mu;
    pthread_cond_t guard_cv;
    struct guard *guards; // every open connection
    int guard_stop, guard_started;
    int64_t guard_pending; // gl_mem_freed_pending() at the guard's last tick
    pthread_t guard_thread;
    struct gl_ratelimit *rl; // --limit-request-rate-per-ip, or NULL
    // libmicrohttpd's log: one line per MHD_LOG_PERIOD_US, the rest counted (mhd_log)
    pthread_mutex_t log_mu;
    int64_t log_next_us;
    int64_t log_dropped; // since the last line written
};

// Condition variables here wait with CLOCK_MONOTONIC deadlines (immune to clock changes).
static void cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

// ---- one generation request ----

struct sreq;
struct sprompt {
    struct sreq *r;
    int32_t idx;
};

struct sreq {
    struct server *S;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gl_api_req *req;
    struct gl_api_resp *resp;
    struct sprompt *pctx; // [n_prompts]
    uint64_t *eng_ids;    // [n_prompts]; 0: not submitted
    int32_t eng_live;     // choices the engine has not finished (it still calls back)
    int http_done;        // the HTTP side let go
    int cancelled;
    int finished_noted;                 // metrics recorded
    int64_t t_arrival, t_first, t_last; // t_arrival: the request's first byte (conn)
    int64_t t_submit;                   // handed to the engine: queue time starts
    int64_t *t_first_c;                 // [n_prompts * n] first token of each choice (0: none)
    int32_t *max_gen;                   // [n_prompts] most tokens a choice of the prompt made
    int64_t cached;                     // prompt positions the prefix cache supplied (choice 0s)
    struct conn *cn;                    // the HTTP side's record (connection thread only)
    struct MHD_Connection *conn;
    struct sreq *reg_prev, *reg_next;
    char *pending; // SSE bytes taken from resp, not yet handed to MHD
    size_t pending_len, pending_off;
};

static void sreq_free(struct sreq *r)
{
    struct server *S = r->S;
    pthread_mutex_lock(&S->reg_mu); // unlinked before anything is destroyed (see engine_failed)
    if (r->reg_prev)
        r->reg_prev->reg_next = r->reg_next;
    else if (S->reg == r)
        S->reg = r->reg_next;
    if (r->reg_next)
        r->reg_next->reg_prev = r->reg_prev;
    pthread_mutex_unlock(&S->reg_mu);
    gl_api_resp_free(r->resp);
    gl_api_req_free(&r->S->api, r->req);
    // Its matchers are gone: the grammars' growth is charged now, so the cache can fit its budget.
    gl_grammar_cache_trim(S->gcache, &S->grammar_lock);
    gl_free(r->pctx);
    gl_free(r->eng_ids);
    gl_free(r->t_first_c);
    gl_free(r->max_gen);
    gl_free(r->pending);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    gl_free(r);
}

// Called with r->mu held: frees r when both sides are done. Returns 1 if freed (mu is gone).
static int sreq_release_locked(struct sreq *r)
{
    if (!(r->http_done && r->eng_live == 0))
        return 0;
    pthread_mutex_unlock(&r->mu);
    sreq_free(r);
    return 1;
}

static void cancel_all(struct sreq *r)
{
    for (int32_t i = 0; i < gl_api_req_n_prompts(r->req); i++)
        if (r->eng_ids[i])
            (void)gl_engine_cancel(r->S->engine, r->eng_ids[i]);
}

// Metrics once, when the response is complete (caller holds r->mu).
static void note_finished(struct sreq *r)
{
    if (r->finished_noted || !gl_api_resp_done(r->resp))
        return;
    r->finished_noted = 1;
    struct gl_metrics *m = &r->S->metrics;
    for (int32_t i = 0; i < gl_api_resp_n_choices(r->resp); i++)
        gl_metrics_finish(m, gl_api_resp_finish(r->resp, i));
    gl_metrics_observe(m, GL_HIST_E2E, (double)(gl_time_us() - r->t_arrival) / 1e6);
    for (int32_t i = 0; i < gl_api_req_n_prompts(r->req); i++) { // vLLM: once per parent request
        gl_metrics_observe(m, GL_HIST_PARAMS_N, gl_api_req_sp(r->req)->n);
        gl_metrics_observe(m, GL_HIST_MAX_GEN, r->max_gen[i]);
    }
}

// vLLM's per-request phase histograms, once per finished choice (vLLM v1 counts each of the n
// samples as a request): queue = submit -> admission, prefill = admission -> first token,
// decode = first -> last token, inference = admission -> last token. Caller holds r->mu.
static void note_choice_done(struct sreq *r, int32_t prompt, const struct gl_event *ev, int64_t now)
{
    struct gl_metrics *m = &r->S->metrics;
    if (ev->index == 0)
        r->cached += ev->n_prompt_cached;
    if (ev->n_generated > r->max_gen[prompt])
        r->max_gen[prompt] = ev->n_generated;
    if (ev->finish == GL_FINISH_ERROR)
        return;
    int64_t first =
        r->t_first_c[(size_t)prompt * (size_t)gl_api_req_sp(r->req)->n + (size_t)ev->index];
    int64_t sched = ev->t_scheduled_us;
    if (sched > 0) {
        if (!first)
            first = now;
        gl_metrics_observe(m, GL_HIST_QUEUE, (double)(sched - r->t_submit) / 1e6);
        gl_metrics_observe(m, GL_HIST_PREFILL, (double)(first - sched) / 1e6);
        gl_metrics_observe(m, GL_HIST_DECODE, (double)(now - first) / 1e6);
        gl_metrics_observe(m, GL_HIST_INFERENCE, (double)(now - sched) / 1e6);
    }
    gl_metrics_observe(m, GL_HIST_PROMPT_TOK, ev->n_prompt);
    gl_metrics_observe(m, GL_HIST_GEN_TOK, ev->n_generated);
    // vLLM observes the effective max_tokens (unset: what max_model_len leaves after the prompt).
    int64_t room = (int64_t)r->S->api.max_model_len - ev->n_prompt;
    int64_t mt = gl_api_req_sp(r->req)->max_tokens;
    gl_metrics_observe(m, GL_HIST_MAX_TOK, (double)(mt >= 0 && mt < room ? mt : room));
}

// Engine thread.
static void on_event(void *user, const struct gl_event *ev)
{
    struct sprompt *pc = user;
    struct sreq *r = pc->r;
    pthread_mutex_lock(&r->mu);
    int64_t now = gl_time_us();
    if (ev->n_tokens > 0) {
        int64_t *tc =
            &r->t_first_c[(size_t)pc->idx * (size_t)gl_api_req_sp(r->req)->n + (size_t)ev->index];
        if (!*tc)
            *tc = now;
        if (!r->t_first) {
            r->t_first = now;
            gl_metrics_observe(&r->S->metrics, GL_HIST_TTFT, (double)(now - r->t_arrival) / 1e6);
        } else {
            gl_metrics_observe(&r->S->metrics, GL_HIST_ITL, (double)(now - r->t_last) / 1e6);
        }
        r->t_last = now;
    }
    if (ev->finish != GL_FINISH_NONE)
        note_choice_done(r, pc->idx, ev, now);
    if (gl_api_resp_event(r->resp, pc->idx, ev))
        (void)gl_engine_cancel(r->S->engine, r->eng_ids[pc->idx]); // a chat stop string matched
    note_finished(r);
    if (ev->finish != GL_FINISH_NONE)
        r->eng_live--;
    pthread_cond_broadcast(&r->cv);
    if (!sreq_release_locked(r))
        pthread_mutex_unlock(&r->mu);
}

// ---- HTTP helpers ----

// Names the keywords a lenient grammar dropped (gl_api_unenforced_header).
#define GL_UNENFORCED_HEADER "X-Glint-Unenforced-Keywords"
#define GL_IGNORED_HEADER    "X-Glint-Ignored-Fields"

struct conn {
    struct server *S;
    char *body;
    size_t len, cap;
    size_t seen;  // body bytes received, kept or not
    size_t limit; // body_limit for its URL
    int too_large;
    int counted; // a generation request in S->in_flight until its answer is written
    // The access-log line (never the body): filled on the connection thread.
    int64_t t_arrival; // the request's first on_request call (its headers are in)
    unsigned status;   // the status queued (0: none, the client went away first)
    char method[16], path[256], client[64], id[48];
    int64_t prompt_tokens, cached_tokens, completion_tokens; // -1: not a generation
};

// The request the calling connection thread serves (libmicrohttpd runs one thread per
// connection, and a connection serves one request at a time): queue_response records the status
// there for the access log without threading the record through every answer helper.
static _Thread_local struct conn *tl_conn;

// Every answer goes out here: the CORS headers of the request's Origin, and its status noted.
static enum MHD_Result queue_response(struct MHD_Connection *c, unsigned status,
                                      struct MHD_Response *res)
{
    if (tl_conn) {
        tl_conn->status = status;
        gl_cors_add_headers(&tl_conn->S->cors, c, res);
    }
    const char *xrid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (xrid && gl_api_request_id_ok(xrid, strlen(xrid))) // echoed only when it is one
        MHD_add_response_header(res, "X-Request-Id", xrid);
    return MHD_queue_response(c, status, res);
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *text, size_t len, const char *extra_header,
                                 const char *extra_value)
{
    struct MHD_Response *res =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!res)
        return MHD_NO;
    MHD_add_response_header(res, "Content-Type", type);
    if (extra_header)
        MHD_add_response_header(res, extra_header, extra_value);
    enum MHD_Result ret = queue_response(c, status, res);
    MHD_destroy_response(res);
    return ret;
}

// A JSON answer with one extra header (name NULL: none).
static enum MHD_Result send_json_hdr(struct MHD_Connection *c, unsigned status, json_t *o,
                                     const char *name, const char *value)
{
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t)
        return send_text(c, 500, "application/json",
                         "{\"error\":{\"message\":\"out of memory\",\"type\":"
                         "\"InternalServerError\",\"param\":null,\"code\":500}}",
                         88, NULL, NULL);
    enum MHD_Result ret = send_text(c, status, "application/json", t, strlen(t), name, value);
    free(t);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *o)
{
    return send_json_hdr(c, status, o, NULL, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, const struct gl_api_error *e)
{
    const char *h = e->http == 503 ? "Retry-After" : e->http == 405 ? "Allow" : NULL;
    return send_json_hdr(c, (unsigned)e->http, gl_api_error_json(e), h,
                         e->http == 503 ? "1" : e->param);
}

static enum MHD_Result fail(struct MHD_Connection *c, int http, const char *param, const char *msg)
{
    struct gl_api_error e;
    (void)gl_api_fail(&e, http, param, "%s", msg);
    return send_error(c, &e);
}

// 1 when the client hung up (or the socket failed).
static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 1;
    struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0)
        return 0;
    return (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// CLOCK_MONOTONIC time `seconds` from now, for pthread_cond_timedwait.
static struct timespec deadline_in(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = (double)(time_t)seconds;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static void timed_wait(struct sreq *r)
{
    struct timespec ts = deadline_in(SLICE_MS / 1000.0);
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

// ---- connection guard: connection limits and read deadlines ----
// libmicrohttpd has only an idle timeout, which a client that trickles a byte at a time never
// trips (slowloris), and a per-IP limit that closes without a word. The guard keeps one record
// per open connection (MHD's socket context). A connection over --limit-concurrency is answered
// 503, one over --limit-concurrency-per-ip 429; a request whose headers (--timeout-headers) or
// body (--timeout-body) are not complete by their deadline is answered 408; a connection idle
// past --timeout-keep-alive between requests is closed silently (keep-alive expiry). Each answer
// is written straight to the socket, which is then shut down: MHD's thread reads end-of-file and
// closes. MHD sends NOTIFY_CLOSED before it closes the descriptor and the record leaves the list
// there under guard_mu, so the guard never writes to a descriptor that was reused.

enum guard_phase { G_HEADERS, G_BODY, G_BUSY, G_KEEPALIVE, G_CLOSED };

struct guard {
    int fd;
    int reniced;      // its MHD thread runs at CONN_NICE
    uint8_t addr[16]; // client address: IPv6, or IPv4 as ::ffff:a.b.c.d (zero: unknown)
    enum guard_phase phase;
    int64_t deadline_us; // G_HEADERS, G_BODY, G_KEEPALIVE: when the phase times out
    struct guard *prev, *next;
};

#define GUARD_TICK_MS 100 // deadline resolution
// Connection threads (reading, parsing, tokenizing, compiling grammars) run this many nice levels
// below the engine, so that a client's 10 MB body or 100,000-key object takes CPU from new input,
// not from the tokens of admitted requests (on Linux nice is per thread).
#define CONN_NICE 5

// Writes one whole HTTP answer to fd without blocking (msg NULL: none), then shuts it down.
// Over TLS the guard cannot speak (the bytes would have to go through the connection's GnuTLS
// session, which its MHD thread owns): the connection is only shut down.
static void guard_answer(const struct server *S, int fd, int http, const char *reason,
                         const char *msg)
{
    if (msg && !S->p.ssl_certfile) {
        struct gl_api_error e;
        (void)gl_api_fail(&e, http, NULL, "%s", msg);
        json_t *o = gl_api_error_json(&e);
        char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        char buf[1024];
        int n = snprintf(buf, sizeof buf,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
                         "%zu\r\nConnection: close\r\n%s\r\n%s",
                         http, reason, body ? strlen(body) : 0,
                         http == 408 ? "" : "Retry-After: 1\r\n", body ? body : "");
        free(body);
        if (n > 0 && (size_t)n < sizeof buf)
            (void)send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    shutdown(fd, SHUT_RDWR);
}

// MHD_OPTION_NOTIFY_CONNECTION: a connection opened (admit or refuse it) or closed.
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct server *S = cls;
    struct guard *g = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!g)
            return;
        pthread_mutex_lock(&S->guard_mu);
        if (g->prev)
            g->prev->next = g->next;
        else
            S->guards = g->next;
        if (g->next)
            g->next->prev = g->prev;
        pthread_mutex_unlock(&S->guard_mu);
        gl_free(g);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!fi || !(g = gl_calloc(1, sizeof *g)))
        return; // unguarded (out of memory): MHD's own connection limit still holds
    g->fd = fi->connect_fd;
    const struct sockaddr *sa = ai ? ai->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
        g->addr[10] = g->addr[11] = 0xff;
        memcpy(g->addr + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        memcpy(g->addr, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
    int total = 0, same = 0;
    pthread_mutex_lock(&S->guard_mu);
    for (struct guard *x = S->guards; x; x = x->next)
        if (x->phase != G_CLOSED) {
            total++;
            same += memcmp(x->addr, g->addr, sizeof g->addr) == 0;
        }
    int per_ip = S->p.max_connections_per_ip;
    int http = total >= S->p.max_connections ? 503 : per_ip > 0 && same >= per_ip ? 429 : 0;
    g->phase = http ? G_CLOSED : G_HEADERS;
    g->deadline_us = gl_time_us() + (int64_t)S->p.timeout_headers_s * 1000000;
    g->next = S->guards;
    if (S->guards)
        S->guards->prev = g;
    S->guards = g;
    pthread_mutex_unlock(&S->guard_mu);
    *socket_context = g;
    char msg[160];
    if (http == 503)
        snprintf(msg, sizeof msg,
                 "The server has %d open connections, its limit (--limit-concurrency); retry "
                 "later",
                 total);
    else if (http == 429)
        snprintf(msg, sizeof msg,
                 "Too many open connections from this address: %d, the limit "
                 "(--limit-concurrency-per-ip); retry later",
                 same);
    if (http)
        guard_answer(S, g->fd, http, http == 503 ? "Service Unavailable" : "Too Many Requests",
                     msg);
}

// The request on c entered phase ph; its deadline is `seconds` from now (G_BUSY: none).
static void guard_set(struct server *S, struct MHD_Connection *c, enum guard_phase ph, int seconds)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct guard *g = ci ? ci->socket_context : NULL;
    if (!g)
        return;
    pthread_mutex_lock(&S->guard_mu);
    if (g->phase != G_CLOSED) {
        g->phase = ph;
        g->deadline_us = gl_time_us() + (int64_t)seconds * 1000000;
    }
    int renice = ph == G_BODY && !g->reniced;
    g->reniced = 1;
    pthread_mutex_unlock(&S->guard_mu);
    if (renice) { // first request on this connection, on its own thread
        id_t tid = (id_t)syscall(SYS_gettid);
        errno = 0;
        int cur = getpriority(PRIO_PROCESS, tid);
        if (errno == 0)
            (void)setpriority(PRIO_PROCESS, tid, cur + CONN_NICE);
    }
}

// Every GUARD_TICK_MS: answers and shuts down each connection past its phase's deadline.
static void *guard_main(void *arg)
{
    struct server *S = arg;
    pthread_mutex_lock(&S->guard_mu);
    while (!S->guard_stop) {
        struct timespec ts = deadline_in(GUARD_TICK_MS / 1000.0);
        pthread_cond_timedwait(&S->guard_cv, &S->guard_mu, &ts);
        int64_t now = gl_time_us();
        for (struct guard *g = S->guards; g; g = g->next) {
            if (g->phase == G_CLOSED || g->phase == G_BUSY || now < g->deadline_us)
                continue;
            char msg[160];
            if (g->phase == G_HEADERS)
                snprintf(msg, sizeof msg,
                         "Request headers not complete within %d s of connecting "
                         "(--timeout-headers)",
                         S->p.timeout_headers_s);
            else
                snprintf(msg, sizeof msg,
                         "Request body not complete within %d s of its headers (--timeout-body)",
                         S->p.timeout_body_s);
            guard_answer(S, g->fd, 408, "Request Timeout", g->phase == G_KEEPALIVE ? NULL : msg);
            g->phase = G_CLOSED;
        }
        // Memory requests freed goes back here (gl_mem_release) once the frees have settled
        // for a tick (a request in progress reuses what it freed a moment ago), or at once when
        // 4 x GL_TRIM_MIN_BYTES wait. Not under guard_mu: a trim takes milliseconds on a big
        // heap, more on a loaded machine (up to 68 ms seen on 2 busy cores).
        int64_t pending = gl_mem_freed_pending();
        if (pending >= GL_TRIM_MIN_BYTES &&
            (pending == S->guard_pending || pending >= 4 * GL_TRIM_MIN_BYTES)) {
            pthread_mutex_unlock(&S->guard_mu);
            gl_mem_release();
            pthread_mutex_lock(&S->guard_mu);
        }
        S->guard_pending = pending;
    }
    pthread_mutex_unlock(&S->guard_mu);
    return NULL;
}

// guard_started: 0 nothing, 1 lock and condition made, 2 the thread runs too.
static gl_status guard_start(struct server *S, struct gl_err *err)
{
    pthread_mutex_init(&S->guard_mu, NULL);
    cond_init_monotonic(&S->guard_cv);
    S->guard_started = 1;
    if (pthread_create(&S->guard_thread, NULL, guard_main, S) != 0)
        return gl_err_set(err, GL_E_INTERNAL, "serve: cannot start the connection guard thread");
    S->guard_started = 2;
    return GL_OK;
}

// After MHD_stop_daemon (every connection has been notified closed).
static void guard_stop(struct server *S)
{
    if (S->guard_started == 2) {
        pthread_mutex_lock(&S->guard_mu);
        S->guard_stop = 1;
        pthread_cond_broadcast(&S->guard_cv);
        pthread_mutex_unlock(&S->guard_mu);
        pthread_join(S->guard_thread, NULL);
    }
    if (S->guard_started) {
        pthread_cond_destroy(&S->guard_cv);
        pthread_mutex_destroy(&S->guard_mu);
    }
}

// ---- generation ----

static struct sreq *sreq_new(struct server *S, struct gl_api_req *req, struct gl_api_error *e)
{
    struct sreq *r = gl_calloc(1, sizeof *r);
    struct gl_err err = {0};
    if (!r) {
        (void)gl_api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    r->S = S;
    r->req = req;
    pthread_mutex_init(&r->mu, NULL);
    cond_init_monotonic(&r->cv);
    const size_t n_prompts = (size_t)gl_api_req_n_prompts(req);
    r->pctx = gl_calloc(n_prompts, sizeof *r->pctx);
    r->eng_ids = gl_calloc(n_prompts, sizeof *r->eng_ids);
    r->t_first_c = gl_calloc(n_prompts * (size_t)gl_api_req_sp(req)->n, sizeof *r->t_first_c);
    r->max_gen = gl_calloc(n_prompts, sizeof *r->max_gen);
    if (!r->pctx || !r->eng_ids || !r->t_first_c || !r->max_gen ||
        gl_api_resp_new(&r->resp, &S->api, req, &err) != GL_OK) {
        r->req = NULL; // the caller still owns req
        sreq_free(r);
        (void)gl_api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&S->reg_mu);
    r->reg_next = S->reg;
    if (S->reg)
        S->reg->reg_prev = r;
    S->reg = r;
    pthread_mutex_unlock(&S->reg_mu);
    return r;
}

// Submits every prompt of r. On failure cancels what was submitted and fills e; the engine
// still calls back for those, so r must be released through sreq_release_locked.
static gl_status submit(struct server *S, struct sreq *r, struct gl_api_error *e)
{
    const struct gl_api_req *q = r->req;
    pthread_mutex_lock(&r->mu);
    r->t_submit = gl_time_us(); // queue time starts (vllm:request_queue_time_seconds)
    gl_status st = GL_OK;
    for (int32_t i = 0; i < gl_api_req_n_prompts(q) && st == GL_OK; i++) {
        struct gl_err err = {0};
        struct gl_logits_processor *procs = NULL;
        r->pctx[i] = (struct sprompt){r, i};
        st = gl_api_make_procs(&S->api, q, &S->mask_stats, &procs, &err);
        if (st != GL_OK) {
            (void)gl_api_fail(e, 500, NULL, "%s", err.msg);
            break;
        }
        struct gl_request er;
        gl_api_req_engine_request(q, i, &er);
        er.on_event = on_event;
        er.user = &r->pctx[i];
        er.procs = procs;
        st = gl_engine_submit(S->engine, &er, &r->eng_ids[i], &err);
        gl_free(procs); // the engine owns the processors now (also on rejection)
        if (i == 0)     // and the image rows
            gl_api_req_media_moved(r->req);
        if (st == GL_OK) {
            r->eng_live += gl_api_req_sp(q)->n;
        } else if (st == GL_E_AGAIN) {
            gl_metrics_reject(&S->metrics);
            (void)gl_api_fail(e, 503, NULL,
                              "The server is overloaded: %d requests are waiting; "
                              "retry later",
                              S->max_waiting);
        } else {
            (void)gl_api_fail(e, st == GL_E_NOMEM ? 500 : 400, "", "%s", err.msg);
        }
    }
    if (st != GL_OK)
        cancel_all(r);
    pthread_mutex_unlock(&r->mu);
    return st;
}

// The access log's token counts, taken when the answer is complete (caller holds r->mu; the
// connection thread, while cn lives).
static void note_usage(struct sreq *r)
{
    struct conn *cn = r->cn;
    if (!cn)
        return;
    gl_api_resp_usage(r->resp, &cn->prompt_tokens, &cn->completion_tokens);
    cn->cached_tokens = r->cached;
    snprintf(cn->id, sizeof cn->id, "%s", gl_api_req_id(r->req));
}

static void http_release(struct sreq *r)
{
    pthread_mutex_lock(&r->mu);
    if (!gl_api_resp_done(r->resp) && !r->cancelled) {
        r->cancelled = 1;
        cancel_all(r);
    }
    r->http_done = 1;
    r->cn = NULL; // the connection's record may go once the HTTP side is done
    if (!sreq_release_locked(r))
        pthread_mutex_unlock(&r->mu);
}

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct sreq *r = cls;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->pending_off < r->pending_len) {
            size_t n = r->pending_len - r->pending_off;
            n = n < max ? n : max;
            memcpy(buf, r->pending + r->pending_off, n);
            r->pending_off += n;
            pthread_mutex_unlock(&r->mu);
            return (ssize_t)n;
        }
        gl_free(r->pending);
        r->pending = gl_api_resp_take_sse(r->resp, &r->pending_len);
        r->pending_off = 0;
        if (r->pending)
            continue;
        if (gl_api_resp_done(r->resp)) {
            note_usage(r);
            pthread_mutex_unlock(&r->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        timed_wait(r);
        if (!gl_api_resp_done(r->resp) && client_gone(r->conn)) {
            r->cancelled = 1;
            cancel_all(r);
            note_usage(r);
            pthread_mutex_unlock(&r->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void sse_free(void *cls)
{
    http_release(cls);
}

// A generation answer's notice headers (each "" for none): the keywords a lenient grammar did
// not enforce and the request fields that were ignored.
static void add_notices(struct MHD_Response *res, const char *unenforced, const char *ignored)
{
    if (unenforced[0])
        MHD_add_response_header(res, GL_UNENFORCED_HEADER, unenforced);
    if (ignored[0])
        MHD_add_response_header(res, GL_IGNORED_HEADER, ignored);
}

// A non-streamed generation answer (o taken) with its notice headers.
static enum MHD_Result send_generated(struct MHD_Connection *c, json_t *o, const char *unenforced,
                                      const char *ignored)
{
    char *t = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct MHD_Response *res =
        t ? MHD_create_response_from_buffer(strlen(t), t, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!res) {
        free(t);
        return fail(c, 500, NULL, "out of memory building the response");
    }
    MHD_add_response_header(res, "Content-Type", "application/json");
    add_notices(res, unenforced, ignored);
    enum MHD_Result ret = queue_response(c, 200, res);
    MHD_destroy_response(res);
    return ret;
}

static enum MHD_Result generate(struct server *S, struct MHD_Connection *c, enum gl_api_endpoint ep,
                                struct conn *cn)
{
    // Counted until on_completed: the drain waits for answers to be written, not just built.
    cn->counted = 1;
    atomic_fetch_add(&S->in_flight, 1);
    struct gl_api_error e = {0};
    struct gl_engine_stats st;
    gl_engine_stats(S->engine, &st);
    // Admission before any parsing (vLLM #58192): a full queue answers at once.
    if (st.n_waiting >= S->max_waiting) {
        gl_metrics_reject(&S->metrics);
        return fail(c, 503, NULL,
                    "The server is overloaded: the waiting queue is full; retry later");
    }
    struct gl_api_req *req = NULL;
    if (gl_api_parse(&S->api, ep, cn->body, cn->len, &req, &e) != GL_OK)
        return send_error(c, &e);
    // vLLM's X-Request-Id: the response id's suffix, echoed back (queue_response).
    const char *xrid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (xrid && gl_api_set_request_id(req, xrid, strlen(xrid), "X-Request-Id", &e) != GL_OK) {
        gl_api_req_free(&S->api, req);
        return send_error(c, &e);
    }
    if (client_gone(c)) { // it hung up during the parse (a grammar compile may take a second)
        gl_api_req_free(&S->api, req);
        return MHD_NO;
    }
    if (gl_api_req_grammar(req))
        gl_metrics_observe(&S->metrics, GL_HIST_GRAMMAR, (double)gl_api_req_grammar_us(req) / 1e6);
    // Lenient mode: say what the grammar did not enforce (api.h), never claim it silently.
    char unenforced[1024];
    gl_api_unenforced_header(gl_api_req_grammar(req), unenforced, sizeof unenforced);
    if (unenforced[0])
        GL_LOGW("request %s: keywords not enforced (lenient_keywords): %s", gl_api_req_id(req),
                unenforced);
    char ignored[GL_API_IGNORED_CAP]; // req is not ours to read after http_release
    snprintf(ignored, sizeof ignored, "%s", gl_api_req_ignored(req));
    struct sreq *r = sreq_new(S, req, &e);
    if (!r) {
        gl_api_req_free(&S->api, req);
        return send_error(c, &e);
    }
    r->conn = c;
    r->cn = cn;
    r->t_arrival = cn->t_arrival; // TTFT and E2E include the parse and the grammar compile
    if (submit(S, r, &e) != GL_OK) {
        http_release(r);
        return send_error(c, &e);
    }
    if (gl_api_req_stream(req)) {
        struct MHD_Response *res =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_reader, r, sse_free);
        if (!res) {
            http_release(r);
            return MHD_NO;
        }
        MHD_add_response_header(res, "Content-Type", "text/event-stream");
        MHD_add_response_header(res, "Cache-Control", "no-cache");
        add_notices(res, unenforced, ignored);
        enum MHD_Result ret = queue_response(c, 200, res);
        MHD_destroy_response(res);
        return ret;
    }
    pthread_mutex_lock(&r->mu);
    int gone = 0;
    while (!gl_api_resp_done(r->resp)) {
        timed_wait(r);
        if (!gl_api_resp_done(r->resp) && client_gone(c)) {
            gone = 1;
            break;
        }
    }
    const struct gl_api_error *fe = gl_api_resp_error(r->resp);
    if (fe)
        e = *fe;
    json_t *body = gone || fe ? NULL : gl_api_resp_json(r->resp);
    note_usage(r);
    pthread_mutex_unlock(&r->mu);
    http_release(r);
    if (gone)
        return MHD_NO; // nobody to answer; the request was cancelled
    if (!body && !fe)
        (void)gl_api_fail(&e, 500, NULL, "out of memory building the response");
    return body ? send_generated(c, body, unenforced, ignored) : send_error(c, &e);
}

// ---- other endpoints ----

static enum MHD_Result health(struct server *S, struct MHD_Connection *c)
{
    int st = atomic_load(&S->state);
    const char *deep = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "deep");
    if (!deep || strcmp(deep, "0") == 0 || strcmp(deep, "false") == 0) {
        if (st == ST_READY)
            return send_text(c, 200, "application/json", "{\"status\":\"ok\"}", 15, NULL, NULL);
        const char *why = st == ST_LOADING    ? "Loading model"
                          : st == ST_DRAINING ? "Shutting down"
                                              : "Engine failed";
        return fail(c, 503, NULL, why);
    }
    pthread_mutex_lock(&S->probe_mu);
    double age = S->probe_done_us ? (double)(gl_time_us() - S->probe_done_us) / 1e6 : -1;
    const char *status = S->probe_state > 0 ? "ok" : S->probe_state < 0 ? "failed" : "pending";
    int stale = S->p.deep_health_interval_s > 0 && age > 2 * S->p.deep_health_interval_s;
    json_t *o =
        json_pack("{s:s,s:f,s:s,s:I,s:f,s:f,s:b}", "status", status, "age_s", age, "message",
                  S->probe_msg, "tokens", (json_int_t)S->probe_tokens, "seconds", S->probe_seconds,
                  "interval_s", S->p.deep_health_interval_s, "stale", stale);
    int bad = S->probe_state < 0 || stale || st != ST_READY || S->probe_state == 0;
    pthread_mutex_unlock(&S->probe_mu);
    return send_json(c, bad ? 503 : 200, o);
}

static enum MHD_Result metrics(struct server *S, struct MHD_Connection *c)
{
    if (!S->engine)
        return fail(c, 503, NULL, "Loading model");
    struct gl_engine_stats st;
    gl_engine_stats(S->engine, &st);
    size_t len = 0;
    char *t = gl_metrics_render(&S->metrics, S->model_name, &st, &S->mask_stats, &len);
    if (!t)
        return fail(c, 500, NULL, "out of memory");
    enum MHD_Result ret = send_text(c, 200, "text/plain; version=0.0.4", t, len, NULL, NULL);
    gl_free(t);
    return ret;
}

static int authorized(struct server *S, struct MHD_Connection *c)
{
    if (!S->p.api_key || !S->p.api_key[0])
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) // the scheme is public: an early exit leaks nothing
        return 0;
    // Time depends only on the presented token's length, never on the key (base.h).
    return gl_secret_equal(h + 7, strlen(h + 7), S->p.api_key, strlen(S->p.api_key));
}

// The body limit for url: --max-body-bytes, lower for /tokenize and /detokenize (api.h).
static size_t body_limit(const struct server *S, const char *url)
{
    size_t lim = S->p.max_body_bytes;
    if (atomic_load(&S->state) == ST_READY &&
        (strcmp(url, "/tokenize") == 0 || strcmp(url, "/detokenize") == 0)) {
        size_t t = gl_api_tokenize_body_limit(&S->api);
        lim = t < lim ? t : lim;
    }
    return lim;
}

// lim: the request's body_limit.
static enum MHD_Result body_too_large(struct server *S, struct MHD_Connection *c, size_t lim)
{
    char msg[200];
    if (lim < S->p.max_body_bytes)
        snprintf(msg, sizeof msg,
                 "request body over the %zu-byte limit of /tokenize and /detokenize (a larger "
                 "one cannot fit the %d-token context)",
                 lim, S->api.max_model_len);
    else
        snprintf(msg, sizeof msg, "request body over the %zu-byte limit (--max-body-bytes)", lim);
    return fail(c, 413, NULL, msg);
}

// 1 when the client's bucket has a token (or its address is unknown: never refuse on a guess).
static int rate_ok(struct server *S, struct MHD_Connection *c, int *retry_after_s)
{
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ai ? ai->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        return gl_ratelimit_take(S->rl, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                                 4, gl_time_us(), retry_after_s);
    if (sa && sa->sa_family == AF_INET6)
        return gl_ratelimit_take(S->rl, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                                 16, gl_time_us(), retry_after_s);
    return 1;
}

static enum MHD_Result rate_limited(struct server *S, struct MHD_Connection *c, int retry_after_s)
{
    atomic_fetch_add(&S->metrics.rate_limited, 1);
    struct gl_api_error e;
    (void)gl_api_fail(&e, 429, NULL,
                      "Too many requests from this address: over %g per second "
                      "(--limit-request-rate-per-ip); retry after %d s",
                      S->p.limit_request_rate_per_ip, retry_after_s);
    char retry[16];
    snprintf(retry, sizeof retry, "%d", retry_after_s);
    return send_json_hdr(c, 429, gl_api_error_json(&e), "Retry-After", retry);
}

static enum MHD_Result dispatch(struct server *S, struct MHD_Connection *c, enum gl_route_id id,
                                struct conn *cn)
{
    struct gl_api_error e = {0};
    switch (id) {
    case GL_R_HEALTH:
    case GL_R_PING:
        return health(S, c);
    case GL_R_METRICS:
        return metrics(S, c);
    case GL_R_VERSION:
        return send_json(c, 200, json_pack("{s:s}", "version", GL_VERSION));
    default:
        break;
    }
    int st = atomic_load(&S->state);
    if (st != ST_READY)
        return fail(c, 503, NULL,
                    st == ST_LOADING    ? "Loading model"
                    : st == ST_DRAINING ? "Shutting down"
                                        : "Engine failed");
    if (cn->too_large)
        return body_too_large(S, c, cn->limit);
    json_t *o = NULL;
    switch (id) {
    case GL_R_CHAT:
        return generate(S, c, GL_API_CHAT, cn);
    case GL_R_COMP:
        return generate(S, c, GL_API_COMPLETIONS, cn);
    case GL_R_RESP:
        return generate(S, c, GL_API_RESPONSES, cn);
    case GL_R_MODELS:
        return send_json(c, 200, gl_api_models(&S->api, S->started));
    case GL_R_TOK:
        o = gl_api_tokenize(&S->api, cn->body, cn->len, &e);
        break;
    case GL_R_DETOK:
        o = gl_api_detokenize(&S->api, cn->body, cn->len, &e);
        break;
    default: // answered above, before the state check; GL_R_NONE never reaches dispatch
        GL_ASSERT_MSG(0, "route %d dispatched twice", (int)id);
    }
    return o ? send_json(c, 200, o) : send_error(c, &e);
}

// A new request on c: what its access-log line will name.
static void conn_start(struct conn *cn, struct server *S, struct MHD_Connection *c,
                       const char *method, const char *url)
{
    cn->S = S;
    cn->t_arrival = gl_time_us();
    cn->prompt_tokens = cn->cached_tokens = cn->completion_tokens = -1;
    snprintf(cn->method, sizeof cn->method, "%s", method);
    snprintf(cn->path, sizeof cn->path, "%s", url);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ai ? ai->client_addr : NULL;
    snprintf(cn->client, sizeof cn->client, "-");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, cn->client,
                  sizeof cn->client);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, cn->client,
                  sizeof cn->client);
}

// One line per request (uvicorn's access log, plus latency and tokens; never the body), on
// stdout so container log collectors get it. Control characters in the path are escaped.
static void access_log(const struct conn *cn)
{
    char path[sizeof cn->path * 4];
    size_t j = 0;
    for (size_t i = 0; cn->path[i] && j + 5 < sizeof path; i++) {
        unsigned char ch = (unsigned char)cn->path[i];
        if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
            j += (size_t)snprintf(path + j, sizeof path - j, "\\x%02x", ch);
        else
            path[j++] = (char)ch;
    }
    path[j] = 0;
    char tokens[160] = "";
    if (cn->prompt_tokens >= 0)
        snprintf(tokens, sizeof tokens,
                 " prompt_tokens=%lld cached_tokens=%lld "
                 "completion_tokens=%lld id=%s",
                 (long long)cn->prompt_tokens, (long long)cn->cached_tokens,
                 (long long)cn->completion_tokens, cn->id);
    // 499 (nginx's "client closed request"): the client went away before an answer.
    printf("glint access: %s \"%s %s\" %u %.3fs%s\n", cn->client, cn->method, path,
           cn->status ? cn->status : 499u, (double)(gl_time_us() - cn->t_arrival) / 1e6, tokens);
    fflush(stdout);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct server *S = cls;
    struct conn *cn = *con_cls;
    if (!cn) {
        cn = gl_calloc(1, sizeof *cn);
        if (!cn)
            return MHD_NO;
        conn_start(cn, S, c, method, url);
        *con_cls = cn;
        tl_conn = cn;
        guard_set(S, c, G_BODY, S->p.timeout_body_s);
        int retry = 0;
        if (S->rl && !rate_ok(S, c, &retry))
            return rate_limited(S, c, retry);
        // Refused before the body is read: MHD then discards it and closes the connection.
        cn->limit = body_limit(S, url);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > cn->limit)
            return body_too_large(S, c, cn->limit);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cn->too_large && cn->len + *upload_size > cn->limit)
            cn->too_large = 1;
        // A chunked body has no length up front: past twice the limit, stop reading and close.
        cn->seen += *upload_size;
        if (cn->seen > 2 * cn->limit)
            return MHD_NO;
        if (!cn->too_large) {
            if (cn->len + *upload_size + 1 > cn->cap) {
                size_t nc = cn->cap ? cn->cap : 4096;
                while (nc < cn->len + *upload_size + 1)
                    nc *= 2;
                char *q = gl_realloc(cn->body, nc);
                if (!q)
                    return MHD_NO;
                cn->body = q;
                cn->cap = nc;
            }
            memcpy(cn->body + cn->len, upload, *upload_size);
            cn->len += *upload_size;
            cn->body[cn->len] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    guard_set(S, c, G_BUSY, 0); // the request is read; generation has no deadline here
    tl_conn = cn;
    unsigned pre_status = 0;
    struct MHD_Response *pre = NULL;
    if (gl_cors_preflight(&S->cors, c, method, &pre_status, &pre)) { // before auth, as vLLM
        if (!pre)
            return MHD_NO;
        cn->status = pre_status;
        enum MHD_Result ret = MHD_queue_response(c, pre_status, pre);
        MHD_destroy_response(pre);
        return ret;
    }
    if (strncmp(url, "/v1/", 4) == 0 && !authorized(S, c))
        return fail(c, 401, NULL,
                    "Unauthorized: a valid API key is required (Authorization: "
                    "Bearer KEY)");
    const char *allow = NULL;
    const enum gl_route_id id = gl_route_find(method, url, &allow);
    if (!allow)
        return fail(c, 404, NULL, "Not Found");
    if (id == GL_R_NONE) {
        struct gl_api_error e;
        (void)gl_api_fail(&e, 405, allow, "Method %s is not allowed on %s; use %s", method, url,
                          allow);
        return send_error(c, &e);
    }
    return dispatch(S, c, id, cn);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct server *S = cls;
    guard_set(S, c, G_KEEPALIVE, S->p.timeout_keep_alive_s);
    struct conn *cn = *con_cls;
    if (cn) {
        if (S->p.access_log)
            access_log(cn);
        if (tl_conn == cn)
            tl_conn = NULL;
        if (cn->counted)
            atomic_fetch_sub(&cn->S->in_flight, 1);
        gl_free(cn->body);
        gl_free(cn);
        *con_cls = NULL;
    }
}

// ---- engine and probe threads ----

// Ends every live request with error e (an SSE error event then [DONE] when streaming, the HTTP
// error otherwise) and cancels its engine work.
static void fail_all(struct server *S, const struct gl_api_error *e)
{
    pthread_mutex_lock(&S->reg_mu);
    for (struct sreq *r = S->reg; r; r = r->reg_next) {
        pthread_mutex_lock(&r->mu);
        gl_api_resp_fail(r->resp, e);
        cancel_all(r);
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&S->reg_mu);
}

// A failed step: /health turns 503 and every live request ends with a 500 error; nothing new
// is admitted.
static void engine_failed(struct server *S, const char *why)
{
    GL_LOGE("serve: engine step failed: %s", why);
    atomic_store(&S->state, ST_FAILED);
    struct gl_api_error e;
    (void)gl_api_fail(&e, 500, NULL, "engine failure: %s", why);
    fail_all(S, &e);
}

static void *engine_main(void *arg)
{
    struct server *S = arg;
    int64_t steps = 0;
    for (int64_t step = 1; !atomic_load(&S->stop_engine); step++) {
        int n_active = 0;
        struct gl_err err = {0};
        gl_status st = gl_engine_step(S->engine, &n_active, &err);
        struct gl_engine_stats es;
        gl_engine_stats(S->engine, &es);
        if (es.steps > steps) // a step that computed something (vllm:iteration_tokens_total)
            gl_metrics_observe(&S->metrics, GL_HIST_ITER, (double)es.last_step_tokens);
        steps = es.steps;
        if (st == GL_OK && step == S->fault_step)
            st = gl_err_set(&err, GL_E_INTERNAL, "injected fault at step %lld (GLINT_FAULT_STEP)",
                            (long long)step);
        if (st != GL_OK)
            engine_failed(S, err.msg);
        if (n_active == 0)
            (void)gl_engine_wait(S->engine, 200);
    }
    return NULL;
}

// Checks the probe document independently of the grammar engine: an array of PROBE_ITEMS
// objects {"id": 0..9, "ok": bool} and nothing else.
static int probe_valid(const char *text, size_t len, char *why, size_t cap)
{
    json_error_t je;
    json_t *a = json_loadb(text, len, 0, &je);
    int ok = json_is_array(a) && json_array_size(a) == PROBE_ITEMS;
    for (size_t i = 0; ok && i < PROBE_ITEMS; i++) {
        json_t *o = json_array_get(a, i), *id = json_object_get(o, "id");
        ok = json_is_object(o) && json_object_size(o) == 2 && json_is_integer(id) &&
             json_integer_value(id) >= 0 && json_integer_value(id) <= 9 &&
             json_is_boolean(json_object_get(o, "ok"));
    }
    if (!ok)
        snprintf(why, cap, "the probe document is invalid: %s", a ? "wrong shape" : je.text);
    json_decref(a);
    return ok;
}

static void probe_once(struct server *S)
{
    char body[1024];
    int32_t max_tokens = S->api.max_model_len - 16 < PROBE_MIN_CONTEXT ? S->api.max_model_len - 16
                                                                       : PROBE_MIN_CONTEXT;
    snprintf(body, sizeof body,
             "{\"prompt\":\"glint deep health probe\",\"max_tokens\":%d,\"temperature\":0,"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"probe\","
             "\"schema\":{\"type\":\"array\",\"minItems\":%d,\"maxItems\":%d,\"items\":{\"type\":"
             "\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":"
             "9},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"ok\"],"
             "\"additionalProperties\":false}}}}}",
             (int)max_tokens, PROBE_ITEMS, PROBE_ITEMS);
    struct gl_api_error e = {0};
    struct gl_api_req *req = NULL;
    char msg[768] = "";
    int ok = 0;
    int64_t t0 = gl_time_us(), tokens = 0;
    if (max_tokens < PROBE_MIN_CONTEXT) {
        snprintf(msg, sizeof msg,
                 "max_model_len %d is too small for the deep probe (it needs %d tokens of room)",
                 S->api.max_model_len, PROBE_MIN_CONTEXT + 16);
    } else if (gl_api_parse(&S->api, GL_API_COMPLETIONS, body, strlen(body), &req, &e) != GL_OK) {
        snprintf(msg, sizeof msg, "probe request refused: %s", e.msg);
    } else {
        struct sreq *r = sreq_new(S, req, &e);
        if (!r) {
            gl_api_req_free(&S->api, req);
            snprintf(msg, sizeof msg, "probe: %s", e.msg);
        } else {
            r->t_arrival = t0;
            if (submit(S, r, &e) != GL_OK) {
                snprintf(msg, sizeof msg, "probe submit failed: %s", e.msg);
            } else {
                pthread_mutex_lock(&r->mu);
                while (!gl_api_resp_done(r->resp) && !atomic_load(&S->stop_engine))
                    timed_wait(r);
                json_t *o = gl_api_resp_done(r->resp) ? gl_api_resp_json(r->resp) : NULL;
                pthread_mutex_unlock(&r->mu);
                json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
                const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
                json_t *text = json_object_get(ch, "text");
                tokens = json_integer_value(
                    json_object_get(json_object_get(o, "usage"), "completion_tokens"));
                if (!o)
                    snprintf(msg, sizeof msg, "probe did not finish");
                else if (!fr || strcmp(fr, "stop") != 0)
                    snprintf(msg, sizeof msg, "probe finished with %s", fr ? fr : "?");
                else if (tokens < 384)
                    snprintf(msg, sizeof msg, "probe generated %lld tokens, fewer than 384",
                             (long long)tokens);
                else if (probe_valid(json_string_value(text), json_string_length(text), msg,
                                     sizeof msg))
                    ok = 1;
                json_decref(o);
            }
            http_release(r);
        }
    }
    pthread_mutex_lock(&S->probe_mu);
    S->probe_state = ok ? 1 : -1;
    S->probe_done_us = gl_time_us();
    S->probe_seconds = (double)(S->probe_done_us - t0) / 1e6;
    S->probe_tokens = tokens;
    snprintf(S->probe_msg, sizeof S->probe_msg, "%s", ok ? "valid document" : msg);
    pthread_mutex_unlock(&S->probe_mu);
    if (!ok)
        GL_LOGW("serve: deep health probe failed: %s", msg);
}

static void *probe_main(void *arg)
{
    struct server *S = arg;
    pthread_mutex_lock(&S->probe_mu);
    while (!atomic_load(&S->stop_engine)) {
        pthread_mutex_unlock(&S->probe_mu);
        probe_once(S);
        pthread_mutex_lock(&S->probe_mu);
        struct timespec ts = deadline_in(S->p.deep_health_interval_s);
        while (!atomic_load(&S->stop_engine) &&
               pthread_cond_timedwait(&S->probe_cv, &S->probe_mu, &ts) == 0) {
        }
    }
    pthread_mutex_unlock(&S->probe_mu);
    return NULL;
}

// ---- set-up ----

struct gl_server_params gl_server_default_params(void)
{
    struct gl_server_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8000;
    p.generation_config = "auto";
    p.prefix_caching = 1;
    p.framing = 1;
    p.shutdown_timeout_s = 30;
    p.deep_health_interval_s = 600;
    p.max_body_bytes = (size_t)32 << 20;
    p.max_connections = 1024;
    p.max_connections_per_ip = 0;
    p.timeout_headers_s = 20;
    p.timeout_body_s = 60;
    p.timeout_keep_alive_s = 5;
    p.max_media_bytes = (size_t)20 << 20;
    p.media_fetch_timeout_s = 10.0;
    p.mm_cache_bytes = (size_t)4 << 30;
    p.grammar_compile_bytes = gl_grammar_default_opts().max_compile_bytes;
    p.max_image_tokens = GL_IMAGE_MAX_TOKENS;
    p.engine = gl_engine_default_params(NULL);
    p.engine.max_model_len = 0;
    p.engine.kv.budget_bytes = 0;
    p.kv_memory_fraction = 0.9;
    p.access_log = 1;
    return p;
}

// ---- libmicrohttpd's log ----
// MHD writes a line for each connection it gives up on: a failed TLS handshake (plain HTTP or a
// scanner on the HTTPS port, an old protocol version, a client that left mid-handshake), a
// socket error. A client can cause them at will, so they are counted (TLS ones on /metrics) and
// written at most once per MHD_LOG_PERIOD_US, with the count of those left out since.
#define MHD_LOG_PERIOD_US 10000000

// 1 when an MHD message is about TLS (its GnuTLS calls and handshake).
static int mhd_msg_is_tls(const char *m)
{
    return strstr(m, "TLS") || strstr(m, "tls") || strstr(m, "handshake") ||
           strstr(m, "certificate");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct server *S = cls;
    char m[512];
    vsnprintf(m, sizeof m, fmt, ap);
    size_t n = strlen(m);
    while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == '\r'))
        m[--n] = 0;
    if (mhd_msg_is_tls(m))
        atomic_fetch_add(&S->metrics.tls_failures, 1);
    int64_t now = gl_time_us(), since = 0;
    pthread_mutex_lock(&S->log_mu);
    int write = now >= S->log_next_us;
    if (write) {
        S->log_next_us = now + MHD_LOG_PERIOD_US;
        since = S->log_dropped;
        S->log_dropped = 0;
    } else {
        S->log_dropped++;
    }
    pthread_mutex_unlock(&S->log_mu);
    if (!write) {
        atomic_fetch_add(&S->metrics.mhd_log_dropped, 1);
        return;
    }
    if (since > 0)
        GL_LOGW(
            "serve: %s (and %lld more connection errors since the last such line, not logged; see "
            "/metrics)",
            m, (long long)since);
    else
        GL_LOGW("serve: %s", m);
}

// ---- TLS ----

// PEM files are a few KiB; the bound keeps a wrong path (a model file) from being read whole.
#define TLS_FILE_MAX ((size_t)1 << 20)
// GnuTLS priority string: TLS 1.2 and 1.3 only (1.0 and 1.1 are deprecated by RFC 8996).
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct tls {
    char *cert, *key; // NUL-terminated PEM text; alive until the daemon stops
    size_t key_len;
    unsigned flags;                // MHD_USE_TLS, or 0 for plain HTTP
    struct MHD_OptionItem opts[5]; // for MHD_OPTION_ARRAY; always MHD_OPTION_END-terminated
};

// Reads the PEM file given to `flag` into *out (NUL-terminated) and checks it holds `what`
// ("CERTIFICATE" or "PRIVATE KEY") in PEM armour.
static gl_status read_pem(const char *flag, const char *path, const char *what, char **out,
                          size_t *len, struct gl_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gl_err_set(err, GL_E_IO, "serve: %s %s: %s", flag, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || (size_t)sb.st_size > TLS_FILE_MAX) {
        fclose(f);
        return gl_err_set(err, GL_E_INVAL, "serve: %s %s: not a regular file of at most %zu bytes",
                          flag, path, TLS_FILE_MAX);
    }
    char *buf = gl_malloc((size_t)sb.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
    fclose(f);
    if (!buf)
        return gl_err_set(err, GL_E_NOMEM, "serve: %s: no memory", flag);
    buf[n] = 0;
    char armour[64];
    snprintf(armour, sizeof armour, "%s-----", what);
    if (n != (size_t)sb.st_size || memchr(buf, 0, n) || !strstr(buf, "-----BEGIN ") ||
        !strstr(buf, armour)) {
        explicit_bzero(buf, n);
        gl_free(buf);
        return gl_err_set(err, GL_E_INVAL,
                          "serve: %s %s: no PEM %s in it (expected a '-----BEGIN ...%s' block; "
                          "DER files can be converted with openssl)",
                          flag, path, what, armour);
    }
    *out = buf;
    *len = n;
    return GL_OK;
}

// --ssl-certfile/--ssl-keyfile -> t (zeroed first). GL_OK with t->flags == 0 for plain HTTP.
static gl_status tls_setup(const struct gl_server_params *p, struct tls *t, struct gl_err *err)
{
    memset(t, 0, sizeof *t);
    t->opts[0].option = MHD_OPTION_END;
    if (!p->ssl_certfile && !p->ssl_keyfile && !p->ssl_keyfile_password)
        return GL_OK;
    if (!p->ssl_certfile || !p->ssl_keyfile)
        return gl_err_set(err, GL_E_INVAL, "serve: %s given without %s: HTTPS needs both",
                          p->ssl_certfile  ? "--ssl-certfile"
                          : p->ssl_keyfile ? "--ssl-keyfile"
                                           : "--ssl-keyfile-password",
                          p->ssl_certfile ? "--ssl-keyfile" : "--ssl-certfile");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return gl_err_set(err, GL_E_INVAL,
                          "serve: --ssl-certfile: this libmicrohttpd was built without TLS "
                          "(GnuTLS) support");
    if (p->ssl_keyfile_password &&
        MHD_is_feature_supported(MHD_FEATURE_HTTPS_KEY_PASSWORD) != MHD_YES)
        return gl_err_set(err, GL_E_INVAL,
                          "serve: --ssl-keyfile-password: this libmicrohttpd cannot decrypt keys");
    size_t cert_len = 0;
    gl_status st =
        read_pem("--ssl-certfile", p->ssl_certfile, "CERTIFICATE", &t->cert, &cert_len, err);
    if (st == GL_OK)
        st = read_pem("--ssl-keyfile", p->ssl_keyfile, "PRIVATE KEY", &t->key, &t->key_len, err);
    if (st != GL_OK)
        return st;
    if (!p->ssl_keyfile_password && strstr(t->key, "-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        return gl_err_set(err, GL_E_INVAL,
                          "serve: --ssl-keyfile %s is encrypted: give --ssl-keyfile-password",
                          p->ssl_keyfile);
    struct stat sb;
    if (stat(p->ssl_keyfile, &sb) == 0 && (sb.st_mode & 077))
        GL_LOGW("serve: --ssl-keyfile %s is readable by other users (mode %03o); chmod 600 it",
                p->ssl_keyfile, (unsigned)(sb.st_mode & 0777));
    int i = 0;
    t->opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t->cert};
    t->opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t->key};
    t->opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES};
    if (p->ssl_keyfile_password)
        t->opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_KEY_PASSWORD, 0,
                                               (void *)p->ssl_keyfile_password};
    t->opts[i] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    t->flags = MHD_USE_TLS;
    return GL_OK;
}

static void tls_free(struct tls *t)
{
    if (t->key)
        explicit_bzero(t->key, t->key_len); // no private key left in freed heap memory
    gl_free(t->key);
    gl_free(t->cert);
}

// generation_config.json: sampling defaults and the EOS set, as vLLM's --generation-config:
// "auto" reads it from an HF model folder (a GGUF carries none), "vllm" keeps vLLM's own
// defaults, a folder path reads that folder's file. max_new_tokens becomes the default
// max_tokens. What was applied is said at start.
static gl_status load_generation_config(struct server *S, struct gl_engine_params *ep,
                                        struct gl_err *err)
{
    const char *g = S->p.generation_config ? S->p.generation_config : "auto";
    if (strcmp(g, "vllm") == 0)
        return GL_OK;
    struct stat sb;
    int is_auto = strcmp(g, "auto") == 0;
    const char *dir = is_auto ? S->p.model_path : g;
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (is_auto && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || stat(path, &sb) != 0))
        return GL_OK; // a GGUF, or a folder without the file: vLLM's defaults
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return gl_err_set(err, GL_E_INVAL, "serve: --generation-config %s: %s", path, je.text);
    }
    struct gl_sample_params *d = &S->api.defaults;
    json_t *v;
    if (json_is_number(v = json_object_get(o, "temperature")))
        d->temperature = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(o, "top_p")))
        d->top_p = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(o, "top_k")))
        d->top_k = (int32_t)json_integer_value(v);
    if (json_is_number(v = json_object_get(o, "min_p")))
        d->min_p = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(o, "repetition_penalty")))
        d->repetition_penalty = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(o, "max_new_tokens")) && json_integer_value(v) > 0 &&
        json_integer_value(v) <= INT32_MAX)
        d->max_tokens = (int32_t)json_integer_value(v);
    v = json_object_get(o, "eos_token_id");
    if (json_is_integer(v) || json_is_array(v)) {
        ep->n_eos = 0;
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        for (size_t i = 0; i < n && ep->n_eos < GL_ENGINE_MAX_EOS; i++) {
            json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
            if (json_is_integer(x))
                ep->eos_ids[ep->n_eos++] = (int32_t)json_integer_value(x);
        }
    }
    json_decref(o);
    struct gl_sample_params chk = *d;
    gl_status st = gl_sample_params_check(&chk, S->model->cfg.n_vocab, err);
    if (st == GL_OK)
        fprintf(stderr,
                "glint serve: default sampling from %s: temperature %g, top_p %g, top_k %d, "
                "min_p %g, repetition_penalty %g, max_tokens %d (-1: up to max_model_len)\n",
                path, (double)d->temperature, (double)d->top_p, (int)d->top_k, (double)d->min_p,
                (double)d->repetition_penalty, (int)d->max_tokens);
    return st;
}

#define GIB(x) ((double)(x) / (1024.0 * 1024.0 * 1024.0))
#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

// The grammar cache's byte budget when --grammar-cache-bytes is not given: 1/32 of the memory
// free at start, at least 64 MiB (a few dozen large schemas) and at most 1 GiB. It fits in the
// share the KV pool leaves free by default (--gpu-memory-utilization 0.9), so `glint plan`, which
// knows nothing of grammars, still predicts the pool.
static int64_t grammar_cache_budget(int64_t avail)
{
    const int64_t lo = (int64_t)64 << 20, hi = (int64_t)1 << 30;
    int64_t b = avail > 0 ? avail / 32 : lo;
    return b < lo ? lo : b > hi ? hi : b;
}

// The KV pool and max_model_len (gl_kv_fit_compute): the pool from the memory free now, after
// the weights, unless --kv-cache-memory gave it; max_model_len lowered to what that pool holds
// unless --max-model-len gave it. Says what it chose.
static gl_status size_kv(struct server *S, struct gl_engine_params *ep, int32_t model_ctx,
                         struct gl_err *err)
{
    const int len_fixed = ep->max_model_len > 0;
    struct gl_kv_fit_in in = {.utilization = S->p.kv_memory_fraction,
                              .budget_fixed = ep->kv.budget_bytes,
                              .max_model_len = len_fixed ? ep->max_model_len : model_ctx,
                              .max_len_fixed = len_fixed,
                              .max_num_seqs = ep->max_num_seqs};
    int64_t avail = -1, mapped = 0;
    if (in.budget_fixed <= 0) {
        avail = gl_host_mem_available();
        // Weights still file-backed (mmapped, not repacked) count as free page cache in
        // MemAvailable, yet must stay resident.
        mapped = gl_host_model_bytes(S->p.model_path) - (int64_t)S->model->r16_bytes;
        mapped = mapped > 0 ? mapped : 0;
        if (ep->spec.dflash) { // so do the drafter's, but for its repacked (anonymous) copies
            int64_t d = gl_host_model_bytes(ep->spec.dflash_path);
            for (int i = 0; i < ep->spec.dflash->n_r16; i++)
                d -= (int64_t)ep->spec.dflash->r16_bytes[i];
            mapped += d > 0 ? d : 0;
        }
        in.mem_free = avail - mapped;
        // The drafter's context pool (GL_SPEC_DFLASH: f32 pages, engine.h
        // gl_engine_dflash_kv_bytes) is allocated beside the target's: its size at the wanted
        // length comes off first (an upper bound should the length be lowered).
        struct gl_engine_params q = *ep;
        q.max_model_len = (int32_t)in.max_model_len;
        in.mem_free -= gl_engine_dflash_kv_bytes(&q);
        if (avail < 0) {
            GL_LOGW("serve: free memory unknown (no MemAvailable, no cgroup limit): a 1 GiB KV "
                    "pool");
            in.budget_fixed = (int64_t)1 << 30;
        }
    }
    // --device vulkan: the pool's device side from the device heap, as vLLM (heap x
    // --gpu-memory-utilization minus the weights and scratch there, gl_model_dev_kv_room); with
    // a split (--n-gpu-layers) the host side still from host memory. Step bounds at the wanted
    // length (an upper bound on the page tables should the length be lowered).
    struct gl_model_dev_mem dm = {0};
    uint64_t heap = 0, range = 0;
    const struct gl_kv_params kp = gl_engine_kv_params(ep);
    if (in.budget_fixed <= 0 && ep->device >= 0 && S->model->gguf) {
        struct gl_engine_params dp = *ep;
        dp.max_model_len = (int32_t)in.max_model_len;
        gl_status ds = gl_engine_dev_kv_room(S->model->gguf, &S->model->cfg, &dp, in.utilization,
                                             &in.dev_mem_free, &heap, &range, &dm, err);
        if (ds != GL_OK)
            return ds;
        in.dev_sized = 1;
    }
    struct gl_kv_fit f;
    gl_status st = gl_kv_fit_compute(&S->model->cfg, &kp, &in, &f, err);
    if (st != GL_OK)
        return st;
    ep->kv.budget_bytes = f.budget_bytes;
    ep->kv.dev_pages = f.n_dev_pages;
    ep->max_model_len = (int32_t)f.max_model_len;
    if (in.dev_sized) {
        struct gl_kv_params q = kp;
        q.budget_bytes = f.budget_bytes;
        q.dev_pages = f.n_dev_pages;
        struct gl_kv_plan pl;
        if ((st = gl_kv_plan_compute(&S->model->cfg, &q, f.max_model_len, &pl, err)) != GL_OK)
            return st;
        const int64_t nd = pl.n_dev_groups > 0 ? pl.n_dev_pages : pl.n_pages;
        fprintf(stderr,
                "glint serve: KV pool on the device: %lld device-side pages (%lld bytes), %lld "
                "host-side pages (%lld bytes); device room %lld bytes = heap %llu x "
                "--gpu-memory-utilization %g - %llu of weights and scratch there, at most the "
                "storage binding %llu%s\n",
                (long long)nd, (long long)(nd * (int64_t)pl.page_bytes),
                (long long)(pl.n_pages - nd),
                (long long)((pl.n_pages - nd) * (int64_t)pl.page_bytes), (long long)in.dev_mem_free,
                (unsigned long long)heap, in.utilization,
                (unsigned long long)(dm.device_total - dm.kv), (unsigned long long)range,
                pl.n_dev_groups > 0 ? "; the host side from host memory" : "");
    }
    char what[160];
    snprintf(what, sizeof what, "KV pool %lld bytes (%.2f GiB, %s)", (long long)f.budget_bytes,
             GIB(f.budget_bytes), gl_kv_dtype_name(ep->kv.dtype));
    if (avail >= 0)
        fprintf(stderr,
                "glint serve: %s: %s; %.2f GiB free after the weights (MemAvailable or cgroup "
                "room %.2f GiB, %.2f GiB of weights file-backed)\n",
                what,
                f.capped ? "enough for --max-num-seqs sequences of max_model_len"
                         : "--gpu-memory-utilization of the free memory",
                GIB(in.mem_free), GIB(avail), GIB(mapped));
    else
        fprintf(stderr, "glint serve: %s, given\n", what);
    if (ep->spec.method == GL_SPEC_DFLASH)
        fprintf(stderr,
                "glint serve: dflash context pool %lld bytes (%.2f GiB, f32; %s), besides the KV "
                "pool\n",
                (long long)gl_engine_dflash_kv_bytes(ep), GIB(gl_engine_dflash_kv_bytes(ep)),
                ep->spec.dflash_kv_bytes > 0 ? "given"
                                             : "--max-num-seqs sequences of max_model_len");
    if (f.lowered)
        fprintf(stderr,
                "glint serve: max_model_len lowered from %d to %lld, the longest sequence this "
                "pool holds (more memory, --kv-cache-memory-bytes or --max-model-len change "
                "it)\n",
                (int)in.max_model_len, (long long)f.max_model_len);
    return GL_OK;
}

static gl_status load(struct server *S, struct gl_err *err)
{
    const char *mroot = S->p.allowed_local_media_path;
    struct stat sb;
    if (mroot && (mroot[0] != '/' || stat(mroot, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return gl_err_set(err, GL_E_INVAL,
                          "serve: --allowed-local-media-path %s: not an absolute path to a "
                          "directory",
                          mroot);
    fprintf(stderr, "glint serve: loading %s ...\n", S->p.model_path);
    int64_t t0 = gl_time_us();
    struct gl_model_params mp = gl_model_default_params();
    mp.mmproj = S->p.mmproj;
    mp.progress = S->p.load_progress;
    mp.progress_user = S->p.load_progress_user;
    gl_status st = gl_model_open(&S->model, S->p.model_path, &mp, err);
    if (st == GL_OK)
        st = gl_model_load_tokenizer(S->model, &S->tok, err);
    if (st != GL_OK)
        return st;
    fprintf(stderr, "glint serve: model loaded in %.1f s; indexing the vocabulary ...\n",
            (double)(gl_time_us() - t0) / 1e6);
    if ((st = gl_gvocab_new(&S->gvocab, S->tok, err)) != GL_OK ||
        (st = gl_grammar_cache_new(&S->gcache, GRAMMAR_CACHE, err)) != GL_OK)
        return st;
    if (S->p.grammar_cache_bytes <= 0)
        S->p.grammar_cache_bytes = grammar_cache_budget(gl_host_mem_available());
    gl_grammar_cache_set_budget(S->gcache, S->p.grammar_cache_bytes);
    fprintf(stderr,
            "glint serve: grammar cache %lld bytes (%.0f MiB, at most %d grammars), %lld bytes "
            "(%.0f MiB) per grammar compile; encoder cache %zu bytes (%.2f GiB, models with a "
            "vision tower)\n",
            (long long)S->p.grammar_cache_bytes, MIB(S->p.grammar_cache_bytes), GRAMMAR_CACHE,
            (long long)S->p.grammar_compile_bytes, MIB(S->p.grammar_compile_bytes),
            S->p.mm_cache_bytes, GIB(S->p.mm_cache_bytes));
    struct gl_engine_params ep = S->p.engine;
    struct gl_engine_params def = gl_engine_default_params(S->model);
    memcpy(ep.eos_ids, def.eos_ids, sizeof ep.eos_ids);
    ep.n_eos = def.n_eos;
    ep.kv.prefix_cache = S->p.prefix_caching;
    ep.encoder_cache_bytes = (int64_t)S->p.mm_cache_bytes; // rows kept after their requests
    // The drafter before the pools: its context pool is sized beside the KV pool (size_kv).
    if (ep.spec.method == GL_SPEC_DFLASH && !ep.spec.dflash) {
        if ((st = gl_dflash_open(&S->dflash, ep.spec.dflash_path, err)) != GL_OK)
            return st;
        ep.spec.dflash = S->dflash;
    }
    if ((st = size_kv(S, &ep, def.max_model_len, err)) != GL_OK)
        return st;
    gl_metrics_set_max_model_len(&S->metrics, ep.max_model_len);
    const struct gl_host_cpus *hc = gl_host_cpus();
    fprintf(stderr, "glint serve: %d kernel threads%s; the machine: %s\n", (int)ep.n_threads,
            ep.cpus && ep.n_threads <= ep.n_cpus ? ", one pinned per core" : " (not pinned)",
            hc->why);
    S->api.defaults = gl_sample_default_params();
    if ((st = load_generation_config(S, &ep, err)) != GL_OK)
        return st;
    if ((st = gl_engine_new(&S->engine, S->model, S->tok, &ep, err)) != GL_OK)
        return st;
    if (ep.device >= 0) // what `glint plan --device` predicts (device_local_total, host_visible)
        fprintf(stderr,
                "glint serve: device buffers: %llu bytes device-local, %llu bytes host-visible\n",
                (unsigned long long)gl_engine_device_bytes(S->engine, 0),
                (unsigned long long)gl_engine_device_bytes(S->engine, 1));
    S->metrics.block_size = ep.kv.block_size;
    // DFlash takes no prefix-cache hit (engine.c admit_one: the drafter's context needs the
    // target's captured states at every prompt position), so the gauge says off.
    S->metrics.prefix_caching = ep.kv.prefix_cache && ep.spec.method != GL_SPEC_DFLASH;
    S->metrics.spec_k = ep.spec.method != GL_SPEC_NONE ? ep.spec.k : 0;
    if (ep.spec.method == GL_SPEC_NGRAM)
        fprintf(stderr,
                "glint serve: speculative decoding: ngram, %d tokens per draft, lookup %d..%d\n",
                (int)ep.spec.k, (int)ep.spec.lookup_min, (int)ep.spec.lookup_max);
    if (ep.spec.method == GL_SPEC_DFLASH)
        fprintf(stderr,
                "glint serve: speculative decoding: dflash %s (%d blocks, target layers %d.., "
                "block %d), %d tokens per draft (no prefix-cache reuse: the drafter needs the "
                "target's states at every prompt position)\n",
                ep.spec.dflash_path, (int)S->dflash->cfg.n_layer,
                (int)S->dflash->cfg.target_layers[0], (int)S->dflash->cfg.block_size,
                (int)ep.spec.k);
    S->metrics.cache_dtype = gl_kv_dtype_name(ep.kv.dtype);
    S->max_waiting = ep.max_waiting;
    S->api.tok = S->tok;
    S->api.gvocab = S->gvocab;
    S->api.gcache = S->gcache;
    S->api.grammar_lock = &S->grammar_lock;
    S->api.grammar_compile_bytes = S->p.grammar_compile_bytes;
    S->metrics.gcache = S->gcache;
    S->metrics.grammar_lock = &S->grammar_lock;
    S->api.model_name = S->model_name;
    S->api.max_model_len = ep.max_model_len;
    S->api.max_token_bytes = gl_api_max_token_bytes(S->tok);
    S->api.max_logprobs = GL_SAMPLE_MAX_LOGPROBS;
    memcpy(S->api.eos_ids, ep.eos_ids, sizeof S->api.eos_ids);
    S->api.n_eos = ep.n_eos;
    S->api.framing = S->p.framing;
    S->api.strict_fields = S->p.strict_request_fields;
    S->api.so = S->so;
    S->api.media = (struct gl_mediasrc_opts){
        .local_root = S->p.allowed_local_media_path,
        .max_bytes = S->p.max_media_bytes,
        .allowed_domains = S->p.allowed_media_domains,
        .fetch_timeout_ms = (long)(S->p.media_fetch_timeout_s * 1000.0),
    };
    S->api.max_image_tokens = S->p.max_image_tokens;
    S->api.model = S->model;
    S->api.media_lock = &S->media_lock;
    // Parsing only preprocesses and patchifies each part; the engine's encoder worker encodes
    // (engine.h "Deferred encoding"), its cache (--mm-processor-cache-gb) keeps the rows.
    S->api.defer_encode = 1;
    S->metrics.encoder = gl_model_vision(S->model) != NULL;
    fprintf(stderr, "glint serve: ready in %.1f s (%d layers, vocabulary %d, max_model_len %d)\n",
            (double)(gl_time_us() - t0) / 1e6, S->model->cfg.n_layer, S->model->cfg.n_vocab,
            ep.max_model_len);
    return GL_OK;
}

static void teardown(struct server *S)
{
    atomic_store(&S->stop_engine, 1);
    if (S->probe_started) {
        pthread_mutex_lock(&S->probe_mu);
        pthread_cond_broadcast(&S->probe_cv);
        pthread_mutex_unlock(&S->probe_mu);
        if (S->engine)
            gl_engine_wake(S->engine);
        pthread_join(S->probe_thread, NULL);
    }
    if (S->engine_started) {
        gl_engine_wake(S->engine);
        pthread_join(S->engine_thread, NULL);
    }
    gl_engine_free(S->engine);   // aborts what is left: their callbacks release the requests
    gl_dflash_delete(S->dflash); // after the engine, which borrowed it
    gl_grammar_cache_free(S->gcache);
    gl_gvocab_free(S->gvocab); // after every grammar (grammar.h)
    gl_tokenizer_free(S->tok);
    gl_model_delete(S->model);
}

// --structured-outputs-config, parsed and logged (an error is the flag's).
static gl_status so_config(const struct gl_server_params *p, struct gl_api_so *so,
                           struct gl_err *err)
{
    memset(so, 0, sizeof *so);
    int backend_ignored = 0;
    if (p->structured_outputs_config &&
        gl_api_so_config(p->structured_outputs_config, so, &backend_ignored, err) != GL_OK)
        return GL_E_INVAL;
    if (backend_ignored)
        GL_LOGI("serve: --structured-outputs-config backend ignored: glint has one grammar engine");
    GL_LOGI("serve: structured outputs: %s whitespace, objects %s without additionalProperties, "
            "unenforceable keywords %s",
            so->ws_bounded ? "bounded" : "no", so->open_objects ? "open" : "closed",
            so->lenient ? "dropped (lenient)" : "refused");
    return GL_OK;
}

// The server's state before anything starts: locks, metrics, state LOADING. NULL on OOM.
static struct server *server_new(const struct gl_server_params *p, const struct gl_api_so *so)
{
    struct server *S = gl_calloc(1, sizeof *S);
    if (!S)
        return NULL;
    S->p = *p;
    S->so = *so;
    S->started = (int64_t)time(NULL);
    snprintf(S->model_name, sizeof S->model_name, "%s",
             p->served_model_name ? p->served_model_name : p->model_path);
    pthread_mutex_init(&S->grammar_lock, NULL);
    pthread_mutex_init(&S->media_lock, NULL);
    pthread_mutex_init(&S->reg_mu, NULL);
    const char *fault = getenv("GLINT_FAULT_STEP");
    S->fault_step = fault ? atoll(fault) : 0;
    pthread_mutex_init(&S->probe_mu, NULL);
    pthread_mutex_init(&S->log_mu, NULL);
    cond_init_monotonic(&S->probe_cv);
    gl_metrics_init(&S->metrics);
    atomic_store(&S->state, ST_LOADING);
    return S;
}

// Everything server_new and load made, after the daemon stopped (connection threads joined).
static void server_free(struct server *S)
{
    guard_stop(S);
    gl_ratelimit_free(S->rl);
    teardown(S);
    gl_cors_free(&S->cors);
    gl_metrics_destroy(&S->metrics);
    pthread_cond_destroy(&S->probe_cv);
    pthread_mutex_destroy(&S->probe_mu);
    pthread_mutex_destroy(&S->log_mu);
    pthread_mutex_destroy(&S->grammar_lock);
    pthread_mutex_destroy(&S->media_lock);
    pthread_mutex_destroy(&S->reg_mu);
    gl_free(S);
}

// The listening side: --host parsed (IPv4, IPv6, "::" dual stack), CORS, TLS, the connection
// guard, the per-address rate limit, then libmicrohttpd started (*d). *ip_flags: 0 for IPv4.
static gl_status listen_http(struct server *S, struct tls *tls, struct MHD_Daemon **d,
                             unsigned *ip_flags, struct gl_err *err)
{
    const struct gl_server_params *p = &S->p;
    struct sockaddr_in addr = {0};
    struct sockaddr_in6 addr6 = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)p->port);
    addr6.sin6_family = AF_INET6;
    addr6.sin6_port = htons((uint16_t)p->port);
    const struct sockaddr *bind_addr = (const struct sockaddr *)(const void *)&addr;
    *ip_flags = 0;
    if (inet_pton(AF_INET, p->host, &addr.sin_addr) != 1) {
        if (inet_pton(AF_INET6, p->host, &addr6.sin6_addr) != 1)
            return gl_err_set(err, GL_E_INVAL,
                              "serve: --host %s is not an IPv4 or IPv6 address (e.g. 127.0.0.1, "
                              "0.0.0.0, ::1, ::)",
                              p->host);
        // "::" takes IPv4 clients too (as uvicorn does on Linux); a specific address only its own.
        *ip_flags = IN6_IS_ADDR_UNSPECIFIED(&addr6.sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
        bind_addr = (const struct sockaddr *)(const void *)&addr6;
    }
    gl_status st;
    if ((st = gl_cors_init(&S->cors, p->allowed_origins, p->allowed_methods, p->allowed_headers,
                           p->allow_credentials, err)) != GL_OK ||
        (st = tls_setup(p, tls, err)) != GL_OK || (st = guard_start(S, err)) != GL_OK)
        return st;
    if (p->limit_request_rate_per_ip > 0) {
        double burst = p->limit_request_burst_per_ip > 0
                           ? p->limit_request_burst_per_ip
                           : fmax(1.0, 2 * p->limit_request_rate_per_ip);
        if ((st = gl_ratelimit_new(&S->rl, p->limit_request_rate_per_ip, burst, err)) != GL_OK)
            return st;
        fprintf(stderr, "glint serve: per-address rate limit %g requests/s, burst %g\n",
                p->limit_request_rate_per_ip, burst);
    }
    // MHD's own limits leave the guard room to answer the connections over ours (503/429); more
    // than 16 over the per-address limit, MHD closes new ones at once, before it spends a thread
    // on each (a connection flood from one address then costs an accept and a close).
    unsigned per_ip_hard =
        p->max_connections_per_ip > 0 ? (unsigned)p->max_connections_per_ip + 16u : 0u;
    *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
            MHD_USE_ERROR_LOG | tls->flags | *ip_flags,
        // The logger first: MHD uses its own for messages about options read before it.
        0, NULL, NULL, on_request, S, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, S, MHD_OPTION_SOCK_ADDR,
        bind_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, S, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_connections + 256u,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_hard, MHD_OPTION_CONNECTION_TIMEOUT, 3600u,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_ARRAY, tls->opts, MHD_OPTION_END);
    if (*d)
        return GL_OK;
    return tls->flags && errno != EADDRINUSE
               ? gl_err_set(err, GL_E_INVAL,
                            "serve: cannot start HTTPS on %s:%d: GnuTLS refused the certificate "
                            "or key (malformed, not a matching pair, or a wrong or missing "
                            "--ssl-keyfile-password; libmicrohttpd's reason is logged above)",
                            p->host, p->port)
               : gl_err_set(err, GL_E_IO, "serve: cannot listen on %s:%d: %s", p->host, p->port,
                            strerror(errno));
}

// Blocks until `seconds` pass or no request is in flight; 1 if some still are.
static int wait_in_flight(struct server *S, double seconds)
{
    int64_t until = gl_time_us() + (int64_t)(seconds * 1e6);
    while (atomic_load(&S->in_flight) > 0 && gl_time_us() < until) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&S->in_flight) > 0;
}

// After SIGTERM/SIGINT: no new connections, the running requests get --shutdown-timeout to end;
// what still runs then ends with an explicit 503, not a cut stream (2 s more to write those).
static void drain(struct server *S, struct MHD_Daemon *d, int sig)
{
    const double limit = S->p.shutdown_timeout_s;
    fprintf(stderr, "glint serve: %s: draining (up to %.0f s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", limit);
    atomic_store(&S->state, ST_DRAINING);
    MHD_socket ls = MHD_quiesce_daemon(d); // no new connections
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    if (!wait_in_flight(S, limit))
        return;
    GL_LOGW("serve: %lld requests unfinished after the %.0f s drain: failing them",
            (long long)atomic_load(&S->in_flight), limit);
    struct gl_api_error e;
    (void)gl_api_fail(&e, 503, NULL,
                      "the server is shutting down: its %.0f s drain time (--shutdown-timeout) "
                      "ran out before this request finished",
                      limit);
    fail_all(S, &e);
    (void)wait_in_flight(S, 2.0);
}

gl_status gl_server_run(const struct gl_server_params *p, struct gl_err *err)
{
    if (!p->model_path)
        return gl_err_set(err, GL_E_INVAL, "serve: --model is required");
    if (p->port < 0 || p->port > 65535)
        return gl_err_set(err, GL_E_INVAL, "serve: --port %d not in 0..65535", p->port);
    // Request bodies and schemas are parsed into jansson trees (~15 bytes of nodes per byte of
    // JSON): their frees count toward the trim (gl_mem_release) like glint's own. Both hooks are
    // malloc and free, so blocks jansson allocated before this call free the same way.
    json_set_alloc_funcs(gl_malloc_unmetered, gl_free_unmetered);
    struct gl_api_so so;
    if (so_config(p, &so, err) != GL_OK)
        return GL_E_INVAL;
    struct server *S = server_new(p, &so);
    if (!S)
        return gl_err_set(err, GL_E_NOMEM, "serve: no memory");

    // Signals are taken by sigwait in this thread only: block them before any thread starts.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct MHD_Daemon *d = NULL;
    struct tls tls = {.opts = {{MHD_OPTION_END, 0, NULL}}}; // plain HTTP until tls_setup
    unsigned ip_flags = 0;
    // Listen first, so /health answers 503 while the model loads (llama.cpp does the same).
    gl_status st = listen_http(S, &tls, &d, &ip_flags, err);
    if (st == GL_OK)
        st = load(S, err);
    if (st == GL_OK && pthread_create(&S->engine_thread, NULL, engine_main, S) != 0)
        st = gl_err_set(err, GL_E_INTERNAL, "serve: cannot start the engine thread");
    if (st == GL_OK) {
        S->engine_started = 1;
        atomic_store(&S->state, ST_READY);
        if (p->deep_health_interval_s > 0 &&
            pthread_create(&S->probe_thread, NULL, probe_main, S) == 0)
            S->probe_started = 1;
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "glint serve: serving '%s' at %s://%s%s%s:%u (OpenAI API under /v1)\n",
                S->model_name, tls.flags ? "https" : "http", ip_flags ? "[" : "", p->host,
                ip_flags ? "]" : "", di ? (unsigned)di->port : (unsigned)p->port);
        int sig = 0;
        sigwait(&sigs, &sig);
        drain(S, d, sig);
    }
    if (d)
        MHD_stop_daemon(d); // after the drain: connection threads are joined
    tls_free(&tls);
    server_free(S);
    return st;
}
