package weight

import "errors"

var errNoHandler = errors.New("arbiter_weight is exported but no handler was registered: call weight.Export in an init function")
