//! The SDK's tests, run natively (`zig test test.zig`): each hook's
//! request decoded as the host writes it (defaults, escapes, unknown
//! members, numbers), its response encoded, and failures failing the call.

const std = @import("std");
const arbiter = @import("arbiter.zig");
const testing = std.testing;

fn ages(request: *const arbiter.WeightRequest) !arbiter.WeightResponse {
    if (request.params == .object) return error.FailingOnPurpose;
    const scores = try arbiter.allocator.alloc(f64, request.workloads.len);
    for (request.workloads, scores) |w, *s| s.* = w.ageSeconds;
    return .{ .scores = scores };
}

fn weight(json: []const u8) ?[]const u8 {
    return arbiter.handle("arbiter_weight", arbiter.WeightRequest, ages, json);
}

test "numbers read as the nearest double and written back exactly" {
    var prng = std.Random.DefaultPrng.init(12345);
    const random = prng.random();
    var request: std.ArrayList(u8) = .empty;
    var values: std.ArrayList(f64) = .empty;
    const fixed = [_]f64{ 0, 0.5, 59.999999, 1e-300, 5e-324, -5, 4294967294.9999995, 4294967295, 1e300, std.math.floatMax(f64), 86400.0000001 };
    try values.appendSlice(testing.allocator, &fixed);
    defer values.deinit(testing.allocator);
    defer request.deinit(testing.allocator);
    while (values.items.len < 2000) {
        const v: f64 = @bitCast(random.int(u64));
        if (std.math.isFinite(v)) try values.append(testing.allocator, v);
    }
    try request.appendSlice(testing.allocator, "{\"workloads\":[");
    for (values.items, 0..) |v, i| {
        var buf: [64]u8 = undefined;
        const text = try std.fmt.bufPrint(&buf, "{s}{{\"ageSeconds\":{e}}}", .{ if (i > 0) "," else "", v });
        try request.appendSlice(testing.allocator, text);
    }
    try request.appendSlice(testing.allocator, "]}");
    const out = weight(request.items) orelse return error.CallFailed;
    const Scores = struct { scores: []const f64 };
    const parsed = try std.json.parseFromSlice(Scores, testing.allocator, out, .{});
    defer parsed.deinit();
    try testing.expectEqual(values.items.len, parsed.value.scores.len);
    for (values.items, parsed.value.scores) |want, got| {
        try testing.expectEqual(@as(u64, @bitCast(want)), @as(u64, @bitCast(got)));
    }
}

fn admit(request: *const arbiter.AdmissionRequest) arbiter.AdmissionResponse {
    const w = request.workload;
    const allowed = request.tenant.labels.map.get("allowed") orelse "";
    return .{
        .allowed = std.mem.eql(u8, allowed, w.name),
        .reason = std.fmt.allocPrint(arbiter.allocator, "{s}|{d}|{d}|{?d}|{?d}|{s}", .{
            w.name,
            w.priorityWeight,
            request.clusterQueue.weight,
            if (w.estimate) |e| e.runtimeSeconds else null,
            if (w.podSets.len > 0) w.podSets[0].minCount else null,
            @tagName(request.params),
        }) catch return .{},
        .retryable = if (w.gpus == 0) false else null,
    };
}

test "admission: views, defaults, escapes and unknown members" {
    const request =
        \\{"workload":{"name":"j\u00fc\u0062 \"1\"\n🚀","gpus":0,"unknown":{"deep":[1,{"x":null}]},
        \\ "estimate":{"runtimeSeconds":60.5,"samples":3},"podSets":[{"name":"main","count":2,"minCount":1}]},
        \\ "tenant":{"name":"t","labels":{"allowed":"jüb \"1\"\n🚀"}},
        \\ "clusterQueue":{"name":"cq","weight":2.5},"params":{"a":[1,2]},"newMember":true}
    ;
    const out = arbiter.handle("arbiter_admission", arbiter.AdmissionRequest, admit, request) orelse return error.CallFailed;
    try testing.expectEqualStrings(
        \\{"allowed":true,"reason":"jüb \"1\"\n🚀|1|2.5|60.5|1|object","retryable":false}
    , out);
    const defaults = arbiter.handle("arbiter_admission", arbiter.AdmissionRequest, admit, "{}") orelse return error.CallFailed;
    try testing.expectEqualStrings(
        \\{"allowed":true,"reason":"|1|1|null|null|null","retryable":false}
    , defaults);
}

