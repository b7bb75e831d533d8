// SPDX-License-Identifier: MIT
// mtmd_rows: llama.cpp's soft-token rows for images, written against mtmd.h / mtmd-helper.h's C
// API only (the path llama-mtmd-cli and llama-server take: mtmd_helper_bitmap_init_from_file,
// mtmd_tokenize_from_parts, mtmd_encode_chunk, mtmd_get_output_embd). The rows are therefore
// exactly what llama.cpp's text graph receives for the image, i.e. before the weight-less RMS
// norm of arch doc §6.3 step 11 (llama.cpp applies it in the text graph; glint in the encoder).
// tests/oracle/check_mmproj_rows.sh builds it with cc against bench/llama_build.sh's build.
// C, not C++: mtmd's C API is enough, and the eval callback reads graph tensors through ggml's C
// API (clip.h, the C++ internal header, is not needed).
//
// usage: mtmd_rows --model TEXT.gguf --mmproj MMPROJ.gguf [--threads N] [--flash-attn on|off]
//                  [--tap NAME=FILE]...
//                  --image IMG --rows FILE [--pixels FILE] [--posemb FILE]  [--image ...]
// Each --image starts a job; the --rows / --pixels / --posemb after it belong to it (up to 64
// images: loading the text model's 200k-token vocabulary is most of a run's time).
//   --rows FILE    float32 [n_tokens][n_embd], n_embd = llama_model_n_embd_inp(text model)
//   --pixels FILE  the encoder's input tensor inp_raw after llama.cpp's preprocessing
//                  (resize, rescale, normalise): float32 planar [3][ny][nx], read through the
//                  scheduler's eval callback from the first node that consumes it
//   --posemb FILE  the position embedding added to the patch embeddings (the node clip names
//                  "after_posemb" is patch_embd + posemb; its src[1]), float32 [n_patches][hidden]
//   --flash-attn   off (default): attention in F32, ggml_soft_max_ext over K^T Q; on: what
//                  llama-mtmd-cli does on a CPU by default (clip's AUTO resolves to enabled),
//                  ggml_flash_attn_ext with K and V cast to F16 (clip.cpp build_attn), so its rows
//                  carry F16 rounding of K and V
//   --tap NAME=FILE  any node clip names NAME (cb() in clip.cpp / models/muse-glimmer.cpp: pre_ln,
//                  after_sp_perm, after_inv_perm, encoder_out, projected, ...; per-layer names
//                  carry "-IL"), float32 in ggml order, up to 16, written at every image's encode
//                  (use with one image); for finding where two encoders part
// Prints one JSON line per image: {"image", "n_tokens", "n_embd", "nx", "ny", "n_patches",
// "hidden"} (nx/ny with --pixels, n_patches/hidden with --posemb, else 0).
// Exit 0 on success, 1 on the first failure (message on stderr).
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TAPS 16

struct taps {
    const char *pixels_path, *posemb_path;
    const char *tap_name[MAX_TAPS], *tap_path[MAX_TAPS];
    int n_taps;
    int got_pixels, got_posemb;
    long nx, ny, n_patches, hidden;
    int failed;
};

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

static int write_tensor(const char *path, const struct ggml_tensor *t)
{
    if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) {
        fprintf(stderr, "mtmd_rows: %s: tensor %s is not contiguous F32\n", path, t->name);
        return 1;
    }
    size_t n = ggml_nbytes(t);
    float *buf = malloc(n);
    if (!buf)
        return 1;
    ggml_backend_tensor_get(t, buf, 0, n);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(buf, 1, n, f) != n;
    if (f && fclose(f))
        bad = 1;
    free(buf);
    if (bad)
        fprintf(stderr, "mtmd_rows: cannot write %s\n", path);
    return bad;
}

