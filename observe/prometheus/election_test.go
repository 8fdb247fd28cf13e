package prometheus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/filelock"
	distprom "github.com/distlock/distlock/observe/prometheus"
)

// candidate is one process of an election on the file backend: its own
// Provider, Elections and /metrics.
type candidate struct {
	e        *election.Election
	metrics  endpoint
	promoted chan uint64
	stop     func()
}

func runCandidate(t *testing.T, dir, id string) *candidate {
	t.Helper()
	p, err := filelock.New(dir, filelock.WithIdentity(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	m := distprom.NewElections()
	c := &candidate{metrics: serve(t, m), promoted: make(chan uint64, 4)}
	c.e, err = election.New(p.Mutex("leader"), election.Config{
		ID:          id,
		Metrics:     m,
		ResignDelay: time.Minute, // the other candidate takes over
		OnPromote: func(ctx context.Context, term uint64) {
			c.promoted <- term
			<-ctx.Done()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.e.Run(ctx) }()
	c.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	})
	t.Cleanup(c.stop)
	return c
}

func (c *candidate) waitPromoted(t *testing.T) uint64 {
	t.Helper()
	select {
	case term := <-c.promoted:
		return term
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not promoted within 10 s", c.e.ID())
		return 0
	}
}

// The leader gauge flips from one candidate to the other on a handover,
// and the term follows.
func TestElectionsHandover(t *testing.T) {
	dir := t.TempDir()
	a := runCandidate(t, dir, "a")
	t1 := a.waitPromoted(t)
	b := runCandidate(t, dir, "b")
	a.metrics.expect(t, map[string]float64{
		`distlock_election_leader{group="leader"}`:                            1,
		`distlock_election_term{group="leader"}`:                              float64(t1),
		`distlock_election_transitions_total{group="leader",kind="promoted"}`: 1,
	})
	if err := a.e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	t2 := b.waitPromoted(t)
	if t2 <= t1 {
		t.Fatalf("term %d after %d", t2, t1)
	}
	a.metrics.expect(t, map[string]float64{
		`distlock_election_leader{group="leader"}`:                           0,
		`distlock_election_term{group="leader"}`:                             float64(t1),
		`distlock_election_transitions_total{group="leader",kind="demoted"}`: 1,
	})
	b.metrics.expect(t, map[string]float64{
		`distlock_election_leader{group="leader"}`: 1,
		`distlock_election_term{group="leader"}`:   float64(t2),
	})
	b.stop()
	b.metrics.expect(t, map[string]float64{`distlock_election_leader{group="leader"}`: 0})
}
