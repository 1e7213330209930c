// Package weight exports a plugin's `weight` hook (arbiter_weight, and
// arbiter_weight_fields declaring what it reads): import it and call
// Export from an init function.
package weight

import "arbiter.dev/plugin-sdk/go/arbiter"

// Handler scores a batch: one finite score per workload, in order; higher goes first.
type Handler func(*arbiter.WeightRequest) (arbiter.WeightResponse, error)

var (
	handler Handler
	fields  = arbiter.WeightFields()
)

// Export makes h the module's weight hook. reads names the request fields
// h reads (`workloads.labels`, `queues`, ...; arbiter.WeightFieldNames):
// the host then sends only those, plus `now` and `params` (a field not
// named reads as its default). No names: the whole request. An unknown
// name panics, so the module fails its load probe.
func Export(h Handler, reads ...string) {
	handler = h
	fields = arbiter.WeightFields(reads...)
}

// Call runs the exported hook on a request as the host would send it.
func Call(request []byte) ([]byte, error) {
	if handler == nil {
		return nil, errNoHandler
	}
	return arbiter.Handle(request, (*arbiter.WeightRequest).UnmarshalJSON, handler)
}

// Fields is what arbiter_weight_fields answers.
func Fields() []byte { return fields }
