#!/usr/bin/env bash
# Runs the checks behind the Makefile targets over every module in go.work.
#
#   scripts/test.sh test    gofmt check, then go vet + go test -race in every module,
#                           against throwaway servers (scripts/services.sh), and
#                           scripts/release-check.sh as one more job
#   scripts/test.sh vet     go vet in every module
#   scripts/test.sh fmt     gofmt -l check over every module
#   scripts/test.sh bench   benchmarks in every module, against throwaway servers
#
# Every module runs even when an earlier one fails; the exit status is non-zero
# if anything failed, and a summary line per module says which.
#
# `test` spends most of its time waiting (on servers, TTLs, timeouts), not
# computing, so it runs in phases:
#   1. while the servers start: the race build of every test package (go
#      list -export), so that the compiler's CPU use does not overlap
#      timing-sensitive tests;
#   2. go test -race in several modules at a time against the shared servers
#      (every test names its keys/tables/buckets uniquely), the slowest
#      modules first, with go vet over all modules (one go command) and make
#      release-check as two more jobs once the slowest have started. Each
#      job's output goes to its own log, printed whole when the job is done,
#      so the output stays readable.
# `bench` runs one module at a time: benchmarks must not share the CPU.
#
# Environment:
#   DISTLOCK_FAIL_ON_SKIP=0   only list skipped tests instead of failing on them (skips are
#                             always listed in the summary)
#   DISTLOCK_TEST_TIMEOUT     go test -timeout per module (default 15m)
#   DISTLOCK_TEST_JOBS        modules tested at a time (default 6; 1 = one after another):
#                             most of a module's test time is waiting, not CPU
#   DISTLOCK_TEST_FIRST       modules to start first, longest first (default below, from
#                             measured run times); the others follow in go.work order
#   DISTLOCK_RELEASE_CHECK=0  test without make release-check (by default test mode runs it
#                             as one more job beside the modules)
#   DISTLOCK_TEST_JSON_DIR    keep each module's `go test -json` output there, as <module>.json
#                             (per-test timings, e.g. to find the slowest tests)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

mode=${1:-test}
case $mode in
test | vet | fmt | bench) ;;
*)
	echo "usage: $0 test|vet|fmt|bench" >&2
	exit 2
	;;
esac

# Module run times of a plain (one module at a time) `make test` on 2 cores:
# tests 84s, redlock 77s, redislock 74s, pglock 59s, natslock 43s,
# polllease 36s, the rest 10s or less. Starting the long ones first keeps the
# critical path at the longest module.
RELEASE_JOB=release-check RELEASE_RESULT="" VET_JOB=go-vet
# test mode runs make release-check as a job beside the modules; 0 turns it off
RELEASE_CHECK=${DISTLOCK_RELEASE_CHECK:-1}
FIRST=${DISTLOCK_TEST_FIRST-tests redlock redislock pglock etcdlock natslock polllease}
JOBS=${DISTLOCK_TEST_JOBS:-6}
if ! [[ $JOBS =~ ^[1-9][0-9]*$ ]]; then
	echo "DISTLOCK_TEST_JOBS must be a positive number, not '$JOBS'" >&2
	exit 2
fi
[[ $mode == bench ]] && JOBS=1

say() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }

# Microseconds since the epoch, and seconds elapsed since such a stamp.
now_us() { echo "${EPOCHREALTIME/./}"; }
since() {
	local d=$(($(now_us) - $1))
	printf '%d.%01ds' $((d / 1000000)) $((d / 100000 % 10))
}

if ! command -v go >/dev/null 2>&1; then
	echo "go not found in PATH: install Go >= 1.26 from https://go.dev/dl/" >&2
	exit 1
fi
go version

# Module dirs from go.work's `use` directives (both `use ./x` and the block
# form); `go work edit -json` does the parsing for us.
MODULES=()
if [[ -f go.work ]]; then
	json=$(go work edit -json go.work)
	while IFS= read -r dir; do
		[[ -n $dir ]] && MODULES+=("${dir%/}")
	done < <(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)",\{0,1\}[[:space:]]*$/\1/p')
