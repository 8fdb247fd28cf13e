#!/usr/bin/env bash
# Throwaway backend servers for distlock's tests (see ARCHITECTURE.md, "Tests and tools").
#
#   scripts/services.sh start <statedir>   start 5x redis, a 3-node Redis Cluster, 1x PostgreSQL,
#                                          1x NATS (JetStream), 1x MariaDB, 1x etcd, a 3-member
#                                          etcd cluster
#   scripts/services.sh stop  <statedir>   stop everything recorded in <statedir>
#   scripts/services.sh ensure             only install missing server binaries
#
# `start` writes <statedir>/env with export lines for the tests:
#   DISTLOCK_REDIS_ADDRS, DISTLOCK_REDIS_CLUSTER_ADDRS, DISTLOCK_PG_URL,
#   DISTLOCK_NATS_URL, DISTLOCK_MYSQL_DSN, DISTLOCK_ETCD_ENDPOINTS,
#   DISTLOCK_ETCD_CLUSTER_ENDPOINTS, DISTLOCK_REQUIRE_SERVERS.
# Every server listens on 127.0.0.1 on a random free port and keeps all of its
# state in <statedir>, so several runs can coexist and nothing touches the
# machine's own (system) servers.
set -euo pipefail

REDIS_COUNT=5
REDIS_CLUSTER_COUNT=3 # masters of one Redis Cluster, besides the 5 servers
ETCD_CLUSTER_COUNT=3  # members of one etcd cluster, besides the single member
START_TIMEOUT=${DISTLOCK_SERVICES_TIMEOUT:-30} # seconds to wait for each server
# Ports come from 20000 up to the kernel's ephemeral range (usually from
# 32768), which outgoing connections use: a port there can be taken by a
# client socket between our check and the server's bind.
PORT_MIN=20000
PORT_MAX=45000
if read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null &&
	((eph_lo > PORT_MIN + 2000 && eph_lo <= PORT_MAX)); then
	PORT_MAX=$((eph_lo - 1))
fi

log() { printf 'services: %s\n' "$*" >&2; }
die() { printf 'services: ERROR: %s\n' "$*" >&2; exit 1; }

usage() {
	echo "usage: $0 start|stop <statedir>   |   $0 ensure" >&2
	exit 2
}

# ---------------------------------------------------------------- binaries --

# Debian keeps nats-server in /usr/sbin and PostgreSQL in a versioned libdir,
# neither of which is necessarily in a non-root PATH.
find_bin() {
	local name=$1 dir
	if command -v "$name" >/dev/null 2>&1; then
		command -v "$name"
		return 0
	fi
	for dir in /usr/sbin /usr/local/sbin /sbin; do
		if [[ -x $dir/$name ]]; then
			echo "$dir/$name"
			return 0
		fi
	done
	return 1
}

