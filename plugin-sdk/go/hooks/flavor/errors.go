package flavor

import "errors"

var errNoHandler = errors.New("arbiter_flavor is exported but no handler was registered: call flavor.Export in an init function")
