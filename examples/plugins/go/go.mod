module arbiter.dev/examples/plugins/go

go 1.26

require arbiter.dev/plugin-sdk/go v0.0.0

replace arbiter.dev/plugin-sdk/go => ../../../plugin-sdk/go
