#!/usr/bin/env bash
# Runs the checks behind the Makefile targets over every module in go.work.
#
#   scripts/test.sh test    gofmt check, then go vet + go test -race in every module,
#                           against throwaway servers (scripts/services.sh)
#   scripts/test.sh vet     go vet in every module
#   scripts/test.sh fmt     gofmt -l check over every module
#   scripts/test.sh bench   benchmarks in every module, against throwaway servers
#
# Every module runs even when an earlier one fails; the exit status is non-zero
# if anything failed, and a summary line per module says which.
#
# Environment:
#   DISTLOCK_FAIL_ON_SKIP=0   only list skipped tests instead of failing on them (skips are
#                             always listed in the summary)
#   DISTLOCK_TEST_TIMEOUT     go test -timeout per module (default 15m)
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

say() { printf '==> %s\n' "$*"; }

# Microseconds since the epoch, and seconds elapsed since such a stamp.
now_us() { echo "${EPOCHREALTIME/./}"; }
since() {
	local d=$(($(now_us) - $1))
	printf '%d.%01ds' $((d / 1000000)) $((d / 100000 % 10))
}

if ! command -v go >/dev/null 2>&1; then
	echo "go not found in PATH: install Go >= 1.24 from https://go.dev/dl/" >&2
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

cleanup() {
	local rc=$?
	# A second signal must not cut the cleanup short (make forwards SIGTERM
	# to its children after the process group already got one).
	trap '' INT TERM HUP
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

start_services() {
	STATEDIR=$WORK/services
	local t0
	t0=$(now_us)
	say "starting services"
	services_started=1 # set first: a half-failed start must still be stopped
	"$ROOT/scripts/services.sh" start "$STATEDIR"
	echo "services started in $(since "$t0")"
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

# go test "$@" in the current dir; skipped tests get appended to $2's file.
run_go_test() {
	local skips=$1
	shift
	if [[ -n $FILTER ]]; then
		# -json lets the filter see skips; it prints normal go test output.
		go test -json "$@" 2>&1 | "$FILTER" -skips "$skips"
		return "${PIPESTATUS[0]}"
	fi
	go test "$@"
}

declare -A RESULT
failed=0
fmt_result=""

if [[ $mode == fmt || $mode == test ]]; then
	say "gofmt"
	if check_fmt; then fmt_result=ok; else fmt_result=FAIL failed=1; fi
fi

if [[ $mode == test || $mode == bench ]]; then
	start_services
	build_filter
fi

if [[ $mode != fmt ]]; then
	timeout=${DISTLOCK_TEST_TIMEOUT:-15m}
	for m in "${MODULES[@]}"; do
		if [[ ! -f $m/go.mod ]]; then
			say "$m: no go.mod"
			RESULT[$m]="FAIL ${m#./}: no go.mod"
			failed=1
			continue
		fi
		parts=() ok=1
		skipfile=$WORK/skips.$(echo "$m" | tr '/.' '__')
		: >"$skipfile"
		if [[ $mode == test || $mode == vet ]]; then
			say "$m: go vet ./..."
			if (cd "$m" && go vet ./...); then
				parts+=("vet ok")
			else
				parts+=("vet FAIL")
				ok=0
			fi
		fi
		if [[ $mode == test ]]; then
			say "$m: go test -race -count=1 ./..."
			t0=$SECONDS
			if (cd "$m" && run_go_test "$skipfile" -race -count=1 -timeout "$timeout" ./...); then
				parts+=("test ok $((SECONDS - t0))s")
			else
				parts+=("test FAIL $((SECONDS - t0))s")
				ok=0
			fi
		fi
		if [[ $mode == bench ]]; then
			say "$m: go test -run '^\$' -bench . -benchtime=2s ./..."
			if (cd "$m" && go test -run '^$' -bench . -benchtime=2s -timeout "$timeout" ./...); then
				parts+=("bench ok")
			else
				parts+=("bench FAIL")
				ok=0
			fi
		fi
		nskip=$(wc -l <"$skipfile")
		if ((nskip > 0)); then
			parts+=("$nskip skipped")
			[[ ${DISTLOCK_FAIL_ON_SKIP:-0} == 1 ]] && ok=0
		fi
		summary=$(printf '%s, ' "${parts[@]}")
		if ((ok)); then
			RESULT[$m]="ok   ${m#./}: ${summary%, }"
		else
			RESULT[$m]="FAIL ${m#./}: ${summary%, }"
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
