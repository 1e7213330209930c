package placement

import (
	"testing"

	"arbiter.dev/plugin-sdk/go/arbiter"
)

// Best fit on one device: the node with the least free left scores
// highest, and the card picked is the fullest that still holds the pod.
func TestCallRunsTheExportedHandler(t *testing.T) {
	Export(func(req *arbiter.PlacementRequest) (arbiter.PlacementResponse, error) {
		ask := req.Pod.Requests["example.com/gpu-milli"]
		scores := make([]float64, len(req.Nodes))
		cards := make([]*uint32, len(req.Nodes))
		for i, node := range req.Nodes {
			scores[i] = -node.Free["example.com/gpu-milli"]
			for _, device := range node.Devices {
				best := -1
				for c, free := range device.Cards {
					if free >= ask && (best < 0 || free < device.Cards[best]) {
						best = c
					}
				}
				if best >= 0 {
					card := uint32(best)
					cards[i] = &card
				}
			}
		}
		return arbiter.PlacementResponse{Scores: scores, Cards: &cards}, nil
	})
	request := `{"pod":{"requests":{"example.com/gpu-milli":300}},"flavor":"t4","podSet":"main",
	  "nodes":[
	    {"index":0,"name":"t4-0","flavor":"t4","free":{"example.com/gpu-milli":2000},"allocatable":{},
	     "devices":[{"resource":"example.com/gpu-milli","perCard":1000,"cards":[1000,1000]}]},
	    {"index":1,"name":"t4-1","flavor":"t4","free":{"example.com/gpu-milli":900},"allocatable":{},
	     "devices":[{"resource":"example.com/gpu-milli","perCard":1000,"cards":[400,500]}]}],
	  "typical":[{"requests":{"example.com/gpu-milli":300},"share":1}],
	  "workload":{"name":"x"}}`
	out, err := Call([]byte(request))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"cards":[0,0],"scores":[-2000,-900]}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
