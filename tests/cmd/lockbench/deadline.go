package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// runDeadline is the deadline mode: for each case, an Acquire bounded by a
// context deadline waits behind a holder on another Provider or client (the
// case's source opened a second time), n times per case; it reports how
// late Acquire returned after the deadline. The cases take turns.
func runDeadline(cases []benchCase, deadline time.Duration, n int) int {
	others := make([]benchCase, len(cases))
	for i, c := range cases {
		cs, cleanup, err := sources()[c.src]()
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			return 1
		}
		defer cleanup()
		for _, o := range cs {
			if o.Name == c.Name {
				others[i] = o
			}
		}
	}
	measure := func(i, chunk int) ([]time.Duration, error) {
		out := make([]time.Duration, 0, chunk)
		for range chunk {
			late, err := overshoot(cases[i], others[i], deadline)
			if err != nil {
				return nil, err
			}
			out = append(out, late)
		}
		return out, nil
	}
	lates := takeTurns(cases, n, measure)
	fmt.Printf("Acquire with a %v deadline behind another Provider's holder, %d tries per case: how late it returned\n", deadline, n)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tp50\tp99\tmax\t")
	for i, c := range cases {
		l := locktest.Latencies(lates[i])
		sortDur(l)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", c.Name, short(l.Percentile(50)), short(l.Percentile(99)), short(l[len(l)-1]))
	}
	_ = w.Flush()
	return 0
}

// overshoot holds a fresh lock through holder's source and returns how long
// after its deadline an Acquire through waiter's returned.
func overshoot(holder, waiter benchCase, deadline time.Duration) (time.Duration, error) {
	ctx := context.Background()
	name := fmt.Sprintf("lockbench/deadline/%s/%08x", holder.Name, rand.Uint32())
	h, err := holder.New(name).TryAcquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("holder: %w", err)
	}
	defer func() { _ = h.Release(ctx) }()
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	due, _ := wctx.Deadline()
	got, err := waiter.New(name).Acquire(wctx)
	late := time.Since(due)
	if err == nil {
		_ = got.Release(ctx)
		return 0, errors.New("acquired a held lock")
	}
	if !errors.Is(err, core.ErrNotAcquired) && !errors.Is(err, context.DeadlineExceeded) {
		return 0, err
	}
	return late, nil
}
