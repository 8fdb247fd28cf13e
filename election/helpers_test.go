package election_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/election"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for an event, so a broken test fails instead of
// hanging. It is not a timing assertion.
const wait = 20 * time.Second

func uniqueName(t testing.TB) string {
	return fmt.Sprintf("%s-%x", t.Name(), rand.Uint64())
}

// candidate runs one Election in the background and records what it sees.
type candidate struct {
	t      testing.TB
	e      *election.Election
	events chan election.Event
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	log     []string // "promote N", "demote"
	running uint64   // term OnPromote runs for, 0 when none
}

// start makes an Election over l with cfg and runs it until the test ends.
// OnPromote defaults to waiting for its context; OnEvent and OnDemote are
// wrapped to record the calls.
func start(t testing.TB, l core.Locker, cfg election.Config) *candidate {
	t.Helper()
	c := &candidate{t: t, events: make(chan election.Event, 1000), done: make(chan error, 1)}
	promote := cfg.OnPromote
	if promote == nil {
		promote = func(ctx context.Context, term uint64) { <-ctx.Done() }
	}
	cfg.OnPromote = func(ctx context.Context, term uint64) {
		c.mu.Lock()
		if c.running != 0 {
			t.Errorf("OnPromote(%d) while term %d runs", term, c.running)
		}
		c.running = term
		c.log = append(c.log, fmt.Sprintf("promote %d", term))
		c.mu.Unlock()
		promote(ctx, term)
	}
	demote := cfg.OnDemote
	cfg.OnDemote = func() {
		c.mu.Lock()
		if c.running == 0 {
			t.Errorf("OnDemote without OnPromote")
		}
		c.running = 0
		c.log = append(c.log, "demote")
		c.mu.Unlock()
		if demote != nil {
			demote()
		}
	}
	own := cfg.OnEvent
	cfg.OnEvent = func(ev election.Event) {
		if own != nil {
			own(ev)
		}
		c.events <- ev
	}
	e, err := election.New(l, cfg)
	require.NoError(t, err)
	c.e = e
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- e.Run(ctx) }()
	t.Cleanup(func() { c.stop() })
	return c
}

// stop ends Run and waits for it; it returns Run's error. Calling it again
// returns nil.
func (c *candidate) stop() error {
	c.cancel()
	select {
	case err, ok := <-c.done:
		if ok {
			close(c.done)
		}
		return err
	case <-time.After(wait):
		c.t.Errorf("Run did not return within %v of its context ending", wait)
		return nil
	}
}

// next returns the next event of one of kinds, skipping others.
func (c *candidate) next(kinds ...election.EventKind) election.Event {
	c.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case ev := <-c.events:
			for _, k := range kinds {
				if ev.Kind == k {
					return ev
				}
			}
		case <-timeout:
			c.t.Fatalf("%s: no %v event within %v", c.e.ID(), kinds, wait)
		}
	}
}

func (c *candidate) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

func blockUntilDone(ctx context.Context, _ uint64) { <-ctx.Done() }
