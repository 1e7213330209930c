/*
 * arbiter_plugin.h — the C guest SDK for Arbiter policy plugins (plugin
 * ABI v1, plugin-sdk/ABI.md). Header-only and freestanding: no libc, no
 * imports but the optional `arbiter.log`. Build a plugin with Debian's
 * clang and lld:
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--strip-all \
 *         -I plugin-sdk/c -o plugin.wasm plugin.c
 *
 * Include it in one translation unit (it defines the module's exports:
 * `arbiter_abi_version`, `arbiter_alloc`, and the hooks its macros name).
 * The same source compiles natively (without the exports) for host tests:
 * arbiter_call() runs a handler on a request string.
 *
 * What it offers:
 *  - the request types, generated from plugin-sdk/schema into
 *    arbiter_views.h (arbiter_weight_request, arbiter_workload, ...), each
 *    with its defaults and a decoder (arbiter_decode_workload, ...);
 *  - a JSON reader over the request (spans, no copies): arbiter_json_get,
 *    arbiter_members_*, arbiter_elements_*, arbiter_str_eq, numbers;
 *  - a response writer (arbiter_out: arbiter_put_*), numbers written so
 *    they read back as the same double;
 *  - one-line exports: ARBITER_EXPORT_WEIGHT(score) scores each workload,
 *    ARBITER_WEIGHT_FIELDS(...) declares what it reads,
 *    ARBITER_EXPORT_HOOK(export_name, handler) exports any hook.
 *
 * Memory: a bump allocator over the heap that is never freed — every call
 * runs in a fresh instance. The host writes the request into a buffer from
 * arbiter_alloc; the response is the last allocation, grown in place while
 * it is written, and stays where the hook said until the instance ends.
 */
#ifndef ARBITER_PLUGIN_H
#define ARBITER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

/* ---- Spans ----------------------------------------------------------- */

/* A JSON value inside the request: [start, end). An empty span is an
 * absent member and reads as the member's default (null, {}, []). Spans
 * come from arbiter_json_parse, which validates the whole document once;
 * the iterators then skip values without validating them again (and
 * never read outside the span, whatever it holds). */
typedef struct {
    const char *start, *end;
} arbiter_json;

/* A JSON string token without its quotes, escapes not yet decoded. */
typedef struct {
    const char *start, *end;
} arbiter_str;

/* A JSON number: value is the nearest double when the text has at most 19
 * significant digits and |exponent| <= 22 (exact arithmetic), else within
 * a few units in the last place; text is the number as written (empty for
 * a default), for exact reads such as arbiter_number_floor_clamp. */
typedef struct {
    double value;
    arbiter_json text;
} arbiter_number;

/* Zeroes n bytes at p (a struct: aligned, a multiple of 4 bytes, as every
 * SDK struct is; any tail is zeroed byte by byte). */
__attribute__((no_builtin)) static inline void arbiter_zero(void *p, size_t n) {
    uint32_t *w = (uint32_t *)p;
    unsigned char *b;
    for (; n >= 4; n -= 4)
        *w++ = 0;
    for (b = (unsigned char *)w; n; n--)
        *b++ = 0;
}

#ifdef __wasm__
/* The compiler calls these for struct copies and initialisers; without a
 * libc the SDK provides them (weak: a libc's win). Byte loops through
 * volatile pointers, so they are not turned back into calls to themselves. */
__attribute__((weak)) void *memcpy(void *dst, const void *src, size_t n) {
    volatile unsigned char *d = (volatile unsigned char *)dst;
    const volatile unsigned char *s = (const volatile unsigned char *)src;
    while (n--)
        *d++ = *s++;
    return dst;
}

__attribute__((weak)) void *memmove(void *dst, const void *src, size_t n) {
    volatile unsigned char *d = (volatile unsigned char *)dst;
    const volatile unsigned char *s = (const volatile unsigned char *)src;
    if (d < s)
        while (n--)
            *d++ = *s++;
    else
        while (n--)
            d[n] = s[n];
    return dst;
}

__attribute__((weak)) void *memset(void *dst, int c, size_t n) {
    volatile unsigned char *d = (volatile unsigned char *)dst;
    while (n--)
        *d++ = (unsigned char)c;
    return dst;
}
#endif

