// SPDX-License-Identifier: MIT
// microbench_spec: timing program (not a test). Decode tokens/s of ONE greedy sequence through
// the engine with speculative decoding off and on, interleaved (off, ngram, replay... off, ...)
// in one process so load from other processes hits every mode alike; medians and ratios over
// off. The prompt copies text: 64 random ids P, P's own greedy continuation G (n tokens, from an
// off run), then P again, so the ngram lookup finds P ... G when the model repeats itself (with
// random weights it mostly does not: the acceptance is reported, not tuned to). The replay
// drafter proposes G itself, kept with probability alpha per token: alpha 0 is the pure cost of
// drafting k tokens that are all rejected, alpha 0.7 the goal point.
// Decode time: from the first token's event to the last one's (prefill excluded).
// Workload "extract" (issue 22's n-gram item): the prompt is an invoice (real tokenizer) and the
// output is a JSON extraction that copies its names, numbers and dates. A replay target makes
// the model produce exactly that answer: a logits processor keeps only the answer's next token
// (the forward passes, verification included, are real work; only the choice is fixed); drafts
// are verified against it, so the acceptance is that of vLLM's prompt lookup on this document,
// not of the random weights.
// Usage: microbench_spec MODEL [n=32] [rounds=3] [threads=2] [k=4] [batch=1] [copy|extract]
//        (extract: n is ignored; the answer's length is the run's)
#include "engine/engine.h"

#include "base/base.h"

#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { P_LEN = 64, MAX_N = 512, MAX_B = 16 };

struct run {
    int32_t tok[MAX_B][MAX_N + 8];
    int32_t n[MAX_B];
    int64_t t_first, t_last;
    double c_first, c_last; // process CPU seconds at those events (robust to other processes)
};

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_event(void *user, const struct gl_event *ev)
{
    struct run *r = user;
    int64_t now = gl_time_us();
    int32_t b = (int32_t)(ev->request_id - 1);
    if (!r->t_first) {
        r->t_first = now;
        r->c_first = cpu_s();
    }
    r->t_last = now;
    r->c_last = cpu_s();
    for (int32_t i = 0; i < ev->n_tokens && r->n[b] < MAX_N + 8; i++)
        r->tok[b][r->n[b]++] = ev->tokens[i];
}

// The replay target of the extract workload: the answer's next token is the only one left.
struct target {
    const int32_t *ans;
    int32_t n, pos;
};

static void target_mask(void *user, float *logits, int32_t n_vocab)
{
    const struct target *t = user;
    int32_t keep = t->ans[t->pos < t->n ? t->pos : t->n - 1];
    for (int32_t i = 0; i < n_vocab; i++)
        if (i != keep)
            logits[i] = -INFINITY;
}

static int target_accept(void *user, int32_t token)
{
    struct target *t = user;
    (void)token;
    t->pos++;
    return 0; // accepted (engine.h: nonzero refuses)
}

// Drafts are not cut (no grammar here): the target's verification rejects what leaves the answer,
// and those rows are paid for, as on a free-text request.
static int32_t target_draft_ok(void *user, const int32_t *draft, int32_t n)
{
    (void)user;
    (void)draft;
    return n;
}

