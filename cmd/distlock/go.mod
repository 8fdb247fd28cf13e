module github.com/distlock/distlock/cmd/distlock

go 1.24

// No replace directives: `go install github.com/distlock/distlock/cmd/distlock@<version>`
// refuses a module that has them. Within this repository go.work supplies
// the distlock modules.
require (
	github.com/distlock/distlock v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/core v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/election v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.7.5
	github.com/redis/go-redis/v9 v9.22.0
)
