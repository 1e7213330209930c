//go:build wasip1

package admission

import "arbiter.dev/plugin-sdk/go/arbiter"

//go:wasmexport arbiter_admission
func export(ptr, n int32) int64 { return arbiter.Serve(ptr, n, Call) }