static double run_once(const struct gl_model *m, const struct gl_spec_params *sp,
                       const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int threads,
                       int batch, const int32_t *target_ans, struct run *r,
                       struct gl_engine_stats *st)
{
    struct gl_engine_params p = gl_engine_default_params(m);
    p.kv.budget_bytes = (int64_t)256 << 20;
    p.kv.prefix_cache = 0; // every sequence computes its prompt: the same work in every mode
    p.max_num_seqs = batch;
    p.max_num_batched_tokens = 512;
    p.max_model_len = 1024;
    p.n_threads = threads;
    p.n_eos = 0;
    p.spec = *sp;
    struct gl_engine *e = NULL;
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_engine_new(&e, m, NULL, &p, &err) == GL_OK, "%s", err.msg);
    memset(r, 0, sizeof *r);
    struct gl_sample_params s = gl_sample_default_params();
    s.temperature = 0.0f;
    s.max_tokens = n_gen;
    s.ignore_eos = 1;
    for (int b = 0; b < batch; b++) {
        struct gl_request rq = {
            .prompt = prompt, .n_prompt = n_prompt, .sp = s, .on_event = on_event, .user = r};
        if (target_ans) {
            struct target *t = gl_calloc(1, sizeof *t);
            rq.procs = gl_calloc(1, sizeof *rq.procs);
            GL_ASSERT(t && rq.procs);
            *t = (struct target){.ans = target_ans, .n = n_gen};
            *rq.procs = (struct gl_logits_processor){.user = t,
                                                     .mask = target_mask,
                                                     .accept = target_accept,
                                                     .draft_ok = target_draft_ok,
                                                     .free = gl_free};
        }
        GL_ASSERT_MSG(gl_engine_submit(e, &rq, NULL, &err) == GL_OK, "%s", err.msg);
    }
    // Prefill every sequence before the clock starts (one step each chunk), then decode.
    GL_ASSERT_MSG(gl_engine_run(e, &err) == GL_OK, "%s", err.msg);
    gl_engine_stats(e, st);
    gl_engine_free(e);
    return (double)batch * (double)(n_gen - 1) / ((double)(r->t_last - r->t_first) * 1e-6);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The extract workload's document and answer: the answer copies spans of the document (names,
// numbers, dates, item descriptions), as the seed's structured-extraction traffic does.
static const char DOC[] =
    "INVOICE\n"
    "Northwind Precision Components GmbH\n"
    "Industriestrasse 48, 70565 Stuttgart, Germany\n"
    "VAT ID: DE 298 447 615 | Phone: +49 711 5583 2210 | billing@northwind-precision.de\n\n"
    "Bill to: Harbor Point Marine Services LLC, Attn: Accounts Payable (Maria Delgado-Reyes),\n"
    "1450 Waterfront Drive, Suite 300, Norfolk, VA 23510, United States\n\n"
    "Invoice number: NPC-2026-0418377\n"
    "Invoice date: 2026-11-17\n"
    "Due date: 2026-12-17 (net 30)\n"
    "Purchase order: HPMS-PO-88213\n"
    "Shipment: 3 pallets via Hapag-Lloyd, bill of lading HLCUSTR2611094\n\n"
    "Line items:\n"
    "1. Stainless steel hydraulic fitting, 3/4 in. NPT, part NPC-HF-0750-SS, quantity 240, unit "
    "price EUR 18.45, amount EUR 4,428.00\n"
    "2. Titanium impeller assembly, 210 mm, part NPC-IMP-210-TI, quantity 12, unit price EUR "
    "1,362.90, amount EUR 16,354.80\n"
    "3. Marine-grade shaft seal kit, part NPC-SSK-45-MG, quantity 60, unit price EUR 96.75, "
    "amount EUR 5,805.00\n"
    "4. Calibration and test certificate per EN 10204 3.1, quantity 1, unit price EUR 450.00, "
    "amount EUR 450.00\n\n"
    "Subtotal: EUR 27,037.80\n"
    "Freight and insurance: EUR 1,284.00\n"
    "VAT (0%, intra-community export, reverse charge): EUR 0.00\n"
    "Total due: EUR 28,321.80\n\n"
    "Payment: SEPA transfer to IBAN DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX, reference "
    "NPC-2026-0418377.\n\n"
    "Extract the invoice as JSON with the vendor, customer, invoice number, dates, purchase "
    "order, line items (description, part number, quantity, unit price, amount) and totals.\n";
