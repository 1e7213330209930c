//! urgent-first, in Zig: a tenant `weight` plugin ordering a tenant's own
//! workloads: those labelled urgent=true first, then fewer GPUs, then
//! older. The same policy as examples/plugins/{rust,go,c,assemblyscript}
//! (examples/plugins/README.md has the formula); tests/plugin_languages.rs
//! checks they all score every workload identically.
//!
//!     zig build-exe -target wasm32-freestanding -fno-entry -O ReleaseSmall \
//!         --dep arbiter -Mroot=urgent_first.zig \
//!         -Marbiter=../../../plugin-sdk/zig/arbiter.zig -femit-bin=urgent-first.wasm

const std = @import("std");
const arbiter = @import("arbiter");

const max_gpus: u64 = (1 << 14) - 1; // more GPUs than this score as this many
const max_age: u64 = (1 << 32) - 1; // whole seconds; older scores as this old

/// Exact in an f64: urgent × 2^46 + (max_gpus − gpus) × 2^32 + age.
fn score(w: *const arbiter.Workload) f64 {
    const label = w.labels.map.get("urgent") orelse "";
    const urgent: u64 = @intFromBool(std.mem.eql(u8, label, "true"));
    const gpus: u64 = @intCast(std.math.clamp(w.gpus, 0, max_gpus));
    const age: u64 = if (w.ageSeconds >= max_age)
        max_age
    else if (w.ageSeconds > 0)
        @intFromFloat(@floor(w.ageSeconds))
    else
        0;
    return @floatFromInt(urgent << 46 | (max_gpus - gpus) << 32 | age);
}

fn weight(request: *const arbiter.WeightRequest) !arbiter.WeightResponse {
    const scores = try arbiter.allocator.alloc(f64, request.workloads.len);
    for (request.workloads, scores) |*w, *s| s.* = score(w);
    return .{ .scores = scores };
}

comptime {
    arbiter.exportWeight(weight);
    arbiter.exportWeightFields(&.{ "workloads.labels", "workloads.gpus", "workloads.ageSeconds" });
}

test "scores as the host sends them" {
    const request =
        \\{"workloads":[
        \\  {"labels":{"urgent":"true"},"gpus":8,"ageSeconds":10.9},
        \\  {"labels":{"urgent":"false"},"gpus":0,"ageSeconds":1e300},
        \\  {"gpus":-3,"ageSeconds":-1},
        \\  {"labels":{"\u0075rgent":"true","team":"ü"},"gpus":99999}
        \\],"now":5,"params":null}
    ;
    const out = arbiter.handle("arbiter_weight", arbiter.WeightRequest, weight, request);
    try std.testing.expectEqualStrings(
        \\{"scores":[140698833649674,70368744177663,70364449210368,70368744177664]}
    , out.?);
}