static const struct ggml_tensor *src_named(const struct ggml_tensor *t, const char *name)
{
    for (int i = 0; i < GGML_MAX_SRC; i++)
        if (t->src[i] && strcmp(ggml_get_name(t->src[i]), name) == 0)
            return t->src[i];
    return NULL;
}

// ask: observe the first consumer of inp_raw and the "after_posemb" node. Otherwise the node is
// computed and its sources are still intact (the scheduler stops right after an observed node).
static bool eval_cb(struct ggml_tensor *t, bool ask, void *user)
{
    struct taps *tp = user;
    const struct ggml_tensor *raw = src_named(t, "inp_raw");
    int is_pos = strcmp(ggml_get_name(t), "after_posemb") == 0;
    int tap = -1;
    for (int i = 0; i < tp->n_taps; i++)
        if (strcmp(ggml_get_name(t), tp->tap_name[i]) == 0)
            tap = i;
    if (ask)
        return (raw && tp->pixels_path && !tp->got_pixels) ||
               (is_pos && tp->posemb_path && !tp->got_posemb) || tap >= 0;
    if (tap >= 0) {
        fprintf(stderr, "mtmd_rows: tap %s [%lld, %lld]\n", tp->tap_name[tap], (long long)t->ne[0],
                (long long)t->ne[1]);
        tp->failed |= write_tensor(tp->tap_path[tap], t);
    }
    if (raw && tp->pixels_path && !tp->got_pixels) {
        tp->got_pixels = 1;
        tp->nx = (long)raw->ne[0];
        tp->ny = (long)raw->ne[1];
        tp->failed |= write_tensor(tp->pixels_path, raw);
    }
    if (is_pos && tp->posemb_path && !tp->got_posemb && t->src[1]) {
        tp->got_posemb = 1;
        tp->hidden = (long)t->src[1]->ne[0];
        tp->n_patches = (long)t->src[1]->ne[1];
        tp->failed |= write_tensor(tp->posemb_path, t->src[1]);
    }
    return true;
}

#define MAX_IMAGES 64

struct job {
    const char *image, *rows, *pixels, *posemb;
};

// One image: bitmap -> chunks -> mtmd_encode_chunk -> rows file; one JSON line on stdout.
static int encode_one(mtmd_context *ctx, size_t n_embd, struct taps *tp, const struct job *j)
{
    tp->pixels_path = j->pixels;
    tp->posemb_path = j->posemb;
    tp->got_pixels = tp->got_posemb = tp->failed = 0;
    tp->nx = tp->ny = tp->n_patches = tp->hidden = 0;
    struct mtmd_helper_bitmap_wrapper bw =
        mtmd_helper_bitmap_init_from_file(ctx, j->image, false, mtmd_helper_init_opt_default());
    if (!bw.bitmap) {
        fprintf(stderr, "mtmd_rows: cannot read image %s\n", j->image);
        return 1;
    }
    // One part, the bitmap alone: the chunks are the image's begin/end marker text and the image.
    mtmd_input_part part = {.text = NULL, .bitmap = bw.bitmap};
    const mtmd_input_part *parts[1] = {&part};
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    const mtmd_input_chunk *img = NULL;
    int rc = 1;
    if (mtmd_tokenize_from_parts(ctx, chunks, parts, 1, false) != 0) {
        fprintf(stderr, "mtmd_rows: %s: mtmd_tokenize_from_parts failed\n", j->image);
        goto done;
    }
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
        const mtmd_input_chunk *c = mtmd_input_chunks_get(chunks, i);
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE)
            img = c;
    }
    if (!img || mtmd_encode_chunk(ctx, img) != 0) {
        fprintf(stderr, "mtmd_rows: %s: %s\n", j->image,
                img ? "mtmd_encode_chunk failed" : "no image chunk");
        goto done;
    }
    size_t n_tok = mtmd_input_chunk_get_n_tokens(img);
    const float *embd = mtmd_get_output_embd(ctx);
    FILE *f = fopen(j->rows, "wb");
    int bad = !f || fwrite(embd, sizeof(float) * n_embd, n_tok, f) != n_tok;
    if (f && fclose(f))
        bad = 1;
    if (bad || tp->failed || (j->pixels && !tp->got_pixels) || (j->posemb && !tp->got_posemb)) {
        fprintf(stderr,
                "mtmd_rows: %s: writing the outputs failed (rows %d, pixels %d, posemb %d)\n",
                j->image, !bad, tp->got_pixels, tp->got_posemb);
        goto done;
    }
    printf("{\"image\": \"%s\", \"n_tokens\": %zu, \"n_embd\": %zu, \"nx\": %ld, \"ny\": %ld, "
           "\"n_patches\": %ld, \"hidden\": %ld}\n",
           j->image, n_tok, n_embd, tp->nx, tp->ny, tp->n_patches, tp->hidden);
    rc = 0;
