// SPDX-License-Identifier: MIT
// regex: ECMA-262 patterns (regex.h dialect) -> AST -> Thompson NFA over UTF-8 bytes -> lazy DFA
// (subset construction, one row of byte-class transitions per state, filled on demand, bounded
// by max_states and by closure work). Invariants: every NFA byte edge has a non-empty range, so
// "a match state is reachable" is exactly "some continuation matches"; DFA states keep only live
// NFA states, so the empty set is the dead state 0. ^ passes only at offset 0, $ only at the end.
// min_chars/unbounded are per-NFA-state facts (0-1 BFS, SCCs) folded over a DFA state's set;
// min_chars counts code points started (0 inside a last code point). Beyond regex.h: leading
// lookaheads of an anchored pattern become NFA components of a product DFA (built whole, facts
// computed on it); \p{..} covers L, Z* and N*.
#include "grammar/regex.h"
#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RE_DEFAULT_STATES 65536
#define RE_MAX_DEPTH      200    // group nesting, so hostile patterns cannot exhaust the stack
#define RE_MAX_COUNT      100000 // largest n or m in {n,m}; bigger is GL_E_LIMIT
#define RE_CP_MAX         0x10FFFFu
#define RE_UNFILLED       UINT32_MAX
#define RE_NONE           UINT32_MAX

// ---------------------------------------------------------------------------------------------
// Code-point sets: sorted, disjoint, non-adjacent ranges [lo, hi].

struct cpr {
    uint32_t lo, hi;
};

struct cpset {
    struct cpr *r;
    size_t n, cap;
};

static int cpset_add(struct cpset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct cpr *r = gl_realloc(s->r, cap * sizeof *r);
        if (!r)
            return 0;
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n].lo = lo;
    s->r[s->n].hi = hi;
    s->n++;
    return 1;
}

static int cpr_cmp(const void *a, const void *b)
{
    const struct cpr *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

static void cpset_normalize(struct cpset *s)
{
    if (s->n < 2)
        return;
    qsort(s->r, s->n, sizeof *s->r, cpr_cmp);
    size_t w = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[w].hi + 1) {
            if (s->r[i].hi > s->r[w].hi)
                s->r[w].hi = s->r[i].hi;
        } else {
            s->r[++w] = s->r[i];
        }
    }
    s->n = w + 1;
}

// Complement within [0, 0x10FFFF]; s must be normalized.
static int cpset_negate(struct cpset *s)
{
    struct cpset o = {0};
    uint32_t at = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > at && !cpset_add(&o, at, s->r[i].lo - 1))
            goto fail;
        at = s->r[i].hi + 1;
    }
    if (at <= RE_CP_MAX && !cpset_add(&o, at, RE_CP_MAX))
        goto fail;
    gl_free(s->r);
    *s = o;
    return 1;
fail:
    gl_free(o.r);
    return 0;
}

// ECMA class escapes as range tables (ASCII \d \w; \s = WhiteSpace + LineTerminator).
static const struct cpr CLS_DIGIT[] = {{'0', '9'}};
static const struct cpr CLS_WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const struct cpr CLS_SPACE[] = {
    {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF},
};
// `.`: any code point but the line terminators \n \r U+2028 U+2029.
static const struct cpr CLS_DOT[] = {{0, 0x09}, {0x0B, 0x0C}, {0x0E, 0x2027}, {0x202A, RE_CP_MAX}};
static const struct cpr CLS_ANY[] = {{0, RE_CP_MAX}};

