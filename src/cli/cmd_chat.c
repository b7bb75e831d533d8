// SPDX-License-Identifier: MIT
// glint chat render REQUEST.json: prints the prompt that the Muse Glimmer chat template renders
// for an OpenAI chat request body, exactly, with nothing added (no trailing newline), so that
// outside tools and tests/oracle/check_chat_render.sh can byte-compare it against Jinja2.
// Errors (unreadable file, bad JSON, a request the template rejects) go to stderr with exit 1.
#include "cli.h"

#include "chat/render.h"

#include <stdio.h>
#include <string.h>

static int cmd_render(const char *path)
{
    json_error_t je;
    json_t *req = !strcmp(path, "-") ? json_loadf(stdin, JSON_ALLOW_NUL, &je)
                                     : json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!req) {
        if (je.line < 0) // the file itself could not be read
            fprintf(stderr, "glint chat render: %s\n", je.text);
        else
            fprintf(stderr, "glint chat render: %s: line %d column %d: %s\n", path, je.line,
                    je.column, je.text);
        return 1;
    }
    struct gl_err err = {0};
    char *text = NULL;
    size_t len = 0;
    gl_status st = gl_chat_render(req, &text, &len, &err);
    json_decref(req);
    if (st != GL_OK) {
        fprintf(stderr, "glint: %s: %s\n", path, err.msg);
        return 1;
    }
    int rc = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "glint chat render: writing stdout failed\n");
    gl_free(text);
    return rc;
}

int gl_cmd_chat(int argc, char **argv)
{
    const char *path = NULL;
    int n_pos = 0;
    struct gl_cli_spec s = {.cmd = "glint chat render",
                            .synopsis = "REQUEST.json",
                            .about = "Prints the Muse Glimmer prompt for an OpenAI chat request "
                                     "body (messages, tools, chat_template_kwargs, "
                                     "reasoning_effort, add_generation_prompt); '-' reads stdin.",
                            .min_pos = 1,
                            .max_pos = 1,
                            .pos = &path,
                            .n_pos = &n_pos};
    if (argc >= 2 && !strcmp(argv[1], "render")) {
        GL_CLI_PARSE(&s, argc - 1, argv + 1);
        return cmd_render(path);
    }
    int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    gl_cli_usage(&s, help ? stdout : stderr);
    return help ? 0 : 2;
}
