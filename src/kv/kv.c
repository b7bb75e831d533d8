// SPDX-License-Identifier: MIT
// kv: the paged hybrid KV pool (contract and page layout in kv.h). Pages are counted by refs
// from sequence block tables; a page with no refs is either clean (free stack) or keyed by a
// prefix hash (LRU list, evictable, still hit-able). Keys live in an open-addressing table
// (linear probing, backward-shift deletion) from (chain hash, group) to the page.
// Invariants (gl_kv_pool_audit checks them all): ref == number of table entries naming the page;
// ref-0 pages are in exactly one of clean/LRU; hashed pages are in the key table under their key.
// fp8 scale choice: one scale per row (one position of one layer's K or V: Hkv*D elements),
// bf16(amax(row) / 448) (quant/fp8.h: why bf16 and not a 1-byte power of two). A row is written
// once and never rescaled, so a per-row scale costs no read-modify-write and adapts to every
// token's magnitude; vLLM's per-tensor scale needs a calibration pass (or defaults to 1.0 and
// clips/underflows rows far from it). A per-(page, head) scale would cost less but is fixed by
// the page's first row (later rows clip) or the page must be rescaled. The cost is 2 bytes per
// 256 fp8 bytes: 0.8% of capacity on the release shape, 6.41 sequences of 131,072 in 5.5 GiB
// (an f32 scale: 6.36; an E8M0 byte: 6.44; none: 6.46).
#include "kv/kv.h"

#include <string.h>

struct kv_page {
    int32_t ref;
    int32_t group; // group of the key; -1: not keyed
    uint64_t hash;
    int32_t prev, next; // LRU links (ref-0 keyed pages only)
    int32_t in_lru;
};

struct gl_kv_pool {
    int n_layer, n_groups, group_size;
    int32_t block_size, window;
    enum gl_kv_dtype dtype;
    int prefix_cache;
    int32_t *layer_group, *layer_idx; // [n_layer]
    uint8_t *group_sliding;           // [n_groups]
    uint8_t *group_dev;               // [n_groups] 1: the group's layers run on the device
    size_t row_bytes, page_bytes, scale_off, scale_bytes;
    int64_t n_pages;
    int64_t n_dev_pages; // pages 0..n_dev_pages-1 serve device groups only, the rest host ones
    uint8_t *mem;
    struct kv_page *pages;
    // Per side (0 host, 1 device; a page's side is pg < n_dev_pages): a stack of clean free
    // pages and an LRU of keyed ref-0 pages. Without a split every page is on side 0.
    int32_t *clean[2];
    int64_t n_clean[2];
    int32_t lru_head[2], lru_tail[2];
    int64_t n_lru[2];
    int32_t *ht; // key table: page ids, -1 empty
    uint64_t ht_mask;
    struct gl_kv_seq *seqs; // live sequences (for the audit)
};

struct gl_kv_seq {
    struct gl_kv_pool *pool;
    struct gl_kv_seq *prev, *next;
    int64_t len;          // positions committed
    int64_t reserved_end; // positions with pages reserved (>= len)
    int64_t cap;          // blocks per group table
    int32_t *tab;         // [n_groups * cap], -1 unmapped
    int64_t rel_from;     // sliding blocks below this are released
    uint64_t chain;       // hash of blocks 0..n_hashed-1
    int64_t n_hashed;
    int hash_off;  // commit without tokens: stop keying
    int32_t *part; // [block_size] tokens of the current partial block
};

// ---- dtype ----

const char *gl_kv_dtype_name(enum gl_kv_dtype t)
{
    switch (t) {
    case GL_KV_F32:
        return "f32";
    case GL_KV_F16:
        return "f16";
    case GL_KV_BF16:
        return "bf16";
    case GL_KV_FP8_E4M3:
        return "fp8_e4m3";
    }
    return "?";
}

gl_status gl_kv_dtype_parse(const char *s, enum gl_kv_dtype *out, struct gl_err *err)
{
    static const struct {
        const char *name;
        enum gl_kv_dtype t;
    } names[] = {{"auto", GL_KV_F16}, // vLLM: the model's dtype; glint's default choice is f16
                 {"f32", GL_KV_F32},      {"float32", GL_KV_F32},      {"f16", GL_KV_F16},
                 {"float16", GL_KV_F16},  {"bf16", GL_KV_BF16},        {"bfloat16", GL_KV_BF16},
                 {"fp8", GL_KV_FP8_E4M3}, {"fp8_e4m3", GL_KV_FP8_E4M3}};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].t;
            return GL_OK;
        }
    return gl_err_set(err, GL_E_INVAL,
                      "kv: cache dtype \"%.40s\" is not one of auto, f32, f16, bf16, fp8, fp8_e4m3",
                      s ? s : "(null)");
}

// ---- layout ----

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int layer_sliding(const struct gl_model_config *cfg, int l)
{
    return cfg->swa[l] && cfg->window > 0;
}

struct layout {
    int n_dev_layers; // the last n_dev_layers layers are the device's; 0: no split
    int dev_sliding;  // sliding layers among them
    int n_sliding, n_global, group_size, n_groups, n_sliding_groups, n_global_groups;
    size_t row_bytes, scale_bytes, page_bytes, scale_off;
};