// Unicode 14.0 general categories (the version PCRE2 10.42 knows; made with python3
// unicodedata): the separators, the numbers and L (names and words in real patterns). The
// letter subcategories, P and S would triple the table: unsupported.
static const struct cpr UC_ZS[] = {
    {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};
static const struct cpr UC_ND[] = {
    {0x30, 0x39},       {0x660, 0x669},     {0x6F0, 0x6F9},     {0x7C0, 0x7C9},
    {0x966, 0x96F},     {0x9E6, 0x9EF},     {0xA66, 0xA6F},     {0xAE6, 0xAEF},
    {0xB66, 0xB6F},     {0xBE6, 0xBEF},     {0xC66, 0xC6F},     {0xCE6, 0xCEF},
    {0xD66, 0xD6F},     {0xDE6, 0xDEF},     {0xE50, 0xE59},     {0xED0, 0xED9},
    {0xF20, 0xF29},     {0x1040, 0x1049},   {0x1090, 0x1099},   {0x17E0, 0x17E9},
    {0x1810, 0x1819},   {0x1946, 0x194F},   {0x19D0, 0x19D9},   {0x1A80, 0x1A89},
    {0x1A90, 0x1A99},   {0x1B50, 0x1B59},   {0x1BB0, 0x1BB9},   {0x1C40, 0x1C49},
    {0x1C50, 0x1C59},   {0xA620, 0xA629},   {0xA8D0, 0xA8D9},   {0xA900, 0xA909},
    {0xA9D0, 0xA9D9},   {0xA9F0, 0xA9F9},   {0xAA50, 0xAA59},   {0xABF0, 0xABF9},
    {0xFF10, 0xFF19},   {0x104A0, 0x104A9}, {0x10D30, 0x10D39}, {0x11066, 0x1106F},
    {0x110F0, 0x110F9}, {0x11136, 0x1113F}, {0x111D0, 0x111D9}, {0x112F0, 0x112F9},
    {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659}, {0x116C0, 0x116C9},
    {0x11730, 0x11739}, {0x118E0, 0x118E9}, {0x11950, 0x11959}, {0x11C50, 0x11C59},
    {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9}, {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9},
    {0x16B50, 0x16B59}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9},
    {0x1E950, 0x1E959}, {0x1FBF0, 0x1FBF9},
};
static const struct cpr UC_NL[] = {
    {0x16EE, 0x16F0},   {0x2160, 0x2182},   {0x2185, 0x2188},   {0x3007, 0x3007},
    {0x3021, 0x3029},   {0x3038, 0x303A},   {0xA6E6, 0xA6EF},   {0x10140, 0x10174},
    {0x10341, 0x10341}, {0x1034A, 0x1034A}, {0x103D1, 0x103D5}, {0x12400, 0x1246E},
};
static const struct cpr UC_NO[] = {
    {0xB2, 0xB3},       {0xB9, 0xB9},       {0xBC, 0xBE},       {0x9F4, 0x9F9},
    {0xB72, 0xB77},     {0xBF0, 0xBF2},     {0xC78, 0xC7E},     {0xD58, 0xD5E},
    {0xD70, 0xD78},     {0xF2A, 0xF33},     {0x1369, 0x137C},   {0x17F0, 0x17F9},
    {0x19DA, 0x19DA},   {0x2070, 0x2070},   {0x2074, 0x2079},   {0x2080, 0x2089},
    {0x2150, 0x215F},   {0x2189, 0x2189},   {0x2460, 0x249B},   {0x24EA, 0x24FF},
    {0x2776, 0x2793},   {0x2CFD, 0x2CFD},   {0x3192, 0x3195},   {0x3220, 0x3229},
    {0x3248, 0x324F},   {0x3251, 0x325F},   {0x3280, 0x3289},   {0x32B1, 0x32BF},
    {0xA830, 0xA835},   {0x10107, 0x10133}, {0x10175, 0x10178}, {0x1018A, 0x1018B},
    {0x102E1, 0x102FB}, {0x10320, 0x10323}, {0x10858, 0x1085F}, {0x10879, 0x1087F},
    {0x108A7, 0x108AF}, {0x108FB, 0x108FF}, {0x10916, 0x1091B}, {0x109BC, 0x109BD},
    {0x109C0, 0x109CF}, {0x109D2, 0x109FF}, {0x10A40, 0x10A48}, {0x10A7D, 0x10A7E},
    {0x10A9D, 0x10A9F}, {0x10AEB, 0x10AEF}, {0x10B58, 0x10B5F}, {0x10B78, 0x10B7F},
    {0x10BA9, 0x10BAF}, {0x10CFA, 0x10CFF}, {0x10E60, 0x10E7E}, {0x10F1D, 0x10F26},
    {0x10F51, 0x10F54}, {0x10FC5, 0x10FCB}, {0x11052, 0x11065}, {0x111E1, 0x111F4},
    {0x1173A, 0x1173B}, {0x118EA, 0x118F2}, {0x11C5A, 0x11C6C}, {0x11FC0, 0x11FD4},
    {0x16B5B, 0x16B61}, {0x16E80, 0x16E96}, {0x1D2E0, 0x1D2F3}, {0x1D360, 0x1D378},
    {0x1E8C7, 0x1E8CF}, {0x1EC71, 0x1ECAB}, {0x1ECAD, 0x1ECAF}, {0x1ECB1, 0x1ECB4},
    {0x1ED01, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C},
};
static const struct cpr UC_L[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xAA, 0xAA},       {0xB5, 0xB5},
    {0xBA, 0xBA},       {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},
    {0x2C6, 0x2D1},     {0x2E0, 0x2E4},     {0x2EC, 0x2EC},     {0x2EE, 0x2EE},
    {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},     {0x37F, 0x37F},
    {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},     {0x38E, 0x3A1},
    {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},     {0x531, 0x556},
    {0x559, 0x559},     {0x560, 0x588},     {0x5D0, 0x5EA},     {0x5EF, 0x5F2},
    {0x620, 0x64A},     {0x66E, 0x66F},     {0x671, 0x6D3},     {0x6D5, 0x6D5},
    {0x6E5, 0x6E6},     {0x6EE, 0x6EF},     {0x6FA, 0x6FC},     {0x6FF, 0x6FF},
    {0x710, 0x710},     {0x712, 0x72F},     {0x74D, 0x7A5},     {0x7B1, 0x7B1},
    {0x7CA, 0x7EA},     {0x7F4, 0x7F5},     {0x7FA, 0x7FA},     {0x800, 0x815},
    {0x81A, 0x81A},     {0x824, 0x824},     {0x828, 0x828},     {0x840, 0x858},
    {0x860, 0x86A},     {0x870, 0x887},     {0x889, 0x88E},     {0x8A0, 0x8C9},
    {0x904, 0x939},     {0x93D, 0x93D},     {0x950, 0x950},     {0x958, 0x961},
    {0x971, 0x980},     {0x985, 0x98C},     {0x98F, 0x990},     {0x993, 0x9A8},
    {0x9AA, 0x9B0},     {0x9B2, 0x9B2},     {0x9B6, 0x9B9},     {0x9BD, 0x9BD},
    {0x9CE, 0x9CE},     {0x9DC, 0x9DD},     {0x9DF, 0x9E1},     {0x9F0, 0x9F1},
    {0x9FC, 0x9FC},     {0xA05, 0xA0A},     {0xA0F, 0xA10},     {0xA13, 0xA28},
    {0xA2A, 0xA30},     {0xA32, 0xA33},     {0xA35, 0xA36},     {0xA38, 0xA39},
    {0xA59, 0xA5C},     {0xA5E, 0xA5E},     {0xA72, 0xA74},     {0xA85, 0xA8D},
    {0xA8F, 0xA91},     {0xA93, 0xAA8},     {0xAAA, 0xAB0},     {0xAB2, 0xAB3},
    {0xAB5, 0xAB9},     {0xABD, 0xABD},     {0xAD0, 0xAD0},     {0xAE0, 0xAE1},
    {0xAF9, 0xAF9},     {0xB05, 0xB0C},     {0xB0F, 0xB10},     {0xB13, 0xB28},
    {0xB2A, 0xB30},     {0xB32, 0xB33},     {0xB35, 0xB39},     {0xB3D, 0xB3D},
    {0xB5C, 0xB5D},     {0xB5F, 0xB61},     {0xB71, 0xB71},     {0xB83, 0xB83},
    {0xB85, 0xB8A},     {0xB8E, 0xB90},     {0xB92, 0xB95},     {0xB99, 0xB9A},
    {0xB9C, 0xB9C},     {0xB9E, 0xB9F},     {0xBA3, 0xBA4},     {0xBA8, 0xBAA},
    {0xBAE, 0xBB9},     {0xBD0, 0xBD0},     {0xC05, 0xC0C},     {0xC0E, 0xC10},
    {0xC12, 0xC28},     {0xC2A, 0xC39},     {0xC3D, 0xC3D},     {0xC58, 0xC5A},
    {0xC5D, 0xC5D},     {0xC60, 0xC61},     {0xC80, 0xC80},     {0xC85, 0xC8C},
    {0xC8E, 0xC90},     {0xC92, 0xCA8},     {0xCAA, 0xCB3},     {0xCB5, 0xCB9},
    {0xCBD, 0xCBD},     {0xCDD, 0xCDE},     {0xCE0, 0xCE1},     {0xCF1, 0xCF2},
    {0xD04, 0xD0C},     {0xD0E, 0xD10},     {0xD12, 0xD3A},     {0xD3D, 0xD3D},
    {0xD4E, 0xD4E},     {0xD54, 0xD56},     {0xD5F, 0xD61},     {0xD7A, 0xD7F},
    {0xD85, 0xD96},     {0xD9A, 0xDB1},     {0xDB3, 0xDBB},     {0xDBD, 0xDBD},
    {0xDC0, 0xDC6},     {0xE01, 0xE30},     {0xE32, 0xE33},     {0xE40, 0xE46},
    {0xE81, 0xE82},     {0xE84, 0xE84},     {0xE86, 0xE8A},     {0xE8C, 0xEA3},
    {0xEA5, 0xEA5},     {0xEA7, 0xEB0},     {0xEB2, 0xEB3},     {0xEBD, 0xEBD},
    {0xEC0, 0xEC4},     {0xEC6, 0xEC6},     {0xEDC, 0xEDF},     {0xF00, 0xF00},
    {0xF40, 0xF47},     {0xF49, 0xF6C},     {0xF88, 0xF8C},     {0x1000, 0x102A},
    {0x103F, 0x103F},   {0x1050, 0x1055},   {0x105A, 0x105D},   {0x1061, 0x1061},
    {0x1065, 0x1066},   {0x106E, 0x1070},   {0x1075, 0x1081},   {0x108E, 0x108E},
    {0x10A0, 0x10C5},   {0x10C7, 0x10C7},   {0x10CD, 0x10CD},   {0x10D0, 0x10FA},
    {0x10FC, 0x1248},   {0x124A, 0x124D},   {0x1250, 0x1256},   {0x1258, 0x1258},
    {0x125A, 0x125D},   {0x1260, 0x1288},   {0x128A, 0x128D},   {0x1290, 0x12B0},
    {0x12B2, 0x12B5},   {0x12B8, 0x12BE},   {0x12C0, 0x12C0},   {0x12C2, 0x12C5},
    {0x12C8, 0x12D6},   {0x12D8, 0x1310},   {0x1312, 0x1315},   {0x1318, 0x135A},
    {0x1380, 0x138F},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1401, 0x166C},
    {0x166F, 0x167F},   {0x1681, 0x169A},   {0x16A0, 0x16EA},   {0x16F1, 0x16F8},
    {0x1700, 0x1711},   {0x171F, 0x1731},   {0x1740, 0x1751},   {0x1760, 0x176C},
    {0x176E, 0x1770},   {0x1780, 0x17B3},   {0x17D7, 0x17D7},   {0x17DC, 0x17DC},
    {0x1820, 0x1878},   {0x1880, 0x1884},   {0x1887, 0x18A8},   {0x18AA, 0x18AA},
    {0x18B0, 0x18F5},   {0x1900, 0x191E},   {0x1950, 0x196D},   {0x1970, 0x1974},
    {0x1980, 0x19AB},   {0x19B0, 0x19C9},   {0x1A00, 0x1A16},   {0x1A20, 0x1A54},
    {0x1AA7, 0x1AA7},   {0x1B05, 0x1B33},   {0x1B45, 0x1B4C},   {0x1B83, 0x1BA0},
    {0x1BAE, 0x1BAF},   {0x1BBA, 0x1BE5},   {0x1C00, 0x1C23},   {0x1C4D, 0x1C4F},
    {0x1C5A, 0x1C7D},   {0x1C80, 0x1C88},   {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},
    {0x1CE9, 0x1CEC},   {0x1CEE, 0x1CF3},   {0x1CF5, 0x1CF6},   {0x1CFA, 0x1CFA},
    {0x1D00, 0x1DBF},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2071, 0x2071},   {0x207F, 0x207F},   {0x2090, 0x209C},   {0x2102, 0x2102},
    {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},
    {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},
    {0x212F, 0x2139},   {0x213C, 0x213F},   {0x2145, 0x2149},   {0x214E, 0x214E},
    {0x2183, 0x2184},   {0x2C00, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},
    {0x2D00, 0x2D25},   {0x2D27, 0x2D27},   {0x2D2D, 0x2D2D},   {0x2D30, 0x2D67},
    {0x2D6F, 0x2D6F},   {0x2D80, 0x2D96},   {0x2DA0, 0x2DA6},   {0x2DA8, 0x2DAE},
    {0x2DB0, 0x2DB6},   {0x2DB8, 0x2DBE},   {0x2DC0, 0x2DC6},   {0x2DC8, 0x2DCE},
    {0x2DD0, 0x2DD6},   {0x2DD8, 0x2DDE},   {0x2E2F, 0x2E2F},   {0x3005, 0x3006},
    {0x3031, 0x3035},   {0x303B, 0x303C},   {0x3041, 0x3096},   {0x309D, 0x309F},
    {0x30A1, 0x30FA},   {0x30FC, 0x30FF},   {0x3105, 0x312F},   {0x3131, 0x318E},
    {0x31A0, 0x31BF},   {0x31F0, 0x31FF},   {0x3400, 0x4DBF},   {0x4E00, 0xA48C},
    {0xA4D0, 0xA4FD},   {0xA500, 0xA60C},   {0xA610, 0xA61F},   {0xA62A, 0xA62B},
    {0xA640, 0xA66E},   {0xA67F, 0xA69D},   {0xA6A0, 0xA6E5},   {0xA717, 0xA71F},
    {0xA722, 0xA788},   {0xA78B, 0xA7CA},   {0xA7D0, 0xA7D1},   {0xA7D3, 0xA7D3},
    {0xA7D5, 0xA7D9},   {0xA7F2, 0xA801},   {0xA803, 0xA805},   {0xA807, 0xA80A},
    {0xA80C, 0xA822},   {0xA840, 0xA873},   {0xA882, 0xA8B3},   {0xA8F2, 0xA8F7},
    {0xA8FB, 0xA8FB},   {0xA8FD, 0xA8FE},   {0xA90A, 0xA925},   {0xA930, 0xA946},
    {0xA960, 0xA97C},   {0xA984, 0xA9B2},   {0xA9CF, 0xA9CF},   {0xA9E0, 0xA9E4},
    {0xA9E6, 0xA9EF},   {0xA9FA, 0xA9FE},   {0xAA00, 0xAA28},   {0xAA40, 0xAA42},
    {0xAA44, 0xAA4B},   {0xAA60, 0xAA76},   {0xAA7A, 0xAA7A},   {0xAA7E, 0xAAAF},
    {0xAAB1, 0xAAB1},   {0xAAB5, 0xAAB6},   {0xAAB9, 0xAABD},   {0xAAC0, 0xAAC0},
    {0xAAC2, 0xAAC2},   {0xAADB, 0xAADD},   {0xAAE0, 0xAAEA},   {0xAAF2, 0xAAF4},
    {0xAB01, 0xAB06},   {0xAB09, 0xAB0E},   {0xAB11, 0xAB16},   {0xAB20, 0xAB26},
    {0xAB28, 0xAB2E},   {0xAB30, 0xAB5A},   {0xAB5C, 0xAB69},   {0xAB70, 0xABE2},
    {0xAC00, 0xD7A3},   {0xD7B0, 0xD7C6},   {0xD7CB, 0xD7FB},   {0xF900, 0xFA6D},
    {0xFA70, 0xFAD9},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFB1D, 0xFB1D},
    {0xFB1F, 0xFB28},   {0xFB2A, 0xFB36},   {0xFB38, 0xFB3C},   {0xFB3E, 0xFB3E},
    {0xFB40, 0xFB41},   {0xFB43, 0xFB44},   {0xFB46, 0xFBB1},   {0xFBD3, 0xFD3D},
    {0xFD50, 0xFD8F},   {0xFD92, 0xFDC7},   {0xFDF0, 0xFDFB},   {0xFE70, 0xFE74},
    {0xFE76, 0xFEFC},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0xFF66, 0xFFBE},
    {0xFFC2, 0xFFC7},   {0xFFCA, 0xFFCF},   {0xFFD2, 0xFFD7},   {0xFFDA, 0xFFDC},
    {0x10000, 0x1000B}, {0x1000D, 0x10026}, {0x10028, 0x1003A}, {0x1003C, 0x1003D},
    {0x1003F, 0x1004D}, {0x10050, 0x1005D}, {0x10080, 0x100FA}, {0x10280, 0x1029C},
    {0x102A0, 0x102D0}, {0x10300, 0x1031F}, {0x1032D, 0x10340}, {0x10342, 0x10349},
    {0x10350, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103C3}, {0x103C8, 0x103CF},
    {0x10400, 0x1049D}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10500, 0x10527},
    {0x10530, 0x10563}, {0x10570, 0x1057A}, {0x1057C, 0x1058A}, {0x1058C, 0x10592},
    {0x10594, 0x10595}, {0x10597, 0x105A1}, {0x105A3, 0x105B1}, {0x105B3, 0x105B9},
    {0x105BB, 0x105BC}, {0x10600, 0x10736}, {0x10740, 0x10755}, {0x10760, 0x10767},
    {0x10780, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x10800, 0x10805},
    {0x10808, 0x10808}, {0x1080A, 0x10835}, {0x10837, 0x10838}, {0x1083C, 0x1083C},
    {0x1083F, 0x10855}, {0x10860, 0x10876}, {0x10880, 0x1089E}, {0x108E0, 0x108F2},
    {0x108F4, 0x108F5}, {0x10900, 0x10915}, {0x10920, 0x10939}, {0x10980, 0x109B7},
    {0x109BE, 0x109BF}, {0x10A00, 0x10A00}, {0x10A10, 0x10A13}, {0x10A15, 0x10A17},
    {0x10A19, 0x10A35}, {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C}, {0x10AC0, 0x10AC7},
    {0x10AC9, 0x10AE4}, {0x10B00, 0x10B35}, {0x10B40, 0x10B55}, {0x10B60, 0x10B72},
    {0x10B80, 0x10B91}, {0x10C00, 0x10C48}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2},
    {0x10D00, 0x10D23}, {0x10E80, 0x10EA9}, {0x10EB0, 0x10EB1}, {0x10F00, 0x10F1C},
    {0x10F27, 0x10F27}, {0x10F30, 0x10F45}, {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4},
    {0x10FE0, 0x10FF6}, {0x11003, 0x11037}, {0x11071, 0x11072}, {0x11075, 0x11075},
    {0x11083, 0x110AF}, {0x110D0, 0x110E8}, {0x11103, 0x11126}, {0x11144, 0x11144},
    {0x11147, 0x11147}, {0x11150, 0x11172}, {0x11176, 0x11176}, {0x11183, 0x111B2},
    {0x111C1, 0x111C4}, {0x111DA, 0x111DA}, {0x111DC, 0x111DC}, {0x11200, 0x11211},
    {0x11213, 0x1122B}, {0x11280, 0x11286}, {0x11288, 0x11288}, {0x1128A, 0x1128D},
    {0x1128F, 0x1129D}, {0x1129F, 0x112A8}, {0x112B0, 0x112DE}, {0x11305, 0x1130C},
    {0x1130F, 0x11310}, {0x11313, 0x11328}, {0x1132A, 0x11330}, {0x11332, 0x11333},
    {0x11335, 0x11339}, {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361},
    {0x11400, 0x11434}, {0x11447, 0x1144A}, {0x1145F, 0x11461}, {0x11480, 0x114AF},
    {0x114C4, 0x114C5}, {0x114C7, 0x114C7}, {0x11580, 0x115AE}, {0x115D8, 0x115DB},
    {0x11600, 0x1162F}, {0x11644, 0x11644}, {0x11680, 0x116AA}, {0x116B8, 0x116B8},
    {0x11700, 0x1171A}, {0x11740, 0x11746}, {0x11800, 0x1182B}, {0x118A0, 0x118DF},
    {0x118FF, 0x11906}, {0x11909, 0x11909}, {0x1190C, 0x11913}, {0x11915, 0x11916},
    {0x11918, 0x1192F}, {0x1193F, 0x1193F}, {0x11941, 0x11941}, {0x119A0, 0x119A7},
    {0x119AA, 0x119D0}, {0x119E1, 0x119E1}, {0x119E3, 0x119E3}, {0x11A00, 0x11A00},
    {0x11A0B, 0x11A32}, {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50}, {0x11A5C, 0x11A89},
    {0x11A9D, 0x11A9D}, {0x11AB0, 0x11AF8}, {0x11C00, 0x11C08}, {0x11C0A, 0x11C2E},
    {0x11C40, 0x11C40}, {0x11C72, 0x11C8F}, {0x11D00, 0x11D06}, {0x11D08, 0x11D09},
    {0x11D0B, 0x11D30}, {0x11D46, 0x11D46}, {0x11D60, 0x11D65}, {0x11D67, 0x11D68},
    {0x11D6A, 0x11D89}, {0x11D98, 0x11D98}, {0x11EE0, 0x11EF2}, {0x11FB0, 0x11FB0},
    {0x12000, 0x12399}, {0x12480, 0x12543}, {0x12F90, 0x12FF0}, {0x13000, 0x1342E},
    {0x14400, 0x14646}, {0x16800, 0x16A38}, {0x16A40, 0x16A5E}, {0x16A70, 0x16ABE},
    {0x16AD0, 0x16AED}, {0x16B00, 0x16B2F}, {0x16B40, 0x16B43}, {0x16B63, 0x16B77},
    {0x16B7D, 0x16B8F}, {0x16E40, 0x16E7F}, {0x16F00, 0x16F4A}, {0x16F50, 0x16F50},
    {0x16F93, 0x16F9F}, {0x16FE0, 0x16FE1}, {0x16FE3, 0x16FE3}, {0x17000, 0x187F7},
    {0x18800, 0x18CD5}, {0x18D00, 0x18D08}, {0x1AFF0, 0x1AFF3}, {0x1AFF5, 0x1AFFB},
    {0x1AFFD, 0x1AFFE}, {0x1B000, 0x1B122}, {0x1B150, 0x1B152}, {0x1B164, 0x1B167},
    {0x1B170, 0x1B2FB}, {0x1BC00, 0x1BC6A}, {0x1BC70, 0x1BC7C}, {0x1BC80, 0x1BC88},
    {0x1BC90, 0x1BC99}, {0x1D400, 0x1D454}, {0x1D456, 0x1D49C}, {0x1D49E, 0x1D49F},
    {0x1D4A2, 0x1D4A2}, {0x1D4A5, 0x1D4A6}, {0x1D4A9, 0x1D4AC}, {0x1D4AE, 0x1D4B9},
    {0x1D4BB, 0x1D4BB}, {0x1D4BD, 0x1D4C3}, {0x1D4C5, 0x1D505}, {0x1D507, 0x1D50A},
    {0x1D50D, 0x1D514}, {0x1D516, 0x1D51C}, {0x1D51E, 0x1D539}, {0x1D53B, 0x1D53E},
    {0x1D540, 0x1D544}, {0x1D546, 0x1D546}, {0x1D54A, 0x1D550}, {0x1D552, 0x1D6A5},
    {0x1D6A8, 0x1D6C0}, {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA}, {0x1D6FC, 0x1D714},
    {0x1D716, 0x1D734}, {0x1D736, 0x1D74E}, {0x1D750, 0x1D76E}, {0x1D770, 0x1D788},
    {0x1D78A, 0x1D7A8}, {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB}, {0x1DF00, 0x1DF1E},
    {0x1E100, 0x1E12C}, {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E}, {0x1E290, 0x1E2AD},
    {0x1E2C0, 0x1E2EB}, {0x1E7E0, 0x1E7E6}, {0x1E7E8, 0x1E7EB}, {0x1E7ED, 0x1E7EE},
    {0x1E7F0, 0x1E7FE}, {0x1E800, 0x1E8C4}, {0x1E900, 0x1E943}, {0x1E94B, 0x1E94B},
    {0x1EE00, 0x1EE03}, {0x1EE05, 0x1EE1F}, {0x1EE21, 0x1EE22}, {0x1EE24, 0x1EE24},
    {0x1EE27, 0x1EE27}, {0x1EE29, 0x1EE32}, {0x1EE34, 0x1EE37}, {0x1EE39, 0x1EE39},
    {0x1EE3B, 0x1EE3B}, {0x1EE42, 0x1EE42}, {0x1EE47, 0x1EE47}, {0x1EE49, 0x1EE49},
    {0x1EE4B, 0x1EE4B}, {0x1EE4D, 0x1EE4F}, {0x1EE51, 0x1EE52}, {0x1EE54, 0x1EE54},
    {0x1EE57, 0x1EE57}, {0x1EE59, 0x1EE59}, {0x1EE5B, 0x1EE5B}, {0x1EE5D, 0x1EE5D},
    {0x1EE5F, 0x1EE5F}, {0x1EE61, 0x1EE62}, {0x1EE64, 0x1EE64}, {0x1EE67, 0x1EE6A},
    {0x1EE6C, 0x1EE72}, {0x1EE74, 0x1EE77}, {0x1EE79, 0x1EE7C}, {0x1EE7E, 0x1EE7E},
    {0x1EE80, 0x1EE89}, {0x1EE8B, 0x1EE9B}, {0x1EEA1, 0x1EEA3}, {0x1EEA5, 0x1EEA9},
    {0x1EEAB, 0x1EEBB}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B738}, {0x2B740, 0x2B81D},
    {0x2B820, 0x2CEA1}, {0x2CEB0, 0x2EBE0}, {0x2F800, 0x2FA1D}, {0x30000, 0x3134A},
};
static const struct cpr UC_ZL[] = {{0x2028, 0x2028}};
static const struct cpr UC_ZP[] = {{0x2029, 0x2029}};
#define UC_N(t) (sizeof t / sizeof t[0])

