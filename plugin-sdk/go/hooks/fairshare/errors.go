package fairshare

import "errors"

var errNoHandler = errors.New("arbiter_fair_share is exported but no handler was registered: call fairshare.Export in an init function")
