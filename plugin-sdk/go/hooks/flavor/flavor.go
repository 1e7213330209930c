// Package flavor exports a plugin's `flavor` hook (arbiter_flavor): import it
// and call Export from an init function.
package flavor

import "arbiter.dev/plugin-sdk/go/arbiter"

// Handler answers one `flavor` request.
type Handler func(*arbiter.FlavorRequest) (arbiter.FlavorResponse, error)

var handler Handler

// Export makes h the module's `flavor` hook.
func Export(h Handler) { handler = h }

// Call runs the exported hook on a request as the host would send it.
func Call(request []byte) ([]byte, error) {
	if handler == nil {
		return nil, errNoHandler
	}
	return arbiter.Handle(request, (*arbiter.FlavorRequest).UnmarshalJSON, handler)
}
