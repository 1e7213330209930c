package admission

import "errors"

var errNoHandler = errors.New("arbiter_admission is exported but no handler was registered: call admission.Export in an init function")
