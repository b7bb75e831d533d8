// SPDX-License-Identifier: MIT
// MaskBench walker for llama.cpp's grammar sampler: the counterpart of `glint grammar check`
// (src/harness/grammar_harness.c), written against llama.h's C API only. bench/grammar_vs_llama.sh
// prepares its input (bench/llama_grammar/prep.py: llama.cpp's json_schema_to_grammar output
// per schema, and per instance the token ids glint's checker walks) and builds it with gcc
// against the llama.cpp build's libllama.
//
// usage: llama_grammar --vocab F.gguf --cases CASES [--skip K] [--mask-every M] [--budget-s S]
//                      [--hard-s S] [--times FILE] [--wall]
//
// CASES, one record per schema, in glint's order:
//   S <name> <gbnf path or -> <n_tests> <reason or ->       (- : the conversion failed; reason)
//   then per test:  X <instance text, hex>   T <valid 0|1> <n> <id> ...
// For each schema: llama_sampler_init_grammar(vocab, gbnf, "root") (NULL = not compiled), then
// for each instance, at each position (the instance's tokens, then the end):
//   * the decision: llama_sampler_apply on an array holding only the instance's next token (at the
//     end: EOS and EOT); it is allowed iff its logit stays finite. llama.cpp judges each candidate
//     on its own (llama_grammar_reject_candidates), so this is the full array's verdict for that
//     token; it is compared with the full mask wherever one is computed ("full_vs_single", 0).
//     An allowed token is then llama_sampler_accept'ed, a refused one ends the walk.
//   * the timed mask: llama_sampler_apply on a llama_token_data_array holding all n_vocab
//     candidates (thread CPU time by default, --wall for CLOCK_MONOTONIC), at a fixed
//     pseudo-random 1/M of the positions (--mask-every M, default 1 = every position), until the
//     schema's mask time passes --budget-s (default 10 s; "budget_hit"). At 30-90 ms a mask, every
//     position of a 900-schema subset would take hours; the sample estimates the same per-position
//     distribution glint's checker measures on every position.
// Classification as glint's: a valid instance must be fully accepted and then allow EOS, an invalid
// one must be refused somewhere or not allowed to end; a schema passes when it compiled and every
// instance was classified right. Masks that allow a control token other than EOG are counted
// ("ctrl_leak_masks": llama.cpp matches specials by their text), and each instance is also run
// through llama_tokenize to count where llama.cpp's tokenizer would give other ids
// ("tok_mismatch").
//
// Bounds: a schema whose walk does not finish within --hard-s (default 60 s wall; llama.cpp's
// stacks can explode) is cut by SIGALRM, and an abort or crash (llama.cpp throws through the C API,
// or GGML_ABORTs, in some states) by the signal handlers: the schema's line is written with status
// "timeout" / "crash" (failed) and the masks timed so far, and the process exits 3; the driver
// restarts it with --skip = schemas done.
//
// Output: one JSON line per schema on stdout; every mask time (µs, double) appended to --times.
#define _POSIX_C_SOURCE 200809L
#include "llama.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static clockid_t timing_clock = CLOCK_THREAD_CPUTIME_ID;

static double now_us(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

// ---- the state the signal handlers report ----
static int times_fd = -1;
static double *sc_times; // this schema's mask times
static size_t sc_n, sc_cap;
static volatile double sc_mask_t0; // start of the mask in progress (timing clock), 0 when none
static char sc_name[1024];
static long long sc_tests, sc_classified, sc_vr, sc_ia, sc_leak, sc_mismatch, sc_disagree;
static int sc_budget_hit;
static long long sc_positions;
static double sc_init_ms;
static char last_err[512]; // the last error llama.cpp logged (grammar parse errors)

// Formats the schema's result line into buf (also used from the signal handlers: the process
// exits right after, so snprintf there is acceptable for a benchmark tool).
static int format_line(char *buf, size_t cap, const char *status, int passing, const char *reason)
{
    double sum = 0, mx = 0;
    for (size_t i = 0; i < sc_n; i++) {
        sum += sc_times[i];
        if (sc_times[i] > mx)
            mx = sc_times[i];
    }
    char r[300];
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)(reason ? reason : "");
         *p && k + 7 < sizeof r; p++) {
        if (*p == '"' || *p == '\\') {
            r[k++] = '\\';
            r[k++] = (char)*p;
        } else if (*p >= 0x20) {
            r[k++] = (char)*p;
        } else {
            r[k++] = ' ';
        }
    }
    r[k] = 0;
    return snprintf(buf, cap,
                    "{\"file\":\"%s\",\"status\":\"%s\",\"passing\":%s,\"tests\":%lld,"
                    "\"classified\":%lld,\"valid_rejected\":%lld,\"invalid_accepted\":%lld,"
                    "\"positions\":%lld,\"masks\":%zu,\"mask_us_sum\":%.1f,\"mask_us_max\":%.1f,"
                    "\"init_ms\":%.3f,"
                    "\"ctrl_leak_masks\":%lld,\"tok_mismatch\":%lld,\"full_vs_single\":%lld,"
                    "\"budget_hit\":%s,\"reason\":\"%s\"}\n",
                    sc_name, status, passing ? "true" : "false", sc_tests, sc_classified, sc_vr,
                    sc_ia, sc_positions, sc_n, sum, mx, sc_init_ms, sc_leak, sc_mismatch,
                    sc_disagree, sc_budget_hit ? "true" : "false", r);
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void flush_times(void)
{
    if (times_fd >= 0 && sc_n)
        write_all(times_fd, sc_times, sc_n * sizeof *sc_times);
}

