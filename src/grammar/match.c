// SPDX-License-Identifier: MIT
// match: the byte-level recogniser for a struct gl_gir (contract in match.h).
// A state is ONE contiguous buffer: a sorted, deduplicated array of threads; a
// thread is a header plus a stack of variable-size frames (node, progress, and
// for JSON nodes their payload: string decoder + regex states, number text,
// object seen-bitset/pattern states/key hashes). Copying a state is a memcpy of
// the used bytes; equal states have identical bytes. Every thread in a state
// sits at a consuming position (or has an empty stack: the root is complete).
// advance_byte = step every thread, then the epsilon closure of the survivors
// (SEQ/ALT/REPEAT/EMPTY and nullable endings) into consuming positions, then
// dedupe + sort. Viability is decided at every byte (strings against their
// regexes and budgets, keys against the declared/pattern/additional names still
// possible, numbers against their exact range), so a byte is accepted only if
// some continuation completes the document. Limits (documented restrictions,
// never over-acceptance): bounded numbers have no exponent and at most 63
// bytes; one thread is at most 64 KiB; several regexes on one string are
// checked for viability one by one (their intersection is not computed).
#include "grammar/match.h"

#include "base/buf.h"
#include "grammar/regex.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREAD_BYTES (64u * 1024u)
#define TMP_BYTES        (4u * 1024u * 1024u) // closure scratch (untouched pages cost nothing)
#define NUM_TEXT         64                   // bounded-number text buffer (bytes incl. NUL)

struct thr {       // thread header; frames follow
    uint32_t size; // bytes incl. header, multiple of 8
    uint32_t top;  // offset of the top frame; 0: empty stack (the root is complete)
    uint32_t depth;
    uint32_t pad; // always 0 (bytes are compared)
};
struct frm { // frame header; payload follows (node-kind specific, multiple of 8
             // bytes)
    int32_t node;
    uint32_t size; // incl. header
    uint32_t prev; // offset of the frame below; 0: none
    uint32_t a, b, c;
};

// JSON string decoder (values and object keys).
enum { E_NONE, E_BS, E_U, E_LBS, E_LU, E_L };
struct jdec {
    uint8_t esc;  // E_*
    uint8_t k;    // hex digits read in E_U / E_L
    uint8_t need; // UTF-8 continuation bytes still expected
    uint8_t lo;   // range of the next continuation byte
    uint8_t hi;
    uint8_t pad[3];
    uint32_t v;  // hex value read so far
    uint32_t hs; // high surrogate of a pair
};
struct spay { // JSTRING payload (frame a = code points, b = phase)
    struct jdec d;
    uint32_t re[]; // one DFA state per regex of the node
};
struct upay {       // after spay (8-aligned), for a uniqueItems item (u.str.uniq)
    uint64_t hash;  // name_hash_step over the decoded bytes so far
    uint32_t len;   // decoded bytes so far
    int32_t lo, hi; // u.str.names that start with them (names only)
    uint32_t pad;
};
enum { S_OPEN, S_BODY };

// JNUMBER (frame a = phase, b = text length); payload: text (bounded nodes
// only).
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_EXP, N_EXPSIGN, N_EXPD };

// JOBJECT payload; followed by the seen bitset (u32 words), pattern states
// (u32), then n_hash u64 hashes of the non-declared keys read so far (grows
// while the frame is on top).
enum { O_START, O_FIRST, O_KEY, O_COLON, O_VALUE_WS, O_IN_VALUE, O_NEXT, O_COMMA };
struct opay {
    uint64_t keyhash;
    struct jdec d;
    uint8_t phase, ws, pad[2];
    int32_t count;   // members (keys closed)
    int32_t req;     // required properties not yet seen
    int32_t lo, hi;  // props whose name starts with the decoded key so far
    uint32_t keylen; // decoded key bytes
    int32_t cur;     // value node of the member being read
    int32_t ord;     // ordered mode: next position in obj.order
    uint32_t n_hash;
};

// JARRAY: frame a = phase, b = items, c = whitespace run. A uniqueItems array's payload is
// the hash of each item read (8 bytes each, grown by one slot when an item starts; the item's
// closing quote fills it).
enum { A_START, A_FIRST, A_IN_ITEM, A_NEXT, A_COMMA };

// REPEAT: frame a = count, b = phase.
enum { R_START, R_ITEM, R_SEP };

struct gl_mstate {
    const struct gl_gir *ir;
    int32_t max_threads, max_depth;
    int overflow;
    uint32_t n_threads;
    uint32_t used; // bytes of buf
    uint32_t cap;
    uint8_t *buf;
};

// Per-thread scratch for one advance (never part of a state's value, so states
// stay small: the matcher keeps one per accepted token for rollback). tmp holds
// threads being closed (a stack: only the topmost may grow); out collects the
// new set before it is sorted into the state.
struct scratch {
    uint8_t *tmp;
    uint32_t tmp_top;
    int fail; // a limit was hit during this advance
    uint8_t *out;
    uint32_t out_cap, out_used, out_n;
    uint32_t *idx; // thread offsets in out (for sorting)
    uint64_t *th;  // thread hashes in out, kept once there are EMIT_HASH_MIN threads (hashed)
    uint32_t idx_cap;
    int hashed;
};
static _Thread_local struct scratch X;

// Frees a thread's scratch when the thread exits (registered on first use).
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static void scratch_free(void *p)
{
    struct scratch *x = p;
    gl_free(x->tmp);
    gl_free(x->out);
    gl_free(x->idx);
    gl_free(x->th);
    memset(x, 0, sizeof *x);
}
static void scratch_key_init(void)
{
    GL_ASSERT(pthread_key_create(&g_scratch_key, scratch_free) == 0);
}

// ---------------------------------------------------------------------------------------------
// Small helpers

static inline uint32_t r8(uint32_t n)
{
    return (n + 7u) & ~7u;
}

static inline struct thr *T(uint8_t *base, uint32_t off)
{
    return (struct thr *)(void *)(base + off);
}
static inline struct frm *F(struct thr *t, uint32_t off)
{
    return (struct frm *)(void *)((uint8_t *)t + off);
}
static inline struct frm *top_of(struct thr *t)
{
    return t->top ? F(t, t->top) : NULL;
}
static inline void *payload(struct frm *f)
{
    return (uint8_t *)f + sizeof *f;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    // n is a multiple of 8: a multiply-xorshift over words.
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h ^= w;
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h ^= h >> 29;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    return h;
}

static inline int is_ws(uint8_t b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\r';
}

// Names read so far (object keys outside the declared ones, the items of a uniqueItems array)
// are remembered by a 64-bit hash of their decoded bytes and length. A collision refuses a
// distinct name (a narrowing, never an acceptance), at odds of about n^2 / 2^64 for n names.
#define NAME_HASH0 0xCBF29CE484222325ull
static inline uint64_t name_hash_step(uint64_t h, uint8_t b)
{
    h = (h ^ b) * 0x100000001B3ull;
    return h ^ (h >> 29);
}
static inline uint64_t name_hash_end(uint64_t h, uint32_t len)
{
    return h ^ ((uint64_t)len << 56);
}
static uint64_t name_hash(const struct gl_gbytes *nm)
{
    uint64_t h = NAME_HASH0;
    for (uint32_t i = 0; i < nm->len; i++)
        h = name_hash_step(h, nm->p[i]);
    return name_hash_end(h, nm->len);
}
static int hash_in(const uint64_t *hs, uint32_t n, uint64_t h)
{
    for (uint32_t i = 0; i < n; i++)
        if (hs[i] == h)
            return 1;
    return 0;
}

// Sorted name lists (declared properties, an enum's strings: memcmp order, a prefix first; each
// element, stride bytes apart, starts with its struct gl_gbytes): the names in [*lo, *hi) share
// their first kl bytes, the one of length kl (if any) first and the rest sorted by byte kl.
// Narrows the range to those whose byte kl is b.
_Static_assert(offsetof(struct gl_gprop, name) == 0, "names_narrow reads a prop as its name");
static void names_narrow(const void *base, size_t stride, uint32_t kl, uint8_t b, int32_t *lo,
                         int32_t *hi)
{
#define NM(i) ((const struct gl_gbytes *)(const void *)((const uint8_t *)base + (size_t)(i)*stride))
    int32_t l = *lo, h = *hi;
    if (l < h && NM(l)->len == kl)
        l++;
    int32_t a = l, z = h;
    while (a < z) { // first with byte >= b
        int32_t mid = a + (z - a) / 2;
        if (NM(mid)->p[kl] < b)
            a = mid + 1;
        else
            z = mid;
    }
    int32_t s = a;
    z = h;
    while (a < z) { // first with byte > b
        int32_t mid = a + (z - a) / 2;
        if (NM(mid)->p[kl] <= b)
            a = mid + 1;
        else
            z = mid;
    }
#undef NM
    *lo = s;
    *hi = a;
}

// ---------------------------------------------------------------------------------------------
// JSON string decoding (shared by string values and object keys)

enum { EV_REJECT, EV_MORE, EV_RAW, EV_CP, EV_QUOTE };
struct jev {
    int kind;
    int lead, last; // EV_RAW: the byte starts / completes a code point
    uint32_t cp;    // EV_CP
    int nr;         // EV_MORE: code points still reachable, as ranges
    uint32_t lo[3], hi[3];
};

static void ev_range(struct jev *e, uint32_t lo, uint32_t hi)
{
    if (lo <= hi) {
        e->lo[e->nr] = lo;
        e->hi[e->nr] = hi;
        e->nr++;
    }
}

// Code points reachable from a \u escape whose first k hex digits are v (k <
// 4), or, with hs != 0, the low half of a pair after high surrogate hs.
static void escape_ranges(struct jev *e, uint32_t v, int k, uint32_t hs)
{
    int sh = 4 * (4 - k);
    uint32_t a = v << sh, b = ((v + 1) << sh) - 1;
    e->kind = EV_MORE;
    e->nr = 0;
    if (hs) {
        uint32_t x = a > 0xDC00 ? a : 0xDC00, y = b < 0xDFFF ? b : 0xDFFF;
        uint32_t base = 0x10000 + ((hs - 0xD800) << 10);
        if (x <= y)
            ev_range(e, base + (x - 0xDC00), base + (y - 0xDC00));
        return;
    }
    if (a <= 0xD7FF)
        ev_range(e, a, b < 0xD7FF ? b : 0xD7FF);
    uint32_t x = a > 0xD800 ? a : 0xD800, y = b < 0xDBFF ? b : 0xDBFF;
    if (x <= y)
        ev_range(e, 0x10000 + ((x - 0xD800) << 10), 0x10000 + ((y - 0xD800) << 10) + 0x3FF);
    if (b >= 0xE000)
        ev_range(e, a > 0xE000 ? a : 0xE000, b);
}

// One raw byte of UTF-8 (not for ASCII-special handling): 1 accepted (*lead: it
// starts a code point), 0 invalid (overlongs, surrogates, > U+10FFFF, stray
// continuation bytes).
static int utf8_byte(struct jdec *d, uint8_t b, int *lead)
{
    *lead = 0;
    if (d->need) {
        if (b < d->lo || b > d->hi)
            return 0;
        d->need--;
        d->lo = 0x80;
        d->hi = 0xBF;
        return 1;
    }
    *lead = 1;
    if (b < 0x80)
        return 1;
    return gl_utf8_lead(b, &d->need, &d->lo, &d->hi);
}

static void jdec_step(struct jdec *d, uint8_t b, struct jev *e)
{
    e->kind = EV_REJECT;
    e->lead = e->last = 0;
    if (d->need) {
        if (b < d->lo || b > d->hi)
            return;
        d->need--;
        d->lo = 0x80;
        d->hi = 0xBF;
        e->kind = EV_RAW;
        e->last = d->need == 0;
        return;
    }
    switch (d->esc) {
    case E_NONE:
        if (b == '"') {
            e->kind = EV_QUOTE;
        } else if (b == '\\') {
            d->esc = E_BS;
            e->kind = EV_MORE;
            e->nr = 0;
            ev_range(e, 0, 0xD7FF);
            ev_range(e, 0xE000, 0x10FFFF);
        } else if (b < 0x20) {
            return;
        } else if (b < 0x80) {
            e->kind = EV_RAW;
            e->lead = e->last = 1;
        } else {
            if (!utf8_byte(d, b, &e->lead))
                return;
            e->kind = EV_RAW;
        }
        return;
    case E_BS: {
        uint32_t cp;
        switch (b) {
        case '"':
            cp = '"';
            break;
        case '\\':
            cp = '\\';
            break;
        case '/':
            cp = '/';
            break;
        case 'b':
            cp = 8;
            break;
        case 'f':
            cp = 12;
            break;
        case 'n':
            cp = 10;
            break;
        case 'r':
            cp = 13;
            break;
        case 't':
            cp = 9;
            break;
        case 'u':
            d->esc = E_U;
            d->k = 0;
            d->v = 0;
            escape_ranges(e, 0, 0, 0);
            return;
        default:
            return;
        }
        d->esc = E_NONE;
        e->kind = EV_CP;
        e->cp = cp;
        return;
    }
    case E_U:
    case E_L: {
        int h = gl_hex_val(b);
        if (h < 0)
            return;
        uint32_t v = (d->v << 4) | (uint32_t)h;
        int k = d->k + 1;
        int low = d->esc == E_L;
        if (k < 4) {
            escape_ranges(e, v, k, low ? d->hs : 0);
            if (e->nr == 0) {
                e->kind = EV_REJECT;
                return;
            }
            d->v = v;
            d->k = (uint8_t)k;
            return;
        }
        if (low) {
            if (v < 0xDC00 || v > 0xDFFF)
                return;
            e->kind = EV_CP;
            e->cp = 0x10000 + ((d->hs - 0xD800) << 10) + (v - 0xDC00);
            d->esc = E_NONE;
            d->hs = 0;
            d->v = 0;
            d->k = 0;
            return;
        }
        if (v >= 0xDC00 && v <= 0xDFFF)
            return; // lone low surrogate
        if (v >= 0xD800 && v <= 0xDBFF) {
            d->hs = v;
            d->esc = E_LBS;
            d->v = 0;
            d->k = 0;
            escape_ranges(e, 0, 0, v);
            return;
        }
        e->kind = EV_CP;
        e->cp = v;
        d->esc = E_NONE;
        d->v = 0;
        d->k = 0;
        return;
    }
    case E_LBS:
    case E_LU:
        if (b != (d->esc == E_LBS ? '\\' : 'u'))
            return; // a high surrogate must be followed by \u + low surrogate
        d->esc = d->esc == E_LBS ? E_LU : E_L;
        escape_ranges(e, 0, 0, d->hs);
        return;
    }
}

// ---------------------------------------------------------------------------------------------
// Probing code points for viability. A prober answers, for the first n bytes of
// a code point's UTF-8 (full = the whole code point), whether some acceptable
// continuation remains.

// Is some code point in [lo, hi] acceptable? Skips every code point sharing a
// dead UTF-8 prefix.
// t: the frame's thread, when the prober needs the frames below (a uniqueItems item).
typedef int (*probe_fn)(struct gl_mstate *m, struct thr *t, struct frm *f, const uint8_t *u, int n,
                        int full);

