// Command lockbench compares distlock's backends with other Go lock
// libraries and with raw floors (the least code that makes a lock on each
// server) on the same servers, in one run. It has four modes.
//
// The shared mode (the default) measures
//
//   - uncontended: TryAcquire+Release cycles, p50 and p99;
//   - contended: 8 workers of one process (one client per case, shared;
//     filelock gives each worker its own Provider) hold the lock 1 ms and
//     think 2 ms between tries; utilization-% (time the lock was held /
//     wall time), p99 wait, and a mutual-exclusion check.
//
// The multi-process mode (-procs W) runs each contended case with W worker
// processes: lockbench re-executes itself once per worker, and each worker
// opens its case's source alone, so it has one Provider or client of its
// own, as separate services would. The workers hold 1 ms and think 2 ms
// for -duration; utilization is the share of that window during which
// some worker held the lock, from the hold intervals every worker reports
// (any two that overlap are reported and fail the run); also the p99 wait
// and the fewest grants any worker got over the mean (fairness).
//
// The latency mode (-delay D) runs the RedLock cases over 1, 3 and 5
// servers, redsync and the raw quorum uncontended, each server reached
// through a proxy adding D each way (tests/internal/delayproxy), as a
// network would.
//
// The deadline mode (-deadline D) measures how late an Acquire bounded by a
// context deadline D returns while the lock is held through another
// Provider or client (the case's source opened twice), -n times per case.
//
// Cases are interleaved round by round so machine noise hits all alike.
// Servers come from the same environment variables as the tests
// (DISTLOCK_REDIS_ADDRS, DISTLOCK_PG_URL, DISTLOCK_NATS_URL,
// DISTLOCK_MYSQL_DSN, DISTLOCK_ETCD_ENDPOINTS); a backend whose variable is
// unset is left out. Run it from the repository root:
//
//	make services-up && . .services/env && go run ./tests/cmd/lockbench
//	go run ./tests/cmd/lockbench -procs 8 -duration 5s -rounds 3
//	go run ./tests/cmd/lockbench -delay 500us -n 500
//	go run ./tests/cmd/lockbench -deadline 100ms -n 50
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// benchCase is one contender: New returns a Locker for the named lock on
// its own client connection(s) shared by all the Lockers it returns.
type benchCase struct {
	Name string
	New  func(name string) core.Locker
	// src is the index in sources() of the source the case came from: a
	// worker process opens that source alone.
	src int
}

// uncontendedChunk is how many uncontended cycles a case runs before the
// next case takes its turn.
const uncontendedChunk = 10

// source returns the cases of one backend and a cleanup func, or an error
// when its server is not configured.
type source func() ([]benchCase, func(), error)

func main() {
	rounds := flag.Int("rounds", 3, "interleaved rounds per case")
	uncontended := flag.Int("n", 500, "uncontended cycles per round")
	grants := flag.Int("grants", 400, "contended grants per round (shared mode)")
	only := flag.String("run", "", "regexp: only cases whose name matches")
	procs := flag.Int("procs", 0, "multi-process mode: contended cases with this many worker processes")
	duration := flag.Duration("duration", 5*time.Second, "multi-process mode: measured time per case and round")
	delay := flag.Duration("delay", 0, "latency mode: RedLock cases through proxies adding this delay each way")
	deadline := flag.Duration("deadline", 0, "deadline mode: how late an Acquire with this deadline returns behind a holder (-n tries)")
	var w workerArgs
	w.flags()
	flag.Parse()
	if w.on {
		os.Exit(runWorker(w))
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(2)
	}
	switch {
	case *delay > 0:
		os.Exit(runLatency(re, *delay, *rounds, *uncontended))
	case *deadline > 0:
		cases, cleanup := loadCases(re)
		rc := runDeadline(cases, *deadline, *uncontended)
		cleanup()
		os.Exit(rc)
	case *procs > 0:
		cases, cleanup := loadCases(re)
		defer cleanup()
		runProcs(cases, procsConfig{workers: *procs, rounds: *rounds, duration: *duration})
	default:
		cases, cleanup := loadCases(re)
		defer cleanup()
		runShared(cases, *rounds, *uncontended, *grants)
	}
}

