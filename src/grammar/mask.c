// SPDX-License-Identifier: MIT
// mask: the vocabulary index (token bytes, byte tries in depth-first order, the plain-string
// token classes, the quote-token split, the shared class tries) and the token mask of a match
// state: the trie walk with one state copy per depth, the string-body walk with one frame copy
// per depth, and the caches (whole masks by match state; quote-free parts by frame value; class
// masks by accepted class strings). mask.h has the overview.
// Invariant: a token's bit is set iff its bytes, fed one by one to a copy of the state, are all
// accepted (gl_mask_fill_ref is that definition, and the tests compare the two), or the state
// expects it as a GN_TOKEN. Special and empty tokens are never byte-matched.
#include "grammar/mask.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// Plain tokens longer than this many code points are walked instead (bounds the class memory).
#define GL_PLAIN_MAX_CHARS 256
// Tokens longer than this are never allowed (depth is 16-bit; real vocabularies stay < 200).
#define GL_TOKEN_MAX_BYTES 4096
// Cached masks with at most this many allowed tokens are stored as an id list.
#define GL_MASK_SPARSE_MAX 2048
// Class tries (struct gl_ctrie) kept by a vocabulary for all grammars, least recently used out:
// at most GL_CSHARED_N in all, GL_CSHARED_FULL of them with a trie (~1 MB each). A trie in use
// by a grammar is never evicted; when none can be, a grammar builds its own.
#define GL_CSHARED_N    512
#define GL_CSHARED_FULL 64
// A partition's class trie is built once exact walks for it have visited GL_CTRIE_RENT nodes
// (about the build's cost: renting until the rent reaches the price is within 2x of knowing
// the future). Counted across grammars in a table of GL_CRENT_N slots.
#define GL_CTRIE_RENT 400000
#define GL_CRENT_N    1024
// String walks on the plain-byte stepper shared across grammars (memo_walk): the per-grammar
// memos key DFA states by number, which only that grammar's regex object gives meaning to; the
// shared table keys them by the regex's source and flags and the state's NFA set
// (gl_regex_state_canon), so a second schema with the same pattern or format (MaskBench compiles
// 8,968 schemas, many with `format: uri` or the same `pattern`) reuses the first one's walks.
// Bound: GL_XSHARE_N slots, each a key of at most GL_XKEY_MAX bytes (~200 for one regex) and
// one walk result (accepted class strings of a class trie, at most ~6 KB, or a whole quote-free
// part, v->words words: 25 KB with the 202k vocabulary), so at most 1024 x ~29 KB = ~30 MB per
// vocabulary. On every 10th MaskBench file 1,315 of 3,942 walks that missed the grammar's own
// memo were found here (1,047 with 256 slots).
#define GL_XSHARE_N 1024
#define GL_XKEY_MAX 4096
struct gl_xshare {
    uint64_t h;
    uint8_t *key; // klen bytes (canon_key), kcap allocated
    size_t klen, kcap;
    int64_t q;     // as struct gl_cmemo's
    uint32_t *acc; // aw words
    size_t aw;
};

// One trie node. Nodes are in depth-first preorder, so node i's subtree is [i, next) and the
// tokens ending in that subtree are ids[tok(i) .. tok(next)). The tokens ending exactly at i are
// ids[tok(i) .. tok(i + 1)) (a sentinel node n_nodes closes the last range).
struct gl_tnode {
    uint32_t next;  // index past this node's subtree
    uint32_t tok;   // first index into ids of the tokens ending here or below
    uint16_t depth; // bytes from the root (root 0)
    uint8_t byte;   // edge byte into this node
    uint8_t plain;  // max code points of the subtree's token suffixes after this node when they
                    // are all plain (see plain_chars), else GL_SUB_MIXED
};
#define GL_SUB_MIXED 255

struct gl_trie {
    struct gl_tnode *nodes; // n_nodes + 1 (sentinel)
    uint32_t n_nodes;
    int32_t *ids; // token ids in trie order
    uint32_t n_ids;
    int32_t max_depth;
    int ws_runs; // the subtrees of whitespace bytes at the root are large (trie_walk's levels)
};

struct gl_gvocab {
    int32_t n_vocab;
    size_t words; // mask words
    uint8_t *blob;
    uint32_t *off;       // token i bytes: blob[off[i] .. off[i + 1])
    uint32_t *excluded;  // bitset: special or empty, never byte-matched
    struct gl_trie full; // every byte-matchable token
    struct gl_trie slow; // the byte-matchable tokens that are not plain (walked on the fast path)
    struct gl_trie strq; // slow minus the tokens whose first non-plain byte is a control byte
    // The string-body tries (frame walks): a JSON string or key body rejects raw control bytes,
    // so tokens that reach one before any quote or backslash (ctrl_first) are left out.
    struct gl_trie noq;     // tokens without a '"' byte (they never leave a string body)
    uint32_t noq_root[256]; // noq's child of the root for each byte (0: none)
    struct gl_trie quot;    // byte-matchable tokens with a '"' byte
    struct gl_trie slnq;    // slow tokens without a '"' byte
    struct gl_trie bsl;     // tokens with a '\\' byte and no '"' (walked exactly by the class walk)
    struct gl_trie numq;    // tokens of number bytes only (0-9 + - . e E): the number walk
    struct gl_trie nonum;   // the other byte-matchable tokens
    // Quote tokens as P '"' S, split at the quote that ends a string they start in (the first
    // one no backslash escapes: quote_close_at), for string values (quote_part): the distinct P
    // (escapes included) and S, and each token's pair.
    struct gl_trie qesc; // quote tokens whose every quote is escaped: body tokens (frame walks)
    struct gl_trie qsuf; // the distinct non-empty S (ids: S index)
    const uint8_t **qp;  // distinct P: bytes (into blob) and lengths
    uint32_t *qp_len;
    int32_t n_qp, n_qs, qs_empty; // qs_empty: index of the empty S, or -1
    int32_t n_qd;
    int32_t *qd_tok, *qd_p, *qd_s; // token id, P index, S index
    uint8_t *qs_many; // per S: it holds two quotes or more (may close a further key: quote_okey)
    struct gl_trie qmany; // the P '"' S tokens whose S does (walked whole by quote_okey)
    // Every quote token's bytes before its first quote fit the budgets a free body's cache key
    // keeps apart (GL_QP_MAX_CHARS, free_max): quote_part may keep its result by that key.
    int qids_ok;
    uint32_t *plain; // (max_plain + 1) bitsets: plain[k] = plain tokens of 1..k code points
    int32_t max_plain;
    int32_t free_max; // a free body's budget above this accepts the same tokens (>= max_plain
                      // and >= the byte length of every slnq token)
    // Class tries built so far, for every grammar and thread (the one mutable part of the
    // index: appended under cmu, never changed or freed before the vocabulary).
    pthread_mutex_t cmu;
    struct gl_ctrie *cshared[GL_CSHARED_N];
    int n_cshared, n_cshared_full;
    uint64_t cclock;
    struct { // exact-walk nodes spent per partition not built yet (by hash, direct-mapped)
        uint64_t h;
        int64_t spent;
    } crent[GL_CRENT_N];
    // String walks shared by every grammar (memo_walk), by canonical key (see struct gl_xshare).
    pthread_mutex_t xmu;
    struct gl_xshare *xs; // GL_XSHARE_N slots, direct-mapped by the key's hash
    uint64_t ct_serial;   // the last class trie's serial (under cmu)
};

// A cached mask: the allowed ids when there are few (most states outside strings allow a few
// hundred tokens: ~1 KB instead of 25 KB), else the bitset.
struct gl_mentry {
    uint64_t hash;
    uint64_t stamp; // LRU clock value of the last use
    const struct gl_gvocab *v;
    struct gl_mstate *st;
    uint32_t *data; // n_ids token ids, or v->words bitset words when n_ids < 0
    int32_t n_ids;
    size_t cap_data; // uint32 units allocated
};

// Quote-free part of the mask of a string-body state, keyed by the string frame's value
// (gl_mstate_string_key): regex-constrained strings (formats, patterns) walk most of the trie
// on every mask, yet their frames repeat across positions and documents.
#define GL_SCACHE_N    128
#define GL_SFRAMES_CAP 1024 // threads of a string state handled frame by frame
#define GL_SKEY_MAX    (GL_SFRAME_MAX + 16)
// Quote-token prefixes (the text before the first quote) are at most this long; a string's
// minimum beyond it decides nothing about them.
#define GL_QP_MAX_CHARS 64
struct gl_sentry {
    uint64_t hash, stamp;
    uint64_t serial; // the mask (string_mask call) that last ORed it in
    uint32_t *qp;    // quote_part's accepted prefixes for this frame (when qp_ok)
    int32_t qp_first;
    int qp_ok;
    // quote_part's whole result for this frame and the state after the closing quote that the
    // quote cache keeps under serial qserial (0: none): the accepted quote token ids.
    uint64_t qserial;
    uint32_t *qids;
    int32_t n_qids;
    size_t cap_qids;
    const struct gl_gvocab *v;
    size_t key_len;
    uint8_t key[GL_SKEY_MAX];
    uint32_t *bits; // v->words words
};

// The class walk of string bodies. A string node's regexes and UTF-8 decoding cannot tell apart
// bytes of one class (gl_mstate_sframe_classes), so a token's fate in that body depends only on
// its class string. The quote-, backslash- and control-free tokens (nearly the whole vocabulary)
// map to a few thousand distinct class strings, kept in a trie that is walked with the string
// frame alone. The set of accepted class strings then keys a small cache of full masks: a
// word-counting pattern or a maxLength counter changes the frame at every token but not which
// class strings fit, so those states share one mask.
#define GL_CTRIE_N  6  // class tries per grammar (one per distinct partition in use)
#define GL_LCACHE_N 16 // masks per class trie, keyed by the accepted class strings
// A partition with more distinct class strings than 1/GL_CTRIE_POOR of the tokens is "poor"
// (many literal characters: formats, enumerations in patterns): its class trie would be nearly
// the token trie, and such DFAs reject most bytes early, so the exact walk is used instead.
#define GL_CTRIE_POOR 4
// Exact walks bounded by this many nodes are taken without looking for a class trie.
#define GL_EXACT_MAX_NODES 20000
struct gl_lentry {
    uint64_t hash, stamp;
    uint32_t *acc;  // accepted class strings (acc_words words)
    uint32_t *bits; // the mask part they make (v->words words)
};
// Immutable once built; shared by every grammar through the vocabulary's table.
struct gl_ctrie {
    int32_t refs;      // grammar views using it (under the vocabulary's cmu)
    uint64_t used;     // the vocabulary's clock at its last lookup (LRU)
    uint8_t cls[256];  // the partition (the key)
    uint64_t serial;   // unique per vocabulary (the shared walk memo's key: an address is reused)
    uint64_t cls_hash; // gl_fnv1a(cls, 256): lookups compare it before the 256 bytes
    uint8_t rep[256];  // a representative byte per class
    int poor;          // 1: the partition barely compresses the vocabulary; nothing else is built
    struct gl_trie t;  // over class strings; its ids are class-string indices
    uint32_t n_u;      // distinct class strings
    uint32_t *u_start; // tokens of class string u: toks[u_start[u] .. u_start[u + 1])
    int32_t *toks;
    size_t acc_words;
};
// A string walk's whole input when it runs on the plain-byte stepper (memo_walk): the trie, the
// regexes (by identity: a grammar's DFA states keep their numbers) and the stepper's fields;
// nothing else decides which tokens or class strings are accepted. Zero-filled before use, so
// it compares and hashes as bytes.
struct gl_ckey {
    const struct gl_trie *trie; // walked (a class trie, or the vocabulary's quote-free tokens)
    const struct gl_regex *rx[GL_SFAST_RX];
    int32_t n_rx, max_chars, min_chars, need_mc;
    uint32_t count, re[GL_SFAST_RX];
    uint8_t need, lo, hi, pad;
};
// A walk's result by stepper state (direct-mapped): the same DFA state recurs under other frame
// values (another property with `format: uri`, another count far below maxLength) that the
// frame cache keys apart, and a walk of the 85k-node uri class trie is ~1 ms. On MaskBench
// (every 10th file) it takes 3,500 class walks down to 830.
#define GL_CMEMO_N 64
struct gl_cmemo {
    uint64_t hash;
    struct gl_ckey key;
    int64_t q;     // valid for slacks >= q (see memo_walk)
    uint32_t *acc; // acc_words words; NULL: empty slot
};
// A grammar's use of one class trie: the walk's scratch and the masks keyed by accepted sets.
struct gl_cview {
    const struct gl_gvocab *v;
    const struct gl_ctrie *ct;
    int owned; // ct was built for this grammar alone (the vocabulary's table was full)
    uint64_t stamp;
    uint32_t *acc; // the walk's accepted class strings
    struct gl_lentry le[GL_LCACHE_N];
    struct gl_cmemo memo[GL_CMEMO_N];
};

// The quote suffixes S accepted after a string value's closing quote (quote_part, quote_multi),
// by the state there: the quote pops the string, so every position of one string value (and
// each value of the same property in later items or documents) reaches the same state, and the
// S walk (~480 suffixes stepped through a whole state, ~10 us) runs once per such state.
#define GL_QCACHE_N 64
// Names a declared-name key's walk follows directly (names_part); more: the frame walk.
#define GL_NAMES_MAX 256
// Thread sets (quote_multi) or closing prefixes (quote_key) handled per quote-token mask.
#define GL_QSETS_MAX 8
struct gl_qentry {
    uint64_t hash, stamp;
    uint64_t serial; // unique per fill (the cache clock), so a reference to it can go stale
    const struct gl_gvocab *v; // NULL: empty slot
    struct gl_mstate *st;
    uint32_t *accs; // accepted S, (n_qs + 31) / 32 words
};