static int range_viable(struct gl_mstate *m, struct thr *t, struct frm *f, probe_fn probe,
                        uint32_t lo, uint32_t hi)
{
    uint32_t cp = lo;
    while (cp <= hi) {
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xE000;
            continue;
        }
        uint8_t u[4];
        int n = gl_utf8_encode(cp, u), k;
        for (k = 1; k <= n; k++)
            if (!probe(m, t, f, u, k, k == n))
                break;
        if (k > n)
            return 1;
        uint32_t step = 1u << (6 * (n - k));
        cp = (cp / step + 1) * step;
    }
    return 0;
}

static int ranges_viable(struct gl_mstate *m, struct thr *t, struct frm *f, const struct jev *e,
                         probe_fn probe)
{
    for (int i = 0; i < e->nr; i++)
        if (range_viable(m, t, f, probe, e->lo[i], e->hi[i]))
            return 1;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// JSTRING

static inline uint32_t s_upay_off(const struct gl_gstr *s)
{
    return r8((uint32_t)(sizeof(struct spay) + 4u * (uint32_t)s->n_regex));
}
static inline struct upay *UP(const struct gl_gstr *s, struct frm *f)
{
    return (struct upay *)(void *)((uint8_t *)payload(f) + s_upay_off(s));
}
// A uniqueItems array's item hashes (the frame directly below its item's: ir.h).
static inline uint32_t a_slots(const struct frm *f)
{
    return (uint32_t)((f->size - sizeof *f) / sizeof(uint64_t));
}
static inline uint64_t *a_hashes(struct frm *f)
{
    return payload(f);
}
static struct frm *uniq_array(struct thr *t, struct frm *f)
{
    GL_ASSERT(t && f->prev); // the frame-alone walks never step a uniq item with names (sframe_at)
    return F(t, f->prev);
}

// A uniqueItems item with names (an enum): after u[0..n) more decoded bytes, does some name not
// yet an item of the array extend the string? (Every name is in the language: ir.h.) The item's
// own slot, the last, is not an earlier item.
static int uniq_names_viable(struct gl_mstate *m, struct thr *t, struct frm *f, const uint8_t *u,
                             int n)
{
    const struct gl_gstr *s = &m->ir->nodes[f->node].u.str;
    const struct upay *up = UP(s, f);
    int32_t lo = up->lo, hi = up->hi;
    for (int i = 0; i < n && lo < hi; i++)
        names_narrow(s->names, sizeof *s->names, up->len + (uint32_t)i, u[i], &lo, &hi);
    if (lo >= hi)
        return 0;
    struct frm *af = uniq_array(t, f);
    uint32_t earlier = a_slots(af) - 1;
    for (int32_t i = lo; i < hi; i++)
        if (!hash_in(a_hashes(af), earlier, name_hash(&s->names[i])))
            return 1;
    return 0;
}

// The closing quote of a uniqueItems item: refused when an earlier item decoded to the same
// bytes (object keys' rule, key_close), else its hash fills the item's slot.
static int uniq_close(struct gl_mstate *m, struct thr *t, struct frm *f)
{
    const struct gl_gstr *s = &m->ir->nodes[f->node].u.str;
    const struct upay *up = UP(s, f);
    struct frm *af = uniq_array(t, f);
    uint32_t earlier = a_slots(af) - 1;
    uint64_t h = name_hash_end(up->hash, up->len);
    if (hash_in(a_hashes(af), earlier, h))
        return 0;
    a_hashes(af)[earlier] = h;
    return 1;
}

// Can the string still complete after its regexes read u (n bytes of the next
// code point) and the code point is counted? Only a full code point is checked
// against the budget.
static int str_probe(struct gl_mstate *m, struct thr *t, struct frm *f, const uint8_t *u, int n,
                     int full)
{
    const struct gl_gstr *s = &m->ir->nodes[f->node].u.str;
    if (s->uniq && s->names && !uniq_names_viable(m, t, f, u, n))
        return 0;
    struct spay *p = payload(f);
    int64_t count = (int64_t)f->a + 1;
    if (s->max_chars >= 0 && count > s->max_chars)
        return 0;
    for (int32_t r = 0; r < s->n_regex; r++) {
        struct gl_regex *re = m->ir->regexes[s->regexes[r]];
        uint32_t st = p->re[r];
        for (int i = 0; i < n && st != GL_RE_DEAD; i++)
            st = gl_regex_step(re, st, u[i]);
        if (st == GL_RE_DEAD)
            return 0;
        int32_t mc = gl_regex_min_chars(re, st);
        if (mc < 0)
            return 0;
        if (s->max_chars >= 0 && count + mc > s->max_chars)
            return 0;
    }
    (void)full;
    return 1;
}

// Feeds decoded bytes u[0..n) (lead: they start a code point) to the regexes; 0
// if the string could then no longer complete.
static int str_feed(struct gl_mstate *m, struct thr *t, struct frm *f, const uint8_t *u, int n,
                    int lead)
{
    const struct gl_gstr *s = &m->ir->nodes[f->node].u.str;
    struct spay *p = payload(f);
    if (lead) {
        if (s->max_chars >= 0 && (int64_t)f->a + 1 > s->max_chars)
            return 0;
        // Unbounded strings: counts past min_chars are all alike (equal states
        // share masks).
        if (s->max_chars >= 0 || (int32_t)f->a < s->min_chars)
            f->a++;
    }
    for (int32_t r = 0; r < s->n_regex; r++) {
        struct gl_regex *re = m->ir->regexes[s->regexes[r]];
        uint32_t st = p->re[r];
        for (int i = 0; i < n && st != GL_RE_DEAD; i++)
            st = gl_regex_step(re, st, u[i]);
        if (st == GL_RE_DEAD)
            return 0;
        int32_t mc = gl_regex_min_chars(re, st);
        if (mc < 0 || (s->max_chars >= 0 && (int64_t)f->a + mc > s->max_chars))
            return 0;
        p->re[r] = st;
    }
    if (s->uniq) {
        if (s->names && !uniq_names_viable(m, t, f, u, n))
            return 0;
        struct upay *up = UP(s, f);
        for (int i = 0; i < n; i++) {
            if (s->names)
                names_narrow(s->names, sizeof *s->names, up->len, u[i], &up->lo, &up->hi);
            up->hash = name_hash_step(up->hash, u[i]);
            up->len++;
        }
    }
    return 1;
}

// Strings with two or more regexes (a pattern and a format, or an ATEM raw parameter's guard,
// frontends.c RAW_GUARD_RE): each regex alone may still reach acceptance while no text reaches
// all of them at once ("^[0-9]+$" with the guard, which refuses number-like raw text), and the
// per-regex checks of str_feed would then walk into a string that can never close. Breadth-first
// search over tuples of DFA states, one byte per class of bytes every regex treats alike (raw
// text never takes '<'), for a tuple where all accept, within room more bytes (room < 0: no
// bound; bytes bound code points, so a bound can only refuse, never accept, a long path).
// Searches past JOINT_MAX tuples, or regexes with no DFA room left, count as viable.
// Results are kept per thread by (regex serials, states, room): the same question comes once per
// token of every mask at such a string.
#define JOINT_MAX  2048
#define JOINT_RE   8
#define JOINT_MEMO 512
struct joint_key {
    uint64_t serial[JOINT_RE];
    uint32_t q[JOINT_RE];
    int64_t room;
};
static _Thread_local struct joint_memo {
    struct joint_key k;
    int used, viable;
} t_joint[JOINT_MEMO];

static int regs_joint_search(struct gl_mstate *m, const struct gl_gstr *s, const uint32_t *q0,
                             int64_t room);

static int regs_joint_viable(struct gl_mstate *m, const struct gl_gstr *s, const uint32_t *q0,
                             int64_t room)
{
    const int nr = s->n_regex;
    if (nr < 2 || nr > JOINT_RE)
        return 1;
    struct joint_key k;
    memset(&k, 0, sizeof k);
    uint64_t h = (uint64_t)room * 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < nr; r++) {
        k.serial[r] = gl_regex_serial(m->ir->regexes[s->regexes[r]]);
        k.q[r] = q0[r];
        h = (h ^ k.serial[r]) * 0xBF58476D1CE4E5B9ull;
        h = (h ^ k.q[r]) * 0x94D049BB133111EBull;
    }
    k.room = room;
    struct joint_memo *e = &t_joint[(h >> 32) % JOINT_MEMO];
    if (e->used && !memcmp(&e->k, &k, sizeof k))
        return e->viable;
    int v = regs_joint_search(m, s, q0, room);
    e->k = k;
    e->used = 1;
    e->viable = v;
    return v;
}

static int regs_joint_search(struct gl_mstate *m, const struct gl_gstr *s, const uint32_t *q0,
                             int64_t room)
{
    const int nr = s->n_regex;
    struct gl_regex *rx[JOINT_RE];
    const uint8_t *cls[JOINT_RE];
    for (int r = 0; r < nr; r++) {
        rx[r] = m->ir->regexes[s->regexes[r]];
        cls[r] = gl_regex_classes(rx[r], NULL, NULL);
        if (!gl_regex_room(rx[r], 64) || gl_regex_has_lookahead(rx[r]))
            return 1; // (a lookahead state's min_chars says nothing about its future)
    }
    uint8_t reps[256];
    int n_reps = 0;
    for (int b = 0; b < 256; b++) { // one byte per joint class
        if (s->raw && b == '<')
            continue;
        int seen = 0;
        for (int k = 0; k < n_reps && !seen; k++) {
            int same = 1;
            for (int r = 0; r < nr && same; r++)
                same = cls[r][b] == cls[r][reps[k]];
            seen = same;
        }
        if (!seen)
            reps[n_reps++] = (uint8_t)b;
    }
    uint32_t *tup = gl_malloc((size_t)JOINT_MAX * (size_t)nr * sizeof *tup);
    int32_t *depth = gl_malloc((size_t)JOINT_MAX * sizeof *depth);
    if (!tup || !depth) {
        gl_free(tup);
        gl_free(depth);
        return 1;
    }
    int n = 1, head = 0, found = 0, full = 0;
    memcpy(tup, q0, (size_t)nr * sizeof *tup);
    depth[0] = 0;
    while (head < n && !found) {
        const uint32_t *cur = tup + (size_t)head * (size_t)nr;
        int acc = 1;
        for (int r = 0; r < nr && acc; r++)
            acc = gl_regex_is_accept(rx[r], cur[r]);
        if (acc) {
            found = 1;
            break;
        }
        if (room >= 0 && depth[head] >= room) {
            head++;
            continue;
        }
        for (int k = 0; k < n_reps && !full; k++) {
            uint32_t nx[JOINT_RE];
            int dead = 0;
            for (int r = 0; r < nr && !dead; r++) {
                nx[r] = gl_regex_step(rx[r], cur[r], reps[k]);
                dead = nx[r] == GL_RE_DEAD || gl_regex_min_chars(rx[r], nx[r]) < 0;
            }
            if (dead)
                continue;
            int known = 0;
            for (int i = 0; i < n && !known; i++)
                known = !memcmp(tup + (size_t)i * (size_t)nr, nx, (size_t)nr * sizeof *nx);
            if (known)
                continue;
            if (n == JOINT_MAX) {
                full = 1;
                break;
            }
            memcpy(tup + (size_t)n * (size_t)nr, nx, (size_t)nr * sizeof *nx);
            depth[n++] = depth[head] + 1;
        }
        if (full)
            break;
        head++;
    }
    gl_free(tup);
    gl_free(depth);
    return found || full;
}

static int str_can_close(struct gl_mstate *m, struct frm *f)
{
    const struct gl_gstr *s = &m->ir->nodes[f->node].u.str;
    struct spay *p = payload(f);
    if (p->d.need || p->d.esc || (int32_t)f->a < s->min_chars)
        return 0;
    for (int32_t r = 0; r < s->n_regex; r++)
        if (!gl_regex_is_accept(m->ir->regexes[s->regexes[r]], p->re[r]))
            return 0;
    return 1;
}

// 1: consumed (f updated), 2: consumed and the string is complete (pop), 0:
// rejected. t: f's thread (NULL for a frame walked alone; a uniq item needs it).
static int str_step(struct gl_mstate *m, struct thr *t, struct frm *f, uint8_t b)
{
    const struct gl_gstr *s = &m->ir->nodes[f->node].u.str;
    struct spay *p = payload(f);
    if (s->raw) {
        // Raw text: valid UTF-8 without '<' (control bytes allowed); ending is a
        // closure branch.
        int lead;
        if (b == '<' || !utf8_byte(&p->d, b, &lead))
            return 0;
        return str_feed(m, t, f, &b, 1, lead);
    }
    if (f->b == S_OPEN) {
        if (b != '"')
            return 0;
        f->b = S_BODY;
        return 1;
    }
    struct jev e;
    jdec_step(&p->d, b, &e);
    switch (e.kind) {
    case EV_QUOTE:
        return str_can_close(m, f) && (!s->uniq || uniq_close(m, t, f)) ? 2 : 0;
    case EV_RAW:
        return str_feed(m, t, f, &b, 1, e.lead);
    case EV_MORE:
        if (s->n_regex == 0)
            return s->max_chars < 0 || (int64_t)f->a + 1 <= s->max_chars;
        return ranges_viable(m, t, f, &e, str_probe);
    case EV_CP: {
        uint8_t u[4];
        int n = gl_utf8_encode(e.cp, u);
        return str_feed(m, t, f, u, n, 1);
    }
    default:
        return 0;
    }
}

// ---------------------------------------------------------------------------------------------
// JNUMBER

static int num_bounded(const struct gl_gnum *n)
{
    return n->has_min || n->has_max;
}

// The effective double range [*lo, *hi] (exclusive bounds moved to the next
// double).
static void num_range(const struct gl_gnum *n, double *lo, double *hi)
{
    *lo = -HUGE_VAL;
    *hi = HUGE_VAL;
    if (n->has_min)
        *lo = n->excl_min ? nextafter(n->min, HUGE_VAL) : n->min;
    if (n->has_max)
        *hi = n->excl_max ? nextafter(n->max, -HUGE_VAL) : n->max;
}

// Integer nodes: the integer range [*lo, *hi] (long double holds integers
// exactly to 2^64).
static void int_range(const struct gl_gnum *n, long double *lo, long double *hi)
{
    *lo = -HUGE_VALL;
    *hi = HUGE_VALL;
    if (n->has_min)
        *lo = n->excl_min ? floorl((long double)n->min) + 1 : ceill((long double)n->min);
    if (n->has_max)
        *hi = n->excl_max ? ceill((long double)n->max) - 1 : floorl((long double)n->max);
}

// Some double d with d == a, or a <= d < b, lies in [lo, hi] (a, b: images of
// the real interval [A, B) of completion values; B's image itself is excluded,
// which is conservative).
static int img_hit(double a, double b, double lo, double hi)
{
    if (a >= lo && a <= hi)
        return 1;
    double ub = nextafter(b, -HUGE_VAL);
    double x = a > lo ? a : lo, y = ub < hi ? ub : hi;
    return x <= y && b > a;
}

// Same for negative completions: real values in (-B, -A]; images -b < d <= -a
// (-a attained).
static int img_hit_neg(double a, double b, double lo, double hi)
{
    if (-a >= lo && -a <= hi)
        return 1;
    double lb = nextafter(-b, HUGE_VAL);
    double x = lb > lo ? lb : lo, y = -a < hi ? -a : hi;
    return x <= y;
}

