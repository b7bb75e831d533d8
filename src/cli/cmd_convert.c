// SPDX-License-Identifier: MIT
// glint convert HF_DIR --out F.gguf [--type T] [--vision-out V.gguf] ...: an HF checkpoint
// folder to a text GGUF (and an mmproj in llama.cpp's layout); src/convert/convert.h. Exit 0 on
// success, 1 on a runtime error (missing tensor, I/O), 2 on a usage error.
#include "cli.h"

#include "convert/convert.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f, "usage: glint convert HF_DIR --out F.gguf [options]\n"
           "  HF_DIR               config.json, tokenizer.model, model.safetensors or shards +\n"
           "                       model.safetensors.index.json (BF16/F16/F32), optional\n"
           "                       chat_template.jinja / generation_config.json\n"
           "  --out F.gguf         the text GGUF (loads in glint and llama.cpp)\n"
           "  --type T             F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M\n"
           "                       (default Q4_K_M, llama.cpp's mix; norms are always F32)\n"
           "  --vision-out V.gguf  also write the vision tower as an mmproj in llama.cpp's\n"
           "                       layout (llama-mtmd-cli --mmproj loads it) plus the full\n"
           "                       temporal patch kernel llama.cpp ignores, so glint serves\n"
           "                       video from the same file\n"
           "  --vision-type T      F32|F16|BF16|Q8_0|Q4_K|Q5_K|Q6_K for the vision matrices\n"
           "                       (default BF16; k-quants need widths that are multiples of 256)\n"
           "  --name S             general.name (default: the folder's name)\n"
           "  --threads N          quantization threads (default: online CPUs, at most 8)\n");
}

int gl_cmd_convert(int argc, char **argv)
{
    struct gl_convert_params p = gl_convert_default_params();
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (dir) {
                fprintf(stderr, "glint convert: unexpected argument '%s'\n", a);
                usage(stderr);
                return 2;
            }
            dir = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "glint convert: missing value for %s\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) {
            out = v;
        } else if (!strcmp(a, "--type")) {
            p.type = v;
        } else if (!strcmp(a, "--vision-out")) {
            p.vision_out = v;
        } else if (!strcmp(a, "--vision-type")) {
            p.vision_type = v;
        } else if (!strcmp(a, "--name")) {
            p.name = v;
        } else if (!strcmp(a, "--threads")) {
            long long n;
            if (gl_cli_parse_int(v, 1, 256, &n) != 0) {
                fprintf(stderr, "glint convert: --threads wants an integer in 1..256, got '%s'\n",
                        v);
                return 2;
            }
            p.n_threads = (int)n;
        } else {
            fprintf(stderr, "glint convert: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!dir || !out) {
        fprintf(stderr, "glint convert: HF_DIR and --out are required\n");
        usage(stderr);
        return 2;
    }
    struct gl_err err = {0};
    gl_status st = gl_convert(dir, out, &p, &err);
    if (st != GL_OK) {
        fprintf(stderr, "glint %s\n", err.msg[0] ? err.msg : gl_status_name(st));
        return st == GL_E_INVAL ? 2 : 1;
    }
    return 0;
}
