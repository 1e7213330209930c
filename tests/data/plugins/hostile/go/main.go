// A hostile tenant weight plugin in Go, for tests/plugin_languages.rs:
// its policy's `config.mode` picks the misbehaviour — `loop` spins
// forever, `bomb` allocates until memory runs out, `bad` answers scores
// that are not a list, `short` one score too few, `fail` returns an error
// (which the SDK logs, answering nothing); anything else scores every
// workload 1. Built by scripts/build-plugins.sh.
package main

import (
	"errors"

	"arbiter.dev/plugin-sdk/go/arbiter"
)

var hoard [][]byte

// spins counts loop iterations, so the loop has an effect and stays.
var spins uint64

// It exports arbiter_weight itself, through the SDK's lower level, to
// answer raw bytes.
//
//go:wasmexport arbiter_weight
func export(ptr, n int32) int64 { return arbiter.Serve(ptr, n, misbehave) }

func misbehave(request []byte) ([]byte, error) {
	var req arbiter.WeightRequest
	if err := req.UnmarshalJSON(request); err != nil {
		return nil, err
	}
	mode, _ := req.Params.Get("mode").Text()
	n := len(req.Workloads)
	switch mode {
	case "loop":
		for {
			spins++
		}
	case "bomb":
		for {
			chunk := make([]byte, 4<<20)
			chunk[0], chunk[len(chunk)-1] = 1, 1
			hoard = append(hoard, chunk)
		}
	case "bad":
		return []byte(`{"scores":"not a list"}`), nil
	case "short":
		n--
	case "fail":
		return nil, errors.New("hostile: failing on purpose")
	}
	scores := make([]float64, max(n, 0))
	for i := range scores {
		scores[i] = 1
	}
	return arbiter.WeightResponse{Scores: scores}.AppendJSON(nil), nil
}

func main() {}