// Exact walks (frame_part without a class trie) by stepper state: a poor partition (a `uri`
// or `email` format, many literal characters) or one still renting its trie walks 40k-400k
// nodes (~1-5 ms) each time, and its DFA states recur under other frame values. A slot holds a
// whole mask part (v->words words, ~25 KB), allocated on first use.
#define GL_XMEMO_N 64
// Whitespace levels trie_walk takes from its run states (tokens of up to this many leading
// whitespace bytes; indentation runs in the real vocabulary are shorter).
#define GL_WS_LEVELS 64
struct gl_mcache {
    struct gl_sentry se[GL_SCACHE_N];
    struct gl_cmemo xmemo[GL_XMEMO_N];
    struct gl_cview cv[GL_CTRIE_N];
    uint32_t *part; // one quote-free part when the string cache cannot keep it
    size_t part_words;
    uint32_t th[GL_SFRAMES_CAP];            // string_mask: the threads' handles (gl_mstate_sframes)
    struct gl_sentry *ents[GL_SFRAMES_CAP]; // frames_union: each thread's cache entry or NULL
    uint32_t *qsub; // quote_multi: per quote prefix P, the threads that take it and may end
    size_t qsub_cap;
    struct gl_mstate *qst; // quote_part: the state just after the string's closing quote
    uint32_t *qacc; // quote_part: accepted P, then accepted S (bitsets), then quote_key's S per P
    size_t qacc_words;
    uint32_t *qbits; // quote_part: the quote tokens accepted (v->words words, kept zero)
    struct gl_qentry qe[GL_QCACHE_N];        // accepted S by the state after the quote
    size_t qe_words;                         // words allocated for each qe[].accs
    uint32_t sparse[GL_MASK_SPARSE_MAX + 1]; // mcache_put: the allowed ids of a sparse mask
    const uint8_t *nm_p[GL_NAMES_MAX];       // names_part: the names' rest
    uint32_t nm_len[GL_NAMES_MAX];
    uint64_t *frames;          // (max depth + 2) frames of GL_SFRAME_MAX bytes for the class walk
    uint8_t xkey[GL_XKEY_MAX]; // memo_walk: the walk's canonical key (canon_key)
    int32_t cap, n;
    uint64_t clock;
    struct gl_mentry *e;
    struct gl_mstate **walk; // walk[d]: the state after the first d bytes of the current node path
    uint8_t *fresh;          // fresh[d]: walk[d] still equals its parent (copy can be skipped)
    uint64_t (*next)[4];     // next[d]: a superset of the bytes walk[d] accepts (next_bytes)
    int32_t n_walk;          // walk[1 .. n_walk - 1] allocated
    int32_t *exp;            // expected GN_TOKEN ids scratch
    // trie_walk's whitespace runs (wsst[0]: a probe): wsst[d] is the state after d whitespace
    // bytes when every
    // whitespace byte led to the same state at each step (wsok[d] 1: alive, 0: dead; levels
    // up to ws_known are decided, and ws_stop is the first one that is not uniform).
    struct gl_mstate *wsst[GL_WS_LEVELS + 1];
    uint64_t wsnext[GL_WS_LEVELS + 1][4];
    int8_t wsok[GL_WS_LEVELS + 1];
    int32_t ws_known, ws_stop;
    int32_t cap_exp;
};

// ---- vocabulary index ----

struct gl_tokref {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
};

static int tokref_cmp(const void *a, const void *b)
{
    const struct gl_tokref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

// The order of tokref_cmp for n refs that agree on their first d bytes, all distinct (class
// strings): an MSD radix sort, buckets by the byte at d (the end of a string first), nb - 1 the
// largest byte. Sorting a class trie's ~35k strings with qsort took most of its 8-20 ms build
// (~500k indirect comparisons); this is one counting pass per level over the strings that
// still share a prefix. Small groups go to insertion sort. tmp holds n refs.
static void class_sort(struct gl_tokref *a, struct gl_tokref *tmp, size_t n, uint32_t d, size_t nb)
{
    // Every bucket but the largest is sorted by a call (at most half of n), the largest by the
    // loop: the recursion is at most log2(n) deep, whatever the strings' shared prefixes.
    while (n > 16) {
        uint32_t cnt[257 + 1];
        memset(cnt, 0, (nb + 2) * sizeof *cnt);
        for (size_t i = 0; i < n; i++)
            cnt[(a[i].len > d ? (size_t)a[i].p[d] + 1 : 0) + 1]++;
        for (size_t b = 1; b <= nb; b++)
            cnt[b] += cnt[b - 1];
        // cnt[b]: bucket b's first slot, advanced while scattering: it ends at bucket b + 1.
        for (size_t i = 0; i < n; i++)
            tmp[cnt[a[i].len > d ? (size_t)a[i].p[d] + 1 : 0]++] = a[i];
        memcpy(a, tmp, n * sizeof *a);
        // Bucket 0 (strings ending at d) holds at most one string: they are distinct.
        size_t lo = cnt[0], big_lo = 0, big_n = 0;
        for (size_t b = 1; b <= nb; b++) {
            size_t m = cnt[b] - lo;
            if (m > big_n) {
                if (big_n > 1)
                    class_sort(a + big_lo, tmp, big_n, d + 1, nb);
                big_lo = lo;
                big_n = m;
            } else if (m > 1) {
                class_sort(a + lo, tmp, m, d + 1, nb);
            }
            lo = cnt[b];
        }
        a += big_lo;
        n = big_n;
        d++;
    }
    for (size_t i = 1; i < n; i++) {
        struct gl_tokref x = a[i];
        size_t j = i;
        while (j > 0 && tokref_cmp(&a[j - 1], &x) > 0) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

// Code points of a token made only of plain string characters (not '"', not '\\', not < 0x20,
// valid UTF-8: no overlongs, surrogates or values above U+10FFFF), else -1. The token may end
// inside its last character (byte-level BPE splits them): that character counts as one, since
// inside a free string body the partial character is accepted iff there is room for one more
// code point (any completion of a valid prefix is valid UTF-8).
static int32_t plain_chars(const uint8_t *p, size_t n)
{
    size_t i = 0;
    int32_t cnt = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x20 || c == '"' || c == '\\')
            return -1;
        if (c < 0x80) {
            i++;
            cnt++;
            continue;
        }
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF; // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return -1;
        }
        size_t have = n - i < len ? n - i : len; // a token may end inside a character
        if (have > 1 && (p[i + 1] < lo || p[i + 1] > hi))
            return -1;
        for (size_t k = 2; k < have; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return -1;
        i += have;
        cnt++;
    }
    return cnt;
}

// 1 when the first byte of p that ends a plain run is a control byte (< 0x20): inside a JSON
// string body that rejects raw control bytes, such a token can never be accepted, whatever the
// plain characters before it do (they only move the character count).
static int ctrl_first(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x20)
            return 1;
        if (c == '"' || c == '\\')
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len > n - i || plain_chars(p + i, len) != 1)
            return 0; // invalid or cut UTF-8 comes first
        i += len;
    }
    return 0;
}

// 1 when every byte of p is one a JSON number may contain (0-9 + - . e E).
static int num_only(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || p[i] == '+' || p[i] == '-' || p[i] == '.' ||
              p[i] == 'e' || p[i] == 'E'))
            return 0;
    return 1;
}

static inline int is_ws_byte(uint8_t b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\r';
}

static void trie_free(struct gl_trie *t)
{
    gl_free(t->nodes);
    gl_free(t->ids);
    memset(t, 0, sizeof *t);
}

// Class tries are allocated and freed unmetered (gl_alloc_meter): one in the vocabulary's table
// belongs to no grammar; one built for a grammar alone (struct gl_cview, owned) is charged to it
// by hand, ctrie_bytes when the view takes it and gives it up.
static void ctrie_free(struct gl_ctrie *ct)
{
    if (!ct)
        return;
    struct gl_alloc_meter *prev = gl_alloc_meter_swap(NULL);
    trie_free(&ct->t);
    gl_free(ct->u_start);
    gl_free(ct->toks);
    gl_free(ct);
    gl_alloc_meter_swap(prev);
}

static int64_t ctrie_bytes(const struct gl_ctrie *ct)
{
    return (int64_t)(gl_alloc_size(ct) + gl_alloc_size(ct->t.nodes) + gl_alloc_size(ct->t.ids) +
                     gl_alloc_size(ct->u_start) + gl_alloc_size(ct->toks));
}

// Builds the trie of refs[0..n) (sorted by tokref_cmp) in depth-first preorder; with_plain:
// fill each node's plain field (O(len^2) a token; class tries, whose strings are no bytes, skip
// it: a third of a class trie's build, ~2 ms).
static gl_status trie_build_opt(struct gl_trie *t, const struct gl_tokref *refs, size_t n,
                                int with_plain, struct gl_err *err)
{
    uint64_t cap = 2;
    uint32_t max_len = 0;
    for (size_t i = 0; i < n; i++) {
        cap += refs[i].len;
        if (refs[i].len > max_len)
            max_len = refs[i].len;
    }
    if (cap > UINT32_MAX / 2)
        return gl_err_set(err, GL_E_LIMIT, "grammar: vocabulary trie over %u nodes",
                          UINT32_MAX / 2);
    t->nodes = gl_malloc((size_t)cap * sizeof *t->nodes);
    t->ids = gl_malloc((n ? n : 1) * sizeof *t->ids);
    uint32_t *path = gl_malloc(((size_t)max_len + 1) * sizeof *path);
    if (!t->nodes || !t->ids || !path) {
        gl_free(path);
        trie_free(t);
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary trie");
    }
    uint32_t nn = 1, ni = 0, plen = 0;
    memset(&t->nodes[0], 0, sizeof t->nodes[0]);
    path[0] = 0;
    const struct gl_tokref *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct gl_tokref *r = &refs[i];
        uint32_t lcp = 0;
        if (prev) {
            uint32_t m = prev->len < r->len ? prev->len : r->len;
            while (lcp < m && prev->p[lcp] == r->p[lcp])
                lcp++;
        }
        while (plen > lcp)
            t->nodes[path[plen--]].next = nn;
        for (uint32_t d = lcp; d < r->len; d++) {
            struct gl_tnode *x = &t->nodes[nn];
            x->next = 0;
            x->tok = ni;
            x->depth = (uint16_t)(d + 1);
            x->byte = r->p[d];
            x->plain = 0;
            path[++plen] = nn++;
        }
        t->ids[ni++] = r->id;
        // The suffix of this token after each node on its path (O(len^2), once per vocabulary).
        for (uint32_t d = 0; with_plain && d <= r->len; d++) {
            struct gl_tnode *x = &t->nodes[path[d]];
            int32_t c = plain_chars(r->p + d, r->len - d);
            if (c < 0 || c >= GL_SUB_MIXED)
                x->plain = GL_SUB_MIXED;
            else if (x->plain != GL_SUB_MIXED && c > x->plain)
                x->plain = (uint8_t)c;
        }
        prev = r;
    }
    while (plen > 0)
        t->nodes[path[plen--]].next = nn;
    t->nodes[0].next = nn;
    t->nodes[nn].tok = ni; // sentinel
    t->nodes[nn].next = nn + 1;
    t->nodes[nn].depth = 0;
    t->n_nodes = nn;
    t->n_ids = ni;
    t->max_depth = (int32_t)max_len;
    // Worth the levels' four steps each (ws_level) only where many nodes sit under them.
    uint32_t ws_nodes = 0;
    for (uint32_t k = 1; k < nn; k = t->nodes[k].next)
        if (is_ws_byte(t->nodes[k].byte))
            ws_nodes += t->nodes[k].next - k;
    t->ws_runs = ws_nodes >= 64;
    gl_free(path);
    struct gl_tnode *shrunk = gl_realloc(t->nodes, ((size_t)nn + 1) * sizeof *t->nodes);
    if (shrunk)
        t->nodes = shrunk;
    return GL_OK;
}

static gl_status trie_build(struct gl_trie *t, const struct gl_tokref *refs, size_t n,
                            struct gl_err *err)
{
    return trie_build_opt(t, refs, n, 1, err);
}

// Where a token's text closes a JSON string it starts inside, outside an escape: the index of
// its first quote that no backslash escapes, or len when every quote is escaped (the token stays
// in the string body). An escape's first byte is skipped with its backslash; the rest of one
// (\\u's hex digits) holds neither a quote nor a backslash in any text the frame takes.
static uint32_t quote_close_at(const uint8_t *p, uint32_t len)
{
    uint32_t i = 0;
    while (i < len && p[i] != '"')
        i += p[i] == '\\' ? 2 : 1;
    return i < len ? i : len;
}

// The P '"' S split of the quote tokens q[0..n) (sorted; see struct gl_gvocab) at the quote that
// closes the string (quote_close_at); P may hold escapes. Distinct parts are found by linear
// search: the real vocabulary has ~160 P and ~480 S.
static gl_status quote_split_build(struct gl_gvocab *v, const struct gl_tokref *q, size_t n,
                                   struct gl_err *err)
{
    struct gl_tokref *esc = gl_malloc((n ? n : 1) * sizeof *esc);
    struct gl_tokref *suf = gl_malloc((n ? n : 1) * sizeof *suf);
    v->qp = gl_malloc((n ? n : 1) * sizeof *v->qp);
    v->qp_len = gl_malloc((n ? n : 1) * sizeof *v->qp_len);
    v->qd_tok = gl_malloc((n ? n : 1) * sizeof *v->qd_tok);
    v->qd_p = gl_malloc((n ? n : 1) * sizeof *v->qd_p);
    v->qd_s = gl_malloc((n ? n : 1) * sizeof *v->qd_s);
    v->qs_many = gl_calloc(n ? n : 1, 1);
    struct gl_tokref *many = gl_malloc((n ? n : 1) * sizeof *many);
    size_t n_many = 0;
    gl_status st = GL_OK;
    if (!esc || !suf || !v->qp || !v->qp_len || !v->qd_tok || !v->qd_p || !v->qd_s || !v->qs_many ||
        !many) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary index");
        goto done;
    }
    size_t n_esc = 0;
    v->qs_empty = -1;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = q[i].p;
        uint32_t k = quote_close_at(p, q[i].len);
        if (k == q[i].len) { // every quote escaped: a body token (qesc)
            esc[n_esc++] = q[i];
            continue;
        }
        int32_t a, b;
        for (a = 0; a < v->n_qp && !(v->qp_len[a] == k && !memcmp(v->qp[a], p, k)); a++)
            ;
        if (a == v->n_qp) {
            v->qp[a] = p;
            v->qp_len[a] = k;
            v->n_qp++;
        }
        const uint8_t *sp = p + k + 1;
        uint32_t sl = q[i].len - k - 1;
        for (b = 0; b < v->n_qs && !(suf[b].len == sl && !memcmp(suf[b].p, sp, sl)); b++)
            ;
        if (b == v->n_qs) {
            suf[b].p = sp;
            suf[b].len = sl;
            suf[b].id = b;
            if (sl == 0)
                v->qs_empty = b;
            v->n_qs++;
        }
        v->qd_tok[v->n_qd] = q[i].id;
        v->qd_p[v->n_qd] = a;
        v->qd_s[v->n_qd] = b;
        v->n_qd++;
        const uint8_t *q2 = sl ? memchr(sp, '"', sl) : NULL;
        if (q2 && memchr(q2 + 1, '"', sl - (size_t)(q2 + 1 - sp))) {
            v->qs_many[b] = 1;
            many[n_many++] = q[i]; // keeps the sorted order
        }
    }
    st = trie_build(&v->qesc, esc, n_esc, err);
    if (st != GL_OK)
        goto done;
    st = trie_build(&v->qmany, many, n_many, err);
    if (st != GL_OK)
        goto done;
    size_t n_suf = 0; // the trie of the non-empty S (the empty one is accepted by any state)
    for (int32_t b = 0; b < v->n_qs; b++)
        if (suf[b].len)
            suf[n_suf++] = suf[b];
    qsort(suf, n_suf, sizeof *suf, tokref_cmp);
    st = trie_build(&v->qsuf, suf, n_suf, err);
done:
    gl_free(esc);
    gl_free(suf);
    gl_free(many);
    return st;
}

