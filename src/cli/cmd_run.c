// SPDX-License-Identifier: MIT
// `glint run` and `glint eval`: flags -> struct gl_run_opts -> harness/harness.h (generation, the
// --batch runner and the teacher-forced logits / layer dumps live in src/harness/run_harness.c).
// Flags are a contract used by the oracle scripts: keep them stable.
#include "cli.h"

#include "harness/harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --temp / --top-p / --min-p: any strtod number (gl_sample_params_check judges the range later).
static int opt_float(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno)
        return -1;
    *(float *)user = (float)x;
    return 0;
}

static int opt_seed(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    struct gl_sample_params *sp = user;
    long long x;
    if (gl_cli_parse_int(v, 0, INT64_MAX, &x))
        return -1;
    sp->seed = (uint64_t)x;
    sp->has_seed = 1;
    return 0;
}

// --image / --video: the next media part, in placeholder order.
static int opt_media(void *user, const char *v, const char *name, const char *cmd)
{
    (void)cmd;
    struct gl_run_opts *o = user;
    if (o->n_media >= GL_MEDIA_MAX_PARTS)
        return -1;
    o->media_kind[o->n_media] = name[2] == 'v' ? GL_MEDIA_VIDEO : GL_MEDIA_IMAGE;
    o->media[o->n_media++] = v;
    return 0;
}

#define MEDIA_WANT "a file (at most " GL_CLI_STR(GL_MEDIA_MAX_PARTS) " --image / --video parts)"

static const char run_batch_help[] =
    "batch: glint run --model F --batch IN.jsonl [--out OUT.jsonl] [--threads N]\n"
    "                 [--max-num-seqs 16] [--max-num-batched-tokens 512]\n"
    "                 [--kv-cache-memory BYTES] [--kv-cache-dtype f16|bf16|fp8|f32]\n"
    "  each line a /v1/completions body with one prompt: {\"prompt\": TEXT |\n"
    "  \"prompt_token_ids\": [..], the vLLM sampling fields (n, max_tokens,\n"
    "  temperature (default 1), top_p, top_k, min_p, seed, penalties, logit_bias,\n"
    "  stop, stop_token_ids, logprobs, ...) and structured output (response_format,\n"
    "  structured_outputs, guided_*)}; unknown fields are errors, \"model\" is\n"
    "  ignored. TEXT is tokenized with specials and BOS.\n"
    "  Output, in input order: {index, text, token_ids, finish_reason,\n"
    "  stop_reason, usage} or {index, error}.\n";

int gl_cmd_run(int argc, char **argv)
{
    struct gl_run_opts o = {.device = -1,
                            .n_gpu_layers = -1,
                            .n_gen = 32,
                            .threads = 2,
                            .sp = gl_sample_default_params(),
                            .max_seqs = 16,
                            .max_tokens = 512,
                            .kv_bytes = (int64_t)1 << 30,
                            .kv_dtype = GL_KV_F16};
    o.sp.temperature = 0.0f; // this mode has always been greedy unless --temp says otherwise
    struct gl_opt t[] = {
        GL_OPT_S("--model", "-m", o.model, "F", "a GGUF or an HF checkpoint folder"),
        GL_OPT_S("--prompt", "-p", o.prompt, "P",
                 "text, tokenized with BOS per tokenizer.ggml.add_bos_token; special-token names "
                 "are parsed only with --special"),
        GL_OPT_S("--prompt-ids", NULL, o.prompt_ids, "\"1 2 3\"",
                 "token ids used verbatim (no BOS added)"),
        GL_OPT_I("-n", NULL, o.n_gen, 0, 1 << 24, "N",
                 "max tokens to generate (default 32); stops at EOS/EOT"),
        GL_OPT_F("--temp", NULL, opt_float, &o.sp.temperature, "T", "a number",
                 "0 = greedy (default); then min-p, top-k, top-p (vLLM order)"),
        GL_OPT_F("--top-p", NULL, opt_float, &o.sp.top_p, "P", "a number", "nucleus sampling"),
        GL_OPT_I("--top-k", NULL, o.sp.top_k, 0, INT32_MAX, "K", "the K most likely tokens"),
        GL_OPT_F("--min-p", NULL, opt_float, &o.sp.min_p, "M", "a number",
                 "tokens at least M x the top one's probability"),
        GL_OPT_F("--seed", NULL, opt_seed, &o.sp, "S", "an integer in 0..9223372036854775807",
                 "sampling seed"),
        GL_OPT_B("--ids", NULL, o.print_ids, 1,
                 "print the generated ids, space-separated, as the last line"),
        GL_OPT_B("--special", NULL, o.special, 1,
                 "parse specials in --prompt and print special tokens' text"),
        GL_OPT_I("--threads", "-t", o.threads, 1, 256, "N", "worker threads (default 2)"),
        GL_OPT_F("--device", NULL, gl_cli_opt_device, &o.device, "D", NULL,
                 "cpu (default) or vulkan[:INDEX] (`glint devices`)"),
        GL_OPT_I("--n-gpu-layers", "-ngl", o.n_gpu_layers, -1, 1 << 20, "N", GL_CLI_NGL_HELP),
        GL_OPT_B("--show-tensors", NULL, o.show_tensors, 1,
                 "print where every tensor lives (mmap / heap) to stderr"),
        GL_OPT_F("--image", NULL, opt_media, &o, "FILE", MEDIA_WANT,
                 "PNG or JPEG for the next <|patch|> of the prompt (repeatable; <|patch|> in "
                 "--prompt needs --special; id 200092); needs a model with a vision tower (an HF "
                 "folder or --mmproj)"),
        GL_OPT_F("--video", NULL, opt_media, &o, "FILE", MEDIA_WANT,
                 "a video for the next <|video|> (id 200091), sampled at 2 fps (at most 96 frames, "
                 "144 tokens a frame); --image and --video parts fill the placeholders in the "
                 "order given"),
        GL_OPT_S("--mmproj", NULL, o.mmproj, "F",
                 "mmproj (llama.cpp's layout, or glint convert --vision-out's) for a GGUF --model; "
                 "one with only the summed patch kernel serves images"),
        GL_OPT_S("--batch", NULL, o.batch, "IN.jsonl", "run a JSONL file of requests (below)"),
        GL_OPT_S("--out", NULL, o.out, "OUT.jsonl", "--batch: results (default stdout)"),
        GL_OPT_I("--max-num-seqs", NULL, o.max_seqs, 1, 4096, "N",
                 "--batch: sequences per step (default 16)"),
        GL_OPT_I("--max-num-batched-tokens", NULL, o.max_tokens, 1, 65536, "N",
                 "--batch: tokens per step (default 512)"),
        GL_OPT_I("--kv-cache-memory", "--kv-cache-memory-bytes", o.kv_bytes, 1, INT64_MAX, "BYTES",
                 "--batch: KV pool size in bytes (default 1073741824)"),
        GL_OPT_F("--kv-cache-dtype", NULL, gl_cli_opt_kv_dtype, &o.kv_dtype, "T",
                 GL_CLI_KV_DTYPE_WANT, "--batch: f16 (default), bf16, fp8 or f32"),
    };
    struct gl_cli_spec s = {.cmd = "glint run",
                            .synopsis = "--model F (--prompt P | --prompt-ids \"1 2 3\") [-n N] "
                                        "[options]",
                            .about = "Generates text from a prompt (greedy or sampled), streaming "
                                     "it to stdout; stops at EOS/EOT or after -n tokens.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t),
                            .epilog = run_batch_help};
    GL_CLI_PARSE(&s, argc, argv);
    gl_cli_ngl_check("glint run", o.device, o.n_gpu_layers);
    if (o.batch && o.n_media > 0) {
        fprintf(stderr,
                "glint run: --image / --video work with --prompt / --prompt-ids, not --batch\n");
        gl_cli_usage(&s, stderr);
        return 2;
    }
    if (!o.model || (!o.prompt + !o.prompt_ids + !o.batch != 2)) {
        fprintf(stderr,
                "glint run: need --model and exactly one of --prompt / --prompt-ids / --batch\n");
        gl_cli_usage(&s, stderr);
        return 2;
    }
    struct gl_cli_progress pr = {.who = "glint", .t0_us = gl_time_us()};
    o.progress = gl_cli_load_progress;
    o.progress_user = &pr;
    return gl_harness_run(&o);
}

