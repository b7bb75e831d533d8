// SPDX-License-Identifier: MIT
// dflash_llama: llama.cpp's DFlash draft block for given contexts (issue 22, "the drafter is
// right"), for tests/oracle/check_dflash_llama.sh. Built by that script with c++ against
// bench/llama_build.sh's build (libllama). C++ because the DFlash entry points live in
// llama.cpp's staging header src/llama-ext.h, which is C++ (no extern "C").
//
// It does what common/speculative.cpp's common_speculative_impl_draft_dflash does, call for call:
//  * ctor:    llama_set_embeddings_layer_inp(ctx_tgt, target_layer_ids[k], true) for each k,
//             llama_set_embeddings_nextn(ctx_dft, true, true), llama_set_causal_attn(ctx_dft,
//             causal = dflash.attention.causal, default false); the drafter context's ctx_other
//             is the target context (common_speculative_init_from_params; the drafter has no
//             token_embd / output of its own);
//  * process: after the target decodes the context, the inputs of the target layers
//             (llama_get_embeddings_layer_inp), concatenated per token in target_layer_ids order,
//             are decoded into ctx_dft as an embd batch at the same positions, in n_ubatch chunks;
//  * draft:   one token batch [id_last, mask x n_max] at positions pos0 .. pos0 + n_max, every row
//             an output; draft token i (1..n_max) = the top of a top-k 10 sampler on row i, i.e.
//             the argmax of the row's logits (p_min 0: nothing cuts the draft).
// pos0 = the number of context tokens (the anchor id_last is the first token the target has not
// processed), as the server's slot.prompt.tokens.pos_next().
//
// Usage: dflash_llama --model T --draft D --contexts FILE --out DIR [--threads N] [--kv f32|f16]
//                    [--n-max K]
//   FILE: one context per line, ids separated by spaces; the last id is the anchor.
//   For context k it writes DIR/l<k>.logits: n_max rows x n_vocab f32 (block rows 1..n_max), and
//   prints one line "ctx k n_ctx N tokens t1 t2 ...". First line: "info n_max M mask ID ...".
#include "llama-ext.h"
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level level, const char *text, void *)
{
    if (level >= GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

static int die(const char *msg)
{
    fprintf(stderr, "dflash_llama: %s\n", msg);
    return 1;
}

int main(int argc, char **argv)
{
    const char *tpath = nullptr, *dpath = nullptr, *cpath = nullptr, *out = nullptr;
    int threads = 1;
    bool kv_f32 = true;
    int n_max_req =
        0; // 0: block_size - 1 (common_speculative's clamp of a larger --spec-draft-n-max)
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--model")
            tpath = argv[i + 1];
        else if (a == "--draft")
            dpath = argv[i + 1];
        else if (a == "--contexts")
            cpath = argv[i + 1];
        else if (a == "--out")
            out = argv[i + 1];
        else if (a == "--threads")
            threads = atoi(argv[i + 1]);
        else if (a == "--n-max")
            n_max_req = atoi(argv[i + 1]);
        else if (a == "--kv")
            kv_f32 = std::string(argv[i + 1]) == "f32";
        else
            return die("unknown argument");
    }
    if (!tpath || !dpath || !cpath || !out)
        return die(
            "usage: --model T --draft D --contexts FILE --out DIR [--threads N] [--kv f32|f16] "
            "[--n-max K]");

    std::vector<std::vector<llama_token>> ctxs;
    {
        FILE *f = fopen(cpath, "r");
        if (!f)
            return die("cannot open the contexts file");
        char line[65536];
        while (fgets(line, sizeof line, f)) {
            std::vector<llama_token> ids;
            for (char *t = strtok(line, " \n"); t; t = strtok(nullptr, " \n"))
                ids.push_back(atoi(t));
            if (ids.size() >= 2)
                ctxs.push_back(ids);
        }
        fclose(f);
    }

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model *mt = llama_model_load_from_file(tpath, mp);
    llama_model *md = llama_model_load_from_file(dpath, mp);
    if (!mt || !md)
        return die("loading the target or the drafter failed");

    const int n_cap = 1024;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_cap;
    cp.n_batch = n_cap;
    cp.n_ubatch = n_cap;
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    // Flash attention on a CPU casts K/V to F16; the KV cache is F16 by default. The gated arm
    // keeps both F32 so that the two sides differ by F32 rounding only.
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = kv_f32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    cp.type_v = kv_f32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    llama_context *ct = llama_init_from_model(mt, cp);
    if (!ct)
        return die("target context failed");
    llama_context_params cpd = cp;
    cpd.ctx_other = ct;
    llama_context *cd = llama_init_from_model(md, cpd);
    if (!cd)
        return die("drafter context failed");

    const int32_t *tl = llama_model_target_layer_ids(md);
    const uint32_t n_tl = llama_model_target_layer_ids_n(md);
    if (n_tl == 0)
        return die("the drafter has no target_layer_ids");
    const int n_embd_tgt = llama_model_n_embd(mt);
    const int n_embd_enc = (int)n_tl * n_embd_tgt;
    int block_size = 16;
    bool causal = false;
    {
        char buf[32] = {};
        if (llama_model_meta_val_str(md, "dflash.block_size", buf, sizeof buf) >= 0)
            block_size = atoi(buf);
        if (llama_model_meta_val_str(md, "dflash.attention.causal", buf, sizeof buf) >= 0)
            causal = strcmp(buf, "true") == 0;
    }
    // common_speculative clamps n_max to block_size - 1; the block is n_max + 1 rows, so a shorter
    // draft is a shorter (bidirectional) block, not a prefix of the full one.
    const int n_max = n_max_req > 0 && n_max_req < block_size - 1 ? n_max_req : block_size - 1;
    const llama_token mask = llama_vocab_mask(llama_model_get_vocab(md));
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(mt));
    printf("info n_max %d mask %d block_size %d selector_top_k %d causal %d n_extract %u layers",
           n_max, (int)mask, block_size, (int)llama_model_dflash_selector_top_k(md), (int)causal,
           n_tl);
    for (uint32_t k = 0; k < n_tl; k++)
        printf(" %d", (int)tl[k]);
    printf(" n_vocab %d kv %s\n", n_vocab, kv_f32 ? "f32" : "f16");

    for (uint32_t k = 0; k < n_tl; k++)
        llama_set_embeddings_layer_inp(ct, (uint32_t)tl[k], true);
    llama_set_embeddings_nextn(cd, true, true);
    llama_set_causal_attn(cd, causal);

    const int n_ubatch = (int)llama_n_ubatch(cd);
    llama_batch bt = llama_batch_init(n_cap, 0, 1);
    llama_batch bi = llama_batch_init(n_ubatch, n_embd_enc, 1);
    llama_batch bd = llama_batch_init(n_cap, 0, 1);
    for (size_t c = 0; c < ctxs.size(); c++) {
        const std::vector<llama_token> &ids = ctxs[c];
        const int n = (int)ids.size() - 1; // context rows; ids[n] is the anchor
        if (n + block_size > n_cap)
            return die("context too long");
        llama_memory_clear(llama_get_memory(ct), true);
        llama_memory_clear(llama_get_memory(cd), true);
        bt.n_tokens = n;
        for (int i = 0; i < n; i++) {
            bt.token[i] = ids[i];
            bt.pos[i] = i;
            bt.n_seq_id[i] = 1;
            bt.seq_id[i][0] = 0;
            bt.logits[i] = i == n - 1;
        }
        if (llama_decode(ct, bt) != 0)
            return die("target decode failed");
        for (int off = 0; off < n; off += n_ubatch) {
            const int nc = std::min(n_ubatch, n - off);
            bi.n_tokens = nc;
            for (uint32_t k = 0; k < n_tl; k++) {
                const float *layer = llama_get_embeddings_layer_inp(ct, (uint32_t)tl[k]);
                if (!layer)
                    return die("target layer input not extracted");
                for (int i = 0; i < nc; i++)
                    memcpy(bi.embd + (size_t)i * n_embd_enc + k * (size_t)n_embd_tgt,
                           layer + (size_t)(off + i) * n_embd_tgt,
                           (size_t)n_embd_tgt * sizeof(float));
            }
            for (int i = 0; i < nc; i++) {
                bi.pos[i] = off + i;
                bi.n_seq_id[i] = 1;
                bi.seq_id[i][0] = 0;
                bi.logits[i] = false;
            }
            if (llama_decode(cd, bi) != 0)
                return die("drafter context decode failed");
        }
        bd.n_tokens = n_max + 1;
        for (int i = 0; i <= n_max; i++) {
            bd.token[i] = i == 0 ? ids[n] : mask;
            bd.pos[i] = n + i;
            bd.n_seq_id[i] = 1;
            bd.seq_id[i][0] = 0;
            bd.logits[i] = true;
        }
        if (llama_decode(cd, bd) != 0)
            return die("drafter block decode failed");
        std::string path = std::string(out) + "/l" + std::to_string(c) + ".logits";
        FILE *f = fopen(path.c_str(), "wb");
        if (!f)
            return die("cannot write the logits");
        printf("ctx %zu n_ctx %d tokens", c, n);
        for (int i = 1; i <= n_max; i++) {
            const float *row = llama_get_logits_ith(cd, i);
            if (!row)
                return die("no logits for a block row");
            fwrite(row, sizeof(float), (size_t)n_vocab, f);
            int best = 0;
            for (int v = 1; v < n_vocab; v++)
                if (row[v] > row[best])
                    best = v;
            printf(" %d", best);
        }
        printf("\n");
        if (fclose(f) != 0)
            return die("writing the logits failed");
    }
    llama_batch_free(bt);
    llama_batch_free(bi);
    llama_batch_free(bd);
    llama_free(cd);
    llama_free(ct);
    llama_model_free(md);
    llama_model_free(mt);
    llama_backend_free();
    return 0;
}