static gl_status layout_compute(const struct gl_model_config *cfg, const struct gl_kv_params *p,
                                struct layout *lo, struct gl_err *err)
{
    memset(lo, 0, sizeof *lo);
    if (p->block_size < 1 || p->block_size > 4096)
        return gl_err_set(err, GL_E_INVAL, "kv: block size %d not in 1..4096", p->block_size);
    if ((unsigned)p->dtype > GL_KV_FP8_E4M3)
        return gl_err_set(err, GL_E_INVAL, "kv: unknown cache dtype %d", (int)p->dtype);
    if (cfg->n_layer < 1 || cfg->n_layer > GL_MODEL_MAX_LAYERS || cfg->n_head_kv < 1 ||
        cfg->head_dim < 1)
        return gl_err_set(err, GL_E_INVAL, "kv: config has %d layers, %d kv heads of %d",
                          cfg->n_layer, cfg->n_head_kv, cfg->head_dim);
    if (p->n_dev_layers < 0)
        return gl_err_set(err, GL_E_INVAL, "kv: %d device layers", p->n_dev_layers);
    // A split only when some layers run on each side; all on one side is the plain pool.
    lo->n_dev_layers = p->n_dev_layers < cfg->n_layer ? p->n_dev_layers : 0;
    int dev_sliding = 0;
    for (int l = 0; l < cfg->n_layer; l++) {
        lo->n_sliding += layer_sliding(cfg, l);
        dev_sliding += l >= cfg->n_layer - lo->n_dev_layers && layer_sliding(cfg, l);
    }
    lo->dev_sliding = dev_sliding;
    lo->n_global = cfg->n_layer - lo->n_sliding;
    // gcd(x, 0) = x. With a split, g also divides each side's sliding and global counts, so
    // groups (filled in layer order, host layers first) never mix host and device layers.
    lo->group_size = (int)gcd64(lo->n_sliding, lo->n_global);
    if (lo->n_dev_layers > 0)
        lo->group_size =
            (int)gcd64(gcd64(lo->group_size, dev_sliding), lo->n_dev_layers - dev_sliding);
    lo->n_sliding_groups = lo->n_sliding / lo->group_size;
    lo->n_global_groups = lo->n_global / lo->group_size;
    lo->n_groups = lo->n_sliding_groups + lo->n_global_groups;
    const size_t bs = (size_t)p->block_size, g = (size_t)lo->group_size;
    lo->row_bytes = (size_t)cfg->n_head_kv * (size_t)cfg->head_dim * gl_kv_dtype_size(p->dtype);
    lo->scale_bytes = p->dtype == GL_KV_FP8_E4M3 ? 2 : 0; // one bf16 scale per fp8 row
    lo->scale_off = g * 2 * bs * lo->row_bytes;
    lo->page_bytes = (lo->scale_off + g * 2 * bs * lo->scale_bytes + 63) / 64 * 64;
    return GL_OK;
}

// Device-side pages of a pool of n_pages: the device groups' share of the pages (each group of
// a sequence takes about as many pages as any other group of its kind, and both sides hold the
// same mix of kinds when the layers' pattern repeats), at least one per group on each side.
// A requested count (gl_kv_params.dev_pages > 0) replaces the share, under the same bounds.
static int64_t dev_pages_of(const struct layout *lo, int64_t n_pages, int64_t req)
{
    if (lo->n_dev_layers <= 0)
        return 0;
    const int64_t dg = lo->n_dev_layers / lo->group_size, hg = lo->n_groups - dg;
    int64_t d = req > 0 ? req : n_pages * dg / lo->n_groups;
    if (d > n_pages - hg)
        d = n_pages - hg;
    if (d < dg)
        d = dg;
    return d;
}

// Most blocks `span` consecutive positions can touch.
static int64_t blocks_touched(int64_t span, int64_t bs)
{
    return span <= 0 ? 0 : (span - 1 + bs - 1) / bs + 1;
}

gl_status gl_kv_plan_compute(const struct gl_model_config *cfg, const struct gl_kv_params *p,
                             int64_t max_model_len, struct gl_kv_plan *out, struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    struct layout lo;
    gl_status st = layout_compute(cfg, p, &lo, err);
    if (st != GL_OK)
        return st;
    if (p->budget_bytes <= 0 || max_model_len <= 0)
        return gl_err_set(err, GL_E_INVAL, "kv: budget %lld bytes / max_model_len %lld must be > 0",
                          (long long)p->budget_bytes, (long long)max_model_len);
    const int64_t bs = p->block_size;
    out->n_groups = lo.n_groups;
    out->group_size = lo.group_size;
    out->n_sliding_groups = lo.n_sliding_groups;
    out->n_global_groups = lo.n_global_groups;
    out->page_bytes = lo.page_bytes;
    out->n_pages = p->budget_bytes / (int64_t)lo.page_bytes;
    out->n_dev_pages = dev_pages_of(&lo, out->n_pages, p->dev_pages);
    out->n_dev_groups = lo.n_dev_layers / lo.group_size;
    // A sliding group holds the blocks of the last `window` positions (the next query's keys
    // p-window+1..p) -- at most blocks_touched(window) -- or the whole sequence if shorter.
    const int64_t seq_blocks = (max_model_len + bs - 1) / bs;
    int64_t slide = blocks_touched(cfg->window, bs);
    slide = slide < seq_blocks ? slide : seq_blocks;
    out->pages_per_seq = lo.n_global_groups * seq_blocks + lo.n_sliding_groups * slide;
    out->dev_pages_per_seq = (lo.n_dev_layers - lo.dev_sliding) / lo.group_size * seq_blocks +
                             lo.dev_sliding / lo.group_size * slide;
    out->max_concurrency = (double)out->n_pages / (double)out->pages_per_seq;
    if (lo.n_global_groups > 0) {
        int64_t left = out->n_pages - lo.n_sliding_groups * blocks_touched(cfg->window, bs);
        out->kv_capacity_tokens = left > 0 ? left / lo.n_global_groups * bs : 0;
    } else {
        out->kv_capacity_tokens = out->n_pages / lo.n_groups * bs;
    }
    const size_t per_layer = 2 * (lo.row_bytes + lo.scale_bytes);
    out->bytes_per_token_global = (size_t)lo.n_global * per_layer;
    out->bytes_per_token_all = (size_t)cfg->n_layer * per_layer;
    return GL_OK;
}

