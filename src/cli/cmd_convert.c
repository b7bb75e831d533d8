// SPDX-License-Identifier: MIT
// glint convert HF_DIR --out F.gguf [--type T] [--vision-out V.gguf] ...: an HF checkpoint
// folder to a text GGUF (and an mmproj in llama.cpp's layout); src/convert/convert.h. Exit 0 on
// success, 1 on a runtime error (missing tensor, I/O), 2 on a usage error.
#include "cli.h"

#include "convert/convert.h"

#include <stdio.h>
#include <string.h>

int gl_cmd_convert(int argc, char **argv)
{
    struct gl_convert_params p = gl_convert_default_params();
    const char *dir = NULL, *out = NULL;
    int n_pos = 0;
    struct gl_opt t[] = {
        GL_OPT_S("--out", NULL, out, "F.gguf", "the text GGUF (loads in glint and llama.cpp)"),
        GL_OPT_S("--type", NULL, p.type, "T",
                 "F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M (default Q4_K_M, llama.cpp's "
                 "mix; norms are always F32)"),
        GL_OPT_S(
            "--vision-out", NULL, p.vision_out, "V.gguf",
            "also write the vision tower as an mmproj in llama.cpp's layout (llama-mtmd-cli "
            "--mmproj loads it) plus the full temporal patch kernel llama.cpp ignores, so glint "
            "serves video from the same file"),
        GL_OPT_S("--vision-type", NULL, p.vision_type, "T",
                 "F32|F16|BF16|Q8_0|Q4_K|Q5_K|Q6_K for the vision matrices (default BF16; "
                 "k-quants need widths that are multiples of 256)"),
        GL_OPT_S("--name", NULL, p.name, "S", "general.name (default: the folder's name)"),
        GL_OPT_S("--target-model-dir", NULL, p.target_dir, "DIR",
                 "a DFlash assistant folder only: the target's HF folder, whose tokenizer.model "
                 "gives the drafter GGUF its vocabulary (default: the assistant folder's own)"),
        GL_OPT_I("--threads", NULL, p.n_threads, 1, 256, "N",
                 "quantization threads (default: online CPUs, at most 8)"),
    };
    t[0].required = 1;
    struct gl_cli_spec s = {.cmd = "glint convert",
                            .synopsis = "HF_DIR --out F.gguf [options]",
                            .about = "HF_DIR: config.json, tokenizer.model, model.safetensors or "
                                     "shards + model.safetensors.index.json (BF16/F16/F32), "
                                     "optional chat_template.jinja / generation_config.json. A "
                                     "DFlash assistant folder (model_type "
                                     "muse_glimmer_assistant) becomes llama.cpp's dflash GGUF.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t),
                            .min_pos = 1,
                            .max_pos = 1,
                            .pos = &dir,
                            .n_pos = &n_pos};
    GL_CLI_PARSE(&s, argc, argv);
    struct gl_err err = {0};
    gl_status st = gl_convert(dir, out, &p, &err);
    if (st != GL_OK) {
        fprintf(stderr, "glint %s\n", err.msg[0] ? err.msg : gl_status_name(st));
        return st == GL_E_INVAL ? 2 : 1;
    }
    return 0;
}
