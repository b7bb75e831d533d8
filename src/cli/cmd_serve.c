// SPDX-License-Identifier: MIT
// `glint serve`: flags (spelled as vLLM's) -> struct gl_server_params -> gl_server_run.
#include "api/api.h"
#include "cli.h"
#include "image/image.h"
#include "kv/kv.h"
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// uvicorn's levels: its access log is written at info, so warning and above silence it.
static int opt_log_level(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    static const char *const on[] = {"trace", "debug", "info"};
    static const char *const off[] = {"warning", "error", "critical"};
    for (int i = 0; i < 3; i++) {
        if (!strcmp(v, on[i]))
            return *(int *)user = 1, 0;
        if (!strcmp(v, off[i]))
            return *(int *)user = 0, 0;
    }
    return -1;
}

static int opt_spec(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    struct gl_err e2 = {0};
    if (gl_api_spec_config(v, user, &e2) == GL_OK)
        return 0;
    fprintf(stderr, "%s: %s\n", cmd, e2.msg);
    return 2;
}

// vLLM's --mm-processor-cache-gb is a float: GiB, fractions too.
static int opt_gib(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    double gib;
    if (gl_cli_parse_double(v, 0, 1 << 20, &gib))
        return -1;
    *(size_t *)user = (size_t)(gib * (double)(1 << 30));
    return 0;
}

static int opt_client_certs(void *user, const char *v, const char *name, const char *cmd)
{
    (void)user;
    (void)v;
    fprintf(stderr, "%s: %s: client certificates are not supported\n", cmd, name);
    return 2;
}

static int opt_dtype(void *user, const char *v, const char *name, const char *cmd)
{
    (void)user;
    (void)name;
    if (!strcmp(v, "auto"))
        return 0;
    fprintf(stderr,
            "%s: --dtype %s: only auto (the weights' own types; convert the model with glint "
            "convert --type for another)\n",
            cmd, v);
    return 2;
}

static int opt_parallel(void *user, const char *v, const char *name, const char *cmd)
{
    (void)user;
    if (!strcmp(v, "1"))
        return 0;
    fprintf(stderr,
            "%s: %s %s: glint runs one model replica in one process on the CPU; only 1 is "
            "supported (start more servers behind a load balancer for data parallelism)\n",
            cmd, name, v);
    return 2;
}

#define VLLM_ONLY "accepted for vLLM command lines; changes nothing"

static const char *ignored; // where the values of flags that change nothing go