// Pages one sequence of len positions needs (gl_kv_plan_compute's pages_per_seq).
static int64_t seq_pages(const struct gl_model_config *cfg, const struct gl_kv_params *p,
                         int64_t len)
{
    struct gl_kv_params q = *p;
    q.budget_bytes = 1;
    struct gl_kv_plan pl;
    GL_ASSERT(gl_kv_plan_compute(cfg, &q, len, &pl, NULL) == GL_OK); // checked by the caller
    return pl.pages_per_seq;
}

// Whether one sequence of len positions fits a split pool of pd device and ph host pages.
static int seq_fits_sides(const struct gl_model_config *cfg, const struct gl_kv_params *p,
                          int64_t len, int64_t pd, int64_t ph)
{
    struct gl_kv_params q = *p;
    q.budget_bytes = 1;
    struct gl_kv_plan pl;
    GL_ASSERT(gl_kv_plan_compute(cfg, &q, len, &pl, NULL) == GL_OK); // checked by the caller
    return pl.dev_pages_per_seq <= pd && pl.pages_per_seq - pl.dev_pages_per_seq <= ph;
}

gl_status gl_kv_fit_compute(const struct gl_model_config *cfg, const struct gl_kv_params *p,
                            const struct gl_kv_fit_in *in, struct gl_kv_fit *out,
                            struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    if (!(in->utilization > 0.0 && in->utilization <= 1.0) || in->max_model_len < 1 ||
        in->max_num_seqs < 1)
        return gl_err_set(err, GL_E_INVAL,
                          "kv: fit: utilization %g not in (0, 1], max_model_len %lld or "
                          "max_num_seqs %d < 1",
                          in->utilization, (long long)in->max_model_len, (int)in->max_num_seqs);
    struct gl_kv_params q = *p;
    q.budget_bytes = 1;
    struct gl_kv_plan pl;
    gl_status st = gl_kv_plan_compute(cfg, &q, in->max_model_len, &pl, err);
    if (st != GL_OK)
        return st;
    const int64_t page = (int64_t)pl.page_bytes;
    const int sized = in->budget_fixed <= 0 && in->dev_sized;
    const int split = pl.n_dev_groups > 0;
    int64_t pages, pd = 0, ph = 0;
    if (in->budget_fixed > 0) {
        pages = in->budget_fixed / page;
    } else if (sized && split) {
        // Each side from its own memory, capped at max_num_seqs sequences of that side's pages.
        const int64_t dpps = pl.dev_pages_per_seq, hpps = pl.pages_per_seq - dpps;
        pd = (in->dev_mem_free > 0 ? in->dev_mem_free : 0) / page;
        ph = (int64_t)((double)(in->mem_free > 0 ? in->mem_free : 0) * in->utilization /
                       (double)page);
        if (pd > dpps * in->max_num_seqs)
            pd = dpps * in->max_num_seqs;
        if (ph > hpps * in->max_num_seqs)
            ph = hpps * in->max_num_seqs;
        out->capped = pd == dpps * in->max_num_seqs && ph == hpps * in->max_num_seqs;
        const int64_t dg = pl.n_dev_groups, hg = pl.n_groups - dg;
        if (pd < dg || ph < hg)
            return gl_err_set(
                err, GL_E_LIMIT,
                "kv: the %s side holds %lld KV pages of %lld bytes (%lld bytes "
                "free there for the pool); even one block of each of its %lld "
                "layer groups needs %lld bytes",
                pd < dg ? "device" : "host", (long long)(pd < dg ? pd : ph), (long long)page,
                (long long)(pd < dg ? in->dev_mem_free : in->mem_free),
                (long long)(pd < dg ? dg : hg), (long long)((pd < dg ? dg : hg) * page));
        pages = pd + ph;
        out->n_dev_pages = pd;
    } else {
        const double usable = sized
                                  ? (double)(in->dev_mem_free > 0 ? in->dev_mem_free : 0)
                                  : (double)(in->mem_free > 0 ? in->mem_free : 0) * in->utilization;
        pages = (int64_t)(usable / (double)page);
        const int64_t want = pl.pages_per_seq * in->max_num_seqs;
        if (pages > want) {
            pages = want;
            out->capped = 1;
        }
    }
    // The smallest pool that holds anything: one block of every group.
    if (pages < pl.n_groups)
        return gl_err_set(err, GL_E_LIMIT,
                          "kv: %s %lld bytes hold %lld KV pages of %lld bytes; even one block of "
                          "every layer group needs %d pages (%lld bytes)",
                          in->budget_fixed > 0 ? "--kv-cache-memory"
                          : sized              ? "the device memory free after the weights allows"
                                               : "the memory free after the weights allows",
                          (long long)(in->budget_fixed > 0 ? in->budget_fixed
                                      : sized              ? in->dev_mem_free
                                                           : in->mem_free),
                          (long long)pages, (long long)page, (int)pl.n_groups,
                          (long long)pl.n_groups * page);
    out->budget_bytes = pages * page;
    out->max_model_len = in->max_model_len;
    if (!in->max_len_fixed && (sized && split ? !seq_fits_sides(cfg, p, in->max_model_len, pd, ph)
                                              : pl.pages_per_seq > pages)) {
        // Longest length whose sequence fits: its pages (per side) grow with the length.
        int64_t lo = 1, hi = in->max_model_len; // fits(lo), !fits(hi)
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (sized && split ? seq_fits_sides(cfg, p, mid, pd, ph)
                               : seq_pages(cfg, p, mid) <= pages)
                lo = mid;
            else
                hi = mid;
        }
        out->max_model_len = lo;
        out->lowered = 1;
    }
    return GL_OK;
}

// ---- key table ----

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

