module github.com/distlock/distlock/observe/otel

go 1.26.0

require (
	github.com/distlock/distlock/core v0.1.0
	github.com/distlock/distlock/election v0.1.0
	github.com/distlock/distlock/filelock v0.1.0
	github.com/distlock/distlock/polllease v0.1.0
	go.opentelemetry.io/otel v1.44.0
	go.opentelemetry.io/otel/metric v1.44.0
	go.opentelemetry.io/otel/sdk v1.44.0
	go.opentelemetry.io/otel/sdk/metric v1.44.0
	go.opentelemetry.io/otel/trace v1.44.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/distlock/distlock/core => ../../core

replace github.com/distlock/distlock/election => ../../election

replace github.com/distlock/distlock/filelock => ../../filelock

replace github.com/distlock/distlock/polllease => ../../polllease
