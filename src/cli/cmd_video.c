// SPDX-License-Identifier: MIT
// glint video preprocess: decode a clip, sample frames, pick the grid and resize as the vision
// encoder's video input (muse-glimmer-arch.md §6.5); writes the resized frames / patch vectors
// for the oracle checks and prints one JSON line with the geometry, indices and timestamps.
#include "cli.h"

#include "media/media.h"
#include "video/video.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
    const char *video, *out, *patches, *model, *rows, *mmproj;
    int prompt;
    struct gl_video_params par;
};

static int opt_fps(void *user, const char *v, const char *name, const char *cmd)
{
    (void)name;
    (void)cmd;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x > 0.0 && x <= 1000.0))
        return -1;
    *(double *)user = x;
    return 0;
}

// Returns -1 to go on, else the exit code.
static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.par = gl_video_default_params()};
    int n_pos = 0;
    struct gl_opt t[] = {
        GL_OPT_F("--fps", NULL, opt_fps, &o->par.fps, "F", "a number in (0, 1000]",
                 "frames sampled per second (default " GL_CLI_STR(GL_VIDEO_FPS) ")"),
        GL_OPT_I("--max-frames", NULL, o->par.max_frames, 1, GL_VIDEO_MAX_FRAMES_LIMIT, "N",
                 "cap on sampled frames (default " GL_CLI_STR(
                     GL_VIDEO_MAX_FRAMES) ", at most " GL_CLI_STR(GL_VIDEO_MAX_FRAMES_LIMIT) ")"),
        GL_OPT_I(
            "--max-frame-tokens", NULL, o->par.max_frame_tokens, 1, GL_IMAGE_MAX_TOKENS_LIMIT, "N",
            "cap on merged tokens per frame (default " GL_CLI_STR(GL_VIDEO_MAX_FRAME_TOKENS) ")"),
        GL_OPT_S("--out", NULL, o->out, "FILE", "write the T resized 8-bit RGB frames (no header)"),
        GL_OPT_S("--patches", NULL, o->patches, "FILE",
                 "write the normalised patch vectors, float32 [n][1176]"),
        GL_OPT_B("--prompt", NULL, o->prompt, 1,
                 "add \"prompt\": the expanded placeholder text, specials by name"),
        GL_OPT_S("--model", NULL, o->model, "DIR",
                 "with --rows: the model whose vision tower encodes every temporal group"),
        GL_OPT_S("--rows", NULL, o->rows, "FILE",
                 "with --model: write the soft-token rows, float32 [groups * gh * gw][n_embd]"),
        GL_OPT_S("--mmproj", NULL, o->mmproj, "F",
                 "with a GGUF --model: its mmproj (llama.cpp layout)"),
    };
    struct gl_cli_spec s = {
        .cmd = "glint video preprocess",
        .synopsis = "VIDEO [options]",
        .about = "VIDEO: a video file (mp4/mov, mkv/webm, avi, ts, flv, ogg, gif). Prints "
                 "{\"frames\", \"width\", \"height\", \"grid_thw\", \"timestamps\", "
                 "\"n_tokens\", \"sampled\", \"indices\", \"total_frames\", \"src_fps\", "
                 "\"fps_known\", \"src_width\", \"src_height\"} as one JSON line.",
        .opts = t,
        .n_opts = GL_NOPTS(t),
        .min_pos = 1,
        .max_pos = 1,
        .pos = &o->video,
        .n_pos = &n_pos};
    int rc = gl_cli_parse_sub(&s, "preprocess", argc, argv);
    if (rc < 0 && !o->model != !o->rows) {
        fprintf(stderr, "glint video: --model and --rows go together\n");
        gl_cli_usage(&s, stderr);
        return 2;
    }
    return rc;
}

static int write_patches(const char *path, const struct gl_video *v)
{
    float *p;
    size_t n;
    struct gl_err err = {0};
    if (gl_video_patchify(v, &p, &n, &err) != GL_OK) {
        fprintf(stderr, "glint video: %s\n", err.msg);
        return 1;
    }
    int rc = gl_cli_write_file("glint video", path, p, sizeof(float) * GL_IMAGE_PATCH_DIM * n);
    gl_free(p);
    return rc;
}

static const char *special_name(int32_t id)
{
    switch (id) {
    case GL_VIDEO_TOK_START:
        return "<|vid_start|>";
    case GL_VIDEO_TOK_END:
        return "<|vid_end|>";
    case GL_VIDEO_TOK_SEP:
        return "<|vid_frame_separator|>";
    case GL_VIDEO_TOK_VIDEO:
        return "<|video|>";
    default:
        return "<|?|>";
    }
}