// Phase 1 of gl_gvocab_new: every token's bytes into v->blob / v->off; specials, empty, over-long
// and added tokens into v->excluded; the rest into refs[*n_refs] (sorted by bytes) with their
// plain-character counts in chars[id] (-1: not a plain string token) and v->max_plain.
static void vocab_copy(struct gl_gvocab *v, const struct gl_tokenizer *tok, struct gl_tokref *refs,
                       size_t *n_refs, int32_t *chars)
{
    const int32_t n = v->n_vocab;
    uint32_t o = 0;
    *n_refs = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = gl_tokenizer_token_bytes(tok, i, &len);
        v->off[i] = o;
        if (p && len)
            memcpy(v->blob + o, p, len);
        else
            len = 0;
        o += (uint32_t)len;
        chars[i] = -1;
        if (len == 0 || len > GL_TOKEN_MAX_BYTES || i >= GL_TOK_N_BASE ||
            gl_tokenizer_is_special(tok, i)) {
            v->excluded[i >> 5] |= 1u << (i & 31);
            continue;
        }
        refs[*n_refs] = (struct gl_tokref){.p = v->blob + v->off[i], .len = (uint32_t)len, .id = i};
        (*n_refs)++;
        int32_t c = plain_chars(v->blob + v->off[i], len);
        if (c > GL_PLAIN_MAX_CHARS)
            c = -1;
        chars[i] = c;
        if (c > v->max_plain)
            v->max_plain = c;
    }
    v->off[n] = o;
    qsort(refs, *n_refs, sizeof *refs, tokref_cmp);
}

// Phase 2: the tries over subsets of refs (sorted; both arrays are scratch of n_refs entries,
// refs is reordered): full, quote / no quote (+ the quote split), number-only / not, slow (not
// plain), slow without a quote (slnq, + free_max and qids_ok), with a backslash, string-quote.
static gl_status vocab_tries(struct gl_gvocab *v, struct gl_tokref *refs, size_t n_refs,
                             struct gl_tokref *refs2, const int32_t *chars, struct gl_err *err)
{
    gl_status st = trie_build(&v->full, refs, n_refs, err);
    for (int q = 0; q < 2 && st == GL_OK; q++) {
        size_t m = 0;
        for (size_t i = 0; i < n_refs; i++) {
            int quoted = memchr(refs[i].p, '"', refs[i].len) != NULL;
            if (quoted == q && (q || !ctrl_first(refs[i].p, refs[i].len)))
                refs2[m++] = refs[i]; // keeps the sorted order
        }
        st = trie_build(q ? &v->quot : &v->noq, refs2, m, err);
        if (st == GL_OK && q)
            st = quote_split_build(v, refs2, m, err);
    }
    if (st != GL_OK)
        return st;
    for (uint32_t k = 1; k < v->noq.n_nodes; k = v->noq.nodes[k].next)
        v->noq_root[v->noq.nodes[k].byte] = k;
    for (int q = 0; q < 2 && st == GL_OK; q++) {
        size_t m = 0;
        for (size_t i = 0; i < n_refs; i++)
            if (num_only(refs[i].p, refs[i].len) == !q)
                refs2[m++] = refs[i];
        st = trie_build(q ? &v->nonum : &v->numq, refs2, m, err);
    }
    if (st != GL_OK)
        return st;
    size_t n_slow = 0;
    for (size_t i = 0; i < n_refs; i++)
        if (chars[refs[i].id] < 0)
            refs[n_slow++] = refs[i]; // keeps the sorted order
    if ((st = trie_build(&v->slow, refs, n_slow, err)) != GL_OK)
        return st;
    size_t n_slnq = 0;
    for (size_t i = 0; i < n_slow; i++)
        if (!memchr(refs[i].p, '"', refs[i].len) && !ctrl_first(refs[i].p, refs[i].len))
            refs2[n_slnq++] = refs[i];
    v->free_max = v->max_plain;
    for (size_t i = 0; i < n_slnq; i++)
        if ((int32_t)refs2[i].len > v->free_max)
            v->free_max = (int32_t)refs2[i].len;
    v->qids_ok = 1;
    for (size_t i = 0; i < n_slow; i++) { // every quote token is slow (not plain)
        // The bytes the body takes: up to the closing quote, or all of a qesc token.
        int32_t k = (int32_t)quote_close_at(refs[i].p, refs[i].len);
        if (memchr(refs[i].p, '"', refs[i].len) && (k > GL_QP_MAX_CHARS || k > v->free_max))
            v->qids_ok = 0;
    }
    if ((st = trie_build(&v->slnq, refs2, n_slnq, err)) != GL_OK)
        return st;
    size_t n_bsl = 0;
    for (size_t i = 0; i < n_slnq; i++)
        if (memchr(refs2[i].p, '\\', refs2[i].len))
            refs2[n_bsl++] = refs2[i];
    if ((st = trie_build(&v->bsl, refs2, n_bsl, err)) != GL_OK)
        return st;
    size_t n_strq = 0;
    for (size_t i = 0; i < n_slow; i++)
        if (!ctrl_first(refs[i].p, refs[i].len))
            refs[n_strq++] = refs[i];
    return trie_build(&v->strq, refs, n_strq, err);
}

// Phase 3: v->plain[k] = the tokens that are plain strings of at most k characters (k in
// 0..max_plain), one mask each, cumulative.
static gl_status vocab_plain(struct gl_gvocab *v, const int32_t *chars, struct gl_err *err)
{
    uint64_t plain_words;
    if (!gl_mul_ok((uint64_t)v->max_plain + 1, v->words, &plain_words) ||
        !(v->plain = gl_calloc((size_t)plain_words, sizeof *v->plain)))
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the plain-string classes");
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (chars[i] > 0)
            v->plain[(size_t)chars[i] * v->words + ((size_t)i >> 5)] |= 1u << (i & 31);
    for (int32_t k = 1; k <= v->max_plain; k++) {
        uint32_t *dst = v->plain + (size_t)k * v->words;
        const uint32_t *src = dst - v->words;
        for (size_t w = 0; w < v->words; w++)
            dst[w] |= src[w];
    }
    return GL_OK;
}

gl_status gl_gvocab_new(struct gl_gvocab **out, const struct gl_tokenizer *tok, struct gl_err *err)
{
    *out = NULL;
    int32_t n = gl_tokenizer_n_vocab(tok);
    if (n <= 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: tokenizer has no tokens");
    struct gl_gvocab *v = gl_calloc(1, sizeof *v);
    if (!v)
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary index");
    v->n_vocab = n;
    v->words = ((size_t)n + 31) / 32;
    pthread_mutex_init(&v->cmu, NULL);
    pthread_mutex_init(&v->xmu, NULL);
    gl_status st = GL_OK;
    struct gl_tokref *refs = NULL, *refs2 = NULL;
    int32_t *chars = NULL;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        if (gl_tokenizer_token_bytes(tok, i, &len))
            total += len;
    }
    if (total > UINT32_MAX) {
        st = gl_err_set(err, GL_E_LIMIT, "grammar: vocabulary has over 4 GiB of token bytes");
        goto out;
    }
    v->blob = gl_malloc(total ? (size_t)total : 1);
    v->off = gl_malloc(((size_t)n + 1) * sizeof *v->off);
    v->excluded = gl_calloc(v->words, sizeof *v->excluded);
    refs = gl_malloc((size_t)n * sizeof *refs);
    refs2 = gl_malloc((size_t)n * sizeof *refs2);
    chars = gl_malloc((size_t)n * sizeof *chars);
    if (!v->blob || !v->off || !v->excluded || !refs || !refs2 || !chars) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the vocabulary index");
        goto out;
    }
    size_t n_refs = 0;
    vocab_copy(v, tok, refs, &n_refs, chars);
    if ((st = vocab_tries(v, refs, n_refs, refs2, chars, err)) == GL_OK)
        st = vocab_plain(v, chars, err);
out:
    gl_free(refs);
    gl_free(refs2);
    gl_free(chars);
    if (st != GL_OK) {
        gl_gvocab_free(v);
        return st;
    }
    *out = v;
    return GL_OK;
}

void gl_gvocab_free(struct gl_gvocab *v)
{
    if (!v)
        return;
    trie_free(&v->full);
    trie_free(&v->slow);
    trie_free(&v->strq);
    trie_free(&v->noq);
    trie_free(&v->quot);
    trie_free(&v->slnq);
    trie_free(&v->bsl);
    trie_free(&v->qesc);
    trie_free(&v->qmany);
    trie_free(&v->qsuf);
    trie_free(&v->numq);
    trie_free(&v->nonum);
    gl_free(v->qp);
    gl_free(v->qp_len);
    gl_free(v->qd_tok);
    gl_free(v->qd_p);
    gl_free(v->qd_s);
    gl_free(v->qs_many);
    for (int i = 0; i < v->n_cshared; i++)
        ctrie_free(v->cshared[i]);
    pthread_mutex_destroy(&v->cmu);
    if (v->xs)
        for (int i = 0; i < GL_XSHARE_N; i++) {
            gl_free(v->xs[i].key);
            gl_free(v->xs[i].acc);
        }
    gl_free(v->xs);
    pthread_mutex_destroy(&v->xmu);
    gl_free(v->plain);
    gl_free(v->blob);
    gl_free(v->off);
    gl_free(v->excluded);
    gl_free(v);
}

int32_t gl_gvocab_n_vocab(const struct gl_gvocab *v)
{
    return v->n_vocab;
}

size_t gl_gvocab_mask_words(const struct gl_gvocab *v)
{
    return v->words;
}

int gl_gvocab_is_excluded(const struct gl_gvocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_vocab)
        return 1;
    return (v->excluded[id >> 5] >> (id & 31)) & 1;
}

const uint8_t *gl_gvocab_token(const struct gl_gvocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = v->off[id + 1] - v->off[id];
    return v->blob + v->off[id];
}

void gl_gvocab_sizes(const struct gl_gvocab *v, int64_t *trie_nodes, int64_t *slow_tokens,
                     int64_t *slow_nodes)
{
    *trie_nodes = v->full.n_nodes;
    *slow_tokens = v->slow.n_ids;
    *slow_nodes = v->slow.n_nodes;
}

// ---- mask cache and walk scratch ----

static void mcache_clear(struct gl_mcache *c)
{
    for (int32_t i = 0; i < c->n; i++) {
        gl_mstate_free(c->e[i].st);
        gl_free(c->e[i].data);
    }
    c->n = 0;
    for (int i = 0; i < GL_SCACHE_N; i++)
        c->se[i].v = NULL;
}

static void cview_clear(struct gl_cview *w)
{
    if (w->owned) {
        gl_alloc_meter_charge(-ctrie_bytes(w->ct));
        ctrie_free((struct gl_ctrie *)w->ct);
    } else if (w->ct) { // the table's entry: one user fewer (see struct gl_gvocab)
        struct gl_gvocab *v = (struct gl_gvocab *)w->v;
        pthread_mutex_lock(&v->cmu);
        ((struct gl_ctrie *)w->ct)->refs--;
        pthread_mutex_unlock(&v->cmu);
    }
    gl_free(w->acc);
    for (int i = 0; i < GL_LCACHE_N; i++) {
        gl_free(w->le[i].acc);
        gl_free(w->le[i].bits);
    }
    for (int i = 0; i < GL_CMEMO_N; i++)
        gl_free(w->memo[i].acc);
    memset(w, 0, sizeof *w);
}

void gl_mask_cache_free(struct gl_mcache *c)
{
    if (!c)
        return;
    mcache_clear(c);
    for (int32_t d = 1; d < c->n_walk; d++)
        gl_mstate_free(c->walk[d]);
    for (int i = 0; i < GL_SCACHE_N; i++) {
        gl_free(c->se[i].bits);
        gl_free(c->se[i].qp);
        gl_free(c->se[i].qids);
    }
    gl_free(c->qbits);
    for (int i = 0; i < GL_CTRIE_N; i++)
        cview_clear(&c->cv[i]);
    for (int i = 0; i < GL_XMEMO_N; i++)
        gl_free(c->xmemo[i].acc);
    for (int i = 0; i <= GL_WS_LEVELS; i++)
        gl_mstate_free(c->wsst[i]);
    gl_free(c->frames);
    gl_free(c->next);
    gl_mstate_free(c->qst);
    gl_free(c->qacc);
    for (int i = 0; i < GL_QCACHE_N; i++) {
        gl_mstate_free(c->qe[i].st);
        gl_free(c->qe[i].accs);
    }
    gl_free(c->qsub);
    gl_free(c->part);
    gl_free(c->walk);
    gl_free(c->fresh);
    gl_free(c->e);
    gl_free(c->exp);
    gl_free(c);
}

void gl_mask_set_cache(struct gl_grammar *g, int entries, int min_nodes)
{
    if (entries < 0)
        entries = 0;
    g->mcache_cap = entries;
    g->mcache_min_nodes = min_nodes < 0 ? 0 : min_nodes;
    struct gl_mcache *c = g->mcache;
    if (!c)
        return;
    struct gl_alloc_meter *prev = gl_alloc_meter_swap(&g->mem); // charged to g (mask.h)
    mcache_clear(c);
    gl_free(c->e);
    gl_alloc_meter_swap(prev);
    c->e = NULL;
    c->cap = 0;
}

gl_status gl_mask_prepare(struct gl_grammar *g, const struct gl_gvocab *v, struct gl_err *err)
{
    struct gl_mcache *c = g->mcache;
    if (!c) {
        c = gl_calloc(1, sizeof *c);
        if (!c)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the mask cache");
        g->mcache = c;
    }
    if (!c->exp) {
        c->cap_exp = 16;
        c->exp = gl_malloc((size_t)c->cap_exp * sizeof *c->exp);
        if (!c->exp)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the mask cache");
    }
    if (!c->qst) {
        gl_status st = gl_mstate_new(&c->qst, &g->ir, NULL, err);
        if (st != GL_OK)
            return st;
    }
    for (int i = 0; i <= GL_WS_LEVELS; i++) {
        if (!c->wsst[i]) {
            gl_status st = gl_mstate_new(&c->wsst[i], &g->ir, NULL, err);
            if (st != GL_OK)
                return st;
        }
    }
    // P scratch, S bits, and quote_key's S bits for each of up to GL_QSETS_MAX prefixes.
    size_t qw = ((size_t)v->n_qp + 31) / 32 + (1 + GL_QSETS_MAX) * (((size_t)v->n_qs + 31) / 32);
    if (qw > c->qacc_words) {
        uint32_t *qa = gl_realloc(c->qacc, qw * sizeof *qa);
        if (!qa)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->qacc = qa;
        c->qacc_words = qw;
    }
    size_t sw = ((size_t)v->n_qs + 31) / 32;
    for (int i = 0; i < GL_QCACHE_N; i++) {
        struct gl_qentry *e = &c->qe[i];
        if (!e->st) {
            gl_status st = gl_mstate_new(&e->st, &g->ir, NULL, err);
            if (st != GL_OK)
                return st;
        }
        if (sw > c->qe_words) {
            uint32_t *a = gl_realloc(e->accs, (sw ? sw : 1) * sizeof *a);
            if (!a)
                return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
            e->accs = a;
            e->v = NULL;
        }
    }
    if (sw > c->qe_words)
        c->qe_words = sw;
    if ((size_t)v->n_qp + 1 > c->qsub_cap) {
        uint32_t *qs = gl_realloc(c->qsub, ((size_t)v->n_qp + 1) * sizeof *qs);
        if (!qs)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->qsub = qs;
        c->qsub_cap = (size_t)v->n_qp + 1;
    }
    if (v->words > c->part_words) {
        uint32_t *pt = gl_realloc(c->part, v->words * sizeof *pt);
        if (!pt)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->part = pt;
        gl_free(c->qbits);
        if (!(c->qbits = gl_calloc(v->words, sizeof *c->qbits)))
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->part_words = v->words;
    }
    // One state per trie depth (+1: the walk clears fresh[d + 1] below the deepest node).
    int32_t need = v->full.max_depth + 2;
    if (need > c->n_walk) {
        struct gl_mstate **w = gl_realloc(c->walk, (size_t)need * sizeof *w);
        if (!w)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->walk = w;
        uint8_t *f = gl_realloc(c->fresh, (size_t)need + 1);
        if (!f)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->fresh = f;
        uint64_t(*nx)[4] = gl_realloc(c->next, (size_t)need * sizeof *nx);
        if (!nx)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->next = nx;
        uint64_t *fr = gl_realloc(c->frames, (size_t)need * GL_SFRAME_MAX);
        if (!fr)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the trie walk");
        c->frames = fr;
        if (c->n_walk == 0) {
            c->walk[0] = NULL; // depth 0 is the state itself
            c->n_walk = 1;
        }
        while (c->n_walk < need) {
            gl_status st = gl_mstate_new(&c->walk[c->n_walk], &g->ir, NULL, err);
            if (st != GL_OK)
                return st;
            c->n_walk++;
        }
    }
    return GL_OK;
}

