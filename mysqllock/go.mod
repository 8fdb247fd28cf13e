module github.com/distlock/distlock/mysqllock

go 1.24

replace github.com/distlock/distlock/core => ../core

require (
	github.com/distlock/distlock/core v0.0.0-00010101000000-000000000000
	github.com/go-sql-driver/mysql v1.9.3
	github.com/stretchr/testify v1.10.0
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