static void on_fatal(int sig)
{
    // A mask in progress when the watchdog fires counts with its elapsed time (a lower bound).
    if (sig == SIGALRM && sc_mask_t0 > 0 && sc_n < sc_cap)
        sc_times[sc_n++] = now_us(timing_clock) - sc_mask_t0;
    flush_times();
    static char line[4096];
    int n = format_line(line, sizeof line, sig == SIGALRM ? "timeout" : "crash", 0,
                        sig == SIGALRM   ? "hard wall-clock limit (one call did not return)"
                        : sig == SIGABRT ? "abort (exception or GGML_ABORT in llama.cpp)"
                                         : "fatal signal");
    if (n > 0)
        write_all(1, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    _exit(3);
}

// Whether the full mask is computed (and timed) at this position: a fixed pseudo-random 1/every of
// all positions, keyed by (schema, instance, position) so a restart with --skip picks the same.
static int pick(uint64_t key, long long every)
{
    if (every <= 1)
        return 1;
    uint64_t z = key + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z % (uint64_t)every == 0;
}

static int push_time(double us)
{
    if (sc_n == sc_cap) {
        size_t nc = sc_cap ? sc_cap * 2 : 4096;
        double *nv = realloc(sc_times, nc * sizeof *nv);
        if (!nv)
            return -1;
        sc_times = nv;
        sc_cap = nc;
    }
    sc_times[sc_n++] = us;
    return 0;
}

static void log_cb(enum ggml_log_level level, const char *text, void *ud)
{
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) {
        size_t n = strlen(text);
        if (n >= sizeof last_err)
            n = sizeof last_err - 1;
        memcpy(last_err, text, n);
        last_err[n] = 0;
        while (n > 0 && (last_err[n - 1] == '\n' || last_err[n - 1] == ' '))
            last_err[--n] = 0;
    }
}

// ---- input ----
static char *line_buf;
static size_t line_cap;

