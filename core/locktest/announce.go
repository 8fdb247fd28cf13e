package locktest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// testAnnounce checks a core.Announcer: a value announced through one
// Provider is listed, byte for byte, by another, the largest value
// included; an announce replaces the value and Register empties it; and bad
// input (an empty group or id, a TTL that is not positive, a value over
// core.MaxMemberValue) fails with the core sentinel of its kind and
// registers nothing.
func testAnnounce(t *testing.T, s *suite) {
	a1, ok := s.p1.(core.Announcer)
	if !ok {
		t.Log("the Provider does not implement core.Announcer: nothing to check")
		return
	}
	a2 := s.p2.(core.Announcer)
	m1 := s.p1.(core.Membership)
	group := s.name("announce")
	announce := func(a core.Announcer, id string, value []byte) []core.Member {
		t.Helper()
		ms, err := a.Announce(bg(), group, id, time.Minute, value)
		if err != nil {
			t.Fatalf("Announce %s: %v", id, err)
		}
		if !slices.IsSortedFunc(ms, func(x, y core.Member) int { return strings.Compare(x.ID, y.ID) }) {
			t.Fatalf("Announce %s listed %v, not sorted by ID", id, ids(ms))
		}
		return ms
	}
	valueOf := func(ms []core.Member, id string) []byte {
		t.Helper()
		i := slices.IndexFunc(ms, func(m core.Member) bool { return m.ID == id })
		if i < 0 {
			t.Fatalf("%s is not listed: %v", id, ids(ms))
		}
		return ms[i].Value
	}
	binary := []byte{0, 1, 0xff, '\n', 0, 'x', 0x80}
	big := bytes.Repeat([]byte{0, 0xfe, 'z', 7}, core.MaxMemberValue/4)

	ms := announce(a1, "a", binary)
	if got := valueOf(ms, "a"); !bytes.Equal(got, binary) {
		t.Fatalf("Announce lists its own value as %q, want %q", got, binary)
	}
	ms = announce(a2, "b", big)
	if got := valueOf(ms, "a"); !bytes.Equal(got, binary) {
		t.Fatalf("another Provider lists a's value as %q, want %q", got, binary)
	}
	if got := valueOf(ms, "b"); !bytes.Equal(got, big) {
		t.Fatalf("the largest value came back as %d bytes, not the %d announced", len(got), len(big))
	}
	announce(a1, "a", []byte("second"))
	if got := valueOf(announce(a2, "b", nil), "a"); string(got) != "second" {
		t.Fatalf("after a second Announce a's value is %q, want %q", got, "second")
	}
	if err := m1.Register(bg(), group, "a", time.Minute); err != nil {
		t.Fatalf("Register: %v", err)
	}
	ms = announce(a2, "b", nil)
	if got := valueOf(ms, "a"); len(got) != 0 {
		t.Fatalf("after Register a's value is %q, want it empty", got)
	}
	if got := valueOf(ms, "b"); len(got) != 0 {
		t.Fatalf("an empty value came back as %q", got)
	}

	checkAnnounceBadInput(t, a1, m1, group)
	for _, id := range []string{"a", "b"} {
		if err := m1.Deregister(bg(), group, id); err != nil {
			t.Fatalf("Deregister %s: %v", id, err)
		}
	}
}

// checkAnnounceBadInput checks that Announce refuses bad input with the
// core sentinel of its kind and registers nothing.
func checkAnnounceBadInput(t *testing.T, a1 core.Announcer, m1 core.Membership, group string) {
	t.Helper()
	announce := func(group, id string, ttl time.Duration, value []byte) error {
		_, err := a1.Announce(bg(), group, id, ttl, value)
		return err
	}
	checkRefused(t, []refusal{
		{"Announce with an empty group", announce("", "c", time.Minute, nil), core.ErrInvalidName},
		{"Announce with an empty id", announce(group, "", time.Minute, nil), core.ErrInvalidArgument},
		{"Announce with TTL 0", announce(group, "c", 0, nil), core.ErrInvalidArgument},
		{"Announce with a negative TTL", announce(group, "c", -time.Second, nil), core.ErrInvalidArgument},
		{"Announce with a value over MaxMemberValue", announce(group, "c", time.Minute, make([]byte, core.MaxMemberValue+1)), core.ErrInvalidArgument},
	})
	listed, err := m1.Members(bg(), group)
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	if slices.Contains(listed, "c") {
		t.Error("an Announce that failed on bad input registered its id")
	}
}

func ids(ms []core.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