// Increments the decimal digit string s[0..n) in place (carry); returns 1 if it
// overflowed (all nines: the caller prepends a 1).
static int dec_inc(char *s, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        if (s[i] == '.')
            continue;
        if (s[i] < '9') {
            s[i]++;
            return 0;
        }
        s[i] = '0';
    }
    return 1;
}

// ---- the decimal grid (gl_gnum.mult_a): values N / 10^s with mult_a | N ----
// strtod is monotone in N, so the grid points of an interval whose values lie in [lo, hi] form
// an interval: a binary search finds the least N whose value reaches lo, and the least multiple
// of a from there decides. Exact (the same strtod the final test uses), about 64 strtod calls
// per interval at most.

static uint64_t pow10u(int k) // k <= 19
{
    uint64_t p = 1;
    while (k-- > 0)
        p *= 10;
    return p;
}

// The double of N / 10^s, parsed from its decimal text as a validator would.
static double grid_value(uint64_t n, int s)
{
    char buf[32], *p = buf + sizeof buf - 1; // written backwards: digits, "." s digits in
    *p = 0;
    for (int i = 0; i <= s || n > 0; i++) {
        if (i == s && s > 0)
            *--p = '.';
        *--p = (char)('0' + n % 10);
        n /= 10;
    }
    return strtod(p, NULL);
}

// Some N in [A, B) with a | N whose value lies in [lo, hi].
static int grid_hit(uint64_t A, uint64_t B, uint32_t a, int s, double lo, double hi)
{
    uint64_t x = A, y = B;
    while (x < y) {
        uint64_t mid = x + (y - x) / 2;
        if (grid_value(mid, s) >= lo)
            y = mid;
        else
            x = mid + 1;
    }
    uint64_t n = (x + a - 1) / a * a; // x <= 10^19, a < 2^32: no overflow
    return n < B && grid_value(n, s) <= hi;
}

// num_viable for a grid number, or with final set num_final_ok (the text is the whole number).
// t: "-"? digits ("." digits)?, as num_step keeps it.
static int grid_viable(const struct gl_gnum *nm, const char *t, int len, int phase, int final)
{
    const int s = nm->mult_s;
    const uint64_t top = pow10u(GL_GNUM_GRID_DIGITS);
    int neg = len > 0 && t[0] == '-';
    const char *d = t + neg;
    int dl = len - neg;
    double lo, hi;
    num_range(nm, &lo, &hi);
    if (neg) { // -v in [lo, hi] iff v in [-hi, -lo] (strtod rounds symmetrically)
        double x = lo;
        lo = -hi;
        hi = -x;
    }
    if (!(lo <= hi))
        return 0;
    if (dl == 0) // "" or "-": any magnitude
        return grid_hit(0, top, nm->mult_a, s, lo, hi);
    const char *dot = memchr(d, '.', (size_t)dl);
    int il = dot ? (int)(dot - d) : dl, fl = dot ? dl - il - 1 : 0;
    if (il + s > GL_GNUM_GRID_DIGITS)
        return 0;
    uint64_t n = 0; // I, then I F[0..min(fl, s)) scaled
    for (int i = 0; i < il; i++)
        n = n * 10 + (uint64_t)(d[i] - '0');
    if (!final && (phase == N_ZERO || phase == N_INT)) {
        // k more integer digits, then any fraction: N in [I 10^(k+s), (I+1) 10^(k+s)).
        for (int k = 0; il + k + s <= GL_GNUM_GRID_DIGITS && (k == 0 || phase == N_INT); k++) {
            uint64_t p = pow10u(k + s), A = n * p;
            if (grid_hit(A, A + p, nm->mult_a, s, lo, hi))
                return 1;
            if (grid_value(A, s) > hi)
                return 0;
        }
        return 0;
    }
    int f = fl < s ? fl : s;
    for (int i = 0; i < f; i++)
        n = n * 10 + (uint64_t)(dot[1 + i] - '0');
    for (int i = f; i < fl; i++)
        if (dot[1 + i] != '0')
            return 0; // past the scale only zeros
    uint64_t p = pow10u(s - f);
    return grid_hit(n * p, n * p + (final ? 1 : p), nm->mult_a, s, lo, hi);
}

// Can the bounded number whose text so far is t[0..len) (no exponent) still
// complete inside its range? Exact over the reals reachable by completions,
// mapped through strtod's rounding.
static int num_viable(const struct gl_gnum *nm, const char *t, int len, int phase)
{
    if (nm->mult_a)
        return grid_viable(nm, t, len, phase, 0);
    int neg = len > 0 && t[0] == '-';
    const char *d = t + neg;
    int dl = len - neg;
    if (nm->integer) {
        long double lo, hi;
        int_range(nm, &lo, &hi);
        if (lo > hi)
            return 0;
        if (dl == 0) // "-": any integer <= 0
            return lo <= 0;
        long double I = strtold(d, NULL);
        if (neg)
            I = -I;
        if (phase != N_INT) // "0", "-0", or a fixed integer with ".0"
            return I >= lo && I <= hi;
        // |v| in [I*10^k, (I+1)*10^k - 1] for k >= 0 while the text fits.
        long double a = neg ? -I : I, b = a + 1;
        for (int k = 0; len + k < NUM_TEXT - 1; k++) {
            long double x = neg ? -(b - 1) : a, y = neg ? -a : b - 1;
            if (x <= hi && y >= lo)
                return 1;
            if (!neg && x > hi)
                return 0;
            if (neg && y < lo)
                return 0;
            a *= 10;
            b *= 10;
        }
        return 0;
    }
    double lo, hi;
    num_range(nm, &lo, &hi);
    if (!(lo <= hi))
        return 0;
    if (dl == 0) // "-": values (-inf, 0]
        return lo <= 0;
    char buf[2 * NUM_TEXT + 4];
    if (phase == N_ZERO || phase == N_INT) {
        // Integer part so far; completions: more digits (k of them) and any
        // fraction.
        int zero = phase == N_ZERO;
        for (int k = 0; zero ? k == 0 : len + k < NUM_TEXT - 1; k++) {
            memcpy(buf, d, (size_t)dl);
            memset(buf + dl, '0', (size_t)k);
            buf[dl + k] = 0;
            double a = strtod(buf, NULL);
            memcpy(buf + 1, d, (size_t)dl);
            memset(buf + 1 + dl, '0', (size_t)k);
            buf[0] = '0';
            buf[dl + k + 1] = 0;
            if (dec_inc(buf + 1, dl))
                buf[0] = '1';
            double b = strtod(buf, NULL);
            if (neg ? img_hit_neg(a, b, lo, hi) : img_hit(a, b, lo, hi))
                return 1;
            if (!neg && a > hi)
                return 0;
            if (neg && -a < lo)
                return 0;
        }
        return 0;
    }
    // "I." or "I.F": completions in [I.F, I.F + 10^-|F|).
    memcpy(buf + 1, d, (size_t)dl);
    buf[0] = '0';
    int bl = dl + 1;
    if (buf[bl - 1] == '.')
        buf[--bl] = 0;
    buf[bl] = 0;
    double a = strtod(buf + 1, NULL);
    if (dec_inc(buf + 1, bl - 1))
        buf[0] = '1';
    double b = strtod(buf, NULL);
    return neg ? img_hit_neg(a, b, lo, hi) : img_hit(a, b, lo, hi);
}

// Is the bounded number text complete and in range?
static int num_final_ok(const struct gl_gnum *nm, const char *t, int len)
{
    if (nm->mult_a)
        return grid_viable(nm, t, len, N_FRAC, 1);
    char buf[NUM_TEXT];
    memcpy(buf, t, (size_t)len);
    buf[len] = 0;
    if (nm->integer) {
        long double lo, hi, v = strtold(buf, NULL);
        int_range(nm, &lo, &hi);
        return v >= lo && v <= hi;
    }
    double lo, hi, v = strtod(buf, NULL);
    num_range(nm, &lo, &hi);
    return v >= lo && v <= hi;
}

static int num_phase_final(int ph)
{
    return ph == N_ZERO || ph == N_INT || ph == N_FRAC || ph == N_EXPD;
}

static int num_step(struct gl_mstate *m, struct frm *f, uint8_t b)
{
    const struct gl_gnum *nm = &m->ir->nodes[f->node].u.num;
    int bounded = num_bounded(nm);
    int ph = (int)f->a, np = -1;
    int digit = b >= '0' && b <= '9';
    switch (ph) {
    case N_START:
        if (b == '-')
            np = N_MINUS;
        else if (b == '0')
            np = N_ZERO;
        else if (digit)
            np = N_INT;
        break;
    case N_MINUS:
        if (b == '0')
            np = N_ZERO;
        else if (digit)
            np = N_INT;
        break;
    case N_ZERO:
    case N_INT:
        if (digit && ph == N_INT)
            np = N_INT;
        else if (b == '.' && !nm->integer)
            np = N_DOT;
        else if ((b == 'e' || b == 'E') && !nm->integer && !bounded)
            np = N_EXP;
        break;
    case N_DOT:
    case N_FRAC:
        if (digit)
            np = N_FRAC;
        else if (ph == N_FRAC && (b == 'e' || b == 'E') && !nm->integer && !bounded)
            np = N_EXP;
        break;
    case N_EXP:
        if (b == '+' || b == '-')
            np = N_EXPSIGN;
        else if (digit)
            np = N_EXPD;
        break;
    case N_EXPSIGN:
    case N_EXPD:
        if (digit)
            np = N_EXPD;
        break;
    }
    if (np < 0)
        return 0;
    if (np == N_EXPD && !bounded) {
        // Unbounded numbers use frame b to count exponent digits: at most 2, so every number we
        // allow is a finite double (1e999 parses to inf in Python and JavaScript, which then
        // fails "type": "number" in their validators). A narrowing.
        uint32_t nd = ph == N_EXPD ? f->b + 1 : 1;
        if (nd > 2)
            return 0;
        f->b = nd;
    }
    if (bounded) {
        // Bounded numbers keep their text (at most NUM_TEXT - 1 bytes; longer is
        // refused) and check at every byte that the range is still reachable. No
        // exponent (restriction).
        char *t = payload(f);
        if (f->b >= NUM_TEXT - 1)
            return 0;
        t[f->b] = (char)b;
        // The last byte the buffer takes must leave a complete in-range number: viability alone
        // assumes more digits may follow ("0.000" under exclusiveMinimum 0, "123." at the end).
        int last = f->b + 1 >= NUM_TEXT - 1;
        if (!num_viable(nm, t, (int)f->b + 1, np) ||
            (last && (!num_phase_final(np) || !num_final_ok(nm, t, (int)f->b + 1)))) {
            t[f->b] = 0;
            return 0;
        }
        f->b++;
    }
    f->a = (uint32_t)np;
    return 1;
}

static int num_can_end(struct gl_mstate *m, struct frm *f)
{
    const struct gl_gnum *nm = &m->ir->nodes[f->node].u.num;
    if (!num_phase_final((int)f->a))
        return 0;
    if (!num_bounded(nm))
        return 1;
    return num_final_ok(nm, payload(f), (int)f->b);
}

// The node's language is non-empty (checked before the first byte).
static int num_nonempty(const struct gl_gnum *nm)
{
    if (!num_bounded(nm))
        return 1;
    if (nm->integer) {
        long double lo, hi;
        int_range(nm, &lo, &hi);
        return lo <= hi;
    }
    if (nm->mult_a)
        return grid_viable(nm, "", 0, N_START, 0) || grid_viable(nm, "-", 1, N_MINUS, 0);
    double lo, hi;
    num_range(nm, &lo, &hi);
    return lo <= hi;
}

// ---------------------------------------------------------------------------------------------
// JOBJECT

static inline struct opay *OP(struct frm *f)
{
    return payload(f);
}
// Payload layout: opay, seen bitset, pattern states, (8-aligned) key hashes.
static inline uint32_t o_pat_off(const struct gl_gobj *o)
{
    return (uint32_t)(sizeof(struct opay) + 4u * (((uint32_t)o->n_props + 31) / 32));
}
static inline uint32_t o_hash_off(const struct gl_gobj *o)
{
    return r8(o_pat_off(o) + 4u * (uint32_t)o->n_patterns);
}
// Ordered mode: position of prop i in obj.order (a scan: ordered objects are
// rare and small).
static int32_t o_pos(const struct gl_gobj *o, int32_t i)
{
    for (int32_t k = 0; k < o->n_props; k++)
        if (o->order[k] == i)
            return k;
    return o->n_props;
}
static inline uint32_t *o_seen(struct frm *f)
{
    return (uint32_t *)(void *)((uint8_t *)payload(f) + sizeof(struct opay));
}
static inline uint32_t *o_pats(struct gl_mstate *m, struct frm *f)
{
    return (uint32_t *)(void *)((uint8_t *)payload(f) + o_pat_off(&m->ir->nodes[f->node].u.obj));
}
static inline uint64_t *o_hashes(struct gl_mstate *m, struct frm *f)
{
    return (uint64_t *)(void *)((uint8_t *)payload(f) + o_hash_off(&m->ir->nodes[f->node].u.obj));
}
static inline int seen_get(struct frm *f, int32_t i)
{
    return (o_seen(f)[i >> 5] >> (i & 31)) & 1;
}

// Optional members (non-required props, pattern and additional keys) can still
// be added without making the required ones exceed max_props.
static int o_allow_optional(const struct gl_gobj *o, const struct opay *p)
{
    return o->max_props < 0 || (int64_t)p->count + 1 + p->req <= o->max_props;
}

// First order position >= ord holding a required prop (n_props if none).
static int32_t o_first_req(const struct gl_gobj *o, int32_t ord)
{
    for (int32_t i = ord; i < o->n_props; i++)
        if (o->props[o->order[i]].required)
            return i;
    return o->n_props;
}

// May declared prop i be the next key (unseen, in order, within the count
// budget)?
static int o_prop_ok(struct gl_mstate *m, struct frm *f, int32_t i, int allow_opt)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    if (seen_get(f, i))
        return 0;
    if (!o->props[i].required && !allow_opt)
        return 0;
    if (o->order) {
        int32_t pos = o_pos(o, i);
        struct opay *p = OP(f);
        if (pos < p->ord || pos > o_first_req(o, p->ord))
            return 0;
    }
    return 1;
}

// Non-declared keys (patterns, additional) are possible now: budget and, in
// ordered mode, only once no required declared prop is left.
static int o_extra_ok(struct gl_mstate *m, struct frm *f)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    if (!o_allow_optional(o, p))
        return 0;
    if (o->order && p->req > 0)
        return 0;
    return 1;
}

// Some key can be started now (after '{' or ',').
static int o_can_add(struct gl_mstate *m, struct frm *f)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    if (o->max_props >= 0 && p->count >= o->max_props)
        return 0;
    if (o_extra_ok(m, f) && (o->additional >= 0 || o->n_patterns > 0))
        return 1;
    int allow = o_allow_optional(o, p);
    for (int32_t i = 0; i < o->n_props; i++)
        if (o_prop_ok(m, f, i, allow))
            return 1;
    return 0;
}

static int o_can_close(const struct gl_gobj *o, const struct opay *p)
{
    return p->req == 0 && p->count >= o->min_props;
}

