// SPDX-License-Identifier: MIT
// glint image preprocess: decode a PNG/JPEG, pick the patch grid and resize as the vision
// encoder's input (muse-glimmer-arch.md §6.2); writes raw pixels / patch vectors for the oracle
// checks and prints one JSON line with the geometry.
#include "cli.h"

#include "image/image.h"
#include "media/media.h"
#include "model/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
    const char *image, *out, *decoded, *patches, *model, *rows, *mmproj;
    int max_tokens;
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.max_tokens = GL_IMAGE_MAX_TOKENS};
    int n_pos = 0;
    struct gl_opt t[] = {
        GL_OPT_I("--max-image-tokens", NULL, o->max_tokens, 1, GL_IMAGE_MAX_TOKENS_LIMIT, "N",
                 "cap on merged tokens (default " GL_CLI_STR(
                     GL_IMAGE_MAX_TOKENS) ", at most " GL_CLI_STR(GL_IMAGE_MAX_TOKENS_LIMIT) ")"),
        GL_OPT_S("--out", NULL, o->out, "FILE",
                 "write the resized 8-bit RGB pixels (row-major, no header)"),
        GL_OPT_S("--decoded", NULL, o->decoded, "FILE",
                 "write the decoded RGB pixels before resizing"),
        GL_OPT_S("--patches", NULL, o->patches, "FILE",
                 "write the normalised patch vectors, float32 [n][1176]"),
        GL_OPT_S("--model", NULL, o->model, "DIR",
                 "with --rows: encode with the model's vision tower (media/)"),
        GL_OPT_S("--rows", NULL, o->rows, "FILE",
                 "with --model: write the soft-token rows, float32 [n_tokens][n_embd]"),
        GL_OPT_S("--mmproj", NULL, o->mmproj, "F",
                 "with a GGUF --model: its mmproj (llama.cpp layout)"),
    };
    struct gl_cli_spec s = {.cmd = "glint image preprocess",
                            .synopsis = "IMAGE [options]",
                            .about = "IMAGE: a PNG or JPEG file. Prints {\"width\", \"height\", "
                                     "\"grid_thw\", \"n_tokens\", \"src_width\", "
                                     "\"src_height\"} as one JSON line.",
                            .opts = t,
                            .n_opts = GL_NOPTS(t),
                            .min_pos = 1,
                            .max_pos = 1,
                            .pos = &o->image,
                            .n_pos = &n_pos};
    int rc = gl_cli_parse_sub(&s, "preprocess", argc, argv);
    if (rc < 0 && !o->model != !o->rows) {
        fprintf(stderr, "glint image preprocess: --model and --rows go together\n");
        gl_cli_usage(&s, stderr);
        return 2;
    }
    return rc;
}

static int write_patches(const char *path, const struct gl_image *img)
{
    float *p;
    size_t n;
    struct gl_err err = {0};
    if (gl_image_patchify(img, &p, &n, &err) != GL_OK) {
        fprintf(stderr, "glint image: %s\n", err.msg);
        return 1;
    }
    int rc = gl_cli_write_file("glint image", path, p, sizeof(float) * GL_IMAGE_PATCH_DIM * n);
    gl_free(p);
    return rc;
}

// --model/--rows: the soft-token rows of the image through media/ (the same preprocessing, then
// the model's vision tower), for the vision-loading oracle.
static int write_rows(const struct opts *o, const uint8_t *data, size_t n)
{
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    mp.mmproj = o->mmproj;
    struct gl_media_params p = gl_media_default_params();
    struct gl_media_part img = {.data = data, .n = n};
    struct gl_request_media rows = {0};
    struct gl_err err = {0};
    p.max_image_tokens = o->max_tokens;
    struct gl_pool *pool = gl_pool_new(2);
    int rc = 1;
    if (!pool) {
        fprintf(stderr, "glint image: cannot start threads\n");
        goto done;
    }
    if (gl_model_open(&m, o->model, &mp, &err) != GL_OK)
        goto fail;
    // Decode, resize and encode once the model is open: the figure bench/vision_llama.sh sets
    // against llama-mtmd-cli's "batch encoding done in" (its encoder alone).
    int64_t t0 = gl_time_us();
    if (gl_media_encode(m, pool, &img, &p, &rows, NULL, &err) != GL_OK)
        goto fail;
    fprintf(stderr, "glint image: %d rows encoded in %.0f ms\n", rows.n_rows,
            (double)(gl_time_us() - t0) / 1e3);
    rc = gl_cli_write_file("glint image", o->rows, rows.embd,
                           sizeof(float) * (size_t)rows.n_rows * (size_t)m->cfg.n_embd);
    goto done;
fail:
    fprintf(stderr, "glint image: %s\n", err.msg);
done:
    gl_free(rows.embd);
    gl_model_delete(m);
    gl_pool_delete(pool);
    return rc;
}

static int run(const struct opts *o, const uint8_t *data, size_t n)
{
    struct gl_image src = {0}, dst = {0};
    struct gl_image_grid g;
    struct gl_err err = {0};
    int rc = 1;
    if (gl_image_decode(data, n, NULL, &src, &err) != GL_OK ||
        gl_image_grid(src.width, src.height, o->max_tokens, &g, &err) != GL_OK ||
        gl_image_resize(&src, g.gw * GL_IMAGE_UNIT, g.gh * GL_IMAGE_UNIT, &dst, &err) != GL_OK) {
        fprintf(stderr, "glint image: %s: %s\n", o->image, err.msg);
        goto done;
    }
    if (o->decoded &&
        gl_cli_write_file("glint image", o->decoded, src.rgb, 3 * (size_t)src.width * src.height))
        goto done;
    if (o->out &&
        gl_cli_write_file("glint image", o->out, dst.rgb, 3 * (size_t)dst.width * dst.height))
        goto done;
    if (o->patches && write_patches(o->patches, &dst))
        goto done;
    if (o->rows && write_rows(o, data, n))
        goto done;
    printf("{\"width\": %d, \"height\": %d, \"grid_thw\": [1, %d, %d], \"n_tokens\": %d, "
           "\"src_width\": %d, \"src_height\": %d}\n",
           dst.width, dst.height, 2 * g.gh, 2 * g.gw, g.gh * g.gw, src.width, src.height);
    rc = 0;
done:
    gl_image_free(&src);
    gl_image_free(&dst);
    return rc;
}

int gl_cmd_image(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct gl_image_limits lim = gl_image_default_limits();
    size_t n = 0;
    uint8_t *data = gl_cli_read_file(o.image, lim.max_bytes, &n);
    if (!data) {
        fprintf(stderr, "glint image: cannot read %s: %s\n", o.image, strerror(errno));
        return 1;
    }
    rc = run(&o, data, n);
    free(data);
    return rc;
}
