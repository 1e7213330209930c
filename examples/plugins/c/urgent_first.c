/*
 * urgent-first, in C: a tenant `weight` plugin ordering a tenant's own
 * workloads: those labelled urgent=true first, then fewer GPUs, then
 * older. The same policy as examples/plugins/rust and examples/plugins/go
 * (examples/plugins/README.md has the formula); tests/plugin_languages.rs
 * checks the three score every workload identically.
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--strip-all \
 *         -I ../../../plugin-sdk/c -o urgent-first.wasm urgent_first.c
 */
#include "arbiter_plugin.h"

#define MAX_GPUS ((1 << 14) - 1)   /* more GPUs than this score as this many */
#define MAX_AGE 4294967295ll       /* whole seconds; older scores as this old */

/* Exact in a double: urgent × 2^46 + (MAX_GPUS − gpus) × 2^32 + age. */
static double score(const arbiter_workload *w, const arbiter_weight_request *req) {
    (void)req;
    arbiter_str urgent;
    int is_urgent = arbiter_read_str(arbiter_json_get(w->labels, "urgent"), &urgent) &&
                    arbiter_str_eq(urgent, "true");
    uint64_t gpus = (uint64_t)(w->gpus < 0 ? 0 : w->gpus > MAX_GPUS ? MAX_GPUS : w->gpus);
    uint64_t age = (uint64_t)arbiter_number_floor_clamp(w->age_seconds, 0, MAX_AGE);
    return (double)((uint64_t)is_urgent << 46 | (MAX_GPUS - gpus) << 32 | age);
}

ARBITER_EXPORT_WEIGHT(score)
ARBITER_WEIGHT_FIELDS(workloads.labels, workloads.gpus, workloads.ageSeconds)