// The model's, the engine's and the KV pool's flags (and vLLM's parallelism) into out; returns
// how many.
static size_t engine_flags(struct gl_opt *out, struct gl_server_params *ps)
{
    struct gl_engine_params *e = &ps->engine;
    const struct gl_opt t[] = {
        GL_OPT_S("--model", NULL, ps->model_path, "F", "a GGUF or an HF checkpoint folder"),
        GL_OPT_S("--host", NULL, ps->host, "H",
                 "IPv4 or IPv6 address to bind (default 127.0.0.1; 0.0.0.0: every IPv4 interface; "
                 "::: every interface)"),
        GL_OPT_I("--port", NULL, ps->port, 0, 65535, "P",
                 "default 8000 (0: any free port, printed at start)"),
        GL_OPT_S("--api-key", NULL, ps->api_key, "K",
                 "required Bearer key on /v1/* (or VLLM_API_KEY)"),
        GL_OPT_S("--ssl-certfile", NULL, ps->ssl_certfile, "F",
                 "PEM certificate chain: serve HTTPS (needs --ssl-keyfile)"),
        GL_OPT_S("--ssl-keyfile", NULL, ps->ssl_keyfile, "F", "PEM private key of the certificate"),
        GL_OPT_S("--ssl-keyfile-password", NULL, ps->ssl_keyfile_password, "P",
                 "passphrase of an encrypted --ssl-keyfile"),
        GL_OPT_F("--ssl-ca-certs", "--ssl-cert-reqs", opt_client_certs, NULL, "V", NULL, NULL),
        GL_OPT_S("--served-model-name", NULL, ps->served_model_name, "N",
                 "the model id clients send (default: the path)"),
        GL_OPT_I("--max-model-len", NULL, e->max_model_len, 2, INT32_MAX, "N",
                 "prompt + output tokens (default: the model's, lowered to what the KV pool holds; "
                 "said at start)"),
        GL_OPT_I("--max-num-seqs", NULL, e->max_num_seqs, 1, 4096, "N",
                 "sequences per step (default 16)"),
        GL_OPT_I("--max-num-batched-tokens", NULL, e->max_num_batched_tokens, 1, 65536, "N",
                 "tokens per step (default 512)"),
        GL_OPT_Z("--kv-cache-memory-bytes", "--kv-cache-memory", e->kv.budget_bytes, "B",
                 "KV pool size, e.g. 2GiB (default: sized from the memory free after the weights, "
                 "at most --max-num-seqs full sequences)"),
        GL_OPT_F("--gpu-memory-utilization", NULL, gl_cli_opt_fraction, &ps->kv_memory_fraction,
                 "F", "a fraction in (0, 1]",
                 "share of the memory free after the weights that the default KV pool takes, "
                 "(0, 1] (default 0.9; on CPU it is not a share of total memory as in vLLM)"),
        GL_OPT_F("--kv-cache-dtype", NULL, gl_cli_opt_kv_dtype, &e->kv.dtype, "T",
                 GL_CLI_KV_DTYPE_WANT, "auto|f16|bf16|fp8|f32 (default auto = f16)"),
        GL_OPT_I("--block-size", NULL, e->kv.block_size, 1, 1024, "N",
                 "positions per KV page (default 16)"),
        GL_OPT_B("--enable-prefix-caching", NULL, ps->prefix_caching, 1, "(default on)"),
        GL_OPT_B("--no-enable-prefix-caching", NULL, ps->prefix_caching, 0, "prefix caching off"),
        GL_OPT_S("--generation-config", NULL, ps->generation_config, "G",
                 "auto (default: generation_config.json of an HF --model folder) | vllm (vLLM's "
                 "defaults) | FOLDER"),
        GL_OPT_I("--seed", NULL, e->seed, 0, INT64_MAX, "N",
                 "base seed of unseeded requests (default 0)"),
        GL_OPT_I("--threads", NULL, e->n_threads, 1, 1024, "N",
                 "kernel threads (default: the physical cores this process may use, one pinned per "
                 "core)"),
        GL_OPT_F("--device", NULL, gl_cli_opt_device, &e->device, "D", NULL,
                 "cpu (default) or vulkan[:INDEX] (`glint devices`)"),
        GL_OPT_I("--n-gpu-layers", "-ngl", e->n_gpu_layers, -1, 1 << 20, "N", GL_CLI_NGL_HELP),
        GL_OPT_I("--max-waiting", NULL, e->max_waiting, 1, 1 << 20, "N",
                 "queued sequences before 503 (default 256)"),
        GL_OPT_F("--speculative-config", NULL, opt_spec, &e->spec, "J", NULL,
                 "vLLM's JSON, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                 "\"prompt_lookup_min\": 2, \"prompt_lookup_max\": 4}', or '{\"method\": "
                 "\"dflash\", \"model\": \"D.gguf\" (or the HF assistant folder), "
                 "\"num_speculative_tokens\": 8}' (default "
                 "off; docs/SERVER.md)"),
        GL_OPT_F("--tensor-parallel-size", "-tp", opt_parallel, NULL, "1", NULL,
                 "accepted for vLLM command lines (1 only)"),
        GL_OPT_F("--pipeline-parallel-size", "-pp", opt_parallel, NULL, "1", NULL,
                 "accepted for vLLM command lines (1 only)"),
        GL_OPT_F("--data-parallel-size", "-dp", opt_parallel, NULL, "1", NULL,
                 "accepted for vLLM command lines (1 only)"),
    };
    memcpy(out, t, sizeof t);
    return GL_NOPTS(t);
}

