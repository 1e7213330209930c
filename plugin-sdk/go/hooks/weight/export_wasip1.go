//go:build wasip1

package weight

import "arbiter.dev/plugin-sdk/go/arbiter"

//go:wasmexport arbiter_weight
func export(ptr, n int32) int64 { return arbiter.Serve(ptr, n, Call) }

//go:wasmexport arbiter_weight_fields
func exportFields() int64 { return arbiter.Respond(fields) }