/* ---- Reading JSON ---------------------------------------------------- */

#define ARBITER_MAX_DEPTH 128

static inline const char *arbiter__ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* After the string token at p (at its opening quote), or NULL. */
static inline const char *arbiter__skip_string(const char *p, const char *end) {
    if (p >= end || *p != '"')
        return NULL;
    for (p++; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        if (c == '\\') {
            if (++p >= end)
                return NULL;
        }
    }
    return NULL;
}

static inline int arbiter__digit(char c) { return c >= '0' && c <= '9'; }

static inline const char *arbiter__skip_number(const char *p, const char *end) {
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if (p < end && arbiter__digit(*p))
        while (p < end && arbiter__digit(*p))
            p++;
    else
        return NULL;
    if (p < end && *p == '.') {
        if (++p >= end || !arbiter__digit(*p))
            return NULL;
        while (p < end && arbiter__digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !arbiter__digit(*p))
            return NULL;
        while (p < end && arbiter__digit(*p))
            p++;
    }
    return p;
}

static inline const char *arbiter__skip_word(const char *p, const char *end, const char *word) {
    for (; *word; word++, p++)
        if (p >= end || *p != *word)
            return NULL;
    return p;
}

static const char *arbiter__skip_value(const char *p, const char *end, int depth);

/* p at '{' or '['; after the matching close, or NULL. */
static inline const char *arbiter__skip_container(const char *p, const char *end, int depth) {
    char close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    if (depth > ARBITER_MAX_DEPTH)
        return NULL;
    p = arbiter__ws(p + 1, end);
    if (p < end && *p == close)
        return p + 1;
    for (;;) {
        if (object) {
            p = arbiter__skip_string(p, end);
            if (!p)
                return NULL;
            p = arbiter__ws(p, end);
            if (p >= end || *p != ':')
                return NULL;
            p = arbiter__ws(p + 1, end);
        }
        p = arbiter__skip_value(p, end, depth + 1);
        if (!p)
            return NULL;
        p = arbiter__ws(p, end);
        if (p >= end)
            return NULL;
        if (*p == close)
            return p + 1;
        if (*p != ',')
            return NULL;
        p = arbiter__ws(p + 1, end);
    }
}

static const char *arbiter__skip_value(const char *p, const char *end, int depth) {
    if (p >= end)
        return NULL;
    switch (*p) {
    case '"':
        return arbiter__skip_string(p, end);
    case '{':
    case '[':
        return arbiter__skip_container(p, end, depth);
    case 't':
        return arbiter__skip_word(p, end, "true");
    case 'f':
        return arbiter__skip_word(p, end, "false");
    case 'n':
        return arbiter__skip_word(p, end, "null");
    default:
        return arbiter__skip_number(p, end);
    }
}

/* After the value at p, in a document arbiter_json_parse has validated:
 * only strings and brackets are tracked, so it is several times cheaper
 * than arbiter__skip_value. Never reads past end, whatever the bytes. */
static inline const char *arbiter__skip_valid(const char *p, const char *end) {
    int depth = 0;
    while (p < end) {
        char c = *p;
        if (c == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\')
                    p++;
            p++;
        } else if (c == '{' || c == '[') {
            depth++;
            p++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return p; /* the end of the enclosing container */
            depth--;
            p++;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
            return p;
        } else {
            p++;
        }
        if (depth == 0 && (c == '"' || c == '}' || c == ']'))
            return p < end ? p : end;
    }
    return end;
}

/* The whole document text as a span; empty when it is not one JSON value. */
static inline arbiter_json arbiter_json_parse(const char *text, size_t len) {
    const char *end = text + len;
    const char *p = arbiter__ws(text, end);
    const char *after = arbiter__skip_value(p, end, 0);
    arbiter_json none = {text, text};
    if (!after || arbiter__ws(after, end) != end)
        return none;
    arbiter_json v = {p, after};
    return v;
}

static inline int arbiter_json_is_null(arbiter_json v) {
    return v.start == v.end || (v.end - v.start == 4 && v.start[0] == 'n');
}

/* Iterates an object's members. An absent (empty) span is an empty object. */
typedef struct {
    const char *p, *end;
    int failed, first;
} arbiter_members;