// h_i = H(h_{i-1}, tokens of block i): the key depends on the whole prefix and on token order.
// H is SipHash-2-4 under a random per-process key (base.h): block keys are shared between
// clients, and with a public hash a client could craft a block with the key of another's
// prefix and have its KV served to them (docs/SECURITY.md).
static uint64_t chain_hash(uint64_t prev, const int32_t *tok, int32_t bs)
{
    struct gl_siphash h;
    gl_siphash_init(&h, gl_hash_key());
    gl_siphash_update(&h, &prev, sizeof prev);
    gl_siphash_update(&h, tok, (size_t)bs * sizeof *tok);
    return gl_siphash_final(&h);
}

static uint64_t ht_home(const struct gl_kv_pool *pool, uint64_t hash, int32_t group)
{
    return mix64(hash + (uint64_t)group * 0xD6E8FEB86659FD93ull) & pool->ht_mask;
}

static int32_t ht_find(const struct gl_kv_pool *pool, uint64_t hash, int32_t group)
{
    for (uint64_t i = ht_home(pool, hash, group);; i = (i + 1) & pool->ht_mask) {
        int32_t pg = pool->ht[i];
        if (pg < 0)
            return -1;
        if (pool->pages[pg].hash == hash && pool->pages[pg].group == group)
            return pg;
    }
}

static void ht_insert(struct gl_kv_pool *pool, int32_t pg)
{
    const struct kv_page *p = &pool->pages[pg];
    uint64_t i = ht_home(pool, p->hash, p->group);
    while (pool->ht[i] >= 0)
        i = (i + 1) & pool->ht_mask;
    pool->ht[i] = pg;
}

static void ht_remove(struct gl_kv_pool *pool, int32_t pg)
{
    const struct kv_page *p = &pool->pages[pg];
    uint64_t i = ht_home(pool, p->hash, p->group);
    while (pool->ht[i] != pg) {
        GL_ASSERT(pool->ht[i] >= 0);
        i = (i + 1) & pool->ht_mask;
    }
    // Backward shift: move later entries of the probe run into the hole when their home slot
    // does not lie cyclically in (hole, slot].
    for (uint64_t j = (i + 1) & pool->ht_mask; pool->ht[j] >= 0; j = (j + 1) & pool->ht_mask) {
        const struct kv_page *q = &pool->pages[pool->ht[j]];
        uint64_t k = ht_home(pool, q->hash, q->group);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            pool->ht[i] = pool->ht[j];
            i = j;
        }
    }
    pool->ht[i] = -1;
}

// ---- page lists ----

static int page_side(const struct gl_kv_pool *pool, int32_t pg)
{
    return pg < pool->n_dev_pages;
}

static void lru_unlink(struct gl_kv_pool *pool, int32_t pg)
{
    struct kv_page *p = &pool->pages[pg];
    const int sd = page_side(pool, pg);
    GL_ASSERT(p->in_lru);
    if (p->prev >= 0)
        pool->pages[p->prev].next = p->next;
    else
        pool->lru_head[sd] = p->next;
    if (p->next >= 0)
        pool->pages[p->next].prev = p->prev;
    else
        pool->lru_tail[sd] = p->prev;
    p->prev = p->next = -1;
    p->in_lru = 0;
    pool->n_lru[sd]--;
}

static void lru_append(struct gl_kv_pool *pool, int32_t pg)
{
    struct kv_page *p = &pool->pages[pg];
    const int sd = page_side(pool, pg);
    p->prev = pool->lru_tail[sd];
    p->next = -1;
    if (pool->lru_tail[sd] >= 0)
        pool->pages[pool->lru_tail[sd]].next = pg;
    else
        pool->lru_head[sd] = pg;
    pool->lru_tail[sd] = pg;
    p->in_lru = 1;
    pool->n_lru[sd]++;
}

// A page with ref 1: a clean one if any, else the least recently freed keyed one (its key is
// dropped). The caller has checked that one exists.
static int32_t page_alloc(struct gl_kv_pool *pool, int side)
{
    int32_t pg;
    if (pool->n_clean[side] > 0) {
        pg = pool->clean[side][--pool->n_clean[side]];
    } else {
        pg = pool->lru_head[side];
        GL_ASSERT(pg >= 0);
        lru_unlink(pool, pg);
        ht_remove(pool, pg);
        pool->pages[pg].group = -1;
    }
    GL_ASSERT(pool->pages[pg].ref == 0);
    pool->pages[pg].ref = 1;
    return pg;
}

static void page_acquire(struct gl_kv_pool *pool, int32_t pg)
{
    struct kv_page *p = &pool->pages[pg];
    if (p->ref == 0)
        lru_unlink(pool, pg);
    p->ref++;
}

static void page_release(struct gl_kv_pool *pool, int32_t pg)
{
    struct kv_page *p = &pool->pages[pg];
    GL_ASSERT(p->ref > 0);
    if (--p->ref > 0)
        return;
    if (p->group >= 0)
        lru_append(pool, pg);
    else {
        const int sd = page_side(pool, pg);
        pool->clean[sd][pool->n_clean[sd]++] = pg;
    }
}

// ---- pool ----

