package placement

import "errors"

var errNoHandler = errors.New("arbiter_placement is exported but no handler was registered: call placement.Export in an init function")
