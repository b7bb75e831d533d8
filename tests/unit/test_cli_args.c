// SPDX-License-Identifier: MIT
// The one flag parser of src/cli/args.c: each kind of flag, ranges, required flags, unknown
// options, missing values, aliases, positionals, --help and the generated usage text.
#include "cli/cli.h"
#include "test.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

struct opts {
    int flag, n;
    int64_t big;
    size_t bytes;
    double x, secs;
    const char *s;
    int calls;
    const char *last;
};

static int collect(void *user, const char *v, const char *name, const char *cmd)
{
    struct opts *o = user;
    (void)name;
    (void)cmd;
    if (!strcmp(v, "bad"))
        return -1;
    o->calls++;
    o->last = v;
    return 0;
}

static struct opts o;
static const char *pos[2];
static int n_pos;
static char out[8192], err[8192];

// Runs the parser on a NULL-terminated list of arguments with stdout and stderr captured.
static int run(int required, ...)
{
    memset(&o, 0, sizeof o);
    o.n = 7;
    n_pos = 0;
    struct gl_opt t[] = {
        GL_OPT_B("--flag", "-f", o.flag, 1, "a switch"),
        GL_OPT_B("--no-flag", NULL, o.flag, 0, "the switch off"),
        GL_OPT_I("--n", "-n --count", o.n, 1, 4096, "N", "a count (default 7)"),
        GL_OPT_I("--big", NULL, o.big, -1, INT64_MAX, "N", "a big one"),
        GL_OPT_Z("--bytes", NULL, o.bytes, "B", "a byte count"),
        GL_OPT_D("--x", NULL, o.x, 0.0, 2.0, "X", "a number"),
        GL_OPT_T("--secs", NULL, o.secs, 0, 60, "S", "seconds"),
        GL_OPT_S("--name", "-m", o.s, "NAME", "a string"),
        GL_OPT_F("--image", NULL, collect, &o, "F", "a file",
                 "repeatable; help text long "
                 "enough to be wrapped at the hundredth column of the terminal so that it "
                 "spills onto a second line"),
        GL_OPT_IGNORED("--ignored", "--also-ignored", "accepted, changes nothing"),
    };
    t[7].required = required;
    struct gl_cli_spec s = {.cmd = "glint t",
                            .synopsis = "[options] [FILE]",
                            .opts = t,
                            .n_opts = GL_NOPTS(t),
                            .max_pos = 1,
                            .pos = pos,
                            .n_pos = &n_pos};
    char *argv[32] = {"t"};
    int argc = 1;
    va_list ap;
    va_start(ap, required);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    FILE *fo = tmpfile(), *fe = tmpfile();
    int so = dup(1), se = dup(2);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    int rc = gl_cli_parse(&s, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    rewind(fo);
    rewind(fe);
    out[fread(out, 1, sizeof out - 1, fo)] = 0;
    err[fread(err, 1, sizeof err - 1, fe)] = 0;
    fclose(fo);
    fclose(fe);
    return rc;
}

TEST(test_kinds)
{
    CHECK(run(0, NULL) == -1 && o.n == 7 && !o.flag && !o.s && !*out && !*err);
    CHECK(run(0, "--flag", "--n", "4096", "--big", "-1", "--bytes", "6GiB", "--x", "1.5", "--secs",
              "30", "--name", "a b", "FILE", NULL) == -1);
    CHECK(o.flag == 1 && o.n == 4096 && o.big == -1 && o.bytes == (size_t)6 << 30 && o.x == 1.5 &&
          o.secs == 30.0 && !strcmp(o.s, "a b") && n_pos == 1 && !strcmp(pos[0], "FILE"));
    CHECK(run(0, "--flag", "--no-flag", NULL) == -1 && o.flag == 0);
    CHECK(run(0, "--big", "9223372036854775807", NULL) == -1 && o.big == INT64_MAX);
    CHECK(run(0, "--n=12", "--name=x=y", NULL) == -1 && o.n == 12 && !strcmp(o.s, "x=y"));
    CHECK(run(0, "--image", "a", "--image", "b", NULL) == -1 && o.calls == 2 &&
          !strcmp(o.last, "b"));
    CHECK(run(0, "--ignored", "--also-ignored", NULL) == -1);
}

TEST(test_aliases)
{
    CHECK(run(0, "-n", "3", NULL) == -1 && o.n == 3);
    CHECK(run(0, "--count", "5", "-f", "-m", "z", NULL) == -1 && o.n == 5 && o.flag &&
          !strcmp(o.s, "z"));
}

TEST(test_errors)
{
    CHECK(run(0, "--n", "0", NULL) == 2);
    CHECKF(strstr(err, "glint t: bad value '0' for --n: an integer in 1..4096"), "%s", err);
    CHECK(run(0, "-n", "4097", NULL) == 2 && strstr(err, "bad value '4097' for -n"));
    CHECK(run(0, "--n", "3x", NULL) == 2 && strstr(err, "bad value '3x'"));
    CHECK(run(0, "--x", "2.5", NULL) == 2 && strstr(err, "a number in 0..2"));
    CHECK(run(0, "--x", "nan", NULL) == 2);
    CHECK(run(0, "--secs", "1.5", NULL) == 2 && strstr(err, "an integer in 0..60"));
    CHECK(run(0, "--bytes", "lots", NULL) == 2 && strstr(err, "a byte count"));
    CHECK(run(0, "--image", "bad", NULL) == 2 &&
          strstr(err, "bad value 'bad' for --image: a file"));
    CHECK(run(0, "--nope", NULL) == 2);
    CHECKF(strstr(err, "glint t: unknown option '--nope'") && strstr(err, "usage: glint t"), "%s",
           err);
    CHECK(run(0, "--nope=3", NULL) == 2 && strstr(err, "unknown option '--nope'"));
    CHECK(run(0, "--n", NULL) == 2 && strstr(err, "glint t: --n needs a value"));
    CHECK(run(0, "--flag=1", NULL) == 2 && strstr(err, "--flag takes no value"));
    CHECK(run(1, NULL) == 2 && strstr(err, "glint t: --name is required"));
    CHECK(run(1, "-m", "x", NULL) == -1);
    CHECK(run(0, "A", "B", NULL) == 2 && strstr(err, "unexpected argument 'B'"));
    CHECK(o.n == 7 && !*out); // an error leaves later flags unparsed and prints nothing to stdout
}

TEST(test_help)
{
    CHECK(run(1, "--help", NULL) == 0 && !*err);
    // (--help wins over a missing required flag)
    CHECKF(strstr(out, "usage: glint t [options] [FILE]\n"), "%s", out);
    CHECKF(strstr(out, "  --n N / -n N / --count N    a count (default 7)\n"), "%s", out);
    CHECK(strstr(out, "  --flag / -f                 a switch\n"));
    CHECK(strstr(out, "  --name NAME / -m NAME       (required) a string\n"));
    CHECK(strstr(out, "  --image F                   repeatable; help text long enough to be "
                      "wrapped at the hundredth\n                              column of the"));
    for (char *l = out; *l; l = strchr(l, '\n') + 1) // every line within 100 columns
        CHECK(strcspn(l, "\n") <= 100);
    CHECK(run(0, "-n", "2", "-h", NULL) == 0 && strstr(out, "--ignored / --also-ignored"));
}

int main(void)
{
    RUN_TESTS(test_kinds, test_aliases, test_errors, test_help);
}
