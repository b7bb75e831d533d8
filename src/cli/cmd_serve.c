// SPDX-License-Identifier: MIT
// `glint serve`: flags (spelled as vLLM's) -> struct gl_server_params -> gl_server_run.
#include "cli.h"
#include "image/image.h"
#include "kv/kv.h"
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *f)
{
    fprintf(f,
            "usage: glint serve --model F [options]   (vLLM's flag names)\n"
            "  --host H                    IPv4 address to bind (default 127.0.0.1)\n"
            "  --port P                    default 8000 (0: any free port, printed at start)\n"
            "  --api-key K                 required Bearer key on /v1/* (or VLLM_API_KEY)\n"
            "  --ssl-certfile F            PEM certificate chain: serve HTTPS (needs\n"
            "                              --ssl-keyfile)\n"
            "  --ssl-keyfile F             PEM private key of the certificate\n"
            "  --ssl-keyfile-password P    passphrase of an encrypted --ssl-keyfile\n"
            "  --served-model-name N       the model id clients send (default: the path)\n"
            "  --max-model-len N           prompt + output tokens (default: the model's)\n"
            "  --max-num-seqs N            sequences per step (default 16)\n"
            "  --max-num-batched-tokens N  tokens per step (default 512)\n"
            "  --kv-cache-memory BYTES     KV pool size, e.g. 2GiB (default 1GiB)\n"
            "  --kv-cache-dtype T          f16|bf16|fp8|f32 (default f16)\n"
            "  --enable-prefix-caching / --no-enable-prefix-caching   (default on)\n"
            "  --generation-config G       auto|vllm|FOLDER with generation_config.json\n"
            "  --threads N                 kernel threads (default 2)\n"
            "  --max-waiting N             queued sequences before 503 (default 256)\n"
            "  --shutdown-timeout S        drain time after SIGTERM/SIGINT (default 30)\n"
            "  --deep-health-interval S    deep probe period in seconds (default 600; 0: off)\n"
            "  --max-body-bytes BYTES      request body limit (default 32MiB; over it: 413)\n"
            "  --limit-concurrency N       open connections (default 1024); over it a new one\n"
            "                              is answered 503 and closed\n"
            "  --limit-concurrency-per-ip N   open connections per client IPv4 address\n"
            "                              (default 0: no limit; over it: 429 and closed;\n"
            "                              16 over it: closed at once)\n"
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
            "  --mm-processor-cache-gb N   vision encoder output cache, GiB (default 4; 0: off)\n"
            "  --mmproj F                  vision GGUF from glint convert --vision-out, for a\n"
            "                              GGUF --model (an HF folder brings its own tower)\n"
            "  --max-image-tokens N        merged tokens per image (default 4096; a request's\n"
            "                              mm_processor_kwargs.max_image_tokens overrides)\n"
            "  --no-framing-grammar        unconstrained chat requests run without the\n"
            "                              whole-turn grammar\n"
            "  --strict-request-fields     a body field glint does not implement is a 400\n"
            "                              (default: ignored, logged, X-Glint-Ignored-Fields)\n");
    return f == stdout ? 0 : 2;
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
        if (!strcmp(a, "--no-framing-grammar")) {
            p.framing = 0;
            continue;
        }
        if (!strcmp(a, "--strict-request-fields")) {
            p.strict_request_fields = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "glint serve: unknown flag or missing value: '%s'\n", a);
            return usage(stderr);
        }
        const char *v = argv[++i];
        long long x = 0;
        int64_t bytes = 0;
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
        else if (!strcmp(a, "--max-model-len"))
            bad = gl_cli_parse_int(v, 2, INT32_MAX, &x) || (p.engine.max_model_len = (int32_t)x, 0);
        else if (!strcmp(a, "--max-num-seqs"))
            bad = gl_cli_parse_int(v, 1, 4096, &x) || (p.engine.max_num_seqs = (int32_t)x, 0);
        else if (!strcmp(a, "--max-num-batched-tokens"))
            bad = gl_cli_parse_int(v, 1, 65536, &x) ||
                  (p.engine.max_num_batched_tokens = (int32_t)x, 0);
        else if (!strcmp(a, "--threads"))
            bad = gl_cli_parse_int(v, 1, 1024, &x) || (p.engine.n_threads = (int32_t)x, 0);
        else if (!strcmp(a, "--max-waiting"))
            bad = gl_cli_parse_int(v, 1, 1 << 20, &x) || (p.engine.max_waiting = (int32_t)x, 0);
        else if (!strcmp(a, "--shutdown-timeout"))
            bad = gl_cli_parse_int(v, 0, 86400, &x) || (p.shutdown_timeout_s = (double)x, 0);
        else if (!strcmp(a, "--deep-health-interval"))
            bad =
                gl_cli_parse_int(v, 0, 86400 * 7, &x) || (p.deep_health_interval_s = (double)x, 0);
        else if (!strcmp(a, "--kv-cache-memory"))
            bad = gl_cli_parse_bytes(v, &bytes) || (p.engine.kv.budget_bytes = bytes, 0);
        else if (!strcmp(a, "--max-body-bytes"))
            bad = gl_cli_parse_bytes(v, &bytes) || (p.max_body_bytes = (size_t)bytes, 0);
        else if (!strcmp(a, "--limit-concurrency"))
            bad = gl_cli_parse_int(v, 1, 65536, &x) || (p.max_connections = (int)x, 0);
        else if (!strcmp(a, "--limit-concurrency-per-ip"))
            bad = gl_cli_parse_int(v, 0, 65536, &x) || (p.max_connections_per_ip = (int)x, 0);
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
            bad = gl_cli_parse_int(v, 0, 1 << 20, &x) || (p.mm_cache_bytes = (size_t)x << 30, 0);
        else if (!strcmp(a, "--media-fetch-timeout"))
            bad = gl_cli_parse_int(v, 1, 3600, &x) || (p.media_fetch_timeout_s = (double)x, 0);
        else if (!strcmp(a, "--max-image-tokens"))
            bad = gl_cli_parse_int(v, 1, GL_IMAGE_MAX_TOKENS_LIMIT, &x) ||
                  (p.max_image_tokens = (int32_t)x, 0);
        else if (!strcmp(a, "--max-media-bytes"))
            bad = gl_cli_parse_bytes(v, &bytes) || bytes <= 0 ||
                  (p.max_media_bytes = (size_t)bytes, 0);
        else if (!strcmp(a, "--kv-cache-dtype"))
            bad = gl_kv_dtype_parse(v, &p.engine.kv.dtype, NULL) != GL_OK;
        else {
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
    if (gl_server_run(&p, &err) != GL_OK) {
        fprintf(stderr, "glint serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