// Some acceptable key extends the decoded key so far plus u[0..n) (not yet
// applied).
static int key_probe(struct gl_mstate *m, struct thr *t, struct frm *f, const uint8_t *u, int n,
                     int full)
{
    (void)t;
    (void)full;
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    int extra = o_extra_ok(m, f);
    if (extra && o->additional >= 0)
        return 1; // infinitely many non-declared keys extend any prefix
    int allow = o_allow_optional(o, p);
    // The names in [lo, hi) share the key's keylen bytes and are sorted by the next one
    // (key_apply): those going on with u[0] are one subrange, found by binary search. A memcmp
    // call per name in the range was a tenth of all mask time on the MaskBench set (perf).
    int32_t lo = p->lo, hi = p->hi;
    names_narrow(o->props, sizeof *o->props, p->keylen, u[0], &lo, &hi);
    for (int32_t i = lo; i < hi; i++) {
        const struct gl_gbytes *nm = &o->props[i].name;
        int k = 1;
        if (nm->len < p->keylen + (uint32_t)n)
            continue;
        while (k < n && nm->p[p->keylen + (uint32_t)k] == u[k])
            k++;
        if (k == n && o_prop_ok(m, f, i, allow))
            return 1;
    }
    if (extra) {
        uint32_t *ps = o_pats(m, f);
        for (int32_t k = 0; k < o->n_patterns; k++) {
            struct gl_regex *re = m->ir->regexes[o->patterns[k].re];
            uint32_t st = ps[k];
            for (int i = 0; i < n && st != GL_RE_DEAD; i++)
                st = gl_regex_step(re, st, u[i]);
            if (st != GL_RE_DEAD)
                return 1;
        }
    }
    return 0;
}

// The code point that bytes s[0..n) start with, strictly decoded (gl_utf8_lead's ranges): 0
// when they do not start with a whole valid one.
static int utf8_first(const uint8_t *s, uint32_t n, uint32_t *cp)
{
    uint8_t need, lo, hi;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (!gl_utf8_lead(s[0], &need, &lo, &hi) || n < 1u + need)
        return 0;
    uint32_t c = s[0] & (0x3Fu >> need); // the lead's payload bits: 5, 4 or 3
    for (uint32_t k = 1; k <= need; k++) {
        if (s[k] < lo || s[k] > hi)
            return 0;
        c = c << 6 | (s[k] & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = c;
    return 1;
}

// ranges_viable(key_probe) for a key that only declared names may still extend (no pattern
// may take a non-declared key): some name still possible goes on with a code point of e's
// ranges. The same answer, since a code point's UTF-8 starts a name's rest iff it is that
// rest's first code point, but one decode per name: ranges_viable probes an escape's ranges
// code point by code point (after a backslash, 128 ASCII probes and one per lead byte), each
// probe a scan of the names, which made the escape tokens of declared-name keys a tenth of all
// mask time on the MaskBench set (perf).
static int key_names_viable(struct gl_mstate *m, struct frm *f, const struct jev *e)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    int allow = o_allow_optional(o, p);
    for (int32_t i = p->lo; i < p->hi; i++) {
        const struct gl_gbytes *nm = &o->props[i].name;
        uint32_t cp;
        if (nm->len <= p->keylen || !utf8_first(nm->p + p->keylen, nm->len - p->keylen, &cp))
            continue;
        int r = 0;
        while (r < e->nr && !(cp >= e->lo[r] && cp <= e->hi[r]))
            r++;
        if (r < e->nr && o_prop_ok(m, f, i, allow))
            return 1;
    }
    return 0;
}

// Applies one decoded key byte: narrows the prop range, steps the pattern
// states, hashes.
static void key_apply(struct gl_mstate *m, struct frm *f, uint8_t b)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    names_narrow(o->props, sizeof *o->props, p->keylen, b, &p->lo, &p->hi);
    uint32_t *ps = o_pats(m, f);
    for (int32_t k = 0; k < o->n_patterns; k++)
        if (ps[k] != GL_RE_DEAD)
            ps[k] = gl_regex_step(m->ir->regexes[o->patterns[k].re], ps[k], b);
    p->keyhash = name_hash_step(p->keyhash, b);
    p->keylen++;
}

static int key_feed(struct gl_mstate *m, struct frm *f, const uint8_t *u, int n)
{
    if (!key_probe(m, NULL, f, u, n, 1))
        return 0;
    for (int i = 0; i < n; i++)
        key_apply(m, f, u[i]);
    return 1;
}

static int grow_top(struct thr *t, uint32_t by);

// What the closing quote of a key decides, read-only: the key has kl decoded bytes, the declared
// names [lo, hi) still match them (key_apply), h is its running name hash and ps the patterns'
// states. 1: declared prop *member; 2: a non-declared key with value node *member; 0 refused
// (duplicate, out of order, over budget, no schema for such a key).
static int key_decide(struct gl_mstate *m, struct frm *f, int32_t lo, int32_t hi, uint32_t kl,
                      uint64_t h, const uint32_t *ps, int32_t *member)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    if (lo < hi && o->props[lo].name.len == kl) {
        // The decoded key is a declared name: that prop or nothing (escape-equivalence).
        if (!o_prop_ok(m, f, lo, o_allow_optional(o, p)))
            return 0; // duplicate, out of order, or over budget
        *member = lo;
        return 1;
    }
    if (!o_extra_ok(m, f))
        return 0;
    int32_t target = -1;
    for (int32_t k = 0; k < o->n_patterns && target < 0; k++) // the first matching pattern wins
        if (gl_regex_is_accept(m->ir->regexes[o->patterns[k].re], ps[k]))
            target = o->patterns[k].value;
    if (target < 0)
        target = o->additional;
    if (target < 0 || hash_in(o_hashes(m, f), p->n_hash, name_hash_end(h, kl)))
        return 0; // no schema for it, or a duplicate key
    *member = target;
    return 2;
}

// The closing quote of a key: decide the member. 1 ok, 0 rejected.
static int key_close(struct gl_mstate *m, struct thr *t, struct frm *f)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    if (p->d.need || p->d.esc)
        return 0;
    int32_t i = -1;
    int r = key_decide(m, f, p->lo, p->hi, p->keylen, p->keyhash, o_pats(m, f), &i);
    if (r == 1) {
        o_seen(f)[i >> 5] |= 1u << (i & 31);
        if (o->props[i].required)
            p->req--;
        if (o->order)
            p->ord = o_pos(o, i) + 1;
        p->cur = o->props[i].value;
        if (o->max_props >= 0 || p->count < o->min_props)
            p->count++; // unbounded: counts past min_props are all alike
        return 1;
    }
    uint64_t h = name_hash_end(p->keyhash, p->keylen);
    if (r == 0 || !grow_top(t, 8))
        return 0;
    f = top_of(t);
    p = OP(f);
    o_hashes(m, f)[p->n_hash++] = h;
    if (o->order)
        p->ord = o->n_props;
    p->cur = i;
    if (o->max_props >= 0 || p->count < o->min_props)
        p->count++; // unbounded: counts past min_props are all alike
    return 1;
}

static void key_start(struct gl_mstate *m, struct frm *f)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    memset(&p->d, 0, sizeof p->d);
    p->lo = 0;
    p->hi = o->n_props;
    p->keylen = 0;
    p->keyhash = NAME_HASH0;
    uint32_t *ps = o_pats(m, f);
    for (int32_t k = 0; k < o->n_patterns; k++)
        ps[k] = gl_regex_start(m->ir->regexes[o->patterns[k].re]);
}

// 1 consumed, 2 consumed and the object is complete (pop), 0 rejected.
static int obj_step(struct gl_mstate *m, struct thr *t, struct frm *f, uint8_t b)
{
    const struct gl_gobj *o = &m->ir->nodes[f->node].u.obj;
    struct opay *p = OP(f);
    int wsmax = m->ir->ws_max;
    switch (p->phase) {
    case O_START:
        if (b != '{')
            return 0;
        // Completable at all: the required props fit max_props, min_props is
        // reachable.
        if ((o->max_props >= 0 && p->req > o->max_props) ||
            (o->additional < 0 && o->n_patterns == 0 && o->n_props < o->min_props))
            return 0;
        p->phase = O_FIRST;
        p->ws = 0;
        return 1;
    case O_FIRST:
    case O_NEXT:
    case O_COMMA:
    case O_COLON:
    case O_VALUE_WS:
        if (is_ws(b)) {
            if (p->ws >= wsmax)
                return 0;
            p->ws++;
            return 1;
        }
        if (b == '"' && (p->phase == O_FIRST || p->phase == O_COMMA) && o_can_add(m, f)) {
            p->phase = O_KEY;
            key_start(m, f);
            return 1;
        }
        if (b == '}' && (p->phase == O_FIRST || p->phase == O_NEXT) && o_can_close(o, p))
            return 2;
        if (b == ',' && p->phase == O_NEXT && o_can_add(m, f)) {
            p->phase = O_COMMA;
            p->ws = 0;
            return 1;
        }
        if (b == ':' && p->phase == O_COLON) {
            p->phase = O_VALUE_WS;
            p->ws = 0;
            return 1;
        }
        return 0;
    case O_KEY: {
        struct jev e;
        jdec_step(&p->d, b, &e);
        switch (e.kind) {
        case EV_QUOTE:
            if (!key_close(m, t, f))
                return 0;
            // key_close grew the frame in place: f and p are still valid.
            // Clear the key scratch so equal objects have equal bytes (shared masks).
            memset(&p->d, 0, sizeof p->d);
            p->lo = p->hi = 0;
            p->keylen = 0;
            p->keyhash = 0;
            memset(o_pats(m, f), 0, 4u * (uint32_t)o->n_patterns);
            p->phase = O_COLON;
            p->ws = 0;
            return 1;
        case EV_RAW:
            return key_feed(m, f, &b, 1);
        case EV_MORE: {
            int extra = o_extra_ok(m, f);
            if (extra && o->additional >= 0)
                return 1;
            if (!extra || o->n_patterns == 0)
                return key_names_viable(m, f, &e);
            return ranges_viable(m, t, f, &e, key_probe);
        }
        case EV_CP: {
            uint8_t u[4];
            int n = gl_utf8_encode(e.cp, u);
            return key_feed(m, f, u, n);
        }
        default:
            return 0;
        }
    }
    default:
        return 0;
    }
}

// ---------------------------------------------------------------------------------------------
// JARRAY

// Another item may start in array frame f (after '[' or ','): the count allows one and, for a
// uniqueItems array over a finite set of strings, some value is not an item yet (the items read
// are distinct values of the set, so that is their number).
static int arr_item_allowed(struct gl_mstate *m, const struct gl_garr *a, struct frm *f)
{
    int32_t count = (int32_t)f->b;
    if (a->max_items >= 0 && count >= a->max_items)
        return 0;
    if (a->unique) {
        const struct gl_gstr *s = &m->ir->nodes[a->items].u.str;
        if (s->names && a_slots(f) >= (uint32_t)s->n_names)
            return 0;
    }
    return count < a->n_prefix || a->items >= 0;
}

