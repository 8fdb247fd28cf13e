module github.com/distlock/distlock

go 1.24

require (
	github.com/distlock/distlock/core v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/filelock v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/natslock v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/pglock v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/redislock v0.0.0-00010101000000-000000000000
	github.com/distlock/distlock/redlock v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.7.5 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/nats-io/nats.go v1.47.0 // indirect
	github.com/nats-io/nkeys v0.4.11 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/redis/go-redis/v9 v9.22.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/crypto v0.37.0 // indirect
	golang.org/x/sync v0.13.0 // indirect
	golang.org/x/sys v0.32.0 // indirect
	golang.org/x/text v0.24.0 // indirect
)

replace (
	github.com/distlock/distlock/core => ./core
	github.com/distlock/distlock/filelock => ./filelock
	github.com/distlock/distlock/natslock => ./natslock
	github.com/distlock/distlock/pglock => ./pglock
	github.com/distlock/distlock/redislock => ./redislock
	github.com/distlock/distlock/redlock => ./redlock
)
