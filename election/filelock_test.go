package election_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/filelock"
)

// fencedStore is the resource the leader protects: it accepts a write only
// with a term at least as high as every term it has seen, and counts the
// writers active at once.
type fencedStore struct {
	mu      sync.Mutex
	highest uint64
	active  int
	writes  int
}

func (s *fencedStore) write(t testing.TB, term uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if term < s.highest {
		return false
	}
	s.highest = term
	s.writes++
	return true
}

func (s *fencedStore) enter(t testing.TB, term uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active++
	if s.active > 1 {
		t.Errorf("%d leaders at once (term %d)", s.active, term)
	}
	if term <= s.highest {
		t.Errorf("term %d is not above the highest seen, %d", term, s.highest)
	}
}

func (s *fencedStore) leave() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
}

// newFileProvider opens a Provider on dir whose holders record id, as a
// candidate's process would: Leader and OnNewLeader then name candidates by
// their election IDs.
func newFileProvider(t testing.TB, dir, id string) *filelock.Provider {
	t.Helper()
	p, err := filelock.New(dir, filelock.WithIdentity(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Five candidates, each with its own Provider as separate processes would
// have, elect one leader at a time over many terms, and every term is
// higher than the last.
func TestFileAtMostOneLeader(t *testing.T) {
	dir := t.TempDir()
	name := uniqueName(t)
	var store fencedStore
	terms := make(chan uint64, 100)
	promote := func(ctx context.Context, term uint64) {
		store.enter(t, term)
		require.True(t, store.write(t, term))
		terms <- term
		<-ctx.Done()
		store.leave()
	}
	var cs []*candidate
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		p := newFileProvider(t, dir, id)
		cs = append(cs, start(t, p.Mutex(name), election.Config{ID: id, OnPromote: promote, ResignDelay: 10 * time.Millisecond}))
	}
	for range 25 {
		select {
		case <-terms:
		case <-time.After(wait):
			t.Fatal("no new term")
		}
		for _, c := range cs {
			if c.e.IsLeader() {
				require.NoError(t, c.e.Resign(context.Background()))
			}
		}
	}
	for _, c := range cs {
		require.NoError(t, c.stop())
	}
	assert.GreaterOrEqual(t, store.writes, 25)
}

// A leader whose Provider closes (as when its process dies and the OS drops
// its file locks) loses the term, and a follower takes over.
func TestFileLeaderGoneFollowerTakesOver(t *testing.T) {
	dir := t.TempDir()
	name := uniqueName(t)
	pa := newFileProvider(t, dir, "a")
	a := start(t, pa.Mutex(name), election.Config{ID: "a"})
	ta := a.next(election.Promoted).Term
	b := start(t, newFileProvider(t, dir, "b").Mutex(name), election.Config{ID: "b"})

	require.NoError(t, pa.Close())
	d := a.next(election.Demoted)
	assert.Equal(t, ta, d.Term)
	tb := b.next(election.Promoted).Term
	assert.Greater(t, tb, ta)
}

// The file backend implements core.Inspector: a follower's Leader names
// the leader and its term, OnNewLeader reports each new leader, and with
// no candidate left there is no leader.
func TestFileLeader(t *testing.T) {
	dir := t.TempDir()
	name := uniqueName(t)
	seen := make(chan string, 10)
	a := start(t, newFileProvider(t, dir, "a").Mutex(name), election.Config{ID: "a", ResignDelay: time.Hour})
	ta := a.next(election.Promoted).Term
	b := start(t, newFileProvider(t, dir, "b").Mutex(name), election.Config{
		ID:              "b",
		ObserveInterval: 5 * time.Millisecond,
		OnNewLeader:     func(id string) { seen <- id },
	})
	h, err := b.e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, core.Holder{ID: "a", Token: ta}, h)
	assert.Equal(t, "a", <-seen)
	assert.Equal(t, "a", b.next(election.LeaderChanged).Leader)

	require.NoError(t, a.e.Resign(context.Background()))
	tb := b.next(election.Promoted).Term
	assert.Equal(t, "b", <-seen)
	h, err = a.e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, core.Holder{ID: "b", Token: tb}, h)

	require.NoError(t, b.stop())
	_, err = a.e.Leader(context.Background())
	assert.ErrorIs(t, err, election.ErrNoLeader)
}

// A stale leader's write is refused once a later term has written.
func TestFileStaleTermRejected(t *testing.T) {
	dir := t.TempDir()
	name := uniqueName(t)
	var store fencedStore
	a := start(t, newFileProvider(t, dir, "a").Mutex(name), election.Config{ID: "a", ResignDelay: time.Hour})
	ta := a.next(election.Promoted).Term
	b := start(t, newFileProvider(t, dir, "b").Mutex(name), election.Config{ID: "b"})
	require.True(t, store.write(t, ta))
	require.NoError(t, a.e.Resign(context.Background()))
	tb := b.next(election.Promoted).Term
	require.True(t, store.write(t, tb))
	assert.False(t, store.write(t, ta), "a deposed leader's term is refused")
}

// BenchmarkFileHandover measures a planned handover over the file backend:
// from the leader's Resign to a follower's OnPromote.
func BenchmarkFileHandover(b *testing.B) {
	dir := b.TempDir()
	name := uniqueName(b)
	promoted := make(chan *election.Election, 10)
	var cs []*candidate
	for _, id := range []string{"a", "b", "c"} {
		var self *candidate
		ready := make(chan struct{})
		self = start(b, newFileProvider(b, dir, id).Mutex(name), election.Config{
			ID: id,
			OnPromote: func(ctx context.Context, term uint64) {
				<-ready
				promoted <- self.e
				<-ctx.Done()
			},
			ResignDelay: time.Millisecond,
		})
		close(ready)
		cs = append(cs, self)
	}
	next := func() *election.Election {
		select {
		case e := <-promoted:
			return e
		case <-time.After(wait):
			b.Fatal("no leader")
			return nil
		}
	}
	leader := next()
	b.ResetTimer()
	for range b.N {
		// Let the last resigner campaign again, so followers are waiting.
		b.StopTimer()
		time.Sleep(2 * time.Millisecond)
		b.StartTimer()
		if err := leader.Resign(context.Background()); err != nil {
			b.Fatal(err)
		}
		leader = next()
	}
	b.StopTimer()
	for _, c := range cs {
		_ = c.stop()
	}
}