static const char ANSWER[] =
    "{\"vendor\": {\"name\": \"Northwind Precision Components GmbH\", \"address\": "
    "\"Industriestrasse 48, 70565 Stuttgart, Germany\", \"vat_id\": \"DE 298 447 615\"}, "
    "\"customer\": {\"name\": \"Harbor Point Marine Services LLC\", \"contact\": \"Maria "
    "Delgado-Reyes\", \"address\": \"1450 Waterfront Drive, Suite 300, Norfolk, VA 23510, United "
    "States\"}, \"invoice_number\": \"NPC-2026-0418377\", \"invoice_date\": \"2026-11-17\", "
    "\"due_date\": \"2026-12-17\", \"purchase_order\": \"HPMS-PO-88213\", \"currency\": \"EUR\", "
    "\"line_items\": [{\"description\": \"Stainless steel hydraulic fitting, 3/4 in. NPT\", "
    "\"part_number\": \"NPC-HF-0750-SS\", \"quantity\": 240, \"unit_price\": 18.45, \"amount\": "
    "4428.00}, {\"description\": \"Titanium impeller assembly, 210 mm\", \"part_number\": "
    "\"NPC-IMP-210-TI\", \"quantity\": 12, \"unit_price\": 1362.90, \"amount\": 16354.80}, "
    "{\"description\": \"Marine-grade shaft seal kit\", \"part_number\": \"NPC-SSK-45-MG\", "
    "\"quantity\": 60, \"unit_price\": 96.75, \"amount\": 5805.00}], \"subtotal\": 27037.80, "
    "\"freight\": 1284.00, \"total_due\": 28321.80}";