// loadCases opens every configured source and returns the cases whose
// name matches re; it exits when there are none.
func loadCases(re *regexp.Regexp) ([]benchCase, func()) {
	var cases []benchCase
	var cleanups []func()
	for i, src := range sources() {
		cs, cleanup, err := src()
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench: skipping:", err)
			continue
		}
		cleanups = append(cleanups, cleanup)
		for _, c := range cs {
			if re.MatchString(c.Name) {
				c.src = i
				cases = append(cases, c)
			}
		}
	}
	cleanup := func() {
		for _, c := range slices.Backward(cleanups) {
			c()
		}
	}
	if len(cases) == 0 {
		cleanup()
		fmt.Fprintln(os.Stderr, "lockbench: no cases (set DISTLOCK_*_ADDRS/URL, see BENCHMARKS.md)")
		os.Exit(1)
	}
	return cases, cleanup
}

// runShared is the shared-Provider mode: uncontended cycles, then each
// case's 8 contended workers as goroutines of this process.
func runShared(cases []benchCase, rounds, uncontended, grants int) {
	ctx := context.Background()
	results := make([]result, len(cases))
	for round := range rounds {
		ids := make([]string, len(cases))
		solo := make([]core.Locker, len(cases)) // one Locker per case and round
		for i, c := range cases {
			ids[i] = fmt.Sprintf("lockbench/%s/%08x", c.Name, rand.Uint32())
			solo[i] = c.New(ids[i] + "/u")
		}
		measure := func(i, chunk int) ([]time.Duration, error) {
			return locktest.MeasureUncontended(ctx, solo[i], chunk)
		}
		for i, lat := range takeTurns(cases, uncontended, measure) {
			results[i].uncontended = append(results[i].uncontended, lat...)
		}
		for i, c := range cases {
			lockers := make([]core.Locker, 8)
			for w := range lockers {
				lockers[w] = c.New(ids[i] + "/c")
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			r, err := locktest.MeasureContended(cctx, lockers, locktest.Contention{Grants: grants})
			cancel()
			if err != nil {
				fail(c, err)
			}
			results[i].add(r)
			fmt.Fprintf(os.Stderr, "round %d %-28s %s\n", round+1, c.Name, r)
		}
	}
	printTable(cases, results)
}

// takeTurns runs measure n times per case, in turns of uncontendedChunk
// calls, and returns each case's results. Taking turns, a burst of noise
// on this machine hits the cases alike, and the turn starts at the next
// case each time, so no case always follows the same one.
func takeTurns[T any](cases []benchCase, n int, measure func(i, chunk int) ([]T, error)) [][]T {
	out := make([][]T, len(cases))
	for turn, done := 0, 0; done < n; turn, done = turn+1, done+uncontendedChunk {
		chunk := min(uncontendedChunk, n-done)
		for k := range cases {
			i := (turn + k) % len(cases)
			rs, err := measure(i, chunk)
			if err != nil {
				fail(cases[i], err)
			}
			out[i] = append(out[i], rs...)
		}
	}
	return out
}

func fail(c benchCase, err error) {
	fmt.Fprintf(os.Stderr, "lockbench: %s: %v\n", c.Name, err)
	os.Exit(1)
}

type result struct {
	uncontended locktest.Latencies
	waits       locktest.Latencies
	held, wall  time.Duration
	overlaps    int
}

func (r *result) add(c locktest.ContendedResult) {
	r.waits = append(r.waits, c.Waits...)
	r.held += c.Held
	r.wall += c.Wall
	r.overlaps += c.Overlaps
}

func printTable(cases []benchCase, rs []result) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tuncontended p50\tp99\tcontended utilization\tp99 wait\toverlaps\t")
	for i, c := range cases {
		r := rs[i]
		sortDur(r.uncontended)
		sortDur(r.waits)
		fmt.Fprintf(w, "%s\t%v\t%v\t%.1f%%\t%v\t%d\t\n", c.Name,
			r.uncontended.Percentile(50).Round(time.Microsecond), r.uncontended.Percentile(99).Round(time.Microsecond),
			100*float64(r.held)/float64(r.wall), r.waits.Percentile(99).Round(10*time.Microsecond), r.overlaps)
	}
	_ = w.Flush()
	for _, r := range rs {
		if r.overlaps > 0 {
			fmt.Println(strings.Repeat("!", 20), "mutual exclusion violated")
			os.Exit(1)
		}
	}
}
