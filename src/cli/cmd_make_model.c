// SPDX-License-Identifier: MIT
// glint make-model: writes a random-weight Muse Glimmer GGUF (src/model/make_model.h). Exit 0 on
// success, 1 on a runtime error (missing vocab, I/O), 2 on a usage error.
#include "cli.h"

#include "model/make_model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glint make-model --preset tiny|30b-shape --out FILE|DIR [options]\n"
            "  --format F           gguf (default: one file) or safetensors (an HF folder:\n"
            "                       config.json, generation_config.json, tokenizer.model,\n"
            "                       model.safetensors or shards + index, plus random vision\n"
            "                       tower tensors; types F32|F16|BF16, default tiny F32,\n"
            "                       30b-shape BF16)\n"
            "  --shard-mb N         safetensors: MiB of tensor data per shard (default 4096)\n"
            "  --seed N             random seed (default 1)\n"
            "  --layers N           block count (default: tiny 4, 30b-shape 52)\n"
            "  --type T             F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M\n"
            "                       (default: tiny F32, 30b-shape Q4_K_M; norms are always F32)\n"
            "  --header-only        metadata and tensor table only (offsets as if data followed)\n"
            "  --vocab-only         metadata only, no tensors (llama.cpp loads it with vocabOnly)\n"
            "  --window N           attention.sliding_window (default: tiny 8, 30b-shape 2048)\n"
            "  --pattern bool|period  sliding_window_pattern as a per-layer bool array (default)\n"
            "                       or as the scalar period 4\n"
            "  --softcap X          final_logit_softcapping (default 20)\n"
            "  --no-softcap         write final_logit_softcapping = 0 (the 'disabled' form)\n"
            "  --omit-softcap       leave the key out (llama.cpp then assumes 30)\n"
            "  --vocab PATH         llama4 tiktoken ranks file (default $GLINT_VOCAB, then\n"
            "                       ../shared/data/tokenizer/llama4-tokenizer.model)\n"
            "  --threads N          quantization threads (default: online CPUs)\n");
}

static int parse_i32(const char *flag, const char *s, int32_t lo, int32_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > INT_MAX) {
        fprintf(stderr, "glint make-model: %s wants an integer >= %d, got '%s'\n", flag, lo, s);
        return 0;
    }
    *out = (int32_t)v;
    return 1;
}

int gl_cmd_make_model(int argc, char **argv)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    const char *out = NULL, *preset = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--header-only")) {
            p.header_only = 1;
            continue;
        }
        if (!strcmp(a, "--vocab-only")) {
            p.vocab_only = 1;
            continue;
        }
        if (!strcmp(a, "--no-softcap")) {
            p.softcap_mode = GL_MAKE_MODEL_SOFTCAP_VALUE;
            p.softcap = 0.0f;
            continue;
        }
        if (!strcmp(a, "--omit-softcap")) {
            p.softcap_mode = GL_MAKE_MODEL_SOFTCAP_OMIT;
            continue;
        }
        if (i + 1 >= argc || strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "glint make-model: %s '%s'\n",
                    strncmp(a, "--", 2) ? "unexpected argument" : "missing value for", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(a, "--preset")) {
            preset = v;
        } else if (!strcmp(a, "--out")) {
            out = v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            p.seed = strtoull(v, &end, 0);
            ok = !errno && end != v && !*end && *v != '-';
            if (!ok)
                fprintf(stderr, "glint make-model: --seed wants an unsigned integer, got '%s'\n",
                        v);
        } else if (!strcmp(a, "--layers")) {
            ok = parse_i32(a, v, 1, &p.n_layers);
        } else if (!strcmp(a, "--window")) {
            ok = parse_i32(a, v, 1, &p.window);
        } else if (!strcmp(a, "--threads")) {
            ok = parse_i32(a, v, 1, &p.n_threads);
        } else if (!strcmp(a, "--format")) {
            ok = !strcmp(v, "gguf") || !strcmp(v, "safetensors");
            p.format = !strcmp(v, "safetensors") ? GL_MAKE_MODEL_SAFETENSORS : GL_MAKE_MODEL_GGUF;
            if (!ok)
                fprintf(stderr, "glint make-model: --format wants gguf or safetensors, got '%s'\n",
                        v);
        } else if (!strcmp(a, "--shard-mb")) {
            int32_t mb = 0;
            ok = parse_i32(a, v, 1, &mb);
            p.shard_bytes = (uint64_t)mb << 20;
        } else if (!strcmp(a, "--type")) {
            p.type = v;
        } else if (!strcmp(a, "--vocab")) {
            p.vocab_path = v;
        } else if (!strcmp(a, "--pattern")) {
            ok = !strcmp(v, "bool") || !strcmp(v, "period");
            p.pattern_period = !strcmp(v, "period");
            if (!ok)
                fprintf(stderr, "glint make-model: --pattern wants bool or period, got '%s'\n", v);
        } else if (!strcmp(a, "--softcap")) {
            char *end;
            p.softcap = strtof(v, &end);
            p.softcap_mode = GL_MAKE_MODEL_SOFTCAP_VALUE;
            ok = end != v && !*end;
            if (!ok)
                fprintf(stderr, "glint make-model: --softcap wants a number, got '%s'\n", v);
        } else {
            fprintf(stderr, "glint make-model: unknown option '%s'\n", a);
            ok = 0;
        }
        if (!ok) {
            usage(stderr);
            return 2;
        }
    }
    if (!preset || !out) {
        fprintf(stderr, "glint make-model: --preset and --out are required\n");
        usage(stderr);
        return 2;
    }
    if (!strcmp(preset, "tiny")) {
        p.preset = GL_MAKE_MODEL_TINY;
    } else if (!strcmp(preset, "30b-shape")) {
        p.preset = GL_MAKE_MODEL_30B_SHAPE;
    } else {
        fprintf(stderr, "glint make-model: unknown preset '%s' (tiny|30b-shape)\n", preset);
        return 2;
    }
    struct gl_err err = {0};
    struct gl_make_model_hparams hp;
    gl_status st = gl_make_model_hparams(&p, &hp, &err);
    if (st != GL_OK) {
        fprintf(stderr, "glint %s\n", err.msg);
        return 2;
    }
    st = gl_make_model_write(&p, out, &err);
    if (st != GL_OK) {
        fprintf(stderr, "glint %s\n", err.msg[0] ? err.msg : gl_status_name(st));
        return 1;
    }
    return 0;
}
