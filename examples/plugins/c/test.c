/* Host test of urgent_first.c and of the SDK's reader and writer:
 *   clang -Wall -Wextra -Werror -I ../../../plugin-sdk/c -o test test.c && ./test */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "urgent_first.c"

static int failures;

static void check(const char *request, const char *expected) {
    size_t n;
    const char *out = arbiter_call(arbiter_weight_handler, request, strlen(request), &n);
    char got[512] = "(error)";
    if (out) {
        memcpy(got, out, n < sizeof got - 1 ? n : sizeof got - 1);
        got[n < sizeof got - 1 ? n : sizeof got - 1] = 0;
    }
    if (strcmp(got, expected) != 0) {
        printf("FAIL %s\n  got      %s\n  expected %s\n", request, got, expected);
        failures++;
    }
}

static double score_of(double v, const arbiter_weight_request *req) {
    (void)req;
    return v;
}

static double doubles[] = {0.1, -2.5e-310, 1.7976931348623157e308, 123456.789, 5e-324, 1e21, 0.3};
static int which;
static double nth(const arbiter_workload *w, const arbiter_weight_request *req) {
    (void)w;
    return score_of(doubles[which++], req);
}
static int nth_handler(arbiter_json request, arbiter_out *out) {
    return arbiter_weight_scores(request, out, nth);
}

int main(void) {
    check("{\"workloads\": [], \"now\": 0}", "{\"scores\":[]}");
    check("{\"workloads\":["
          "{\"labels\":{\"urgent\":\"true\"},\"gpus\":8,\"ageSeconds\":10.9},"
          "{\"labels\":{\"urgent\":\"false\"},\"gpus\":0,\"ageSeconds\":1e300},"
          "{\"gpus\":-3,\"ageSeconds\":-1},"
          "{\"labels\":{\"\\u0075rgent\":\"true\",\"team\":\"\\u00fc\"},\"gpus\":99999}"
          "],\"now\":5,\"params\":null}",
          "{\"scores\":[140698833649674,70368744177663,70364449210368,70368744177664]}");
    check("{\"workloads\":[{\"ageSeconds\":4294967294.999999},{\"ageSeconds\":0.5e1},"
          "{\"ageSeconds\":12345678901234567890123}]}",
          "{\"scores\":[70368744177662,70364449210373,70368744177663]}");
    check("{\"workloads\":[{\"gpus\":1.5}]}", "(error)");
    check("{\"workloads\":{}}", "(error)");
    check("{\"workloads\":[{\"labels\":{\"urgent\":\"true\"}}", "(error)");
    check("not json", "(error)");
    /* Non-integral scores read back as the same double. */
    {
        size_t n;
        const char *req = "{\"workloads\":[{},{},{},{},{},{},{}]}";
        const char *out = arbiter_call(nth_handler, req, strlen(req), &n);
        char got[512];
        memcpy(got, out, n);
        got[n] = 0;
        const char *p = strchr(got, '[') + 1;
        for (int i = 0; i < 7; i++) {
            char *next;
            double v = strtod(p, &next);
            if (v != doubles[i]) {
                printf("FAIL double %d: %.17g written as %.*s\n", i, doubles[i], (int)(next - p), p);
                failures++;
            }
            p = next + 1;
        }
    }
    {
        size_t n;
        const char *fields = arbiter_weight_fields_json(&n);
        const char *want = "[\"workloads.labels\",\"workloads.gpus\",\"workloads.ageSeconds\"]";
        if (n != strlen(want) || memcmp(fields, want, n) != 0) {
            printf("FAIL fields: %.*s\n", (int)n, fields);
            failures++;
        }
    }
    /* Mutated requests never crash the reader (run it under
     * -fsanitize=address,undefined to see it never reads out of bounds). */
    {
        const char *seed = "{\"workloads\":[{\"labels\":{\"urgent\":\"true\",\"k\\u00e9\":"
                           "\"\\ud83d\\ude80\"},\"gpus\":8,\"ageSeconds\":10.9e2},{\"name\":\"a\\\"b\"},"
                           "{}],\"now\":5,\"params\":{\"a\":[1,{\"b\":null}]}}";
        static const char alphabet[] = "{}[]\",:\\u0123456789eE.-+tfnl ";
        size_t len = strlen(seed);
        unsigned long state = 1;
        for (int iteration = 0; iteration < 20000; iteration++) {
            char buf[256];
            size_t n = len;
            memcpy(buf, seed, len);
            for (int m = 0; m < 3; m++) {
                state = state * 6364136223846793005ul + 1442695040888963407ul;
                size_t at = (size_t)(state >> 33) % n;
                char c = alphabet[(state >> 20) % (sizeof alphabet - 1)];
                if ((state >> 40) % 2 || n >= sizeof buf - 1)
                    buf[at] = c;
                else {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = c;
                    n++;
                }
            }
            char *copy = malloc(n); /* exactly n bytes: a read past them is caught */
            memcpy(copy, buf, n);
            size_t out_len;
            arbiter__heap_top = 0;
            arbiter_call(arbiter_weight_handler, copy, n, &out_len);
            free(copy);
        }
    }
    if (failures == 0)
        printf("urgent_first.c: all tests passed\n");
    return failures != 0;
}
