// Package autoscale exports a plugin's `autoscale` hook (arbiter_autoscale): import it
// and call Export from an init function.
package autoscale

import "arbiter.dev/plugin-sdk/go/arbiter"

// Handler answers one `autoscale` request.
type Handler func(*arbiter.AutoscaleRequest) (arbiter.AutoscaleResponse, error)

var handler Handler

// Export makes h the module's `autoscale` hook.
func Export(h Handler) { handler = h }

// Call runs the exported hook on a request as the host would send it.
func Call(request []byte) ([]byte, error) {
	if handler == nil {
		return nil, errNoHandler
	}
	return arbiter.Handle(request, (*arbiter.AutoscaleRequest).UnmarshalJSON, handler)
}
