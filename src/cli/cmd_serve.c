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

static int usage(FILE *f)
{
    fprintf(
        f,
        "usage: glint serve --model F [options]   (vLLM's flag names)\n"
        "  --host H                    IPv4 or IPv6 address to bind (default 127.0.0.1;\n"
        "                              0.0.0.0: every IPv4 interface; ::: every interface)\n"
        "  --port P                    default 8000 (0: any free port, printed at start)\n"
        "  --api-key K                 required Bearer key on /v1/* (or VLLM_API_KEY)\n"
        "  --ssl-certfile F            PEM certificate chain: serve HTTPS (needs\n"
        "                              --ssl-keyfile)\n"
        "  --ssl-keyfile F             PEM private key of the certificate\n"
        "  --ssl-keyfile-password P    passphrase of an encrypted --ssl-keyfile\n"
        "  --served-model-name N       the model id clients send (default: the path)\n"
        "  --max-model-len N           prompt + output tokens (default: the model's, lowered\n"
        "                              to what the KV pool holds; said at start)\n"
        "  --max-num-seqs N            sequences per step (default 16)\n"
        "  --max-num-batched-tokens N  tokens per step (default 512)\n"
        "  --kv-cache-memory-bytes B   KV pool size, e.g. 2GiB (also --kv-cache-memory;\n"
        "                              default: sized from the memory free after the\n"
        "                              weights, at most --max-num-seqs full sequences)\n"
        "  --gpu-memory-utilization F  share of the memory free after the weights that the\n"
        "                              default KV pool takes, (0, 1] (default 0.9; on CPU\n"
        "                              it is not a share of total memory as in vLLM)\n"
        "  --kv-cache-dtype T          auto|f16|bf16|fp8|f32 (default auto = f16)\n"
        "  --block-size N              positions per KV page (default 16)\n"
        "  --enable-prefix-caching / --no-enable-prefix-caching   (default on)\n"
        "  --generation-config G       auto (default: generation_config.json of an HF\n"
        "                              --model folder) | vllm (vLLM's defaults) | FOLDER\n"
        "  --seed N                    base seed of unseeded requests (default 0)\n"
        "  --threads N                 kernel threads (default: the physical cores this\n"
        "                              process may use, one pinned per core)\n"
        "  --device D                  cpu (default) or vulkan[:INDEX] (`glint devices`)\n"
        "  --max-waiting N             queued sequences before 503 (default 256)\n"
        "  --speculative-config J      vLLM's JSON, e.g. '{\"method\": \"ngram\",\n"
        "                              \"num_speculative_tokens\": 4, \"prompt_lookup_min\": 2,\n"
        "                              \"prompt_lookup_max\": 4}' (ngram only so far; default\n"
        "                              off; docs/SERVER.md)\n");
    fprintf(f, // (split: C99 string literal limit)
            "  --tensor-parallel-size 1, --pipeline-parallel-size 1, --data-parallel-size 1\n"
            "                              accepted for vLLM command lines (1 only)\n"
            "  --allowed-origins L         CORS: JSON list or comma-separated (default [\"*\"])\n"
            "  --allowed-methods L         CORS methods (default [\"*\"])\n"
            "  --allowed-headers L         CORS request headers (default [\"*\"])\n"
            "  --allow-credentials         CORS: allow credentials (default off)\n"
            "  --disable-uvicorn-access-log / --disable-log-requests\n"
            "                              no per-request access line on stdout (default on:\n"
            "                              method, path, status, latency, tokens; never bodies)\n"
            "  --uvicorn-log-level L       debug|info|trace: access lines; warning|error|\n"
            "                              critical: none\n"
            "  --enable-log-requests, --disable-log-stats, --trust-remote-code,\n"
            "  --enable-auto-tool-choice, --enforce-eager, --disable-frontend-multiprocessing,\n"
            "  --tool-call-parser P, --reasoning-parser P, --dtype auto   accepted for vLLM\n"
            "                              command lines; change nothing\n"
            "  --shutdown-timeout S        drain time after SIGTERM/SIGINT (default 30)\n"
            "  --deep-health-interval S    deep probe period in seconds (default 600; 0: off)\n"
            "  --max-body-bytes BYTES      request body limit (default 32MiB; over it: 413)\n"
            "  --limit-concurrency N       open connections (default 1024); over it a new one\n"
            "                              is answered 503 and closed\n"
            "  --limit-concurrency-per-ip N   open connections per client address (IPv4 or IPv6)\n"
            "                              (default 0: no limit; over it: 429 and closed;\n"
            "                              16 over it: closed at once)\n"
            "  --limit-request-rate-per-ip R   requests per second per client address, IPv4\n"
            "                              or IPv6 (default 0: off; over it: 429 with\n"
            "                              Retry-After). Behind nginx every client shares the\n"
            "                              proxy's address: limit there (docs/DEPLOY.md)\n"
            "  --limit-request-burst-per-ip N  requests at once before the rate applies\n"
            "                              (default 2 x the rate, at least 1)\n"
            "  --timeout-headers S         a request's headers must arrive within S seconds\n"
            "                              of connecting (default 20; else 408 and closed)\n"
            "  --timeout-body S            its body within S seconds of its headers\n"
            "                              (default 60; else 408 and closed)\n"
            "  --timeout-keep-alive S      close a connection idle S seconds between requests\n"
            "                              (default 5)\n"
            "  --allowed-local-media-path DIR   image/video parts may name files under DIR\n"
            "                              (absolute path or file:// URL; default: none)\n"
            "  --max-media-bytes BYTES     per image or video part (default 20MiB)\n"
            "  --allowed-media-domains H   fetch http(s) image/video URLs from these hosts\n"
            "                              (comma-separated; * = any; default: refused)\n"
            "  --media-fetch-timeout S     per remote part (default 10)\n"
            "  --mm-processor-cache-gb N   vision encoder output cache, GiB (default 4; 0: off;\n"
            "                              fractions too: 0.0625 = 64 MiB)\n");
    fprintf(f, // (split: C99 string literal limit)
            "  --grammar-cache-bytes B     compiled-grammar cache budget, charged at each\n"
            "                              grammar's real size as its masks grow (default 1/32\n"
            "                              of the free memory, 64MiB..1GiB)\n"
            "  --grammar-compile-bytes B   most one grammar compile may hold (default 256MiB;\n"
            "                              over it: 400 naming the schema part)\n"
            "  --mmproj F                  vision GGUF from glint convert --vision-out, for a\n"
            "                              GGUF --model (an HF folder brings its own tower)\n"
            "  --max-image-tokens N        merged tokens per image (default 4096; a request's\n"
            "                              mm_processor_kwargs.max_image_tokens overrides)\n"
            "  --max-num-encoder-input-tokens N   soft-token rows the vision encoder may have\n"
            "                              in flight; each step queues parts under it (default\n"
            "                              4096: one image at the default cap)\n"
            "  --strict-request-fields     a request field glint does not know is a 400 (default:\n"
            "                              ignored with a warning and X-Glint-Ignored-Fields,\n"
            "                              as vLLM ignores extra fields)\n"
            "  --no-framing-grammar        unconstrained chat requests run without the\n"
            "                              whole-turn grammar\n"
            "  --structured-outputs-config JSON   vLLM's: {\"disable_any_whitespace\": B,\n"
            "                              \"disable_additional_properties\": B, \"backend\": S\n"
            "                              (ignored), \"lenient_keywords\": B (glint)}; default\n"
            "                              compact, closed objects, unenforceable keywords\n"
            "                              refused (docs/SERVER.md)\n");
    return f == stdout ? 0 : 2;
}

