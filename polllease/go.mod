module github.com/distlock/distlock/polllease

go 1.24

require github.com/distlock/distlock/core v0.0.0-00010101000000-000000000000

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

require (
	github.com/distlock/distlock/filelock v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.11.1
	go.uber.org/goleak v1.3.0
)

replace github.com/distlock/distlock/core => ../core

replace github.com/distlock/distlock/filelock => ../filelock
