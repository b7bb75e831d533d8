// SPDX-License-Identifier: MIT
// cli: the `glint` subcommands. Each returns a process exit code (0 ok, 1 runtime error,
// 2 usage error) and prints errors to stderr; main() is the only place that exits.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int gl_cmd_run(int argc, char **argv);        // cmd_run.c: generation (greedy/sampled)
int gl_cmd_eval(int argc, char **argv);       // cmd_run.c: teacher-forced logits / layer dumps
int gl_cmd_tokenize(int argc, char **argv);   // cmd_tokenize.c
int gl_cmd_inspect(int argc, char **argv);    // cmd_inspect.c
int gl_cmd_make_model(int argc, char **argv); // cmd_make_model.c
int gl_cmd_convert(int argc, char **argv);    // cmd_convert.c: HF folder -> GGUF
int gl_cmd_bench(int argc, char **argv);      // cmd_bench.c
int gl_cmd_chat(int argc, char **argv);       // cmd_chat.c: chat render (prompt from a request)
int gl_cmd_plan(int argc, char **argv);       // cmd_plan.c: KV-cache sizing from metadata
int gl_cmd_grammar(int argc, char **argv);    // cmd_grammar.c: grammar check (MaskBench) / sample
int gl_cmd_serve(int argc, char **argv);      // cmd_serve.c: the OpenAI-compatible HTTP server
int gl_cmd_image(int argc, char **argv);      // cmd_image.c: image preprocessing (vision input)
int gl_cmd_video(int argc, char **argv);      // cmd_video.c: video preprocessing (vision input)
int gl_cmd_devices(int argc, char **argv);    // cmd_devices.c: the Vulkan devices

// Parses a whole decimal integer in [lo, hi] into *out; returns 0, or -1 (out untouched) if s is
// empty, has trailing characters, overflows or is out of range.
int gl_cli_parse_int(const char *s, long long lo, long long hi, long long *out);
// Parses a whole finite decimal number in [lo, hi] (strtod syntax) into *out; 0, or -1 as above.
int gl_cli_parse_double(const char *s, double lo, double hi, double *out);
// Parses a byte count: "5905580032", "5.5GiB", "6G", "512MB" (K/M/G/T are binary, KB/MB/GB/TB
// decimal). Returns 0, or -1 (out untouched) if s is not such a count in [1, 2^62].
int gl_cli_parse_bytes(const char *s, int64_t *out);
// --device V of serve/run/eval/bench: 0 with *device -1 for "cpu", N for "vulkan[:N]" when the
// command runs on Vulkan (vk_ok); otherwise prints "WHO: --device ..." (vulkan: not wired into
// this command yet; a bad INDEX; any other value: not a device) and returns 2, the usage code.
int gl_cli_device(const char *who, const char *v, int vk_ok, int *device);
// --device as a GL_OPT_F callback (Vulkan allowed): user is an int *.
int gl_cli_opt_device(void *user, const char *v, const char *name, const char *cmd);
// --n-gpu-layers N with no --device (device -1, the CPU): accepted and ignored with a warning in
// the log, as llama.cpp's CPU builds do (the CPU runs every layer). N -1 (the default) says
// nothing.
void gl_cli_ngl_check(const char *who, int device, int64_t ngl);
#define GL_CLI_NGL_HELP                                                                            \
    "with --device vulkan: the last N layers on the device, the rest on the CPU; n_layer + 1 "     \
    "puts the output head there too (default -1: all); on the CPU (no --device) it is ignored "    \
    "with a warning"
// --kv-cache-dtype as a GL_OPT_F callback: user is an enum gl_kv_dtype * (kv/kv.h's names).
int gl_cli_opt_kv_dtype(void *user, const char *v, const char *name, const char *cmd);
// vLLM's --gpu-memory-utilization as a GL_OPT_F callback: a fraction in (0, 1] into a double.
int gl_cli_opt_fraction(void *user, const char *v, const char *name, const char *cmd);
#define GL_CLI_KV_DTYPE_WANT "auto, f16, bf16, fp8 or f32"
// A whole file, at most max + 1 bytes (so an over-limit file reaches the caller's own limit
// check); malloc'ed, the caller frees. NULL when it cannot be opened or read.
uint8_t *gl_cli_read_file(const char *path, size_t max, size_t *len);
// gl_model_params.progress for a terminal: when stderr is one, "WHO: loading layer D/T (P%),
// S s" rewritten in place, ended by a newline at the last layer; otherwise nothing (logs stay
// line-oriented). user: a struct gl_cli_progress.
struct gl_cli_progress {
    const char *who;
    int64_t t0_us; // gl_time_us() at the start of the load
};
void gl_cli_load_progress(void *user, int done, int total);
// Writes p[0..n) to path; 0, or 1 after printing "WHO: cannot write PATH".
int gl_cli_write_file(const char *who, const char *path, const void *p, size_t n);

