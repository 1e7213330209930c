package flavor

import (
	"slices"
	"testing"

	"arbiter.dev/plugin-sdk/go/arbiter"
)

func TestCallRunsTheExportedHandler(t *testing.T) {
	Export(func(req *arbiter.FlavorRequest) (arbiter.FlavorResponse, error) {
		out := slices.Clone(req.Candidates)
		slices.Reverse(out)
		return arbiter.FlavorResponse{Flavors: out}, nil
	})
	out, err := Call([]byte(`{"candidates":["a100","h100"],"workload":{"name":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"flavors":["h100","a100"]}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
