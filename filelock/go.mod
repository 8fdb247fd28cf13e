module github.com/distlock/distlock/filelock

go 1.26.0

require (
	github.com/distlock/distlock/core v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

replace github.com/distlock/distlock/core => ../core