struct uc_prop {
    const char *name, *alias;
    const struct cpr *t[3];
    size_t n[3];
};
static const struct uc_prop UC_PROPS[] = {
    {"Zs", "Space_Separator", {UC_ZS}, {UC_N(UC_ZS)}},
    {"Zl", "Line_Separator", {UC_ZL}, {1}},
    {"Zp", "Paragraph_Separator", {UC_ZP}, {1}},
    {"Z", "Separator", {UC_ZS, UC_ZL, UC_ZP}, {UC_N(UC_ZS), 1, 1}},
    {"Nd", "Decimal_Number", {UC_ND}, {UC_N(UC_ND)}},
    {"digit", "Nd", {UC_ND}, {UC_N(UC_ND)}},
    {"L", "Letter", {UC_L}, {UC_N(UC_L)}},
    {"Nl", "Letter_Number", {UC_NL}, {UC_N(UC_NL)}},
    {"No", "Other_Number", {UC_NO}, {UC_N(UC_NO)}},
    {"N", "Number", {UC_ND, UC_NL, UC_NO}, {UC_N(UC_ND), UC_N(UC_NL), UC_N(UC_NO)}},
};

// Adds table (or its complement when neg) to s.
static int cpset_add_table(struct cpset *s, const struct cpr *t, size_t n, int neg)
{
    if (!neg) {
        for (size_t i = 0; i < n; i++)
            if (!cpset_add(s, t[i].lo, t[i].hi))
                return 0;
        return 1;
    }
    uint32_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].lo > at && !cpset_add(s, at, t[i].lo - 1))
            return 0;
        at = t[i].hi + 1;
    }
    return at > RE_CP_MAX || cpset_add(s, at, RE_CP_MAX);
}

// ---------------------------------------------------------------------------------------------
// AST

// AN_LOOK: (?=X) (min 0) or (?!X) (min 1); max says where it sits: LOOK_AT_START constrains the
// whole input (a product automaton), LOOK_AT_END in search mode is plain concatenation.
enum ast_kind { AN_SET, AN_CAT, AN_ALT, AN_REP, AN_BEGIN, AN_END, AN_LOOK };
enum { LOOK_ELSEWHERE, LOOK_AT_START, LOOK_AT_END };
#define RE_MAX_LOOK 16 // lookaheads per pattern (one accept bit each, bit 0 is the pattern)

struct anode {
    uint8_t kind;
    int32_t first, last; // children (CAT, ALT, REP: one child)
    int32_t next, prev;  // siblings
    uint32_t r0, nr;     // AN_SET: ranges in the parser's range pool
    int32_t min, max;    // AN_REP: max -1 = unbounded
    uint32_t off;        // source byte offset, for error messages
};

struct parser {
    const uint8_t *s;
    size_t n, i;
    int depth;
    struct anode *nodes;
    size_t n_nodes, cap_nodes;
    struct cpr *pool;
    size_t n_pool, cap_pool;
    struct gl_err *err;
    gl_status st;
    struct setc *setc; // per AN_SET node: its first compiled copy, cloned for the others
};

static int p_fail(struct parser *p, gl_status code, const char *fmt, ...) GL_PRINTF(3, 4);
static int p_fail(struct parser *p, gl_status code, const char *fmt, ...)
{
    if (p->st != GL_OK)
        return -1;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = gl_err_set(p->err, code, "regex: %s", msg);
    return -1;
}

static int32_t p_node(struct parser *p, uint8_t kind, size_t off)
{
    if (p->n_nodes == p->cap_nodes) {
        size_t cap = p->cap_nodes ? p->cap_nodes * 2 : 64;
        struct anode *a = gl_realloc(p->nodes, cap * sizeof *a);
        if (!a)
            return p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
        p->nodes = a;
        p->cap_nodes = cap;
    }
    struct anode *a = &p->nodes[p->n_nodes];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->first = a->last = a->next = a->prev = -1;
    a->off = (uint32_t)off;
    return (int32_t)p->n_nodes++;
}

static void p_append(struct parser *p, int32_t parent, int32_t child)
{
    struct anode *a = &p->nodes[parent];
    p->nodes[child].prev = a->last;
    p->nodes[child].next = -1;
    if (a->last >= 0)
        p->nodes[a->last].next = child;
    else
        a->first = child;
    a->last = child;
}

// Moves a normalized set into a new AN_SET node (takes s's ranges; s is emptied).
static int32_t p_set_node(struct parser *p, struct cpset *s, size_t off)
{
    cpset_normalize(s);
    int32_t id = p_node(p, AN_SET, off);
    if (id < 0)
        return -1;
    if (p->n_pool + s->n > p->cap_pool) {
        size_t cap = p->cap_pool ? p->cap_pool * 2 : 64;
        while (cap < p->n_pool + s->n)
            cap *= 2;
        struct cpr *r = gl_realloc(p->pool, cap * sizeof *r);
        if (!r)
            return p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
        p->pool = r;
        p->cap_pool = cap;
    }
    if (s->n)
        memcpy(p->pool + p->n_pool, s->r, s->n * sizeof *s->r);
    p->nodes[id].r0 = (uint32_t)p->n_pool;
    p->nodes[id].nr = (uint32_t)s->n;
    p->n_pool += s->n;
    s->n = 0;
    return id;
}

static int32_t p_table_node(struct parser *p, const struct cpr *t, size_t n, int neg, size_t off)
{
    struct cpset s = {0};
    int32_t id = -1;
    if (!cpset_add_table(&s, t, n, neg))
        p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
    else
        id = p_set_node(p, &s, off);
    gl_free(s.r);
    return id;
}

// Decodes one UTF-8 code point of the pattern at p->i; -1 (and error) if malformed.
static int64_t p_cp(struct parser *p)
{
    size_t i = p->i;
    uint8_t c = p->s[i];
    if (c < 0x80) {
        p->i++;
        return c;
    }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    uint32_t cp = c >= 0xF0 ? c & 0x07u : c >= 0xE0 ? c & 0x0Fu : c & 0x1Fu;
    int ok = c >= 0xC2 && c <= 0xF4 && i + (size_t)len <= p->n;
    for (int k = 1; ok && k < len; k++) {
        uint8_t d = p->s[i + (size_t)k];
        ok = (d & 0xC0) == 0x80;
        cp = cp << 6 | (d & 0x3Fu);
    }
    if (ok)
        ok = !(len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) &&
             !(len == 4 && (cp < 0x10000 || cp > RE_CP_MAX));
    if (!ok) {
        p_fail(p, GL_E_FORMAT, "invalid UTF-8 in the pattern at byte %zu", i);
        return -1;
    }
    p->i += (size_t)len;
    return cp;
}

// Reads exactly n hex digits at p->i; -1 if not there.
static int64_t p_hex(struct parser *p, int n)
{
    if (p->i + (size_t)n > p->n)
        return -1;
    int64_t v = 0;
    for (int k = 0; k < n; k++) {
        int h = gl_hex_val(p->s[p->i + (size_t)k]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    p->i += (size_t)n;
    return v;
}

// \u escapes after the "\u": HHHH, a surrogate pair \uHHHH\uHHHH, or {H...}. A lone surrogate
// stays a code point of its own; no UTF-8 string contains one, so sets drop it (nfa_set).
static int64_t p_uescape(struct parser *p, size_t at)
{
    if (p->i < p->n && p->s[p->i] == '{') {
        size_t j = p->i + 1;
        int64_t v = 0;
        int nd = 0;
        while (j < p->n && gl_hex_val(p->s[j]) >= 0 && v <= RE_CP_MAX) {
            v = v * 16 + gl_hex_val(p->s[j]);
            j++;
            nd++;
        }
        if (nd == 0 || j >= p->n || p->s[j] != '}' || v > RE_CP_MAX) {
            p_fail(p, GL_E_FORMAT, "bad \\u{...} escape at byte %zu", at);
            return -1;
        }
        p->i = j + 1;
        return v;
    }
    int64_t v = p_hex(p, 4);
    if (v < 0) {
        p_fail(p, GL_E_FORMAT, "\\u needs 4 hex digits at byte %zu", at);
        return -1;
    }
    if (v >= 0xD800 && v <= 0xDBFF && p->i + 6 <= p->n && p->s[p->i] == '\\' &&
        p->s[p->i + 1] == 'u') {
        size_t save = p->i;
        p->i += 2;
        int64_t lo = p_hex(p, 4);
        if (lo >= 0xDC00 && lo <= 0xDFFF)
            return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        p->i = save;
    }
    return v;
}

// \p{Name} / \P{Name} after the letter (p->i is past it): adds the set (or its complement).
// Name is a UC_PROPS short or long name, optionally after "gc=" or "General_Category=".
static int p_property(struct parser *p, int neg, size_t at, struct cpset *cls)
{
    if (p->i >= p->n || p->s[p->i] != '{')
        return p_fail(p, GL_E_FORMAT, "\\p needs {name} at byte %zu", at);
    size_t j = p->i + 1;
    while (j < p->n && p->s[j] != '}')
        j++;
    if (j >= p->n)
        return p_fail(p, GL_E_FORMAT, "unterminated \\p{ at byte %zu", at);
    const char *name = (const char *)p->s + p->i + 1;
    size_t len = j - p->i - 1;
    static const char *const PREFIX[] = {"gc=", "General_Category="};
    for (int k = 0; k < 2; k++) {
        size_t pl = strlen(PREFIX[k]);
        if (len > pl && memcmp(name, PREFIX[k], pl) == 0) {
            name += pl;
            len -= pl;
        }
    }
    const struct uc_prop *u = NULL;
    for (size_t k = 0; k < sizeof UC_PROPS / sizeof UC_PROPS[0] && !u; k++)
        if ((strlen(UC_PROPS[k].name) == len && memcmp(UC_PROPS[k].name, name, len) == 0) ||
            (strlen(UC_PROPS[k].alias) == len && memcmp(UC_PROPS[k].alias, name, len) == 0))
            u = &UC_PROPS[k];
    if (!u)
        return p_fail(p, GL_E_UNSUPPORTED,
                      "Unicode property \\p{%.*s} at byte %zu is not supported (only L Z Zs Zl "
                      "Zp N Nd Nl No)",
                      (int)(len < 40 ? len : 40), name, at);
    p->i = j + 1;
    struct cpset s = {0};
    int ok = 1;
    for (int k = 0; k < 3 && u->t[k]; k++)
        ok = ok && cpset_add_table(&s, u->t[k], u->n[k], 0);
    cpset_normalize(&s);
    if (ok && neg)
        ok = cpset_negate(&s);
    for (size_t k = 0; ok && k < s.n; k++)
        ok = cpset_add(cls, s.r[k].lo, s.r[k].hi);
    gl_free(s.r);
    if (!ok)
        return p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
    return 0;
}

// One escape after the backslash (p->i is past it). Sets *cp to a code point, or adds a class
// to cls and sets *cp = -3. in_class selects \b = backspace.
static int p_escape(struct parser *p, int in_class, int64_t *cp, struct cpset *cls)
{
    size_t at = p->i - 1;
    if (p->i >= p->n)
        return p_fail(p, GL_E_FORMAT, "pattern ends with a lone backslash");
    uint8_t c = p->s[p->i];
    const struct cpr *t = NULL;
    size_t tn = 0;
    int neg = 0;
    switch (c) {
    case 'd':
    case 'D':
        t = CLS_DIGIT;
        tn = 1;
        neg = c == 'D';
        break;
    case 'w':
    case 'W':
        t = CLS_WORD;
        tn = 4;
        neg = c == 'W';
        break;
    case 's':
    case 'S':
        t = CLS_SPACE;
        tn = sizeof CLS_SPACE / sizeof CLS_SPACE[0];
        neg = c == 'S';
        break;
    default:
        break;
    }
    if (t) {
        p->i++;
        if (!cpset_add_table(cls, t, tn, neg))
            return p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
        *cp = -3;
        return 0;
    }
    p->i++;
    switch (c) {
    case 'n':
        *cp = '\n';
        return 0;
    case 't':
        *cp = '\t';
        return 0;
    case 'r':
        *cp = '\r';
        return 0;
    case 'f':
        *cp = '\f';
        return 0;
    case 'v':
        *cp = '\v';
        return 0;
    case '0':
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            return p_fail(p, GL_E_UNSUPPORTED, "octal escape at byte %zu is not supported", at);
        *cp = 0;
        return 0;
    case 'x': {
        int64_t v = p_hex(p, 2);
        if (v < 0)
            return p_fail(p, GL_E_FORMAT, "\\x needs 2 hex digits at byte %zu", at);
        *cp = v;
        return 0;
    }
    case 'u': {
        int64_t v = p_uescape(p, at);
        if (v == -1)
            return -1;
        *cp = v;
        return 0;
    }
    case 'c':
        if (p->i < p->n && ((p->s[p->i] | 0x20) >= 'a' && (p->s[p->i] | 0x20) <= 'z')) {
            *cp = p->s[p->i++] % 32;
            return 0;
        }
        return p_fail(p, GL_E_FORMAT, "\\c needs a letter at byte %zu", at);
    case 'b':
        if (in_class) {
            *cp = 0x08;
            return 0;
        }
        return p_fail(p, GL_E_UNSUPPORTED, "word boundary \\b at byte %zu is not supported", at);
    case 'B':
        return p_fail(p, GL_E_UNSUPPORTED, "word boundary \\B at byte %zu is not supported", at);
    case 'p':
    case 'P':
        if (p_property(p, c == 'P', at, cls) < 0)
            return -1;
        *cp = -3;
        return 0;
    case 'k':
        return p_fail(p, GL_E_UNSUPPORTED, "backreference \\k at byte %zu is not supported", at);
    case '-':
        *cp = '-';
        return 0;
    default:
        break;
    }
    if (c >= '1' && c <= '9')
        return p_fail(p, GL_E_UNSUPPORTED, "backreference \\%c at byte %zu is not supported", c,
                      at);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return p_fail(p, GL_E_UNSUPPORTED, "escape \\%c at byte %zu is not supported", c, at);
    p->i--;
    int64_t v = p_cp(p); // identity escape: punctuation or any non-ASCII code point
    if (v < 0)
        return -1;
    *cp = v;
    return 0;
}

static int32_t p_class(struct parser *p)
{
    size_t at = p->i++;
    struct cpset s = {0};
    int neg = 0;
    int32_t id = -1;
    if (p->i < p->n && p->s[p->i] == '^') {
        neg = 1;
        p->i++;
    }
    for (;;) {
        if (p->i >= p->n) {
            p_fail(p, GL_E_FORMAT, "unterminated character class opened at byte %zu", at);
            goto out;
        }
        if (p->s[p->i] == ']') {
            p->i++;
            break;
        }
        int64_t lo, hi;
        size_t item_at = p->i;
        if (p->s[p->i] == '\\') {
            p->i++;
            if (p_escape(p, 1, &lo, &s) < 0)
                goto out;
        } else if ((lo = p_cp(p)) < 0) {
            goto out;
        }
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            if (p->s[p->i] == '\\') {
                p->i++;
                if (p_escape(p, 1, &hi, &s) < 0)
                    goto out;
            } else if ((hi = p_cp(p)) < 0) {
                goto out;
            }
            if (lo == -3 || hi == -3) {
                // A class escape at either end: Annex B reads the '-' literally.
                if (!cpset_add(&s, '-', '-'))
                    goto nomem;
                if (lo >= 0 && !cpset_add(&s, (uint32_t)lo, (uint32_t)lo))
                    goto nomem;
                if (hi >= 0 && !cpset_add(&s, (uint32_t)hi, (uint32_t)hi))
                    goto nomem;
                continue;
            }
            if (lo > hi) {
                p_fail(p, GL_E_FORMAT, "class range out of order at byte %zu", item_at);
                goto out;
            }
            if (!cpset_add(&s, (uint32_t)lo, (uint32_t)hi))
                goto nomem;
            continue;
        }
        if (lo >= 0 && !cpset_add(&s, (uint32_t)lo, (uint32_t)lo))
            goto nomem;
    }
    cpset_normalize(&s);
    if (neg && !cpset_negate(&s))
        goto nomem;
    id = p_set_node(p, &s, at);
    goto out;
nomem:
    p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
out:
    gl_free(s.r);
    return p->st == GL_OK ? id : -1;
}

// Parses a {n}, {n,} or {n,m} at p->i without consuming; returns its length, 0 if the text
// there is not a quantifier (then '{' is a literal, as ECMA Annex B and PCRE2 read it).
static size_t p_brace(struct parser *p, int64_t *mn, int64_t *mx)
{
    size_t j = p->i + 1;
    int64_t a = 0, b;
    size_t d0 = j;
    while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
        if (a <= RE_MAX_COUNT)
            a = a * 10 + (p->s[j] - '0');
        j++;
    }
    if (j == d0 || j >= p->n)
        return 0;
    b = a;
    if (p->s[j] == ',') {
        j++;
        size_t d1 = j;
        b = 0;
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
            if (b <= RE_MAX_COUNT)
                b = b * 10 + (p->s[j] - '0');
            j++;
        }
        if (j == d1)
            b = -1;
    }
    if (j >= p->n || p->s[j] != '}')
        return 0;
    *mn = a;
    *mx = b;
    return j + 1 - p->i;
}

