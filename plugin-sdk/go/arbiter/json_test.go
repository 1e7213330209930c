package arbiter

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

const request = `{"workloads":[
 {"name":"a\"b\\c\u00e9\ud83d\ude80","labels":{"urgent":"true","k\u0065y":"v"},"gpus":8,
  "ageSeconds":12.5e1,"estimate":{"runtimeSeconds":600,"samples":3},"podSets":[{"name":"w","count":2,"minCount":1,"requests":{"nvidia.com/gpu":4}}],
  "priorityClass":null,"future":{"nested":[1,{"x":null}]}},
 {}
],"queues":{"ns/q":{"name":"q","priority":-3}},"clusterQueues":{"cq":{"cohort":null}},"now":1e3,"params":{"boost":2.5,"label":"urgent","on":true}}`

func TestWeightRequestDecodesWithSchemaDefaults(t *testing.T) {
	var req WeightRequest
	if err := req.UnmarshalJSON([]byte(request)); err != nil {
		t.Fatal(err)
	}
	w := req.Workloads[0]
	if w.Name != "a\"b\\cé🚀" || w.Labels["key"] != "v" || w.Gpus != 8 || w.AgeSeconds != 125 {
		t.Errorf("workload 0: %+v", w)
	}
	if w.Estimate == nil || w.Estimate.RuntimeSeconds != 600 || w.PriorityClass != nil {
		t.Errorf("nullable members: %+v", w)
	}
	if ps := w.PodSets[0]; ps.MinCount == nil || *ps.MinCount != 1 || ps.Requests["nvidia.com/gpu"] != 4 {
		t.Errorf("pod set: %+v", ps)
	}
	// A missing member takes the schema's default: priorityWeight 1.
	if w.PriorityWeight != 1 || req.Workloads[1].PriorityWeight != 1 || req.Workloads[1].Labels != nil {
		t.Errorf("defaults: %+v", req.Workloads[1])
	}
	if cq := req.ClusterQueues["cq"]; cq.Weight != 1 || cq.PriorityWeight != 1 || cq.Cohort != nil {
		t.Errorf("cluster queue defaults: %+v", cq)
	}
	if q := req.Queues["ns/q"]; q.Priority == nil || *q.Priority != -3 {
		t.Errorf("queue: %+v", q)
	}
	if req.Now != 1000 {
		t.Errorf("now: %v", req.Now)
	}
	if f, ok := req.Params.Get("boost").Float(); !ok || f != 2.5 {
		t.Errorf("params.boost: %v %v", f, ok)
	}
	if s, ok := req.Params.Get("label").Text(); !ok || s != "urgent" {
		t.Errorf("params.label: %q %v", s, ok)
	}
	if b, ok := req.Params.Get("on").Bool(); !ok || !b {
		t.Errorf("params.on: %v %v", b, ok)
	}
	if !req.Params.Get("missing").IsNull() {
		t.Error("a missing param is null")
	}
}

