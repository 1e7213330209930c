package fairshare

import (
	"testing"

	"arbiter.dev/plugin-sdk/go/arbiter"
)

func TestCallRunsTheExportedHandler(t *testing.T) {
	Export(func(req *arbiter.FairShareRequest) (arbiter.FairShareResponse, error) {
		out := make([]float64, len(req.ClusterQueues))
		for i, cq := range req.ClusterQueues {
			out[i] = cq.Weight / (1 + cq.DecayedUsage)
		}
		return arbiter.FairShareResponse{Weights: out}, nil
	})
	out, err := Call([]byte(`{"clusterQueues":[{"name":"a"},{"weight":3,"decayedUsage":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"weights":[1,1]}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
