package locktest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// testMembership checks a Membership backend: an id registered through one
// Provider is listed by another until it is deregistered, and bad input
// (an empty group, an empty member id, a TTL that is not positive) fails
// with the core sentinel of its kind, on every call.
func testMembership(t *testing.T, s *suite) {
	m1, ok := s.p1.(core.Membership)
	if !ok {
		t.Log("the Provider does not implement core.Membership: nothing to check")
		return
	}
	m2 := s.p2.(core.Membership)
	group := s.name("members")
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	listed := func(id string) bool {
		t.Helper()
		ids, err := m2.Members(bg(), group)
		must(err, "Members")
		if !slices.IsSorted(ids) {
			t.Fatalf("Members = %q, not sorted", ids)
		}
		return slices.Contains(ids, id)
	}
	must(m1.Register(bg(), group, "b", time.Minute), "Register b")
	must(m1.Register(bg(), group, "a", time.Minute), "Register a")
	if !listed("a") || !listed("b") {
		t.Fatal("a registered id is not listed by another Provider")
	}
	must(m1.Deregister(bg(), group, "a"), "Deregister")
	if listed("a") {
		t.Fatal("a deregistered id is still listed")
	}
	must(m1.Deregister(bg(), group, "a"), "Deregister of an absent id")
	must(m1.Deregister(bg(), group, "b"), "Deregister b")

	bad := []refusal{
		{"Register with an empty group", m1.Register(bg(), "", "a", time.Minute), core.ErrInvalidName},
		{"Register with an empty id", m1.Register(bg(), group, "", time.Minute), core.ErrInvalidArgument},
		{"Register with TTL 0", m1.Register(bg(), group, "a", 0), core.ErrInvalidArgument},
		{"Register with a negative TTL", m1.Register(bg(), group, "a", -time.Second), core.ErrInvalidArgument},
		{"Deregister with an empty id", m1.Deregister(bg(), group, ""), core.ErrInvalidArgument},
		{"Members of an empty group", func() error { _, err := m1.Members(bg(), ""); return err }(), core.ErrInvalidName},
	}
	if hb, ok := m1.(core.Heartbeater); ok {
		_, err := hb.Heartbeat(bg(), group, "", time.Minute)
		bad = append(bad, refusal{"Heartbeat with an empty id", err, core.ErrInvalidArgument})
	}
	checkRefused(t, bad)
	if listed("a") {
		t.Fatal("a call that failed on bad input registered its id")
	}
}

// refusal is a call made with bad input, and the core sentinel its error
// must match.
type refusal struct {
	what string
	err  error
	want error
}

// checkRefused reports each refusal whose error does not match its
// sentinel.
func checkRefused(t *testing.T, rs []refusal) {
	t.Helper()
	for _, r := range rs {
		if !errors.Is(r.err, r.want) {
			t.Errorf("%s: %v, want an error matching %v", r.what, r.err, r.want)
		}
	}
}