static int arr_step(struct gl_mstate *m, struct frm *f, uint8_t b)
{
    const struct gl_garr *a = &m->ir->nodes[f->node].u.arr;
    int wsmax = m->ir->ws_max;
    switch (f->a) {
    case A_START:
        if (b != '[')
            return 0;
        if (a->items < 0 && a->n_prefix < a->min_items)
            return 0; // min_items unreachable: empty language
        f->a = A_FIRST;
        f->c = 0;
        return 1;
    case A_FIRST:
    case A_NEXT:
    case A_COMMA:
        if (is_ws(b)) {
            if ((int)f->c >= wsmax)
                return 0;
            f->c++;
            return 1;
        }
        if (b == ']' && f->a != A_COMMA && (int32_t)f->b >= a->min_items)
            return 2;
        if (b == ',' && f->a == A_NEXT && arr_item_allowed(m, a, f)) {
            f->a = A_COMMA;
            f->c = 0;
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

// ---------------------------------------------------------------------------------------------
// Threads: push/pop in the closure scratch

static int grow_top(struct thr *t, uint32_t by)
{
    // t is the topmost thread of tmp (only it may grow).
    uint32_t toff = (uint32_t)((uint8_t *)t - X.tmp);
    if (t->size + by > MAX_THREAD_BYTES || toff + t->size + by > TMP_BYTES) {
        X.fail = 1;
        return 0;
    }
    struct frm *f = top_of(t);
    memset((uint8_t *)t + t->size, 0, by);
    f->size += by;
    t->size += by;
    if (toff + t->size > X.tmp_top)
        X.tmp_top = toff + t->size;
    return 1;
}

// Payload bytes of a freshly pushed frame for node n (multiple of 8).
static uint32_t payload_size(const struct gl_gnode *n)
{
    switch (n->kind) {
    case GN_JSTRING:
        return s_upay_off(&n->u.str) + (n->u.str.uniq ? (uint32_t)sizeof(struct upay) : 0);
    case GN_JNUMBER:
        return num_bounded(&n->u.num) ? NUM_TEXT : 0;
    case GN_JOBJECT:
        return o_hash_off(&n->u.obj);
    default:
        return 0;
    }
}

static int push(struct gl_mstate *m, struct thr *t, int32_t node)
{
    uint32_t toff = (uint32_t)((uint8_t *)t - X.tmp);
    uint32_t fs = (uint32_t)sizeof(struct frm) + payload_size(&m->ir->nodes[node]);
    if ((int32_t)t->depth >= m->max_depth || t->size + fs > MAX_THREAD_BYTES ||
        toff + t->size + fs > TMP_BYTES) {
        X.fail = 1;
        return 0;
    }
    struct frm *f = F(t, t->size);
    memset(f, 0, fs);
    f->node = node;
    f->size = fs;
    f->prev = t->top;
    t->top = t->size;
    t->size += fs;
    t->depth++;
    if (toff + t->size > X.tmp_top)
        X.tmp_top = toff + t->size;
    const struct gl_gnode *n = &m->ir->nodes[node];
    if (n->kind == GN_REGEX) {
        f->a = gl_regex_start(m->ir->regexes[n->u.regex.re]);
    } else if (n->kind == GN_JSTRING) {
        struct spay *p = payload(f);
        for (int32_t r = 0; r < n->u.str.n_regex; r++)
            p->re[r] = gl_regex_start(m->ir->regexes[n->u.str.regexes[r]]);
        f->b = n->u.str.raw ? S_BODY : S_OPEN;
        if (n->u.str.uniq) {
            struct upay *up = UP(&n->u.str, f);
            up->hash = NAME_HASH0;
            up->hi = n->u.str.n_names;
        }
    } else if (n->kind == GN_JOBJECT) {
        struct opay *p = payload(f);
        p->phase = O_START;
        p->req = 0;
        for (int32_t k = 0; k < n->u.obj.n_props; k++)
            p->req += n->u.obj.props[k].required;
        p->cur = -1;
    }
    return 1;
}

static void pop(struct thr *t)
{
    struct frm *f = top_of(t);
    GL_ASSERT(f);
    t->size = t->top;
    t->top = f->prev;
    t->depth--;
}

// Appends a finished thread to the output set unless an equal one is there.
// Below EMIT_HASH_MIN threads a direct size + memcmp scan is cheaper than hashing whole threads
// (the mask walk advances a few-thread state once per trie node); from there on each thread's
// hash is kept in X.th (X.hashed) so that ambiguous grammars with hundreds of readings dedupe in
// one pass.
#define EMIT_HASH_MIN 16
static void emit(struct gl_mstate *m, struct thr *t)
{
    t->pad = 0;
    uint64_t h = 0;
    if (X.out_n >= EMIT_HASH_MIN && !X.hashed) {
        for (uint32_t i = 0; i < X.out_n; i++) {
            struct thr *o = T(X.out, X.idx[i]);
            X.th[i] = hash_bytes((uint8_t *)o + sizeof *o, o->size - sizeof *o);
        }
        X.hashed = 1;
    }
    if (X.hashed) {
        h = hash_bytes((uint8_t *)t + sizeof *t, t->size - sizeof *t);
        for (uint32_t i = 0; i < X.out_n; i++) {
            if (X.th[i] != h)
                continue;
            struct thr *o = T(X.out, X.idx[i]);
            if (o->size == t->size && !memcmp(o, t, t->size))
                return;
        }
    } else {
        for (uint32_t i = 0; i < X.out_n; i++) {
            struct thr *o = T(X.out, X.idx[i]);
            if (o->size == t->size && !memcmp(o, t, t->size))
                return;
        }
    }
    if ((int32_t)X.out_n >= m->max_threads) {
        X.fail = 1;
        return;
    }
    X.th[X.out_n] = h;
    X.idx[X.out_n] = X.out_used;
    if (X.out_used + t->size > X.out_cap) {
        uint32_t cap = X.out_cap * 2;
        while (cap < X.out_used + t->size)
            cap *= 2;
        struct gl_alloc_meter *prev = gl_alloc_meter_swap(NULL); // the thread's, not a grammar's
        uint8_t *nb = gl_realloc(X.out, cap);
        gl_alloc_meter_swap(prev);
        if (!nb) {
            X.fail = 1;
            return;
        }
        X.out = nb;
        X.out_cap = cap;
    }
    memcpy(X.out + X.out_used, t, t->size);
    X.out_used += t->size;
    X.out_n++;
}

// Copies the thread at toff to the top of tmp; returns its offset (0 on
// failure: tmp offsets start at 8 so 0 is never a thread).
static uint32_t dup(uint32_t toff)
{
    struct thr *t = T(X.tmp, toff);
    uint32_t at = X.tmp_top;
    if (at + t->size > TMP_BYTES) {
        X.fail = 1;
        return 0;
    }
    memcpy(X.tmp + at, t, t->size);
    X.tmp_top = at + t->size;
    return at;
}

static void close_thr(struct gl_mstate *m, uint32_t toff, uint32_t fresh, int child_fresh);

static void branch_pop(struct gl_mstate *m, uint32_t toff, uint32_t fresh)
{
    uint32_t save = X.tmp_top;
    uint32_t c = dup(toff);
    if (!c)
        return;
    struct thr *t = T(X.tmp, c);
    uint32_t idx = t->depth - 1;
    int cf = idx >= fresh;
    pop(t);
    if (t->depth < fresh)
        fresh = t->depth;
    close_thr(m, c, fresh, cf);
    X.tmp_top = save;
}

// What one closure step leaves to do with the thread at the top of its frame stack.
enum cl_next {
    CL_DONE,  // emitted, branched or dead: the closure of this thread ends
    CL_POP,   // the frame completed: pop it, its parent goes on
    CL_AGAIN, // a child frame was pushed (or the frame changed): look at the top again
};

// A frame that waits on whitespace or a separator may end here (branch_pop) and also stays as
// a consuming thread (emit).
static enum cl_next cl_branch_emit(struct gl_mstate *m, uint32_t toff, uint32_t fresh)
{
    branch_pop(m, toff, fresh);
    emit(m, T(X.tmp, toff));
    return CL_DONE;
}

// ALT: every alternative but the last closes in a copy; the thread itself takes the last.
static enum cl_next cl_alt(struct gl_mstate *m, uint32_t toff, const struct gl_gnode *n,
                           uint32_t *fresh)
{
    if (n->u.list.n == 0)
        return CL_DONE;
    for (int32_t k = 0; k + 1 < n->u.list.n && !X.fail; k++) {
        uint32_t save = X.tmp_top;
        uint32_t c = dup(toff);
        if (!c)
            return CL_DONE;
        struct thr *ct = T(X.tmp, c);
        pop(ct);
        uint32_t fr = ct->depth < *fresh ? ct->depth : *fresh;
        if (push(m, ct, n->u.list.kids[k]))
            close_thr(m, c, fr, 0);
        X.tmp_top = save;
    }
    struct thr *t = T(X.tmp, toff);
    pop(t);
    if (t->depth < *fresh)
        *fresh = t->depth;
    return push(m, t, n->u.list.kids[n->u.list.n - 1]) ? CL_AGAIN : CL_DONE;
}

// REPEAT: start (maybe empty), after a separator, or after an item (child_fresh: the item
// matched "", so more iterations add nothing).
static enum cl_next cl_repeat(struct gl_mstate *m, uint32_t toff, const struct gl_gnode *n,
                              uint32_t fresh, int child_fresh)
{
    struct thr *t = T(X.tmp, toff);
    struct frm *f = top_of(t);
    int32_t min = n->u.rep.min, max = n->u.rep.max;
    if (f->b == R_START) {
        if (max == 0)
            return CL_POP;
        if (min == 0)
            branch_pop(m, toff, fresh);
        t = T(X.tmp, toff);
        f = top_of(t);
        f->b = R_ITEM;
        return push(m, t, n->u.rep.kid) ? CL_AGAIN : CL_DONE;
    }
    if (f->b == R_SEP) {
        f->b = R_ITEM;
        return push(m, t, n->u.rep.kid) ? CL_AGAIN : CL_DONE;
    }
    // R_ITEM: the child just completed.
    int64_t cnt = (int64_t)f->a + 1;
    if (max < 0 && cnt > min)
        cnt = min; // unbounded: counts past min are all alike (keeps states finite)
    f->a = (uint32_t)cnt;
    if (child_fresh)
        return CL_POP;
    if (max >= 0 && cnt >= max)
        return CL_POP;
    if (cnt >= min)
        branch_pop(m, toff, fresh);
    t = T(X.tmp, toff);
    f = top_of(t);
    if (n->u.rep.sep >= 0) {
        f->b = R_SEP;
        return push(m, t, n->u.rep.sep) ? CL_AGAIN : CL_DONE;
    }
    return push(m, t, n->u.rep.kid) ? CL_AGAIN : CL_DONE;
}

static enum cl_next cl_jstring(struct gl_mstate *m, uint32_t toff, const struct gl_gnode *n,
                               uint32_t fresh)
{
    struct frm *f = top_of(T(X.tmp, toff));
    const int can_close = str_can_close(m, f);
    if (n->u.str.n_regex >= 2 && !can_close &&
        !regs_joint_viable(
            m, &n->u.str, ((struct spay *)payload(f))->re,
            n->u.str.max_chars < 0 ? -1 : 4 * ((int64_t)n->u.str.max_chars - (int64_t)f->a)))
        return CL_DONE; // no text satisfies every regex from here: a dead thread
    if (n->u.str.raw && can_close)
        branch_pop(m, toff, fresh);
    emit(m, T(X.tmp, toff));
    return CL_DONE;
}

static enum cl_next cl_jobject(struct gl_mstate *m, uint32_t toff)
{
    struct thr *t = T(X.tmp, toff);
    struct opay *p = OP(top_of(t));
    if (p->phase == O_IN_VALUE) {
        p->phase = O_NEXT;
        p->ws = 0;
        emit(m, t);
        return CL_DONE;
    }
    if (p->phase != O_VALUE_WS) {
        emit(m, t);
        return CL_DONE;
    }
    int32_t v = p->cur;
    if (p->ws < m->ir->ws_max)
        emit(m, t);
    t = T(X.tmp, toff);
    OP(top_of(t))->phase = O_IN_VALUE;
    return push(m, t, v) ? CL_AGAIN : CL_DONE;
}

static enum cl_next cl_jarray(struct gl_mstate *m, uint32_t toff, const struct gl_gnode *n)
{
    const struct gl_garr *a = &n->u.arr;
    struct thr *t = T(X.tmp, toff);
    struct frm *f = top_of(t);
    if (f->a == A_IN_ITEM) {
        f->a = A_NEXT;
        // Unbounded arrays: counts past the prefix and min_items are all alike.
        if (a->max_items >= 0 || (int32_t)f->b < a->n_prefix || (int32_t)f->b < a->min_items)
            f->b++;
        f->c = 0;
        emit(m, t);
        return CL_DONE;
    }
    if ((f->a == A_FIRST || f->a == A_COMMA) && arr_item_allowed(m, a, f)) {
        int32_t kid = (int32_t)f->b < a->n_prefix ? a->prefix[f->b] : a->items;
        // The consumer (whitespace, or ']' after '[') stays unless nothing is left.
        if ((int)f->c < m->ir->ws_max || f->a == A_FIRST)
            emit(m, t);
        t = T(X.tmp, toff);
        if (a->unique && !grow_top(t, sizeof(uint64_t)))
            return CL_DONE; // the item's slot (uniq_close fills it)
        f = top_of(t);
        f->a = A_IN_ITEM;
        return push(m, t, kid) ? CL_AGAIN : CL_DONE;
    }
    if (f->a != A_COMMA) // A_COMMA cannot get here: ',' needs an allowed item
        emit(m, t);
    return CL_DONE;
}

// One closure step of the thread at toff whose top frame is node n.
static enum cl_next cl_step(struct gl_mstate *m, uint32_t toff, const struct gl_gnode *n,
                            uint32_t *fresh, int child_fresh)
{
    struct thr *t = T(X.tmp, toff);
    struct frm *f = top_of(t);
    switch (n->kind) {
    case GN_EMPTY:
        return CL_POP;
    case GN_BYTES:
        if (f->a >= n->u.bytes.len)
            return CL_POP;
        emit(m, t);
        return CL_DONE;
    case GN_TOKEN:
        emit(m, t);
        return CL_DONE;
    case GN_REGEX:
        if (f->a == GL_RE_DEAD)
            return CL_DONE;
        if (gl_regex_is_accept(m->ir->regexes[n->u.regex.re], f->a))
            branch_pop(m, toff, *fresh);
        emit(m, T(X.tmp, toff));
        return CL_DONE;
    case GN_ANYBYTES:
        return cl_branch_emit(m, toff, *fresh);
    case GN_WS:
        return (int)f->a < m->ir->ws_max ? cl_branch_emit(m, toff, *fresh) : CL_POP;
    case GN_SEQ:
        if ((int32_t)f->a >= n->u.list.n)
            return CL_POP;
        return push(m, t, n->u.list.kids[f->a++]) ? CL_AGAIN : CL_DONE;
    case GN_ALT:
        return cl_alt(m, toff, n, fresh);
    case GN_REPEAT:
        return cl_repeat(m, toff, n, *fresh, child_fresh);
    case GN_JSTRING:
        return cl_jstring(m, toff, n, *fresh);
    case GN_JNUMBER:
        if (f->a == N_START && !num_nonempty(&n->u.num))
            return CL_DONE;
        if (num_can_end(m, f))
            branch_pop(m, toff, *fresh);
        emit(m, T(X.tmp, toff));
        return CL_DONE;
    case GN_JOBJECT:
        return cl_jobject(m, toff);
    case GN_JARRAY:
        return cl_jarray(m, toff, n);
    }
    return CL_DONE;
}

// Epsilon closure: moves the thread to consuming positions, emitting each.
// fresh: frames at depth index >= fresh were pushed during this closure (an
// iteration of a REPEAT whose child completes while fresh matched "" and ends
// the repetition, so closure terminates).
static void close_thr(struct gl_mstate *m, uint32_t toff, uint32_t fresh, int child_fresh)
{
    for (int guard = 0; !X.fail; guard++) {
        if (guard > 100000) {
            X.fail = 1;
            return;
        }
        struct thr *t = T(X.tmp, toff);
        struct frm *f = top_of(t);
        if (!f) {
            emit(m, t);
            return;
        }
        const enum cl_next next = cl_step(m, toff, &m->ir->nodes[f->node], &fresh, child_fresh);
        if (next == CL_DONE)
            return;
        if (next == CL_POP) {
            t = T(X.tmp, toff);
            uint32_t idx = t->depth - 1;
            child_fresh = idx >= fresh;
            pop(t);
            if (t->depth < fresh)
                fresh = t->depth;
        }
    }
}

// Steps the consuming thread at toff on byte b: 1 consumed (closure needed), 0
// rejected.
static int step_thr(struct gl_mstate *m, uint32_t toff, uint8_t b)
{
    struct thr *t = T(X.tmp, toff);
    struct frm *f = top_of(t);
    if (!f)
        return 0;
    const struct gl_gnode *n = &m->ir->nodes[f->node];
    int r = 0;
    switch (n->kind) {
    case GN_BYTES:
        if (f->a < n->u.bytes.len && n->u.bytes.p[f->a] == b) {
            f->a++;
            r = f->a == n->u.bytes.len ? 2 : 1;
        }
        break;
    case GN_REGEX: {
        uint32_t s = gl_regex_step(m->ir->regexes[n->u.regex.re], f->a, b);
        if (s != GL_RE_DEAD) {
            f->a = s;
            r = 1;
        }
        break;
    }
    case GN_ANYBYTES:
        r = 1; // the frame is unchanged: free text stays where it is
        break;
    case GN_WS:
        if (is_ws(b) && (int)f->a < m->ir->ws_max) {
            f->a++;
            r = 1;
        }
        break;
    case GN_JSTRING:
        r = str_step(m, t, f, b);
        break;
    case GN_JNUMBER:
        r = num_step(m, f, b);
        break;
    case GN_JOBJECT:
        r = obj_step(m, t, f, b);
        break;
    case GN_JARRAY:
        r = arr_step(m, f, b);
        break;
    default:
        r = 0;
        break;
    }
    if (r == 2)
        pop(T(X.tmp, toff));
    return r != 0;
}

// ---------------------------------------------------------------------------------------------
// The state set

static int thr_cmp(const struct thr *a, const struct thr *b)
{
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return memcmp(a, b, a->size);
}

static int idx_cmp(const void *a, const void *b)
{
    return thr_cmp(T(X.out, *(const uint32_t *)a), T(X.out, *(const uint32_t *)b));
}

// Installs the output set as the state's value: sorted canonical order.
static void commit(struct gl_mstate *m)
{
    if (X.out_used > m->cap) {
        uint8_t *nb = gl_realloc(m->buf, X.out_used);
        GL_ASSERT(nb);
        m->buf = nb;
        m->cap = X.out_used;
    }
    if (X.out_n <= 1) {
        memcpy(m->buf, X.out, X.out_used);
    } else {
        qsort(X.idx, X.out_n, sizeof *X.idx, idx_cmp);
        uint32_t w = 0;
        for (uint32_t i = 0; i < X.out_n; i++) {
            struct thr *t = T(X.out, X.idx[i]);
            memcpy(m->buf + w, t, t->size);
            w += t->size;
        }
    }
    m->used = X.out_used;
    m->n_threads = X.out_n;
}

// The calling thread's scratch, sized for m's limits. 0 on allocation failure. It belongs to the
// thread, not to the grammar whose meter is armed (gl_alloc_meter).
static int scratch_ready_unmetered(const struct gl_mstate *m);
static int scratch_ready(const struct gl_mstate *m)
{
    struct gl_alloc_meter *prev = gl_alloc_meter_swap(NULL);
    int ok = scratch_ready_unmetered(m);
    gl_alloc_meter_swap(prev);
    return ok;
}
static int scratch_ready_unmetered(const struct gl_mstate *m)
{
    if (!X.tmp) {
        pthread_once(&g_scratch_once, scratch_key_init);
        pthread_setspecific(g_scratch_key, &X);
        X.tmp = gl_malloc(TMP_BYTES);
        X.out_cap = 4096;
        X.out = gl_malloc(X.out_cap);
        if (!X.tmp || !X.out) {
            gl_free(X.tmp);
            gl_free(X.out);
            memset(&X, 0, sizeof X);
            return 0;
        }
    }
    if (X.idx_cap < (uint32_t)m->max_threads + 1) {
        size_t n = (size_t)m->max_threads + 1;
        uint32_t *ni = gl_realloc(X.idx, n * sizeof *ni);
        if (ni)
            X.idx = ni;
        uint64_t *nh = gl_realloc(X.th, n * sizeof *nh);
        if (nh)
            X.th = nh;
        if (!ni || !nh)
            return 0;
        X.idx_cap = (uint32_t)n;
    }
    return 1;
}

static void begin(struct gl_mstate *m)
{
    GL_ASSERT_MSG(scratch_ready(m), "match: out of memory for the scratch");
    X.out_used = 0;
    X.out_n = 0;
    X.hashed = 0;
    X.fail = 0;
    X.tmp_top = 8;
}

gl_status gl_mstate_new(struct gl_mstate **out, const struct gl_gir *ir,
                        const struct gl_mlimits *lim, struct gl_err *err)
{
    *out = NULL;
    if (!ir || !ir->nodes || ir->root < 0 || ir->root >= ir->n_nodes)
        return gl_err_set(err, GL_E_INVAL, "match: grammar has no root");
    for (int32_t i = 0; i < ir->n_nodes; i++) {
        const struct gl_gnode *n = &ir->nodes[i];
        uint64_t ps = 0;
        if (n->kind == GN_JSTRING)
            ps = 4ull * (uint64_t)n->u.str.n_regex;
        else if (n->kind == GN_JOBJECT)
            ps = (uint64_t)n->u.obj.n_props / 8 + 4ull * (uint64_t)n->u.obj.n_patterns;
        if (ps > MAX_THREAD_BYTES / 4)
            return gl_err_set(err, GL_E_LIMIT, "match: node %d needs a %llu-byte frame (limit %u)",
                              (int)i, (unsigned long long)ps, MAX_THREAD_BYTES / 4);
    }
    struct gl_mstate *m = gl_calloc(1, sizeof *m);
    if (!m)
        return gl_err_set(err, GL_E_NOMEM, "match: out of memory");
    m->ir = ir;
    // Default thread cap 1024 (match.h says 64): MaskBench has anyOf-heavy schemas (e.g.
    // Skaffold's artifact alternatives) that legitimately keep a few hundred readings alive.
    m->max_threads = lim && lim->max_threads > 0 ? lim->max_threads : 1024;
    m->max_depth = lim && lim->max_depth > 0 ? lim->max_depth : 128;
    m->cap = 256;
    m->buf = gl_malloc(m->cap);
    if (!m->buf || !scratch_ready(m)) {
        gl_mstate_free(m);
        return gl_err_set(err, GL_E_NOMEM, "match: out of memory");
    }
    gl_mstate_reset(m);
    *out = m;
    return GL_OK;
}

void gl_mstate_free(struct gl_mstate *s)
{
    if (!s)
        return;
    gl_free(s->buf);
    gl_free(s);
}

void gl_mstate_reset(struct gl_mstate *s)
{
    begin(s);
    s->overflow = 0;
    struct thr *t = T(X.tmp, X.tmp_top);
    memset(t, 0, sizeof *t);
    t->size = sizeof *t;
    X.tmp_top += t->size;
    if (push(s, t, s->ir->root))
        close_thr(s, 8, 0, 0);
    if (X.fail) {
        s->overflow = 1;
    }
    commit(s);
}

void gl_mstate_copy(struct gl_mstate *dst, const struct gl_mstate *src)
{
    GL_ASSERT(dst->ir == src->ir);
    if (dst == src)
        return;
    if (src->used > dst->cap) {
        uint8_t *nb = gl_realloc(dst->buf, src->cap);
        GL_ASSERT(nb);
        dst->buf = nb;
        dst->cap = src->cap;
    }
    memcpy(dst->buf, src->buf, src->used);
    dst->used = src->used;
    dst->n_threads = src->n_threads;
    dst->overflow = src->overflow;
}

// The end of an advance (byte or token): commit the surviving threads, or leave the state
// unchanged when none survived or a limit was hit (then the sticky overflow flag is set).
static int finish_advance(struct gl_mstate *s)
{
    if (X.fail) {
        s->overflow = 1;
        return 0;
    }
    if (X.out_n == 0)
        return 0;
    commit(s);
    return 1;
}

// The hot case of the mask's trie walk: one thread inside a JSON string body.
// The step is done in place (the closure of a string body is the thread
// itself); the top frame is saved first so that a rejected byte leaves the
// state unchanged.
static int advance_string_inplace(struct gl_mstate *s, uint8_t b, int *done)
{
    struct thr *t = T(s->buf, 0);
    struct frm *f = top_of(t);
    *done = 0;
    if (!f)
        return 0;
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    if (n->kind == GN_JOBJECT && OP(f)->phase == O_KEY && b != '"') {
        // Inside a key: the closure is again the thread itself; only the payload up to the
        // key hashes changes (range, key length/hash, decoder, pattern states).
        uint32_t ps = (uint32_t)sizeof(struct frm) + o_hash_off(&n->u.obj);
        if (ps > 256)
            return 0;
        uint64_t save[32];
        memcpy(save, f, ps);
        *done = 1;
        if (obj_step(s, t, f, b) == 1)
            return 1;
        memcpy(f, save, ps);
        return 0;
    }
    if (n->kind != GN_JSTRING || n->u.str.raw || f->b != S_BODY || b == '"' || f->size > 256)
        return 0;
    uint64_t save[32];
    uint32_t fs = f->size;
    if (fs == sizeof(struct frm) + 16) // no regex: a fixed-size copy the compiler inlines
        memcpy(save, f, sizeof(struct frm) + 16);
    else
        memcpy(save, f, fs);
    *done = 1;
    if (str_step(s, t, f, b) == 1)
        return 1;
    memcpy(f, save, fs);
    return 0;
}

int gl_mstate_advance_byte(struct gl_mstate *s, uint8_t b)
{
    if (s->n_threads == 1) {
        int done, r = advance_string_inplace(s, b, &done);
        if (done)
            return r;
    }
    begin(s);
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads && !X.fail; i++) {
        struct thr *src = T(s->buf, off);
        off += src->size;
        if (!src->top)
            continue;
        uint32_t at = X.tmp_top;
        memcpy(X.tmp + at, src, src->size);
        X.tmp_top += src->size;
        if (step_thr(s, at, b)) {
            struct thr *t = T(X.tmp, at);
            close_thr(s, at, t->depth, 0);
        }
        X.tmp_top = at;
    }
    return finish_advance(s);
}

int gl_mstate_advance_token(struct gl_mstate *s, int32_t token_id)
{
    begin(s);
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads && !X.fail; i++) {
        struct thr *src = T(s->buf, off);
        off += src->size;
        struct frm *f = top_of(src);
        if (!f || s->ir->nodes[f->node].kind != GN_TOKEN ||
            s->ir->nodes[f->node].u.token.id != token_id)
            continue;
        uint32_t at = X.tmp_top;
        memcpy(X.tmp + at, src, src->size);
        X.tmp_top += src->size;
        struct thr *t = T(X.tmp, at);
        pop(t);
        close_thr(s, at, t->depth, 0);
        X.tmp_top = at;
    }
    return finish_advance(s);
}

int gl_mstate_expected_tokens(const struct gl_mstate *s, int32_t *ids, int cap)
{
    int n = 0;
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        struct thr *t = T(s->buf, off);
        off += t->size;
        struct frm *f = top_of(t);
        if (!f || s->ir->nodes[f->node].kind != GN_TOKEN)
            continue;
        int32_t id = s->ir->nodes[f->node].u.token.id;
        int dupl = 0;
        for (int k = 0; k < n && k < cap; k++)
            dupl |= ids[k] == id;
        if (dupl)
            continue;
        if (n < cap)
            ids[n] = id;
        n++;
    }
    return n;
}