// The layout as the text HF's processor substitutes for <|video|> (a JSON string: no character
// of it needs escaping).
static int print_prompt(const struct gl_video *v)
{
    const int groups = v->n_frames / GL_VIDEO_TEMPORAL;
    int n = gl_video_prompt_layout(v->timestamps, groups, v->grid.gh * v->grid.gw, NULL, 0);
    struct gl_video_piece *pc = n > 0 ? malloc(sizeof *pc * (size_t)n) : NULL;
    if (!pc || gl_video_prompt_layout(v->timestamps, groups, v->grid.gh * v->grid.gw, pc, n) != n) {
        free(pc);
        fprintf(stderr, "glint video: cannot build the prompt layout\n");
        return 1;
    }
    printf(", \"prompt\": \"");
    for (int i = 0; i < n; i++)
        if (pc[i].kind == GL_VIDEO_PIECE_TEXT)
            fputs(pc[i].text, stdout);
        else
            for (int k = 0; k < pc[i].count; k++)
                fputs(special_name(pc[i].token), stdout);
    printf("\"");
    free(pc);
    return 0;
}

static int print_json(const struct gl_video *v, int prompt)
{
    const int groups = v->n_frames / GL_VIDEO_TEMPORAL;
    printf("{\"frames\": %d, \"width\": %d, \"height\": %d, \"grid_thw\": [%d, %d, %d], "
           "\"timestamps\": [",
           v->n_frames, v->width, v->height, groups, 2 * v->grid.gh, 2 * v->grid.gw);
    for (int g = 0; g < groups; g++)
        printf("%s%.1f", g ? ", " : "", v->timestamps[g]);
    printf("], \"n_tokens\": %d, \"sampled\": %d, \"indices\": [", groups * v->grid.gh * v->grid.gw,
           v->n_sampled);
    for (int i = 0; i < v->n_sampled; i++)
        printf("%s%lld", i ? ", " : "", (long long)v->indices[i]);
    printf("], \"total_frames\": %lld, \"src_fps\": %.17g, \"fps_known\": %s, \"src_width\": %d, "
           "\"src_height\": %d",
           (long long)v->total_frames, v->src_fps, v->fps_known ? "true" : "false", v->src_width,
           v->src_height);
    if (prompt && print_prompt(v))
        return 1;
    printf("}\n");
    return 0;
}

// --model/--rows: the clip through media/ (one <|video|> expanded, each temporal group encoded by
// the model's vision tower), the rows of every group in order, for the vision-loading oracle.
static int write_rows(const struct opts *o, const struct gl_video *v)
{
    struct gl_model *m = NULL;
    struct gl_tokenizer *tok = NULL;
    struct gl_model_params mp = gl_model_default_params();
    mp.mmproj = o->mmproj;
    struct gl_media_params p = gl_media_default_params();
    p.video = o->par;
    const struct gl_media_part part = {.kind = GL_MEDIA_VIDEO, .clip = v};
    const int32_t ph = GL_VIDEO_TOK_VIDEO;
    struct gl_media_prompt out = {0};
    struct gl_err err = {0};
    struct gl_pool *pool = gl_pool_new(2);
    int rc = 1;
    if (!pool) {
        fprintf(stderr, "glint video: cannot start threads\n");
    } else if (gl_model_open(&m, o->model, &mp, &err) != GL_OK ||
               gl_model_load_tokenizer(m, &tok, &err) != GL_OK ||
               gl_media_expand(m, tok, pool, &ph, 1, &part, 1, &p, &out, &err) != GL_OK) {
        fprintf(stderr, "glint video: %s\n", err.msg);
    } else {
        rc = 0;
        FILE *f = fopen(o->rows, "wb");
        const size_t E = (size_t)m->cfg.n_embd;
        for (int32_t i = 0; f && i < out.n_media && !rc; i++)
            rc = fwrite(out.media[i].embd, sizeof(float) * E, (size_t)out.media[i].n_rows, f) !=
                 (size_t)out.media[i].n_rows;
        if (!f || fclose(f) != 0 || rc) {
            fprintf(stderr, "glint video: cannot write %s\n", o->rows);
            rc = 1;
        }
    }
    gl_media_prompt_free(&out);
    gl_tokenizer_free(tok);
    gl_model_delete(m);
    gl_pool_delete(pool);
    return rc;
}

int gl_cmd_video(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct gl_video_limits lim = gl_video_default_limits();
    size_t n = 0;
    uint8_t *data = gl_cli_read_file(o.video, lim.max_bytes, &n);
    if (!data) {
        fprintf(stderr, "glint video: cannot read %s: %s\n", o.video, strerror(errno));
        return 1;
    }
    struct gl_video v;
    struct gl_err err = {0};
    rc = 1;
    if (gl_video_preprocess(data, n, &lim, &o.par, &v, &err) != GL_OK) {
        fprintf(stderr, "glint video: %s: %s\n", o.video, err.msg);
    } else if (!(o.out &&
                 gl_cli_write_file("glint video", o.out, v.rgb,
                                   3 * (size_t)v.width * (size_t)v.height * (size_t)v.n_frames)) &&
               !(o.patches && write_patches(o.patches, &v)) && !(o.rows && write_rows(&o, &v))) {
        rc = print_json(&v, o.prompt);
    }
    gl_video_free(&v);
    free(data);
    return rc;
}
