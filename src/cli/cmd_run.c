// SPDX-License-Identifier: MIT
// SCAFFOLD: replaced by the owning module's implementation.
#include "cli.h"
#include <stdio.h>
int gl_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glint: run: not built yet\n");
    return 2;
}
int gl_cmd_eval(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glint: eval: not built yet\n");
    return 2;
}