// vLLM's --gpu-memory-utilization: a fraction in (0, 1].
static int parse_fraction(const char *v, double *out)
{
    char *end;
    double f = strtod(v, &end);
    if (end == v || *end || !(f > 0.0 && f <= 1.0))
        return -1;
    *out = f;
    return 0;
}

// uvicorn's levels: its access log is written at info, so warning and above silence it.
static int log_level(const char *v, int *access_log)
{
    static const char *const on[] = {"trace", "debug", "info"};
    static const char *const off[] = {"warning", "error", "critical"};
    for (int i = 0; i < 3; i++) {
        if (!strcmp(v, on[i]))
            return *access_log = 1, 0;
        if (!strcmp(v, off[i]))
            return *access_log = 0, 0;
    }
    return -1;
}

int gl_cmd_serve(int argc, char **argv)
{
    struct gl_server_params p = gl_server_default_params();
    p.api_key = getenv("VLLM_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout);
        if (!strcmp(a, "--enable-prefix-caching") || !strcmp(a, "--no-enable-prefix-caching")) {
            p.prefix_caching = a[2] == 'e';
            continue;
        }
        if (!strcmp(a, "--strict-request-fields")) {
            p.strict_request_fields = 1;
            continue;
        }
        if (!strcmp(a, "--no-framing-grammar")) {
            p.framing = 0;
            continue;
        }
        if (!strcmp(a, "--allow-credentials")) {
            p.allow_credentials = 1;
            continue;
        }
        if (!strcmp(a, "--disable-uvicorn-access-log") || !strcmp(a, "--disable-log-requests")) {
            p.access_log = 0;
            continue;
        }
        if (!strcmp(a, "--enable-log-requests") || !strcmp(a, "--disable-log-stats") ||
            !strcmp(a, "--trust-remote-code") || !strcmp(a, "--enable-auto-tool-choice") ||
            !strcmp(a, "--enforce-eager") || !strcmp(a, "--disable-frontend-multiprocessing"))
            continue; // glint logs no bodies or periodic stats, runs no model code, always
                      // parses tool calls, and has no CUDA graphs or frontend processes
        if (i + 1 >= argc) {
            fprintf(stderr, "glint serve: unknown flag or missing value: '%s'\n", a);
            return usage(stderr);
        }
        const char *v = argv[++i];
        long long x = 0;
        int64_t bytes = 0;
        double gib = 0;
        int bad = 0;
        if (!strcmp(a, "--model"))
            p.model_path = v;
        else if (!strcmp(a, "--mmproj"))
            p.mmproj = v;
        else if (!strcmp(a, "--host"))
            p.host = v;
        else if (!strcmp(a, "--port"))
            bad = gl_cli_parse_int(v, 0, 65535, &x) || (p.port = (int)x, 0);
        else if (!strcmp(a, "--api-key"))
            p.api_key = v;
        else if (!strcmp(a, "--ssl-certfile"))
            p.ssl_certfile = v;
        else if (!strcmp(a, "--ssl-keyfile"))
            p.ssl_keyfile = v;
        else if (!strcmp(a, "--ssl-keyfile-password"))
            p.ssl_keyfile_password = v;
        else if (!strcmp(a, "--ssl-ca-certs") || !strcmp(a, "--ssl-cert-reqs")) {
            fprintf(stderr, "glint serve: %s: client certificates are not supported\n", a);
            return 2;
        } else if (!strcmp(a, "--served-model-name"))
            p.served_model_name = v;
        else if (!strcmp(a, "--generation-config"))
            p.generation_config = v;
        else if (!strcmp(a, "--structured-outputs-config"))
            p.structured_outputs_config = v;
        else if (!strcmp(a, "--speculative-config")) {
            struct gl_err e2 = {0};
            if (gl_api_spec_config(v, &p.engine.spec, &e2) != GL_OK) {
                fprintf(stderr, "glint serve: %s\n", e2.msg);
                return 2;
            }
        } else if (!strcmp(a, "--max-model-len"))
            bad = gl_cli_parse_int(v, 2, INT32_MAX, &x) || (p.engine.max_model_len = (int32_t)x, 0);
        else if (!strcmp(a, "--max-num-seqs"))
            bad = gl_cli_parse_int(v, 1, 4096, &x) || (p.engine.max_num_seqs = (int32_t)x, 0);
        else if (!strcmp(a, "--max-num-batched-tokens"))
            bad = gl_cli_parse_int(v, 1, 65536, &x) ||
                  (p.engine.max_num_batched_tokens = (int32_t)x, 0);
        else if (!strcmp(a, "--threads"))
            bad = gl_cli_parse_int(v, 1, 1024, &x) || (p.engine.n_threads = (int32_t)x, 0);
        else if (!strcmp(a, "--device")) {
            int dev;
            if (gl_cli_device("glint serve", v, 1, &dev))
                return 2;
            p.engine.device = dev;
        } else if (!strcmp(a, "--max-waiting"))
            bad = gl_cli_parse_int(v, 1, 1 << 20, &x) || (p.engine.max_waiting = (int32_t)x, 0);
        else if (!strcmp(a, "--shutdown-timeout"))
            bad = gl_cli_parse_int(v, 0, 86400, &x) || (p.shutdown_timeout_s = (double)x, 0);
        else if (!strcmp(a, "--deep-health-interval"))
            bad =
                gl_cli_parse_int(v, 0, 86400 * 7, &x) || (p.deep_health_interval_s = (double)x, 0);
        else if (!strcmp(a, "--kv-cache-memory") || !strcmp(a, "--kv-cache-memory-bytes"))
            bad = gl_cli_parse_bytes(v, &bytes) || (p.engine.kv.budget_bytes = bytes, 0);
        else if (!strcmp(a, "--max-body-bytes"))
            bad = gl_cli_parse_bytes(v, &bytes) || (p.max_body_bytes = (size_t)bytes, 0);
        else if (!strcmp(a, "--limit-concurrency"))
            bad = gl_cli_parse_int(v, 1, 65536, &x) || (p.max_connections = (int)x, 0);
        else if (!strcmp(a, "--limit-concurrency-per-ip"))
            bad = gl_cli_parse_int(v, 0, 65536, &x) || (p.max_connections_per_ip = (int)x, 0);
        else if (!strcmp(a, "--limit-request-rate-per-ip"))
            bad = gl_cli_parse_double(v, 0, 1e6, &p.limit_request_rate_per_ip);
        else if (!strcmp(a, "--limit-request-burst-per-ip"))
            bad = gl_cli_parse_double(v, 1, 1e6, &p.limit_request_burst_per_ip);
        else if (!strcmp(a, "--timeout-headers"))
            bad = gl_cli_parse_int(v, 1, 86400, &x) || (p.timeout_headers_s = (int)x, 0);
        else if (!strcmp(a, "--timeout-body"))
            bad = gl_cli_parse_int(v, 1, 86400, &x) || (p.timeout_body_s = (int)x, 0);
        else if (!strcmp(a, "--timeout-keep-alive"))
            bad = gl_cli_parse_int(v, 1, 86400, &x) || (p.timeout_keep_alive_s = (int)x, 0);
        else if (!strcmp(a, "--allowed-local-media-path"))
            p.allowed_local_media_path = v;
        else if (!strcmp(a, "--allowed-media-domains"))
            p.allowed_media_domains = v;
        else if (!strcmp(a, "--mm-processor-cache-gb"))
            bad = gl_cli_parse_double(v, 0, 1 << 20, &gib) ||
                  (p.mm_cache_bytes = (size_t)(gib * (double)(1 << 30)), 0); // vLLM: a float
        else if (!strcmp(a, "--grammar-cache-bytes"))
            bad = gl_cli_parse_bytes(v, &bytes) || bytes <= 0 || (p.grammar_cache_bytes = bytes, 0);
        else if (!strcmp(a, "--grammar-compile-bytes"))
            bad =
                gl_cli_parse_bytes(v, &bytes) || bytes <= 0 || (p.grammar_compile_bytes = bytes, 0);
        else if (!strcmp(a, "--media-fetch-timeout"))
            bad = gl_cli_parse_int(v, 1, 3600, &x) || (p.media_fetch_timeout_s = (double)x, 0);
        else if (!strcmp(a, "--max-num-encoder-input-tokens"))
            bad = gl_cli_parse_int(v, 1, 1 << 20, &x) ||
                  (p.engine.max_num_encoder_input_tokens = (int32_t)x, 0);
        else if (!strcmp(a, "--max-image-tokens"))
            bad = gl_cli_parse_int(v, 1, GL_IMAGE_MAX_TOKENS_LIMIT, &x) ||
                  (p.max_image_tokens = (int32_t)x, 0);
        else if (!strcmp(a, "--max-media-bytes"))
            bad = gl_cli_parse_bytes(v, &bytes) || bytes <= 0 ||
                  (p.max_media_bytes = (size_t)bytes, 0);
        else if (!strcmp(a, "--kv-cache-dtype"))
            bad = gl_kv_dtype_parse(v, &p.engine.kv.dtype, NULL) != GL_OK;
        else if (!strcmp(a, "--gpu-memory-utilization"))
            bad = parse_fraction(v, &p.kv_memory_fraction);
        else if (!strcmp(a, "--block-size"))
            bad = gl_cli_parse_int(v, 1, 1024, &x) || (p.engine.kv.block_size = (int32_t)x, 0);
        else if (!strcmp(a, "--seed"))
            bad = gl_cli_parse_int(v, 0, INT64_MAX, &x) || (p.engine.seed = (uint64_t)x, 0);
        else if (!strcmp(a, "--tool-call-parser") || !strcmp(a, "--reasoning-parser"))
            ; // any: glint parses Muse Glimmer's own turn format from token ids (docs/SERVER.md)
        else if (!strcmp(a, "--dtype") && strcmp(v, "auto") != 0) {
            fprintf(stderr,
                    "glint serve: --dtype %s: only auto (the weights' own types; convert the "
                    "model with glint convert --type for another)\n",
                    v);
            return 2;
        } else if (!strcmp(a, "--dtype"))
            ;
        else if (!strcmp(a, "--allowed-origins"))
            p.allowed_origins = v;
        else if (!strcmp(a, "--allowed-methods"))
            p.allowed_methods = v;
        else if (!strcmp(a, "--allowed-headers"))
            p.allowed_headers = v;
        else if (!strcmp(a, "--uvicorn-log-level"))
            bad = log_level(v, &p.access_log);
        else if (!strcmp(a, "--tensor-parallel-size") || !strcmp(a, "-tp") ||
                 !strcmp(a, "--pipeline-parallel-size") || !strcmp(a, "-pp") ||
                 !strcmp(a, "--data-parallel-size") || !strcmp(a, "-dp")) {
            if (strcmp(v, "1") != 0) {
                fprintf(stderr,
                        "glint serve: %s %s: glint runs one model replica in one process on the "
                        "CPU; only 1 is supported (start more servers behind a load balancer "
                        "for data parallelism)\n",
                        a, v);
                return 2;
            }
        } else {
            fprintf(stderr, "glint serve: unknown flag '%s'\n", a);
            return usage(stderr);
        }
        if (bad) {
            fprintf(stderr, "glint serve: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!p.model_path) {
        fprintf(stderr, "glint serve: --model is required\n");
        return usage(stderr);
    }
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
