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

static int opt_seed(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0); // hex too
    if (errno || end == v || *end || *v == '-')
        return -1;
    *(uint64_t *)user = x;
    return 0;
}

static int opt_format(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    struct gl_make_model_params *p = user;
    if (strcmp(v, "gguf") && strcmp(v, "safetensors"))
        return -1;
    p->format = !strcmp(v, "safetensors") ? GL_MAKE_MODEL_SAFETENSORS : GL_MAKE_MODEL_GGUF;
    return 0;
}

static int opt_shard_mb(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    long long mb;
    if (gl_cli_parse_int(v, 1, INT_MAX, &mb))
        return -1;
    *(uint64_t *)user = (uint64_t)mb << 20;
    return 0;
}

static int opt_pattern(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    if (strcmp(v, "bool") && strcmp(v, "period"))
        return -1;
    ((struct gl_make_model_params *)user)->pattern_period = !strcmp(v, "period");
    return 0;
}

// --softcap X, --no-softcap (X = 0, the 'disabled' form), --omit-softcap (no key).
static int opt_softcap(void *user, const char *v, const char *name, const char *cmd)
{
    (void)cmd;
    struct gl_make_model_params *p = user;
    if (!strcmp(name, "--omit-softcap")) {
        p->softcap_mode = GL_MAKE_MODEL_SOFTCAP_OMIT;
        return 0;
    }
    p->softcap_mode = GL_MAKE_MODEL_SOFTCAP_VALUE;
    if (!v) {
        p->softcap = 0.0f;
        return 0;
    }
    char *end;
    p->softcap = strtof(v, &end);
    return end != v && !*end ? 0 : -1;
}

int gl_cmd_make_model(int argc, char **argv)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    const char *out = NULL, *preset = NULL;
    struct gl_opt t[] = {
        GL_OPT_S("--preset", NULL, preset, "P",
                 "tiny|30b-shape (targets) or dflash-tiny|dflash-30b-shape (DFlash drafters for "
                 "them: llama.cpp's dflash GGUF, or with --format safetensors the HF assistant "
                 "folder)"),
        GL_OPT_S("--out", NULL, out, "FILE|DIR", "the GGUF file, or the HF folder"),
        GL_OPT_F("--format", NULL, opt_format, &p, "F", "gguf or safetensors",
                 "gguf (default: one file) or safetensors (an HF folder: config.json, "
                 "generation_config.json, tokenizer.model, model.safetensors or shards + index, "
                 "plus random vision tower tensors; types F32|F16|BF16, default tiny F32, "
                 "30b-shape BF16; a drafter: config.json, model.safetensors, tokenizer.model, "
                 "chat_template.jinja)"),
        GL_OPT_F("--shard-mb", NULL, opt_shard_mb, &p.shard_bytes, "N", "an integer >= 1",
                 "safetensors: MiB of tensor data per shard (default 4096)"),
        GL_OPT_F("--seed", NULL, opt_seed, &p.seed, "N", "an unsigned integer",
                 "random seed (default 1)"),
        GL_OPT_I("--layers", NULL, p.n_layers, 1, INT_MAX, "N",
                 "block count (default: tiny 4, 30b-shape 52, dflash 5)"),
        GL_OPT_S("--type", NULL, p.type, "T",
                 "F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M (default: tiny F32, "
                 "30b-shape Q4_K_M; norms are always F32)"),
        GL_OPT_B("--header-only", NULL, p.header_only, 1,
                 "metadata and tensor table only (offsets as if data followed)"),
        GL_OPT_B("--vocab-only", NULL, p.vocab_only, 1,
                 "metadata only, no tensors (llama.cpp loads it with vocabOnly)"),
        GL_OPT_I("--window", NULL, p.window, 1, INT_MAX, "N",
                 "attention.sliding_window (default: tiny 8, 30b-shape 2048; dflash the same)"),
        GL_OPT_F("--pattern", NULL, opt_pattern, &p, "bool|period", "bool or period",
                 "sliding_window_pattern as a per-layer bool array (default) or as the scalar "
                 "period 4"),
        GL_OPT_F("--softcap", NULL, opt_softcap, &p, "X", "a number",
                 "final_logit_softcapping (default 20)"),
        GL_OPT_F("--no-softcap", NULL, opt_softcap, &p, NULL, NULL,
                 "write final_logit_softcapping = 0 (the 'disabled' form)"),
        GL_OPT_F("--omit-softcap", NULL, opt_softcap, &p, NULL, NULL,
                 "leave the key out (llama.cpp then assumes 30)"),
        GL_OPT_S("--vocab", NULL, p.vocab_path, "PATH",
                 "llama4 tiktoken ranks file (default $GLINT_VOCAB, then "
                 "../shared/data/tokenizer/llama4-tokenizer.model)"),
        GL_OPT_I("--threads", NULL, p.n_threads, 1, INT_MAX, "N",
                 "quantization threads (default: online CPUs)"),
    };
    t[0].required = t[1].required = 1;
    struct gl_cli_spec s = {.cmd = "glint make-model",
                            .synopsis =
                                "--preset tiny|30b-shape|dflash-tiny|dflash-30b-shape --out "
                                "FILE|DIR [options]",
                            .about = "Writes a random-weight Muse Glimmer model.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t)};
    GL_CLI_PARSE(&s, argc, argv);
    if (!strcmp(preset, "tiny")) {
        p.preset = GL_MAKE_MODEL_TINY;
    } else if (!strcmp(preset, "30b-shape")) {
        p.preset = GL_MAKE_MODEL_30B_SHAPE;
    } else if (!strcmp(preset, "dflash-tiny")) {
        p.preset = GL_MAKE_MODEL_DFLASH_TINY;
    } else if (!strcmp(preset, "dflash-30b-shape")) {
        p.preset = GL_MAKE_MODEL_DFLASH_30B_SHAPE;
    } else {
        fprintf(stderr,
                "glint make-model: unknown preset '%s' (tiny|30b-shape|dflash-tiny|"
                "dflash-30b-shape)\n",
                preset);
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
