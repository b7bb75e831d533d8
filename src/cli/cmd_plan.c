// SPDX-License-Identifier: MIT
// glint plan: KV-cache sizing from a model's metadata alone (works on a --header-only GGUF), like
// vLLM's "--kv-cache-memory" start-up log. Prints one JSON object: the hybrid page layout, pages
// in the budget, capacity in tokens and concurrency at max_model_len, bytes per token, and two
// comparisons on the same budget: every layer kept in full (no hybrid layout) and vLLM's hybrid
// allocator figure, whose sliding groups keep window - 1 + max_num_batched_tokens positions per
// request (with 16384 that reproduces the production report's 623,837 tokens / 4.7).
#include "cli.h"

#include "base/host.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/kv.h"
#include "model/dflash.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Most blocks `span` consecutive positions can touch.
static int64_t touched(int64_t span, int64_t bs)
{
    return span <= 0 ? 0 : (span - 1 + bs - 1) / bs + 1;
}

// --device: what serve's engine would allocate there (gl_engine_model_dev's bounds), and whether
// it fits the device's heap (st GL_E_NOMEM / GL_E_LIMIT: printed with "fits": false, exit 1).
struct plan_dev {
    int device;
    struct gl_model_dev_mem dm;
    uint64_t heap;
    int64_t kv_room;               // bytes the device side was sized from (-1: --kv-cache-memory)
    int64_t dev_pages, host_pages; // the pool's pages per side (host 0 without a split)
    char name[256];
    gl_status st;
    struct gl_err err;
};

static int plan_device(const struct gl_gguf *g, const struct gl_model_config *cfg,
                       const struct gl_kv_params *kv, int ngl, int mbt, int32_t max_seqs,
                       int32_t max_len, uint64_t kv_bytes, struct plan_dev *pd)
{
    struct gl_engine_params ep = {.device = pd->device,
                                  .n_gpu_layers = ngl,
                                  .max_num_seqs = max_seqs,
                                  .max_model_len = max_len,
                                  .kv = *kv};
    struct gl_model_dev md;
    struct gl_err err = {0};
    gl_engine_model_dev(&ep, &md);
    if (gl_model_dev_mem_plan(g, cfg, mbt, &md, kv_bytes, &pd->dm, &err) != GL_OK) {
        fprintf(stderr, "glint plan: %s\n", err.msg);
        return 1;
    }
    pd->st =
        gl_model_dev_mem_check(&pd->dm, pd->device, &pd->heap, pd->name, sizeof pd->name, &pd->err);
    if (pd->st != GL_OK && pd->st != GL_E_NOMEM && pd->st != GL_E_LIMIT) { // no device
        fprintf(stderr, "glint plan: %s\n", pd->err.msg);
        return 1;
    }
    return 0;
}

static int print_device(const struct plan_dev *pd)
{
    const struct gl_model_dev_mem *dm = &pd->dm;
    printf(" \"device\": {\"index\": %d, \"name\": \"%s\", \"n_gpu_layers\": %d, "
           "\"output_head_on_device\": %s, \"heap_bytes\": %llu,\n",
           pd->device, pd->name, dm->n_gpu_layers, dm->head_on_device ? "true" : "false",
           (unsigned long long)pd->heap);
    printf("  \"weights\": {\"total\": %llu", (unsigned long long)dm->weights);
    for (int ty = 0; ty < GL_TYPE_COUNT; ty++)
        if (dm->weights_by_type[ty]) {
            const struct gl_type_traits *tt = gl_type_traits_of((uint32_t)ty);
            printf(", \"%s\": %llu", tt && tt->name ? tt->name : "?",
                   (unsigned long long)dm->weights_by_type[ty]);
        }
    printf("}, \"norms\": %llu, \"kv\": %llu, \"kv_room\": %lld, \"kv_pages\": {\"device\": %lld, "
           "\"host\": %lld},\n",
           (unsigned long long)dm->norms, (unsigned long long)dm->kv, (long long)pd->kv_room,
           (long long)pd->dev_pages, (long long)pd->host_pages);
    printf("  \"scratch\": {\"activations\": %llu, \"step_inputs\": %llu, \"logits\": %llu}, "
           "\"device_local_total\": %llu, \"host_visible\": %llu, \"fits\": %s}}\n",
           (unsigned long long)dm->activations, (unsigned long long)dm->step_inputs,
           (unsigned long long)dm->logits, (unsigned long long)dm->device_total,
           (unsigned long long)dm->host_visible, pd->st == GL_OK ? "true" : "false");
    if (pd->st != GL_OK) {
        fprintf(stderr, "glint plan: %s\n", pd->err.msg);
        return 1;
    }
    return 0;
}

