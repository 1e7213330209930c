module arbiter.dev/plugin-sdk/go

go 1.26
