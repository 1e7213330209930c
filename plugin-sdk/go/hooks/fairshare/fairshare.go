// Package fairshare exports a plugin's `fairShare` hook (arbiter_fair_share): import it
// and call Export from an init function.
package fairshare

import "arbiter.dev/plugin-sdk/go/arbiter"

// Handler answers one `fairShare` request.
type Handler func(*arbiter.FairShareRequest) (arbiter.FairShareResponse, error)

var handler Handler

// Export makes h the module's `fairShare` hook.
func Export(h Handler) { handler = h }

// Call runs the exported hook on a request as the host would send it.
func Call(request []byte) ([]byte, error) {
	if handler == nil {
		return nil, errNoHandler
	}
	return arbiter.Handle(request, (*arbiter.FairShareRequest).UnmarshalJSON, handler)
}