// Depth-first walk of trie t from state s: sets the bit of every token whose bytes s accepts.
// walk[d] holds the state after the first d bytes of the current path; a rejected byte leaves
// walk[d] unchanged (match.h), so it stays a valid copy of walk[d - 1] for the next sibling and
// the copy is skipped (fresh[d]). Where the path leads into a free string body (e.g. one anyOf
// branch died and a string branch is left) and every token below continues with plain
// characters only, within the budget, the whole subtree is accepted without walking it: that is
// the string fast path's rule applied to suffixes. Returns the nodes visited.
// Decides whitespace level d (c->ws_known == d - 1 < GL_WS_LEVELS): the state after d
// whitespace bytes from s, if all four bytes lead from level d - 1 to one state (or all are
// refused). Else the levels stop there (ws_stop).
static void ws_level(struct gl_mcache *c, const struct gl_mstate *s, int32_t d)
{
    static const uint8_t ws[4] = {' ', '\t', '\n', '\r'};
    const struct gl_mstate *prev = d == 1 ? s : c->wsst[d - 1];
    struct gl_mstate *w = c->wsst[d], *probe = c->wsst[0];
    c->ws_known = d;
    if (d > 1 && !c->wsok[d - 1]) { // nothing after a refused level
        c->wsok[d] = 0;
        return;
    }
    gl_mstate_copy(w, prev);
    int alive = gl_mstate_advance_byte(w, ws[0]);
    for (int k = 1; k < 4; k++) {
        gl_mstate_copy(probe, prev);
        int ok = gl_mstate_advance_byte(probe, ws[k]);
        if (ok != alive || (ok && !gl_mstate_equal(probe, w))) {
            c->ws_stop = d;
            return;
        }
    }
    c->wsok[d] = (int8_t)alive;
    if (alive)
        gl_mstate_next_bytes(w, c->wsnext[d]);
}

// The walk's step into a node at depth d by byte b: walk[d] becomes its parent (s at depth 1)
// unless it still is one (fresh: a sibling's failed step leaves the state as it was), then takes
// b. 1 when accepted.
static inline int walk_step(struct gl_mcache *c, const struct gl_mstate *s, uint32_t d, uint8_t b)
{
    struct gl_mstate *cur = c->walk[d];
    if (!c->fresh[d]) {
        gl_mstate_copy(cur, d == 1 ? s : c->walk[d - 1]);
        c->fresh[d] = 1;
    }
    if (!gl_mstate_advance_byte(cur, b))
        return 0;
    c->fresh[d] = 0;
    c->fresh[d + 1] = 0;
    return 1;
}

static int64_t trie_walk(const struct gl_trie *t, struct gl_mcache *c, const struct gl_mstate *s,
                         uint32_t *mask)
{
    const struct gl_tnode *nd = t->nodes;
    const int32_t *ids = t->ids;
    struct gl_mstate **walk = c->walk;
    uint8_t *fresh = c->fresh;
    uint64_t(*next)[4] = c->next;
    memset(fresh, 0, (size_t)t->max_depth + 2);
    gl_mstate_next_bytes(s, next[0]);
    uint32_t i = 1, n = t->n_nodes;
    int64_t visited = 0;
    // Runs of leading whitespace: at JSON positions the four whitespace bytes only move a
    // counter, so every run of d of them leads to one state, stepped once per walk (ws_level)
    // instead of at each of the ~300 whitespace-run nodes of the vocabulary (indentation).
    // wsrun: the current path is whitespace up to depth wsrun.
    c->ws_known = 0;
    c->ws_stop = t->ws_runs ? GL_WS_LEVELS + 1 : 0;
    uint32_t wsrun = 0;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        uint32_t d = x->depth;
        if (!(next[d - 1][x->byte >> 6] >> (x->byte & 63) & 1)) {
            i = x->next; // the parent state takes no such byte: no copy, no step
            continue;
        }
        struct gl_mstate *cur = walk[d];
        visited++;
        if (wsrun > d - 1)
            wsrun = d - 1;
        if (wsrun == d - 1 && is_ws_byte(x->byte) && (int32_t)d < c->ws_stop) {
            if ((int32_t)d > c->ws_known)
                ws_level(c, s, (int32_t)d);
            if ((int32_t)d < c->ws_stop) { // level d is uniform: its state is the run's
                if (!c->wsok[d]) {
                    i = x->next;
                    continue;
                }
                gl_mstate_copy(cur, c->wsst[d]);
                fresh[d] = 0;
                fresh[d + 1] = 0;
                wsrun = d;
                if (x->next > i + 1)
                    memcpy(next[d], c->wsnext[d], sizeof next[d]);
                for (uint32_t k = x->tok; k < nd[i + 1].tok; k++) {
                    uint32_t id = (uint32_t)ids[k];
                    mask[id >> 5] |= 1u << (id & 31);
                }
                i++;
                continue;
            }
        }
        if (!walk_step(c, s, d, x->byte)) {
            i = x->next;
            continue;
        }
        uint32_t end = nd[i + 1].tok; // tokens ending here
        uint32_t sub = x->plain;
        int32_t mn, mx;
        if (sub != GL_SUB_MIXED && x->next - i > 4 && gl_mstate_string_fast(cur, &mn, &mx) &&
            (mx < 0 || (int32_t)sub <= mx)) {
            end = nd[x->next].tok; // the whole subtree
            i = x->next;
        } else {
            if (x->next > i + 1)
                gl_mstate_next_bytes(cur, next[d]);
            i++;
        }
        for (uint32_t k = x->tok; k < end; k++) {
            uint32_t id = (uint32_t)ids[k];
            mask[id >> 5] |= 1u << (id & 31);
        }
    }
    return visited;
}

void gl_mask_each_token(struct gl_grammar *g, const struct gl_gvocab *v, const struct gl_mstate *s,
                        const uint32_t *in, gl_mask_token_fn fn, void *user)
{
    struct gl_mcache *c = g->mcache;
    GL_ASSERT(c && c->n_walk >= v->full.max_depth + 2); // gl_mask_prepare ran for v
    const struct gl_trie *t = &v->full;
    const struct gl_tnode *nd = t->nodes;
    struct gl_mstate **walk = c->walk;
    uint64_t(*next)[4] = c->next;
    memset(c->fresh, 0, (size_t)t->max_depth + 2);
    gl_mstate_next_bytes(s, next[0]);
    uint32_t i = 1, n = t->n_nodes;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        uint32_t d = x->depth;
        if (!(next[d - 1][x->byte >> 6] >> (x->byte & 63) & 1)) {
            i = x->next;
            continue;
        }
        if (!walk_step(c, s, d, x->byte)) {
            i = x->next;
            continue;
        }
        if (x->next > i + 1)
            gl_mstate_next_bytes(walk[d], next[d]);
        for (uint32_t k = x->tok; k < nd[i + 1].tok; k++) {
            int32_t id = t->ids[k];
            if (in[id >> 5] >> (id & 31) & 1)
                fn(user, id, walk[d]);
        }
        i++;
    }
}

// ---- the class walk of string bodies ----

// The class-walk policy (gl_mask_set_class_policy; tests force the class walk everywhere).
static int64_t g_exact_max = GL_EXACT_MAX_NODES, g_rent = GL_CTRIE_RENT;

void gl_mask_set_class_policy(int64_t exact_max_nodes, int64_t rent_nodes)
{
    g_exact_max = exact_max_nodes < 0 ? GL_EXACT_MAX_NODES : exact_max_nodes;
    g_rent = rent_nodes < 0 ? GL_CTRIE_RENT : rent_nodes;
}