static int32_t *encode(const struct gl_tokenizer *t, const char *text, int32_t *n)
{
    gl_token *ids = NULL;
    size_t n_ids = 0;
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_tokenizer_encode(t, text, strlen(text), 0, 0, &ids, &n_ids, &err) == GL_OK,
                  "%s", err.msg);
    *n = (int32_t)n_ids;
    return ids;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: microbench_spec MODEL [n=32] [rounds=3] [threads=2] [k=4] "
                        "[batch=1] [copy|extract]\n");
        return 2;
    }
    int32_t n_gen = argc > 2 ? atoi(argv[2]) : 32;
    const int rounds = argc > 3 ? atoi(argv[3]) : 3;
    const int threads = argc > 4 ? atoi(argv[4]) : 2;
    const int k = argc > 5 ? atoi(argv[5]) : 4;
    const int batch = argc > 6 ? atoi(argv[6]) : 1;
    const int extract = argc > 7 && strcmp(argv[7], "extract") == 0;
    GL_ASSERT(n_gen >= 2 && n_gen <= MAX_N && batch >= 1 && batch <= MAX_B);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    GL_ASSERT_MSG(gl_model_open(&m, argv[1], &mp, &err) == GL_OK, "%s", err.msg);
    static int32_t prompt[2 * P_LEN + MAX_N];
    static int32_t ref[MAX_N];
    static struct run r;
    struct gl_engine_stats st;
    const struct gl_spec_params off = {0};
    int32_t n_prompt = 0, *doc = NULL, *ans = NULL;
    if (extract) {
        struct gl_tokenizer *tok = NULL;
        GL_ASSERT_MSG(gl_model_load_tokenizer(m, &tok, &err) == GL_OK, "%s", err.msg);
        doc = encode(tok, DOC, &n_prompt);
        ans = encode(tok, ANSWER, &n_gen);
        gl_tokenizer_free(tok);
        GL_ASSERT_MSG(n_gen <= MAX_N, "the answer is %d tokens, over %d", n_gen, MAX_N);
        memcpy(ref, ans, (size_t)n_gen * sizeof *ref);
    } else {
        uint64_t x = 12345;
        for (int i = 0; i < P_LEN; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            prompt[i] = (int32_t)((x >> 33) % 100000) + 1000; // ordinary text ids
        }
        // G: P's continuation; the prompt P G P; its greedy output with speculation off is what
        // replay must propose.
        (void)run_once(m, &off, prompt, P_LEN, n_gen, threads, 1, NULL, &r, &st);
        memcpy(prompt + P_LEN, r.tok[0], (size_t)n_gen * sizeof *prompt);
        memcpy(prompt + P_LEN + n_gen, prompt, P_LEN * sizeof *prompt);
        n_prompt = 2 * P_LEN + n_gen;
        (void)run_once(m, &off, prompt, n_prompt, n_gen, threads, 1, NULL, &r, &st);
        memcpy(ref, r.tok[0], (size_t)n_gen * sizeof *ref);
    }
    enum { MODES = 4 };
    const char *names[MODES] = {"off", "ngram", "replay a=0", "replay a=0.7"};
    struct gl_spec_params modes[MODES] = {{0}};
    // fixed_k 1: always k, as measured before the cost model (docs/STATUS.md).
    modes[1] = (struct gl_spec_params){
        .method = GL_SPEC_NGRAM, .k = k, .lookup_min = 2, .lookup_max = 4, .fixed_k = 1};
    modes[2] = (struct gl_spec_params){.method = GL_SPEC_REPLAY,
                                       .k = k,
                                       .replay = ref,
                                       .n_replay = n_gen,
                                       .alpha = 0.0f,
                                       .fixed_k = 1};
    modes[3] = modes[2];
    modes[3].alpha = 0.7f;
    if (extract) { // vLLM's prompt lookup as configured (1..3 under its cost model here) and 2..4
        names[2] = "ngram 1..3";
        modes[2] = (struct gl_spec_params){
            .method = GL_SPEC_NGRAM, .k = k, .lookup_min = 1, .lookup_max = 3, .fixed_k = 1};
        names[3] = "ngram 2..4 cm";
        modes[3] = modes[1];
        modes[3].fixed_k = 0;
    }
    const int32_t *in = extract ? doc : prompt;
    const int32_t *target = extract ? ans : NULL;
    static double ts[MODES][64], cs[MODES][64]; // tokens per wall second, per CPU second
    struct gl_engine_stats last[MODES];
    int same[MODES] = {1, 1, 1, 1};
    for (int rd = 0; rd < rounds && rd < 64; rd++)
        for (int md = 0; md < MODES; md++) {
            ts[md][rd] =
                run_once(m, &modes[md], in, n_prompt, n_gen, threads, batch, target, &r, &last[md]);
            cs[md][rd] = (double)batch * (double)(n_gen - 1) / (r.c_last - r.c_first);
            for (int b = 0; b < batch; b++)
                same[md] &= r.n[b] == n_gen && memcmp(r.tok[b], ref, (size_t)n_gen * 4) == 0;
        }
    double med[MODES], cmed[MODES];
    for (int md = 0; md < MODES; md++) {
        qsort(ts[md], (size_t)rounds, sizeof(double), cmp_d);
        qsort(cs[md], (size_t)rounds, sizeof(double), cmp_d);
        med[md] = ts[md][rounds / 2];
        cmed[md] = cs[md][rounds / 2];
    }
    printf("%s: decode of %d tokens x batch %d (prompt %d), k %d, %d threads, %d interleaved "
           "rounds (median)\n",
           extract ? "extract" : "copy", n_gen, batch, n_prompt, k, threads, rounds);
    for (int md = 0; md < MODES; md++) {
        const struct gl_engine_stats *s = &last[md];
        printf("  %-13s %7.2f t/s  x%.3f (per CPU-s x%.3f)  drafts %lld, draft tokens %lld, "
               "accepted %lld (%.0f%%), steps %lld, output %s\n",
               names[md], med[md], med[md] / med[0], cmed[md] / cmed[0], (long long)s->spec_drafts,
               (long long)s->spec_draft_tokens, (long long)s->spec_accepted_tokens,
               s->spec_draft_tokens
                   ? 100.0 * (double)s->spec_accepted_tokens / (double)s->spec_draft_tokens
                   : 0.0,
               (long long)s->steps, same[md] ? "= off" : "DIFFERS");
    }
    gl_free(doc);
    gl_free(ans);
    gl_model_delete(m);
    return 0;
}
