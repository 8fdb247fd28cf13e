module github.com/distlock/distlock/mysqllock

go 1.26.0

replace github.com/distlock/distlock/core => ../core

require (
	github.com/distlock/distlock/core v0.1.0
	github.com/go-sql-driver/mysql v1.9.3
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