// The class trie of partition cls over v (see struct gl_ctrie); NULL when out of memory. Costs
// one pass over the vocabulary's bytes (a few ms), once per partition and grammar.
static struct gl_ctrie *ctrie_build_unmetered(const struct gl_gvocab *v, const uint8_t cls[256])
{
    struct gl_ctrie *ct = gl_calloc(1, sizeof *ct);
    int32_t n = v->n_vocab;
    uint32_t *tu = gl_malloc((size_t)n * sizeof *tu);     // class string of each token
    uint32_t *uoff = gl_malloc((size_t)n * sizeof *uoff); // per class string: arena offset,
    uint32_t *ulen = gl_malloc((size_t)n * sizeof *ulen); // length,
    uint64_t *uh = gl_malloc((size_t)n * sizeof *uh);     // hash
    // 8 bytes of slack: the hash reads the class string a word at a time.
    uint8_t *arena = gl_malloc((size_t)v->off[n] + 9);
    // Open addressing; a slot holds the hash's high 32 bits over the class-string index, so a
    // probe touches the string only when those match (the per-string arrays are random reads).
    uint32_t hcap = 1u << 16;
    uint64_t *ht = gl_malloc(hcap * sizeof *ht);
    struct gl_tokref *refs = NULL;
    if (!ct || !tu || !uoff || !ulen || !uh || !arena || !ht)
        goto fail;
    memcpy(ct->cls, cls, 256);
    ct->cls_hash = gl_fnv1a(cls, 256);
    for (int b = 255; b >= 0; b--)
        if (cls[b] != GL_SCLS_NONE)
            ct->rep[cls[b]] = (uint8_t)b;
    memset(ht, 0xFF, hcap * sizeof *ht);
    uint32_t n_u = 0, used = 0;
    for (int32_t id = 0; id < n; id++) {
        tu[id] = UINT32_MAX;
        if ((v->excluded[id >> 5] >> (id & 31)) & 1)
            continue;
        const uint8_t *p = v->blob + v->off[id];
        size_t len = v->off[id + 1] - v->off[id];
        uint8_t *q = arena + used; // the class string, written in place; kept if new
        size_t k;
        for (k = 0; k < len && cls[p[k]] != GL_SCLS_NONE; k++)
            q[k] = cls[p[k]];
        if (k < len)
            continue; // has '"', '\' or a control byte: not in the class trie
        // A word at a time (zero-padded): a byte-wise FNV was a dependent multiply per byte,
        // ~1.3M of them per build.
        memset(q + len, 0, 8);
        uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
        for (k = 0; k < len; k += 8) {
            uint64_t w;
            memcpy(&w, q + k, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        uint64_t tag = h >> 32 << 32, e;
        uint32_t slot = (uint32_t)h & (hcap - 1), u = UINT32_MAX;
        while ((e = ht[slot]) != UINT64_MAX) {
            if ((e >> 32 << 32) == tag && ulen[(uint32_t)e] == len &&
                !memcmp(arena + uoff[(uint32_t)e], q, len)) {
                u = (uint32_t)e;
                break;
            }
            slot = (slot + 1) & (hcap - 1);
        }
        if (u == UINT32_MAX) {
            u = n_u++;
            uoff[u] = used;
            ulen[u] = (uint32_t)len;
            uh[u] = h;
            used += (uint32_t)len;
            ht[slot] = tag | u;
            if (n_u * 2 > hcap) { // grow and rehash
                gl_free(ht);
                hcap *= 2;
                if (!(ht = gl_malloc(hcap * sizeof *ht)))
                    goto fail;
                memset(ht, 0xFF, hcap * sizeof *ht);
                for (uint32_t w = 0; w < n_u; w++) {
                    uint32_t sl = (uint32_t)uh[w] & (hcap - 1);
                    while (ht[sl] != UINT64_MAX)
                        sl = (sl + 1) & (hcap - 1);
                    ht[sl] = (uh[w] >> 32 << 32) | w;
                }
            }
        }
        tu[id] = u;
        // Poor partitions show early: most tokens get a class string of their own.
        if ((id & 16383) == 16383 && (int64_t)n_u * 2 > (int64_t)id + 1) {
            ct->poor = 1;
            goto done;
        }
    }
    ct->n_u = n_u;
    ct->acc_words = ((size_t)n_u + 31) / 32;
    if ((int64_t)n_u * GL_CTRIE_POOR > (int64_t)v->noq.n_ids) {
        ct->poor = 1;
        goto done;
    }
    refs = gl_malloc(((size_t)n_u + 1) * sizeof *refs);
    ct->u_start = gl_calloc((size_t)n_u + 2, sizeof *ct->u_start);
    if (!refs || !ct->u_start)
        goto fail;
    for (uint32_t u = 0; u < n_u; u++) {
        refs[u].p = arena + uoff[u];
        refs[u].len = ulen[u];
        refs[u].id = (int32_t)u;
    }
    int max_cls = 0;
    for (int b = 0; b < 256; b++)
        if (cls[b] != GL_SCLS_NONE && cls[b] > max_cls)
            max_cls = cls[b];
    struct gl_tokref *tmp = gl_malloc(((size_t)n_u + 1) * sizeof *tmp);
    if (!tmp)
        goto fail;
    class_sort(refs, tmp, n_u, 0, (size_t)max_cls + 1);
    gl_free(tmp);
    if (trie_build_opt(&ct->t, refs, n_u, 0, NULL) != GL_OK)
        goto fail;
    // Tokens grouped by class string: counting sort.
    for (int32_t id = 0; id < n; id++)
        if (tu[id] != UINT32_MAX)
            ct->u_start[tu[id] + 2]++;
    for (uint32_t u = 0; u < n_u; u++)
        ct->u_start[u + 2] += ct->u_start[u + 1];
    ct->toks = gl_malloc(((size_t)ct->u_start[n_u + 1] + 1) * sizeof *ct->toks);
    if (!ct->toks)
        goto fail;
    for (int32_t id = 0; id < n; id++)
        if (tu[id] != UINT32_MAX)
            ct->toks[ct->u_start[tu[id] + 1]++] = id;
done:
    gl_free(refs);
    gl_free(ht);
    gl_free(arena);
    gl_free(uh);
    gl_free(ulen);
    gl_free(uoff);
    gl_free(tu);
    return ct;
fail:
    ctrie_free(ct);
    ct = NULL;
    goto done;
}

static struct gl_ctrie *ctrie_build(const struct gl_gvocab *v, const uint8_t cls[256])
{
    struct gl_alloc_meter *prev = gl_alloc_meter_swap(NULL);
    struct gl_ctrie *ct = ctrie_build_unmetered(v, cls);
    gl_alloc_meter_swap(prev);
    return ct;
}

// The class trie of partition cls from v's table, built there on first use (or for the caller
// alone when the table is full: *owned = 1). NULL when out of memory.
// The class trie of partition cls from v's table. When it is not there: built there (or for the
// caller alone when the table is full: *owned = 1) once the exact walks of this partition have
// spent the rent, else NULL and *pending = 1. NULL with *pending = 0: out of memory.
static struct gl_ctrie *ctrie_lookup(const struct gl_gvocab *cv, const uint8_t cls[256], int *owned,
                                     int *pending)
{
    // The table is the vocabulary's only mutable part (see struct gl_gvocab).
    struct gl_gvocab *v = (struct gl_gvocab *)cv;
    struct gl_ctrie *ct = NULL;
    uint64_t h = gl_fnv1a(cls, 256);
    *owned = 0;
    *pending = 0;
    pthread_mutex_lock(&v->cmu);
    // Up to GL_CSHARED_N entries, scanned at every frame-cache miss of a partition that is
    // still renting: the hash first (a 256-byte memcmp each was ~5% of mask time).
    for (int i = 0; i < v->n_cshared && !ct; i++)
        if (v->cshared[i]->cls_hash == h && !memcmp(v->cshared[i]->cls, cls, 256))
            ct = v->cshared[i];
    if (!ct) {
        size_t slot = (size_t)(h % GL_CRENT_N);
        if (g_rent > 0 && (v->crent[slot].h != h || v->crent[slot].spent < g_rent)) {
            *pending = 1;
            pthread_mutex_unlock(&v->cmu);
            return NULL;
        }
        ct = ctrie_build(v, cls);
        if (!ct) {
            pthread_mutex_unlock(&v->cmu);
            return NULL;
        }
        ct->serial = ++v->ct_serial;
        // A place in the table: a free one, or the least recently used entry no grammar holds
        // (of the same kind when the full tries are at their cap).
        int need_full = !ct->poor && v->n_cshared_full >= GL_CSHARED_FULL;
        int at = need_full || v->n_cshared >= GL_CSHARED_N ? -1 : v->n_cshared;
        if (at < 0) {
            for (int i = 0; i < v->n_cshared; i++) {
                struct gl_ctrie *x = v->cshared[i];
                if (x->refs == 0 && (!need_full || !x->poor) &&
                    (at < 0 || x->used < v->cshared[at]->used))
                    at = i;
            }
        }
        if (at < 0) {
            *owned = 1;
        } else {
            if (at < v->n_cshared) {
                v->n_cshared_full -= !v->cshared[at]->poor;
                ctrie_free(v->cshared[at]);
            } else {
                v->n_cshared++;
            }
            v->cshared[at] = ct;
            v->n_cshared_full += !ct->poor;
        }
    }
    if (!*owned) {
        ct->refs++;
        ct->used = ++v->cclock;
    }
    pthread_mutex_unlock(&v->cmu);
    return ct;
}

// Records n exact-walk nodes spent on partition cls (see GL_CTRIE_RENT).
static void ctrie_rent(const struct gl_gvocab *cv, const uint8_t cls[256], int64_t n)
{
    struct gl_gvocab *v = (struct gl_gvocab *)cv;
    uint64_t h = gl_fnv1a(cls, 256);
    size_t slot = (size_t)(h % GL_CRENT_N);
    pthread_mutex_lock(&v->cmu);
    if (v->crent[slot].h != h) { // a colliding partition gives way
        v->crent[slot].h = h;
        v->crent[slot].spent = 0;
    }
    v->crent[slot].spent += n;
    pthread_mutex_unlock(&v->cmu);
}

// The grammar's view of the class trie of partition cls (LRU over GL_CTRIE_N partitions); NULL
// when the partition is poor, not built yet (*pending = 1: see ctrie_lookup) or memory ran out.
static struct gl_cview *cview_get(struct gl_mcache *c, const struct gl_gvocab *v,
                                  const uint8_t cls[256], int *pending)
{
    *pending = 0;
    struct gl_cview *w = &c->cv[0];
    for (int k = 0; k < GL_CTRIE_N; k++) {
        struct gl_cview *x = &c->cv[k];
        if (x->ct && !memcmp(x->ct->cls, cls, 256)) {
            x->stamp = ++c->clock;
            return x->ct->poor ? NULL : x;
        }
        if (!x->ct || (w->ct && x->stamp < w->stamp))
            w = x;
    }
    int owned;
    struct gl_ctrie *ct = ctrie_lookup(v, cls, &owned, pending);
    if (!ct)
        return NULL;
    if (owned)
        gl_alloc_meter_charge(ctrie_bytes(ct));
    uint32_t *acc = ct->poor ? NULL : gl_calloc(ct->acc_words ? ct->acc_words : 1, sizeof *acc);
    if (!ct->poor && !acc) {
        struct gl_cview tmp = {.v = v, .ct = ct, .owned = owned};
        cview_clear(&tmp); // gives the trie (or its reference) back
        return NULL;
    }
    cview_clear(w);
    w->v = v;
    w->ct = ct;
    w->owned = owned;
    w->acc = acc;
    w->stamp = ++c->clock;
    return ct->poor ? NULL : w;
}

// Sets the mask bits of the tokens that end at trie node i (the walks below, once per accepted
// node).
static inline void allow_node_tokens(const struct gl_trie *t, uint32_t i, uint32_t *out)
{
    for (uint32_t k = t->nodes[i].tok; k < t->nodes[i + 1].tok; k++) {
        uint32_t id = (uint32_t)t->ids[k];
        out[id >> 5] |= 1u << (id & 31);
    }
}

// Depth-first walk of trie t with a string frame alone: c->frames[0] holds the frame (fs
// bytes), frames[d] the frame after the first d bytes of the current path. Node bytes are mapped
// through rep (a class trie) or taken as they are (rep NULL). Sets bit id of out for every id
// ending at an accepted node. Returns the nodes visited.
static int64_t frame_walk(const struct gl_trie *t, const uint8_t *rep, struct gl_mcache *c,
                          const struct gl_mstate *s, size_t fs, uint32_t *out)
{
    const struct gl_tnode *nd = t->nodes;
    const size_t stride = GL_SFRAME_MAX / sizeof(uint64_t);
    uint32_t i = 1, n = t->n_nodes;
    int64_t visited = 0;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        uint64_t *cur = c->frames + (size_t)x->depth * stride;
        visited++;
        memcpy(cur, cur - stride, fs);
        if (!gl_mstate_sframe_step(s, cur, rep ? rep[x->byte] : x->byte)) {
            i = x->next;
            continue;
        }
        allow_node_tokens(t, i, out);
        i++;
    }
    return visited;
}

// frame_walk (trie t as it is) for a key frame of an object with declared names only: after each
// accepted node only the children in the frame's next bytes (the candidate names' next bytes,
// gl_mstate_sframe_next_bytes) are stepped, so the walk follows the names instead of trying the
// ~200 first bytes of the vocabulary. Where the frame is not narrowed (inside an escape or a
// multi-byte character) every child is stepped. Returns the nodes visited.
static int64_t frame_walk_named(const struct gl_trie *t, struct gl_mcache *c,
                                const struct gl_mstate *s, size_t fs, uint32_t *out)
{
    const struct gl_tnode *nd = t->nodes;
    const size_t stride = GL_SFRAME_MAX / sizeof(uint64_t);
    uint64_t(*next)[4] = c->next;
    GL_ASSERT(gl_mstate_sframe_next_bytes(s, c->frames, next[0]));
    uint32_t i = 1, n = t->n_nodes;
    int64_t visited = 0;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        uint32_t d = x->depth;
        if (!(next[d - 1][x->byte >> 6] >> (x->byte & 63) & 1)) {
            i = x->next;
            continue;
        }
        uint64_t *cur = c->frames + (size_t)d * stride;
        visited++;
        memcpy(cur, cur - stride, fs);
        if (!gl_mstate_sframe_step(s, cur, x->byte)) {
            i = x->next;
            continue;
        }
        allow_node_tokens(t, i, out);
        if (x->next > i + 1 && !gl_mstate_sframe_next_bytes(s, cur, next[d]))
            memset(next[d], 0xff, sizeof next[d]);
        i++;
    }
    return visited;
}

// The quote- and backslash-free tokens on the paths of n names' rests (c->nm_p, c->nm_len)
// through the trie, as far as each rest's bytes are raw-typable (not a control byte, '"' or
// '\\', which need an escape), ORed into part. Returns the nodes visited.
static int64_t name_paths(struct gl_mcache *c, const struct gl_gvocab *v, int n, uint32_t *part)
{
    const struct gl_tnode *nd = v->noq.nodes;
    int64_t visited = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *r = c->nm_p[i];
        uint32_t x = 0;
        for (uint32_t j = 0; j < c->nm_len[i]; j++) {
            uint8_t b = r[j];
            if (b < 0x20 || b == '"' || b == '\\')
                break;
            if (j == 0) {
                x = v->noq_root[b];
            } else {
                uint32_t y = x + 1;
                while (y < nd[x].next && nd[y].byte != b)
                    y = nd[y].next;
                x = y < nd[x].next ? y : 0;
            }
            if (!x)
                break;
            visited++;
            allow_node_tokens(&v->noq, x, part);
        }
    }
    return visited;
}

// The quote-free part for a key of declared names only, into part (every word written). A
// token without '"' or '\\' is accepted iff its bytes continue one of the names the key may
// still become (gl_mstate_sframe_names): those on the names' paths (name_paths). The tokens
// with a backslash (escapes may spell name characters) are walked with the frame. Returns the
// nodes visited.
static int64_t names_part(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                          size_t fs, uint32_t *part)
{
    memset(part, 0, v->words * sizeof *part);
    int n = gl_mstate_sframe_names(s, c->frames, c->nm_p, c->nm_len, GL_NAMES_MAX);
    if (n < 0)
        return frame_walk_named(&v->noq, c, s, fs, part);
    int64_t visited = name_paths(c, v, n, part);
    return visited + frame_walk_named(&v->bsl, c, s, fs, part);
}

// frame_walk for a string-value frame reduced to its plain-byte stepper (gl_mstate_sfast): the
// same accepted set for tokens without '"' and '\\' (tokens with a backslash are refused here
// and must be walked with the frame), at about a third of frame_walk's cost per node (no frame
// copy, no indirections through the grammar). The stepper states, one per depth, sit in
// c->frames past frames[0] (which keeps the frame for the walks with it): (max depth + 2) of
// them need far less than the (max depth + 1) * GL_SFRAME_MAX bytes there.
static int64_t sfast_walk(const struct gl_trie *t, const uint8_t *rep, struct gl_mcache *c,
                          struct gl_sfast *f, const struct gl_sfast_st *st0, uint32_t *out)
{
    _Static_assert(2 * sizeof(struct gl_sfast_st) <= GL_SFRAME_MAX, "stepper states fit");
    struct gl_sfast_st *stk = (struct gl_sfast_st *)(void *)(c->frames + GL_SFRAME_MAX / 8);
    const struct gl_tnode *nd = t->nodes;
    uint32_t i = 1, n = t->n_nodes;
    int64_t visited = 0;
    stk[0] = *st0;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        struct gl_sfast_st *cur = &stk[x->depth];
        visited++;
        if (!gl_sfast_step(f, cur - 1, cur, rep ? rep[x->byte] : x->byte)) {
            i = x->next;
            continue;
        }
        allow_node_tokens(t, i, out);
        i++;
    }
    return visited;
}

// sfast_walk for a stepper without budget (f->max_chars < 0, every character counted from 0)
// that also sets *q to the most any accepted node needs: its characters plus its DFA states'
// min_chars. The same walk under a budget of slack characters takes exactly these nodes when
// slack >= *q (each budget check compares one of those sums with the slack).
static int64_t sfast_walk_q(const struct gl_trie *t, const uint8_t *rep, struct gl_mcache *c,
                            struct gl_sfast *f, const struct gl_sfast_st *st0, uint32_t *out,
                            int64_t *q)
{
    struct gl_sfast_st *stk = (struct gl_sfast_st *)(void *)(c->frames + GL_SFRAME_MAX / 8);
    const struct gl_tnode *nd = t->nodes;
    uint32_t i = 1, n = t->n_nodes;
    int64_t visited = 0, qmax = 0;
    stk[0] = *st0;
    while (i < n) {
        const struct gl_tnode *x = &nd[i];
        struct gl_sfast_st *cur = &stk[x->depth];
        visited++;
        if (!gl_sfast_step(f, cur - 1, cur, rep ? rep[x->byte] : x->byte)) {
            i = x->next;
            continue;
        }
        // The budget checks: the characters so far (a string without regex has only this
        // one), and those plus each DFA state's min_chars.
        int64_t need = cur->count;
        for (int32_t r = 0; r < f->n_rx; r++) {
            int32_t mc = gl_regex_min_chars(f->rx[r], cur->re[r]); // < 0 only with lookahead
            if (mc > 0 && (int64_t)cur->count + mc > need)
                need = (int64_t)cur->count + mc;
        }
        if (need > qmax)
            qmax = need;
        allow_node_tokens(t, i, out);
        i++;
    }
    *q = qmax;
    return visited;
}

// sfast_walk of trie t (bytes through rep, or as they are when rep is NULL) into out (aw words,
// zeroed by the caller), through memo (n_memo slots, direct-mapped): the walk is decided
// by its stepper (struct gl_ckey) alone. With maxLength the walk sees the count only through
// the slack (max_chars - count): a node is refused when its characters (plus its DFA state's
// min_chars) exceed it. Such states are kept without the count: the walk with no budget, which
// records the most any accepted node needed (q), is the answer for every slack >= q. Returns
// the nodes visited (0 on a hit).
// The canonical key of a walk (the shared memo's, GL_XSHARE_N): key's fields but the trie and
// the regexes, the trie by tid (1: the vocabulary's quote-free trie; else a class trie's serial
// + 1), each regex by its fingerprint and its state's NFA set. 0 when a regex has none, its DFA
// is past half its budget (a walk of the other grammar's regex could then overflow where this
// one's did not), or the key is over GL_XKEY_MAX bytes.
static size_t canon_key(const struct gl_ckey *key, uint64_t tid, uint8_t *buf)
{
    struct gl_ckey k;
    memcpy(&k, key, sizeof k); // with its zeroed padding: compared as bytes
    k.trie = (const struct gl_trie *)(uintptr_t)tid;
    memset(k.rx, 0, sizeof k.rx);
    memset(k.re, 0, sizeof k.re);
    size_t n = sizeof k;
    memcpy(buf, &k, n);
    for (int32_t r = 0; r < key->n_rx; r++) {
        uint64_t fp[2];
        const uint32_t *set;
        uint32_t len, amask;
        if (!gl_regex_room(key->rx[r], 1) ||
            !gl_regex_state_canon(key->rx[r], key->re[r], fp, &set, &len, &amask))
            return 0;
        size_t need = sizeof fp + 2 * sizeof(uint32_t) + (size_t)len * sizeof *set;
        if (n + need > GL_XKEY_MAX)
            return 0;
        memcpy(buf + n, fp, sizeof fp);
        memcpy(buf + n + sizeof fp, &amask, sizeof amask);
        memcpy(buf + n + sizeof fp + 4, &len, sizeof len);
        memcpy(buf + n + sizeof fp + 8, set, (size_t)len * sizeof *set);
        n += need;
    }
    return n;
}

