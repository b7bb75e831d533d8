// SPDX-License-Identifier: MIT
// glint: one binary, many subcommands (git style).
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", gl_cmd_run, "generate text from a prompt (greedy or sampled)"},
    {"eval", gl_cmd_eval, "teacher-forced logits for token ids (reference checks)"},
    {"tokenize", gl_cmd_tokenize, "print the token ids of a text"},
    {"inspect", gl_cmd_inspect, "print a GGUF's metadata and tensors"},
    {"make-model", gl_cmd_make_model, "write a random-weight Muse Glimmer GGUF"},
    {"convert", gl_cmd_convert, "HF checkpoint folder -> text GGUF (+ temporal vision GGUF)"},
    {"bench", gl_cmd_bench, "prompt-processing and generation speed (pp/tg tokens/s)"},
    {"chat", gl_cmd_chat, "chat render: print the prompt for an OpenAI chat request"},
    {"plan", gl_cmd_plan, "KV-cache sizing (capacity, concurrency) from a model's metadata"},
    {"grammar", gl_cmd_grammar, "structured output: MaskBench check, random walks under a schema"},
    {"serve", gl_cmd_serve, "the vLLM-compatible OpenAI server (HTTP)"},
    {"image", gl_cmd_image, "image preprocess: decode, grid, resize for the vision encoder"},
    {"video", gl_cmd_video, "video preprocess: decode, sample frames, resize for the encoder"},
    {"devices", gl_cmd_devices, "list the Vulkan devices (name, driver, memory, features)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: glint <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'glint <command> --help' shows a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "glint: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