gl_status gl_kv_pool_new(struct gl_kv_pool **out, const struct gl_model_config *cfg,
                         const struct gl_kv_params *p, struct gl_err *err)
{
    *out = NULL;
    struct layout lo;
    gl_status st = layout_compute(cfg, p, &lo, err);
    if (st != GL_OK)
        return st;
    if (p->budget_bytes < (int64_t)lo.page_bytes)
        return gl_err_set(err, GL_E_LIMIT,
                          "kv: budget of %lld bytes is below one page (%zu bytes: %d layers x "
                          "%d positions)",
                          (long long)p->budget_bytes, lo.page_bytes, lo.group_size, p->block_size);
    int64_t n_pages = p->budget_bytes / (int64_t)lo.page_bytes;
    if (n_pages > INT32_MAX / 4)
        return gl_err_set(err, GL_E_LIMIT, "kv: %lld pages is more than the pool supports",
                          (long long)n_pages);
    struct gl_kv_pool *pool = gl_calloc(1, sizeof *pool);
    if (!pool)
        return gl_err_set(err, GL_E_NOMEM, "kv: no memory for the pool");
    pool->n_layer = cfg->n_layer;
    pool->n_groups = lo.n_groups;
    pool->group_size = lo.group_size;
    pool->block_size = p->block_size;
    pool->window = cfg->window;
    pool->dtype = p->dtype;
    pool->prefix_cache = p->prefix_cache != 0;
    pool->row_bytes = lo.row_bytes;
    pool->page_bytes = lo.page_bytes;
    pool->scale_off = lo.scale_off;
    pool->scale_bytes = lo.scale_bytes;
    pool->n_pages = n_pages;
    pool->n_dev_pages = dev_pages_of(&lo, n_pages, p->dev_pages);
    if (lo.n_dev_layers > 0 && n_pages < lo.n_groups) {
        gl_kv_pool_free(pool);
        return gl_err_set(err, GL_E_LIMIT,
                          "kv: %lld pages cannot hold one page of each of %d layer groups on "
                          "the host and the device",
                          (long long)n_pages, lo.n_groups);
    }
    pool->lru_head[0] = pool->lru_tail[0] = pool->lru_head[1] = pool->lru_tail[1] = -1;
    uint64_t ht_cap = 16;
    while (ht_cap < 2 * (uint64_t)n_pages)
        ht_cap *= 2;
    pool->ht_mask = ht_cap - 1;
    pool->layer_group = gl_malloc((size_t)cfg->n_layer * sizeof(int32_t));
    pool->layer_idx = gl_malloc((size_t)cfg->n_layer * sizeof(int32_t));
    pool->group_sliding = gl_calloc((size_t)lo.n_groups, 1);
    pool->group_dev = gl_calloc((size_t)lo.n_groups, 1);
    pool->pages = gl_calloc((size_t)n_pages, sizeof *pool->pages);
    pool->clean[0] = gl_malloc((size_t)n_pages * sizeof(int32_t));
    pool->clean[1] = gl_malloc((size_t)(pool->n_dev_pages + 1) * sizeof(int32_t));
    pool->ht = gl_malloc(ht_cap * sizeof(int32_t));
    // With a device (all layers, or pages 0..n_dev_pages-1 of a split) the host bytes of the
    // device's pages are an address range only: the Vulkan backend keys its mirror by this base
    // and reads and writes K/V only on the device (backend_vk.c), the CPU backend touches only
    // host layers' views (pages >= n_dev_pages), and nothing here writes page bytes, so those
    // pages are not touched (glibc maps a block this size: not faulted in; RSS not measured).
    // Not allocating them would put the views' base outside the allocation; kept.
    pool->mem = gl_malloc_aligned((size_t)n_pages * lo.page_bytes);
    if (!pool->layer_group || !pool->layer_idx || !pool->group_sliding || !pool->group_dev ||
        !pool->pages || !pool->clean[0] || !pool->clean[1] || !pool->ht || !pool->mem) {
        gl_kv_pool_free(pool);
        return gl_err_set(err, GL_E_NOMEM, "kv: no memory for %lld pages of %zu bytes",
                          (long long)n_pages, lo.page_bytes);
    }
    // Sliding layers fill groups 0..n_sliding_groups-1 in layer order, global layers the rest.
    int n_s = 0, n_g = 0;
    for (int l = 0; l < cfg->n_layer; l++) {
        int k = layer_sliding(cfg, l) ? n_s++ : lo.n_sliding + n_g++;
        pool->layer_group[l] = k / lo.group_size;
        pool->layer_idx[l] = k % lo.group_size;
    }
    for (int l = cfg->n_layer - lo.n_dev_layers; l < cfg->n_layer; l++)
        pool->group_dev[pool->layer_group[l]] = 1;
    for (int l = 0; l < cfg->n_layer - lo.n_dev_layers; l++) // layout_compute's g: no mixing
        GL_ASSERT(!pool->group_dev[pool->layer_group[l]]);
    for (int gi = 0; gi < lo.n_sliding_groups; gi++)
        pool->group_sliding[gi] = 1;
    memset(pool->ht, 0xFF, ht_cap * sizeof(int32_t));
    for (int64_t i = 0; i < n_pages; i++) {
        pool->pages[i].group = -1;
        pool->pages[i].prev = pool->pages[i].next = -1;
    }
    // Each side's lowest page is handed out first.
    for (int64_t i = n_pages - 1; i >= 0; i--) {
        const int sd = page_side(pool, (int32_t)i);
        pool->clean[sd][pool->n_clean[sd]++] = (int32_t)i;
    }
    *out = pool;
    return GL_OK;
}

void gl_kv_pool_free(struct gl_kv_pool *pool)
{
    if (!pool)
        return;
    GL_ASSERT_MSG(!pool->seqs, "kv: pool freed with live sequences");
    gl_free(pool->layer_group);
    gl_free(pool->layer_idx);
    gl_free(pool->group_sliding);
    gl_free(pool->pages);
    gl_free(pool->clean[0]);
    gl_free(pool->clean[1]);
    gl_free(pool->group_dev);
    gl_free(pool->ht);
    gl_free_aligned(pool->mem);
    gl_free(pool);
}

int64_t gl_kv_pool_free_pages(const struct gl_kv_pool *pool)
{
    return pool->n_clean[0] + pool->n_lru[0] + pool->n_clean[1] + pool->n_lru[1];
}

