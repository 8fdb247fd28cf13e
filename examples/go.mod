// Not published: these programs run from a clone (go run ./examples/...);
// tests/cmd/release lists the unpublished modules.
module github.com/distlock/distlock/examples

go 1.26.0

require github.com/distlock/distlock/core v0.1.0

replace github.com/distlock/distlock/core => ../core

require (
	github.com/distlock/distlock/filelock v0.1.0
	github.com/distlock/distlock/observe/prometheus v0.1.0
	github.com/prometheus/client_golang v1.23.2
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.5.0 // indirect
	github.com/distlock/distlock/etcdlock v0.1.0 // indirect
	github.com/distlock/distlock/mysqllock v0.1.0 // indirect
	github.com/distlock/distlock/natslock v0.1.0 // indirect
	github.com/distlock/distlock/pglock v0.1.0 // indirect
	github.com/distlock/distlock/redlock v0.1.0 // indirect
	github.com/go-sql-driver/mysql v1.9.3 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.26.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.etcd.io/etcd/api/v3 v3.6.8 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.6.8 // indirect
	go.etcd.io/etcd/client/v3 v3.6.8 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20250303144028-a0af3efb3deb // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250303144028-a0af3efb3deb // indirect
	google.golang.org/grpc v1.71.1 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)

require (
	github.com/distlock/distlock/election v0.1.0
	github.com/distlock/distlock/polllease v0.1.0
	github.com/distlock/distlock/redislock v0.1.0
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/distlock/distlock/filelock => ../filelock

replace github.com/distlock/distlock/election => ../election

replace github.com/distlock/distlock/polllease => ../polllease

replace github.com/distlock/distlock/redislock => ../redislock

replace github.com/distlock/distlock/observe/prometheus => ../observe/prometheus

require github.com/distlock/distlock v0.1.0

replace (
	github.com/distlock/distlock => ../
	github.com/distlock/distlock/etcdlock => ../etcdlock
	github.com/distlock/distlock/mysqllock => ../mysqllock
	github.com/distlock/distlock/natslock => ../natslock
	github.com/distlock/distlock/pglock => ../pglock
	github.com/distlock/distlock/redlock => ../redlock
)
