package polllease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/polllease/pollleasetest"
)

// unsupportedAnnouncer is a Membership whose Announce answers
// core.ErrUnsupported and registers nothing, as a backend that cannot keep
// values where it keeps members does; its other calls work.
type unsupportedAnnouncer struct{ *countingHeartbeater }

func (m unsupportedAnnouncer) Announce(_ context.Context, group, _ string, _ time.Duration, _ []byte) ([]core.Member, error) {
	m.announces.Add(1)
	return nil, fmt.Errorf("announce %s: %w: no value column", group, core.ErrUnsupported)
}

// TestAnnounceUnsupportedFallsBack: an Announcer that cannot keep values is
// asked once per instance, which says so once and heartbeats without
// values from then on: the fleet stays trusted and shares the targets as
// Assign does.
func TestAnnounceUnsupportedFallsBack(t *testing.T) {
	f := newFleet(t, targetNames(20))
	rec := newRecorder(slog.LevelWarn)
	ms := map[string]*countingHeartbeater{}
	start := func(id string) {
		p := newMemProvider(t, f.store, id, testLeaseTTL)
		m := &countingHeartbeater{p: p}
		cfg := f.config(id, p)
		cfg.Membership = unsupportedAnnouncer{m}
		cfg.Logger = slog.New(rec)
		c, err := New(cfg)
		require.NoError(t, err)
		f.Add(id, &node{c: c, p: p}, pollleasetest.Run(c.Run))
		ms[id] = m
	}
	targets, _ := f.targets.get(context.Background())
	asAssigned := func(ids []string) func() bool {
		want := Assign(targets, ids, DefaultLoadFactor)
		return func() bool {
			for _, id := range ids {
				var mine []string
				for t, m := range want {
					if m == id {
						mine = append(mine, t)
					}
				}
				slices.Sort(mine)
				if owned := f.node(id).c.Owned(); !slices.Equal(owned, mine) {
					return false
				}
			}
			return true
		}
	}
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		start(id)
	}
	waitFor(t, "the targets held as Assign assigns them", 15*time.Second, asAssigned(ids))
	// A join moves what Assign moves, not the fewest targets that the
	// holdings would keep in place (AssignFrom).
	ids = append(ids, "d")
	start("d")
	waitFor(t, "the targets held as Assign assigns them after a join", 15*time.Second, asAssigned(ids))

	for _, id := range ids {
		m := ms[id]
		assert.Equal(t, int64(1), m.announces.Load(), "%s: Announce asked again after ErrUnsupported", id)
		assert.Positive(t, m.beats.Load(), "%s: no heartbeat instead", id)
	}
	assert.Len(t, rec.lines("Announce unsupported: assigning without holdings"), len(ids), "one warning per instance")
	assert.Empty(t, f.eventsOf(EventUncertain, time.Time{}), "a trust window closed")
}
