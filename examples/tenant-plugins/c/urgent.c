/*
 * urgent-first: a tenant `weight` plugin in C (plugin ABI v1,
 * plugin-sdk/ABI.md). A workload labelled `urgent=true` scores 1, any other
 * 0, so within the tenant's own queue positions its urgent workloads go
 * first and the rest keep their order.
 *
 * Freestanding: no libc, no imports. Memory is a bump allocator over the
 * heap, never freed (every call runs in a fresh instance).
 *
 * The JSON handling is a small skipping scanner, not a full parser: it walks
 * the request's top-level `workloads` array and, in each workload, the
 * direct `labels` object, comparing keys and values byte for byte. So a key
 * or value written with escapes (`"\u0075rgent"`) does not match; the host
 * never escapes plain ASCII. Malformed JSON fails the call (empty
 * response), which the host rejects as bad output.
 */

/* ---- JSON scanning: each function returns the position after what it
 * read, or 0 on malformed input. */

static const char *end_of_input;

static const char *skip_ws(const char *p) {
    while (p < end_of_input && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* p at the opening quote; returns after the closing one. */
static const char *skip_string(const char *p) {
    if (p >= end_of_input || *p != '"')
        return 0;
    for (p++; p < end_of_input; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return 0;
}

static const char *skip_value(const char *p, int depth);

/* p at `open`; skips a whole `{...}` or `[...]`. */
static const char *skip_container(const char *p, char open, char close, int depth) {
    if (depth > 64 || p >= end_of_input || *p != open)
        return 0;
    p = skip_ws(p + 1);
    if (p < end_of_input && *p == close)
        return p + 1;
    for (;;) {
        if (open == '{') {
            p = skip_string(p);
            if (!p)
                return 0;
            p = skip_ws(p);
            if (p >= end_of_input || *p != ':')
                return 0;
            p = skip_ws(p + 1);
        }
        p = skip_value(p, depth + 1);
        if (!p)
            return 0;
        p = skip_ws(p);
        if (p >= end_of_input)
            return 0;
        if (*p == close)
            return p + 1;
        if (*p != ',')
            return 0;
        p = skip_ws(p + 1);
    }
}

static const char *skip_value(const char *p, int depth) {
    p = skip_ws(p);
    if (p >= end_of_input)
        return 0;
    switch (*p) {
    case '"':
        return skip_string(p);
    case '{':
        return skip_container(p, '{', '}', depth);
    case '[':
        return skip_container(p, '[', ']', depth);
    default: {
        /* number, true, false, null */
        const char *start = p;
        while (p < end_of_input && *p != ',' && *p != '}' && *p != ']' && *p != ' ' &&
               *p != '\t' && *p != '\n' && *p != '\r')
            p++;
        return p > start ? p : 0;
    }
    }
}

/* Whether the JSON string token at p (quotes included) is exactly `text`. */
static int string_is(const char *p, const char *text) {
    const char *end = skip_string(p);
    if (!end)
        return 0;
    for (p++; p < end - 1; p++, text++)
        if (*text == 0 || *p != *text)
            return 0;
    return *text == 0;
}

/* p at an object; on return *value is the position of the member `key`'s
 * value (0 when absent). Returns after the object, or 0 when malformed. */
static const char *find_member(const char *p, const char *key, const char **value) {
    *value = 0;
    if (p >= end_of_input || *p != '{')
        return 0;
    p = skip_ws(p + 1);
    if (p < end_of_input && *p == '}')
        return p + 1;
    for (;;) {
        const char *name = p;
        p = skip_string(p);
        if (!p)
            return 0;
        p = skip_ws(p);
        if (p >= end_of_input || *p != ':')
            return 0;
        p = skip_ws(p + 1);
        if (string_is(name, key))
            *value = p;
        p = skip_value(p, 1);
        if (!p)
            return 0;
        p = skip_ws(p);
        if (p >= end_of_input)
            return 0;
        if (*p == '}')
            return p + 1;
        if (*p != ',')
            return 0;
        p = skip_ws(p + 1);
    }
}

/* Scores the request in[0..len) into out (capacity cap): the response JSON.
 * Returns its length, or -1 when the request is malformed or out too small. */
static long weight(const char *in, long len, char *out, long cap) {
    const char *workloads, *p;
    long n = 0;
    end_of_input = in + len;
    if (!find_member(skip_ws(in), "workloads", &workloads) || !workloads ||
        *workloads != '[')
        return -1;
    const char prefix[] = "{\"scores\":[";
    for (unsigned long i = 0; i + 1 < sizeof prefix; i++) {
        if (n >= cap)
            return -1;
        out[n++] = prefix[i];
    }
    p = skip_ws(workloads + 1);
    int first = 1;
    while (p < end_of_input && *p != ']') {
        const char *labels, *urgent = 0;
        if (!first) {
            if (*p != ',')
                return -1;
            p = skip_ws(p + 1);
        }
        first = 0;
        p = find_member(p, "labels", &labels);
        if (!p)
            return -1;
        if (labels && *labels == '{' && !find_member(labels, "urgent", &urgent))
            return -1;
        if (n + 2 > cap)
            return -1;
        if (n > (long)sizeof prefix - 1)
            out[n++] = ',';
        out[n++] = urgent && string_is(urgent, "true") ? '1' : '0';
        p = skip_ws(p);
    }
    if (p >= end_of_input || n + 2 > cap)
        return -1;
    out[n++] = ']';
    out[n++] = '}';
    return n;
}

/* ---- ABI v1 exports (wasm only; the host test includes this file). */
#ifdef __wasm__

extern unsigned char __heap_base;
static unsigned long heap_top;

static void *allocate(unsigned long len) {
    if (!heap_top)
        heap_top = (unsigned long)&__heap_base;
    unsigned long start = (heap_top + 7) & ~7ul, end = start + len;
    unsigned long size = __builtin_wasm_memory_size(0) * 65536ul;
    if (end > size &&
        __builtin_wasm_memory_grow(0, (end - size + 65535) / 65536) == (unsigned long)-1)
        return 0;
    heap_top = end;
    return (void *)start;
}

__attribute__((export_name("arbiter_abi_version"))) int arbiter_abi_version(void) {
    return 1;
}

__attribute__((export_name("arbiter_alloc"))) int arbiter_alloc(int len) {
    return len < 0 ? 0 : (int)(unsigned long)allocate((unsigned long)len);
}

__attribute__((export_name("arbiter_weight"))) long long arbiter_weight(int ptr, int len) {
    if (len <= 0 || ptr == 0)
        return 0;
    /* At most two bytes per workload, and a workload takes at least two
     * bytes (`{}`) of the request. */
    long cap = len + 16;
    char *out = allocate((unsigned long)cap);
    if (!out)
        return 0;
    long n = weight((const char *)(unsigned long)ptr, len, out, cap);
    if (n < 0)
        return 0;
    return (long long)(((unsigned long long)(unsigned long)out << 32) | (unsigned long long)n);
}

#endif