const void *gl_kv_pool_base(const struct gl_kv_pool *pool)
{
    return pool->mem;
}

uint64_t gl_kv_pool_bytes(const struct gl_kv_pool *pool)
{
    return (uint64_t)pool->n_pages * pool->page_bytes;
}

uint64_t gl_kv_pool_dev_bytes(const struct gl_kv_pool *pool)
{
    return (uint64_t)(pool->n_dev_pages > 0 ? pool->n_dev_pages : pool->n_pages) * pool->page_bytes;
}

int64_t gl_kv_pool_total_pages(const struct gl_kv_pool *pool)
{
    return pool->n_pages;
}

int64_t gl_kv_pool_audit(const struct gl_kv_pool *pool)
{
    const int64_t N = pool->n_pages;
    int32_t *cnt = gl_calloc((size_t)N, sizeof *cnt);
    uint8_t *seen = gl_calloc((size_t)N, 1);
    GL_ASSERT_MSG(cnt && seen, "kv: audit out of memory");
    for (const struct gl_kv_seq *s = pool->seqs; s; s = s->next) {
        GL_ASSERT(s->pool == pool && s->len <= s->reserved_end);
        GL_ASSERT(s->reserved_end <= s->cap * pool->block_size);
        for (int64_t i = 0; i < (int64_t)pool->n_groups * s->cap; i++) {
            int32_t pg = s->tab[i];
            GL_ASSERT(pg >= -1 && pg < N);
            GL_ASSERT_MSG(pg < 0 || page_side(pool, pg) == pool->group_dev[i / s->cap],
                          "kv: page %d on the wrong side for group %lld", pg,
                          (long long)(i / s->cap));
            if (pg >= 0)
                cnt[pg]++;
        }
    }
    int64_t used = 0, keyed = 0;
    for (int64_t i = 0; i < N; i++) {
        const struct kv_page *p = &pool->pages[i];
        GL_ASSERT_MSG(p->ref == cnt[i], "kv: page %lld has ref %d but %d table entries",
                      (long long)i, p->ref, cnt[i]);
        used += p->ref > 0;
        GL_ASSERT(p->in_lru == (p->ref == 0 && p->group >= 0));
        if (p->group >= 0) {
            keyed++;
            GL_ASSERT(p->group < pool->n_groups);
            GL_ASSERT_MSG(ht_find(pool, p->hash, p->group) == (int32_t)i,
                          "kv: keyed page %lld is not found under its key", (long long)i);
        }
    }
    int64_t n_lru = 0, n_clean = 0;
    for (int sd = 0; sd < 2; sd++) {
        for (int64_t i = 0; i < pool->n_clean[sd]; i++) {
            int32_t pg = pool->clean[sd][i];
            GL_ASSERT(pg >= 0 && pg < N && !seen[pg] && page_side(pool, pg) == sd);
            seen[pg] = 1;
            GL_ASSERT(pool->pages[pg].ref == 0 && pool->pages[pg].group < 0);
        }
        n_clean += pool->n_clean[sd];
        int64_t n_lru_sd = 0;
        for (int32_t pg = pool->lru_head[sd], prev = -1; pg >= 0;
             prev = pg, pg = pool->pages[pg].next) {
            GL_ASSERT(!seen[pg] && pool->pages[pg].prev == prev && pool->pages[pg].in_lru);
            GL_ASSERT(page_side(pool, pg) == sd);
            seen[pg] = 1;
            n_lru_sd++;
            if (pool->pages[pg].next < 0)
                GL_ASSERT(pool->lru_tail[sd] == pg);
        }
        GL_ASSERT(n_lru_sd == pool->n_lru[sd]);
        n_lru += n_lru_sd;
    }
    GL_ASSERT_MSG(used + n_clean + n_lru == N,
                  "kv: %lld used + %lld clean + %lld cached != %lld pages", (long long)used,
                  (long long)n_clean, (long long)n_lru, (long long)N);
    int64_t in_ht = 0;
    for (uint64_t i = 0; i <= pool->ht_mask; i++)
        in_ht += pool->ht[i] >= 0;
    GL_ASSERT(in_ht == keyed);
    gl_free(cnt);
    gl_free(seen);
    return used;
}

// ---- sequences ----

gl_status gl_kv_seq_new(struct gl_kv_pool *pool, struct gl_kv_seq **out, struct gl_err *err)
{
    *out = NULL;
    struct gl_kv_seq *s = gl_calloc(1, sizeof *s);
    if (s)
        s->part = gl_malloc((size_t)pool->block_size * sizeof(int32_t));
    if (!s || !s->part) {
        gl_free(s);
        return gl_err_set(err, GL_E_NOMEM, "kv: no memory for a sequence");
    }
    s->pool = pool;
    s->next = pool->seqs;
    if (pool->seqs)
        pool->seqs->prev = s;
    pool->seqs = s;
    *out = s;
    return GL_OK;
}

void gl_kv_seq_free(struct gl_kv_seq *s)
{
    if (!s)
        return;
    struct gl_kv_pool *pool = s->pool;
    // Last blocks first: they reach the LRU tail earliest, so they are evicted before the
    // prompt's first blocks, which other requests are likelier to share.
    for (int64_t b = s->cap - 1; b >= 0; b--)
        for (int gi = 0; gi < pool->n_groups; gi++) {
            int32_t pg = s->tab[(size_t)gi * (size_t)s->cap + (size_t)b];
            if (pg >= 0)
                page_release(pool, pg);
        }
    if (s->prev)
        s->prev->next = s->next;
    else
        pool->seqs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    gl_free(s->tab);
    gl_free(s->part);
    gl_free(s);
}

int64_t gl_kv_seq_len(const struct gl_kv_seq *s)
{
    return s->len;
}

