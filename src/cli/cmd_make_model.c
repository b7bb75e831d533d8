// SPDX-License-Identifier: MIT
// SCAFFOLD: replaced by the owning module's implementation.
#include "cli.h"
#include <stdio.h>
int gl_cmd_make_model(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glint: make_model: not built yet\n");
    return 2;
}