int gl_mstate_can_end(const struct gl_mstate *s)
{
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        struct thr *t = T(s->buf, off);
        if (!t->top)
            return 1;
        off += t->size;
    }
    return 0;
}

int gl_mstate_any_bytes(const struct gl_mstate *s)
{
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        struct thr *t = T(s->buf, off);
        struct frm *f = top_of(t);
        if (f && s->ir->nodes[f->node].kind == GN_ANYBYTES)
            return 1;
        off += t->size;
    }
    return 0;
}

int gl_mstate_is_dead(const struct gl_mstate *s)
{
    return s->n_threads == 0;
}

uint64_t gl_mstate_hash(const struct gl_mstate *s)
{
    return hash_bytes(s->buf, s->used) ^ s->n_threads;
}

int gl_mstate_equal(const struct gl_mstate *a, const struct gl_mstate *b)
{
    return a->ir == b->ir && a->n_threads == b->n_threads && a->used == b->used &&
           !memcmp(a->buf, b->buf, a->used);
}

int gl_mstate_overflowed(const struct gl_mstate *s)
{
    return s->overflow;
}

// The string fast path's condition for one thread's top frame: a JSON string body without
// regexes, or a key body where any key may follow (additional properties allowed: every plain
// run is accepted; only the closing quote is constrained by duplicates and declared names), at a
// UTF-8 boundary and outside an escape. *mn / *mx: code points still required / allowed.
static int frame_free(const struct gl_mstate *s, struct frm *f, int32_t *mn, int32_t *mx)
{
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    if (n->kind == GN_JOBJECT) {
        struct opay *op = OP(f);
        if (op->phase != O_KEY || op->d.esc || op->d.need || n->u.obj.additional < 0 ||
            !o_extra_ok((struct gl_mstate *)(uintptr_t)s, f))
            return 0;
        *mn = 0;
        *mx = -1;
        return 1;
    }
    if (n->kind != GN_JSTRING || n->u.str.raw || n->u.str.n_regex || f->b != S_BODY)
        return 0;
    const struct spay *p = payload(f);
    if (p->d.esc || p->d.need)
        return 0;
    int32_t cnt = (int32_t)f->a;
    *mn = n->u.str.min_chars > cnt ? n->u.str.min_chars - cnt : 0;
    *mx = n->u.str.max_chars < 0 ? -1 : n->u.str.max_chars - cnt;
    return 1;
}

int gl_mstate_string_fast(const struct gl_mstate *s, int32_t *min_more, int32_t *max_more)
{
    if (s->n_threads == 0)
        return 0;
    int32_t mn = 0, mx = 0;
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        struct thr *t = T(s->buf, off);
        off += t->size;
        struct frm *f = top_of(t);
        int32_t a, b;
        if (!f || !frame_free(s, f, &a, &b) || (i > 0 && (a != mn || b != mx)))
            return 0;
        mn = a;
        mx = b;
    }
    *min_more = mn;
    *max_more = mx;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// Next-byte sets for the mask's trie walk

static inline void bset_add(uint64_t set[4], uint8_t b)
{
    set[b >> 6] |= 1ull << (b & 63);
}

static void bset_add_str(uint64_t set[4], const char *bytes)
{
    for (const char *c = bytes; *c; c++)
        bset_add(set, (uint8_t)*c);
}

// Adds the bytes the top frame f may consume next; returns 0 when that set is not narrowed here
// (the caller then takes every byte). Mirrors the step functions: object and array frames
// consume only their punctuation and whitespace (values are child frames).
static int frame_next_bytes(const struct gl_mstate *s, struct frm *f, uint64_t set[4])
{
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    const char *ws = s->ir->ws_max > 0 ? " \t\n\r" : "";
    switch (n->kind) {
    case GN_BYTES:
        if (f->a < n->u.bytes.len)
            bset_add(set, n->u.bytes.p[f->a]);
        return 1;
    case GN_TOKEN:
        return 1; // token literals never match bytes
    case GN_WS:
        if ((int)f->a < s->ir->ws_max)
            bset_add_str(set, " \t\n\r");
        return 1;
    case GN_JSTRING:
        if (n->u.str.raw || f->b != S_OPEN)
            return 0;
        bset_add(set, '"');
        return 1;
    case GN_JNUMBER:
        bset_add_str(set, "0123456789-+.eE");
        return 1;
    case GN_JARRAY:
        switch (f->a) {
        case A_START:
            bset_add(set, '[');
            return 1;
        case A_FIRST:
        case A_NEXT:
        case A_COMMA:
            bset_add_str(set, ws);
            bset_add_str(set, f->a == A_COMMA ? "" : f->a == A_FIRST ? "]" : "],");
            return 1;
        default:
            return 0;
        }
    case GN_JOBJECT: {
        const struct opay *p = OP(f);
        switch (p->phase) {
        case O_START:
            bset_add(set, '{');
            return 1;
        case O_FIRST:
        case O_NEXT:
        case O_COMMA:
        case O_COLON:
        case O_VALUE_WS:
            bset_add_str(set, ws);
            bset_add_str(set, p->phase == O_FIRST   ? "\"}"
                              : p->phase == O_NEXT  ? ",}"
                              : p->phase == O_COMMA ? "\""
                              : p->phase == O_COLON ? ":"
                                                    : "");
            return 1;
        case O_KEY: {
            const struct gl_gobj *o = &n->u.obj;
            // Inside an escape or a multi-byte character, or where non-declared keys may come:
            // not narrowed. Else the next decoded byte -- a raw byte here -- continues a declared
            // name in the key's prefix range, or the key closes or an escape starts.
            if (p->d.esc || p->d.need ||
                (o_extra_ok((struct gl_mstate *)s, f) && (o->additional >= 0 || o->n_patterns)))
                return 0;
            bset_add(set, '"');
            bset_add(set, '\\');
            for (int32_t i = p->lo; i < p->hi; i++)
                if (o->props[i].name.len > p->keylen)
                    bset_add(set, o->props[i].name.p[p->keylen]);
            return 1;
        }
        default:
            return 0;
        }
    }
    default:
        return 0;
    }
}

void gl_mstate_next_bytes(const struct gl_mstate *s, uint64_t set[4])
{
    memset(set, 0, 4 * sizeof *set);
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        struct thr *t = T(s->buf, off);
        off += t->size;
        struct frm *f = top_of(t);
        if (f && !frame_next_bytes(s, f, set)) {
            memset(set, 0xFF, 4 * sizeof *set);
            return;
        }
    }
}

// Thread th's top frame when it is the body of a non-raw JSON string or of an object key, else
// NULL. In a key body, as in a string body, a byte other than '"' only changes the top frame:
// the key's decoder, prefix range, length, hash and pattern states (obj_step's O_KEY case).
// Keys of objects with declared names only are walked frame by frame too, narrowed at every
// step to the candidate names' bytes (gl_mstate_sframe_next_bytes).
static struct frm *sframe_at(const struct gl_mstate *s, uint32_t th)
{
    GL_ASSERT(th < s->used);
    struct frm *f = top_of(T(s->buf, th));
    if (!f || f->size > GL_SFRAME_MAX)
        return NULL;
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    if (n->kind == GN_JOBJECT)
        return OP(f)->phase == O_KEY ? f : NULL;
    if (n->kind != GN_JSTRING || n->u.str.raw || f->b != S_BODY)
        return NULL;
    // A uniqueItems item over names checks every byte against the array's items (str_feed).
    if (n->u.str.uniq && n->u.str.names)
        return NULL;
    return f;
}