static inline int arbiter_members_begin(arbiter_json obj, arbiter_members *it) {
    it->p = obj.start;
    it->end = obj.end;
    it->failed = 0;
    it->first = 1;
    if (obj.start == obj.end)
        return 1;
    if (*obj.start != '{') {
        it->failed = 1;
        return 0;
    }
    it->p = arbiter__ws(obj.start + 1, obj.end);
    return 1;
}

/* The next member: 1, or 0 at the end (it->failed set when malformed). */
static inline int arbiter_members_next(arbiter_members *it, arbiter_str *key, arbiter_json *value) {
    const char *p = it->p, *end = it->end, *after;
    if (it->failed || p >= end || *p == '}')
        return 0;
    if (!it->first) {
        if (*p != ',')
            goto bad;
        p = arbiter__ws(p + 1, end);
    }
    it->first = 0;
    after = arbiter__skip_string(p, end);
    if (!after)
        goto bad;
    key->start = p + 1;
    key->end = after - 1;
    p = arbiter__ws(after, end);
    if (p >= end || *p != ':')
        goto bad;
    p = arbiter__ws(p + 1, end);
    if (p >= end)
        goto bad;
    after = arbiter__skip_valid(p, end);
    value->start = p;
    value->end = after;
    it->p = arbiter__ws(after, end);
    return 1;
bad:
    it->failed = 1;
    return 0;
}

/* Iterates an array's elements. An absent (empty) span is an empty array. */
typedef arbiter_members arbiter_elements;

static inline int arbiter_elements_begin(arbiter_json array, arbiter_elements *it) {
    it->p = array.start;
    it->end = array.end;
    it->failed = 0;
    it->first = 1;
    if (array.start == array.end)
        return 1;
    if (*array.start != '[') {
        it->failed = 1;
        return 0;
    }
    it->p = arbiter__ws(array.start + 1, array.end);
    return 1;
}

static inline int arbiter_elements_next(arbiter_elements *it, arbiter_json *value) {
    const char *p = it->p, *end = it->end, *after;
    if (it->failed || p >= end || *p == ']')
        return 0;
    if (!it->first) {
        if (*p != ',')
            goto bad;
        p = arbiter__ws(p + 1, end);
    }
    it->first = 0;
    after = arbiter__skip_valid(p, end);
    value->start = p;
    value->end = after;
    it->p = arbiter__ws(after, end);
    return 1;
bad:
    it->failed = 1;
    return 0;
}

static inline int arbiter__hex4(const char *s, const char *end, unsigned long *out) {
    unsigned long v = 0;
    if (end - s < 4)
        return 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return 0;
        v = v * 16 + (unsigned long)d;
    }
    *out = v;
    return 1;
}

/* Decodes one character of a string span at *p into UTF-8 bytes out[0..n). */
static inline int arbiter__str_char(const char **p, const char *end, unsigned char out[4]) {
    const char *s = *p;
    unsigned long cp;
    if (*s != '\\') {
        out[0] = (unsigned char)*s;
        *p = s + 1;
        return 1;
    }
    if (s + 1 >= end)
        return 0;
    s++;
    switch (*s) {
    case 'b': out[0] = '\b'; break;
    case 'f': out[0] = '\f'; break;
    case 'n': out[0] = '\n'; break;
    case 'r': out[0] = '\r'; break;
    case 't': out[0] = '\t'; break;
    case 'u': {
        unsigned long hi, lo;
        if (!arbiter__hex4(s + 1, end, &hi))
            return 0;
        s += 4; /* at the last hex digit */
        cp = hi;
        if (hi >= 0xD800 && hi < 0xDC00) {
            if (end - s > 6 && s[1] == '\\' && s[2] == 'u' && arbiter__hex4(s + 3, end, &lo) &&
                lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            } else {
                cp = 0xFFFD;
            }
        } else if (hi >= 0xDC00 && hi < 0xE000) {
            cp = 0xFFFD;
        }
        *p = s + 1;
        if (cp < 0x80) {
            out[0] = (unsigned char)cp;
            return 1;
        }
        if (cp < 0x800) {
            out[0] = (unsigned char)(0xC0 | (cp >> 6));
            out[1] = (unsigned char)(0x80 | (cp & 0x3F));
            return 2;
        }
        if (cp < 0x10000) {
            out[0] = (unsigned char)(0xE0 | (cp >> 12));
            out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            out[2] = (unsigned char)(0x80 | (cp & 0x3F));
            return 3;
        }
        out[0] = (unsigned char)(0xF0 | (cp >> 18));
        out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (unsigned char)(0x80 | (cp & 0x3F));
        return 4;
    }
    default: out[0] = (unsigned char)*s; break; /* '"', '\\', '/' */
    }
    *p = s + 1;
    return 1;
}

