//! The Zig guest SDK for Arbiter policy plugins (plugin ABI v1,
//! plugin-sdk/ABI.md), for `-target wasm32-freestanding`. A plugin imports
//! it as the module `arbiter` and exports each hook it implements in one
//! line:
//!
//!     comptime { arbiter.exportWeight(weight); }
//!     comptime { arbiter.exportWeightFields(&.{"workloads.labels"}); }
//!
//! Importing it exports `arbiter_abi_version` and `arbiter_alloc`. The
//! request and response types are generated from plugin-sdk/schema into
//! views.zig (re-exported here) and read and written with std.json.
//! Memory comes from std.heap.wasm_allocator and is never freed: every
//! call runs in a fresh instance. The module imports nothing but
//! `arbiter.log`, which a failing hook uses to say why.

const std = @import("std");
const builtin = @import("builtin");
const views = @import("views.zig");

pub const Map = views.Map;
pub const AdmissionRequest = views.AdmissionRequest;
pub const AdmissionResponse = views.AdmissionResponse;
pub const WeightRequest = views.WeightRequest;
pub const WeightResponse = views.WeightResponse;
pub const FairShareRequest = views.FairShareRequest;
pub const FairShareResponse = views.FairShareResponse;
pub const AutoscaleRequest = views.AutoscaleRequest;
pub const AutoscaleResponse = views.AutoscaleResponse;
pub const FlavorRequest = views.FlavorRequest;
pub const FlavorResponse = views.FlavorResponse;
pub const PlacementRequest = views.PlacementRequest;
pub const PlacementResponse = views.PlacementResponse;
pub const Node = views.Node;
pub const Device = views.Device;
pub const Pod = views.Pod;
pub const TypicalPod = views.TypicalPod;
pub const Workload = views.Workload;
pub const PodSet = views.PodSet;
pub const Estimate = views.Estimate;
pub const Queue = views.Queue;
pub const ClusterQueue = views.ClusterQueue;
pub const Tenant = views.Tenant;
pub const Cohort = views.Cohort;
pub const Flavor = views.Flavor;
pub const exportAdmission = views.exportAdmission;
pub const exportWeight = views.exportWeight;
pub const exportFairShare = views.exportFairShare;
pub const exportAutoscale = views.exportAutoscale;
pub const exportFlavor = views.exportFlavor;
pub const exportPlacement = views.exportPlacement;
pub const weight_field_names = views.weight_field_names;

const wasm = builtin.target.cpu.arch.isWasm();

/// The allocator every request and response lives in (never freed).
/// Outside WebAssembly (the SDK's tests), the page allocator.
pub const allocator = if (wasm) std.heap.wasm_allocator else std.heap.page_allocator;

comptime {
    if (wasm) {
        @export(&abiVersion, .{ .name = "arbiter_abi_version" });
        @export(&alloc, .{ .name = "arbiter_alloc" });
    }
}

fn abiVersion() callconv(.c) i32 {
    return 1;
}

/// A buffer of len bytes for the host to write a request into; a trap
/// (the call fails as out_of_memory) when memory cannot grow.
fn alloc(len: usize) callconv(.c) usize {
    const buf = allocator.alloc(u8, @max(len, 1)) catch @trap();
    return @intFromPtr(buf.ptr);
}

/// What a hook returns: where the response lies.
fn location(bytes: []const u8) u64 {
    return @as(u64, @intFromPtr(bytes.ptr)) << 32 | bytes.len;
}

/// Log levels of arbiter.log.
pub const Level = enum(i32) { err = 0, warn = 1, info = 2, debug = 3 };

extern "arbiter" fn log(level: i32, ptr: [*]const u8, len: usize) void;

/// Outside WebAssembly, the last line print logged (for the SDK's tests).
pub var last_log: [1024]u8 = undefined;
pub var last_log_len: usize = 0;

/// Logs a line to the decision log through the host's arbiter.log
/// (formatted; a line that does not fit 1 KiB is cut).
pub fn print(level: Level, comptime format: []const u8, args: anytype) void {
    var buf: [1024]u8 = undefined;
    const line = std.fmt.bufPrint(&buf, format, args) catch buf[0..];
    if (wasm) {
        log(@backingInt(level), line.ptr, line.len);
    } else {
        @memcpy(last_log[0..line.len], line);
        last_log_len = line.len;
    }
}

/// Decodes request as Request, runs handler on it and returns its encoded
/// response; null (the call fails) when the request does not decode or the
/// handler returns an error, which is logged. What every exported hook
/// does, minus the raw memory: call it in tests with the JSON the host
/// sends (`arbiter policy eval` prints it).
pub fn handle(comptime hook: []const u8, comptime Request: type, comptime handler: anytype, request: []const u8) ?[]const u8 {
    const parsed = std.json.parseFromSliceLeaky(Request, allocator, request, .{
        .ignore_unknown_fields = true,
    }) catch |e| {
        print(.err, "{s}: the request does not decode: {s}", .{ hook, @errorName(e) });
        return null;
    };
    const result = handler(&parsed);
    const response = if (@typeInfo(@TypeOf(result)) == .error_union)
        result catch |e| {
            print(.err, "{s}: {s}", .{ hook, @errorName(e) });
            return null;
        }
    else
        result;
    return std.json.Stringify.valueAlloc(allocator, response, .{}) catch null;
}

/// Exports the hook `name` (`arbiter_weight`, ...) answering with handler;
/// views.zig's export<Hook> functions name the hook and its types.
pub fn exportHook(comptime name: []const u8, comptime Request: type, comptime handler: anytype) void {
    if (!wasm) return;
    const S = struct {
        fn call(ptr: [*]const u8, len: usize) callconv(.c) u64 {
            const out = handle(name, Request, handler, ptr[0..len]) orelse return 0;
            return location(out);
        }
    };
    @export(&S.call, .{ .name = name });
}

/// Exports `arbiter_weight_fields`: the weight request fields the plugin
/// reads (weight_field_names; plugin-sdk/ABI.md "Lean weight requests").
/// An unknown name is a compile error.
pub fn exportWeightFields(comptime names: []const []const u8) void {
    if (!wasm) return;
    const S = struct {
        const list = weightFields(names);
        fn fields() callconv(.c) u64 {
            return location(list);
        }
    };
    @export(&S.fields, .{ .name = "arbiter_weight_fields" });
}

/// The JSON list `arbiter_weight_fields` answers for names.
pub fn weightFields(comptime names: []const []const u8) []const u8 {
    return comptime blk: {
        var text: []const u8 = "[";
        for (names, 0..) |n, i| {
            if (!known(n)) @compileError("unknown weight field " ++ n ++ "; see weight_field_names");
            text = text ++ (if (i > 0) "," else "") ++ "\"" ++ n ++ "\"";
        }
        break :blk text ++ "]";
    };
}

fn known(comptime name: []const u8) bool {
    if (std.mem.eql(u8, name, "now") or std.mem.eql(u8, name, "params")) return true;
    for (weight_field_names) |n| {
        if (std.mem.eql(u8, n, name)) return true;
    }
    return false;
}
