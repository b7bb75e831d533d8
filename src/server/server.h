// SPDX-License-Identifier: MIT
// server: `glint serve`, the vLLM-compatible OpenAI HTTP server. libmicrohttpd runs one thread
// per connection; those threads only read the body, parse it (api/), submit to the engine and
// stream bytes out. One engine thread steps the batch and runs every engine callback (it folds
// events into each request's response under that request's lock). A probe thread runs the deep
// health check. Lifetimes: the model, tokenizer, grammar cache and engine live as long as the
// server; a request lives until both its HTTP side is done and the engine has finished every
// choice (whichever comes last frees it), so neither side ever sees a freed request.
// Errors: gl_server_run returns a status for start-up failures (bad flags, model, port); client
// input never reaches it (api/ turns it into 4xx answers).
// Hostile clients: a connection guard answers connections over max_connections (503) or
// max_connections_per_ip (429), requests whose headers or body miss their deadline (408), and
// closes connections idle past timeout_keep_alive_s between requests (server.c, guard_*). An
// optional token bucket per client address answers requests over limit_request_rate_per_ip 429
// with Retry-After (server/ratelimit.h). libmicrohttpd's error lines (failed TLS handshakes among
// them, counted on /metrics) are written at most once per 10 s.
#pragma once

#include "base/base.h"
#include "engine/engine.h"

#include <stddef.h>
#include <stdint.h>

struct gl_server_params {
    const char *model_path;
    const char *mmproj;                 // vision GGUF to attach (gl_model_attach_vision), or NULL
    gl_model_progress_fn load_progress; // model.h: called per layer during the load, or NULL
    void *load_progress_user;
    const char *host;               // IPv4 or IPv6 address (default 127.0.0.1); "0.0.0.0" binds
                                    // every IPv4 interface, "::" every interface (dual stack)
    int port;                       // default 8000
    const char *api_key;            // NULL: no auth (VLLM_API_KEY is read by the CLI)
    const char *served_model_name;  // NULL: the model path
    const char *generation_config;  // "auto" (default), "vllm", or a folder holding
                                    // generation_config.json
    struct gl_engine_params engine; // max_model_len 0: the model's context length (or
                                    // less, to fit the pool); kv.budget_bytes 0: sized
                                    // from free memory (gl_kv_fit_compute)
    double kv_memory_fraction;      // of the memory free after the weights (0.9)
    int access_log;                 // 1: one stdout line per request (default)
    // CORS (vLLM's flags): JSON lists or comma-separated; NULL: ["*"].
    const char *allowed_origins, *allowed_methods, *allowed_headers;
    int allow_credentials;
    int prefix_caching;                   // 1 (default)
    int framing;                          // 1: chat requests run the whole-turn grammar (default)
    int strict_request_fields;            // 1: unknown request fields are a 400 (default 0)
    double shutdown_timeout_s;            // drain time after SIGTERM/SIGINT (default 30)
    double deep_health_interval_s;        // deep probe period (default 600); <= 0: never
    size_t max_body_bytes;                // default 32 MiB
    int max_connections;                  // open connections (default 1024); above: 503, closed
    int max_connections_per_ip;           // per client address (default 0: no limit); 429
    int timeout_headers_s;                // a request's headers within this of connecting (20)
    int timeout_body_s;                   // its body within this of its headers (default 60)
    int timeout_keep_alive_s;             // an idle connection's next request within (5)
    double limit_request_rate_per_ip;     // requests per second per client address (0: off,
                                          // the default: behind a proxy it is the proxy's job)
    double limit_request_burst_per_ip;    // requests at once before the rate applies (0: 2 x rate,
                                          // at least 1)
    const char *allowed_local_media_path; // media parts may name files under it (NULL: none)
    size_t max_media_bytes;               // per image or video part (default 20 MiB)
    const char *allowed_media_domains;    // hosts http(s) parts may come from ("*": any; NULL:
                                          // remote URLs refused)
    double media_fetch_timeout_s;         // per remote part (default 10)
    size_t mm_cache_bytes;                // encoder cache budget (default 4 GiB; 0: off)
    int64_t grammar_cache_bytes;          // compiled-grammar cache budget (0: sized from the
                                          // machine: 1/32 of the free memory, 64 MiB..1 GiB)
    int64_t grammar_compile_bytes;        // most one grammar compile may hold (default 256 MiB)
    int32_t max_image_tokens;             // default cap per image (4096; requests may lower
                                          // or raise it: mm_processor_kwargs)

    // HTTPS (GnuTLS, through libmicrohttpd): both files or neither. PEM text, read once at start
    // (at most 1 MiB each); the key may be encrypted (then ssl_keyfile_password).
    const char *ssl_certfile;         // certificate chain, leaf first (NULL: plain HTTP)
    const char *ssl_keyfile;          // the leaf's private key
    const char *ssl_keyfile_password; // NULL: the key is not encrypted
    // vLLM's --structured-outputs-config JSON (gl_api_so_config), or NULL: glint's defaults
    const char *structured_outputs_config;
};
struct gl_server_params gl_server_default_params(void);

// Loads the model, serves until SIGTERM or SIGINT, drains, frees everything. GL_OK after a clean
// shutdown.
GL_MUST_USE gl_status gl_server_run(const struct gl_server_params *p, struct gl_err *err);
