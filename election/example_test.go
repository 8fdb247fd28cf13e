package election_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/filelock"
)

// One candidate over the file backend: it wins term 1, leads until its
// context ends, and steps down.
func Example() {
	dir, err := os.MkdirTemp("", "election-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// The Provider's identity is what other candidates' Leader reports.
	provider, err := filelock.New(dir, filelock.WithIdentity("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer provider.Close()

	promoted := make(chan uint64)
	e, err := election.New(provider.Mutex("scheduler"), election.Config{
		ID: "node-1",
		OnPromote: func(ctx context.Context, term uint64) {
			promoted <- term
			<-ctx.Done() // lead until leadership ends; pass term to what you write
		},
		OnDemote: func() { fmt.Println("demoted") },
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	fmt.Println("leading term", <-promoted, "leader:", e.IsLeader())
	cancel()
	fmt.Println("Run:", <-done, "leader:", e.IsLeader())
	// Output:
	// leading term 1 leader: true
	// demoted
	// Run: <nil> leader: false
}

// Resign hands leadership to a follower at once.
func ExampleElection_Resign() {
	dir, err := os.MkdirTemp("", "election-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	events := make(chan election.Event, 10)
	candidate := func(id string) (*election.Election, *filelock.Provider) {
		// One per process in real life, with the candidate's ID.
		provider, err := filelock.New(dir, filelock.WithIdentity(id))
		if err != nil {
			log.Fatal(err)
		}
		e, err := election.New(provider.Mutex("scheduler"), election.Config{
			ID:          id,
			OnPromote:   func(ctx context.Context, term uint64) { <-ctx.Done() },
			OnEvent:     func(ev election.Event) { events <- ev },
			ResignDelay: time.Minute,
		})
		if err != nil {
			log.Fatal(err)
		}
		return e, provider
	}
	a, pa := candidate("a")
	defer pa.Close()
	b, pb := candidate("b")
	defer pb.Close()
	show := func() {
		ev := <-events
		for ev.Kind == election.LeaderChanged {
			ev = <-events
		}
		fmt.Println(ev.ID, ev.Kind, ev.Term)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = a.Run(ctx); done <- struct{}{} }()
	show() // a wins term 1
	go func() { _ = b.Run(ctx); done <- struct{}{} }()
	if err := a.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	show() // a's term ends
	show() // b wins term 2
	cancel()
	<-done
	<-done
	show()
	// Output:
	// a promoted 1
	// a demoted 1
	// b promoted 2
	// b demoted 2
}

// A Metrics adapter. Wire the calls to your metrics library: a gauge for
// SetLeader, counters for the rest.
type gaugeMetrics struct {
	leader      atomic.Bool
	transitions atomic.Int64
	failures    atomic.Int64
}

func (m *gaugeMetrics) SetLeader(election string, leader bool) { m.leader.Store(leader) }
func (m *gaugeMetrics) Transition(election string, kind election.EventKind, term uint64) {
	m.transitions.Add(1)
}
func (m *gaugeMetrics) CampaignFailed(election string, err error) { m.failures.Add(1) }

func ExampleMetrics() {
	var m gaugeMetrics
	cfg := election.Config{
		OnPromote: func(ctx context.Context, term uint64) { <-ctx.Done() },
		Metrics:   &m,
	}
	_ = cfg // pass to election.New
}

// Several roles from one process, each its own election, with one merged
// event stream.
func ExampleRoleManager() {
	dir, err := os.MkdirTemp("", "election-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	provider, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer provider.Close()

	promoted := make(chan string, 2)
	m := election.NewRoleManager(func(ev election.RoleEvent) {
		if ev.Kind == election.Promoted {
			promoted <- ev.Role
		}
	})
	for _, role := range []string{"scheduler", "cleanup"} {
		_, err := m.Add(role, provider.Mutex(role), election.Config{
			OnPromote: func(ctx context.Context, term uint64) { <-ctx.Done() },
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	<-promoted
	<-promoted
	fmt.Println("leading:", m.Leading())
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// leading: [scheduler cleanup]
	// Run: <nil>
}
