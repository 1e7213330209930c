package autoscale

import "errors"

var errNoHandler = errors.New("arbiter_autoscale is exported but no handler was registered: call autoscale.Export in an init function")