// Thread th's top frame when it can be walked alone: a string or key body (sframe_at) or a
// number (a JNUMBER frame only ever consumes number bytes itself; its end is a closure branch).
static struct frm *wframe_at(const struct gl_mstate *s, uint32_t th)
{
    struct frm *f = top_of(T(s->buf, th));
    if (f && f->size <= GL_SFRAME_MAX && s->ir->nodes[f->node].kind == GN_JNUMBER)
        return f;
    return sframe_at(s, th);
}

int gl_mstate_nframes(const struct gl_mstate *s, uint32_t *th, int cap)
{
    // Bytes a JSON number may take; the other threads must take none of them next.
    static const uint64_t numch[4] = {0x03FF680000000000ull, 0x0000002000000020ull, 0, 0};
    int n = 0;
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        struct thr *t = T(s->buf, off);
        struct frm *f = top_of(t);
        if (f && s->ir->nodes[f->node].kind == GN_JNUMBER) {
            if (n == cap || f->size > GL_SFRAME_MAX)
                return 0;
            th[n++] = off;
        } else if (f) {
            uint64_t set[4] = {0, 0, 0, 0};
            if (!frame_next_bytes(s, f, set))
                return 0;
            for (int w = 0; w < 4; w++)
                if (set[w] & numch[w])
                    return 0;
        }
        off += t->size;
    }
    return n;
}

int gl_mstate_sframes(const struct gl_mstate *s, uint32_t *th, int cap)
{
    if (s->n_threads == 0 || s->n_threads > (uint32_t)cap)
        return 0;
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_threads; i++) {
        if (!sframe_at(s, off))
            return 0;
        th[i] = off;
        off += T(s->buf, off)->size;
    }
    return (int)s->n_threads;
}

size_t gl_mstate_sframe(const struct gl_mstate *s, uint32_t th, uint64_t *frame, size_t cap)
{
    const struct frm *f = wframe_at(s, th);
    if (!f || f->size > cap)
        return 0;
    memcpy(frame, f, f->size);
    return f->size;
}

int gl_mstate_sframe_free(const struct gl_mstate *s, uint32_t th, int32_t *min_more,
                          int32_t *max_more)
{
    struct frm *f = sframe_at(s, th);
    return f && frame_free(s, f, min_more, max_more);
}

int gl_mstate_sframe_next_bytes(const struct gl_mstate *s, const uint64_t *frame, uint64_t set[4])
{
    struct frm *f = (struct frm *)(uintptr_t)frame;
    if (s->ir->nodes[f->node].kind != GN_JOBJECT)
        return 0;
    memset(set, 0, 4 * sizeof *set);
    return frame_next_bytes(s, f, set);
}

int gl_mstate_sframe_names(const struct gl_mstate *s, const uint64_t *frame, const uint8_t **p,
                           uint32_t *len, int cap)
{
    struct frm *f = (struct frm *)(uintptr_t)frame;
    uint64_t set[4] = {0, 0, 0, 0};
    if (s->ir->nodes[f->node].kind != GN_JOBJECT || !frame_next_bytes(s, f, set))
        return -1;
    return gl_mstate_sframe_key_names(s, frame, p, len, cap);
}

int gl_mstate_sframe_key_names(const struct gl_mstate *s, const uint64_t *frame, const uint8_t **p,
                               uint32_t *len, int cap)
{
    struct gl_mstate *m = (struct gl_mstate *)(uintptr_t)s;
    struct frm *f = (struct frm *)(uintptr_t)frame;
    if (s->ir->nodes[f->node].kind != GN_JOBJECT)
        return -1;
    // key_probe's declared names: those in the prefix range that o_prop_ok allows.
    const struct gl_gobj *o = &s->ir->nodes[f->node].u.obj;
    const struct opay *op = OP(f);
    int allow = o_allow_optional(o, op), n = 0;
    for (int32_t i = op->lo; i < op->hi; i++) {
        const struct gl_gbytes *nm = &o->props[i].name;
        if (nm->len <= op->keylen || !o_prop_ok(m, f, i, allow))
            continue;
        if (n == cap)
            return -1;
        p[n] = nm->p + op->keylen;
        len[n++] = nm->len - op->keylen;
    }
    return n;
}

int gl_mstate_sframe_closes(const struct gl_mstate *s, const uint64_t *frame)
{
    const struct frm *f = (const struct frm *)(const void *)frame;
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    if (n->kind != GN_JSTRING || n->u.str.uniq) // a uniqueItems item's end depends on the array
        return -1;
    const struct spay *p = payload((struct frm *)f);
    if (p->d.esc) // '"' would be an escaped quote (or refused), not the end
        return -1;
    return str_can_close((struct gl_mstate *)s, (struct frm *)f);
}

int gl_mstate_sframe_key_close(const struct gl_mstate *s, const uint64_t *frame, int32_t *member)
{
    // key_close's decision, on the frame copy and without changing it.
    struct gl_mstate *m = (struct gl_mstate *)(uintptr_t)s;
    struct frm *f = (struct frm *)(uintptr_t)frame;
    if (s->ir->nodes[f->node].kind != GN_JOBJECT)
        return -1;
    struct opay *p = OP(f);
    if (p->phase != O_KEY || p->d.esc) // a '"' in an escape is a character of the key
        return -1;
    if (p->d.need) // inside a UTF-8 sequence: jdec_step refuses the quote
        return 0;
    return key_decide(m, f, p->lo, p->hi, p->keylen, p->keyhash, o_pats(m, f), member);
}

int gl_mstate_sframe_key_quote(const struct gl_mstate *s, const uint64_t *frame, const uint8_t *b,
                               uint32_t n, int32_t *member)
{
    struct gl_mstate *m = (struct gl_mstate *)(uintptr_t)s;
    struct frm *f = (struct frm *)(uintptr_t)frame;
    const struct gl_gnode *nd = &s->ir->nodes[f->node];
    if (nd->kind != GN_JOBJECT)
        return -1;
    const struct gl_gobj *o = &nd->u.obj;
    struct opay *p = OP(f);
    if (p->phase != O_KEY || p->d.esc || p->d.need || o->n_patterns > 0 || o->additional < 0 ||
        !o_extra_ok(m, f))
        return -1;
    // key_probe takes every raw byte here (a non-declared key may be anything): b must be whole
    // code points the decoder takes raw; key_apply's narrowing and hash, without the frame.
    struct jdec d;
    memset(&d, 0, sizeof d);
    int32_t lo = p->lo, hi = p->hi;
    uint64_t h = p->keyhash;
    for (uint32_t k = 0; k < n; k++) {
        if (d.need || b[k] < 0x20 || b[k] >= 0x80 || b[k] == '"' || b[k] == '\\') {
            struct jev e; // else a printable ASCII byte: EV_RAW, the decoder unchanged
            jdec_step(&d, b[k], &e);
            if (e.kind == EV_MORE)
                return -1; // an escape: stepped by the caller
            if (e.kind != EV_RAW)
                return 0;
        }
        if (lo < hi)
            names_narrow(o->props, sizeof *o->props, p->keylen + k, b[k], &lo, &hi);
        h = name_hash_step(h, b[k]);
    }
    return d.need ? 0 : key_decide(m, f, lo, hi, p->keylen + n, h, NULL, member);
}

int gl_mstate_key_canon(struct gl_mstate *s)
{
    if (s->n_threads != 1)
        return 0;
    struct thr *t = T(s->buf, 0);
    struct frm *f = top_of(t);
    if (!f || s->ir->nodes[f->node].kind != GN_JOBJECT)
        return 0;
    struct opay *p = OP(f);
    if (p->phase != O_COLON || p->n_hash == 0)
        return 0;
    o_hashes(s, f)[p->n_hash - 1] = 0;
    return 1;
}

int gl_mstate_sframe_step(const struct gl_mstate *s, uint64_t *frame, uint8_t b)
{
    // The steps read s only for its grammar (the regexes' lazy DFAs may grow, as on any step);
    // obj_step needs the thread only to close a key, which a byte other than '"' never does.
    struct gl_mstate *m = (struct gl_mstate *)s;
    struct frm *f = (struct frm *)(void *)frame;
    switch (m->ir->nodes[f->node].kind) {
    case GN_JOBJECT:
        return obj_step(m, NULL, f, b) == 1;
    case GN_JNUMBER:
        return num_step(m, f, b) == 1;
    default:
        return str_step(m, NULL, f, b) == 1;
    }
}

// gl_mstate_sfast for a key (an object frame in O_KEY) under its object's one pattern property,
// with no additional properties and the pattern's DFA alive. A plain byte is taken iff a
// declared name still possible goes on with it or the pattern's DFA stays alive (key_probe,
// without min_chars; key_apply's range, hash and length decide nothing later in the key), and
// both only narrow, so a token is taken iff it is on a name's path or the DFA lives through it:
// the stepper is a string body with that one regex and no length bound, and the names are
// added apart (f->key). A schema of pattern-property keys walked the 415k-node quote-free trie
// with a whole key step per node at each key (every key position is a new frame value: the
// names read differ); as a string the walk is kept by DFA state.
static int key_sfast(const struct gl_mstate *s, struct frm *fr, struct gl_sfast *f,
                     struct gl_sfast_st *st)
{
    struct gl_mstate *m = (struct gl_mstate *)(uintptr_t)s;
    const struct gl_gobj *o = &s->ir->nodes[fr->node].u.obj;
    const struct opay *p = OP(fr);
    if (p->d.esc || o->additional >= 0 || o->n_patterns != 1 || !o_extra_ok(m, fr))
        return 0;
    uint32_t q = o_pats(m, fr)[0];
    if (q == GL_RE_DEAD)
        return 0;
    f->key = 1;
    f->n_rx = 1;
    f->max_chars = -1;
    f->min_chars = 0;
    f->need_mc = 0;
    f->rx[0] = s->ir->regexes[o->patterns[0].re];
    gl_regex_view(f->rx[0], &f->view[0]);
    memset(st, 0, sizeof *st);
    st->need = p->d.need;
    st->lo = p->d.lo;
    st->hi = p->d.hi;
    st->re[0] = q;
    return 1;
}

int gl_mstate_sfast(const struct gl_mstate *s, uint32_t th, struct gl_sfast *f,
                    struct gl_sfast_st *st)
{
    struct frm *fr = sframe_at(s, th);
    if (!fr)
        return 0;
    const struct gl_gnode *nd = &s->ir->nodes[fr->node];
    if (nd->kind == GN_JOBJECT)
        return key_sfast(s, fr, f, st);
    if (nd->kind != GN_JSTRING || nd->u.str.n_regex > GL_SFAST_RX)
        return 0;
    const struct spay *p = payload(fr);
    if (p->d.esc)
        return 0;
    f->key = 0;
    f->n_rx = nd->u.str.n_regex;
    f->max_chars = nd->u.str.max_chars;
    f->min_chars = nd->u.str.min_chars;
    memset(st, 0, sizeof *st);
    st->count = fr->a;
    st->need = p->d.need;
    st->lo = p->d.lo;
    st->hi = p->d.hi;
    f->need_mc = f->max_chars >= 0;
    for (int32_t r = 0; r < f->n_rx; r++) {
        f->rx[r] = s->ir->regexes[nd->u.str.regexes[r]];
        st->re[r] = p->re[r];
        f->need_mc |= gl_regex_has_lookahead(f->rx[r]);
        gl_regex_view(f->rx[r], &f->view[r]);
    }
    return 1;
}

// UTF-8 role of a byte inside a JSON string body: ASCII, the three continuation ranges that
// lead bytes constrain (80-8F, 90-9F, A0-BF), and each kind of lead byte.
static int utf8_role(uint8_t b)
{
    // Each role's byte range ends (exclusive) at end[role].
    static const uint16_t end[] = {0x80, 0x90, 0xA0, 0xC0, 0xC2, 0xE0, 0xE1,
                                   0xED, 0xEE, 0xF0, 0xF1, 0xF4, 0xF5, 0x100};
    int r = 0;
    while (b >= end[r])
        r++;
    return r;
}

// The classes of regex re as seen from DFA state q (map: byte -> class): two of its byte classes
// are merged when every state reachable from q steps them to the same state, which is all that
// matters to a frame sitting at q. Coarser than the compile-time classes where the pattern has
// been decided (a search `pattern` after its match takes any text alike). 0 when more than
// GL_REACH_MAX states are reachable or the regex lacks budget room (then the compile-time classes
// apply).
#define GL_REACH_MAX 256
static int reach_classes(struct gl_regex *re, uint32_t q, uint8_t map[256])
{
    uint32_t ncls;
    const uint8_t *rep;
    const uint8_t *rc = gl_regex_classes(re, &ncls, &rep);
    if (q == GL_RE_DEAD) { // a pattern that can no longer match takes no part
        memset(map, 0, 256);
        return 1;
    }
    if (!gl_regex_room(re, GL_REACH_MAX))
        return 0;
    uint32_t st[GL_REACH_MAX], set[4 * GL_REACH_MAX]; // reachable states; open-addressing set
    memset(set, 0xFF, sizeof set);
    int n = 0;
    st[n++] = q;
    set[(q * 2654435761u) & (4 * GL_REACH_MAX - 1)] = q;
    for (int i = 0; i < n; i++)
        for (uint32_t c = 0; c < ncls; c++) {
            uint32_t t = gl_regex_step(re, st[i], rep[c]), h;
            if (t == GL_RE_DEAD)
                continue;
            for (h = (t * 2654435761u) & (4 * GL_REACH_MAX - 1);
                 set[h] != UINT32_MAX && set[h] != t; h = (h + 1) & (4 * GL_REACH_MAX - 1))
                ;
            if (set[h] == t)
                continue;
            if (n == GL_REACH_MAX)
                return 0;
            set[h] = t;
            st[n++] = t;
        }
    // Group the classes by their column of next states (hash first, then compared).
    uint8_t grp[256], first[256];
    uint64_t gh[256];
    int ng = 0;
    for (uint32_t c = 0; c < ncls; c++) {
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < n; i++)
            h = (h ^ gl_regex_step(re, st[i], rep[c])) * 1099511628211ull;
        int g;
        for (g = 0; g < ng; g++) {
            if (gh[g] != h)
                continue;
            int i = 0;
            while (i < n &&
                   gl_regex_step(re, st[i], rep[c]) == gl_regex_step(re, st[i], rep[first[g]]))
                i++;
            if (i == n)
                break;
        }
        if (g == ng) {
            gh[ng] = h;
            first[ng++] = (uint8_t)c;
        }
        grp[c] = (uint8_t)g;
    }
    for (int b = 0; b < 256; b++)
        map[b] = grp[rc[b]];
    return 1;
}