// Tables hold at least n_blocks blocks per group (new entries unmapped). 0 on no memory.
static int seq_grow(struct gl_kv_seq *s, int64_t n_blocks)
{
    if (n_blocks <= s->cap)
        return 1;
    const int G = s->pool->n_groups;
    int64_t cap = s->cap ? s->cap : 8;
    while (cap < n_blocks)
        cap *= 2;
    int32_t *t = gl_malloc((size_t)G * (size_t)cap * sizeof(int32_t));
    if (!t)
        return 0;
    memset(t, 0xFF, (size_t)G * (size_t)cap * sizeof(int32_t));
    for (int gi = 0; gi < G; gi++)
        if (s->cap)
            memcpy(t + (size_t)gi * (size_t)cap, s->tab + (size_t)gi * (size_t)s->cap,
                   (size_t)s->cap * sizeof(int32_t));
    gl_free(s->tab);
    s->tab = t;
    s->cap = cap;
    return 1;
}

static int32_t *seq_slot(const struct gl_kv_seq *s, int gi, int64_t b)
{
    return &s->tab[(size_t)gi * (size_t)s->cap + (size_t)b];
}

// Releases sliding-group blocks no future query can see: the next query is at len and sees
// keys from len - window + 1, so block b goes once (b + 1) * bs <= len - window + 1.
static void seq_release_window(struct gl_kv_seq *s)
{
    struct gl_kv_pool *pool = s->pool;
    if (pool->window <= 0)
        return;
    const int64_t lo = s->len - pool->window + 1;
    const int64_t upto = lo > 0 ? lo / pool->block_size : 0;
    for (int64_t b = s->rel_from; b < upto && b < s->cap; b++)
        for (int gi = 0; gi < pool->n_groups; gi++) {
            int32_t *slot = seq_slot(s, gi, b);
            if (pool->group_sliding[gi] && *slot >= 0) {
                page_release(pool, *slot);
                *slot = -1;
            }
        }
    if (upto > s->rel_from)
        s->rel_from = upto;
}

// Pages reserve(s, n) would newly take on side sd (0 host, 1 device; -1 both).
static int64_t pages_needed_side(const struct gl_kv_seq *s, int64_t n, int sd)
{
    if (n <= 0)
        return 0;
    const struct gl_kv_pool *pool = s->pool;
    const int64_t b0 = s->len / pool->block_size, b1 = (s->len + n - 1) / pool->block_size;
    int64_t need = 0;
    for (int gi = 0; gi < pool->n_groups; gi++)
        if (sd < 0 || pool->group_dev[gi] == sd)
            for (int64_t b = b0; b <= b1; b++)
                need += b >= s->cap || *seq_slot(s, gi, b) < 0;
    return need;
}

int64_t gl_kv_seq_pages_needed(const struct gl_kv_seq *s, int64_t n)
{
    return pages_needed_side(s, n, -1);
}

int gl_kv_seq_can_reserve(const struct gl_kv_seq *s, int64_t n, int64_t spare_per_group)
{
    const struct gl_kv_pool *pool = s->pool;
    for (int sd = 0; sd < 2; sd++) {
        int64_t groups = 0;
        for (int gi = 0; gi < pool->n_groups; gi++)
            groups += pool->group_dev[gi] == sd;
        if (pool->n_clean[sd] + pool->n_lru[sd] - pages_needed_side(s, n, sd) <
            spare_per_group * groups)
            return 0;
    }
    return 1;
}

gl_status gl_kv_seq_reserve(struct gl_kv_seq *s, int64_t n, struct gl_err *err)
{
    struct gl_kv_pool *pool = s->pool;
    if (n < 0 || n > ((int64_t)1 << 40))
        return gl_err_set(err, GL_E_INVAL, "kv: cannot reserve %lld positions", (long long)n);
    if (n == 0)
        return GL_OK;
    for (int sd = 0; sd < 2; sd++) {
        const int64_t need = pages_needed_side(s, n, sd),
                      free = pool->n_clean[sd] + pool->n_lru[sd];
        if (need > free)
            return gl_err_set(
                err, GL_E_LIMIT, "kv: positions %lld..%lld need %lld pages, %lld are free%s",
                (long long)s->len, (long long)(s->len + n - 1), (long long)need, (long long)free,
                pool->n_dev_pages == 0 ? ""
                : sd                   ? " on the device side"
                                       : " on the host side");
    }
    const int64_t b0 = s->len / pool->block_size, b1 = (s->len + n - 1) / pool->block_size;
    if (!seq_grow(s, b1 + 1))
        return gl_err_set(err, GL_E_NOMEM, "kv: no memory for a block table of %lld blocks",
                          (long long)(b1 + 1));
    for (int gi = 0; gi < pool->n_groups; gi++)
        for (int64_t b = b0; b <= b1; b++) {
            int32_t *slot = seq_slot(s, gi, b);
            if (*slot < 0)
                *slot = page_alloc(pool, pool->group_dev[gi]);
        }
    if (s->len + n > s->reserved_end)
        s->reserved_end = s->len + n;
    return GL_OK;
}

void gl_kv_seq_trim(struct gl_kv_seq *s)
{
    struct gl_kv_pool *pool = s->pool;
    const int64_t bs = pool->block_size;
    const int64_t b_end = (s->reserved_end + bs - 1) / bs, b_keep = (s->len + bs - 1) / bs;
    for (int64_t b = b_keep; b < b_end && b < s->cap; b++)
        for (int gi = 0; gi < pool->n_groups; gi++) {
            int32_t *slot = seq_slot(s, gi, b);
            if (*slot >= 0) {
                page_release(pool, *slot);
                *slot = -1;
            }
        }
    s->reserved_end = s->len;
}

