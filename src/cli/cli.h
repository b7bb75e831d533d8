// SPDX-License-Identifier: MIT
// cli: the `glint` subcommands. Each returns a process exit code (0 ok, 1 runtime error,
// 2 usage error) and prints errors to stderr; main() is the only place that exits.
#pragma once

#include <stddef.h>
#include <stdint.h>

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
