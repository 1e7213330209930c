package autoscale

import (
	"testing"

	"arbiter.dev/plugin-sdk/go/arbiter"
)

func TestCallRunsTheExportedHandler(t *testing.T) {
	Export(func(req *arbiter.AutoscaleRequest) (arbiter.AutoscaleResponse, error) {
		out := make([]int64, len(req.Flavors))
		for i, f := range req.Flavors {
			out[i] = int64(f.Nodes) + int64(f.PendingNodes)
		}
		return arbiter.AutoscaleResponse{Nodes: out}, nil
	})
	out, err := Call([]byte(`{"flavors":[{"name":"a100","nodes":3,"pendingNodes":2}],"now":5}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"nodes":[5]}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