/* Whether the string s, escapes decoded, is exactly the UTF-8 text lit. */
static inline int arbiter_str_eq(arbiter_str s, const char *lit) {
    const char *p = s.start;
    const unsigned char *l = (const unsigned char *)lit;
    while (p < s.end) {
        unsigned char buf[4];
        int n = arbiter__str_char(&p, s.end, buf);
        if (n == 0)
            return 0;
        for (int i = 0; i < n; i++, l++)
            if (*l == 0 || *l != buf[i])
                return 0;
    }
    return *l == 0;
}

/* Copies s, escapes decoded, into buf (NUL-terminated, truncated to fit);
 * returns the decoded length (which may exceed cap - 1). */
static inline size_t arbiter_str_copy(arbiter_str s, char *buf, size_t cap) {
    const char *p = s.start;
    size_t n = 0;
    while (p < s.end) {
        unsigned char c[4];
        int k = arbiter__str_char(&p, s.end, c);
        if (k == 0)
            break;
        for (int i = 0; i < k; i++, n++)
            if (n + 1 < cap)
                buf[n] = (char)c[i];
    }
    if (cap)
        buf[n < cap ? n : cap - 1] = 0;
    return n;
}

/* The member key of object obj; an empty span when absent or obj is not an object. */
static inline arbiter_json arbiter_json_get(arbiter_json obj, const char *key) {
    arbiter_members it;
    arbiter_str k;
    arbiter_json v, none = {obj.end, obj.end};
    if (!arbiter_members_begin(obj, &it))
        return none;
    while (arbiter_members_next(&it, &k, &v))
        if (arbiter_str_eq(k, key))
            return v;
    return none;
}

/* The member reads used by the generated decoders: 1 on success. */

static inline int arbiter_read_str(arbiter_json v, arbiter_str *out) {
    if (v.end - v.start < 2 || *v.start != '"')
        return 0;
    out->start = v.start + 1;
    out->end = v.end - 1;
    return 1;
}

static inline int arbiter_read_bool(arbiter_json v, int *out) {
    if (v.end - v.start == 4 && *v.start == 't') {
        *out = 1;
        return 1;
    }
    if (v.end - v.start == 5 && *v.start == 'f') {
        *out = 0;
        return 1;
    }
    return 0;
}

static inline int arbiter_read_json(arbiter_json v, char open, arbiter_json *out) {
    if (open && (v.start == v.end || *v.start != open))
        return 0;
    *out = v;
    return 1;
}

/* A number's parts: digits (the first 19 significant), the power of ten
 * they are scaled by, and whether digits were dropped. */
typedef struct {
    int negative, truncated;
    uint64_t digits;
    int64_t exp10;
} arbiter__decimal;

