//go:build wasip1

package placement

import "arbiter.dev/plugin-sdk/go/arbiter"

//go:wasmexport arbiter_placement
func export(ptr, n int32) int64 { return arbiter.Serve(ptr, n, Call) }