void gl_kv_seq_commit(struct gl_kv_seq *s, const int32_t *tokens, int64_t n)
{
    struct gl_kv_pool *pool = s->pool;
    const int32_t bs = pool->block_size;
    GL_ASSERT_MSG(n >= 0 && s->len + n <= s->reserved_end,
                  "kv: commit of %lld positions at %lld beyond the %lld reserved", (long long)n,
                  (long long)s->len, (long long)s->reserved_end);
    if (!tokens)
        s->hash_off = 1;
    for (int64_t i = 0; i < n; i++) {
        if (tokens)
            s->part[s->len % bs] = tokens[i];
        s->len++;
        if (s->len % bs != 0 || !pool->prefix_cache || s->hash_off)
            continue;
        // Block b just filled: key its page in every group (a key another page already holds
        // stays with that page; this one then frees as clean).
        const int64_t b = s->len / bs - 1;
        GL_ASSERT(b == s->n_hashed);
        s->chain = chain_hash(s->chain, s->part, bs);
        s->n_hashed++;
        for (int gi = 0; gi < pool->n_groups; gi++) {
            int32_t pg = *seq_slot(s, gi, b);
            GL_ASSERT(pg >= 0);
            struct kv_page *p = &pool->pages[pg];
            if (p->group >= 0 || ht_find(pool, s->chain, gi) >= 0)
                continue;
            p->hash = s->chain;
            p->group = gi;
            ht_insert(pool, pg);
        }
    }
    seq_release_window(s);
}

int64_t gl_kv_seq_reuse_prefix(struct gl_kv_seq *s, const int32_t *tokens, int64_t n)
{
    struct gl_kv_pool *pool = s->pool;
    const int64_t bs = pool->block_size;
    GL_ASSERT_MSG(s->len == 0 && s->reserved_end == 0, "kv: prefix reuse on a used sequence");
    if (!pool->prefix_cache || n <= bs || !tokens)
        return 0;
    const int64_t kmax = (n - 1) / bs; // whole blocks, and never the last token
    uint64_t *h = gl_malloc((size_t)kmax * sizeof *h);
    if (!h)
        return 0;
    uint64_t prev = 0;
    for (int64_t b = 0; b < kmax; b++)
        prev = h[b] = chain_hash(prev, tokens + b * bs, (int32_t)bs);
    // Global groups: the longest run of cached blocks from block 0 in every one of them.
    int64_t k = kmax;
    for (int gi = 0; gi < pool->n_groups; gi++)
        for (int64_t b = 0; b < k && !pool->group_sliding[gi]; b++)
            if (ht_find(pool, h[b], gi) < 0)
                k = b;
    // Sliding groups: the next query (position k * bs) reads keys from k * bs - window + 1, so
    // those blocks must be cached; shorten k until they are.
    for (; k > 0; k--) {
        int64_t lo = k * bs - pool->window + 1;
        int64_t bl = pool->window > 0 && lo > 0 ? lo / bs : 0;
        int ok = 1;
        for (int gi = 0; gi < pool->n_groups && ok; gi++)
            for (int64_t b = bl; b < k && ok && pool->group_sliding[gi]; b++)
                ok = ht_find(pool, h[b], gi) >= 0;
        if (ok)
            break;
    }
    if (k == 0 || !seq_grow(s, k)) {
        gl_free(h);
        return 0;
    }
    const int64_t lo = k * bs - pool->window + 1;
    const int64_t bl = pool->window > 0 && lo > 0 ? lo / bs : 0;
    for (int gi = 0; gi < pool->n_groups; gi++)
        for (int64_t b = pool->group_sliding[gi] ? bl : 0; b < k; b++) {
            int32_t pg = ht_find(pool, h[b], gi);
            GL_ASSERT(pg >= 0);
            page_acquire(pool, pg);
            *seq_slot(s, gi, b) = pg;
        }
    s->len = s->reserved_end = k * bs;
    s->chain = h[k - 1];
    s->n_hashed = k;
    s->rel_from = bl;
    gl_free(h);
    return k * bs;
}

int64_t gl_kv_seq_pages_held(const struct gl_kv_seq *s, int sliding)
{
    int64_t held = 0;
    for (int gi = 0; gi < s->pool->n_groups; gi++)
        if (s->pool->group_sliding[gi] == (sliding != 0))
            for (int64_t b = 0; b < s->cap; b++)
                held += *seq_slot(s, gi, b) >= 0;
    return held;
}

struct gl_kv_view gl_kv_seq_view(const struct gl_kv_seq *s, int layer)
{
    const struct gl_kv_pool *pool = s->pool;
    GL_ASSERT(layer >= 0 && layer < pool->n_layer);
    const int gi = pool->layer_group[layer], li = pool->layer_idx[layer];
    const size_t bs = (size_t)pool->block_size;
    const size_t k_off = (size_t)li * 2 * bs * pool->row_bytes;
    const size_t ks_off = pool->scale_off + (size_t)li * 2 * bs * pool->scale_bytes;
    struct gl_kv_view v = {
        .block_size = pool->block_size,
        .n_blocks = (int32_t)((s->reserved_end + pool->block_size - 1) / pool->block_size),
        .pages = s->tab ? s->tab + (size_t)gi * (size_t)s->cap : NULL,
        .base = pool->mem,
        .page_bytes = pool->page_bytes,
        // A device layer's view covers the device side only: the device copy holds pages
        // 0..n_dev_pages-1 at their byte offsets from base (gl_kv_pool_dev_bytes).
        .n_pages = pool->group_dev[gi] ? pool->n_dev_pages : pool->n_pages,
        .row_bytes = pool->row_bytes,
        .k_off = k_off,
        .v_off = k_off + bs * pool->row_bytes,
        .k_scale_off = ks_off,
        .v_scale_off = ks_off + bs * pool->scale_bytes,
        .dtype = pool->dtype,
    };
    return v;
}