# Directory holding initdb/pg_ctl/postgres: PATH first, else the newest
# /usr/lib/postgresql/<ver>/bin.
find_pg_bindir() {
	local p dir
	# Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin)
	# so psql/pg_isready are found next to initdb.
	if p=$(command -v initdb 2>/dev/null) && p=$(readlink -f "$p") &&
		[[ -x $(dirname "$p")/pg_ctl ]]; then
		dirname "$p"
		return 0
	fi
	local best="" bestver=-1 ver
	for dir in /usr/lib/postgresql/*/bin; do
		[[ -x $dir/initdb && -x $dir/pg_ctl ]] || continue
		ver=${dir#/usr/lib/postgresql/}
		ver=${ver%%/*}
		ver=${ver%%.*} # 9.6 -> 9
		[[ $ver =~ ^[0-9]+$ ]] || ver=0
		if ((ver > bestver)); then
			best=$dir
			bestver=$ver
		fi
	done
	[[ -n $best ]] && echo "$best"
}

missing_packages() {
	local pkgs=()
	find_bin redis-server >/dev/null || pkgs+=(redis-server)
	find_bin redis-cli >/dev/null || pkgs+=(redis-tools)
	find_bin nats-server >/dev/null || pkgs+=(nats-server)
	find_pg_bindir >/dev/null || pkgs+=(postgresql)
	# psql runs polllease's inspection recipes (tests/polllease_inspect_test.go).
	command -v psql >/dev/null 2>&1 || pkgs+=(postgresql-client)
	missing_mysql_packages pkgs
	find_bin etcd >/dev/null || pkgs+=(etcd-server)
	# `go test -race` needs cgo, hence a C compiler.
	command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev)
	echo "${pkgs[*]}"
}

# Installs missing server binaries with apt when we can (root on Debian),
# otherwise says exactly what to run.
ensure() {
	local pkgs
	pkgs=$(missing_packages)
	[[ -z $pkgs ]] && return 0

	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		log "missing server binaries; install them with:"
		log "  sudo sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs'"
		log "(Debian/Ubuntu package names; PostgreSQL's initdb/pg_ctl may also be in PATH or /usr/lib/postgresql/*/bin)"
		die "missing packages: $pkgs"
	fi

	# Only what is missing: re-installing present packages would upgrade them.
	log "installing with apt-get: $pkgs"
	# The Debian packages start system-wide services from their postinst.
	# We never use them (we run our own servers on random ports), so forbid
	# service starts for the duration of the install via policy-rc.d, which
	# invoke-rc.d and deb-systemd-invoke both honour. Only remove the file if
	# we created it.
	local policy=/usr/sbin/policy-rc.d created_policy=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		created_policy=1
	fi
	local rc=0
	local -a pkglist
	read -r -a pkglist <<<"$pkgs"
	{
		export DEBIAN_FRONTEND=noninteractive
		apt-get update && apt-get install -y --no-install-recommends "${pkglist[@]}"
	} >&2 || rc=$?
	((created_policy)) && rm -f "$policy"
	((rc == 0)) || die "apt-get install failed (exit $rc)"

	# Belt and braces: if a system service got started anyway, stop it; it
	# would only hold memory (we never use the default ports).
	local svc
	for svc in redis-server nats-server postgresql mariadb etcd; do
		if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
			systemctl stop "$svc" >/dev/null 2>&1 || true
			systemctl disable "$svc" >/dev/null 2>&1 || true
		elif [[ -x /etc/init.d/$svc ]]; then
			/etc/init.d/"$svc" stop >/dev/null 2>&1 || true
		fi
	done

	pkgs=$(missing_packages)
	[[ -z $pkgs ]] || die "still missing after install: $pkgs"
}

# ------------------------------------------------------------------- ports --

# Ports handed out by this run, so two servers never get the same one even
# before the first has bound it.
USED_PORTS=" "

port_in_use() {
	# ss sees any TCP socket on that local port, listening or connected
	# (either makes a bind fail); without ss, a successful connect means
	# something listens there.
	if command -v ss >/dev/null 2>&1; then
		ss -Htan "sport = :$1" 2>/dev/null | grep -q . && return 0
	fi
	if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
		return 0
	fi
	return 1
}

# Sets FREE_PORT to a random unused port (no stdout: we must not lose
# USED_PORTS to a subshell). Binding can still race with another process;
# callers retry with a new port if the server fails to start.
pick_port() {
	local i p
	for ((i = 0; i < 200; i++)); do
		p=$((PORT_MIN + (RANDOM * 32768 + RANDOM) % (PORT_MAX - PORT_MIN + 1)))
		[[ $USED_PORTS == *" $p "* ]] && continue
		port_in_use "$p" && continue
		USED_PORTS+="$p "
		FREE_PORT=$p
		return 0
	done
	die "no free port found in $PORT_MIN-$PORT_MAX"
}

# ------------------------------------------------------------------ helpers --