// The shared memo's result for key (klen bytes, hash h) into acc (aw words) and *q: 1 when found.
static int xshare_get(const struct gl_gvocab *cv, const uint8_t *key, size_t klen, uint64_t h,
                      uint32_t *acc, size_t aw, int64_t *q)
{
    struct gl_gvocab *v = (struct gl_gvocab *)cv;
    int hit = 0;
    pthread_mutex_lock(&v->xmu);
    struct gl_xshare *x = v->xs ? &v->xs[h % GL_XSHARE_N] : NULL;
    if (x && x->acc && x->h == h && x->klen == klen && x->aw == aw && !memcmp(x->key, key, klen)) {
        memcpy(acc, x->acc, aw * sizeof *acc);
        *q = x->q;
        hit = 1;
    }
    pthread_mutex_unlock(&v->xmu);
    return hit;
}

// Keeps a walk's result in the shared memo (the slot's previous one goes). No memory: not kept.
static void xshare_put(const struct gl_gvocab *cv, const uint8_t *key, size_t klen, uint64_t h,
                       const uint32_t *acc, size_t aw, int64_t q)
{
    struct gl_gvocab *v = (struct gl_gvocab *)cv;
    pthread_mutex_lock(&v->xmu);
    if (!v->xs)
        v->xs = gl_calloc(GL_XSHARE_N, sizeof *v->xs);
    struct gl_xshare *x = v->xs ? &v->xs[h % GL_XSHARE_N] : NULL;
    if (x) {
        if (x->key && x->kcap < klen) {
            gl_free(x->key);
            x->key = NULL;
        }
        if (!x->key) {
            x->key = gl_malloc(klen);
            x->kcap = x->key ? klen : 0;
        }
        if (x->acc && x->aw != aw) {
            gl_free(x->acc);
            x->acc = NULL;
        }
        if (!x->acc)
            x->acc = gl_malloc((aw ? aw : 1) * sizeof *x->acc);
        if (x->key && x->acc) {
            memcpy(x->key, key, klen);
            memcpy(x->acc, acc, aw * sizeof *acc);
            x->klen = klen;
            x->aw = aw;
            x->h = h;
            x->q = q;
        } else { // no memory: the slot stays empty
            gl_free(x->acc);
            x->acc = NULL;
        }
    }
    pthread_mutex_unlock(&v->xmu);
}

static int64_t memo_walk(struct gl_cmemo *memo, int n_memo, const struct gl_trie *t,
                         const uint8_t *rep, size_t aw, struct gl_mcache *c, struct gl_sfast *sf,
                         const struct gl_sfast_st *sst, uint32_t *out, const struct gl_gvocab *v,
                         uint64_t tid)
{
    // Only when the budget cannot prune on characters alone (slack >= the trie's depth in
    // bytes): a small slack prunes most of the trie, and the walk without budget would visit
    // all of it (a 415k-node exact walk for a maxLength of 5).
    int slack_mode = sf->max_chars >= 0 && (int64_t)sf->max_chars - sst->count >= t->max_depth;
    int64_t slack = slack_mode ? (int64_t)sf->max_chars - sst->count : INT64_MAX;
    // A regex whose DFA hit its state cap returns dead for transitions it cannot add: a walk
    // then depends on when it ran. Such regexes are neither looked up nor kept.
    int ok = 1;
    struct gl_ckey key;
    memset(&key, 0, sizeof key);
    key.trie = t;
    key.n_rx = sf->n_rx;
    key.max_chars = slack_mode ? -2 : sf->max_chars;
    key.min_chars = slack_mode ? 0 : sf->min_chars;
    key.need_mc = sf->need_mc;
    key.count = slack_mode ? 0 : sst->count;
    key.need = sst->need;
    key.lo = sst->lo;
    key.hi = sst->hi;
    for (int32_t r = 0; r < sf->n_rx; r++) {
        key.rx[r] = sf->rx[r];
        key.re[r] = sst->re[r];
        ok &= !gl_regex_overflowed(sf->rx[r]);
    }
    if (!ok)
        return sfast_walk(t, rep, c, sf, sst, out);
    uint64_t kh = gl_fnv1a(&key, sizeof key);
    struct gl_cmemo *m = &memo[kh % (uint64_t)n_memo];
    if (m->acc && m->hash == kh && !memcmp(&m->key, &key, sizeof key)) {
        if (slack < m->q) // kept for larger slacks; this one walks exactly
            return sfast_walk(t, rep, c, sf, sst, out);
        memcpy(out, m->acc, aw * sizeof *out);
        return 0;
    }
    if (!m->acc && !(m->acc = gl_malloc((aw ? aw : 1) * sizeof *m->acc)))
        return sfast_walk(t, rep, c, sf, sst, out); // no memory: walked, not kept
    int64_t q = 0, visited;
    size_t klen = tid ? canon_key(&key, tid, c->xkey) : 0;
    uint64_t xh = klen ? gl_fnv1a(c->xkey, klen) : 0;
    if (klen && xshare_get(v, c->xkey, klen, xh, m->acc, aw, &q)) {
        // Another grammar's walk from the same regex states: m->acc is what this one would be.
        visited = 0;
        if (slack_mode && q > slack)
            visited = sfast_walk(t, rep, c, sf, sst, out);
        else
            memcpy(out, m->acc, aw * sizeof *out);
        m->hash = kh;
        m->key = key;
        m->q = q;
        return visited;
    }
    if (slack_mode) {
        struct gl_sfast f0 = *sf;
        struct gl_sfast_st s0 = *sst;
        f0.max_chars = -1;        // no budget,
        f0.min_chars = INT32_MAX; // the count counts every character,
        s0.count = 0;             // from this state on
        memset(m->acc, 0, aw * sizeof *m->acc);
        visited = sfast_walk_q(t, rep, c, &f0, &s0, m->acc, &q);
        if (q <= slack)
            memcpy(out, m->acc, aw * sizeof *out);
        else
            visited += sfast_walk(t, rep, c, sf, sst, out);
    } else {
        visited = sfast_walk(t, rep, c, sf, sst, out);
        memcpy(m->acc, out, aw * sizeof *out);
    }
    for (int32_t r = 0; ok && r < sf->n_rx; r++)
        ok = !gl_regex_overflowed(sf->rx[r]);
    if (ok && klen)
        xshare_put(v, c->xkey, klen, xh, m->acc, aw, q);
    m->hash = kh;
    m->key = key;
    m->q = q;
    if (!ok) // never matches: every key has a trie
        m->key.trie = NULL;
    return visited;
}

// Writes the mask part of the accepted class strings acc (every word of mask).
static void acc_expand(const struct gl_ctrie *ct, const uint32_t *acc, size_t words, uint32_t *mask)
{
    memset(mask, 0, words * sizeof *mask);
    for (size_t w = 0; w < ct->acc_words; w++)
        for (uint32_t x = acc[w]; x; x &= x - 1) {
            uint32_t u = (uint32_t)(w * 32 + (size_t)__builtin_ctz(x));
            for (uint32_t k = ct->u_start[u]; k < ct->u_start[u + 1]; k++) {
                uint32_t id = (uint32_t)ct->toks[k];
                mask[id >> 5] |= 1u << (id & 31);
            }
        }
}

// The quote-free part of a string-body mask by the class walk: class strings accepted by the
// frame, their mask from the view's cache (expanded on a miss), then the backslash tokens
// walked exactly. Returns the nodes visited.
static int64_t class_mask(struct gl_cview *cw, struct gl_mcache *c, const struct gl_gvocab *v,
                          const struct gl_mstate *s, size_t fs, struct gl_sfast *sf,
                          const struct gl_sfast_st *sst, uint32_t *mask)
{
    const struct gl_ctrie *ct = cw->ct;
    size_t aw = ct->acc_words;
    memset(cw->acc, 0, aw * sizeof *cw->acc);
    // Class strings hold no quote, backslash or control byte: the stepper takes them all.
    int64_t visited = sf ? memo_walk(cw->memo, GL_CMEMO_N, &ct->t, ct->rep, aw, c, sf, sst, cw->acc,
                                     v, cw->owned ? 0 : ct->serial + 1)
                         : frame_walk(&ct->t, ct->rep, c, s, fs, cw->acc);
    uint64_t h = gl_fnv1a(cw->acc, aw * sizeof *cw->acc);
    struct gl_lentry *e = NULL, *old = &cw->le[0];
    for (int i = 0; i < GL_LCACHE_N && !e; i++) {
        struct gl_lentry *x = &cw->le[i];
        if (x->bits && x->hash == h && !memcmp(x->acc, cw->acc, aw * sizeof *cw->acc))
            e = x;
        else if (!x->bits || (old->bits && x->stamp < old->stamp))
            old = x;
    }
    if (e) {
        memcpy(mask, e->bits, v->words * sizeof *mask);
    } else {
        acc_expand(ct, cw->acc, v->words, mask);
        if (!old->bits) {
            old->acc = gl_malloc((aw ? aw : 1) * sizeof *old->acc);
            old->bits = gl_malloc(v->words * sizeof *old->bits);
            if (!old->acc || !old->bits) { // allocation failure only means no caching
                gl_free(old->acc);
                gl_free(old->bits);
                old->acc = NULL;
                old->bits = NULL;
            }
        }
        if (old->bits) {
            memcpy(old->acc, cw->acc, aw * sizeof *cw->acc);
            memcpy(old->bits, mask, v->words * sizeof *mask);
            old->hash = h;
            e = old;
        }
    }
    if (e)
        e->stamp = ++c->clock;
    return visited + frame_walk(&v->bsl, NULL, c, s, fs, mask);
}

// The quote-free part of the mask of thread th's frame (fs bytes in c->frames[0]) into part
// (every word written): plain tokens by count for a free body; the class walk when the frame
// accepts much and its partition's trie is built; else every quote-free token walked with the
// frame alone. Returns the nodes visited.
static int64_t frame_part(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                          uint32_t th, size_t fs, uint32_t *part)
{
    int32_t mn, mx;
    uint64_t nb[4];
    if (gl_mstate_sframe_next_bytes(s, c->frames, nb)) { // a key of declared names only
        return names_part(c, v, s, fs, part);
    }
    if (gl_mstate_sframe_free(s, th, &mn, &mx)) { // the plain tokens by count, the rest walked
        int32_t k = mx < 0 || mx > v->max_plain ? v->max_plain : mx;
        memcpy(part, v->plain + (size_t)k * v->words, v->words * sizeof *part);
        return frame_walk(&v->slnq, NULL, c, s, fs, part);
    }
    if (gl_mstate_sframe_universal(s, th)) {
        // Regexes that take any plain run (a search `pattern` such as `.*[Hh]otel.*`, whose
        // byte partition is too fine for a class trie): every plain token, as for a free body
        // without maxLength, and the ~970 others walked exactly (~20 us instead of a 415k-node
        // walk, ~10 ms).
        memcpy(part, v->plain + (size_t)v->max_plain * v->words, v->words * sizeof *part);
        return frame_walk(&v->slnq, NULL, c, s, fs, part);
    }
    // The exact walk visits at most the subtrees under the first bytes the frame accepts; the
    // class walk pays off (and its trie is worth building) only when that bound is large.
    const struct gl_tnode *nd = v->noq.nodes;
    const size_t stride = GL_SFRAME_MAX / sizeof(uint64_t);
    uint64_t *f1 = c->frames + stride;
    int64_t bound = 0;
    for (uint32_t k = 1; k < v->noq.n_nodes; k = nd[k].next) {
        memcpy(f1, c->frames, fs);
        if (gl_mstate_sframe_step(s, f1, nd[k].byte))
            bound += nd[k].next - k;
    }
    uint8_t cls[256];
    int pending = 0;
    struct gl_cview *cw = NULL;
    if (bound > g_exact_max && gl_mstate_sframe_classes(s, th, cls) > 0)
        cw = cview_get(c, v, cls, &pending);
    struct gl_sfast sf;
    struct gl_sfast_st sst;
    int fast = gl_mstate_sfast(s, th, &sf, &sst), names = 0;
    // A key's pattern stepper: its declared names still possible are added by their paths
    // (more than the cache holds: the frame walk).
    if (fast && sf.key &&
        (names = gl_mstate_sframe_key_names(s, c->frames, c->nm_p, c->nm_len, GL_NAMES_MAX)) < 0)
        fast = 0;
    if (cw) {
        int64_t n = class_mask(cw, c, v, s, fs, fast ? &sf : NULL, &sst, part);
        return fast ? n + name_paths(c, v, names, part) : n;
    }
    memset(part, 0, v->words * sizeof *part);
    int64_t n;
    if (fast) { // the memo writes every word: before the names and backslash tokens are ORed in
        n = memo_walk(c->xmemo, GL_XMEMO_N, &v->noq, NULL, v->words, c, &sf, &sst, part, v, 1);
        n += name_paths(c, v, names, part);
        n += frame_walk(&v->bsl, NULL, c, s, fs, part);
    } else {
        n = frame_walk(&v->noq, NULL, c, s, fs, part);
    }
    if (pending)
        ctrie_rent(v, cls, n);
    return n;
}

static void add_expected(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                         uint32_t *mask)
{
    int n = gl_mstate_expected_tokens(s, c->exp, c->cap_exp);
    if (n > c->cap_exp) {
        int32_t *e = gl_realloc(c->exp, (size_t)n * sizeof *e);
        if (e) {
            c->exp = e;
            c->cap_exp = n;
            n = gl_mstate_expected_tokens(s, c->exp, c->cap_exp);
        }
        if (n > c->cap_exp)
            n = c->cap_exp; // out of memory: fewer token literals, never a wrong one
    }
    for (int i = 0; i < n; i++) {
        int32_t id = c->exp[i];
        if (id >= 0 && id < v->n_vocab)
            mask[id >> 5] |= 1u << (id & 31);
    }
}

