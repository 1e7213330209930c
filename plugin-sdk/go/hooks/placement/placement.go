// Package placement exports a plugin's `placement` hook (arbiter_placement):
// import it and call Export from an init function. Placement is a platform
// hook: a tenant bundle holding a placement policy is refused.
package placement

import "arbiter.dev/plugin-sdk/go/arbiter"

// Handler scores the nodes one pod fits on: one finite score per node, in
// order (the pod goes to the highest), and optionally per node the card
// for a request that fits on one card.
type Handler func(*arbiter.PlacementRequest) (arbiter.PlacementResponse, error)

var handler Handler

// Export makes h the module's `placement` hook.
func Export(h Handler) { handler = h }

// Call runs the exported hook on a request as the host would send it.
func Call(request []byte) ([]byte, error) {
	if handler == nil {
		return nil, errNoHandler
	}
	return arbiter.Handle(request, (*arbiter.PlacementRequest).UnmarshalJSON, handler)
}