fi
if ((${#MODULES[@]} == 0)); then
	echo "no modules (no go.work, or it has no use directives): nothing to do"
	exit 0
fi
echo "modules: ${MODULES[*]}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/distlock-test.XXXXXX")
# The services' statedir lives in here, and PostgreSQL runs as another user
# when we are root: it must be able to traverse this dir.
chmod 755 "$WORK"
STATEDIR=""
services_started=0

# ------------------------------------------------------------ background jobs --
#
# A job runs a command in a subshell of its own process group (so that we can
# stop it with everything it started), with its output in a log file.

declare -A JOB_NAME=() JOB_LOG=() JOB_T0=() # by pid
DONE_NAME="" DONE_LOG="" DONE_RC=0 DONE_SECS=0

# start_job NAME LOG CMD...
start_job() {
	local name=$1 log=$2
	shift 2
	set -m # job control only for this fork: it gives the job its own group
	("$@") </dev/null >"$log" 2>&1 &
	local pid=$!
	set +m
	JOB_NAME[$pid]=$name
	JOB_LOG[$pid]=$log
	JOB_T0[$pid]=$SECONDS
}

# wait_job: waits for any job to end and sets DONE_NAME, DONE_LOG, DONE_RC and
# DONE_SECS.
wait_job() {
	local pid="" rc=0
	wait -n -p pid "${!JOB_NAME[@]}" || rc=$?
	if [[ -z $pid || -z ${JOB_NAME[$pid]+x} ]]; then
		echo "wait_job: no job ended (status $rc)" >&2
		exit 1
	fi
	DONE_NAME=${JOB_NAME[$pid]} DONE_LOG=${JOB_LOG[$pid]} DONE_RC=$rc
	DONE_SECS=$((SECONDS - JOB_T0[$pid]))
	unset "JOB_NAME[$pid]" "JOB_LOG[$pid]" "JOB_T0[$pid]"
}

# stop_jobs interrupts every running job, as Ctrl-C would, and waits for it
# (SIGKILL after 10s).
stop_jobs() {
	local pid i
	((${#JOB_NAME[@]} > 0)) || return 0
	echo "stopping: ${JOB_NAME[*]}"
	for pid in "${!JOB_NAME[@]}"; do
		kill -INT -- "-$pid" 2>/dev/null || true
	done
	for ((i = 0; i < 100; i++)); do
		for pid in "${!JOB_NAME[@]}"; do
			kill -0 -- "-$pid" 2>/dev/null || unset "JOB_NAME[$pid]"
		done
		((${#JOB_NAME[@]} > 0)) || return 0
		sleep 0.1
	done
	for pid in "${!JOB_NAME[@]}"; do
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
}

cleanup() {
	local rc=$?
	# A second signal must not cut the cleanup short (make forwards SIGTERM
	# to its children after the process group already got one).
	trap '' INT TERM HUP
	# Module jobs (and a server start still under way) run in their own
	# process groups, which a Ctrl-C on the terminal does not reach.
	stop_jobs
	# Always stop the servers, whatever happened (test failure, Ctrl-C).
	if ((services_started)); then
		local t0
		t0=$(now_us)
		"$ROOT/scripts/services.sh" stop "$STATEDIR" || true
		echo "services stopped in $(since "$t0")"
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap runs.
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# ----------------------------------------------------------------- services --

# Starts the servers in the background (a job named "services");
# finish_services waits for them.
start_services() {
	STATEDIR=$WORK/services
	say "starting services (in the background)"
	services_started=1 # set first: a half-failed start must still be stopped
	SERVICES_T0=$(now_us)
	start_job services "$WORK/services.log" "$ROOT/scripts/services.sh" start "$STATEDIR"
}

finish_services() {
	# Only the services job can be running here.
	wait_job
	say "services"
	cat "$DONE_LOG"
	if ((DONE_RC != 0)); then
		echo "services failed to start (exit $DONE_RC)"
		exit 1
	fi
	echo "services started in $(since "$SERVICES_T0")"
	# shellcheck disable=SC1091
	source "$STATEDIR/env"
	# Tests that would skip for a missing server must fail instead.
	export DISTLOCK_REQUIRE_SERVERS=1
	# A skipped test is a defect (ARCHITECTURE.md, "Tests and tools"), so make
	# test fails on any skip (set DISTLOCK_FAIL_ON_SKIP=0 to only list them).
	export DISTLOCK_FAIL_ON_SKIP=${DISTLOCK_FAIL_ON_SKIP:-1}
	echo "DISTLOCK_REDIS_ADDRS=$DISTLOCK_REDIS_ADDRS"
	echo "DISTLOCK_PG_URL=$DISTLOCK_PG_URL"
	echo "DISTLOCK_NATS_URL=$DISTLOCK_NATS_URL"
	# Fault tests (tests/) launch their own servers: let them find initdb,
	# pg_ctl and nats-server, which Debian keeps out of a user's PATH.
	export PATH="$PATH:$DISTLOCK_PG_BINDIR:/usr/sbin"
}

# ------------------------------------------------------------------- checks --

# gofmt -l over the modules' Go files (skipping testdata, vendor and hidden
# dirs, which the go tool ignores too).
check_fmt() {
	local -a files
	mapfile -t files < <(
		for m in "${MODULES[@]}"; do
			[[ -d $m ]] || continue
			find "$m" \( -name testdata -o -name vendor -o \( -name '.?*' ! -name . \) \) -prune \
				-o -type f -name '*.go' -print
		done | sort -u | xargs -r gofmt -l 2>&1 # syntax errors get listed too
	)
	if ((${#files[@]} > 0)); then
		echo "gofmt: these files need formatting (run: gofmt -w <file>):"
		printf '  %s\n' "${files[@]}"
		return 1
	fi
	echo "gofmt: ok"
}

# Build the go test output filter (skip reporting) once; without it we fall
# back to plain go test output.
FILTER=""
build_filter() {
	if GOWORK=off GOFLAGS='' go build -o "$WORK/gotestfilter" "$ROOT/scripts/gotestfilter.go" 2>"$WORK/filter-build.log"; then
		FILTER=$WORK/gotestfilter
	else
		echo "note: could not build scripts/gotestfilter.go, skipped tests will not be listed:"
		cat "$WORK/filter-build.log"
	fi
}

# go test "$@" in the current dir; skipped tests get appended to $1's file,
# the -json events written to $2's.
run_go_test() {
	local skips=$1 events=$2
	shift 2
	if [[ -n $FILTER ]]; then
		# -json lets the filter see skips; it prints normal go test output.
		go test -json "$@" 2>&1 | tee "$events" | "$FILTER" -skips "$skips"
		return "${PIPESTATUS[0]}"
	fi
	go test "$@"
}

declare -A RESULT PARTS OK
failed=0
fmt_result=""

# Modules with a go.mod (the others fail at once), and their ./... patterns
# as seen from the workspace root.
GOOD=() PATTERNS=()
for m in "${MODULES[@]}"; do
	PARTS[$m]="" OK[$m]=1
	if [[ -f $m/go.mod ]]; then
		GOOD+=("$m")
		PATTERNS+=("$m/...")
	elif [[ $mode != fmt ]]; then
		say "$m: no go.mod"
	fi
done
add_part() { PARTS[$1]+="${PARTS[$1]:+, }$2"; }

# vet_modules FILE: go vet over every module in one go command (they share
# their dependencies); only when that fails, module by module, to tell which
# failed. Writes "<module> ok|FAIL" lines to FILE.
vet_modules() {
	local out=$1 m rc=0
	if go vet "${PATTERNS[@]}"; then
		for m in "${GOOD[@]}"; do echo "$m ok"; done >"$out"
		return 0
	fi
	: >"$out"
	for m in "${GOOD[@]}"; do
		say "$m: go vet ./..."
		if (cd "$m" && go vet ./...); then echo "$m ok" >>"$out"; else echo "$m FAIL" >>"$out" && rc=1; fi
	done
	return "$rc"
}

# vet_record FILE: vet_modules' results into the summary.
vet_record() {
	local m r
	while read -r m r; do
		if [[ $r == ok ]]; then
			add_part "$m" "vet ok"
		else
			add_part "$m" "vet FAIL"
			OK[$m]=0
		fi
	done <"$1"
}

vet_all() {
	((${#GOOD[@]} > 0)) || return 0
	local t0
	t0=$(now_us)
	say "go vet (${#GOOD[@]} modules)"
	vet_modules "$WORK/vet.status" || true
	vet_record "$WORK/vet.status"
	echo "go vet: done in $(since "$t0")"
}

# Compiles the race build of every test package and its dependencies into the
# build cache (go list -export builds without linking or running anything), so
# that the module jobs only link. A failure here is not reported: go test
# reports the same build errors, in the module they belong to.
prebuild() {
	((${#GOOD[@]} > 0)) || return 0
	local t0
	t0=$(now_us)
	say "building race test packages"
	go list -race -test -deps -export -e "${PATTERNS[@]}" >/dev/null 2>&1 || true
	echo "built in $(since "$t0")"
}

# in_module DIR CMD...: CMD in DIR, its exit status returned (not errexit's).
in_module() {
	local dir=$1
	shift
	cd "$dir" || return
	if "$@"; then return 0; else return; fi
}

# Runs $1 (test|bench) over the modules, up to $JOBS at a time, the ones in
# $FIRST first.
run_modules() {
	local what=$1 m f running=0 nfirst=0
	local -a order=() queue=()
	for f in $FIRST; do
		for m in "${GOOD[@]}"; do
			[[ ${m#./} == "${f#./}" ]] && order+=("$m") && nfirst=$((nfirst + 1))
		done
	done
	for m in "${GOOD[@]}"; do
		[[ " ${order[*]} " == *" $m "* ]] || order+=("$m")
	done
	[[ $what == bench ]] && order=("${GOOD[@]}")
	# make release-check needs no server: it runs as one more job, after
	# the long modules started, while they test.
	if [[ $what == test ]]; then
		# go vet needs no server either: a job beside the tests, so that
		# the tests start once the race build is done.
		local -a extra=("$VET_JOB")
		[[ $RELEASE_CHECK == 1 ]] && extra+=("$RELEASE_JOB")
		order=("${order[@]:0:nfirst}" "${extra[@]}" "${order[@]:nfirst}")
	fi
	queue=("${order[@]}")
	mkdir -p "$WORK/logs" "$WORK/json"
	local timeout=${DISTLOCK_TEST_TIMEOUT:-15m}
	while ((${#queue[@]} > 0 || running > 0)); do
		while ((${#queue[@]} > 0 && running < JOBS)); do
			m=${queue[0]}
			queue=("${queue[@]:1}")
			local id
			id=$(echo "${m#./}" | tr '/.' '__')
			: >"$WORK/skips.$id"
			if [[ $m == "$VET_JOB" ]]; then
				say "$m (${#GOOD[@]} modules, started)"
				start_job "$m" "$WORK/logs/$id" vet_modules "$WORK/vet.status"
			elif [[ $m == "$RELEASE_JOB" ]]; then
				say "$m (started)"
				start_job "$m" "$WORK/logs/$id" scripts/release-check.sh
			elif [[ $what == test ]]; then
				say "$m: go test -race -count=1 ./... (started)"
				start_job "$m" "$WORK/logs/$id" in_module "$m" \
					run_go_test "$WORK/skips.$id" "$WORK/json/$id.json" -race -count=1 -timeout "$timeout" ./...
			else
				start_job "$m" "$WORK/logs/$id" in_module "$m" \
					go test -run '^$' -bench . -benchtime=2s -timeout "$timeout" ./...
			fi
			running=$((running + 1))
		done
		wait_job
		running=$((running - 1))
		m=$DONE_NAME
		if [[ $m == "$VET_JOB" ]]; then
			say "$m ($([[ $DONE_RC == 0 ]] && echo ok || echo FAIL) in ${DONE_SECS}s)"
			cat "$DONE_LOG"
			vet_record "$WORK/vet.status"
			((DONE_RC == 0)) || failed=1
			continue
		elif [[ $m == "$RELEASE_JOB" ]]; then
			say "$m ($([[ $DONE_RC == 0 ]] && echo ok || echo FAIL) in ${DONE_SECS}s)"
			RELEASE_RESULT="$([[ $DONE_RC == 0 ]] && echo "ok  " || echo FAIL) $m: $(tail -n 1 "$DONE_LOG") (${DONE_SECS}s)"
			((DONE_RC == 0)) || failed=1
			cat "$DONE_LOG"
			continue
		elif [[ $what == test ]]; then
			say "$m: go test -race -count=1 ./... ($([[ $DONE_RC == 0 ]] && echo ok || echo FAIL) in ${DONE_SECS}s)"
		else
			say "$m: go test -run '^\$' -bench . -benchtime=2s ./..."
		fi
		cat "$DONE_LOG"
		if ((DONE_RC == 0)); then
			add_part "$m" "$what ok$([[ $what == test ]] && echo " ${DONE_SECS}s")"
		else
			add_part "$m" "$what FAIL$([[ $what == test ]] && echo " ${DONE_SECS}s")"
			OK[$m]=0
		fi
	done
}

# ---------------------------------------------------------------------- main --

if [[ $mode == fmt || $mode == test ]]; then
	say "gofmt"
	if check_fmt; then fmt_result=ok; else fmt_result=FAIL failed=1; fi
fi

if [[ $mode == test || $mode == bench ]]; then
	start_services
fi
if [[ $mode == vet ]]; then
	vet_all
fi
if [[ $mode == test ]]; then
	build_filter
	prebuild
fi
if [[ $mode == test || $mode == bench ]]; then
	finish_services
	run_modules "$mode"
fi

if [[ $mode == test && -n ${DISTLOCK_TEST_JSON_DIR:-} ]] && compgen -G "$WORK/json/*.json" >/dev/null; then
	mkdir -p "$DISTLOCK_TEST_JSON_DIR"
	cp "$WORK"/json/*.json "$DISTLOCK_TEST_JSON_DIR"/
	echo "go test -json output: $DISTLOCK_TEST_JSON_DIR"
fi

if [[ $mode != fmt ]]; then
	for m in "${MODULES[@]}"; do
		if [[ ! -f $m/go.mod ]]; then
			RESULT[$m]="FAIL ${m#./}: no go.mod"
			failed=1
			continue
		fi
		id=$(echo "${m#./}" | tr '/.' '__')
		nskip=0
		[[ -f $WORK/skips.$id ]] && nskip=$(wc -l <"$WORK/skips.$id")
		if ((nskip > 0)); then
			add_part "$m" "$nskip skipped"
			[[ ${DISTLOCK_FAIL_ON_SKIP:-0} == 1 ]] && OK[$m]=0
		fi
		if ((OK[$m])); then
			RESULT[$m]="ok   ${m#./}: ${PARTS[$m]}"
		else
			RESULT[$m]="FAIL ${m#./}: ${PARTS[$m]}"
			failed=1
		fi
	done
fi

echo
echo "==================== summary ($mode) ===================="
if [[ -n $fmt_result ]]; then
	printf '%-4s gofmt\n' "$fmt_result"
fi
if [[ $mode != fmt ]]; then
	for m in "${MODULES[@]}"; do
		echo "${RESULT[$m]}"
	done
	[[ -n $RELEASE_RESULT ]] && echo "$RELEASE_RESULT"
	if cat "$WORK"/skips.* 2>/dev/null | grep -q .; then
		echo "skipped tests:"
		cat "$WORK"/skips.* | sed 's/^/  /'
	fi
fi
if ((failed)); then
	echo "RESULT: FAIL"
	exit 1
fi
echo "RESULT: ok"
