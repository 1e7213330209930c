// Package admission exports a plugin's `admission` hook (arbiter_admission): import it
// and call Export from an init function.
package admission

import "arbiter.dev/plugin-sdk/go/arbiter"

// Handler answers one `admission` request.
type Handler func(*arbiter.AdmissionRequest) (arbiter.AdmissionResponse, error)

var handler Handler

// Export makes h the module's `admission` hook.
func Export(h Handler) { handler = h }

// Call runs the exported hook on a request as the host would send it.
func Call(request []byte) ([]byte, error) {
	if handler == nil {
		return nil, errNoHandler
	}
	return arbiter.Handle(request, (*arbiter.AdmissionRequest).UnmarshalJSON, handler)
}