done:
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(bw.bitmap);
    return rc;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *mmproj = NULL;
    struct taps tp = {0};
    struct job jobs[MAX_IMAGES] = {{0}};
    int threads = 2, flash = 0, n_jobs = 0, usage = 0;
    for (int i = 1; i < argc && !usage; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        struct job *j = n_jobs ? &jobs[n_jobs - 1] : NULL;
        if (!v)
            usage = 1;
        else if (!strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--mmproj"))
            mmproj = v;
        else if (!strcmp(a, "--image") && n_jobs < MAX_IMAGES)
            jobs[n_jobs++].image = v;
        else if (!strcmp(a, "--rows") && j)
            j->rows = v;
        else if (!strcmp(a, "--pixels") && j)
            j->pixels = v;
        else if (!strcmp(a, "--posemb") && j)
            j->posemb = v;
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else if (!strcmp(a, "--flash-attn"))
            flash = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1;
        else if (!strcmp(a, "--tap") && strchr(v, '=') && tp.n_taps < MAX_TAPS) {
            char *eq = strchr(argv[i + 1], '=');
            *eq = '\0';
            tp.tap_name[tp.n_taps] = argv[i + 1];
            tp.tap_path[tp.n_taps++] = eq + 1;
        } else
            usage = 1;
    }
    for (int k = 0; k < n_jobs; k++)
        usage |= jobs[k].rows == NULL;
    if (usage || !model_path || !mmproj || !n_jobs || threads < 1 || flash < 0) {
        fprintf(stderr, "usage: mtmd_rows --model TEXT.gguf --mmproj F [--threads N] "
                        "[--flash-attn on|off] [--tap NAME=FILE]... --image IMG --rows FILE "
                        "[--pixels FILE] [--posemb FILE] [--image ...]\n");
        return 1;
    }
    llama_log_set(quiet_log, NULL);
    mtmd_helper_log_set(quiet_log, NULL);
    llama_backend_init();

    // The text model gives mtmd its width and vocabulary (the image marker strings); loaded in
    // full, as vocab_only leaves the width at 0. Loading it (the 200k-token vocabulary) is most
    // of the run time, hence several images per process.
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "mtmd_rows: cannot load %s\n", model_path);
        return 1;
    }
    struct mtmd_context_params cp = mtmd_context_params_default();
    cp.use_gpu = false;
    cp.print_timings = false;
    cp.n_threads = threads;
    cp.warmup = false;
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.cb_eval = eval_cb;
    cp.cb_eval_user_data = &tp;
    mtmd_context *ctx = mtmd_init_from_file(mmproj, model, cp);
    if (!ctx) {
        fprintf(stderr, "mtmd_rows: cannot load mmproj %s\n", mmproj);
        return 1;
    }
    size_t n_embd = (size_t)llama_model_n_embd_inp(model);
    int rc = 0;
    for (int k = 0; k < n_jobs && !rc; k++)
        rc = encode_one(ctx, n_embd, &tp, &jobs[k]);
    mtmd_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
