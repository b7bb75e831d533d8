// SPDX-License-Identifier: MIT
// harness: test and benchmark harnesses that drive the library's modules from outside, behind
// thin `glint` commands (issue 23: cli/ only parses flags and prints).
//   grammar check  -- the MaskBench harness (grammar_harness.c): compile each case file's schema,
//                     walk every instance through the matcher token by token, classify, time
//                     every compile and every mask; police the matcher's contract on every step.
//   grammar sample -- random walks under a JSON Schema's mask, for independent validators.
// Ownership: the options and the strings in them belong to the caller and are only read. Each
// call owns everything it loads (tokenizer, vocabulary index, grammars) and frees it before it
// returns. Output: the report goes to stdout (the formats of docs/GRAMMAR.md §4, unchanged from
// the command's); errors go to stderr as "glint grammar check: ..." / "glint grammar sample: ...".
// Errors: each returns a process exit code: 0 done (all contracts held), 1 an input could not be
// read or compiled where that is fatal, out of memory, or a contract breach (the report still
// printed where the run finished).
#pragma once

// glint grammar check. Defaults (the command's): every 1, limit -1 (all), ws_max -1 (the
// grammar's default, 16), verify 0 (off).
struct gl_grammar_check_opts {
    const char *tokenizer, *cases, *per_file, *digest; // tokenizer: GGUF or tiktoken ranks
    int json, ws_max, verbose, dump, cpu_time;
    long long limit, every, verify;
};
int gl_harness_grammar_check(const struct gl_grammar_check_opts *o);

// glint grammar sample. Defaults (the command's): n 10, seed 1, max_tokens 512, ws_max 0.
struct gl_grammar_sample_opts {
    const char *tokenizer, *schema;
    long long n, seed, max_tokens, ws_max;
    int verbose, closed;
};
#define GL_GRAMMAR_SAMPLE_MAX_TOKENS 100000 // the largest max_tokens
int gl_harness_grammar_sample(const struct gl_grammar_sample_opts *o);
