package main

import (
	"testing"

	"arbiter.dev/plugin-sdk/go/hooks/weight"
)

func TestScoresAsTheHostSendsThem(t *testing.T) {
	request := `{"workloads":[
		{"labels":{"urgent":"true"},"gpus":8,"ageSeconds":10.9},
		{"labels":{"urgent":"false"},"gpus":0,"ageSeconds":1e300},
		{"gpus":-3,"ageSeconds":-1},
		{"labels":{"\u0075rgent":"true","team":"ü"},"gpus":99999}
	],"now":5,"params":null}`
	out, err := weight.Call([]byte(request))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"scores":[140698833649674,70368744177663,70364449210368,70368744177664]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestDeclaresWhatItReads(t *testing.T) {
	want := `["workloads.labels","workloads.gpus","workloads.ageSeconds"]`
	if got := string(weight.Fields()); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestMalformedRequestsAreErrors(t *testing.T) {
	for _, request := range []string{`{"workloads":[{"gpus":1.5}]}`, `{"workloads":{}}`, `not json`, `{"workloads":[]} x`} {
		if out, err := weight.Call([]byte(request)); err == nil {
			t.Errorf("%s: answered %s", request, out)
		}
	}
}