int gl_cmd_eval(int argc, char **argv)
{
    struct gl_run_opts o = {.device = -1, .n_gpu_layers = -1, .threads = 2};
    struct gl_opt t[] = {
        GL_OPT_S("--model", "-m", o.model, "F", "a GGUF or an HF checkpoint folder"),
        GL_OPT_S("--prompt-ids", NULL, o.prompt_ids, "\"1 2 3\"", "the token ids"),
        GL_OPT_S("--logits", NULL, o.logits, "OUT.f32",
                 "write n_tok x n_vocab float32 logits (row-major) to OUT (default: print each "
                 "position's argmax id)"),
        GL_OPT_S("--dump-layers", NULL, o.dump_dir, "DIR",
                 "write DIR/embed.f32, DIR/layer_XX.f32 (n_tok x n_embd) and DIR/logits.f32"),
        GL_OPT_I("--threads", "-t", o.threads, 1, 256, "N", "worker threads (default 2)"),
        GL_OPT_I("--batch", NULL, o.eval_batch, 1, 65536, "N",
                 "process the prompt in chunks of N tokens (default: all at once)"),
        GL_OPT_F("--device", NULL, gl_cli_opt_device, &o.device, "D", NULL,
                 "cpu (default) or vulkan[:INDEX] (`glint devices`)"),
        GL_OPT_I("--n-gpu-layers", "-ngl", o.n_gpu_layers, -1, 1 << 20, "N", GL_CLI_NGL_HELP),
        GL_OPT_F("--image", NULL, opt_media, &o, "F", MEDIA_WANT,
                 "media for the prompt's <|patch|> id (as glint run); positions count the "
                 "expanded prompt"),
        GL_OPT_F("--video", NULL, opt_media, &o, "F", MEDIA_WANT,
                 "media for the prompt's <|video|> id (as glint run)"),
        GL_OPT_S("--mmproj", NULL, o.mmproj, "F",
                 "mmproj (llama.cpp's layout, or glint convert --vision-out's) for a GGUF --model; "
                 "one with only the summed patch kernel serves images"),
    };
    t[0].required = t[1].required = 1;
    struct gl_cli_spec s = {.cmd = "glint eval",
                            .synopsis = "--model F --prompt-ids \"1 2 3\" [options]",
                            .about = "Teacher-forced logits for given token ids (all positions) "
                                     "and per-layer hidden-state dumps, for the reference checks.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t)};
    GL_CLI_PARSE(&s, argc, argv);
    gl_cli_ngl_check("glint eval", o.device, o.n_gpu_layers);
    struct gl_cli_progress pr = {.who = "glint", .t0_us = gl_time_us()};
    o.progress = gl_cli_load_progress;
    o.progress_user = &pr;
    return gl_harness_eval(&o);
}