static int32_t p_alt(struct parser *p);

static int32_t p_group(struct parser *p)
{
    size_t at = p->i++;
    if (++p->depth > RE_MAX_DEPTH)
        return p_fail(p, GL_E_LIMIT, "groups nested deeper than %d at byte %zu", RE_MAX_DEPTH, at);
    if (p->i < p->n && p->s[p->i] == '?') {
        uint8_t c = p->i + 1 < p->n ? p->s[p->i + 1] : 0;
        uint8_t d = p->i + 2 < p->n ? p->s[p->i + 2] : 0;
        if (c == ':') {
            p->i += 2;
        } else if (c == '<' && d != '=' && d != '!') {
            size_t j = p->i + 2;
            while (j < p->n && p->s[j] != '>' &&
                   ((p->s[j] | 0x20) >= 'a' && (p->s[j] | 0x20) <= 'z'
                        ? 1
                        : (p->s[j] >= '0' && p->s[j] <= '9') || p->s[j] == '_' || p->s[j] == '$'))
                j++;
            if (j >= p->n || p->s[j] != '>' || j == p->i + 2)
                return p_fail(p, GL_E_FORMAT, "bad group name at byte %zu", at);
            p->i = j + 1;
        } else if (c == '=' || c == '!') {
            p->i += 2;
            int32_t in = p_alt(p);
            if (in < 0)
                return -1;
            if (p->i >= p->n || p->s[p->i] != ')')
                return p_fail(p, GL_E_FORMAT, "unclosed group opened at byte %zu", at);
            p->i++;
            p->depth--;
            int32_t look = p_node(p, AN_LOOK, at);
            if (look < 0)
                return -1;
            p->nodes[look].min = c == '!';
            p_append(p, look, in);
            return look;
        } else if (c == '<') {
            return p_fail(p, GL_E_UNSUPPORTED, "lookbehind at byte %zu is not supported", at);
        } else {
            return p_fail(p, GL_E_UNSUPPORTED, "group syntax (?%c at byte %zu is not supported",
                          c ? c : '?', at);
        }
    }
    int32_t in = p_alt(p);
    if (in < 0)
        return -1;
    if (p->i >= p->n || p->s[p->i] != ')')
        return p_fail(p, GL_E_FORMAT, "unclosed group opened at byte %zu", at);
    p->i++;
    p->depth--;
    return in;
}

static int32_t p_atom(struct parser *p)
{
    size_t at = p->i;
    uint8_t c = p->s[p->i];
    int64_t mn, mx;
    switch (c) {
    case '(':
        return p_group(p);
    case '[':
        return p_class(p);
    case '.':
        p->i++;
        return p_table_node(p, CLS_DOT, 4, 0, at);
    case '^':
        p->i++;
        return p_node(p, AN_BEGIN, at);
    case '$':
        p->i++;
        return p_node(p, AN_END, at);
    case '*':
    case '+':
    case '?':
        return p_fail(p, GL_E_FORMAT, "quantifier '%c' at byte %zu has nothing to repeat", c, at);
    case '{':
        if (p_brace(p, &mn, &mx))
            return p_fail(p, GL_E_FORMAT, "quantifier at byte %zu has nothing to repeat", at);
        break;
    case '\\': {
        struct cpset s = {0};
        int64_t cp;
        p->i++;
        int32_t id = -1;
        if (p_escape(p, 0, &cp, &s) == 0) {
            if (cp >= 0 && !cpset_add(&s, (uint32_t)cp, (uint32_t)cp))
                p_fail(p, GL_E_NOMEM, "out of memory parsing the pattern");
            else
                id = p_set_node(p, &s, at);
        }
        gl_free(s.r);
        return p->st == GL_OK ? id : -1;
    }
    default:
        break;
    }
    int64_t cp = p_cp(p);
    if (cp < 0)
        return -1;
    struct cpr one = {(uint32_t)cp, (uint32_t)cp};
    return p_table_node(p, &one, 1, 0, at);
}

static int32_t p_quantified(struct parser *p)
{
    int32_t a = p_atom(p);
    if (a < 0 || p->i >= p->n)
        return a;
    size_t at = p->i;
    uint8_t c = p->s[p->i];
    int64_t mn, mx;
    size_t len = 0;
    if (c == '*') {
        mn = 0, mx = -1, len = 1;
    } else if (c == '+') {
        mn = 1, mx = -1, len = 1;
    } else if (c == '?') {
        mn = 0, mx = 1, len = 1;
    } else if (c == '{') {
        len = p_brace(p, &mn, &mx);
    }
    if (len == 0)
        return a;
    uint8_t k = p->nodes[a].kind;
    if (k == AN_BEGIN || k == AN_END)
        return p_fail(p, GL_E_FORMAT, "quantifier at byte %zu follows an anchor", at);
    if (k == AN_LOOK)
        return p_fail(p, GL_E_UNSUPPORTED, "quantified lookahead at byte %zu is not supported", at);
    if (mn > RE_MAX_COUNT || mx > RE_MAX_COUNT)
        return p_fail(p, GL_E_LIMIT, "repetition count at byte %zu is over %d", at, RE_MAX_COUNT);
    if (mx >= 0 && mx < mn)
        return p_fail(p, GL_E_FORMAT, "repetition {%lld,%lld} at byte %zu is out of order",
                      (long long)mn, (long long)mx, at);
    p->i += len;
    if (p->i < p->n && p->s[p->i] == '?')
        p->i++; // lazy: same language
    if (p->i < p->n) {
        uint8_t d = p->s[p->i];
        if (d == '*' || d == '+' || d == '?' || (d == '{' && p_brace(p, &mn, &mn)))
            return p_fail(p, GL_E_FORMAT, "quantifier at byte %zu has nothing to repeat", p->i);
    }
    int32_t r = p_node(p, AN_REP, at);
    if (r < 0)
        return -1;
    p->nodes[r].min = (int32_t)mn;
    p->nodes[r].max = (int32_t)mx;
    p_append(p, r, a);
    return r;
}

static int32_t p_cat(struct parser *p)
{
    int32_t cat = p_node(p, AN_CAT, p->i);
    if (cat < 0)
        return -1;
    while (p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
        int32_t a = p_quantified(p);
        if (a < 0)
            return -1;
        p_append(p, cat, a);
    }
    return cat;
}

static int32_t p_alt(struct parser *p)
{
    int32_t first = p_cat(p);
    if (first < 0 || p->i >= p->n || p->s[p->i] != '|')
        return first;
    int32_t alt = p_node(p, AN_ALT, p->i);
    if (alt < 0)
        return -1;
    p_append(p, alt, first);
    while (p->i < p->n && p->s[p->i] == '|') {
        p->i++;
        int32_t c = p_cat(p);
        if (c < 0)
            return -1;
        p_append(p, alt, c);
    }
    return alt;
}

// ---------------------------------------------------------------------------------------------
// NFA over bytes

enum ns_kind { NS_BYTES, NS_SPLIT, NS_EPS, NS_BEGIN, NS_END, NS_MATCH };

struct nstate {
    uint8_t kind;
    uint32_t out1, out2; // SPLIT: both; EPS/BEGIN/END: out1
    uint32_t edge;       // BYTES: head of its edge list (RE_NONE = no edges)
};

struct nedge {
    uint8_t lo, hi;
    uint32_t to, next;
};

struct dstate {
    uint32_t off, len; // NFA byte-states in re->sets[off..off+len), sorted
    uint32_t amask;    // bit j: component j's match is in the closure (0 = the pattern)
    int32_t min_chars;
    uint8_t accept, unbounded;
    uint8_t tag; // the caller's memo (gl_regex_tag), 0 when the state is made
};

struct gl_regex {
    uint64_t serial; // unique over the process's lifetime (gl_regex_serial)
    // The source and flags, hashed twice (gl_regex_state_canon); both 0 when states are not
    // canonical (negated or lookahead regexes rewrite their DFA after the subset construction).
    uint64_t fp[2];
    // NFA
    struct nstate *ns;
    uint32_t n_ns, cap_ns;
    struct nedge *ne;
    uint32_t n_ne, cap_ne;
    uint32_t nfa_limit, nfa_start;
    // Leading lookaheads: components 1..n_look, each X.* with its own NS_MATCH (out1 = index).
    // A product state accepts when bit 0 and every positive bit are set and no negative bit.
    uint32_t n_look, look_entry[RE_MAX_LOOK + 1], pos_mask, neg_mask;
    uint64_t work, work_limit; // compile steps (bounds repeated empty expansions)
    int32_t *dist;             // fewest code points from an NFA state to a match; -1 dead
    uint8_t *inf;              // an accepting path through a consuming cycle exists
    // byte classes: bytes no NFA edge tells apart share a column
    uint8_t cls[256];
    uint8_t rep[256]; // a representative byte per class
    uint32_t ncls;
    // DFA
    struct dstate *ds;
    uint32_t n_ds, cap_ds, max_states;
    uint32_t *trans; // n_ds * ncls
    uint32_t *sets;
    size_t n_sets, cap_sets;
    uint32_t *hash; // open addressing over state ids; RE_NONE = empty slot
    uint32_t hash_cap;
    uint32_t start;
    // The search wrapper's any-code-point loops (their first byte-states; RE_NONE when absent):
    // [0] before the pattern, [1] after its match (gl_regex_takes_any).
    uint32_t any_body[2];
    int overflow;
    // NFA states visited building DFA transitions: bounds the time a hostile pattern can take
    // (max_states alone does not: one state's closure may visit the whole NFA).
    uint64_t dfa_work, dfa_work_limit;
    // scratch for closures
    uint32_t *mark_a, *mark_b, gen;
    uint32_t *stack, *members;
};

static uint32_t nfa_state(struct gl_regex *re, uint8_t kind, struct gl_err *err, uint32_t off)
{
    if (re->n_ns + re->n_ne >= re->nfa_limit) {
        gl_err_set(err, GL_E_LIMIT, "regex: pattern at byte %u expands past %u NFA states", off,
                   re->nfa_limit);
        return RE_NONE;
    }
    if (re->n_ns == re->cap_ns) {
        uint32_t cap = re->cap_ns ? re->cap_ns * 2 : 256;
        struct nstate *n = gl_realloc(re->ns, (size_t)cap * sizeof *n);
        if (!n) {
            gl_err_set(err, GL_E_NOMEM, "regex: out of memory building the NFA");
            return RE_NONE;
        }
        re->ns = n;
        re->cap_ns = cap;
    }
    struct nstate *s = &re->ns[re->n_ns];
    s->kind = kind;
    s->out1 = s->out2 = s->edge = RE_NONE;
    return re->n_ns++;
}

