// SPDX-License-Identifier: MIT
// glint tokenize: text -> ids (one line, space-separated) or ids -> text (--decode), with the
// tokenizer from a GGUF (--model) or a tiktoken ranks file (--tiktoken). --hex-lines tokenizes
// every line of a file of hex-encoded byte strings (so invalid UTF-8 can be expressed) and prints
// one line of ids per input line: the oracle tests push thousands of strings through one process.
#include "cli.h"

#include "base/buf.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct opts {
    const char *model, *tiktoken, *hex_lines, *text;
    int special, bos, decode, hex_out, stats; // bos: -1 default (GGUF add_bos_token / none)
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.bos = -1};
    int n_pos = 0;
    struct gl_opt t[] = {
        GL_OPT_S("--model", NULL, o->model, "F.gguf|DIR", "the tokenizer of a GGUF or HF folder"),
        GL_OPT_S("--tiktoken", NULL, o->tiktoken, "F.model", "a tiktoken ranks file"),
        GL_OPT_B("--special", NULL, o->special, 1,
                 "recognise special-token names such as <|eot|> in the text"),
        GL_OPT_B("--bos", NULL, o->bos, 1,
                 "force BOS (default: the GGUF's add_bos_token; none with --tiktoken)"),
        GL_OPT_B("--no-bos", NULL, o->bos, 0, "suppress BOS"),
        GL_OPT_S("--hex-lines", NULL, o->hex_lines, "FILE",
                 "tokenize each line of FILE (hex-encoded bytes); one id line each"),
        GL_OPT_B("--decode", NULL, o->decode, 1,
                 "TEXT (or stdin) is token ids; print the text they decode to"),
        GL_OPT_B("--hex", NULL, o->hex_out, 1, "with --decode: print the bytes hex-encoded"),
        GL_OPT_B("--stats", NULL, o->stats, 1, "print load time and encode speed to stderr"),
    };
    struct gl_cli_spec s = {.cmd = "glint tokenize",
                            .synopsis =
                                "(--model F.gguf|DIR | --tiktoken F.model) [options] [TEXT]",
                            .about = "TEXT: the text to tokenize (read from stdin if absent); "
                                     "prints the ids on one line, space-separated.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t),
                            .max_pos = 1,
                            .pos = &o->text,
                            .n_pos = &n_pos};
    int rc = gl_cli_parse(&s, argc, argv);
    if (rc >= 0)
        return rc;
    if (!o->model == !o->tiktoken) {
        fprintf(stderr, "glint tokenize: give exactly one of --model and --tiktoken\n");
        gl_cli_usage(&s, stderr);
        return 2;
    }
    return -1;
}

