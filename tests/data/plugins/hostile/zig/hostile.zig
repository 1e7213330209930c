//! A hostile tenant weight plugin in Zig, for tests/plugin_languages.rs:
//! its policy's `config.mode` picks the misbehaviour — `loop` spins
//! forever, `bomb` allocates until memory runs out and then traps, `bad`
//! answers scores that are not a list, `short` one score too few, `fail`
//! fails the call with an error (which the SDK logs); anything else scores
//! every workload 1. Built by scripts/build-plugins.sh.

const std = @import("std");
const arbiter = @import("arbiter");

var spins: u64 = 0;

/// A list of scores, or (`bad`) a string where the list should be.
const Scores = union(enum) {
    list: []const f64,
    text: []const u8,

    pub fn jsonStringify(self: Scores, jw: anytype) !void {
        switch (self) {
            .list => |l| try jw.write(l),
            .text => |t| try jw.write(t),
        }
    }
};

fn misbehave(request: *const arbiter.WeightRequest) !struct { scores: Scores } {
    const mode: []const u8 = switch (request.params) {
        .object => |o| if (o.get("mode")) |m| switch (m) {
            .string => |s| s,
            else => "",
        } else "",
        else => "",
    };
    if (std.mem.eql(u8, mode, "loop")) {
        while (true) @as(*volatile u64, &spins).* += 1;
    }
    if (std.mem.eql(u8, mode, "bomb")) {
        while (true) {
            const chunk = arbiter.allocator.alloc(u8, 1 << 20) catch @trap();
            @as(*volatile u8, &chunk[0]).* = 1;
        }
    }
    if (std.mem.eql(u8, mode, "bad")) return .{ .scores = .{ .text = "not a list" } };
    if (std.mem.eql(u8, mode, "fail")) return error.FailingOnPurpose;
    var n = request.workloads.len;
    if (std.mem.eql(u8, mode, "short")) n -= 1;
    const scores = try arbiter.allocator.alloc(f64, n);
    @memset(scores, 1);
    return .{ .scores = .{ .list = scores } };
}

comptime {
    arbiter.exportWeight(misbehave);
}