fn reversed(request: *const arbiter.FlavorRequest) !arbiter.FlavorResponse {
    const flavors = try arbiter.allocator.alloc([]const u8, request.candidates.len);
    for (request.candidates, 0..) |c, i| flavors[flavors.len - 1 - i] = c;
    return .{ .flavors = flavors };
}

fn nodes(request: *const arbiter.AutoscaleRequest) !arbiter.AutoscaleResponse {
    const out = try arbiter.allocator.alloc(i64, request.flavors.len);
    for (request.flavors, out) |f, *n| n.* = f.maxNodes;
    return .{ .nodes = out };
}

test "flavor and autoscale" {
    const flavor = arbiter.handle("arbiter_flavor", arbiter.FlavorRequest, reversed, "{\"candidates\":[\"a\",\"\\u00e9\\t\"]}");
    try testing.expectEqualStrings("{\"flavors\":[\"é\\t\",\"a\"]}", flavor.?);
    const autoscale = arbiter.handle("arbiter_autoscale", arbiter.AutoscaleRequest, nodes, "{\"flavors\":[{\"maxNodes\":4294967295},{}]}");
    try testing.expectEqualStrings("{\"nodes\":[4294967295,0]}", autoscale.?);
}

/// Best fit on one device: the fuller node scores higher; the card is the
/// fullest that still holds the pod.
fn bestFit(request: *const arbiter.PlacementRequest) !arbiter.PlacementResponse {
    const ask = request.pod.requests.map.get("example.com/gpu-milli") orelse 0;
    const scores = try arbiter.allocator.alloc(f64, request.nodes.len);
    const cards = try arbiter.allocator.alloc(?u32, request.nodes.len);
    for (request.nodes, scores, cards) |node, *score, *card| {
        score.* = -(node.free.map.get("example.com/gpu-milli") orelse 0);
        card.* = null;
        for (node.devices) |device| {
            for (device.cards, 0..) |free, c| {
                if (free >= ask and (card.* == null or free < device.cards[card.*.?])) card.* = @intCast(c);
            }
        }
    }
    return .{ .scores = scores, .cards = cards };
}

test "placement" {
    const request =
        \\{"pod":{"requests":{"example.com/gpu-milli":300}},"flavor":"t4","podSet":"main",
        \\ "nodes":[{"index":0,"name":"t4-0","free":{"example.com/gpu-milli":2000},
        \\   "devices":[{"resource":"example.com/gpu-milli","perCard":1000,"cards":[1000,1000]}]},
        \\  {"index":1,"name":"t4-1","free":{"example.com/gpu-milli":900},
        \\   "devices":[{"resource":"example.com/gpu-milli","perCard":1000,"cards":[500,400]}]}],
        \\ "typical":[{"requests":{"example.com/gpu-milli":300},"share":1}]}
    ;
    const out = arbiter.handle("arbiter_placement", arbiter.PlacementRequest, bestFit, request) orelse return error.CallFailed;
    try testing.expectEqualStrings("{\"cards\":[0,1],\"scores\":[-2000,-900]}", out);
}

test "a handler's error fails the call and is logged" {
    try testing.expectEqual(null, weight("{\"params\":{\"fail\":true}}"));
    try testing.expectEqualStrings("arbiter_weight: FailingOnPurpose", arbiter.last_log[0..arbiter.last_log_len]);
}

// (std.json reads a number from a string, "1", as well: lenient, harmless.)
test "malformed requests fail the call" {
    const bad = [_][]const u8{
        "",
        "{",
        "[]",
        "{\"workloads\":[{\"gpus\":1.5}]}",
        "{\"workloads\":[{\"gpus\":9223372036854775808}]}",
        "{\"workloads\":[{}],}",
        "{\"a\":1 \"b\":2}",
        "{\"a\":tru}",
        "{\"a\":\"\\x\"}",
        "{} {}",
        "{\"workloads\":[{\"labels\":{\"urgent\":1}}]}",
    };
    for (bad) |json| try testing.expectEqual(null, weight(json));
}

test "weight fields" {
    try testing.expectEqualStrings("[\"workloads.labels\",\"now\"]", arbiter.weightFields(&.{ "workloads.labels", "now" }));
}
