// Package arbiter is the Go guest SDK for Arbiter policy plugins (plugin
// ABI v1, plugin-sdk/ABI.md), built with Go's `GOOS=wasip1 GOARCH=wasm`
// and `-buildmode=c-shared` (a WASI reactor: the host runs `_initialize`,
// which runs the package init functions, once per fresh instance).
//
// The request and response types (WeightRequest, Workload, ...) are
// generated from plugin-sdk/schema into views_gen.go, with decoders and
// encoders that need no reflection. A hook is exported by importing its
// package and registering a function in one line, e.g.
//
//	func init() { weight.Export(score, "workloads.labels", "workloads.gpus") }
//
// with packages weight, admission, fairshare, autoscale and flavor under
// arbiter.dev/plugin-sdk/go/hooks/. This package exports
// arbiter_abi_version and arbiter_alloc.
package arbiter

//go:generate go run ../internal/gen -root ..
