// SPDX-License-Identifier: MIT
// SCAFFOLD: replaced by the owning module's implementation.
#include "cli.h"
#include <stdio.h>
int gl_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glint: bench: not built yet\n");
    return 2;
}
