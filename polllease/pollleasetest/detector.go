// Package pollleasetest helps test code that runs on polllease: a Detector
// that watches every poll of every instance and reports a target polled by
// two instances at once or with a fencing token lower than one already
// seen, and WaitFor, which waits for a condition with a deadline.
package pollleasetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// Poll is one recorded poll.
type Poll struct {
	Instance, Target string
	Token            uint64
	Start, End       time.Time
}

// Detector records polls and the violations of the one-poller rule. It is
// safe for concurrent use; the zero value is not: use NewDetector.
type Detector struct {
	mu         sync.Mutex
	active     map[string]string // target → instance polling it now
	token      map[string]uint64 // target → highest token seen
	polls      []Poll
	violations []string
}

// NewDetector returns an empty Detector.
func NewDetector() *Detector {
	return &Detector{active: make(map[string]string), token: make(map[string]uint64)}
}

// PollFunc returns the poll function of instance for polllease.Config.Poll:
// it records the poll and runs work (which may be nil) for its duration.
func (d *Detector) PollFunc(instance string, work func(ctx context.Context, target string, token uint64) error) func(context.Context, string, uint64) error {
	return func(ctx context.Context, target string, token uint64) error {
		d.mu.Lock()
		if other, ok := d.active[target]; ok {
			d.violations = append(d.violations, fmt.Sprintf("%s polled by %s and %s at once", target, other, instance))
		}
		if token == 0 || token < d.token[target] {
			d.violations = append(d.violations, fmt.Sprintf("%s: token %d after %d", target, token, d.token[target]))
		}
		d.token[target], d.active[target] = token, instance
		p := Poll{Instance: instance, Target: target, Token: token, Start: time.Now()}
		d.mu.Unlock()

		var err error
		if work != nil {
			err = work(ctx, target, token)
		}

		d.mu.Lock()
		if d.active[target] == instance {
			delete(d.active, target)
		}
		p.End = time.Now()
		d.polls = append(d.polls, p)
		d.mu.Unlock()
		return err
	}
}

// Sleep returns a work function that takes d, or less if its context ends.
func Sleep(d time.Duration) func(context.Context, string, uint64) error {
	return func(ctx context.Context, _ string, _ uint64) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return nil
	}
}

// Violations returns what broke the one-poller rule so far.
func (d *Detector) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.violations)
}

// Polls returns the finished polls, in the order they ended.
func (d *Detector) Polls() []Poll {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.polls)
}

// EndedSince returns the polls that ended at or after t.
func (d *Detector) EndedSince(t time.Time) []Poll {
	var out []Poll
	for _, p := range d.Polls() {
		if !p.End.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

// WaitFor checks cond every 10 ms until it holds, and fails the test if it
// does not within the given time. It returns how long it took.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-tick.C
	}
	return time.Since(start)
}