func TestAdmissionDefaultsFollowTheSchema(t *testing.T) {
	// A missing clusterQueue is the schema's default object, whose weight
	// is 1 as the host's; a present one defaults its missing members alike.
	var absent, present AdmissionRequest
	if err := absent.UnmarshalJSON([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := present.UnmarshalJSON([]byte(`{"clusterQueue":{}}`)); err != nil {
		t.Fatal(err)
	}
	if absent.ClusterQueue.Weight != 1 || present.ClusterQueue.Weight != 1 {
		t.Errorf("absent %v, present %v", absent.ClusterQueue.Weight, present.ClusterQueue.Weight)
	}
}

func TestEncodedJSONReadsBackTheSame(t *testing.T) {
	var req WeightRequest
	if err := req.UnmarshalJSON([]byte(request)); err != nil {
		t.Fatal(err)
	}
	encoded := req.AppendJSON(nil)
	if !json.Valid(encoded) {
		t.Fatalf("not JSON: %s", encoded)
	}
	var again WeightRequest
	if err := again.UnmarshalJSON(encoded); err != nil {
		t.Fatal(err)
	}
	if again := again.AppendJSON(nil); string(again) != string(encoded) {
		t.Errorf("round trip differs:\n%s\n%s", encoded, again)
	}
	if again.Workloads[0].Name != req.Workloads[0].Name || *again.Workloads[0].Estimate != *req.Workloads[0].Estimate {
		t.Errorf("round trip differs: %+v", again.Workloads[0])
	}
}

func TestResponsesAreTheJSONTheHostReads(t *testing.T) {
	reason := "no \"GPUs\"\n\x00 \xff"
	retry := false
	got := string(AdmissionResponse{Allowed: false, Reason: &reason, Retryable: &retry}.AppendJSON(nil))
	want := `{"allowed":false,"reason":"no \"GPUs\"\n\u0000 \ufffd","retryable":false}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := string(WeightResponse{Scores: []float64{1, -0.5, 1e21, 1e-7, 123456789012345680, math.NaN()}}.AppendJSON(nil)); got != `{"scores":[1,-0.5,1e+21,1e-7,123456789012345680,null]}` {
		t.Errorf("scores: %s", got)
	}
	if got := string(WeightResponse{}.AppendJSON(nil)); got != `{"scores":[]}` {
		t.Errorf("empty: %s", got)
	}
}

func TestFloatsReadBackExactly(t *testing.T) {
	for _, f := range []float64{0, 5e-324, 0.1, 1.0 / 3, 4294967294.9999995, 1e300, math.MaxFloat64, -2.5e-310} {
		text := string(appendFloat(nil, f))
		back, err := strconv.ParseFloat(text, 64)
		if err != nil || back != f {
			t.Errorf("%v written as %s reads back as %v", f, text, back)
		}
	}
}

func TestMalformedRequestsAreErrorsNamingTheOffset(t *testing.T) {
	for _, text := range []string{
		``, `[]`, `{"workloads":{}}`, `{"workloads":[{"gpus":1.5}]}`, `{"workloads":[{"gpus":"1"}]}`,
		`{"workloads":[{"retries":-1}]}`, `{"now":01}`, `{"now":1.}`, `{"a":tru}`, `{"a":"\x"}`,
		`{"a":"` + "\x01" + `"}`, `{"a":1,}`, `{"a" 1}`, `{} {}`, `{"workloads":[` + strings.Repeat("[", 200) + `]}`,
		`{"workloads":[{"labels":null}]}`,
	} {
		var req WeightRequest
		err := req.UnmarshalJSON([]byte(text))
		if err == nil {
			t.Errorf("%q decoded", text)
			continue
		}
		if !strings.Contains(err.Error(), "at byte") {
			t.Errorf("%q: %v", text, err)
		}
	}
}

func TestMissingRequiredResponseMembersAreErrors(t *testing.T) {
	var resp WeightResponse
	if err := resp.UnmarshalJSON([]byte(`{}`)); err == nil || !strings.Contains(err.Error(), `"scores"`) {
		t.Errorf("got %v", err)
	}
}

func TestWeightFieldsAreTheHostsNames(t *testing.T) {
	if got := string(WeightFields("workloads.gpus", "queues")); got != `["workloads.gpus","queues"]` {
		t.Errorf("got %s", got)
	}
	if len(WeightFieldNames) != 22 || WeightFieldNames[0] != "workloads.ageSeconds" {
		t.Errorf("names: %v", WeightFieldNames)
	}
	defer func() {
		if recover() == nil {
			t.Error("an unknown field does not panic")
		}
	}()
	WeightFields("workloads.gpu")
}

func FuzzWeightRequest(f *testing.F) {
	f.Add([]byte(request))
	f.Add([]byte(`{"workloads":[{"labels":{"urgent":"true"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req WeightRequest
		if req.UnmarshalJSON(data) != nil {
			return
		}
		var again WeightRequest
		if err := again.UnmarshalJSON(req.AppendJSON(nil)); err != nil {
			t.Fatalf("the encoding of a decoded request does not decode: %v", err)
		}
	})
}
