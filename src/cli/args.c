// SPDX-License-Identifier: MIT
// cli: argument parsing helpers shared by the subcommands.
#include "cli.h"

#include <errno.h>
#include <stdlib.h>

int gl_cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}