static int nfa_edge(struct gl_regex *re, uint32_t from, uint8_t lo, uint8_t hi, uint32_t to,
                    struct gl_err *err, uint32_t off)
{
    if (re->n_ns + re->n_ne >= re->nfa_limit) {
        gl_err_set(err, GL_E_LIMIT, "regex: pattern at byte %u expands past %u NFA states", off,
                   re->nfa_limit);
        return 0;
    }
    if (re->n_ne == re->cap_ne) {
        uint32_t cap = re->cap_ne ? re->cap_ne * 2 : 256;
        struct nedge *n = gl_realloc(re->ne, (size_t)cap * sizeof *n);
        if (!n) {
            gl_err_set(err, GL_E_NOMEM, "regex: out of memory building the NFA");
            return 0;
        }
        re->ne = n;
        re->cap_ne = cap;
    }
    struct nedge *e = &re->ne[re->n_ne];
    e->lo = lo;
    e->hi = hi;
    e->to = to;
    e->next = re->ns[from].edge;
    re->ns[from].edge = re->n_ne++;
    return 1;
}

static int utf8_len(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// Adds one byte-range sequence lo[0..k) x ... x hi[..] to the trie rooted at root; the last
// range goes to next. Prefix ranges equal to an existing edge share its node.
static int utf8_seq_add(struct gl_regex *re, uint32_t root, const uint8_t *lo, const uint8_t *hi,
                        int k, uint32_t next, struct gl_err *err, uint32_t off)
{
    uint32_t at = root;
    for (int i = 0; i < k - 1; i++) {
        uint32_t found = RE_NONE;
        for (uint32_t e = re->ns[at].edge; e != RE_NONE; e = re->ne[e].next)
            if (re->ne[e].lo == lo[i] && re->ne[e].hi == hi[i] && re->ne[e].to != next) {
                found = re->ne[e].to;
                break;
            }
        if (found == RE_NONE) {
            found = nfa_state(re, NS_BYTES, err, off);
            if (found == RE_NONE || !nfa_edge(re, at, lo[i], hi[i], found, err, off))
                return 0;
        }
        at = found;
    }
    return nfa_edge(re, at, lo[k - 1], hi[k - 1], next, err, off);
}

// Splits [lo, hi] (no surrogates, one encoded length or not) into ranges whose UTF-8 forms are
// products of byte ranges, then adds each. Recursion depth is bounded by 4 lengths x 3 levels.
static int utf8_range_add(struct gl_regex *re, uint32_t root, uint32_t lo, uint32_t hi,
                          uint32_t next, struct gl_err *err, uint32_t off)
{
    static const uint32_t len_max[] = {0x7F, 0x7FF, 0xFFFF};
    for (int k = 0; k < 3; k++)
        if (lo <= len_max[k] && hi > len_max[k])
            return utf8_range_add(re, root, lo, len_max[k], next, err, off) &&
                   utf8_range_add(re, root, len_max[k] + 1, hi, next, err, off);
    int n = utf8_len(lo);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return utf8_range_add(re, root, lo, lo | m, next, err, off) &&
                       utf8_range_add(re, root, (lo | m) + 1, hi, next, err, off);
            if ((hi & m) != m)
                return utf8_range_add(re, root, lo, (hi & ~m) - 1, next, err, off) &&
                       utf8_range_add(re, root, hi & ~m, hi, next, err, off);
        }
    }
    uint8_t a[4], b[4];
    gl_utf8_encode(lo, a);
    gl_utf8_encode(hi, b);
    return utf8_seq_add(re, root, a, b, n, next, err, off);
}

// A code-point set as one NFA state (a byte trie) whose paths end at next.
static uint32_t nfa_set(struct gl_regex *re, const struct cpr *r, uint32_t n, uint32_t next,
                        struct gl_err *err, uint32_t off)
{
    uint32_t root = nfa_state(re, NS_BYTES, err, off);
    if (root == RE_NONE)
        return RE_NONE;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = r[i].lo, hi = r[i].hi;
        if (lo <= 0xD7FF &&
            !utf8_range_add(re, root, lo, hi < 0xD7FF ? hi : 0xD7FF, next, err, off))
            return RE_NONE;
        if (hi >= 0xE000 &&
            !utf8_range_add(re, root, lo > 0xE000 ? lo : 0xE000, hi, next, err, off))
            return RE_NONE;
    }
    return root;
}

static uint32_t nfa_split(struct gl_regex *re, uint32_t a, uint32_t b, struct gl_err *err,
                          uint32_t off)
{
    uint32_t s = nfa_state(re, NS_SPLIT, err, off);
    if (s != RE_NONE) {
        re->ns[s].out1 = a;
        re->ns[s].out2 = b;
    }
    return s;
}

// The first compiled copy of a set: states [root, root + ns), edges [e0, e0 + ne), whose edges
// into next end the set. Repeats ({n,m}, x+) clone it instead of re-splitting UTF-8 ranges.
struct setc {
    uint32_t root, ns, e0, ne, next;
};

static uint32_t nfa_set_cached(struct gl_regex *re, struct parser *p, int32_t a, uint32_t next,
                               struct gl_err *err)
{
    const struct anode *n = &p->nodes[a];
    struct setc *c = &p->setc[a];
    if (c->root == 0) {
        uint32_t s0 = re->n_ns, e0 = re->n_ne;
        const struct cpr *r = n->nr ? p->pool + n->r0 : NULL; // pool is NULL if all sets are empty
        uint32_t root = nfa_set(re, r, n->nr, next, err, n->off);
        if (root == RE_NONE)
            return RE_NONE;
        GL_ASSERT(root == s0 && root != 0);
        *c = (struct setc){root, re->n_ns - s0, e0, re->n_ne - e0, next};
        return root;
    }
    if ((uint64_t)re->n_ns + re->n_ne + c->ns + c->ne >= re->nfa_limit) {
        gl_err_set(err, GL_E_LIMIT, "regex: pattern at byte %u expands past %u NFA states", n->off,
                   re->nfa_limit);
        return RE_NONE;
    }
    uint32_t root = re->n_ns, e0 = re->n_ne;
    for (uint32_t i = 0; i < c->ns; i++)
        if (nfa_state(re, NS_BYTES, err, n->off) == RE_NONE)
            return RE_NONE;
    for (uint32_t i = 0; i < c->ne; i++) {
        // Reserve the edge slots, then copy with the ids moved by the offsets.
        if (re->n_ne == re->cap_ne) {
            uint32_t cap = re->cap_ne ? re->cap_ne * 2 : 256;
            struct nedge *ne = gl_realloc(re->ne, (size_t)cap * sizeof *ne);
            if (!ne) {
                gl_err_set(err, GL_E_NOMEM, "regex: out of memory building the NFA");
                return RE_NONE;
            }
            re->ne = ne;
            re->cap_ne = cap;
        }
        struct nedge e = re->ne[c->e0 + i];
        e.to = e.to == c->next ? next : e.to - c->root + root;
        e.next = e.next == RE_NONE ? RE_NONE : e.next - c->e0 + e0;
        re->ne[re->n_ne++] = e;
    }
    for (uint32_t i = 0; i < c->ns; i++) {
        uint32_t h = re->ns[c->root + i].edge;
        re->ns[root + i].edge = h == RE_NONE ? RE_NONE : h - c->e0 + e0;
    }
    return root;
}

// Compiles node a so that its matches continue at next; returns the entry state.
static uint32_t nfa_compile(struct gl_regex *re, struct parser *p, int32_t a, uint32_t next,
                            struct gl_err *err)
{
    const struct anode *n = &p->nodes[a];
    if (++re->work > re->work_limit) {
        gl_err_set(err, GL_E_LIMIT, "regex: pattern at byte %u expands past the compile budget",
                   n->off);
        return RE_NONE;
    }
    switch (n->kind) {
    case AN_SET:
        return nfa_set_cached(re, p, a, next, err);
    case AN_BEGIN:
    case AN_END: {
        uint32_t s = nfa_state(re, n->kind == AN_BEGIN ? NS_BEGIN : NS_END, err, n->off);
        if (s != RE_NONE)
            re->ns[s].out1 = next;
        return s;
    }
    case AN_LOOK:
        GL_ASSERT(n->max != LOOK_ELSEWHERE);
        // At the start it is a separate component (build_nfa); at the end of a search pattern
        // (?=X).* and X.* are the same language.
        return n->max == LOOK_AT_START ? next : nfa_compile(re, p, n->first, next, err);
    case AN_CAT:
        for (int32_t c = n->last; c >= 0 && next != RE_NONE; c = p->nodes[c].prev)
            next = nfa_compile(re, p, c, next, err);
        return next;
    case AN_ALT: {
        uint32_t s = RE_NONE;
        for (int32_t c = n->last; c >= 0; c = p->nodes[c].prev) {
            uint32_t e = nfa_compile(re, p, c, next, err);
            if (e == RE_NONE)
                return RE_NONE;
            s = s == RE_NONE ? e : nfa_split(re, e, s, err, n->off);
            if (s == RE_NONE)
                return RE_NONE;
        }
        return s == RE_NONE ? next : s;
    }
    case AN_REP: {
        uint32_t t = next;
        if (n->max < 0) {
            uint32_t loop = nfa_split(re, RE_NONE, next, err, n->off);
            if (loop == RE_NONE)
                return RE_NONE;
            uint32_t body = nfa_compile(re, p, n->first, loop, err);
            if (body == RE_NONE)
                return RE_NONE;
            re->ns[loop].out1 = body;
            t = loop;
        } else {
            // x{n,m} = x^n (x (x (...)?)?)? : m-n nested optional copies.
            for (int32_t k = 0; k < n->max - n->min; k++) {
                uint32_t body = nfa_compile(re, p, n->first, t, err);
                if (body == RE_NONE)
                    return RE_NONE;
                t = nfa_split(re, body, next, err, n->off);
                if (t == RE_NONE)
                    return RE_NONE;
            }
        }
        for (int32_t k = 0; k < n->min && t != RE_NONE; k++)
            t = nfa_compile(re, p, n->first, t, err);
        return t;
    }
    default:
        GL_ASSERT(0);
    }
    return RE_NONE;
}

// ---------------------------------------------------------------------------------------------
// Per-NFA-state facts: liveness + fewest code points to a match (dist), and reachability of a
// consuming cycle on an accepting path (inf). Both assume we are past offset 0 (^ blocked).

enum { RW_EPS, RW_LEAD, RW_CONT, RW_END };

static uint32_t edge_weight(const struct nedge *e)
{
    return e->lo >= 0x80 && e->hi <= 0xBF ? RW_CONT : RW_LEAD; // continuation: no new code point
}

// nfa_analyze's scratch, indexed by NFA state (n = re->n_ns) unless noted. Allocated in the order
// the phases need it and freed together at the end (nfa_scratch_free).
struct nfa_scratch {
    uint32_t n;
    uint8_t *end_live; // [n] MATCH reachable by eps, split and $ edges only
    // Reverse graph, CSR: the edges into state i come from radj[deg[i]..deg[i+1]), of kind rw[]
    // (RW_*, which the distance BFS reads as weights).
    uint32_t *deg;       // [n + 1]
    uint32_t tot;        // reverse edges
    uint32_t *radj, *rw; // [tot]
    uint32_t *dq;        // [dq_cap] worklist, then the 0/1-BFS deque
    size_t dq_cap;       // 2 tot + n + 2
    // Live forward graph, CSR: fadj[fdeg[i]..fdeg[i+1]) = target | consuming << 31.
    uint32_t *fdeg; // [n + 1]
    uint32_t *fadj; // [live edges]
    // Tarjan: DFS index and lowlink, SCC of each state, the SCC stack (stk, onst), the explicit
    // call stack (cs: state, cit: its next edge), and per SCC whether it reaches a consuming cycle.
    uint32_t *idx, *low, *comp, *stk, *cs, *cit; // [n]
    uint8_t *onst, *cinf;                        // [n]
};

static void nfa_scratch_free(struct nfa_scratch *s)
{
    gl_free(s->end_live);
    gl_free(s->deg);
    gl_free(s->radj);
    gl_free(s->rw);
    gl_free(s->dq);
    gl_free(s->idx);
    gl_free(s->low);
    gl_free(s->comp);
    gl_free(s->stk);
    gl_free(s->cs);
    gl_free(s->cit);
    gl_free(s->onst);
    gl_free(s->cinf);
    gl_free(s->fadj);
    gl_free(s->fdeg);
}

// The reverse graph (s->deg, radj, rw) and the deque it sizes (s->dq).
static gl_status an_reverse_graph(const struct gl_regex *re, struct nfa_scratch *s)
{
    uint32_t n = s->n, *deg = s->deg;
    for (uint32_t i = 0; i < n; i++) {
        const struct nstate *st = &re->ns[i];
        if (st->kind == NS_SPLIT) {
            deg[st->out1]++;
            deg[st->out2]++;
        } else if (st->kind == NS_EPS || st->kind == NS_END) {
            deg[st->out1]++;
        } else if (st->kind == NS_BYTES) {
            for (uint32_t e = st->edge; e != RE_NONE; e = re->ne[e].next)
                deg[re->ne[e].to]++;
        }
    }
    uint32_t tot = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t d = deg[i];
        deg[i] = tot;
        tot += d;
    }
    s->tot = tot;
    s->radj = gl_malloc((size_t)(tot ? tot : 1) * sizeof *s->radj);
    s->rw = gl_malloc((size_t)(tot ? tot : 1) * sizeof *s->rw);
    // A node is pushed at most once per relaxation: tot front pushes, tot + n back pushes.
    s->dq_cap = 2 * (size_t)tot + n + 2;
    s->dq = gl_malloc(s->dq_cap * sizeof *s->dq);
    if (!s->radj || !s->rw || !s->dq)
        return GL_E_NOMEM;
    uint32_t *fill = gl_malloc((size_t)(n ? n : 1) * sizeof *fill);
    if (!fill)
        return GL_E_NOMEM;
    memcpy(fill, deg, (size_t)n * sizeof *fill);
    uint32_t *radj = s->radj, *rw = s->rw;
    for (uint32_t i = 0; i < n; i++) {
        const struct nstate *st = &re->ns[i];
        if (st->kind == NS_SPLIT) {
            radj[fill[st->out1]] = i, rw[fill[st->out1]++] = RW_EPS;
            radj[fill[st->out2]] = i, rw[fill[st->out2]++] = RW_EPS;
        } else if (st->kind == NS_EPS || st->kind == NS_END) {
            radj[fill[st->out1]] = i;
            rw[fill[st->out1]++] = st->kind == NS_EPS ? RW_EPS : RW_END;
        } else if (st->kind == NS_BYTES) {
            for (uint32_t e = st->edge; e != RE_NONE; e = re->ne[e].next) {
                uint32_t t = re->ne[e].to;
                radj[fill[t]] = i;
                rw[fill[t]++] = edge_weight(&re->ne[e]);
            }
        }
    }
    gl_free(fill);
    return GL_OK;
}