static inline int arbiter__decimal_of(arbiter_json v, arbiter__decimal *d) {
    const char *p = v.start, *end = v.end;
    int count = 0;
    if (v.start == v.end || arbiter__skip_number(p, end) != end)
        return 0;
    d->negative = *p == '-';
    if (d->negative)
        p++;
    d->digits = 0;
    d->exp10 = 0;
    d->truncated = 0;
    for (; p < end && arbiter__digit(*p); p++) {
        if (count < 19) {
            d->digits = d->digits * 10 + (uint64_t)(*p - '0');
            if (d->digits)
                count++;
        } else {
            d->exp10++;
            d->truncated |= *p != '0';
        }
    }
    if (p < end && *p == '.') {
        for (p++; p < end && arbiter__digit(*p); p++) {
            if (count < 19) {
                d->digits = d->digits * 10 + (uint64_t)(*p - '0');
                d->exp10--;
                if (d->digits)
                    count++;
            } else {
                d->truncated |= *p != '0';
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        int64_t e = 0;
        int neg = 0;
        p++;
        if (*p == '+' || *p == '-')
            neg = *p++ == '-';
        for (; p < end; p++)
            if (e < 100000)
                e = e * 10 + (*p - '0');
        d->exp10 += neg ? -e : e;
    }
    return 1;
}

static inline double arbiter__pow10(int64_t e) {
    static const double small[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double r = 1;
    int64_t n = e < 0 ? -e : e;
    while (n > 22) {
        r *= 1e22;
        n -= 22;
        if (r > 1e308)
            break;
    }
    r *= small[n > 22 ? 22 : n];
    return r;
}

static inline int arbiter_read_number(arbiter_json v, arbiter_number *out) {
    arbiter__decimal d;
    double value;
    if (!arbiter__decimal_of(v, &d))
        return 0;
    value = (double)d.digits;
    if (d.digits == 0 || d.exp10 < -400)
        value = 0;
    else if (d.exp10 > 400)
        value = __builtin_inf();
    else if (d.exp10 < 0) {
        /* Past 1e-308 divide in two steps so the divisor does not overflow. */
        if (d.exp10 < -300) {
            value /= arbiter__pow10(300);
            value /= arbiter__pow10(-d.exp10 - 300);
        } else {
            value /= arbiter__pow10(-d.exp10);
        }
    } else if (d.exp10 > 0)
        value *= arbiter__pow10(d.exp10);
    out->value = d.negative ? -value : value;
    out->text = v;
    return 1;
}

/* floor(n) clamped to [lo, hi], computed exactly from the number's text
 * (from its value when it has none). */
static inline int64_t arbiter_number_floor_clamp(arbiter_number n, int64_t lo, int64_t hi) {
    arbiter__decimal d;
    if (!arbiter__decimal_of(n.text, &d)) {
        double v = n.value;
        if (!(v >= (double)lo))
            return lo;
        if (v >= (double)hi)
            return hi;
        int64_t t = (int64_t)v;
        return (double)t > v ? t - 1 : t;
    }
    /* The integer part of digits × 10^exp10, and whether a fraction was cut. */
    uint64_t whole = d.digits;
    int fraction = d.truncated, over = 0;
    for (int64_t e = d.exp10; e < 0 && whole; e++) {
        fraction |= whole % 10 != 0;
        whole /= 10;
    }
    for (int64_t e = d.exp10; e > 0 && whole; e--) {
        if (whole > UINT64_MAX / 10) {
            over = 1;
            break;
        }
        whole *= 10;
    }
    if (d.negative) {
        if (over || whole > (uint64_t)INT64_MAX)
            return lo;
        int64_t v = -(int64_t)whole - (fraction ? 1 : 0);
        return v < lo ? lo : v > hi ? hi : v;
    }
    if (over || whole > (uint64_t)hi)
        return hi;
    return (int64_t)whole < lo ? lo : (int64_t)whole;
}

static inline int arbiter_read_int64(arbiter_json v, int64_t *out) {
    const char *p = v.start;
    int neg = 0;
    uint64_t n = 0;
    if (p < v.end && *p == '-')
        neg = 1, p++;
    if (p >= v.end)
        return 0;
    for (; p < v.end; p++) {
        if (!arbiter__digit(*p) || n > (UINT64_MAX - 9) / 10)
            return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    if (neg ? n > (uint64_t)INT64_MAX + 1 : n > (uint64_t)INT64_MAX)
        return 0;
    *out = neg ? (int64_t)(0 - n) : (int64_t)n;
    return 1;
}

static inline int arbiter_read_uint32(arbiter_json v, uint32_t *out) {
    int64_t n;
    if (!arbiter_read_int64(v, &n) || n < 0 || n > 0xFFFFFFFFll)
        return 0;
    *out = (uint32_t)n;
    return 1;
}

#include "arbiter_views.h"

/* ---- Memory ---------------------------------------------------------- */

#ifdef __wasm__
extern unsigned char __heap_base;
#else
#ifndef ARBITER_NATIVE_ARENA
#define ARBITER_NATIVE_ARENA (8u << 20)
#endif
static unsigned char arbiter__arena[ARBITER_NATIVE_ARENA];
#endif

static uintptr_t arbiter__heap_top;

/* Makes [start, end) usable memory: 1, or 0 when the memory cannot grow. */
static inline int arbiter__reserve(uintptr_t end) {
#ifdef __wasm__
    uintptr_t size = __builtin_wasm_memory_size(0) * 65536ul;
    if (end > size &&
        __builtin_wasm_memory_grow(0, (end - size + 65535) / 65536) == (uintptr_t)-1)
        return 0;
    return 1;
#else
    return end <= (uintptr_t)(arbiter__arena + ARBITER_NATIVE_ARENA);
#endif
}

static inline uintptr_t arbiter__top(void) {
    if (!arbiter__heap_top) {
#ifdef __wasm__
        arbiter__heap_top = (uintptr_t)&__heap_base;
#else
        arbiter__heap_top = (uintptr_t)arbiter__arena;
#endif
    }
    return (arbiter__heap_top + 7) & ~(uintptr_t)7;
}

/* len bytes, 8-aligned, never freed; NULL when memory is exhausted. */
static inline void *arbiter_alloc_bytes(size_t len) {
    uintptr_t start = arbiter__top(), end = start + len;
    if (end < start || !arbiter__reserve(end))
        return NULL;
    arbiter__heap_top = end;
    return (void *)start;
}

/* ---- Writing the response -------------------------------------------- */

/* A response being written at the top of the heap, grown in place. Do not
 * allocate while one is open. A write that cannot grow memory sets failed. */
typedef struct {
    char *start;
    size_t len;
    int failed;
} arbiter_out;

static inline void arbiter_out_begin(arbiter_out *o) {
    o->start = (char *)arbiter__top();
    o->len = 0;
    o->failed = 0;
}

static inline void arbiter_put_bytes(arbiter_out *o, const char *bytes, size_t n) {
    uintptr_t end = (uintptr_t)o->start + o->len + n;
    if (o->failed || !arbiter__reserve(end)) {
        o->failed = 1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        o->start[o->len + i] = bytes[i];
    o->len += n;
}

static inline void arbiter_put(arbiter_out *o, const char *text) {
    size_t n = 0;
    while (text[n])
        n++;
    arbiter_put_bytes(o, text, n);
}

static inline void arbiter_put_char(arbiter_out *o, char c) { arbiter_put_bytes(o, &c, 1); }

static inline void arbiter_put_int64(arbiter_out *o, int64_t v) {
    char buf[24];
    int i = 24;
    uint64_t n = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        buf[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    if (v < 0)
        buf[--i] = '-';
    arbiter_put_bytes(o, buf + i, (size_t)(24 - i));
}

/* Writes v as a JSON string (UTF-8 copied as is, quotes, backslashes and
 * control characters escaped). */
static inline void arbiter_put_string(arbiter_out *o, const char *v, size_t n) {
    static const char hex[] = "0123456789abcdef";
    arbiter_put_char(o, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            arbiter_put_bytes(o, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            arbiter_put_bytes(o, e, 6);
        } else {
            arbiter_put_char(o, (char)c);
        }
    }
    arbiter_put_char(o, '"');
}

/* Writes v so that it reads back as exactly v: integers below 2^53 as
 * integers, others as 17 significant digits rounded from v's exact
 * decimal expansion. NaN and infinities, which JSON cannot hold, are
 * written as null (the host refuses them as a bad output). */
static inline void arbiter_put_double(arbiter_out *o, double v) {
    union {
        double d;
        uint64_t u;
    } bits = {v};
    static uint32_t limbs[140];       /* base 1e9, least significant first */
    static char digits[140 * 9 + 20]; /* the exact decimal digits */
    int n = 0, count = 0, point;
    uint64_t mantissa, frac = bits.u & ((1ull << 52) - 1);
    int binexp = (int)((bits.u >> 52) & 0x7FF), e;
    if (binexp == 0x7FF) {
        arbiter_put(o, "null");
        return;
    }
    if (v == 0) {
        arbiter_put_char(o, '0');
        return;
    }
    if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v) {
        arbiter_put_int64(o, (int64_t)v);
        return;
    }
    if (bits.u >> 63)
        arbiter_put_char(o, '-');
    mantissa = binexp ? frac | (1ull << 52) : frac;
    e = binexp ? binexp - 1075 : -1074;
    while (mantissa) {
        limbs[n++] = (uint32_t)(mantissa % 1000000000u);
        mantissa /= 1000000000u;
    }
    /* v = mantissa × 2^e = mantissa × 5^-e / 10^-e when e < 0. */
    for (int left = e > 0 ? e : -e; left > 0;) {
        int step = e > 0 ? (left < 29 ? left : 29) : (left < 12 ? left : 12);
        uint64_t factor = 1, carry = 0;
        for (int i = 0; i < step; i++)
            factor *= e > 0 ? 2 : 5;
        for (int i = 0; i < n; i++) {
            uint64_t x = (uint64_t)limbs[i] * factor + carry;
            limbs[i] = (uint32_t)(x % 1000000000u);
            carry = x / 1000000000u;
        }
        while (carry) {
            limbs[n++] = (uint32_t)(carry % 1000000000u);
            carry /= 1000000000u;
        }
        left -= step;
    }
    for (int i = n - 1; i >= 0; i--) {
        char chunk[9];
        uint32_t x = limbs[i];
        for (int k = 8; k >= 0; k--, x /= 10)
            chunk[k] = (char)('0' + x % 10);
        for (int k = 0; k < 9; k++)
            if (count || chunk[k] != '0' || (i == 0 && k == 8))
                digits[count++] = chunk[k];
    }
    point = e > 0 ? count : count + e; /* digits before the decimal point */
    /* Round to 17 significant digits, half to even. */
    if (count > 17) {
        int up = digits[17] > '5';
        if (digits[17] == '5') {
            int rest = 0;
            for (int i = 18; i < count; i++)
                rest |= digits[i] != '0';
            up = rest || ((digits[16] - '0') & 1);
        }
        count = 17;
        for (int i = 16; up && i >= 0; i--) {
            if (digits[i] == '9') {
                digits[i] = '0';
            } else {
                digits[i]++;
                up = 0;
            }
        }
        if (up) {
            digits[0] = '1';
            for (int i = 1; i < 17; i++)
                digits[i] = '0';
            point++;
        }
    }
    while (count > 1 && digits[count - 1] == '0')
        count--;
    arbiter_put_char(o, digits[0]);
    if (count > 1) {
        arbiter_put_char(o, '.');
        arbiter_put_bytes(o, digits + 1, (size_t)(count - 1));
    }
    if (point - 1 != 0) {
        arbiter_put_char(o, 'e');
        arbiter_put_int64(o, point - 1);
    }
}

/* ---- Logging --------------------------------------------------------- */

enum { ARBITER_ERROR = 0, ARBITER_WARN = 1, ARBITER_INFO = 2, ARBITER_DEBUG = 3 };

#ifdef __wasm__
__attribute__((import_module("arbiter"), import_name("log"))) void
arbiter__host_log(int level, const char *ptr, int len);
#endif

/* A line for the decision log (the host keeps 64 lines, 4 KiB per call). */
static inline void arbiter_log(int level, const char *message) {
#ifdef __wasm__
    int n = 0;
    while (message[n])
        n++;
    arbiter__host_log(level, message, n);
#else
    (void)level;
    (void)message;
#endif
}

/* ---- Hooks ----------------------------------------------------------- */

/* A hook handler: reads request, writes the response JSON to out; returns
 * 1, or 0 to fail the call (the host sees an empty, bad output and the
 * policy's failurePolicy decides). */
typedef int (*arbiter_handler)(arbiter_json request, arbiter_out *out);

/* Runs handler on request text[0..len): the response, and its length in *len_out; NULL on failure. */
static inline const char *arbiter_call(arbiter_handler handler, const char *text, size_t len,
                                       size_t *len_out) {
    arbiter_json request = arbiter_json_parse(text, len);
    arbiter_out out;
    *len_out = 0;
    if (request.start == request.end)
        return NULL;
    arbiter_out_begin(&out);
    if (!handler(request, &out) || out.failed)
        return NULL;
    arbiter__heap_top = (uintptr_t)out.start + out.len;
    *len_out = out.len;
    return out.start;
}

#ifdef __wasm__
__attribute__((export_name("arbiter_abi_version"))) int arbiter_abi_version(void) { return 1; }

__attribute__((export_name("arbiter_alloc"))) int arbiter_alloc(int len) {
    return len < 0 ? 0 : (int)(uintptr_t)arbiter_alloc_bytes((size_t)len);
}

static inline long long arbiter__serve(arbiter_handler handler, int ptr, int len) {
    size_t n;
    const char *out = arbiter_call(handler, (const char *)(uintptr_t)ptr, (size_t)len, &n);
    if (!out)
        return 0;
    return (long long)(((unsigned long long)(uintptr_t)out << 32) | n);
}

/* Exports handler (an arbiter_handler) as the hook function export_name,
 * e.g. ARBITER_EXPORT_HOOK(arbiter_admission, admit). */
#define ARBITER_EXPORT_HOOK(name, handler)                                                     \
    __attribute__((export_name(#name))) long long name(int ptr, int len) {                     \
        return arbiter__serve(handler, ptr, len);                                              \
    }
#else
#define ARBITER_EXPORT_HOOK(name, handler)
#endif

/* Decodes a weight request and writes {"scores":[...]}: score(workload,
 * request) for every workload, in order. */
typedef double (*arbiter_score_fn)(const arbiter_workload *w, const arbiter_weight_request *req);

static inline int arbiter_weight_scores(arbiter_json request, arbiter_out *out,
                                        arbiter_score_fn score) {
    arbiter_weight_request req;
    arbiter_elements it;
    arbiter_json element;
    int first = 1;
    if (!arbiter_decode_weight_request(request, &req) || !arbiter_elements_begin(req.workloads, &it))
        return 0;
    arbiter_put(out, "{\"scores\":[");
    while (arbiter_elements_next(&it, &element)) {
        arbiter_workload w;
        if (!arbiter_decode_workload(element, &w))
            return 0;
        if (!first)
            arbiter_put_char(out, ',');
        first = 0;
        arbiter_put_double(out, score(&w, &req));
    }
    if (it.failed)
        return 0;
    arbiter_put(out, "]}");
    return 1;
}

/* One line: the module's weight hook scores each workload with score (an
 * arbiter_score_fn). Also defines arbiter_weight_handler, for host tests. */
#define ARBITER_EXPORT_WEIGHT(score)                                                           \
    static int arbiter_weight_handler(arbiter_json request, arbiter_out *out) {                \
        return arbiter_weight_scores(request, out, score);                                     \
    }                                                                                          \
    ARBITER_EXPORT_HOOK(arbiter_weight, arbiter_weight_handler)

/* The JSON list for arbiter_weight_fields from "a, b, c". */
static inline const char *arbiter__fields_json(const char *names, size_t *len_out) {
    arbiter_out out;
    int first = 1;
    arbiter_out_begin(&out);
    arbiter_put_char(&out, '[');
    for (const char *p = names; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *start = p;
        while (*p && *p != ' ' && *p != ',')
            p++;
        if (p == start)
            break;
        if (!first)
            arbiter_put_char(&out, ',');
        first = 0;
        arbiter_put_string(&out, start, (size_t)(p - start));
    }
    arbiter_put_char(&out, ']');
    if (out.failed)
        return NULL;
    arbiter__heap_top = (uintptr_t)out.start + out.len;
    *len_out = out.len;
    return out.start;
}

/* One line: declares the weight request fields the plugin reads
 * (plugin-sdk/ABI.md "Lean weight requests"), unquoted:
 * ARBITER_WEIGHT_FIELDS(workloads.labels, workloads.gpus). The host
 * refuses the module at load if a name is unknown. */
#ifdef __wasm__
#define ARBITER_WEIGHT_FIELDS(...)                                                             \
    __attribute__((export_name("arbiter_weight_fields"))) long long arbiter_weight_fields(void) { \
        size_t n;                                                                              \
        const char *out = arbiter__fields_json(#__VA_ARGS__, &n);                              \
        return out ? (long long)(((unsigned long long)(uintptr_t)out << 32) | n) : 0;          \
    }
#else
#define ARBITER_WEIGHT_FIELDS(...)                                                             \
    static const char *arbiter_weight_fields_json(size_t *n) {                                 \
        return arbiter__fields_json(#__VA_ARGS__, n);                                          \
    }
#endif

#endif /* ARBITER_PLUGIN_H */