// Stores (s, mask) in the cache, evicting the least recently used entry when full. Allocation
// failure only means the mask is not cached.
static void mcache_put(struct gl_grammar *g, struct gl_mcache *c, const struct gl_gvocab *v,
                       uint64_t h, const struct gl_mstate *s, const uint32_t *mask)
{
    if (!c->e) {
        c->e = gl_calloc((size_t)g->mcache_cap, sizeof *c->e);
        if (!c->e)
            return;
        c->cap = g->mcache_cap;
    }
    // A sample of 256 words first: more than GL_MASK_SPARSE_MAX bits in it is a dense mask for
    // certain, stored whole without taking its first 2,049 ids one by one (~3 us a put).
    int64_t n_set = 0;
    size_t stride = v->words / 256 ? v->words / 256 : 1;
    for (size_t w = 0; w < v->words && n_set <= GL_MASK_SPARSE_MAX; w += stride)
        n_set += __builtin_popcount(mask[w]);
    if (n_set <= GL_MASK_SPARSE_MAX)
        n_set = 0;
    // Else one pass: the allowed ids into c->sparse until there are too many for a sparse
    // entry. Blocks of 8 zero words are skipped with one test (a sparse mask is mostly zeros:
    // the word-by-word loop over its 6,314 words was most of a put).
    for (size_t w = 0; w < v->words && n_set <= GL_MASK_SPARSE_MAX; w++) {
        if ((w & 7) == 0 && w + 8 <= v->words) {
            uint32_t any = 0;
            for (size_t k = 0; k < 8; k++)
                any |= mask[w + k];
            if (!any) {
                w += 7;
                continue;
            }
        }
        for (uint32_t x = mask[w]; x && n_set <= GL_MASK_SPARSE_MAX; x &= x - 1)
            c->sparse[n_set++] = (uint32_t)(w * 32 + (size_t)__builtin_ctz(x));
    }
    size_t need = n_set <= GL_MASK_SPARSE_MAX ? (size_t)n_set : v->words;
    struct gl_mentry *e;
    if (c->n < c->cap) {
        e = &c->e[c->n];
        memset(e, 0, sizeof *e);
        if (gl_mstate_new(&e->st, &g->ir, NULL, NULL) != GL_OK)
            return;
        c->n++;
    } else {
        e = &c->e[0];
        for (int32_t i = 1; i < c->n; i++)
            if (c->e[i].stamp < e->stamp)
                e = &c->e[i];
    }
    // An empty mask still gets a buffer (memcpy of 0 ids from NULL is undefined).
    if (need > e->cap_data || !e->data || (need < e->cap_data / 4 && e->cap_data > 64)) {
        uint32_t *d = gl_realloc(e->data, (need ? need : 1) * sizeof *d);
        if (!d) {
            e->hash = 0;
            e->v = NULL; // unusable until refilled
            return;
        }
        e->data = d;
        e->cap_data = need ? need : 1;
    }
    e->hash = h;
    e->stamp = ++c->clock;
    e->v = v;
    gl_mstate_copy(e->st, s);
    if (n_set <= GL_MASK_SPARSE_MAX) {
        memcpy(e->data, c->sparse, (size_t)n_set * sizeof *e->data);
        e->n_ids = (int32_t)n_set;
    } else {
        memcpy(e->data, mask, v->words * sizeof *mask);
        e->n_ids = -1;
    }
}

static void mentry_read(const struct gl_mentry *e, size_t words, uint32_t *mask)
{
    if (e->n_ids < 0) {
        memcpy(mask, e->data, words * sizeof *mask);
        return;
    }
    memset(mask, 0, words * sizeof *mask);
    for (int32_t i = 0; i < e->n_ids; i++)
        mask[e->data[i] >> 5] |= 1u << (e->data[i] & 31);
}

// The quote tokens of a one-thread state inside a string value, ORed into mask. A token
// P '"' S is accepted iff the frame takes P and may end there, and the state after the closing
// quote takes S; that state pops the string, so it is the same for every P and S is walked once
// instead of under each P. Tokens whose every quote is escaped stay in the body (qesc).

// The suffixes S accepted from q, the state just after a closing quote (bits over v->n_qs, the
// empty S included), into accs: kept by q (c->qe), walked on a miss. Returns the nodes visited.
static int64_t quote_suffixes_at(struct gl_mcache *c, const struct gl_gvocab *v,
                                 const struct gl_mstate *q, uint32_t *accs, uint64_t *serial)
{
    size_t sw = ((size_t)v->n_qs + 31) / 32;
    uint64_t h = gl_mstate_hash(q);
    struct gl_qentry *old = &c->qe[0];
    if (serial)
        *serial = 0;
    for (int i = 0; i < GL_QCACHE_N; i++) {
        struct gl_qentry *e = &c->qe[i];
        if (e->v == v && e->hash == h && gl_mstate_equal(e->st, q)) {
            e->stamp = ++c->clock;
            if (serial)
                *serial = e->serial;
            if (accs)
                memcpy(accs, e->accs, sw * sizeof *accs);
            return 0;
        }
        if (e->stamp < old->stamp)
            old = e;
    }
    memset(accs, 0, sw * sizeof *accs);
    int64_t visited = trie_walk(&v->qsuf, c, q, accs);
    if (v->qs_empty >= 0)
        accs[v->qs_empty >> 5] |= 1u << (v->qs_empty & 31);
    if (old->accs && sw <= c->qe_words) {
        gl_mstate_copy(old->st, q);
        memcpy(old->accs, accs, sw * sizeof *accs);
        old->hash = h;
        old->v = v;
        old->stamp = ++c->clock;
        old->serial = old->stamp;
        if (serial)
            *serial = old->serial;
    }
    return visited;
}

static int64_t quote_suffixes(struct gl_mcache *c, const struct gl_gvocab *v,
                              const struct gl_mstate *q, uint32_t *accs)
{
    return quote_suffixes_at(c, v, q, accs, NULL);
}

// The prefixes P the frame (c->frames[0], fs bytes) takes and may end after, into accp (bits
// over v->n_qp); returns the first such P, or -1.
static int32_t quote_prefixes(struct gl_mcache *c, const struct gl_gvocab *v,
                              const struct gl_mstate *s, size_t fs, uint32_t *accp)
{
    const size_t stride = GL_SFRAME_MAX / sizeof(uint64_t);
    uint64_t *f1 = c->frames + stride;
    memset(accp, 0, ((size_t)v->n_qp + 31) / 32 * sizeof *accp);
    int32_t first = -1;
    for (int32_t a = 0; a < v->n_qp; a++) {
        memcpy(f1, c->frames, fs);
        uint32_t k = 0;
        while (k < v->qp_len[a] && gl_mstate_sframe_step(s, f1, v->qp[a][k]))
            k++;
        if (k == v->qp_len[a] && gl_mstate_sframe_closes(s, f1) == 1) {
            accp[a >> 5] |= 1u << (a & 31);
            if (first < 0)
                first = a;
        }
    }
    return first;
}

// The rest, given the prefixes (quote_prefixes): the P '"' S tokens and the tokens whose every
// quote is escaped (qesc: body tokens, walked with the frame, c->frames[0], fs bytes), into
// mask. Both depend on the frame and on the state after the closing quote alone (a string
// value's end pops its frame), so with the frame's cache entry e the result is kept there as
// ids, under the serial of the quote cache's entry for that state: the next mask of the same
// frame value before the same state (most positions of a string value, whose frame is keyed by
// budgets or DFA states) ORs the ids instead of ~1,000 P/S pairs and a ~50-node frame walk
// (~3-5 us). Returns the nodes visited.
static int64_t quote_part(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                          size_t fs, const uint32_t *accp, int32_t first, struct gl_sentry *e,
                          uint32_t *mask)
{
    int64_t visited = 0;
    uint64_t serial = 0;
    uint32_t *out = mask;
    if (first >= 0) {
        // The state after the closing quote, reached through the first P that ends the string.
        // c->qacc: P scratch (quote_prefixes without an entry), then the S bits.
        uint32_t *accs = c->qacc + ((size_t)v->n_qp + 31) / 32;
        struct gl_mstate *q = c->qst;
        gl_mstate_copy(q, s);
        for (uint32_t k = 0; k < v->qp_len[first]; k++)
            GL_ASSERT(gl_mstate_advance_byte(q, v->qp[first][k]));
        GL_ASSERT(gl_mstate_advance_byte(q, '"'));
        visited += quote_suffixes_at(c, v, q, accs, &serial);
        if (e && !v->qids_ok)
            e = NULL; // a quote token's prefix is longer than the entry's budgets tell apart
        if (e && serial && e->qserial == serial) {
            for (int32_t k = 0; k < e->n_qids; k++)
                mask[e->qids[k] >> 5] |= 1u << (e->qids[k] & 31);
            return visited;
        }
        if (e && serial)
            out = c->qbits; // all zero: the ids are gathered from it below
        for (int32_t k = 0; k < v->n_qd; k++) {
            int32_t a = v->qd_p[k], b = v->qd_s[k];
            if ((accp[a >> 5] >> (a & 31) & 1) && (accs[b >> 5] >> (b & 31) & 1))
                out[v->qd_tok[k] >> 5] |= 1u << (v->qd_tok[k] & 31);
        }
    }
    visited += frame_walk(&v->qesc, NULL, c, s, fs, out);
    if (out != mask) {
        // Gather (and clear) the accepted quote tokens: the P/S pairs, then qesc's.
        int32_t n = 0, cap = v->n_qd + (int32_t)v->qesc.n_ids;
        if ((size_t)cap > e->cap_qids) {
            uint32_t *d = gl_realloc(e->qids, (size_t)cap * sizeof *d);
            if (d) {
                e->qids = d;
                e->cap_qids = (size_t)cap;
            }
        }
        int keep = (size_t)cap <= e->cap_qids;
        for (int32_t k = 0; k < cap; k++) {
            uint32_t id = (uint32_t)(k < v->n_qd ? v->qd_tok[k] : v->qesc.ids[k - v->n_qd]);
            if (out[id >> 5] >> (id & 31) & 1) {
                out[id >> 5] &= ~(1u << (id & 31));
                mask[id >> 5] |= 1u << (id & 31);
                if (keep)
                    e->qids[n++] = id;
            }
        }
        e->n_qids = n;
        e->qserial = keep ? serial : 0;
    }
    return visited;
}

// quote_part for several string-value threads (c->ents from frames_union): a token P '"' S is
// accepted iff some thread takes P and may end there, and the state after the quote takes S.
// Each thread's string ends by popping its frame, so that state depends only on WHICH threads
// end: the P are grouped by that thread set (few distinct sets), and S is walked once per set
// instead of walking every quote token through the many-thread state (a ~440-node walk whose
// every step moves 20+ threads: ~2 ms). -1 when it does not apply (a key or an escape, no cache
// entry, too many sets); mask is then untouched. Returns the nodes visited.
static int64_t quote_multi(struct gl_mcache *c, const struct gl_gvocab *v,
                           const struct gl_mstate *s, const uint32_t *th, int nt, uint32_t *mask)
{
    GL_ASSERT(nt <= 32 && nt <= GL_SCACHE_N); // a thread set is a uint32_t
    uint32_t *sub = c->qsub;
    memset(sub, 0, (size_t)v->n_qp * sizeof *sub);
    size_t pw = ((size_t)v->n_qp + 31) / 32;
    for (int t = 0; t < nt; t++) {
        struct gl_sentry *e = c->ents[t];
        size_t fs = gl_mstate_sframe(s, th[t], c->frames, GL_SFRAME_MAX);
        // Checked on the frame itself: free key bodies share cache keys with free strings.
        if (!e || !fs || gl_mstate_sframe_closes(s, c->frames) < 0)
            return -1;
        if (!e->qp_ok) {
            if (!e->qp && !(e->qp = gl_malloc((pw ? pw : 1) * sizeof *e->qp)))
                return -1;
            e->qp_first = quote_prefixes(c, v, s, fs, e->qp);
            e->qp_ok = 1;
        }
        for (size_t w = 0; w < pw; w++)
            for (uint32_t x = e->qp[w]; x; x &= x - 1)
                sub[w * 32 + (size_t)__builtin_ctz(x)] |= 1u << t;
    }
    uint32_t sets[GL_QSETS_MAX];
    int32_t first[GL_QSETS_MAX];
    int n_sets = 0;
    for (int32_t a = 0; a < v->n_qp; a++) {
        if (!sub[a])
            continue;
        int k = 0;
        while (k < n_sets && sets[k] != sub[a])
            k++;
        if (k == n_sets) {
            if (n_sets == GL_QSETS_MAX)
                return -1;
            sets[n_sets] = sub[a];
            first[n_sets++] = a;
        }
    }
    int64_t visited = 0;
    uint32_t *accs = c->qacc + pw; // the S bits (see quote_part)
    for (int k = 0; k < n_sets; k++) {
        // The state after the closing quote, through the set's first P. Every thread of the set
        // takes P and ends; the others die at the quote at the latest. Should it die (it cannot
        // for JSON values, whose parents always continue), no token of this set is accepted.
        struct gl_mstate *q = c->qst;
        gl_mstate_copy(q, s);
        uint32_t i = 0;
        while (i < v->qp_len[first[k]] && gl_mstate_advance_byte(q, v->qp[first[k]][i]))
            i++;
        if (i < v->qp_len[first[k]] || !gl_mstate_advance_byte(q, '"'))
            continue;
        visited += quote_suffixes(c, v, q, accs);
        for (int32_t j = 0; j < v->n_qd; j++) {
            int32_t a = v->qd_p[j], b = v->qd_s[j];
            if (sub[a] == sets[k] && (accs[b >> 5] >> (b & 31) & 1))
                mask[v->qd_tok[j] >> 5] |= 1u << (v->qd_tok[j] & 31);
        }
    }
    return visited + trie_walk(&v->qesc, c, s, mask);
}

// The quote tokens of a one-thread state inside the key of an object with declared names only
// (nb: the key frame's next bytes), ORed into mask. A token P '"' S is accepted iff the state takes
// P and then the quote (the key is then a declared name), and the state after that takes S. Only
// the P that spell the rest of a candidate name get that far; S is walked once per state after the
// quote (quote_suffixes, kept across masks) instead of under every P by the whole-state walk. -1
// when more than GL_QSETS_MAX prefixes close the key (mask then untouched). Returns the nodes
// visited.
static int64_t quote_key(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                         const uint64_t nb[4], uint32_t *mask)
{
    size_t pw = ((size_t)v->n_qp + 31) / 32, sw = ((size_t)v->n_qs + 31) / 32;
    uint32_t *slot = c->qsub;           // per P: its index into accs + 1, or 0
    uint32_t *accs = c->qacc + pw + sw; // GL_QSETS_MAX S bitsets
    memset(slot, 0, (size_t)v->n_qp * sizeof *slot);
    struct gl_mstate *q = c->qst;
    int64_t visited = 0;
    uint32_t n_acc = 0;
    for (int32_t a = 0; a < v->n_qp; a++) {
        uint8_t b0 = v->qp_len[a] ? v->qp[a][0] : '"';
        if (!(nb[b0 >> 6] >> (b0 & 63) & 1))
            continue;
        gl_mstate_copy(q, s);
        uint32_t k = 0;
        while (k < v->qp_len[a] && gl_mstate_advance_byte(q, v->qp[a][k]))
            k++;
        visited += k;
        if (k < v->qp_len[a] || !gl_mstate_advance_byte(q, '"'))
            continue;
        if (n_acc == GL_QSETS_MAX)
            return -1;
        visited += quote_suffixes(c, v, q, accs + n_acc * sw);
        slot[a] = ++n_acc;
    }
    for (int32_t j = 0; n_acc && j < v->n_qd; j++) {
        uint32_t k = slot[v->qd_p[j]];
        int32_t b = v->qd_s[j];
        if (k && (accs[(k - 1) * sw + ((uint32_t)b >> 5)] >> (b & 31) & 1))
            mask[v->qd_tok[j] >> 5] |= 1u << (v->qd_tok[j] & 31);
    }
    return visited + trie_walk(&v->qesc, c, s, mask);
}

