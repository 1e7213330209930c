package admission

import (
	"testing"

	"arbiter.dev/plugin-sdk/go/arbiter"
)

func TestCallRunsTheExportedHandler(t *testing.T) {
	if _, err := Call([]byte(`{}`)); err == nil {
		t.Error("no handler registered, yet the call answered")
	}
	Export(func(req *arbiter.AdmissionRequest) (arbiter.AdmissionResponse, error) {
		reason := "too many GPUs"
		return arbiter.AdmissionResponse{Allowed: req.Workload.Gpus <= 8, Reason: &reason}, nil
	})
	out, err := Call([]byte(`{"workload":{"gpus":16},"borrowing":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"allowed":false,"reason":"too many GPUs","retryable":null}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
