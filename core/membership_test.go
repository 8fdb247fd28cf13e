package core_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// memMembers is an in-process Membership used to test the Heartbeat helper.
type memMembers struct {
	ids   map[string]bool
	fail  error
	calls int
}

func (m *memMembers) Register(_ context.Context, _, id string, _ time.Duration) error {
	m.calls++
	if m.fail != nil {
		return m.fail
	}
	m.ids[id] = true
	return nil
}

func (m *memMembers) Deregister(_ context.Context, _, id string) error {
	delete(m.ids, id)
	return nil
}

func (m *memMembers) Members(context.Context, string) ([]string, error) {
	m.calls++
	var out []string
	for id := range m.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

type oneTrip struct{ *memMembers }

func (o oneTrip) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	o.ids[id] = true
	o.calls++
	return []string{"fast-path"}, nil
}

func TestHeartbeat(t *testing.T) {
	m := &memMembers{ids: map[string]bool{"b": true}}
	got, err := core.Heartbeat(context.Background(), m, "g", "a", time.Second)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) || m.calls != 2 {
		t.Fatalf("fallback: %v %v after %d calls", got, err, m.calls)
	}
	m.fail = errors.New("down")
	if _, err := core.Heartbeat(context.Background(), m, "g", "a", time.Second); !errors.Is(err, m.fail) {
		t.Fatalf("err = %v", err)
	}
	o := oneTrip{&memMembers{ids: map[string]bool{}}}
	got, err = core.Heartbeat(context.Background(), o, "g", "a", time.Second)
	if err != nil || !slices.Equal(got, []string{"fast-path"}) || o.calls != 1 {
		t.Fatalf("fast path not taken: %v %v after %d calls", got, err, o.calls)
	}
}