// s->end_live: MATCH reachable by eps, split and $ edges only (what may follow a $). A backward
// search from the MATCH states, s->dq as its stack.
static void an_end_live(const struct gl_regex *re, struct nfa_scratch *s)
{
    size_t nq = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (re->ns[i].kind == NS_MATCH) {
            s->end_live[i] = 1;
            s->dq[nq++] = i;
        }
    while (nq > 0) {
        uint32_t u = s->dq[--nq];
        for (uint32_t k = s->deg[u]; k < s->deg[u + 1]; k++)
            if ((s->rw[k] == RW_EPS || s->rw[k] == RW_END) && !s->end_live[s->radj[k]]) {
                s->end_live[s->radj[k]] = 1;
                s->dq[nq++] = s->radj[k];
            }
    }
}

// re->dist[i]: the fewest code points from state i to a match (-1: dead), a 0/1 BFS over the
// reverse graph from MATCH and the $ states that end_live lets through. Lead bytes weigh 1,
// continuation bytes and eps 0; the deque s->dq starts in its middle (front pushes go down).
static gl_status an_dist(struct gl_regex *re, struct nfa_scratch *s)
{
    uint32_t n = s->n, *dq = s->dq, *deg = s->deg, *radj = s->radj, *rw = s->rw;
    for (uint32_t i = 0; i < n; i++)
        re->dist[i] = -1;
    size_t head = (size_t)s->tot + 1, tail = head, cap = s->dq_cap;
    for (uint32_t i = 0; i < n; i++) {
        const struct nstate *st = &re->ns[i];
        if (st->kind == NS_MATCH || (st->kind == NS_END && s->end_live[st->out1])) {
            re->dist[i] = 0;
            dq[tail++] = i;
        }
    }
    // Dijkstra with 0/1 weights: each pop settles; stale entries are skipped by value check.
    int32_t *best = re->dist;
    uint8_t *done = gl_calloc(n ? n : 1, 1);
    if (!done)
        return GL_E_NOMEM;
    while (head != tail) {
        uint32_t u = dq[head++];
        if (done[u])
            continue;
        done[u] = 1;
        for (uint32_t k = deg[u]; k < deg[u + 1]; k++) {
            uint32_t v = radj[k];
            if (rw[k] == RW_END)
                continue; // a $ is passed only at the end: END states are sources above
            int32_t nd = best[u] + (rw[k] == RW_LEAD);
            if (done[v] || (best[v] >= 0 && best[v] <= nd))
                continue;
            best[v] = nd;
            if (rw[k] != RW_LEAD) {
                GL_ASSERT(head > 0);
                dq[--head] = v;
            } else {
                GL_ASSERT(tail < cap);
                dq[tail++] = v;
            }
        }
    }
    gl_free(done);
    return GL_OK;
}

// The live forward graph (s->fdeg, s->fadj): the edges between states with dist >= 0, a byte
// edge marked consuming (bit 31).
static gl_status an_forward_graph(const struct gl_regex *re, struct nfa_scratch *s)
{
    uint32_t n = s->n;
    const int32_t *dist = re->dist;
    uint32_t *fdeg = s->fdeg = gl_calloc((size_t)n + 1, sizeof *s->fdeg);
    if (!fdeg)
        return GL_E_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const struct nstate *st = &re->ns[i];
        uint32_t c = 0;
        if (dist[i] >= 0) {
            if (st->kind == NS_SPLIT)
                c = (dist[st->out1] >= 0) + (dist[st->out2] >= 0);
            else if (st->kind == NS_EPS)
                c = dist[st->out1] >= 0;
            else if (st->kind == NS_BYTES)
                for (uint32_t e = st->edge; e != RE_NONE; e = re->ne[e].next)
                    c += dist[re->ne[e].to] >= 0;
        }
        fdeg[i] = c;
    }
    uint32_t tot = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t d = fdeg[i];
        fdeg[i] = tot;
        tot += d;
    }
    uint32_t *fadj = s->fadj = gl_malloc((size_t)(tot ? tot : 1) * sizeof *s->fadj);
    if (!fadj)
        return GL_E_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const struct nstate *st = &re->ns[i];
        uint32_t w = fdeg[i];
        if (dist[i] < 0)
            continue;
        if (st->kind == NS_SPLIT) {
            if (dist[st->out1] >= 0)
                fadj[w++] = st->out1;
            if (dist[st->out2] >= 0)
                fadj[w++] = st->out2;
        } else if (st->kind == NS_EPS) {
            if (dist[st->out1] >= 0)
                fadj[w++] = st->out1;
        } else if (st->kind == NS_BYTES) {
            for (uint32_t e = st->edge; e != RE_NONE; e = re->ne[e].next)
                if (dist[re->ne[e].to] >= 0)
                    fadj[w++] = re->ne[e].to | 0x80000000u;
        }
        GL_ASSERT(w == fdeg[i + 1]);
    }
    return GL_OK;
}

// Tarjan found SCC c rooted at u: pops it off s->stk (down to *nst) and sets s->cinf[c]: a
// consuming edge inside it (a cycle that reads), or an edge to an SCC already marked (every SCC
// it reaches completed before it).
static void an_scc_close(struct nfa_scratch *s, uint32_t u, uint32_t c, uint32_t *nst)
{
    uint32_t top = *nst, w;
    do {
        w = s->stk[--*nst];
        s->onst[w] = 0;
        s->comp[w] = c;
    } while (w != u);
    uint8_t f = 0;
    for (uint32_t k = *nst; k < top && !f; k++) {
        uint32_t x = s->stk[k];
        for (uint32_t j = s->fdeg[x]; j < s->fdeg[x + 1] && !f; j++) {
            uint32_t v = s->fadj[j] & 0x7FFFFFFFu;
            if (s->comp[v] == c && s->idx[v] != RE_NONE && !s->onst[v] && (s->fadj[j] >> 31))
                f = 1;
            else if (s->comp[v] != c && s->cinf[s->comp[v]])
                f = 1;
        }
    }
    s->cinf[c] = f;
}

// re->inf: Tarjan SCCs over the live forward graph (iterative, explicit call stack), each SCC's
// flag set as it completes (an_scc_close), then copied to its states.
static gl_status an_inf(struct gl_regex *re, struct nfa_scratch *s)
{
    uint32_t n = s->n;
    s->idx = gl_malloc((size_t)(n ? n : 1) * sizeof *s->idx);
    s->low = gl_malloc((size_t)(n ? n : 1) * sizeof *s->low);
    s->comp = gl_malloc((size_t)(n ? n : 1) * sizeof *s->comp);
    s->stk = gl_malloc((size_t)(n ? n : 1) * sizeof *s->stk);
    s->cs = gl_malloc((size_t)(n ? n : 1) * sizeof *s->cs);
    s->cit = gl_malloc((size_t)(n ? n : 1) * sizeof *s->cit);
    s->onst = gl_calloc(n ? n : 1, 1);
    s->cinf = gl_calloc(n ? n : 1, 1);
    if (!s->idx || !s->low || !s->comp || !s->stk || !s->cs || !s->cit || !s->onst || !s->cinf)
        return GL_E_NOMEM;
    uint32_t *idx = s->idx, *low = s->low, *cs = s->cs, *cit = s->cit, *fdeg = s->fdeg;
    for (uint32_t i = 0; i < n; i++)
        idx[i] = RE_NONE;
    uint32_t counter = 0, nst = 0, ncomp = 0;
    for (uint32_t root = 0; root < n; root++) {
        if (idx[root] != RE_NONE || re->dist[root] < 0)
            continue;
        uint32_t ncs = 0;
        cs[ncs] = root;
        cit[ncs++] = fdeg[root];
        idx[root] = low[root] = counter++;
        s->stk[nst++] = root;
        s->onst[root] = 1;
        while (ncs > 0) {
            uint32_t u = cs[ncs - 1];
            if (cit[ncs - 1] < fdeg[u + 1]) {
                uint32_t v = s->fadj[cit[ncs - 1]++] & 0x7FFFFFFFu;
                if (idx[v] == RE_NONE) {
                    idx[v] = low[v] = counter++;
                    s->stk[nst++] = v;
                    s->onst[v] = 1;
                    cs[ncs] = v;
                    cit[ncs++] = fdeg[v];
                } else if (s->onst[v] && idx[v] < low[u]) {
                    low[u] = idx[v];
                }
                continue;
            }
            ncs--;
            if (ncs > 0 && low[u] < low[cs[ncs - 1]])
                low[cs[ncs - 1]] = low[u];
            if (low[u] == idx[u])
                an_scc_close(s, u, ncomp++, &nst);
        }
    }
    for (uint32_t i = 0; i < n; i++)
        re->inf[i] = re->dist[i] >= 0 ? s->cinf[s->comp[i]] : 0;
    return GL_OK;
}

// Sets re->dist and re->inf for every NFA state: the reverse graph, then end_live, then dist by
// a 0/1 BFS, then inf over the live forward graph. GL_E_NOMEM (set in err) is the only failure.
static gl_status nfa_analyze(struct gl_regex *re, struct gl_err *err)
{
    uint32_t n = re->n_ns;
    gl_status st = GL_E_NOMEM;
    struct nfa_scratch s = {.n = n};
    s.end_live = gl_calloc(n ? n : 1, 1);
    s.deg = gl_calloc((size_t)n + 1, sizeof *s.deg);
    re->dist = gl_malloc((size_t)(n ? n : 1) * sizeof *re->dist);
    re->inf = gl_calloc(n ? n : 1, 1);
    if (s.end_live && s.deg && re->dist && re->inf && an_reverse_graph(re, &s) == GL_OK) {
        an_end_live(re, &s);
        if (an_dist(re, &s) == GL_OK && an_forward_graph(re, &s) == GL_OK)
            st = an_inf(re, &s);
    }
    if (st != GL_OK)
        gl_err_set(err, st, "regex: out of memory analysing the NFA");
    nfa_scratch_free(&s);
    return st;
}

// ---------------------------------------------------------------------------------------------
// Lazy DFA

static uint32_t set_hash(const uint32_t *m, uint32_t len, uint32_t accept)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)accept;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ m[i]) * 1099511628211ull;
    return (uint32_t)(h ^ h >> 32);
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int dfa_hash_grow(struct gl_regex *re)
{
    uint32_t cap = re->hash_cap ? re->hash_cap * 2 : 64;
    uint32_t *h = gl_malloc((size_t)cap * sizeof *h);
    if (!h)
        return 0;
    memset(h, 0xFF, (size_t)cap * sizeof *h);
    for (uint32_t s = 0; s < re->n_ds; s++) {
        const struct dstate *d = &re->ds[s];
        uint32_t k = set_hash(re->sets + d->off, d->len, d->amask) & (cap - 1);
        while (h[k] != RE_NONE)
            k = (k + 1) & (cap - 1);
        h[k] = s;
    }
    gl_free(re->hash);
    re->hash = h;
    re->hash_cap = cap;
    return 1;
}

// Returns the id of the DFA state for members m[0..len) (sorted, live) + accept mask, adding it
// if new; RE_NONE if the state budget or memory is exhausted.
static uint32_t dfa_intern(struct gl_regex *re, const uint32_t *m, uint32_t len, uint32_t amask)
{
    uint32_t h = set_hash(m, len, amask);
    if (re->hash_cap) {
        for (uint32_t k = h & (re->hash_cap - 1);; k = (k + 1) & (re->hash_cap - 1)) {
            uint32_t s = re->hash[k];
            if (s == RE_NONE)
                break;
            const struct dstate *d = &re->ds[s];
            if (d->len == len && d->amask == amask &&
                (len == 0 || memcmp(re->sets + d->off, m, (size_t)len * sizeof *m) == 0))
                return s;
        }
    }
    if (re->n_ds >= re->max_states)
        return RE_NONE;
    if ((uint64_t)(re->n_ds + 1) * 2 > re->hash_cap && !dfa_hash_grow(re))
        return RE_NONE;
    if (re->n_ds == re->cap_ds) {
        uint32_t cap = re->cap_ds ? re->cap_ds * 2 : 16;
        struct dstate *d = gl_realloc(re->ds, (size_t)cap * sizeof *d);
        if (!d)
            return RE_NONE;
        re->ds = d;
        uint32_t *t = gl_realloc(re->trans, (size_t)cap * re->ncls * sizeof *t);
        if (!t)
            return RE_NONE;
        re->trans = t;
        re->cap_ds = cap;
    }
    if (re->n_sets + len > re->cap_sets) {
        size_t cap = re->cap_sets ? re->cap_sets * 2 : 256;
        while (cap < re->n_sets + len)
            cap *= 2;
        uint32_t *s = gl_realloc(re->sets, cap * sizeof *s);
        if (!s)
            return RE_NONE;
        re->sets = s;
        re->cap_sets = cap;
    }
    uint32_t id = re->n_ds++;
    struct dstate *d = &re->ds[id];
    d->off = (uint32_t)re->n_sets;
    d->len = len;
    d->amask = amask;
    // With lookaheads these are provisional: product_finish() recomputes them on the DFA.
    d->accept = (amask & 1) && (amask & re->pos_mask) == re->pos_mask && !(amask & re->neg_mask);
    d->min_chars = d->accept ? 0 : -1;
    d->unbounded = 0;
    d->tag = 0;
    for (uint32_t i = 0; i < len; i++) {
        int32_t dc = re->dist[m[i]];
        GL_ASSERT(dc >= 0);
        if (d->min_chars < 0 || dc < d->min_chars)
            d->min_chars = dc;
        d->unbounded |= re->inf[m[i]];
    }
    if (len)
        memcpy(re->sets + re->n_sets, m, (size_t)len * sizeof *m);
    re->n_sets += len;
    for (uint32_t c = 0; c < re->ncls; c++)
        re->trans[(size_t)id * re->ncls + c] = RE_UNFILLED;
    uint32_t k = h & (re->hash_cap - 1);
    while (re->hash[k] != RE_NONE)
        k = (k + 1) & (re->hash_cap - 1);
    re->hash[k] = id;
    return id;
}