// ---------------------------------------------------------------------------------------------
// The one flag parser (args.c): every command describes its flags in a table of struct gl_opt
// and calls gl_cli_parse, which fills the destinations, checks ranges and required flags, and
// prints `--help` (generated from the table) or the error. The table and its destinations belong
// to the caller; string values point into argv.
enum gl_opt_kind {
    GL_OPT_BOOL,  // no value: stores .set (1 unless given) into dst (an integer of .size bytes)
    GL_OPT_STR,   // const char **dst = the value (NULL dst: accepted and ignored)
    GL_OPT_INT,   // a whole number in [lo, hi] into an integer of .size bytes
    GL_OPT_SECS,  // a whole number in [lo, hi] into a double (seconds and the like)
    GL_OPT_DBL,   // a finite number in [lo, hi] into a double
    GL_OPT_BYTES, // a byte count (gl_cli_parse_bytes) into an integer of .size bytes
    GL_OPT_FN,    // fn(user, value or NULL for a flag without one, the spelling used, the
                  // command): 0, -1 for "bad value", or 2 after printing its own message
};

struct gl_opt {
    const char *name;  // "--max-num-seqs"
    const char *alias; // other spellings, space-separated ("-n --n-predict"), or NULL
    enum gl_opt_kind kind;
    void *dst;
    size_t size;        // bytes of *dst for BOOL / INT / BYTES
    long long ilo, ihi; // INT, SECS: the range
    double lo, hi;      // DBL: the range
    long long set;      // BOOL: the value stored
    int (*fn)(void *user, const char *v, const char *name, const char *cmd); // FN
    int has_value;                                                           // FN: takes a value
    const char *meta; // value placeholder in --help ("N", "FILE")
    const char *help; // wrapped in --help; NULL: hidden
    int required;     // "NAME is required" unless given
    const char *want; // FN: what a good value is, for "bad value" messages
};

// Table entries; D is an lvalue (its address and size are taken).
#define GL_OPT_B(N, A, D, V, H)                                                                    \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_BOOL, .dst = &(D), .size = sizeof(D), .set = V,      \
        .help = H                                                                                  \
    }
#define GL_OPT_IGNORED(N, A, H)                                                                    \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_BOOL, .help = H                                      \
    }
#define GL_OPT_S(N, A, D, M, H)                                                                    \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_STR, .dst = &(D), .meta = M, .help = H               \
    }
#define GL_OPT_I(N, A, D, LO, HI, M, H)                                                            \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_INT, .dst = &(D), .size = sizeof(D), .ilo = (LO),    \
        .ihi = (HI), .meta = M, .help = H                                                          \
    }
#define GL_OPT_T(N, A, D, LO, HI, M, H)                                                            \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_SECS, .dst = &(D), .ilo = (LO), .ihi = (HI),         \
        .meta = M, .help = H                                                                       \
    }
#define GL_OPT_D(N, A, D, LO, HI, M, H)                                                            \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_DBL, .dst = &(D), .lo = LO, .hi = HI, .meta = M,     \
        .help = H                                                                                  \
    }
#define GL_OPT_Z(N, A, D, M, H)                                                                    \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_BYTES, .dst = &(D), .size = sizeof(D), .meta = M,    \
        .help = H                                                                                  \
    }
#define GL_OPT_F(N, A, FN, U, M, WANT, H)                                                          \
    {                                                                                              \
        .name = N, .alias = A, .kind = GL_OPT_FN, .fn = FN, .dst = U, .has_value = (M) != NULL,    \
        .meta = M, .want = WANT, .help = H                                                         \
    }

struct gl_cli_spec {
    const char *cmd;      // "glint serve" (messages are "glint serve: ...")
    const char *synopsis; // after "usage: CMD ", e.g. "--model F [options]"
    const char *about;    // a paragraph under the usage line, or NULL
    const struct gl_opt *opts;
    size_t n_opts;
    const char *epilog; // printed after the options, verbatim, or NULL
    // Positionals (arguments not starting with '-', and "-" itself): at most max_pos of them,
    // at least min_pos; stored in pos[0..*n_pos). max_pos 0: none taken.
    int min_pos, max_pos;
    const char **pos;
    int *n_pos;
};
#define GL_NOPTS(t)    (sizeof(t) / sizeof((t)[0]))
#define GL_CLI_STR(x)  GL_CLI_STR_(x) // a macro's value as a string literal
#define GL_CLI_STR_(x) #x

// Parses argv[1..argc) (argv[0] is the command's name). Returns -1 when the command should run,
// 0 after printing --help / -h to stdout, 2 after printing an error and the usage to stderr:
// "CMD: unknown option 'X'", "CMD: X needs a value", "CMD: bad value 'V' for X: an integer in
// LO..HI", "CMD: X is required", "CMD: unexpected argument 'A'". "--name=value" is taken too.
int gl_cli_parse(const struct gl_cli_spec *s, int argc, char **argv);
// gl_cli_parse for `glint CMD SUB [options]` with a single subcommand: argv[1] must be sub
// (else the usage, to stdout with exit 0 for --help / -h, to stderr with 2 otherwise), then the
// options after it are parsed. Returns as gl_cli_parse.
int gl_cli_parse_sub(const struct gl_cli_spec *s, const char *sub, int argc, char **argv);
// The usage text of s (what --help prints) to f.
void gl_cli_usage(const struct gl_cli_spec *s, FILE *f);
// The standard start of a command: parse, and return from the caller unless it should run.
#define GL_CLI_PARSE(spec, argc, argv)                                                             \
    do {                                                                                           \
        int gl_rc_ = gl_cli_parse(spec, argc, argv);                                               \
        if (gl_rc_ >= 0)                                                                           \
            return gl_rc_;                                                                         \
    } while (0)
