/*
 * A hostile tenant weight plugin in C, for tests/plugin_languages.rs: its
 * policy's `config.mode` picks the misbehaviour — `loop` spins forever,
 * `bomb` allocates until memory runs out and then aborts (as a libc
 * malloc failure would), `bad` answers scores that are not a list, `short`
 * one score too few, `fail` logs an error and fails the call; anything else
 * scores every workload 1. Built by
 * scripts/build-plugins.sh.
 */
#include "arbiter_plugin.h"

static volatile unsigned long spins;

static int misbehave(arbiter_json request, arbiter_out *out) {
    arbiter_weight_request req;
    arbiter_elements it;
    arbiter_json element;
    arbiter_str mode = {0, 0};
    int n = 0;
    if (!arbiter_decode_weight_request(request, &req))
        return 0;
    arbiter_read_str(arbiter_json_get(req.params, "mode"), &mode);
    if (arbiter_str_eq(mode, "loop"))
        for (;;)
            spins++;
    if (arbiter_str_eq(mode, "bomb")) {
        for (;;) {
            volatile char *chunk = arbiter_alloc_bytes(1 << 20);
            if (!chunk)
                __builtin_trap();
            chunk[0] = 1;
        }
    }
    if (arbiter_str_eq(mode, "bad")) {
        arbiter_put(out, "{\"scores\":\"not a list\"}");
        return 1;
    }
    if (arbiter_str_eq(mode, "fail")) {
        arbiter_log(ARBITER_ERROR, "hostile: failing on purpose");
        return 0;
    }
    arbiter_elements_begin(req.workloads, &it);
    while (arbiter_elements_next(&it, &element))
        n++;
    if (arbiter_str_eq(mode, "short"))
        n--;
    arbiter_put(out, "{\"scores\":[");
    for (int i = 0; i < n; i++)
        arbiter_put(out, i ? ",1" : "1");
    arbiter_put(out, "]}");
    return 1;
}

ARBITER_EXPORT_HOOK(arbiter_weight, misbehave)
