// SPDX-License-Identifier: MIT
// `glint grammar check|sample`: flags -> the harnesses of harness/harness.h (the MaskBench check
// and the random-walk sampler live in src/harness/grammar_harness.c).
#include "cli.h"

#include "harness/harness.h"

#include <stdio.h>
#include <string.h>

static int cmd_check(int argc, char **argv)
{
    struct gl_grammar_check_opts o = {.every = 1, .limit = -1, .ws_max = -1};
    struct gl_opt t[] = {
        GL_OPT_S("--tokenizer", NULL, o.tokenizer, "T", "a GGUF or a tiktoken .model file"),
        GL_OPT_S("--cases", NULL, o.cases, "DIR",
                 "MaskBench files {\"schema\":..., \"tests\":[{\"data\",\"valid\"}]}"),
        GL_OPT_B("--json", NULL, o.json, 1, "print one JSON object with the totals and timings"),
        GL_OPT_I("--limit", NULL, o.limit, 1, 1LL << 30, "N", "at most N files (after --every)"),
        GL_OPT_I("--every", NULL, o.every, 1, 1LL << 30, "K",
                 "only every K-th file of the sorted list (0, K, 2K, ...)"),
        GL_OPT_I("--ws", NULL, o.ws_max, 0, 1LL << 30, "N",
                 "whitespace bound of the compiled grammars (default 16; 0 compact)"),
        GL_OPT_S("--per-file", NULL, o.per_file, "F",
                 "write one JSON line per case file to F (compiled, keyword, counts)"),
        GL_OPT_B("--cpu-time", NULL, o.cpu_time, 1,
                 "time compiles and masks in thread CPU time, not wall time"),
        GL_OPT_I("--verify-every", NULL, o.verify, 1, 1LL << 30, "K",
                 "also compare every K-th mask with the token-by-token definition (accept + "
                 "rollback of each of the vocabulary's tokens; slow)"),
        GL_OPT_S("--mask-digest", NULL, o.digest, "F",
                 "write a hash of every mask to F (one a line, '# FILE' before each case file): "
                 "identical files mean identical masks"),
        GL_OPT_B("--verbose", NULL, o.verbose, 1, "name each failing file on stderr"),
        GL_OPT_B("--dump-instances", NULL, o.dump, 1,
                 "only print each instance as serialized for tokenizing, one a line (no tokenizer "
                 "or matcher needed; --tokenizer optional)"),
    };
    t[1].required = 1;
    struct gl_cli_spec s = {.cmd = "glint grammar check",
                            .synopsis = "--tokenizer T --cases DIR [options]",
                            .about = "The MaskBench harness: compile each case file's schema, walk "
                                     "every instance through the matcher token by token, classify "
                                     "it, and time every compile and every mask.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t)};
    GL_CLI_PARSE(&s, argc, argv);
    if (!o.tokenizer && !o.dump) {
        fprintf(stderr, "glint grammar check: --tokenizer is required (unless --dump-instances)\n");
        gl_cli_usage(&s, stderr);
        return 2;
    }
    return gl_harness_grammar_check(&o);
}

static int sample_compact(void *user, const char *v, const char *name, const char *cmd)
{
    (void)v;
    (void)name;
    (void)cmd;
    *(long long *)user = 0;
    return 0;
}

static int cmd_sample(int argc, char **argv)
{
    struct gl_grammar_sample_opts o = {.n = 10, .seed = 1, .max_tokens = 512};
    struct gl_opt t[] = {
        GL_OPT_S("--tokenizer", NULL, o.tokenizer, "T", "a GGUF or a tiktoken .model file"),
        GL_OPT_S("--schema", NULL, o.schema, "FILE", "the JSON Schema"),
        GL_OPT_I("--n", NULL, o.n, 0, 1LL << 62, "N", "walks (default 10)"),
        GL_OPT_I("--seed", NULL, o.seed, 0, 1LL << 62, "S", "random seed (default 1)"),
        GL_OPT_I("--max-tokens", NULL, o.max_tokens, 1, GL_GRAMMAR_SAMPLE_MAX_TOKENS, "M",
                 "token budget per walk (default 512)"),
        GL_OPT_I("--ws", NULL, o.ws_max, 0, 4096, "N",
                 "whitespace runs of at most N bytes (default 0 = compact)"),
        GL_OPT_F("--compact", NULL, sample_compact, &o.ws_max, NULL, NULL,
                 "no whitespace at all (the default; same as --ws 0)"),
        GL_OPT_B("--closed-objects", NULL, o.closed, 1,
                 "objects without additionalProperties take no other key (the server's default, "
                 "vLLM's; default here: JSON Schema)"),
        GL_OPT_B("--verbose", NULL, o.verbose, 1, "print unfinished walks' text to stderr"),
    };
    t[0].required = t[1].required = 1;
    struct gl_cli_spec s = {
        .cmd = "glint grammar sample",
        .synopsis = "--tokenizer T --schema FILE [options]",
        .about = "Random walks under the schema's mask. Prints each finished document on its own "
                 "line (with --ws N > 0 as a JSON string literal of the document, so that newlines "
                 "survive), then {\"finished\": K, \"unfinished\": U}. Exit 1 if the matcher "
                 "broke its contract.",
        .opts = t,
        .n_opts = GL_NOPTS(t)};
    GL_CLI_PARSE(&s, argc, argv);
    return gl_harness_grammar_sample(&o);
}

int gl_cmd_grammar(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "check"))
        return cmd_check(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sample"))
        return cmd_sample(argc - 1, argv + 1);
    struct gl_cli_spec s = {.cmd = "glint grammar",
                            .synopsis = "check|sample [options]  (--help after either for details)",
                            .epilog = "  check   MaskBench harness: classify every instance, time "
                                      "compiles and masks\n"
                                      "  sample  random documents drawn under a JSON Schema's "
                                      "mask\n"};
    int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    gl_cli_usage(&s, help ? stdout : stderr);
    return help ? 0 : 2;
}
