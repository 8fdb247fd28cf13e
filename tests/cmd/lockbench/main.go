// Command lockbench compares distlock's backends with other Go lock
// libraries on the same servers, in one run:
//
//   - uncontended: TryAcquire+Release cycles, p50 and p99;
//   - contended: 8 workers of one process (one client per case, shared;
//     filelock gives each worker its own Provider) hold the lock 1 ms and
//     think 2 ms between tries; utilization-% (time the lock was held /
//     wall time), p99 wait, and a mutual-exclusion check.
//
// Cases are interleaved round by round so machine noise hits all alike.
// Servers come from the same environment variables as the tests
// (DISTLOCK_REDIS_ADDRS, DISTLOCK_PG_URL, DISTLOCK_NATS_URL,
// DISTLOCK_MYSQL_DSN, DISTLOCK_ETCD_ENDPOINTS); a backend whose variable is
// unset is left out. Run it from the repository root:
//
//	make services-up && . .services/env && go run ./tests/cmd/lockbench
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// benchCase is one contender: New returns a Locker for the named lock on
// its own client connection(s) shared by all the Lockers it returns.
// uncontendedChunk is how many uncontended cycles a case runs before the
// next case takes its turn.
const uncontendedChunk = 10

type benchCase struct {
	Name string
	New  func(name string) core.Locker
}

// source returns the cases of one backend and a cleanup func, or an error
// when its server is not configured.
type source func() ([]benchCase, func(), error)

func main() {
	rounds := flag.Int("rounds", 3, "interleaved rounds per case")
	uncontended := flag.Int("n", 500, "uncontended cycles per round")
	grants := flag.Int("grants", 400, "contended grants per round")
	only := flag.String("run", "", "regexp: only cases whose name matches")
	flag.Parse()
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(2)
	}

	var cases []benchCase
	for _, src := range sources() {
		cs, cleanup, err := src()
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench: skipping:", err)
			continue
		}
		defer cleanup()
		for _, c := range cs {
			if re.MatchString(c.Name) {
				cases = append(cases, c)
			}
		}
	}
	if len(cases) == 0 {
		fmt.Fprintln(os.Stderr, "lockbench: no cases (set DISTLOCK_*_ADDRS/URL, see BENCHMARKS.md)")
		os.Exit(1)
	}

	ctx := context.Background()
	results := make([]result, len(cases))
	for round := range *rounds {
		// Uncontended: the cases take turns in chunks of uncontendedChunk
		// cycles, so a burst of noise on this machine hits them all alike,
		// and the turn starts at the next case each time, so no case
		// always follows the same one.
		ids := make([]string, len(cases))
		solo := make([]core.Locker, len(cases)) // one Locker per case and round
		for i, c := range cases {
			ids[i] = fmt.Sprintf("lockbench/%s/%08x", c.Name, rand.Uint32())
			solo[i] = c.New(ids[i] + "/u")
		}
		for turn, done := 0, 0; done < *uncontended; turn, done = turn+1, done+uncontendedChunk {
			n := min(uncontendedChunk, *uncontended-done)
			for k := range cases {
				i := (turn + k) % len(cases)
				c := cases[i]
				lat, err := locktest.MeasureUncontended(ctx, solo[i], n)
				if err != nil {
					fail(c, err)
				}
				results[i].uncontended = append(results[i].uncontended, lat...)
			}
		}
		for i, c := range cases {
			id := ids[i]
			lockers := make([]core.Locker, 8)
			for w := range lockers {
				lockers[w] = c.New(id + "/c")
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			r, err := locktest.MeasureContended(cctx, lockers, locktest.Contention{Grants: *grants})
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