static struct gl_tokenizer *load(const struct opts *o)
{
    struct gl_err err = {0};
    struct gl_tokenizer *t = NULL;
    gl_status st;
    int64_t t0 = gl_time_us();
    struct stat sb;
    if (o->tiktoken) {
        st = gl_tokenizer_load_tiktoken(&t, o->tiktoken, &err);
    } else if (stat(o->model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = gl_tokenizer_load_hf_dir(&t, o->model, &err); // an HF model folder
    } else {
        struct gl_gguf *g = NULL;
        struct gl_gguf_open_params p = gl_gguf_default_open_params();
        p.allow_no_data = 1;
        st = gl_gguf_open(&g, o->model, &p, &err);
        if (st == GL_OK)
            st = gl_tokenizer_load_gguf(&t, g, &err);
        gl_gguf_close(g);
    }
    if (st != GL_OK) {
        fprintf(stderr, "glint tokenize: %s: %s\n", gl_status_name(st), err.msg);
        return NULL;
    }
    if (o->stats)
        fprintf(stderr, "load: %.3f s, %d tokens, %lld merges\n", (double)(gl_time_us() - t0) / 1e6,
                (int)gl_tokenizer_n_vocab(t), (long long)gl_tokenizer_n_merges(t));
    return t;
}

// Reads all of f into a malloc'ed buffer.
static char *slurp(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    *len = n;
    return buf;
}

static int print_ids(const struct gl_tokenizer *t, const struct opts *o, const char *s, size_t len,
                     double *secs)
{
    struct gl_err err = {0};
    gl_token *ids;
    size_t n;
    int add_bos = o->bos >= 0 ? o->bos : o->tiktoken ? 0 : gl_tokenizer_add_bos(t);
    int64_t t0 = gl_time_us();
    gl_status st = gl_tokenizer_encode(t, s, len, o->special, add_bos, &ids, &n, &err);
    *secs += (double)(gl_time_us() - t0) / 1e6;
    if (st != GL_OK) {
        fprintf(stderr, "glint tokenize: %s: %s\n", gl_status_name(st), err.msg);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", (int)ids[i]);
    putchar('\n');
    gl_free(ids);
    return 0;
}

static int run_hex_lines(const struct gl_tokenizer *t, const struct opts *o, double *secs,
                         size_t *bytes)
{
    FILE *f = fopen(o->hex_lines, "rb");
    size_t len;
    char *buf = f ? slurp(f, &len) : NULL;
    if (f)
        fclose(f);
    if (!buf) {
        fprintf(stderr, "glint tokenize: cannot read %s\n", o->hex_lines);
        return 1;
    }
    int rc = 0;
    size_t line = 0;
    for (size_t pos = 0; pos < len && rc == 0;) {
        line++;
        char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - pos;
        if (n > 0 && buf[pos + n - 1] == '\r')
            n--;
        char *dst = buf + pos; // decode in place: the bytes are half as long as the hex
        for (size_t i = 0; i + 1 < n && rc == 0; i += 2) {
            int hi = gl_hex_val(buf[pos + i]), lo = gl_hex_val(buf[pos + i + 1]);
            if (hi < 0 || lo < 0)
                rc = 1;
            dst[i / 2] = (char)(hi << 4 | lo);
        }
        if (rc || n % 2) {
            fprintf(stderr, "glint tokenize: %s:%zu: not an even-length hex string\n", o->hex_lines,
                    line);
            rc = 1;
            break;
        }
        rc = print_ids(t, o, dst, n / 2, secs);
        *bytes += n / 2;
        pos = end + 1;
    }
    free(buf);
    return rc;
}

static void put_bytes(const struct opts *o, const char *p, int n)
{
    for (int i = 0; i < n; i++) {
        if (o->hex_out)
            printf("%02x", (unsigned char)p[i]);
        else
            putchar(p[i]);
    }
}

// Parses every id first (so a bad id prints nothing), then streams them through the detokenizer.
static int run_decode(const struct gl_tokenizer *t, const struct opts *o, const char *s)
{
    size_t n = 0, cap = strlen(s) / 2 + 1; // each id takes at least one digit and a separator
    gl_token *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return 1;
    for (char *end; *s;) {
        long id = strtol(s, &end, 10);
        if (end == s) {
            if (strchr(" \t\r\n,", *s)) {
                s++;
                continue;
            }
            fprintf(stderr, "glint tokenize: --decode: '%.20s' is not a token id\n", s);
            free(ids);
            return 1;
        }
        if (id < 0 || id >= gl_tokenizer_n_vocab(t)) {
            fprintf(stderr, "glint tokenize: --decode: id %ld outside 0..%d\n", id,
                    (int)gl_tokenizer_n_vocab(t) - 1);
            free(ids);
            return 1;
        }
        ids[n++] = (gl_token)id;
        s = end;
    }
    struct gl_detok d = {0};
    char out[2048]; // >= the longest token + 8
    for (size_t i = 0; i < n; i++)
        put_bytes(o, out, gl_detok_feed(&d, t, ids[i], 0, out, sizeof out));
    put_bytes(o, out, gl_detok_flush(&d, out, sizeof out));
    if (o->hex_out)
        putchar('\n');
    free(ids);
    return 0;
}

int gl_cmd_tokenize(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct gl_tokenizer *t = load(&o);
    if (!t)
        return 1;
    double secs = 0;
    size_t bytes = 0;
    char *in = NULL;
    if (o.hex_lines) {
        rc = run_hex_lines(t, &o, &secs, &bytes);
    } else {
        size_t len = o.text ? strlen(o.text) : 0;
        if (!o.text && !(in = slurp(stdin, &len))) {
            fprintf(stderr, "glint tokenize: cannot read stdin\n");
            rc = 1;
        } else if (o.decode) {
            if (in)
                in[len < 1 ? 0 : len - (in[len - 1] == '\n')] = '\0';
            rc = run_decode(t, &o, o.text ? o.text : in);
        } else {
            rc = print_ids(t, &o, o.text ? o.text : in, len, &secs);
            bytes = len;
        }
    }
    if (o.stats && !o.decode && secs > 0)
        fprintf(stderr, "encode: %zu bytes in %.3f s = %.2f MB/s\n", bytes, secs,
                (double)bytes / secs / 1e6);
    free(in);
    gl_tokenizer_free(t);
    return rc;
}