// The quote tokens of a one-thread state inside a key that need not be a declared name (an
// object with additional or pattern properties), ORed into mask. A token P '"' S is accepted
// iff the key frame (c->frames[0], fs bytes) takes P, the quote then closes the key
// (gl_mstate_sframe_key_close; read from the frame without stepping P where the object takes
// any other key: gl_mstate_sframe_key_quote), and the state after it takes S. That state is one
// per outcome (a declared prop, or the value node of a non-declared key), up to the hash that a
// non-declared key adds to the object's duplicate list, which only the close of a further key
// of this object reads: for S with fewer than two quotes it is zeroed (gl_mstate_key_canon), so
// the state repeats across the key's positions and the S bits come from the quote cache. The
// tokens whose S has two quotes or more (qmany) are walked whole, the body tokens of qesc with
// the frame. Before, every mask of such a key walked all quote tokens with whole states (~450
// nodes, each a copy and a key step over the candidate names: ~30 us).
// -1 when more than GL_QSETS_MAX outcomes occur (mask then untouched). Returns the nodes
// visited.
static int64_t quote_okey(struct gl_mcache *c, const struct gl_gvocab *v, const struct gl_mstate *s,
                          size_t fs, uint32_t *mask)
{
    const size_t stride = GL_SFRAME_MAX / sizeof(uint64_t);
    uint64_t *f1 = c->frames + stride;
    size_t pw = ((size_t)v->n_qp + 31) / 32, sw = ((size_t)v->n_qs + 31) / 32;
    uint32_t *slot = c->qsub;           // per P: its outcome's index + 1, or 0
    uint32_t *accs = c->qacc + pw + sw; // GL_QSETS_MAX S bitsets
    int kind[GL_QSETS_MAX];
    int32_t member[GL_QSETS_MAX], rep_p[GL_QSETS_MAX];
    int n_out = 0;
    int64_t visited = 0;
    int32_t mb = -1;
    if (gl_mstate_sframe_key_close(s, c->frames, &mb) < 0)
        return -1; // not a key, or inside an escape (a '"' next is part of the key)
    for (int32_t a = 0; a < v->n_qp; a++) {
        slot[a] = 0;
        int r = gl_mstate_sframe_key_quote(s, c->frames, v->qp[a], v->qp_len[a], &mb);
        visited += r >= 0 ? v->qp_len[a] : 0; // as a stepped P's bytes (the cache's cost measure)
        if (r < 0) {                          // not read from the frame: P stepped on a copy
            memcpy(f1, c->frames, fs);
            uint32_t k = 0;
            while (k < v->qp_len[a] && gl_mstate_sframe_step(s, f1, v->qp[a][k]))
                k++;
            visited += k;
            r = k == v->qp_len[a] ? gl_mstate_sframe_key_close(s, f1, &mb) : 0;
        }
        if (r < 0)
            return -1; // inside an escape or a character after P: not this split's case
        if (r == 0)
            continue;
        int o = 0;
        while (o < n_out && !(kind[o] == r && member[o] == mb))
            o++;
        if (o == n_out) {
            if (n_out == GL_QSETS_MAX)
                return -1;
            kind[o] = r;
            member[o] = mb;
            rep_p[o] = a;
            n_out++;
        }
        slot[a] = (uint32_t)o + 1;
    }
    for (int o = 0; o < n_out; o++) {
        struct gl_mstate *q = c->qst;
        gl_mstate_copy(q, s);
        uint32_t k = 0;
        int32_t a = rep_p[o];
        while (k < v->qp_len[a] && gl_mstate_advance_byte(q, v->qp[a][k]))
            k++;
        visited += k + 1;
        // The frame took P and said the quote closes: the state agrees (GL_ASSERT would do but
        // for the thread's size limit, which refuses every key of the outcome alike).
        if (k < v->qp_len[a] || !gl_mstate_advance_byte(q, '"') ||
            (kind[o] == 2 && !gl_mstate_key_canon(q))) {
            memset(accs + (size_t)o * sw, 0, sw * sizeof *accs);
            continue;
        }
        visited += quote_suffixes(c, v, q, accs + (size_t)o * sw);
    }
    for (int32_t j = 0; n_out && j < v->n_qd; j++) {
        uint32_t o = slot[v->qd_p[j]];
        int32_t b = v->qd_s[j];
        if (o && !v->qs_many[b] && (accs[(o - 1) * sw + ((uint32_t)b >> 5)] >> (b & 31) & 1))
            mask[v->qd_tok[j] >> 5] |= 1u << (v->qd_tok[j] & 31);
    }
    visited += trie_walk(&v->qmany, c, s, mask);
    return visited + frame_walk(&v->qesc, NULL, c, s, fs, mask);
}

// The union over the threads th[0..nt) of each frame's part: the quote-free tokens of a string
// or key body (frame_part), or the number-only tokens of a number (num), from the cache keyed
// by the frame's value, computed on a miss. Writes every word of mask; ents[t]: thread t's cache
// entry (NULL when not kept; with at most GL_SCACHE_N threads none is evicted by a later one,
// since the least recently used entry goes first). Returns the nodes visited.
static int64_t frames_union(struct gl_mcache *c, const struct gl_gvocab *v,
                            const struct gl_mstate *s, const uint32_t *th, int nt, int num,
                            uint32_t *mask, struct gl_sentry **ents)
{
    int64_t visited = 0;
    uint64_t serial = ++c->clock; // entries ORed into this mask carry it (equal frames: once)
    int filled = 0;               // mask holds a part (else it is still to be written)
    for (int t = 0; t < nt; t++) {
        uint8_t key[GL_SKEY_MAX];
        size_t klen;
        int32_t mn, mx;
        if (!num && gl_mstate_sframe_free(s, th[t], &mn, &mx)) {
            // A free body at a character boundary accepts by its budget alone (frame_part), and
            // which quote-token prefixes may end it by its minimum (quote_part), so every such
            // frame with the same clamped budgets shares one entry (-1: no frame value starts
            // with a node index of -1).
            int32_t fk[3] = {-1, mx < 0 || mx > v->free_max ? v->free_max : mx,
                             mn > GL_QP_MAX_CHARS ? GL_QP_MAX_CHARS : mn};
            memcpy(key, fk, sizeof fk);
            klen = sizeof fk;
        } else {
            klen = gl_mstate_string_key(s, th[t], key, sizeof key);
        }
        // Frames the threads were picked by (at most GL_SFRAME_MAX bytes) always fit a key.
        GL_ASSERT(klen > 0);
        uint64_t h = gl_fnv1a(key, klen);
        struct gl_sentry *e = NULL, *old = &c->se[0];
        for (int k = 0; k < GL_SCACHE_N; k++) {
            struct gl_sentry *x = &c->se[k];
            if (x->v == v && x->hash == h && x->key_len == klen && !memcmp(x->key, key, klen)) {
                e = x;
                break;
            }
            if (x->stamp < old->stamp)
                old = x;
        }
        const uint32_t *part;
        ents[t] = e;
        if (e) {
            if (e->serial == serial)
                continue; // an equal frame of another thread: already in the mask
            part = e->bits;
        } else {
            if (!old->bits || old->v != v) {
                gl_free(old->bits);
                old->v = NULL;
                old->bits = gl_malloc(v->words * sizeof *old->bits);
            }
            uint32_t *dst = old->bits ? old->bits : c->part; // no memory: computed, not kept
            size_t fs = gl_mstate_sframe(s, th[t], c->frames, GL_SFRAME_MAX); // only on a miss
            GL_ASSERT(fs > 0);
            int64_t n;
            if (num) {
                memset(dst, 0, v->words * sizeof *dst);
                n = frame_walk(&v->numq, NULL, c, s, fs, dst);
            } else {
                n = frame_part(c, v, s, th[t], fs, dst);
            }
            visited += n;
            if (old->bits) {
                memcpy(old->key, key, klen);
                old->key_len = klen;
                old->hash = h;
                old->v = v;
                old->qp_ok = 0;
                old->qserial = 0;
                e = old;
            }
            part = dst;
        }
        if (e) {
            e->stamp = ++c->clock;
            e->serial = serial;
        }
        ents[t] = e;
        if (!filled)
            memcpy(mask, part, v->words * sizeof *mask);
        else
            for (size_t w = 0; w < v->words; w++)
                mask[w] |= part[w];
        filled = 1;
    }
    GL_ASSERT(filled); // nt >= 1, and the first thread's part is never skipped
    return visited;
}

// A state whose threads are all inside string or key bodies (gl_mstate_sframes): the union of
// the quote-free parts, then the tokens with a quote (they may close a string, which depends on
// the rest of the state). Returns the nodes visited.
static int64_t string_mask(struct gl_mcache *c, const struct gl_gvocab *v,
                           const struct gl_mstate *s, const uint32_t *th, int nt, uint32_t *mask)
{
    int64_t visited = frames_union(c, v, s, th, nt, 0, mask, c->ents);
    struct gl_sentry *e0 = c->ents[0];
    int64_t qv;
    size_t fs = 0;
    uint64_t nb[4];
    if (nt == 1 && (fs = gl_mstate_sframe(s, th[0], c->frames, GL_SFRAME_MAX)) > 0 &&
        gl_mstate_sframe_closes(s, c->frames) >= 0) {
        // The prefixes depend on the frame alone: kept with its entry.
        size_t pw = ((size_t)v->n_qp + 31) / 32;
        if (e0 && !e0->qp)
            e0->qp = gl_malloc((pw ? pw : 1) * sizeof *e0->qp);
        uint32_t *accp = e0 && e0->qp ? e0->qp : c->qacc;
        int32_t first;
        if (e0 && e0->qp && e0->qp_ok) {
            first = e0->qp_first;
        } else {
            first = quote_prefixes(c, v, s, fs, accp);
            if (accp != c->qacc) {
                e0->qp_first = first;
                e0->qp_ok = 1;
            }
        }
        qv = quote_part(c, v, s, fs, accp, first, e0, mask);
    } else if (nt == 1 && fs > 0 && gl_mstate_sframe_next_bytes(s, c->frames, nb) &&
               (qv = quote_key(c, v, s, nb, mask)) >= 0) {
        // a key of declared names only (quote_key)
    } else if (nt == 1 && fs > 0 && (qv = quote_okey(c, v, s, fs, mask)) >= 0) {
        // a key that need not be a declared name (quote_okey)
    } else if (nt > 32 || nt > GL_SCACHE_N || (qv = quote_multi(c, v, s, th, nt, mask)) < 0) {
        qv = trie_walk(&v->quot, c, s, mask);
    }
    return visited + qv;
}

// A state with number threads whose other threads take no number byte (gl_mstate_nframes): the
// union of the numbers' number-only parts, then every other token walked from s. Returns the
// nodes visited.
static int64_t number_mask(struct gl_mcache *c, const struct gl_gvocab *v,
                           const struct gl_mstate *s, const uint32_t *th, int nt, uint32_t *mask)
{
    int64_t visited = frames_union(c, v, s, th, nt, 1, mask, c->ents);
    return visited + trie_walk(&v->nonum, c, s, mask);
}

void gl_mask_fill(struct gl_grammar *g, const struct gl_gvocab *v, const struct gl_mstate *s,
                  uint32_t *mask, struct gl_matcher_stats *st)
{
    struct gl_mcache *c = g->mcache;
    GL_ASSERT(c && c->n_walk >= v->full.max_depth + 2); // gl_mask_prepare ran for v
    if (st)
        st->masks++;
    if (gl_mstate_any_bytes(s)) {
        // Free text: a GN_ANYBYTES thread takes every byte string, so every byte-matchable token
        // is allowed whatever the other threads do; no walk and no cache entry (~2 us).
        for (size_t w = 0; w < v->words; w++)
            mask[w] = ~v->excluded[w];
        if (v->n_vocab & 31)
            mask[v->words - 1] &= (1u << (v->n_vocab & 31)) - 1;
        add_expected(c, v, s, mask);
        if (st)
            st->fast_path++;
        return;
    }
    uint64_t h = 0;
    int use_cache = g->mcache_cap > 0;
    if (use_cache) {
        h = gl_mstate_hash(s);
        for (int32_t i = 0; i < c->n; i++) {
            struct gl_mentry *e = &c->e[i];
            if (e->hash == h && e->v == v && gl_mstate_equal(e->st, s)) {
                e->stamp = ++c->clock;
                mentry_read(e, v->words, mask);
                if (st)
                    st->cache_hits++;
                return;
            }
        }
    }
    int32_t min_more = 0, max_more = 0;
    int64_t visited;
    int nt;
    if (use_cache && (nt = gl_mstate_sframes(s, c->th, GL_SFRAMES_CAP)) > 0) {
        visited = string_mask(c, v, s, c->th, nt, mask);
    } else if (use_cache && (nt = gl_mstate_nframes(s, c->th, GL_SFRAMES_CAP)) > 0) {
        visited = number_mask(c, v, s, c->th, nt, mask);
    } else if (gl_mstate_string_fast(s, &min_more, &max_more)) {
        // Several free strings or keys with different budgets, or the cache is off.
        int32_t k = max_more < 0 || max_more > v->max_plain ? v->max_plain : max_more;
        memcpy(mask, v->plain + (size_t)k * v->words, v->words * sizeof *mask);
        // A JSON string body rejects every raw control byte; then the tokens that reach one
        // before any quote or backslash are rejected too and need no walk (a state that takes
        // some control byte, e.g. a raw ATEM value, walks them all).
        struct gl_mstate *probe = c->walk[1];
        gl_mstate_copy(probe, s);
        int ctrl_ok = 0;
        for (int b = 0; b < 0x20 && !ctrl_ok; b++)
            ctrl_ok = gl_mstate_advance_byte(probe, (uint8_t)b);
        visited = trie_walk(ctrl_ok ? &v->slow : &v->strq, c, s, mask);
        if (st)
            st->fast_path++;
    } else {
        memset(mask, 0, v->words * sizeof *mask);
        visited = trie_walk(&v->full, c, s, mask);
    }
    add_expected(c, v, s, mask);
    if (st)
        st->nodes_visited += visited;
    if (use_cache && visited >= g->mcache_min_nodes)
        mcache_put(g, c, v, h, s, mask);
}

void gl_mask_fill_ref(const struct gl_gvocab *v, const struct gl_mstate *s,
                      struct gl_mstate *scratch, uint32_t *mask)
{
    memset(mask, 0, v->words * sizeof *mask);
    for (int32_t id = 0; id < v->n_vocab; id++) {
        if (gl_gvocab_is_excluded(v, id))
            continue;
        size_t len;
        const uint8_t *p = gl_gvocab_token(v, id, &len);
        gl_mstate_copy(scratch, s);
        size_t k = 0;
        while (k < len && gl_mstate_advance_byte(scratch, p[k]))
            k++;
        if (k == len)
            mask[id >> 5] |= 1u << (id & 31);
    }
    int32_t ids[256];
    int n = gl_mstate_expected_tokens(s, ids, 256);
    GL_ASSERT(n <= 256); // tests use grammars with few token literals
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < v->n_vocab)
            mask[ids[i] >> 5] |= 1u << (ids[i] & 31);
}