# Polls "$@" until it succeeds (0), says the server died (2), or
# START_TIMEOUT passes.
wait_for() {
	local deadline=$((SECONDS + START_TIMEOUT)) rc
	while :; do
		rc=0
		"$@" >/dev/null 2>&1 || rc=$?
		((rc == 0)) && return 0
		((rc == 2)) && return 1
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

log_tail() {
	local f=$1
	echo "----- last lines of $f -----" >&2
	tail -n 30 "$f" >&2 2>/dev/null || echo "(no log)" >&2
	echo "-----" >&2
}

# A zombie counts as dead: it has exited and only waits for its parent (after
# we exit, init, which may reap lazily) to collect it.
pid_alive() {
	local pid=${1:-} stat
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0 # no /proc: trust kill -0
	stat=${stat##*) } # field 3 (state) follows "(comm) "
	[[ ${stat:0:1} != Z ]]
}

# Does process $1 look like program $2? Guards against killing an unrelated
# process that reused a recorded pid.
pid_is() {
	local pid=$1 name=$2 comm
	pid_alive "$pid" || return 1
	comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0 # no /proc: trust the pid
	[[ $comm == *"$name"* ]]
}

# SIGTERM, wait up to 5s, then SIGKILL.
kill_pid() {
	local pid=$1 i
	pid_alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# PostgreSQL refuses to run as root, so as root we run it as a system user:
# `postgres` if the package created it, else our own `distlock-pg`.
pg_user() {
	if [[ $(id -u) -ne 0 ]]; then
		id -un
	elif id postgres >/dev/null 2>&1; then
		echo postgres
	else
		if ! id distlock-pg >/dev/null 2>&1; then
			useradd --system --no-create-home --home-dir /nonexistent \
				--shell /usr/sbin/nologin distlock-pg >&2 ||
				die "could not create user distlock-pg"
		fi
		echo distlock-pg
	fi
}

# Runs a command as the PostgreSQL user (directly when that is us).
as_pg() {
	local user=$1
	shift
	if [[ $(id -un) == "$user" ]]; then
		"$@"
	else
		runuser -u "$user" -- "$@"
	fi
}

# ------------------------------------------------------------------- redis --

# start_redis STATE I [cluster]: an independent server, or with "cluster"
# a node of the Redis Cluster (create_redis_cluster joins them).
start_redis() {
	local state=$1 i=$2 mode=${3:-} port attempt dir pid redis extra=()
	redis=$(find_bin redis-server) || die "redis-server not found"
	dir=$state/redis$i
	if [[ $mode == cluster ]]; then
		dir=$state/redisc$i
		extra=(--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000)
	fi
	mkdir -p "$dir"
	for attempt in 1 2 3 4 5; do
		pick_port
		port=$FREE_PORT
		# A cluster node also listens on port + 10000 (the cluster bus).
		if [[ $mode == cluster ]] && port_in_use $((port + 10000)); then
			continue
		fi
		# Not --daemonize: we want the pid at once, to notice a failed start
		# (e.g. port taken) without waiting for the timeout. Own session and
		# all fds redirected, so it neither dies with our terminal nor keeps a
		# caller's pipe (e.g. `make test | tee`) open.
		# No persistence at all: tests must not leave data behind on disk, and
		# RDB/AOF fsyncs only slow things down.
		setsid "$redis" --port "$port" --bind 127.0.0.1 \
			--save "" --appendonly no --daemonize no \
			--logfile "$dir/redis.log" --dir "$dir" "${extra[@]}" \
			</dev/null >>"$dir/redis.out" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/pid"
		if wait_for redis_ready "$pid" "$port"; then
			echo "$port" >"$dir/port"
			if [[ $mode == cluster ]]; then
				REDIS_CLUSTER_ADDRS+=${REDIS_CLUSTER_ADDRS:+,}127.0.0.1:$port
			else
				REDIS_ADDRS+=${REDIS_ADDRS:+,}127.0.0.1:$port
			fi
			return 0
		fi
		kill_pid "$pid"
		log "redis $i did not start on port $port (attempt $attempt)"
		log_tail "$dir/redis.out"
		log_tail "$dir/redis.log"
	done
	die "redis $i failed to start"
}

# create_redis_cluster assigns every hash slot to the cluster nodes (no
# replicas) and waits until each node reports the cluster healthy.
create_redis_cluster() {
	local addr
	# shellcheck disable=SC2046 # one word per node address
	timeout 30 redis-cli --cluster create $(tr ',' ' ' <<<"$REDIS_CLUSTER_ADDRS") \
		--cluster-replicas 0 --cluster-yes >"$1/redis-cluster.out" 2>&1 ||
		{ log_tail "$1/redis-cluster.out"; die "redis cluster create failed"; }
	for addr in ${REDIS_CLUSTER_ADDRS//,/ }; do
		wait_for redis_cluster_ok "${addr#*:}" || die "redis cluster node $addr not ok"
	done
}

redis_cluster_ok() {
	timeout 2 redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'
}

# Ready when our process answers PING on the port; 2 when it already died.
redis_ready() {
	local pid=$1 port=$2
	pid_alive "$pid" || return 2
	# timeout: whatever else might hold the port must not hang us.
	[[ $(timeout 2 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] || return 1
	# ...and it must be our server answering, not another one on that port.
	timeout 2 redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$pid"
}

# -------------------------------------------------------------- postgresql --

start_pg() {
	local state=$1 bindir user dir data sock port attempt
	bindir=$(find_pg_bindir) || die "PostgreSQL initdb/pg_ctl not found"
	user=$(pg_user)
	dir=$state/pg
	data=$dir/data
	mkdir -p "$dir"
	echo "$user" >"$dir/user"
	echo "$bindir" >"$dir/bindir"

	# Unix socket paths are limited to ~107 bytes; fall back to /tmp for a
	# long statedir (recorded so stop can clean it up).
	sock=$dir/sock
	if ((${#sock} > 80)); then
		sock=$(mktemp -d /tmp/distlock-pgsock.XXXXXX)
		echo "$sock" >"$dir/tmpsock"
	fi
	mkdir -p "$sock"

	if [[ $(id -u) -eq 0 ]]; then
		# The pg user must be able to reach its directories through the
		# statedir (mktemp -d makes it 0700 root).
		chmod 755 "$state"
		chown -R "$user" "$dir" "$sock"
		as_pg "$user" test -w "$dir" ||
			die "user $user cannot write $dir: a parent directory of the statedir is not world-searchable (chmod o+x it, or use a statedir under /tmp)"
	fi

	# --no-sync / fsync=off: a throwaway cluster needs no durability.
	if ! as_pg "$user" "$bindir/initdb" -D "$data" --auth=trust -U distlock \
		-E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
		log_tail "$dir/initdb.log"
		die "initdb failed"
	fi
	cat >>"$data/postgresql.conf" <<EOF

# distlock test cluster (scripts/services.sh)
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
max_connections = 500
fsync = off
synchronous_commit = off
full_page_writes = off
EOF

	for attempt in 1 2 3 4 5; do
		pick_port
		port=$FREE_PORT
		# -w: pg_ctl itself waits until the server accepts connections.
		if as_pg "$user" "$bindir/pg_ctl" -D "$data" -l "$dir/postgres.log" \
			-o "-p $port" -w -t "$START_TIMEOUT" start >>"$dir/pg_ctl.log" 2>&1 &&
			wait_for pg_ready "$bindir" "$port"; then
			echo "$port" >"$dir/port"
			break
		fi
		log "postgres did not start on port $port (attempt $attempt)"
		log_tail "$dir/postgres.log"
		as_pg "$user" "$bindir/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
		((attempt < 5)) || die "postgres failed to start"
	done

	local psql=$bindir/psql
	[[ -x $psql ]] || psql=psql
	if ! "$psql" -X -q -h 127.0.0.1 -p "$port" -U distlock -d postgres \
		-v ON_ERROR_STOP=1 -c 'CREATE DATABASE distlock' >>"$dir/pg_ctl.log" 2>&1; then
		log_tail "$dir/pg_ctl.log"
		die "could not create database distlock"
	fi
	PG_URL="postgres://distlock@127.0.0.1:$port/distlock?sslmode=disable"
	PG_BINDIR=$bindir
}

pg_ready() {
	local bindir=$1 port=$2 isready=$1/pg_isready
	[[ -x $isready ]] || isready=pg_isready
	"$isready" -q -h 127.0.0.1 -p "$port" -U distlock -d postgres
}

stop_pg() {
	local dir=$1/pg user bindir
	[[ -d $dir/data ]] || return 0
	user=$(cat "$dir/user" 2>/dev/null || id -un)
	bindir=$(cat "$dir/bindir" 2>/dev/null || find_pg_bindir || true)
	if [[ -f $dir/data/postmaster.pid && -n $bindir ]]; then
		# immediate: no checkpoint, the cluster is thrown away anyway.
		as_pg "$user" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
	fi
	# If pg_ctl could not do it, kill the postmaster by its recorded pid.
	if [[ -f $dir/data/postmaster.pid ]]; then
		local pid
		pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
		pid_is "$pid" postgres && kill_pid "$pid"
	fi
	if [[ -f $dir/tmpsock ]]; then
		rm -rf "$(cat "$dir/tmpsock")"
		rm -f "$dir/tmpsock"
	fi
}

# -------------------------------------------------------------------- nats --

start_nats() {
	local state=$1 dir port attempt pid nats
	nats=$(find_bin nats-server) || die "nats-server not found"
	dir=$state/nats
	mkdir -p "$dir"
	for attempt in 1 2 3 4 5; do
		pick_port
		port=$FREE_PORT
		rm -f "$dir/nats.pid"
		# nats-server cannot daemonize: run it in its own session with all
		# fds redirected, so it neither dies with our terminal nor keeps a
		# caller's pipe (e.g. `make test | tee`) open. No -m: monitoring off.
		setsid "$nats" -js -a 127.0.0.1 -p "$port" -sd "$dir" \
			-l "$dir/nats.log" -P "$dir/nats.pid" </dev/null >>"$dir/nats.out" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/pid"
		if wait_for nats_ready "$pid" "$port"; then
			echo "$port" >"$dir/port"
			NATS_URL="nats://127.0.0.1:$port"
			return 0
		fi
		kill_pid "$pid"
		log "nats did not start on port $port (attempt $attempt)"
		log_tail "$dir/nats.out"
		log_tail "$dir/nats.log"
	done
	die "nats-server failed to start"
}

# Ready when our process runs and the server's INFO greeting on the port says
# JetStream is enabled; 2 when the process already died.
nats_ready() {
	local pid=$1 port=$2 line
	pid_alive "$pid" || return 2
	# Subshell: a failed connect must not take the script down.
	line=$(
		exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
		read -r -t 2 l <&3 && echo "$l"
	) || return 1
	[[ $line == INFO* && $line == *'"jetstream":true'* ]]
}

# -------------------------------------------------------------------- etcd --

# start_etcd STATE NAME N: an etcd cluster of N members (N = 1: a single
# member) on free ports (clients, peers), in STATE/NAME/m1..mN. Sets
# ETCD_STARTED to the members' client addresses, comma-separated.
start_etcd() {
	local state=$1 name=$2 n=$3 etcd attempt i ok cluster
	local -a ports peers
	etcd=$(find_bin etcd) || die "etcd not found"
	for attempt in 1 2 3 4 5; do
		cluster=""
		for ((i = 1; i <= n; i++)); do
			pick_port
			ports[i]=$FREE_PORT
			pick_port
			peers[i]=$FREE_PORT
			cluster+="${cluster:+,}$name$i=http://127.0.0.1:${peers[i]}"
		done
		for ((i = 1; i <= n; i++)); do
			start_etcd_member "$etcd" "$state/$name/m$i" "$name$i" "${ports[i]}" "${peers[i]}" "$cluster"
		done
		ok=1
		for ((i = 1; i <= n; i++)); do
			wait_for etcd_ready "$(cat "$state/$name/m$i/pid")" "${ports[i]}" || ok=0
		done
		if ((ok)); then
			ETCD_STARTED=""
			for ((i = 1; i <= n; i++)); do
				ETCD_STARTED+="${ETCD_STARTED:+,}127.0.0.1:${ports[i]}"
			done
			return 0
		fi
		log "etcd $name did not start (attempt $attempt)"
		for ((i = 1; i <= n; i++)); do
			log_tail "$state/$name/m$i/etcd.log"
		done
		stop_etcd "$state" "$name"
	done
	die "etcd $name failed to start"
}

# start_etcd_member ETCD DIR NAME PORT PEER CLUSTER: one member, its pid in
# DIR. Its data directory lives in shared memory when the machine has one:
# a throwaway member needs no durability, and a WAL fsync on a loaded disk
# costs every write milliseconds. The path is recorded for stop_etcd.
start_etcd_member() {
	local etcd=$1 dir=$2 name=$3 port=$4 peer=$5 cluster=$6 data
	mkdir -p "$dir"
	data=$dir/data
	if [[ -d /dev/shm && -w /dev/shm ]]; then
		data=$(mktemp -d /dev/shm/distlock-etcd.XXXXXX)
		echo "$data" >"$dir/shmdata"
	fi
	# Own session, all fds redirected, as for nats-server.
	setsid "$etcd" --name "$name" --data-dir "$data" --logger zap \
		--listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
		--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "$cluster" --initial-cluster-state new \
		</dev/null >>"$dir/etcd.log" 2>&1 &
	echo "$!" >"$dir/pid"
}

# Ready when our process runs and its /health says so (the member has a
# leader); 2 when the process already died.
etcd_ready() {
	local pid=$1 port=$2 body
	pid_alive "$pid" || return 2
	# Subshell: a failed connect must not take the script down.
	body=$(
		exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
		printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
		timeout 2 cat <&3
	) || return 1
	[[ $body == *'"health":"true"'* ]]
}

# etcd_running STATE NAME: every member of NAME runs.
etcd_running() {
	local f n=0
	for f in "$1/$2"/m*/pid; do
		[[ -f $f ]] && pid_alive "$(cat "$f")" || return 1
		n=$((n + 1))
	done
	((n > 0))
}

# stop_etcd STATE NAME: stop every member of NAME and drop its data.
stop_etcd() {
	local m pid
	for m in "$1/$2"/m*; do
		[[ -d $m ]] || continue
		if [[ -f $m/pid ]]; then
			pid=$(cat "$m/pid")
			pid_is "$pid" etcd && kill_pid "$pid"
			rm -f "$m/pid"
		fi
		if [[ -f $m/shmdata ]]; then
			rm -rf "$(cat "$m/shmdata")"
			rm -f "$m/shmdata"
		fi
	done
}

# ------------------------------------------------------------------ mysql --

# missing_mysql_packages ARRAY: appends the Debian package of MariaDB's
# server (mariadbd, mariadb-install-db) to ARRAY when it is not installed.
missing_mysql_packages() {
	local -n out=$1
	find_bin mariadbd >/dev/null && find_bin mariadb-install-db >/dev/null || out+=(mariadb-server)
}

# start_mysql STATE: one MariaDB server on a free loopback port, its data
# directory and socket in STATE/mysql, no networking beyond 127.0.0.1. The
# user root (unix socket auth) creates the database distlock and a user
# distlock with no password, for the tests. Sets MYSQL_DSN (Go driver form).
start_mysql() {
	local state=$1 dir mysqld installdb port attempt pid user=() sock
	mysqld=$(find_bin mariadbd) || die "mariadbd not found"
	installdb=$(find_bin mariadb-install-db) || die "mariadb-install-db not found"
	dir=$state/mysql
	mkdir -p "$dir/data"
	# Socket paths are limited to ~107 bytes, as for PostgreSQL.
	sock=$dir/mysqld.sock
	if ((${#sock} > 80)); then
		sock=$(mktemp -d /tmp/distlock-mysqlsock.XXXXXX)/mysqld.sock
		echo "${sock%/*}" >"$dir/tmpsock"
	fi
	if [[ $(id -u) -eq 0 ]]; then
		user=(--user=root) # mariadbd refuses to run as root without it
	fi
	if ! "$installdb" --no-defaults "${user[@]}" --datadir="$dir/data" \
		--auth-root-authentication-method=socket --skip-test-db \
		>"$dir/install-db.log" 2>&1; then
		log_tail "$dir/install-db.log"
		die "mariadb-install-db failed"
	fi
	for attempt in 1 2 3 4 5; do
		pick_port
		port=$FREE_PORT
		# Durable enough for the tests and fast: each commit reaches the OS
		# (a killed mariadbd loses nothing), no fsync per commit.
		setsid "$mysqld" --no-defaults "${user[@]}" --datadir="$dir/data" \
			--bind-address=127.0.0.1 --port="$port" --socket="$sock" \
			--pid-file="$dir/mysqld.pid" --log-error="$dir/mysqld.log" \
			--skip-name-resolve --max-connections=1000 \
			--innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=64M \
			--skip-log-bin </dev/null >>"$dir/mysqld.out" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/pid"
		if wait_for mysql_ready "$pid" "$sock"; then
			echo "$port" >"$dir/port"
			echo "$sock" >"$dir/sock"
			break
		fi
		kill_pid "$pid"
		log "mariadb did not start on port $port (attempt $attempt)"
		log_tail "$dir/mysqld.log"
		((attempt < 5)) || die "mariadb failed to start"
	done
	if ! mysql_root "$sock" -e "CREATE DATABASE distlock;
		CREATE USER 'distlock'@'127.0.0.1' IDENTIFIED BY '';
		GRANT ALL ON *.* TO 'distlock'@'127.0.0.1' WITH GRANT OPTION;" >>"$dir/mysqld.out" 2>&1; then
		log_tail "$dir/mysqld.out"
		die "could not create the distlock database and user"
	fi
	MYSQL_DSN="distlock@tcp(127.0.0.1:$port)/distlock"
}

# Runs the mariadb client as the server's root (socket authentication).
mysql_root() {
	local sock=$1 client
	shift
	client=$(find_bin mariadb || find_bin mysql) || return 1
	if [[ $(id -u) -eq 0 ]]; then
		timeout 10 "$client" --no-defaults -S "$sock" -u root "$@"
	else
		timeout 10 "$client" --no-defaults -S "$sock" -u "$(id -un)" "$@"
	fi
}

# Ready when our process runs and answers on its socket; 2 when it died.
mysql_ready() {
	local pid=$1 sock=$2
	pid_alive "$pid" || return 2
	mysql_root "$sock" -e 'SELECT 1'
}

mysql_running() {
	local f=$1/mysql/pid
	[[ -f $f ]] && pid_alive "$(cat "$f")"
}

stop_mysql() {
	local dir=$1/mysql pid
	if [[ -f $dir/pid ]]; then
		pid=$(cat "$dir/pid")
		pid_is "$pid" mariadbd && kill_pid "$pid"
		rm -f "$dir/pid"
	fi
	if [[ -f $dir/tmpsock ]]; then
		rm -rf "$(cat "$dir/tmpsock")"
		rm -f "$dir/tmpsock"
	fi
}

# ------------------------------------------------------------------ start --

cmd_start() {
	local state=$1
	ensure

	REDIS_ADDRS=""
	REDIS_CLUSTER_ADDRS=""
	local i
	for ((i = 1; i <= REDIS_COUNT; i++)); do
		start_redis "$state" "$i"
	done
	for ((i = 1; i <= REDIS_CLUSTER_COUNT; i++)); do
		start_redis "$state" "$i" cluster
	done
	create_redis_cluster "$state"
	start_pg "$state"
	start_nats "$state"
	start_mysql "$state"
	start_etcd "$state" etcd 1
	ETCD_ENDPOINTS=$ETCD_STARTED
	start_etcd "$state" etcdc "$ETCD_CLUSTER_COUNT"
	ETCD_CLUSTER_ENDPOINTS=$ETCD_STARTED

	cat >"$state/env.tmp" <<EOF
export DISTLOCK_REDIS_ADDRS=$REDIS_ADDRS
export DISTLOCK_REDIS_CLUSTER_ADDRS=$REDIS_CLUSTER_ADDRS
export DISTLOCK_PG_URL='$PG_URL'
export DISTLOCK_NATS_URL=$NATS_URL
export DISTLOCK_MYSQL_DSN='$MYSQL_DSN'
export DISTLOCK_ETCD_ENDPOINTS=$ETCD_ENDPOINTS
export DISTLOCK_ETCD_CLUSTER_ENDPOINTS=$ETCD_CLUSTER_ENDPOINTS
export DISTLOCK_REQUIRE_SERVERS=1
export DISTLOCK_PG_BINDIR=$PG_BINDIR
EOF
	mv "$state/env.tmp" "$state/env"
	log "started (env: $state/env)"
}

# die() exits from deep inside the start functions; running them in a
# subshell lets us stop whatever was already started, so a failed start never
# leaves half a set of servers running.
cmd_start_guarded() {
	local state=$1 rc=0
	mkdir -p "$state"
	state=$(cd "$state" && pwd)
	if [[ -f $state/env ]]; then
		if all_running "$state"; then
			log "already running (env: $state/env)"
			return 0
		fi
		# Left over from a run that died (or a reboot): start afresh.
		log "stale services in $state: restarting"
		cmd_stop "$state"
	fi
	rm -rf "$state"/redis[0-9]* "$state"/redisc[0-9]* "$state/pg" "$state/nats" "$state/mysql" "$state/etcd" "$state/etcdc"
	(cmd_start "$state") || rc=$?
	if ((rc != 0)); then
		log "start failed; stopping what was started"
		cmd_stop "$state" || true
		exit "$rc"
	fi
}

# Are all servers recorded in the statedir still running?
all_running() {
	local state=$1 f n=0
	for f in "$state"/redis*/pid "$state/nats/pid"; do
		[[ -f $f ]] && pid_alive "$(cat "$f")" || return 1
		n=$((n + 1))
	done
	((n == REDIS_COUNT + REDIS_CLUSTER_COUNT + 1)) || return 1
	f=$state/pg/data/postmaster.pid
	[[ -f $f ]] && pid_alive "$(head -n 1 "$f")" || return 1
	etcd_running "$state" etcd || return 1
	etcd_running "$state" etcdc || return 1
	mysql_running "$state"
}

# ------------------------------------------------------------------- stop --

cmd_stop() {
	local state=$1 f pid
	[[ -d $state ]] || return 0
	stop_mysql "$state"
	stop_etcd "$state" etcd
	stop_etcd "$state" etcdc
	stop_pg "$state"
	if [[ -f $state/nats/pid ]]; then
		pid=$(cat "$state/nats/pid")
		pid_is "$pid" nats && kill_pid "$pid"
		rm -f "$state/nats/pid"
	fi
	for f in "$state"/redis*/pid; do
		[[ -f $f ]] || continue
		pid=$(cat "$f")
		pid_is "$pid" redis && kill_pid "$pid"
		rm -f "$f"
	done
	rm -f "$state/env"
	return 0
}

# -------------------------------------------------------------------- main --

[[ $# -ge 1 ]] || usage
case $1 in
start)
	[[ $# -eq 2 ]] || usage
	cmd_start_guarded "$2"
	;;
stop)
	[[ $# -eq 2 ]] || usage
	cmd_stop "$2"
	;;
ensure)
	ensure
	;;
*) usage ;;
esac
