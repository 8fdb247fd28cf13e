package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/tests/internal/delayproxy"
)

// runLatency is the latency mode: the RedLock cases over one, three and
// five servers (redlock, redsync and the raw quorum), each server reached
// through a delayproxy adding delay each way, as a network between the
// client and each server would. It measures uncontended TryAcquire+Release
// cycles, interleaved as in the shared mode, and prints their p50 and p99
// and the ratios the fan-out decides: N=5 against N=1, and redlock against
// redsync.
func runLatency(re *regexp.Regexp, delay time.Duration, rounds, n int) int {
	addrs, err := redisAddrs(5)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	proxied := make([]string, len(addrs))
	for i, a := range addrs {
		p, err := delayproxy.Start(a, delay)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			return 1
		}
		defer p.Close()
		proxied[i] = p.Addr()
	}
	pingDirect, pingProxied := pingRoundTrips(addrs[0], n), pingRoundTrips(proxied[0], n)
	all, cleanup, err := redlockCasesOn(proxied, 1, 3, 5)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	defer cleanup()
	var cases []benchCase
	for _, c := range all {
		if re.MatchString(c.Name) {
			cases = append(cases, c)
		}
	}
	ctx := context.Background()
	cycles := make([][]cycle, len(cases))
	for range rounds {
		lockers := make([]core.Locker, len(cases))
		for i, c := range cases {
			lockers[i] = c.New(fmt.Sprintf("lockbench/latency/%s/%08x", c.Name, rand.Uint32()))
		}
		measure := func(i, chunk int) ([]cycle, error) { return measureCycles(ctx, lockers[i], chunk) }
		for i, cs := range takeTurns(cases, n, measure) {
			cycles[i] = append(cycles[i], cs...)
		}
	}
	printLatencyTable(cases, cycles, delay, rounds, n)
	fmt.Printf("calibration: one PING round trip p50 %v direct, %v through the proxy\n",
		pingDirect.Round(time.Microsecond), pingProxied.Round(time.Microsecond))
	return 0
}

// cycle is one uncontended TryAcquire and Release (an uncontended Acquire
// makes the same first try).
type cycle struct{ acquire, release time.Duration }

func measureCycles(ctx context.Context, l core.Locker, n int) ([]cycle, error) {
	out := make([]cycle, 0, n)
	for range n {
		t0 := time.Now()
		h, err := l.TryAcquire(ctx)
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		if err := h.Release(ctx); err != nil {
			return nil, err
		}
		out = append(out, cycle{acquire: t1.Sub(t0), release: time.Since(t1)})
	}
	return out, nil
}

func printLatencyTable(cases []benchCase, cycles [][]cycle, delay time.Duration, rounds, n int) {
	fmt.Printf("uncontended TryAcquire+Release through a proxy adding %v each way per server, %d rounds × %d cycles\n",
		delay, rounds, n)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tcycle p50\tp99\tacquire p50\trelease p50\t")
	p50 := map[string]time.Duration{}
	for i, c := range cases {
		var all, acq, rel locktest.Latencies
		for _, cy := range cycles[i] {
			all, acq, rel = append(all, cy.acquire+cy.release), append(acq, cy.acquire), append(rel, cy.release)
		}
		for _, l := range []locktest.Latencies{all, acq, rel} {
			sortDur(l)
		}
		p50[c.Name] = all.Percentile(50)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t\n", c.Name, short(all.Percentile(50)),
			short(all.Percentile(99)), short(acq.Percentile(50)), short(rel.Percentile(50)))
	}
	_ = w.Flush()
	for _, r := range [][2]string{
		{"redlock N=5", "redlock N=1"}, {"redlock N=3", "redlock N=1"},
		{"redsync N=5", "redsync N=1"}, {"redlock N=5", "redsync N=5"},
	} {
		a, okA := p50[r[0]]
		b, okB := p50[r[1]]
		if okA && okB && b > 0 {
			fmt.Printf("cycle p50 %s / %s = %.2f\n", r[0], r[1], float64(a)/float64(b))
		}
	}
}

// pingRoundTrips returns the median of n PING round trips to addr: what
// the proxy really adds on this machine, timer overshoot included.
func pingRoundTrips(addr string, n int) time.Duration {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	var ds locktest.Latencies
	for range n {
		t := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return -1
		}
		ds = append(ds, time.Since(t))
	}
	sortDur(ds)
	return ds.Percentile(50)
}