int gl_cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *dtype_s = "f16";
    int64_t budget = -1;
    long long max_len = 0, bs = 16, mbt = 512, vllm_mbt = 16384, max_seqs = 16;
    double util = 0.9;
    int device = -1, ngl = -1;
    const char *dflash = NULL;
    struct gl_opt t[] = {
        GL_OPT_S("--model", NULL, model, "F", "a GGUF (a --header-only one will do)"),
        GL_OPT_Z("--kv-cache-memory", "--kv-cache-memory-bytes", budget, "BYTES",
                 "pool bytes: an integer, optionally with K/M/G/T (or KiB, MiB, GiB, TiB: powers "
                 "of 1024) or KB/MB/GB/TB (powers of 1000); decimals allowed (5.5GiB = "
                 "5905580032). Without it: the pool glint serve would choose now (memory free "
                 "minus the model file, times --gpu-memory-utilization 0.9, at most "
                 "--max-num-seqs 16 full sequences), and max_model_len lowered to fit it unless "
                 "given"),
        GL_OPT_S("--kv-cache-dtype", NULL, dtype_s, "T", "f32|f16|bf16|fp8|fp8_e4m3 (default f16)"),
        GL_OPT_I("--max-model-len", NULL, max_len, 1, 1 << 30, "N",
                 "positions per sequence (default: the model's context_length)"),
        GL_OPT_I("--block-size", NULL, bs, 1, 4096, "N", "positions per page (default 16)"),
        GL_OPT_I("--max-num-batched-tokens", NULL, mbt, 1, 1 << 24, "N",
                 "prefill chunk of the engine: extra sliding pages one prefilling sequence holds "
                 "transiently (default 512)"),
        GL_OPT_I("--max-num-seqs", NULL, max_seqs, 1, 4096, "N",
                 "sequences the default pool holds in full (default 16)"),
        GL_OPT_F("--gpu-memory-utilization", NULL, gl_cli_opt_fraction, &util, "F",
                 "a fraction in (0, 1]", "share of the free memory the default pool takes (0.9)"),
        GL_OPT_F("--device", NULL, gl_cli_opt_device, &device, "D", NULL,
                 "cpu (default) or vulkan[:INDEX]: also print the device memory `glint serve "
                 "--device` allocates (weights as uploaded, KV, scratch) and refuse when it does "
                 "not fit the device's memory heap"),
        GL_OPT_I("--n-gpu-layers", "-ngl", ngl, -1, 1 << 20, "N", GL_CLI_NGL_HELP),
        GL_OPT_S("--dflash", NULL, dflash, "F",
                 "a DFlash drafter (llama.cpp `dflash` GGUF, a --header-only one will do, or the "
                 "HF assistant folder): its context pool (f32 pages, --max-num-seqs sequences of "
                 "max_model_len; engine.h gl_engine_dflash_kv_bytes) comes off the free memory "
                 "before the KV pool, as in glint serve with --speculative-config method dflash"),
        GL_OPT_I("--vllm-batched-tokens", NULL, vllm_mbt, 1, 1 << 24, "N",
                 "max_num_batched_tokens assumed for the vLLM comparison (default 16384)"),
    };
    t[0].required = 1;
    struct gl_cli_spec s = {.cmd = "glint plan",
                            .synopsis = "--model F [options]",
                            .about = "KV-cache sizing from a model's metadata alone: one JSON "
                                     "object with the hybrid page layout, capacity and "
                                     "concurrency, and two comparisons on the same budget (every "
                                     "layer in full; vLLM's hybrid allocator).",
                            .opts = t,
                            .n_opts = GL_NOPTS(t)};
    GL_CLI_PARSE(&s, argc, argv);
    gl_cli_ngl_check("glint plan", device, ngl);
    struct gl_err err = {0};
    struct gl_kv_params p = {budget, (int32_t)bs, GL_KV_F16, 1, 0, 0};
    if (gl_kv_dtype_parse(dtype_s, &p.dtype, &err) != GL_OK) {
        fprintf(stderr, "glint plan: %s\n", err.msg);
        return 2;
    }
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    op.allow_no_data = 1; // metadata only: header-only files are fine
    struct gl_model_config cfg;
    if (gl_gguf_open(&g, model, &op, &err) != GL_OK ||
        gl_model_config_parse(&cfg, g, &err) != GL_OK) {
        fprintf(stderr, "glint plan: %s: %s\n", model, err.msg);
        gl_gguf_close(g);
        return 1;
    }
    // --dflash: only the drafter's config is read (gl_engine_dflash_kv_bytes reads d->cfg).
    struct gl_dflash dd;
    memset(&dd, 0, sizeof dd);
    if (dflash) {
        struct stat sb;
        struct gl_gguf *dg = NULL;
        gl_status ds = stat(dflash, &sb) == 0 && S_ISDIR(sb.st_mode)
                           ? gl_dflash_hf_config_parse(&dd.cfg, dflash, &err)
                       : gl_gguf_open(&dg, dflash, &op, &err) == GL_OK
                           ? gl_dflash_config_parse(&dd.cfg, dg, &err)
                           : GL_E_IO;
        gl_gguf_close(dg);
        if (ds != GL_OK) {
            fprintf(stderr, "glint plan: %s: %s\n", dflash, err.msg);
            gl_gguf_close(g);
            return 1;
        }
    }
    struct gl_engine_params dep = {
        .max_num_seqs = (int32_t)max_seqs, .max_num_batched_tokens = (int32_t)mbt, .kv = p};
    dep.spec.method = dflash ? GL_SPEC_DFLASH : GL_SPEC_NONE;
    dep.spec.dflash = dflash ? &dd : NULL;
    // The serve defaults (server.c size_kv): the pool from the memory free after the weights
    // (the drafter's too, and its context pool at the wanted length), the length fitted to it.
    struct gl_kv_fit_in in = {.utilization = util,
                              .budget_fixed = budget > 0 ? budget : 0,
                              .max_model_len = max_len > 0 ? max_len : cfg.n_ctx_train,
                              .max_len_fixed = max_len > 0,
                              .max_num_seqs = (int32_t)max_seqs};
    int64_t avail = budget > 0 ? -1 : gl_host_mem_available();
    in.mem_free = avail - gl_host_model_bytes(model) - (dflash ? gl_host_model_bytes(dflash) : 0);
    dep.max_model_len = (int32_t)in.max_model_len;
    in.mem_free -= gl_engine_dflash_kv_bytes(&dep);
    if (budget <= 0 && avail < 0)
        in.budget_fixed = (int64_t)1 << 30; // as serve: memory unknown, 1 GiB
    // --device: the pool's device side from the device heap as serve does (server.c size_kv):
    // heap x utilization minus the weights and scratch there; with a split the host side from
    // host memory.
    struct gl_kv_params fp = p;
    int64_t room = -1;
    if (device >= 0) {
        struct gl_engine_params ep = {.device = device,
                                      .n_gpu_layers = ngl,
                                      .max_num_seqs = (int32_t)max_seqs,
                                      .max_model_len = (int32_t)in.max_model_len,
                                      .max_num_batched_tokens = (int32_t)mbt,
                                      .kv = p};
        fp = gl_engine_kv_params(&ep);
        if (in.budget_fixed <= 0) {
            struct gl_model_dev_mem dm0;
            uint64_t heap0, range0;
            if (gl_engine_dev_kv_room(g, &cfg, &ep, util, &room, &heap0, &range0, &dm0, &err) !=
                GL_OK) {
                fprintf(stderr, "glint plan: %s\n", err.msg);
                gl_gguf_close(g);
                return 1;
            }
            in.dev_sized = 1;
            in.dev_mem_free = room;
        }
    }
    struct gl_kv_fit fit;
    if (gl_kv_fit_compute(&cfg, &fp, &in, &fit, &err) != GL_OK) {
        fprintf(stderr, "glint plan: %s\n", err.msg);
        gl_gguf_close(g);
        return 1;
    }
    if (budget <= 0) // a given budget is printed as given (the pages are the same)
        budget = fit.budget_bytes;
    p.budget_bytes = budget;
    p.dev_pages = fit.n_dev_pages; // 0 unless the device side was sized from the heap
    max_len = fit.max_model_len;
    struct gl_kv_plan pl;
    if (gl_kv_plan_compute(&cfg, &p, max_len, &pl, &err) != GL_OK) {
        fprintf(stderr, "glint plan: %s\n", err.msg);
        gl_gguf_close(g);
        return 1;
    }
    struct plan_dev pd = {.device = device, .kv_room = room};
    // Under partial offload the device copy is the pool's device side only (as the engine's:
    // gl_engine_kv_params, gl_kv_pool_dev_bytes).
    struct gl_kv_plan dpl = pl;
    if (device >= 0) {
        struct gl_engine_params ep = {.device = device, .n_gpu_layers = ngl, .kv = p};
        const struct gl_kv_params dp = gl_engine_kv_params(&ep);
        if (gl_kv_plan_compute(&cfg, &dp, max_len, &dpl, &err) != GL_OK) {
            fprintf(stderr, "glint plan: %s\n", err.msg);
            gl_gguf_close(g);
            return 1;
        }
    }
    const int64_t dev_pages = dpl.n_dev_pages > 0 ? dpl.n_dev_pages : dpl.n_pages;
    pd.dev_pages = dev_pages;
    pd.host_pages = dpl.n_pages - dev_pages;
    if (device >= 0 && plan_device(g, &cfg, &p, ngl, (int)mbt, (int32_t)max_seqs, (int32_t)max_len,
                                   (uint64_t)dev_pages * (uint64_t)dpl.page_bytes, &pd) != 0) {
        gl_gguf_close(g);
        return 1;
    }
    gl_gguf_close(g);
    int n_sliding = 0;
    for (int l = 0; l < cfg.n_layer; l++)
        n_sliding += cfg.swa[l] && cfg.window > 0;
    const int64_t seq_blocks = (max_len + bs - 1) / bs;
    const int64_t slide =
        touched(cfg.window, bs) < seq_blocks ? touched(cfg.window, bs) : seq_blocks;
    const int64_t chunk_extra =
        pl.n_sliding_groups *
        ((touched(cfg.window + mbt - 1, bs) < seq_blocks ? touched(cfg.window + mbt - 1, bs)
                                                         : seq_blocks) -
         slide);
    // No hybrid layout: every group keeps every block.
    const double full_conc = (double)pl.n_pages / (double)(pl.n_groups * seq_blocks);
    const int64_t full_tokens = pl.n_pages / pl.n_groups * bs;
    // vLLM: same groups, page without fp8 scales (per-tensor scale), sliding groups sized for
    // window - 1 + max_num_batched_tokens positions.
    const size_t esz = gl_kv_dtype_size(p.dtype);
    const int64_t v_page =
        (int64_t)pl.group_size * 2 * bs * cfg.n_head_kv * cfg.head_dim * (int64_t)esz;
    const int64_t v_pages = budget / v_page;
    int64_t v_slide = touched(cfg.window + vllm_mbt, bs);
    v_slide = v_slide < seq_blocks ? v_slide : seq_blocks;
    const double v_conc =
        (double)v_pages / (double)(pl.n_global_groups * seq_blocks + pl.n_sliding_groups * v_slide);
    // Upper bound: the budget spent on global layers only (no sliding pages, no scales).
    const double glob_bound =
        (double)budget / ((double)(cfg.n_layer - n_sliding) * 2.0 * cfg.n_head_kv * cfg.head_dim *
                          (double)esz * (double)max_len);

    printf("{\"kv_cache_memory\": %lld, \"kv_cache_dtype\": \"%s\", \"block_size\": %lld, "
           "\"max_model_len\": %lld,\n",
           (long long)budget, gl_kv_dtype_name(p.dtype), bs, max_len);
    printf(" \"fit\": {\"memory_free_after_weights\": %lld, \"gpu_memory_utilization\": %g, "
           "\"max_num_seqs\": %lld, \"capped_by_max_num_seqs\": %s, \"max_model_len_lowered\": "
           "%s, \"wanted_max_model_len\": %lld},\n",
           (long long)(avail >= 0 ? in.mem_free : -1), util, max_seqs,
           fit.capped ? "true" : "false", fit.lowered ? "true" : "false",
           (long long)in.max_model_len);
    printf(" \"n_layer\": %d, \"n_sliding_layers\": %d, \"n_global_layers\": %d, \"window\": %d,\n",
           cfg.n_layer, n_sliding, cfg.n_layer - n_sliding, cfg.window);
    printf(
        " \"groups\": {\"n_groups\": %d, \"group_size\": %d, \"sliding\": %d, \"global\": %d},\n",
        pl.n_groups, pl.group_size, pl.n_sliding_groups, pl.n_global_groups);
    printf(" \"page_bytes\": %zu, \"n_pages\": %lld, \"pages_per_seq\": %lld, "
           "\"sliding_pages_per_seq\": %lld,\n",
           pl.page_bytes, (long long)pl.n_pages, (long long)pl.pages_per_seq,
           (long long)(pl.n_sliding_groups * slide));
    printf(" \"kv_capacity_tokens\": %lld, \"max_concurrency\": %.4f,\n",
           (long long)pl.kv_capacity_tokens, pl.max_concurrency);
    printf(" \"bytes_per_token_global\": %zu, \"bytes_per_token_all\": %zu,\n",
           pl.bytes_per_token_global, pl.bytes_per_token_all);
    printf(" \"prefill_chunk\": {\"max_num_batched_tokens\": %lld, \"extra_pages_per_prefilling_"
           "seq\": %lld},\n",
           mbt, (long long)chunk_extra);
    printf(" \"all_layers_full\": {\"kv_capacity_tokens\": %lld, \"max_concurrency\": %.4f},\n",
           (long long)full_tokens, full_conc);
    printf(" \"vllm_hybrid\": {\"max_num_batched_tokens\": %lld, \"page_bytes\": %lld, "
           "\"n_pages\": %lld, \"kv_capacity_tokens\": %lld, \"max_concurrency\": %.4f},\n",
           vllm_mbt, (long long)v_page, (long long)v_pages, (long long)(v_conc * (double)max_len),
           v_conc);
    printf(" \"global_layers_only_bound\": {\"max_concurrency\": %.4f}%s\n", glob_bound,
           device >= 0 || dflash ? "," : "}");
    if (dflash) { // what the engine allocates at the fitted length
        dep.max_model_len = (int32_t)max_len;
        const struct gl_kv_params dkp = gl_engine_dflash_kv_params(&dep);
        struct gl_model_config dcfg;
        gl_dflash_kv_config(&dd, &dcfg);
        struct gl_kv_plan dpl2;
        if (gl_kv_plan_compute(&dcfg, &dkp, max_len, &dpl2, &err) != GL_OK) {
            fprintf(stderr, "glint plan: %s: %s\n", dflash, err.msg);
            return 1;
        }
        printf(" \"dflash_context_pool\": {\"bytes\": %lld, \"dtype\": \"f32\", \"page_bytes\": "
               "%zu, \"n_pages\": %lld, \"pages_per_seq\": %lld, \"n_layer\": %d, \"window\": "
               "%d}%s\n",
               (long long)dkp.budget_bytes, dpl2.page_bytes, (long long)dpl2.n_pages,
               (long long)dpl2.pages_per_seq, dd.cfg.n_layer, dd.cfg.window,
               device >= 0 ? "," : "}");
    }
    return device < 0 ? 0 : print_device(&pd);
}