static ssize_t next_line(FILE *f)
{
    ssize_t n = getline(&line_buf, &line_cap, f);
    if (n > 0 && line_buf[n - 1] == '\n')
        line_buf[--n] = 0;
    return n;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

struct test {
    int valid;
    size_t n;
    llama_token *ids;
    char *text;
    size_t text_len;
};

int main(int argc, char **argv)
{
    const char *vocab_path = NULL, *cases = NULL, *times_path = NULL;
    long long skip = 0, mask_every = 1;
    double budget_s = 10, hard_s = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--vocab") && more)
            vocab_path = argv[++i];
        else if (!strcmp(a, "--cases") && more)
            cases = argv[++i];
        else if (!strcmp(a, "--times") && more)
            times_path = argv[++i];
        else if (!strcmp(a, "--skip") && more)
            skip = atoll(argv[++i]);
        else if (!strcmp(a, "--mask-every") && more)
            mask_every = atoll(argv[++i]);
        else if (!strcmp(a, "--budget-s") && more)
            budget_s = atof(argv[++i]);
        else if (!strcmp(a, "--hard-s") && more)
            hard_s = atof(argv[++i]);
        else if (!strcmp(a, "--wall"))
            timing_clock = CLOCK_MONOTONIC;
        else {
            fprintf(stderr, "usage: llama_grammar --vocab F.gguf --cases CASES [--skip K] "
                            "[--mask-every M] [--budget-s S] [--hard-s S] [--times FILE] "
                            "[--wall]\n");
            return 2;
        }
    }
    if (!vocab_path || !cases) {
        fprintf(stderr, "llama_grammar: --vocab and --cases are required\n");
        return 2;
    }
    llama_log_set(log_cb, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(vocab_path, mp);
    if (!model) {
        fprintf(stderr, "llama_grammar: cannot load %s: %s\n", vocab_path, last_err);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int32_t nv = llama_vocab_n_tokens(vocab);
    const llama_token eos = llama_vocab_eos(vocab), eot = llama_vocab_eot(vocab);
    // Control tokens that are not end-of-generation: a mask allowing one leaks a special token
    // into the document (glint's S4). llama.cpp matches them by their text.
    unsigned char *ctrl = calloc((size_t)nv, 1);
    llama_token_data *cand = malloc((size_t)nv * sizeof *cand);
    llama_token *tokbuf = NULL;
    size_t tokcap = 0;
    if (!ctrl || !cand)
        return 1;
    for (int32_t id = 0; id < nv; id++)
        ctrl[id] = (llama_vocab_get_attr(vocab, id) & LLAMA_TOKEN_ATTR_CONTROL) &&
                   !llama_vocab_is_eog(vocab, id);
    fprintf(stderr, "llama_grammar: n_vocab %d, eos %d, eot %d\n", nv, eos, eot);

    FILE *in = fopen(cases, "r");
    if (!in) {
        fprintf(stderr, "llama_grammar: cannot read %s\n", cases);
        return 1;
    }
    if (times_path && (times_fd = open(times_path, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0) {
        fprintf(stderr, "llama_grammar: cannot write %s\n", times_path);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);

    struct test *tests = NULL;
    size_t tests_cap = 0;
    long long idx = 0;
    while (next_line(in) >= 0) {
        if (line_buf[0] != 'S')
            continue;
        // S <name> <gbnf> <n_tests> <reason...>
        char gbnf_path[4096], reason[1024] = "";
        long long n_tests = 0;
        int off = 0;
        if (sscanf(line_buf, "S %1023s %4095s %lld %n", sc_name, gbnf_path, &n_tests, &off) < 3) {
            fprintf(stderr, "llama_grammar: bad record: %.80s\n", line_buf);
            return 1;
        }
        if (off > 0)
            snprintf(reason, sizeof reason, "%s", line_buf + off);
        if ((size_t)n_tests > tests_cap) {
            struct test *nt = realloc(tests, (size_t)n_tests * sizeof *nt);
            if (!nt)
                return 1;
            tests = nt;
            tests_cap = (size_t)n_tests;
        }
        for (long long t = 0; t < n_tests; t++) {
            struct test *tt = &tests[t];
            memset(tt, 0, sizeof *tt);
            ssize_t n = next_line(in);
            if (n < 2 || line_buf[0] != 'X') {
                fprintf(stderr, "llama_grammar: %s: expected X line\n", sc_name);
                return 1;
            }
            tt->text = malloc((size_t)n / 2 + 1);
            for (ssize_t k = 2; k + 1 < n; k += 2)
                tt->text[tt->text_len++] =
                    (char)(hexval(line_buf[k]) * 16 + hexval(line_buf[k + 1]));
            tt->text[tt->text_len] = 0;
            n = next_line(in);
            long long nid = 0;
            char *p = line_buf + 1, *e;
            if (n < 1 || line_buf[0] != 'T') {
                fprintf(stderr, "llama_grammar: %s: expected T line\n", sc_name);
                return 1;
            }
            tt->valid = (int)strtol(p, &e, 10);
            nid = strtoll(e, &e, 10);
            tt->ids = malloc(((size_t)nid + 1) * sizeof *tt->ids);
            for (long long k = 0; k < nid; k++)
                tt->ids[k] = (llama_token)strtol(e, &e, 10);
            tt->n = (size_t)nid;
        }
        if (idx++ < skip) {
            for (long long t = 0; t < n_tests; t++) {
                free(tests[t].ids);
                free(tests[t].text);
            }
            continue;
        }
        sc_n = 0;
        sc_tests = n_tests;
        sc_classified = sc_vr = sc_ia = sc_leak = sc_mismatch = sc_disagree = 0;
        sc_budget_hit = 0;
        sc_positions = 0;
        sc_init_ms = 0;
        sc_mask_t0 = 0;
        const char *status = "compiled";
        int passing = 0;
        char why[1024] = "";
        alarm((unsigned)(hard_s + 0.5));
        // The same token sequences through llama.cpp's own tokenizer: only counted (the walk uses
        // glint's ids so both engines see the same sequences).
        for (long long t = 0; t < n_tests; t++) {
            struct test *tt = &tests[t];
            if (tokcap < tt->text_len + 16) {
                tokcap = tt->text_len + 16;
                tokbuf = realloc(tokbuf, tokcap * sizeof *tokbuf);
            }
            int32_t nt = llama_tokenize(vocab, tt->text, (int32_t)tt->text_len, tokbuf,
                                        (int32_t)tokcap, false, false);
            if (nt < 0 || (size_t)nt != tt->n || memcmp(tokbuf, tt->ids, tt->n * sizeof *tokbuf))
                sc_mismatch++;
        }
        char *gbnf = strcmp(gbnf_path, "-") ? read_text(gbnf_path) : NULL;
        struct llama_sampler *smpl = NULL;
        if (!gbnf) {
            status = "not_compiled";
            snprintf(why, sizeof why, "conversion: %s", reason[0] ? reason : "failed");
        } else {
            last_err[0] = 0;
            double t0 = now_us(CLOCK_MONOTONIC);
            smpl = llama_sampler_init_grammar(vocab, gbnf, "root");
            sc_init_ms = (now_us(CLOCK_MONOTONIC) - t0) / 1e3;
            if (!smpl) {
                status = "not_compiled";
                snprintf(why, sizeof why, "grammar: %s", last_err[0] ? last_err : "init failed");
            } else if (reason[0] && strcmp(reason, "-")) {
                snprintf(why, sizeof why, "%s", reason); // converter warning (widened)
            }
        }
        if (smpl) {
            double spent = 0;
            passing = 1;
            for (long long t = 0; t < n_tests; t++) {
                const struct test *tt = &tests[t];
                if (t > 0)
                    llama_sampler_reset(smpl); // re-initialises the grammar: untimed
                int accepted_all = 1, ended = 0;
                for (size_t i = 0; i <= tt->n; i++) {
                    llama_token want = i < tt->n ? tt->ids[i] : eos;
                    // The decision: the grammar sampler on the candidate(s) that matter. llama.cpp
                    // judges every candidate on its own, so this equals the full array's verdict
                    // (checked below wherever a full mask is computed).
                    llama_token_data one[2] = {{want, 0.0f, 0.0f}, {eot, 0.0f, 0.0f}};
                    llama_token_data_array small = {one, i < tt->n ? 1u : 2u, -1, false};
                    llama_sampler_apply(smpl, &small);
                    int ok = one[0].logit != -INFINITY || (i == tt->n && one[1].logit != -INFINITY);
                    sc_positions++;
                    uint64_t key = (uint64_t)idx << 40 ^ (uint64_t)t << 24 ^ (uint64_t)i;
                    if (spent / 1e6 <= budget_s && pick(key, mask_every)) {
                        for (int32_t id = 0; id < nv; id++)
                            cand[id] = (llama_token_data){id, 0.0f, 0.0f};
                        llama_token_data_array arr = {cand, (size_t)nv, -1, false};
                        double t0 = now_us(timing_clock);
                        sc_mask_t0 = t0;
                        llama_sampler_apply(smpl, &arr);
                        double dt = now_us(timing_clock) - t0;
                        sc_mask_t0 = 0;
                        spent += dt;
                        push_time(dt);
                        int leak = 0, full_ok = 0;
                        for (size_t k = 0; k < arr.size; k++) {
                            if (arr.data[k].logit == -INFINITY)
                                continue;
                            llama_token id = arr.data[k].id;
                            leak |= ctrl[id];
                            full_ok |= i < tt->n ? id == want : id == eos || id == eot;
                        }
                        sc_leak += leak;
                        sc_disagree += full_ok != ok;
                        if (spent / 1e6 > budget_s)
                            sc_budget_hit = 1;
                    }
                    if (i == tt->n) {
                        ended = ok;
                        break;
                    }
                    if (!ok) {
                        accepted_all = 0;
                        break;
                    }
                    llama_sampler_accept(smpl, want);
                }
                sc_classified++;
                int ok_doc = accepted_all && ended;
                if (ok_doc != tt->valid) {
                    passing = 0;
                    if (tt->valid)
                        sc_vr++;
                    else
                        sc_ia++;
                }
            }
            llama_sampler_free(smpl);
        }
        alarm(0);
        free(gbnf);
        flush_times();
        static char line[4096];
        int n = format_line(line, sizeof line, status, passing, why);
        fwrite(line, 1, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, stdout);
        fflush(stdout);
        for (long long t = 0; t < n_tests; t++) {
            free(tests[t].ids);
            free(tests[t].text);
        }
    }
    fclose(in);
    free(tests);
    free(tokbuf);
    free(cand);
    free(ctrl);
    free(sc_times);
    free(line_buf);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