// The HTTP server's flags: CORS, logging, vLLM's accepted no-ops, limits and timeouts, media,
// grammars, request strictness. Returns how many were written to out.
static size_t http_flags(struct gl_opt *out, struct gl_server_params *ps)
{
    const struct gl_opt t[] = {
        GL_OPT_S("--allowed-origins", NULL, ps->allowed_origins, "L",
                 "CORS: JSON list or comma-separated (default [\"*\"])"),
        GL_OPT_S("--allowed-methods", NULL, ps->allowed_methods, "L",
                 "CORS methods (default [\"*\"])"),
        GL_OPT_S("--allowed-headers", NULL, ps->allowed_headers, "L",
                 "CORS request headers (default [\"*\"])"),
        GL_OPT_B("--allow-credentials", NULL, ps->allow_credentials, 1,
                 "CORS: allow credentials (default off)"),
        GL_OPT_B("--disable-uvicorn-access-log", "--disable-log-requests", ps->access_log, 0,
                 "no per-request access line on stdout (default on: method, path, status, "
                 "latency, tokens; never bodies)"),
        GL_OPT_F("--uvicorn-log-level", NULL, opt_log_level, &ps->access_log, "L",
                 "debug, info, trace, warning, error or critical",
                 "debug|info|trace: access lines; warning|error|critical: none"),
        // glint logs no bodies or periodic stats, runs no model code, always parses tool calls
        // (Muse Glimmer's own turn format from token ids, docs/SERVER.md), and has no CUDA graphs
        // or frontend processes.
        GL_OPT_IGNORED("--enable-log-requests", NULL, VLLM_ONLY),
        GL_OPT_IGNORED("--disable-log-stats", NULL, VLLM_ONLY),
        GL_OPT_IGNORED("--trust-remote-code", NULL, VLLM_ONLY),
        GL_OPT_IGNORED("--enable-auto-tool-choice", NULL, VLLM_ONLY),
        GL_OPT_IGNORED("--enforce-eager", NULL, VLLM_ONLY),
        GL_OPT_IGNORED("--disable-frontend-multiprocessing", NULL, VLLM_ONLY),
        GL_OPT_S("--tool-call-parser", NULL, ignored, "P", VLLM_ONLY),
        GL_OPT_S("--reasoning-parser", NULL, ignored, "P", VLLM_ONLY),
        GL_OPT_F("--dtype", NULL, opt_dtype, NULL, "auto", NULL, VLLM_ONLY " (auto only)"),
        GL_OPT_T("--shutdown-timeout", NULL, ps->shutdown_timeout_s, 0, 86400, "S",
                 "drain time after SIGTERM/SIGINT (default 30)"),
        GL_OPT_T("--deep-health-interval", NULL, ps->deep_health_interval_s, 0, 86400 * 7, "S",
                 "deep probe period in seconds (default 600; 0: off)"),
        GL_OPT_Z("--max-body-bytes", NULL, ps->max_body_bytes, "BYTES",
                 "request body limit (default 32MiB; over it: 413)"),
        GL_OPT_I("--limit-concurrency", NULL, ps->max_connections, 1, 65536, "N",
                 "open connections (default 1024); over it a new one is answered 503 and closed"),
        GL_OPT_I("--limit-concurrency-per-ip", NULL, ps->max_connections_per_ip, 0, 65536, "N",
                 "open connections per client address (IPv4 or IPv6) (default 0: no limit; over "
                 "it: 429 and closed; 16 over it: closed at once)"),
        GL_OPT_D("--limit-request-rate-per-ip", NULL, ps->limit_request_rate_per_ip, 0, 1e6, "R",
                 "requests per second per client address, IPv4 or IPv6 (default 0: off; over it: "
                 "429 with Retry-After). Behind nginx every client shares the proxy's address: "
                 "limit there (docs/DEPLOY.md)"),
        GL_OPT_D("--limit-request-burst-per-ip", NULL, ps->limit_request_burst_per_ip, 1, 1e6, "N",
                 "requests at once before the rate applies (default 2 x the rate, at least 1)"),
        GL_OPT_I("--timeout-headers", NULL, ps->timeout_headers_s, 1, 86400, "S",
                 "a request's headers must arrive within S seconds of connecting (default 20; else "
                 "408 and closed)"),
        GL_OPT_I("--timeout-body", NULL, ps->timeout_body_s, 1, 86400, "S",
                 "its body within S seconds of its headers (default 60; else 408 and closed)"),
        GL_OPT_I("--timeout-keep-alive", NULL, ps->timeout_keep_alive_s, 1, 86400, "S",
                 "close a connection idle S seconds between requests (default 5)"),
        GL_OPT_S("--allowed-local-media-path", NULL, ps->allowed_local_media_path, "DIR",
                 "image/video parts may name files under DIR (absolute path or file:// URL; "
                 "default: none)"),
        GL_OPT_Z("--max-media-bytes", NULL, ps->max_media_bytes, "BYTES",
                 "per image or video part (default 20MiB)"),
        GL_OPT_S("--allowed-media-domains", NULL, ps->allowed_media_domains, "H",
                 "fetch http(s) image/video URLs from these hosts (comma-separated; * = any; "
                 "default: refused)"),
        GL_OPT_T("--media-fetch-timeout", NULL, ps->media_fetch_timeout_s, 1, 3600, "S",
                 "per remote part (default 10)"),
        GL_OPT_F("--mm-processor-cache-gb", NULL, opt_gib, &ps->mm_cache_bytes, "N",
                 "a number of GiB in 0..1048576",
                 "vision encoder output cache, GiB (default 4; 0: off; fractions too: 0.0625 = 64 "
                 "MiB)"),
        GL_OPT_Z("--grammar-cache-bytes", NULL, ps->grammar_cache_bytes, "B",
                 "compiled-grammar cache budget, charged at each grammar's real size as its masks "
                 "grow (default 1/32 of the free memory, 64MiB..1GiB)"),
        GL_OPT_Z("--grammar-compile-bytes", NULL, ps->grammar_compile_bytes, "B",
                 "most one grammar compile may hold (default 256MiB; over it: 400 naming the "
                 "schema part)"),
        GL_OPT_S("--mmproj", NULL, ps->mmproj, "F",
                 "mmproj (llama.cpp's layout, e.g. glint convert --vision-out's) for a GGUF "
                 "--model (an HF folder brings its own tower); with only the summed patch kernel, "
                 "video parts are 400s"),
        GL_OPT_I("--max-image-tokens", NULL, ps->max_image_tokens, 1, GL_IMAGE_MAX_TOKENS_LIMIT,
                 "N",
                 "merged tokens per image (default 4096; a request's "
                 "mm_processor_kwargs.max_image_tokens overrides)"),
        GL_OPT_I("--max-num-encoder-input-tokens", NULL, ps->engine.max_num_encoder_input_tokens, 1,
                 1 << 20, "N",
                 "soft-token rows the vision encoder may have in flight; each step queues parts "
                 "under it (default 4096: one image at the default cap)"),
        GL_OPT_B("--strict-request-fields", NULL, ps->strict_request_fields, 1,
                 "a request field glint does not know is a 400 (default: ignored with a warning "
                 "and X-Glint-Ignored-Fields, as vLLM ignores extra fields)"),
        GL_OPT_B("--no-framing-grammar", NULL, ps->framing, 0,
                 "unconstrained chat requests run without the whole-turn grammar"),
        GL_OPT_S("--structured-outputs-config", NULL, ps->structured_outputs_config, "JSON",
                 "vLLM's: {\"disable_any_whitespace\": B, \"disable_additional_properties\": B, "
                 "\"backend\": S (ignored), \"lenient_keywords\": B (glint)}; default compact, "
                 "closed objects, unenforceable keywords refused (docs/SERVER.md)"),
    };
    memcpy(out, t, sizeof t);
    return GL_NOPTS(t);
}

int gl_cmd_serve(int argc, char **argv)
{
    struct gl_server_params p = gl_server_default_params();
    p.api_key = getenv("VLLM_API_KEY");
    struct gl_opt t[96];
    size_t n = engine_flags(t, &p);
    n += http_flags(t + n, &p);
    GL_ASSERT(n <= GL_NOPTS(t));
    t[0].required = 1;
    struct gl_cli_spec s = {.cmd = "glint serve",
                            .synopsis = "--model F [options]   (vLLM's flag names)",
                            .about = "The OpenAI-compatible HTTP server (docs/SERVER.md).",
                            .opts = t,
                            .n_opts = n};
    GL_CLI_PARSE(&s, argc, argv);
    gl_cli_ngl_check("glint serve", p.engine.device, p.engine.n_gpu_layers);
    struct gl_err err = {0};
    struct gl_cli_progress pr = {.who = "glint serve", .t0_us = gl_time_us()};
    p.load_progress = gl_cli_load_progress;
    p.load_progress_user = &pr;
    if (gl_server_run(&p, &err) != GL_OK) {
        fprintf(stderr, "glint serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
