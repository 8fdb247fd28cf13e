// Package launch starts throwaway Redis, PostgreSQL, NATS, MariaDB and etcd
// servers for fault tests: servers a test owns and may kill, pause
// (SIGSTOP) and restart without disturbing the shared servers that `make
// test` starts for the other tests.
//
// Two engines run a server, behind one [Server] interface:
//
//   - Docker, through testcontainers-go, when a Docker engine answers on
//     DOCKER_HOST or /var/run/docker.sock (a developer laptop). Images:
//     redis:7-alpine, postgres:16-alpine, nats:2-alpine, mariadb:11. Each container
//     publishes its port on a fixed free loopback port, so a restarted
//     container keeps its address, and pausing uses `docker pause` (the
//     cgroup freezer, the container's SIGSTOP).
//   - Local binaries otherwise (CI here): redis-server, nats-server,
//     mariadbd/mariadb-install-db and PostgreSQL's initdb/pg_ctl, found in
//     PATH, DISTLOCK_PG_BINDIR,
//     /usr/sbin or /usr/lib/postgresql/*/bin. `make test` installs them and
//     puts them on PATH. PostgreSQL refuses to run as root, so as root the
//     cluster runs as the postgres user (or distlock-pg, which
//     scripts/services.sh creates).
//
// Sentinel starts a Redis deployment under Sentinel (a master, its replica
// and three Sentinels run as `redis-server --sentinel` with a generated
// configuration) from the local redis-server on either engine.
//
// etcd always runs from the local binary (Debian's etcd-server), whichever
// engine runs the others.
//
// DISTLOCK_LAUNCHER=local or =docker forces an engine. Every server listens
// on 127.0.0.1 only, on a free port, keeps its state in a temporary
// directory, and is stopped and removed by the test's Cleanup. When no
// engine can run a server the test is skipped, or fails under CI=true or
// DISTLOCK_REQUIRE_SERVERS=1, as core/locktest.RequireBinary does.
package launch
