// SPDX-License-Identifier: MIT
// SCAFFOLD: replaced by the owning module's implementation.
#include "cli.h"
#include <stdio.h>
int gl_cmd_inspect(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glint: inspect: not built yet\n");
    return 2;
}
