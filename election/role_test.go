package election_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/election"
)

func TestRoleManager(t *testing.T) {
	var mu sync.Mutex
	var got []string
	events := make(chan election.RoleEvent, 100)
	m := election.NewRoleManager(func(ev election.RoleEvent) {
		if ev.Kind == election.LeaderChanged {
			return
		}
		mu.Lock()
		got = append(got, ev.Role+" "+ev.Kind.String())
		mu.Unlock()
		events <- ev
	})
	roles := []string{"scheduler", "cleanup"}
	own := make(chan election.Event, 10)
	for _, role := range roles {
		cfg := election.Config{ID: "me", OnPromote: blockUntilDone, ResignDelay: time.Hour}
		if role == "cleanup" {
			cfg.OnEvent = func(ev election.Event) { own <- ev }
		}
		_, err := m.Add(role, newMemLocker(uniqueName(t)+role).as("me"), cfg)
		require.NoError(t, err)
	}
	assert.Equal(t, roles, m.Roles())
	assert.NotNil(t, m.Role("cleanup"))
	assert.Nil(t, m.Role("nope"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	promoted := map[string]bool{}
	for len(promoted) < 2 {
		ev := nextRoleEvent(t, events)
		require.Equal(t, election.Promoted, ev.Kind)
		promoted[ev.Role] = true
	}
	assert.Equal(t, roles, m.Leading())
	assert.Equal(t, election.Promoted, (<-own).Kind, "a role's own OnEvent still runs")

	_, err := m.Add("late", newMemLocker(uniqueName(t)).as("me"), election.Config{OnPromote: blockUntilDone})
	assert.ErrorIs(t, err, core.ErrInvalidArgument, "no roles added while running")
	assert.ErrorContains(t, m.Run(ctx), "already running")

	require.NoError(t, m.ResignAll(context.Background()))
	assert.Empty(t, m.Leading())
	for range 2 {
		assert.Equal(t, election.Demoted, nextRoleEvent(t, events).Kind)
	}
	cancel()
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	for _, role := range roles {
		var seq []string
		for _, g := range got {
			if len(g) > len(role) && g[:len(role)+1] == role+" " {
				seq = append(seq, g[len(role)+1:])
			}
		}
		assert.Equal(t, []string{"promoted", "demoted"}, seq, role)
	}
}

func TestRoleManagerAddRejects(t *testing.T) {
	m := election.NewRoleManager(nil)
	l := newMemLocker(uniqueName(t)).as("me")
	cfg := election.Config{OnPromote: blockUntilDone}
	_, err := m.Add("", l, cfg)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = m.Add("a", l, election.Config{})
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, `role "a"`)
	_, err = m.Add("a", l, cfg)
	require.NoError(t, err)
	_, err = m.Add("a", l, cfg)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
}

func TestRoleManagerStopsOnPermanentError(t *testing.T) {
	m := election.NewRoleManager(nil)
	_, err := m.Add("good", newMemLocker(uniqueName(t)).as("me"), election.Config{OnPromote: blockUntilDone})
	require.NoError(t, err)
	_, err = m.Add("bad", kit.FailedLocker("bad", core.ErrUnsupported), election.Config{OnPromote: blockUntilDone})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.ErrorIs(t, m.Run(ctx), core.ErrUnsupported)
	require.NoError(t, ctx.Err(), "the other roles were stopped")
	assert.Empty(t, m.Leading())
}

func nextRoleEvent(t *testing.T, events <-chan election.RoleEvent) election.RoleEvent {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(wait):
		t.Fatal("no event")
		return election.RoleEvent{}
	}
}