// 1 when regex re at DFA state q takes every run of plain string characters (valid UTF-8, no
// '"', '\\' or control byte), including a run that stops inside a character: no such byte
// string leads to the dead state or to a state with no accepting continuation. The walk is over
// (DFA state, UTF-8 expectation) pairs from (q, boundary), each pair trying every byte the
// UTF-8 expectation allows. Search `pattern`s (.*(?:p).* over any code point) are like this in
// every state without lookahead and are told by their loop at once (gl_regex_takes_any); the
// walk is for the rest and stops (0) past GL_UNIV_MAX pairs (~13k steps), when the regex lacks
// budget room or memory is short. Memoized per DFA state in its tag: a state reached at a
// boundary from a universal one is universal too.
#define GL_UNIV_MAX 64
enum { UNIV_UNKNOWN, UNIV_YES, UNIV_NO };
static int regex_universal(struct gl_regex *re, uint32_t q)
{
    if (q == GL_RE_DEAD || gl_regex_min_chars(re, q) < 0)
        return 0;
    if (gl_regex_takes_any(re, q))
        return 1;
    uint8_t tag = gl_regex_tag(re, q);
    if (tag != UNIV_UNKNOWN)
        return tag == UNIV_YES;
    if (!gl_regex_room(re, GL_UNIV_MAX))
        return 0; // not memoized: room may come back only for a new grammar, never mind
    // A pair packs the DFA state (high bits) and the UTF-8 expectation (low 3 bits): 0 at a
    // character boundary; 1..3 continuation bytes 80-BF still needed; 4: E0 (A0-BF, then 1);
    // 5: ED (80-9F, then 1); 6: F0 (90-BF, then 2); 7: F4 (80-8F, then 2).
    static const uint8_t lo[8] = {0, 0x80, 0x80, 0x80, 0xA0, 0x80, 0x90, 0x80};
    static const uint8_t hi[8] = {0, 0xBF, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    static const uint8_t after[8] = {0, 0, 1, 2, 1, 1, 2, 2};
    enum { HCAP = 4 * GL_UNIV_MAX }; // a power of two (the hash keeps its top 8 bits)
    uint64_t *st = gl_malloc((GL_UNIV_MAX + HCAP) * sizeof *st), *set = st + GL_UNIV_MAX;
    if (!st)
        return 0;
    memset(set, 0xFF, HCAP * sizeof *set);
    int n = 0, ok = 1;
    st[n++] = (uint64_t)q << 3;
    set[((uint64_t)q << 3) * 0x9E3779B97F4A7C15ull >> 56] = (uint64_t)q << 3;
    for (int i = 0; i < n && ok; i++) {
        uint32_t r = (uint32_t)(st[i] >> 3);
        int u = (int)(st[i] & 7);
        if (!u && i > 0 && gl_regex_tag(re, r) == UNIV_YES)
            continue; // everything from there is known to be taken
        int b0 = u ? lo[u] : 0x20, b1 = u ? hi[u] : 0xF4;
        for (int b = b0; b <= b1 && ok; b++) {
            int nu;
            if (u) {
                nu = after[u];
            } else if (b == '"' || b == '\\' || (b >= 0x80 && b < 0xC2)) {
                continue; // never a plain byte at a boundary
            } else {
                nu = b < 0x80    ? 0
                     : b < 0xE0  ? 1
                     : b == 0xE0 ? 4
                     : b == 0xED ? 5
                     : b < 0xF0  ? 2
                     : b == 0xF0 ? 6
                     : b == 0xF4 ? 7
                                 : 3;
            }
            uint32_t t = gl_regex_step(re, r, (uint8_t)b);
            if (t == GL_RE_DEAD || gl_regex_min_chars(re, t) < 0) {
                ok = 0;
                break;
            }
            uint64_t key = (uint64_t)t << 3 | (uint64_t)nu;
            size_t h = (size_t)(key * 0x9E3779B97F4A7C15ull >> 56);
            while (set[h] != UINT64_MAX && set[h] != key)
                h = (h + 1) & (HCAP - 1);
            if (set[h] == key)
                continue;
            if (n == GL_UNIV_MAX) {
                ok = 0;
                break;
            }
            set[h] = key;
            st[n++] = key;
        }
    }
    if (ok) {
        for (int i = 0; i < n; i++)
            if (!(st[i] & 7))
                gl_regex_set_tag(re, (uint32_t)(st[i] >> 3), UNIV_YES);
    } else {
        gl_regex_set_tag(re, q, UNIV_NO);
    }
    gl_free(st);
    return ok;
}

int gl_mstate_sframe_universal(const struct gl_mstate *s, uint32_t th)
{
    struct frm *f = sframe_at(s, th);
    if (!f)
        return 0;
    const struct gl_gnode *nd = &s->ir->nodes[f->node];
    if (nd->kind != GN_JSTRING || nd->u.str.raw || nd->u.str.max_chars >= 0 || f->b != S_BODY)
        return 0;
    const struct spay *p = payload(f);
    if (p->d.esc || p->d.need)
        return 0;
    for (int32_t r = 0; r < nd->u.str.n_regex; r++)
        if (!regex_universal(s->ir->regexes[nd->u.str.regexes[r]], p->re[r]))
            return 0;
    return 1;
}

int gl_mstate_sframe_classes(const struct gl_mstate *s, uint32_t th, uint8_t cls[256])
{
    struct frm *f = sframe_at(s, th);
    GL_ASSERT(f);
    const struct gl_gnode *nd = &s->ir->nodes[f->node];
    // The frame's regexes (a string's own, or a key's patterns) with their current states. A key
    // also compares its bytes with the declared names still matching its prefix, so each byte
    // those names can take next is a class of its own.
    enum { MAXR = 8 };
    uint8_t maps[MAXR][256];
    int32_t n_rx = 0;
    uint64_t named[4] = {0, 0, 0, 0};
    struct gl_regex *rx[MAXR];
    uint32_t q[MAXR];
    if (nd->kind == GN_JOBJECT) {
        const struct gl_gobj *o = &nd->u.obj;
        const struct opay *p = OP(f);
        if (p->d.esc)
            return 0; // after a backslash the next byte is read as an escape letter
        if (o->n_patterns > MAXR)
            return 0;
        n_rx = o->n_patterns;
        const uint32_t *ps = o_pats((struct gl_mstate *)s, f);
        for (int32_t r = 0; r < n_rx; r++) {
            rx[r] = s->ir->regexes[o->patterns[r].re];
            q[r] = ps[r];
        }
        for (int32_t k = p->lo; k < p->hi; k++)
            for (uint32_t j = p->keylen; j < o->props[k].name.len; j++)
                bset_add(named, o->props[k].name.p[j]);
    } else {
        const struct spay *p = payload(f);
        if (p->d.esc)
            return 0;
        if (nd->u.str.n_regex > MAXR)
            return 0;
        n_rx = nd->u.str.n_regex;
        for (int32_t r = 0; r < n_rx; r++) {
            rx[r] = s->ir->regexes[nd->u.str.regexes[r]];
            q[r] = p->re[r];
        }
    }
    for (int32_t r = 0; r < n_rx; r++)
        if (!reach_classes(rx[r], q[r], maps[r]))
            memcpy(maps[r], gl_regex_classes(rx[r], NULL, NULL), 256);
    // A byte's signature: its UTF-8 role, its class in each regex and, for a key, the byte
    // itself when a candidate name uses it; equal signatures share a class. A quadratic scan
    // over the 256 bytes is enough.
    int n = 0;
    uint8_t first[256];
    for (int b = 0; b < 256; b++) {
        if (b < 0x20 || b == '"' || b == '\\') {
            cls[b] = GL_SCLS_NONE;
            continue;
        }
        int in_name = (int)(named[b >> 6] >> (b & 63) & 1);
        int c;
        for (c = 0; c < n; c++) {
            int x = first[c];
            int same = utf8_role((uint8_t)x) == utf8_role((uint8_t)b) &&
                       (int)(named[x >> 6] >> (x & 63) & 1) == in_name && (!in_name || x == b);
            for (int32_t r = 0; same && r < n_rx; r++)
                same = maps[r][x] == maps[r][b];
            if (same)
                break;
        }
        if (c == n)
            first[n++] = (uint8_t)b;
        cls[b] = (uint8_t)c;
    }
    return n;
}

size_t gl_mstate_string_key(const struct gl_mstate *s, uint32_t th, uint8_t *key, size_t cap)
{
    struct frm *f = wframe_at(s, th);
    if (!f)
        return 0;
    // node, a, b, c and the payload (decoder, DFA states); not size/prev (position only), nor a
    // uniqueItems item's hash (which only its closing quote reads).
    size_t pay = f->size - sizeof *f;
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    if (n->kind == GN_JSTRING && n->u.str.uniq)
        pay = s_upay_off(&n->u.str);
    size_t len = 4 * sizeof(uint32_t) + pay;
    if (len > cap)
        return 0;
    uint32_t h[4] = {(uint32_t)f->node, f->a, f->b, f->c};
    memcpy(key, h, sizeof h);
    memcpy(key + sizeof h, payload(f), pay);
    return len;
}

// ---------------------------------------------------------------------------------------------
// Read-only views for shortest.c (match.h): the frames of each thread, translated out of the
// payload layouts above so that the shortest-completion query needs no knowledge of them.

// Bytes that finish the code point the decoder is inside (0 at a boundary): the rest of an
// escape (\uXXXX digits, or the \uDCxx low half a high surrogate needs) or of a UTF-8 sequence.
static int dec_pending(const struct jdec *d)
{
    switch (d->esc) {
    case E_BS:
        return 1;
    case E_U:
    case E_L:
        return 4 - d->k;
    case E_LBS:
        return 6;
    case E_LU:
        return 5;
    default:
        return d->need;
    }
}

static void view_frame(const struct gl_mstate *s, struct frm *f, struct gl_mframe *v)
{
    const struct gl_gnode *n = &s->ir->nodes[f->node];
    memset(v, 0, sizeof *v);
    v->node = f->node;
    v->a = f->a;
    v->b = f->b;
    v->frame = f;
    v->size = f->size;
    switch (n->kind) {
    case GN_REPEAT:
        v->phase = f->b == R_SEP ? GL_MF_REP_SEP : f->b == R_ITEM ? GL_MF_REP_ITEM : 0;
        break;
    case GN_JSTRING:
        v->phase = f->b == S_BODY ? GL_MF_STR_BODY : GL_MF_STR_OPEN;
        v->pending = dec_pending(&((struct spay *)payload(f))->d);
        v->esc = ((struct spay *)payload(f))->d.esc != E_NONE;
        v->re = ((struct spay *)payload(f))->re;
        break;
    case GN_JNUMBER:
        v->phase = (int)f->a;
        v->text = num_bounded(&n->u.num) ? payload(f) : NULL;
        break;
    case GN_JOBJECT: {
        struct opay *p = OP(f);
        static const uint8_t ph[] = {
            [O_START] = GL_MF_OBJ_START,       [O_FIRST] = GL_MF_OBJ_FIRST,
            [O_KEY] = GL_MF_OBJ_KEY,           [O_COLON] = GL_MF_OBJ_COLON,
            [O_VALUE_WS] = GL_MF_OBJ_VALUE_WS, [O_IN_VALUE] = GL_MF_OBJ_IN_VALUE,
            [O_NEXT] = GL_MF_OBJ_NEXT,         [O_COMMA] = GL_MF_OBJ_COMMA};
        v->phase = ph[p->phase];
        v->pending = dec_pending(&p->d);
        v->esc = p->d.esc != E_NONE;
        v->count = p->count;
        v->req = p->req;
        v->lo = p->lo;
        v->hi = p->hi;
        v->cur = p->cur;
        v->keylen = p->keylen;
        v->re = o_pats((struct gl_mstate *)(uintptr_t)s, f);
        break;
    }
    case GN_JARRAY: {
        static const uint8_t ph[] = {[A_START] = GL_MF_ARR_START,
                                     [A_FIRST] = GL_MF_ARR_FIRST,
                                     [A_IN_ITEM] = GL_MF_ARR_IN_ITEM,
                                     [A_NEXT] = GL_MF_ARR_NEXT,
                                     [A_COMMA] = GL_MF_ARR_COMMA};
        v->phase = ph[f->a];
        break;
    }
    default:
        break;
    }
}

int gl_mstate_thread_frames(const struct gl_mstate *s, uint32_t *th, struct gl_mframe *out, int cap)
{
    if (*th >= s->used)
        return -1;
    struct thr *t = T(s->buf, *th);
    *th += t->size;
    int n = 0;
    for (uint32_t off = t->top; off && n < cap; n++) {
        struct frm *f = F(t, off);
        view_frame(s, f, &out[n]);
        off = f->prev;
    }
    return (int)t->depth <= cap ? n : -2;
}

void gl_mframe_view(const struct gl_mstate *s, const uint64_t *frame, struct gl_mframe *v)
{
    view_frame(s, (struct frm *)(uintptr_t)frame, v);
}

size_t gl_mstate_node_frame(const struct gl_mstate *s, int32_t node, uint64_t *frame, size_t cap)
{
    const struct gl_gnode *n = &s->ir->nodes[node];
    uint32_t fs = (uint32_t)sizeof(struct frm) + payload_size(n);
    if (n->kind != GN_JSTRING || fs > cap)
        return 0;
    struct frm *f = (struct frm *)(void *)frame;
    memset(f, 0, fs);
    f->node = node;
    f->size = fs;
    f->b = S_BODY;
    struct spay *p = payload(f);
    for (int32_t r = 0; r < n->u.str.n_regex; r++)
        p->re[r] = gl_regex_start(s->ir->regexes[n->u.str.regexes[r]]);
    return fs;
}

int gl_mframe_str_done(const struct gl_mstate *s, const uint64_t *frame)
{
    struct frm *f = (struct frm *)(uintptr_t)frame;
    return !((struct spay *)payload(f))->d.esc && str_can_close((struct gl_mstate *)s, f);
}

int gl_mframe_prop_ok(const struct gl_mstate *s, const struct gl_mframe *v, int32_t i)
{
    struct frm *f = (struct frm *)(uintptr_t)v->frame;
    struct gl_mstate *m = (struct gl_mstate *)(uintptr_t)s;
    return o_prop_ok(m, f, i, o_allow_optional(&m->ir->nodes[f->node].u.obj, OP(f)));
}

int gl_mframe_seen(const struct gl_mframe *v, int32_t i)
{
    return seen_get((struct frm *)(uintptr_t)v->frame, i);
}

int gl_mframe_extra_ok(const struct gl_mstate *s, const struct gl_mframe *v)
{
    return o_extra_ok((struct gl_mstate *)(uintptr_t)s, (struct frm *)(uintptr_t)v->frame);
}

int gl_mframe_key_dup(const struct gl_mstate *s, const struct gl_mframe *v)
{
    struct frm *f = (struct frm *)(uintptr_t)v->frame;
    struct opay *p = OP(f);
    uint64_t h = p->keyhash ^ ((uint64_t)p->keylen << 56);
    const uint64_t *hs = o_hashes((struct gl_mstate *)(uintptr_t)s, f);
    for (uint32_t i = 0; i < p->n_hash; i++)
        if (hs[i] == h)
            return 1;
    return 0;
}

void gl_mnum_range(const struct gl_gnum *nm, long double *lo, long double *hi)
{
    if (nm->integer) {
        int_range(nm, lo, hi);
        return;
    }
    double a, b;
    num_range(nm, &a, &b);
    *lo = a;
    *hi = b;
}

int gl_mnum_text_ok(const struct gl_gnum *nm, const char *t, int len)
{
    return len > 0 && len < NUM_TEXT && num_final_ok(nm, t, len);
}
