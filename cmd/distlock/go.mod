module github.com/distlock/distlock/cmd/distlock

go 1.26.0

require (
	github.com/distlock/distlock v0.1.0
	github.com/distlock/distlock/core v0.1.0
	github.com/distlock/distlock/election v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/distlock/distlock/filelock v0.1.0 // indirect
	github.com/distlock/distlock/mysqllock v0.1.0 // indirect
	github.com/distlock/distlock/natslock v0.1.0 // indirect
	github.com/distlock/distlock/pglock v0.1.0 // indirect
	github.com/distlock/distlock/redislock v0.1.0 // indirect
	github.com/distlock/distlock/redlock v0.1.0 // indirect
	github.com/go-sql-driver/mysql v1.9.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