// Epsilon closure of the seeds on re->stack[0..n) (as state*2 + mode; mode 1 = past a $).
// Collects live byte states into re->members; returns the count and sets *accept.
static uint32_t dfa_closure(struct gl_regex *re, uint32_t n, int at_start, uint32_t *accept)
{
    uint32_t nm = 0;
    *accept = 0;
    re->gen++;
    if (re->gen == 0) { // wrapped: clear the marks once every 2^32 closures
        memset(re->mark_a, 0, (size_t)re->n_ns * sizeof *re->mark_a);
        memset(re->mark_b, 0, (size_t)re->n_ns * sizeof *re->mark_b);
        re->gen = 1;
    }
    uint32_t gen = re->gen;
    while (n > 0) {
        re->dfa_work++;
        uint32_t x = re->stack[--n];
        uint32_t u = x >> 1, past_end = x & 1;
        uint32_t *mark = past_end ? re->mark_b : re->mark_a;
        if (mark[u] == gen)
            continue;
        mark[u] = gen;
        const struct nstate *s = &re->ns[u];
        switch (s->kind) {
        case NS_BYTES:
            if (!past_end && re->dist[u] >= 0)
                re->members[nm++] = u;
            break;
        case NS_SPLIT:
            re->stack[n++] = s->out1 << 1 | past_end;
            re->stack[n++] = s->out2 << 1 | past_end;
            break;
        case NS_EPS:
            re->stack[n++] = s->out1 << 1 | past_end;
            break;
        case NS_BEGIN:
            if (at_start)
                re->stack[n++] = s->out1 << 1 | past_end;
            break;
        case NS_END:
            re->stack[n++] = s->out1 << 1 | 1;
            break;
        case NS_MATCH:
            *accept |= 1u << s->out1;
            break;
        default:
            GL_ASSERT(0);
        }
    }
    if (nm > 1)
        qsort(re->members, nm, sizeof *re->members, u32_cmp);
    return nm;
}

static uint32_t dfa_step_slow(struct gl_regex *re, uint32_t s, uint8_t b)
{
    GL_ASSERT(s < re->n_ds);
    uint32_t c = re->cls[b];
    if (re->dfa_work > re->dfa_work_limit) {
        re->overflow = 1;
        return GL_RE_DEAD;
    }
    // Seeds: targets of the edges on b (at most one per edge; see the stack's size).
    uint32_t n = 0;
    const struct dstate *d = &re->ds[s];
    for (uint32_t i = 0; i < d->len; i++) {
        uint32_t u = re->sets[d->off + i];
        for (uint32_t e = re->ns[u].edge; e != RE_NONE; e = re->ne[e].next, re->dfa_work++)
            if (b >= re->ne[e].lo && b <= re->ne[e].hi)
                re->stack[n++] = re->ne[e].to << 1;
    }
    uint32_t accept;
    uint32_t nm = dfa_closure(re, n, 0, &accept);
    uint32_t t = nm == 0 && !accept ? GL_RE_DEAD : dfa_intern(re, re->members, nm, accept);
    if (t == RE_NONE) {
        re->overflow = 1;
        return GL_RE_DEAD;
    }
    re->trans[(size_t)s * re->ncls + c] = t;
    return t;
}

uint32_t gl_regex_step(struct gl_regex *re, uint32_t state, uint8_t b)
{
    GL_ASSERT(state < re->n_ds);
    uint32_t t = re->trans[(size_t)state * re->ncls + re->cls[b]];
    if (GL_LIKELY(t != RE_UNFILLED))
        return t;
    return dfa_step_slow(re, state, b);
}

uint32_t gl_regex_step_mc(struct gl_regex *re, uint32_t state, uint8_t b, int32_t *min_chars)
{
    GL_ASSERT(state < re->n_ds);
    uint32_t t = re->trans[(size_t)state * re->ncls + re->cls[b]];
    if (GL_UNLIKELY(t == RE_UNFILLED))
        t = dfa_step_slow(re, state, b);
    *min_chars = re->ds[t].min_chars;
    return t;
}

uint32_t gl_regex_start(struct gl_regex *re)
{
    return re->start;
}

int gl_regex_is_accept(struct gl_regex *re, uint32_t state)
{
    GL_ASSERT(state < re->n_ds);
    return re->ds[state].accept;
}

int32_t gl_regex_min_chars(struct gl_regex *re, uint32_t state)
{
    GL_ASSERT(state < re->n_ds);
    return re->ds[state].min_chars;
}

int gl_regex_takes_any(const struct gl_regex *re, uint32_t state)
{
    GL_ASSERT(state < re->n_ds);
    const struct dstate *d = &re->ds[state];
    // Lookahead components decide acceptance jointly (amask): no shortcut there.
    if (re->n_look || state == GL_RE_DEAD || d->min_chars < 0)
        return 0;
    // A loop's byte-state in the set (members are sorted): every code point returns to the loop
    // (mid-character its continuation states are in the set), from which a match stays
    // reachable -- the pattern's remainder from the entry loop, the end at once from the tail.
    for (int k = 0; k < 2; k++) {
        uint32_t u = re->any_body[k];
        if (u == RE_NONE || re->dist[u] < 0)
            continue;
        const uint32_t *m = re->sets + d->off;
        uint32_t a = 0, b = d->len;
        while (a < b) {
            uint32_t mid = a + (b - a) / 2;
            if (m[mid] < u)
                a = mid + 1;
            else
                b = mid;
        }
        if (a < d->len && m[a] == u)
            return 1;
    }
    return 0;
}

void gl_regex_view(const struct gl_regex *re, struct gl_regex_view *v)
{
    _Static_assert(RE_UNFILLED == GL_RE_UNFILLED, "one marker");
    v->trans = re->trans;
    v->cls = re->cls;
    v->ncls = re->ncls;
}

int gl_regex_has_lookahead(const struct gl_regex *re)
{
    return re->n_look > 0;
}

uint8_t gl_regex_tag(const struct gl_regex *re, uint32_t state)
{
    GL_ASSERT(state < re->n_ds);
    return re->ds[state].tag;
}

void gl_regex_set_tag(struct gl_regex *re, uint32_t state, uint8_t tag)
{
    GL_ASSERT(state < re->n_ds);
    re->ds[state].tag = tag;
}

int gl_regex_unbounded(struct gl_regex *re, uint32_t state)
{
    GL_ASSERT(state < re->n_ds);
    return re->ds[state].unbounded;
}

const uint8_t *gl_regex_classes(const struct gl_regex *re, uint32_t *ncls, const uint8_t **rep)
{
    if (ncls)
        *ncls = re->ncls;
    if (rep)
        *rep = re->rep;
    return re->cls;
}

int gl_regex_room(const struct gl_regex *re, uint32_t n)
{
    return !re->overflow && (uint64_t)re->n_ds + n <= re->max_states / 2 &&
           re->dfa_work <= re->dfa_work_limit / 2;
}

int gl_regex_overflowed(const struct gl_regex *re)
{
    return re->overflow;
}

// Thompson simulation with the DFA's closure and no state budget: the answer when the DFA has
// overflowed. 0 if scratch memory is short (callers only lose a match they could not afford).
static int nfa_match(struct gl_regex *re, const uint8_t *s, size_t len)
{
    uint32_t *cur = gl_malloc(((size_t)re->n_ns + 1) * sizeof *cur);
    if (!cur)
        return 0;
    uint64_t work = re->dfa_work; // not DFA building: leave the budget as it was
    uint32_t accept;
    re->stack[0] = re->nfa_start << 1;
    uint32_t nm = dfa_closure(re, 1, 1, &accept);
    memcpy(cur, re->members, (size_t)nm * sizeof *cur);
    for (size_t i = 0; i < len && (nm > 0 || accept); i++) {
        uint32_t n = 0;
        for (uint32_t k = 0; k < nm; k++)
            for (uint32_t e = re->ns[cur[k]].edge; e != RE_NONE; e = re->ne[e].next)
                if (s[i] >= re->ne[e].lo && s[i] <= re->ne[e].hi)
                    re->stack[n++] = re->ne[e].to << 1;
        nm = dfa_closure(re, n, 0, &accept);
        memcpy(cur, re->members, (size_t)nm * sizeof *cur);
        if (nm == 0 && i + 1 < len)
            accept = 0;
    }
    gl_free(cur);
    re->dfa_work = work;
    return accept & 1;
}

int gl_regex_match(struct gl_regex *re, const void *s, size_t len)
{
    const uint8_t *p = s;
    uint32_t st = re->start;
    for (size_t i = 0; i < len && st != GL_RE_DEAD; i++)
        st = gl_regex_step(re, st, p[i]);
    if (st == GL_RE_DEAD && re->overflow && re->n_look == 0) // lookaheads: the DFA is complete
        return nfa_match(re, p, len);
    return re->ds[st].accept;
}

gl_status gl_regex_build_all(struct gl_regex *re, struct gl_err *err)
{
    for (uint32_t s = 0; s < re->n_ds; s++)
        for (uint32_t c = 0; c < re->ncls; c++) {
            gl_regex_step(re, s, re->rep[c]);
            if (re->overflow)
                return gl_err_set(err, GL_E_LIMIT,
                                  "regex: DFA needs more than %u states or %llu closure steps",
                                  re->max_states, (unsigned long long)re->dfa_work_limit);
        }
    return GL_OK;
}

void gl_regex_free(struct gl_regex *re)
{
    if (!re)
        return;
    gl_free(re->ns);
    gl_free(re->ne);
    gl_free(re->dist);
    gl_free(re->inf);
    gl_free(re->ds);
    gl_free(re->trans);
    gl_free(re->sets);
    gl_free(re->hash);
    gl_free(re->mark_a);
    gl_free(re->mark_b);
    gl_free(re->stack);
    gl_free(re->members);
    gl_free(re);
}

// ---------------------------------------------------------------------------------------------
// Compile

// Byte classes: a boundary at every edge's lo and hi + 1; bytes between boundaries share a class.
static void build_classes(struct gl_regex *re)
{
    uint8_t cut[257] = {0};
    for (uint32_t e = 0; e < re->n_ne; e++) {
        cut[re->ne[e].lo] = 1;
        cut[re->ne[e].hi + 1] = 1;
    }
    uint32_t c = 0;
    for (int b = 0; b < 256; b++) {
        if (b > 0 && cut[b])
            c++;
        re->cls[b] = (uint8_t)c;
        if (b == 0 || cut[b])
            re->rep[c] = (uint8_t)b;
    }
    re->ncls = c + 1;
}

// The search wrapper's `.*`: any valid UTF-8 code point, looping at loop.
static uint32_t nfa_any_loop(struct gl_regex *re, uint32_t exit, struct gl_err *err)
{
    uint32_t loop = nfa_split(re, RE_NONE, exit, err, 0);
    if (loop == RE_NONE)
        return RE_NONE;
    uint32_t body = nfa_set(re, CLS_ANY, 1, loop, err, 0);
    if (body == RE_NONE)
        return RE_NONE;
    re->ns[loop].out1 = body;
    return loop;
}

// Places each lookahead: leading ones (in the top-level sequence before anything that consumes,
// and after a ^ when searching, else they would apply at every start) and, when searching,
// trailing positive ones. Any other lookahead is GL_E_UNSUPPORTED.
static int p_place_looks(struct parser *p, int32_t root, int search)
{
    int seen_begin = !search, n_start = 0;
    const struct anode *r = &p->nodes[root];
    if (r->kind == AN_CAT) {
        for (int32_t c = r->first; c >= 0; c = p->nodes[c].next) {
            struct anode *a = &p->nodes[c];
            if (a->kind == AN_BEGIN) {
                seen_begin = 1;
            } else if (a->kind == AN_LOOK && seen_begin) {
                a->max = LOOK_AT_START;
                n_start++;
            } else {
                break;
            }
        }
        for (int32_t c = r->last; search && c >= 0; c = p->nodes[c].prev) {
            struct anode *a = &p->nodes[c];
            if (a->kind != AN_LOOK || a->min != 0 || a->max != LOOK_ELSEWHERE)
                break;
            a->max = LOOK_AT_END;
        }
    }
    for (size_t i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].kind == AN_LOOK && p->nodes[i].max == LOOK_ELSEWHERE)
            return p_fail(p, GL_E_UNSUPPORTED,
                          "lookahead at byte %u is not supported (only at the start of an "
                          "anchored pattern, or a positive one at the end of a search)",
                          p->nodes[i].off);
    if (n_start > RE_MAX_LOOK)
        return p_fail(p, GL_E_LIMIT, "more than %d lookaheads", RE_MAX_LOOK);
    return 0;
}

// Lookaheads make the DFA a product whose liveness is not a per-NFA-state fact: build it whole
// (within max_states), then compute dist (0-1 BFS backwards) and unbounded (peeling states
// whose live successors are all finite; what remains reaches a cycle) on the DFA itself, and
// send every transition into a state that cannot accept to the dead state.
static gl_status product_finish(struct gl_regex *re, struct gl_err *err)
{
    if (gl_regex_build_all(re, err) != GL_OK)
        return gl_err_set(err, GL_E_LIMIT, "regex: lookahead DFA needs more than %u states",
                          re->max_states);
    uint32_t n = re->n_ds, nc = re->ncls;
    uint64_t ne = (uint64_t)n * nc;
    if (ne > ((uint64_t)1 << 24))
        return gl_err_set(err, GL_E_LIMIT, "regex: lookahead DFA has %llu transitions",
                          (unsigned long long)ne);
    gl_status st = GL_E_NOMEM;
    uint32_t *deg = gl_calloc((size_t)n + 1, sizeof *deg);
    uint32_t *radj = gl_malloc((size_t)(ne ? ne : 1) * sizeof *radj);
    uint32_t *dq = gl_malloc((2 * (size_t)ne + n + 2) * sizeof *dq);
    uint32_t *outd = gl_calloc(n, sizeof *outd);
    int32_t *dist = gl_malloc((size_t)n * sizeof *dist);
    uint8_t *done = gl_calloc(n, 1);
    if (!deg || !radj || !dq || !outd || !dist || !done)
        goto out;
    for (uint64_t k = 0; k < ne; k++)
        deg[re->trans[k]]++;
    uint32_t tot = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t d = deg[i];
        deg[i] = tot;
        tot += d;
    }
    // radj holds source edges s * nc + c, grouped by target; outd is the fill cursor here.
    memcpy(outd, deg, (size_t)n * sizeof *outd);
    for (uint64_t k = 0; k < ne; k++)
        radj[outd[re->trans[k]]++] = (uint32_t)k;
    memset(outd, 0, (size_t)n * sizeof *outd);
    size_t head = ne + 1, tail = head;
    for (uint32_t s = 0; s < n; s++) {
        dist[s] = re->ds[s].accept ? 0 : -1;
        if (dist[s] == 0)
            dq[tail++] = s;
    }
    while (head != tail) {
        uint32_t u = dq[head++];
        if (done[u])
            continue;
        done[u] = 1;
        for (uint32_t k = deg[u]; k < deg[u + 1]; k++) {
            uint32_t s = radj[k] / nc, c = radj[k] % nc;
            int lead = (re->rep[c] & 0xC0) != 0x80;
            int32_t nd = dist[u] + lead;
            if (done[s] || (dist[s] >= 0 && dist[s] <= nd))
                continue;
            dist[s] = nd;
            if (lead)
                dq[tail++] = s;
            else
                dq[--head] = s;
        }
    }
    // Peel finite states: a live state whose live successors are all peeled is finite.
    size_t qn = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (dist[s] < 0)
            continue;
        for (uint32_t c = 0; c < nc; c++)
            outd[s] += dist[re->trans[(size_t)s * nc + c]] >= 0;
        if (outd[s] == 0)
            dq[qn++] = s;
    }
    for (size_t q = 0; q < qn; q++) {
        uint32_t u = dq[q];
        for (uint32_t k = deg[u]; k < deg[u + 1]; k++) {
            uint32_t s = radj[k] / nc;
            if (dist[s] >= 0 && --outd[s] == 0)
                dq[qn++] = s;
        }
    }
    for (uint32_t s = 0; s < n; s++) {
        re->ds[s].min_chars = dist[s];
        re->ds[s].unbounded = dist[s] >= 0 && outd[s] > 0;
    }
    for (uint64_t k = 0; k < ne; k++)
        if (dist[re->trans[k]] < 0)
            re->trans[k] = GL_RE_DEAD;
    if (dist[re->start] < 0)
        re->start = GL_RE_DEAD;
    st = GL_OK;
