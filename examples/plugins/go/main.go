// urgent-first, in Go: a tenant `weight` plugin ordering a tenant's own
// workloads: those labelled urgent=true first, then fewer GPUs, then
// older. The same policy as examples/plugins/rust and examples/plugins/c
// (examples/plugins/README.md has the formula); tests/plugin_languages.rs
// checks the three score every workload identically.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o urgent-first.wasm .
package main

import (
	"math"

	"arbiter.dev/plugin-sdk/go/arbiter"
	"arbiter.dev/plugin-sdk/go/hooks/weight"
)

const (
	maxGPUs = 1<<14 - 1 // more GPUs than this score as this many
	maxAge  = 1<<32 - 1 // whole seconds; older scores as this old
)

// Score is exact in a float64: urgent × 2^46 + (maxGPUs − gpus) × 2^32 + age.
func Score(w *arbiter.Workload) float64 {
	var urgent uint64
	if w.Labels["urgent"] == "true" {
		urgent = 1
	}
	gpus := uint64(min(max(w.Gpus, 0), maxGPUs))
	age := uint64(0)
	if w.AgeSeconds >= maxAge {
		age = maxAge
	} else if w.AgeSeconds > 0 {
		age = uint64(math.Floor(w.AgeSeconds))
	}
	return float64(urgent<<46 | (maxGPUs-gpus)<<32 | age)
}

func scores(req *arbiter.WeightRequest) (arbiter.WeightResponse, error) {
	out := make([]float64, len(req.Workloads))
	for i := range req.Workloads {
		out[i] = Score(&req.Workloads[i])
	}
	return arbiter.WeightResponse{Scores: out}, nil
}

func init() {
	weight.Export(scores, "workloads.labels", "workloads.gpus", "workloads.ageSeconds")
}

func main() {}
