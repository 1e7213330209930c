//go:build wasip1

package fairshare

import "arbiter.dev/plugin-sdk/go/arbiter"

//go:wasmexport arbiter_fair_share
func export(ptr, n int32) int64 { return arbiter.Serve(ptr, n, Call) }