out:
    if (st != GL_OK)
        gl_err_set(err, st, "regex: out of memory finishing a lookahead DFA");
    gl_free(deg);
    gl_free(radj);
    gl_free(dq);
    gl_free(outd);
    gl_free(dist);
    gl_free(done);
    return st;
}

static gl_status build_nfa(struct gl_regex *re, const char *src, size_t len, int flags,
                           struct gl_err *err)
{
    uint32_t match = nfa_state(re, NS_MATCH, err, 0);
    if (match == RE_NONE)
        return err ? err->code : GL_E_LIMIT;
    re->ns[match].out1 = 0; // component 0: the pattern itself
    uint32_t tail = match;
    re->any_body[0] = re->any_body[1] = RE_NONE;
    if (flags & GL_RE_SEARCH && (tail = nfa_any_loop(re, match, err)) == RE_NONE)
        return err ? err->code : GL_E_LIMIT;
    if (flags & GL_RE_SEARCH)
        re->any_body[1] = re->ns[tail].out1;
    uint32_t entry;
    if (flags & GL_RE_LITERAL) {
        entry = tail;
        for (size_t i = len; i-- > 0 && entry != RE_NONE;) {
            uint32_t s = nfa_state(re, NS_BYTES, err, (uint32_t)i);
            uint8_t b = (uint8_t)src[i];
            if (s == RE_NONE || !nfa_edge(re, s, b, b, entry, err, (uint32_t)i))
                return err ? err->code : GL_E_LIMIT;
            entry = s;
        }
    } else {
        struct parser p = {.s = (const uint8_t *)src, .n = len, .err = err, .st = GL_OK};
        int32_t root = p_alt(&p);
        if (p.st == GL_OK && p.i < p.n)
            p_fail(&p, GL_E_FORMAT, "unmatched ')' at byte %zu", p.i);
        if (p.st == GL_OK)
            p_place_looks(&p, root, flags & GL_RE_SEARCH);
        if (p.st != GL_OK) {
            gl_free(p.nodes);
            gl_free(p.pool);
            return p.st;
        }
        p.setc = gl_calloc(p.n_nodes, sizeof *p.setc);
        entry = p.setc ? nfa_compile(re, &p, root, tail, err) : RE_NONE;
        if (!p.setc)
            gl_err_set(err, GL_E_NOMEM, "regex: out of memory");
        // Each leading lookahead X becomes component j: X.* ending in its own match state.
        for (size_t i = 0; i < p.n_nodes && entry != RE_NONE; i++) {
            const struct anode *a = &p.nodes[i];
            if (a->kind != AN_LOOK || a->max != LOOK_AT_START)
                continue;
            uint32_t j = ++re->n_look;
            uint32_t mj = nfa_state(re, NS_MATCH, err, a->off), lj = RE_NONE;
            if (mj != RE_NONE) {
                re->ns[mj].out1 = j;
                lj = nfa_any_loop(re, mj, err);
            }
            uint32_t ej = lj == RE_NONE ? RE_NONE : nfa_compile(re, &p, a->first, lj, err);
            if (ej == RE_NONE)
                entry = RE_NONE;
            re->look_entry[j] = ej;
            if (a->min)
                re->neg_mask |= 1u << j;
            else
                re->pos_mask |= 1u << j;
        }
        gl_free(p.setc);
        gl_free(p.nodes);
        gl_free(p.pool);
        if (entry == RE_NONE)
            return err ? err->code : GL_E_LIMIT;
    }
    if (flags & GL_RE_SEARCH && (entry = nfa_any_loop(re, entry, err)) == RE_NONE)
        return err ? err->code : GL_E_LIMIT;
    if (flags & GL_RE_SEARCH)
        re->any_body[0] = re->ns[entry].out1;
    re->nfa_start = entry;
    return GL_OK;
}

// GL_RE_NEGATE (regex.h). d[s]: fewest bytes from state s to a state the complement accepts (a
// live state the pattern does not accept, or the pattern's dead state), by relaxation to a fixed
// point; UINT32_MAX when none is reachable (every continuation matches: the complement's dead).
#define RE_NEG_WORK ((uint64_t)1 << 26) // state x class relaxations
static gl_status dfa_negate(struct gl_regex *re, struct gl_err *err)
{
    if (re->n_look)
        return gl_err_set(err, GL_E_UNSUPPORTED, "regex: a negated pattern with lookaheads");
    gl_status st = gl_regex_build_all(re, err);
    if (st != GL_OK)
        return st;
    uint32_t n = re->n_ds, nc = re->ncls, any = n;
    uint32_t *d = gl_malloc((size_t)n * sizeof *d);
    struct dstate *nds = gl_realloc(re->ds, ((size_t)n + 1) * sizeof *nds);
    if (nds)
        re->ds = nds;
    uint32_t *nt = nds ? gl_realloc(re->trans, ((size_t)n + 1) * nc * sizeof *nt) : NULL;
    if (nt)
        re->trans = nt;
    if (!d || !nds || !nt) {
        gl_free(d);
        return gl_err_set(err, GL_E_NOMEM, "regex: out of memory");
    }
    re->cap_ds = n + 1;
    for (uint32_t s = 0; s < n; s++)
        d[s] = s == GL_RE_DEAD || !re->ds[s].accept ? 0 : UINT32_MAX;
    uint64_t work = 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t s = 1; s < n; s++) {
            for (uint32_t c = 0; c < nc && d[s]; c++) {
                uint32_t t = d[re->trans[(size_t)s * nc + c]];
                if (t != UINT32_MAX && t + 1 < d[s]) {
                    d[s] = t + 1;
                    changed = 1;
                }
            }
            if ((work += nc) > RE_NEG_WORK) {
                gl_free(d);
                return gl_err_set(err, GL_E_LIMIT, "regex: negated DFA of %u states too costly", n);
            }
        }
    }
    for (uint32_t s = 1; s < n; s++) {
        for (uint32_t c = 0; c < nc; c++) {
            uint32_t *t = &re->trans[(size_t)s * nc + c];
            *t = *t == GL_RE_DEAD ? any : d[*t] == UINT32_MAX ? GL_RE_DEAD : *t;
        }
        struct dstate *ds = &re->ds[s];
        int live = d[s] != UINT32_MAX;
        ds->accept = live && d[s] == 0;
        ds->min_chars = live ? (int32_t)(d[s] > INT32_MAX ? INT32_MAX : d[s]) : -1;
        ds->unbounded = (uint8_t)live;
    }
    re->ds[any] = (struct dstate){.accept = 1, .min_chars = 0, .unbounded = 1};
    for (uint32_t c = 0; c < nc; c++)
        re->trans[(size_t)any * nc + c] = any;
    re->n_ds = n + 1;
    re->start = re->start == GL_RE_DEAD ? any : d[re->start] == UINT32_MAX ? GL_RE_DEAD : re->start;
    re->any_body[0] = re->any_body[1] = RE_NONE; // the pattern's loops say nothing here
    gl_free(d);
    return GL_OK;
}

gl_status gl_regex_compile(struct gl_regex **out, const char *src, size_t len, int flags,
                           int32_t max_states, struct gl_err *err)
{
    *out = NULL;
    if (!src && len)
        return gl_err_set(err, GL_E_INVAL, "regex: NULL source");
    if (len > (size_t)1 << 24)
        return gl_err_set(err, GL_E_LIMIT, "regex: pattern of %zu bytes is over 16 MiB", len);
    struct gl_regex *re = gl_calloc(1, sizeof *re);
    static _Atomic uint64_t next_serial = 1;
    if (re)
        re->serial = next_serial++;
    if (!re)
        return gl_err_set(err, GL_E_NOMEM, "regex: out of memory");
    struct gl_err local = {0};
    if (!err)
        err = &local;
    re->max_states = max_states > 0 ? (uint32_t)max_states : RE_DEFAULT_STATES;
    if (re->max_states < 2)
        re->max_states = 2;
    // The NFA (states + edges) may be 4x the DFA budget; compile work is bounded alike.
    uint64_t lim = (uint64_t)re->max_states * 4;
    re->nfa_limit = lim > 0x3FFFFFFFu ? 0x3FFFFFFFu : (uint32_t)lim;
    re->work_limit = (uint64_t)re->nfa_limit * 4;
    re->dfa_work_limit = (uint64_t)re->max_states * 1024; // 2^26 visits by default: ~0.2 s
    gl_status st = build_nfa(re, src, len, flags, err);
    if (st != GL_OK)
        goto fail;
    st = nfa_analyze(re, err);
    if (st != GL_OK)
        goto fail;
    build_classes(re);
    size_t nn = re->n_ns ? re->n_ns : 1;
    re->mark_a = gl_calloc(nn, sizeof *re->mark_a);
    re->mark_b = gl_calloc(nn, sizeof *re->mark_b);
    // Closure stack: seeds (<= edges) plus <= 2 pushes per state visit, 2 visits per state.
    re->stack = gl_malloc((4 * (size_t)re->n_ns + re->n_ne + 2) * sizeof *re->stack);
    re->members = gl_malloc(nn * sizeof *re->members);
    if (!re->mark_a || !re->mark_b || !re->stack || !re->members) {
        st = gl_err_set(err, GL_E_NOMEM, "regex: out of memory");
        goto fail;
    }
    // State 0 is the dead state: the empty set, never accepting, every byte back to itself.
    uint32_t dead = dfa_intern(re, NULL, 0, 0);
    GL_ASSERT(dead == GL_RE_DEAD);
    for (uint32_t c = 0; c < re->ncls; c++)
        re->trans[c] = GL_RE_DEAD;
    re->stack[0] = re->nfa_start << 1;
    for (uint32_t j = 1; j <= re->n_look; j++)
        re->stack[j] = re->look_entry[j] << 1;
    uint32_t accept;
    uint32_t nm = dfa_closure(re, 1 + re->n_look, 1, &accept);
    re->start = nm == 0 && !accept ? GL_RE_DEAD : dfa_intern(re, re->members, nm, accept);
    if (re->start == RE_NONE) {
        st = gl_err_set(err, GL_E_NOMEM, "regex: out of memory");
        goto fail;
    }
    if (re->n_look > 0 && (st = product_finish(re, err)) != GL_OK)
        goto fail;
    if ((flags & GL_RE_NEGATE) && (st = dfa_negate(re, err)) != GL_OK)
        goto fail;
    if (!(flags & GL_RE_NEGATE) && re->n_look == 0) {
        // build_nfa is deterministic in (source, flags): equal fingerprints, equal NFA numbering.
        uint64_t h0 = 0xcbf29ce484222325ull, h1 = 0x84222325cbf29ce4ull;
        const uint8_t *p = (const uint8_t *)src;
        for (size_t i = 0; i < len; i++) {
            h0 = (h0 ^ p[i]) * 0x100000001b3ull;
            h1 = (h1 + p[i] + 1) * 0x9E3779B97F4A7C15ull;
            h1 ^= h1 >> 29;
        }
        re->fp[0] = (h0 ^ (uint64_t)flags) * 0x100000001b3ull ^ (uint64_t)len;
        re->fp[1] = (h1 ^ (uint64_t)flags * 0xff51afd7ed558ccdull) + (uint64_t)len;
    }
    *out = re;
    return GL_OK;
fail:
    gl_regex_free(re);
    return st;
}

size_t gl_regex_escape(const void *lit, size_t len, char *out, size_t cap)
{
    static const char META[] = "\\^$.|?*+()[]{}/";
    const uint8_t *s = lit;
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        char tmp[8];
        int n;
        uint8_t c = s[i];
        if (c < 0x20 || c == 0x7F)
            n = snprintf(tmp, sizeof tmp, "\\x%02X", c);
        else if (c < 0x80 && strchr(META, c))
            n = snprintf(tmp, sizeof tmp, "\\%c", c);
        else
            tmp[0] = (char)c, n = 1;
        for (int k = 0; k < n; k++, w++)
            if (w + 1 < cap)
                out[w] = tmp[k];
    }
    if (cap)
        out[w < cap ? w : cap - 1] = '\0';
    return w;
}

uint64_t gl_regex_serial(const struct gl_regex *re)
{
    return re->serial;
}

int gl_regex_state_canon(const struct gl_regex *re, uint32_t state, uint64_t fp[2],
                         const uint32_t **set, uint32_t *n, uint32_t *amask)
{
    if ((!re->fp[0] && !re->fp[1]) || state >= re->n_ds)
        return 0;
    fp[0] = re->fp[0];
    fp[1] = re->fp[1];
    *set = re->sets + re->ds[state].off;
    *n = re->ds[state].len;
    *amask = re->ds[state].amask;
    return 1;
}
