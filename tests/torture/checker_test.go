package torture

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// step is one request a scripted worker makes to the resource.
type step struct {
	op     string // enter, write or kill
	worker int
	token  uint64
	value  int64 // write: the value written
	ok     bool  // whether the resource must accept it
}

// TestChecker drives the resource with scripted histories, to show that
// the torture test would see each kind of violation it claims to find.
func TestChecker(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
		want  stats
	}{{
		name: "serial",
		steps: []step{
			{"enter", 0, 1, 0, true}, {"write", 0, 1, 1, true},
			{"enter", 1, 2, 0, true}, {"write", 1, 2, 2, true},
		},
		want: stats{ops: 2},
	}, {
		name: "paused holder fenced",
		steps: []step{
			{"enter", 0, 1, 0, true},
			{"enter", 1, 2, 0, true}, {"write", 1, 2, 1, true},
			{"write", 0, 1, 1, false},
		},
		want: stats{ops: 1, overlaps: 1, staleWrites: 1},
	}, {
		name: "late enter with an older token",
		steps: []step{
			{"enter", 1, 2, 0, true}, {"write", 1, 2, 1, true},
			{"enter", 0, 1, 0, false},
		},
		want: stats{ops: 1, staleEnters: 1},
	}, {
		name: "token granted twice loses an update",
		steps: []step{
			{"enter", 0, 5, 0, true},
			{"enter", 1, 5, 0, true}, {"write", 1, 5, 1, true},
			{"write", 0, 5, 1, true},
		},
		want: stats{ops: 2, overlaps: 1, uncaught: 1, lost: 1, reused: 1},
	}, {
		name: "killed holder",
		steps: []step{
			{"enter", 0, 1, 0, true}, {"kill", 0, 0, 0, true},
			{"enter", 1, 2, 0, true}, {"write", 1, 2, 1, true},
		},
		want: stats{ops: 1},
	}, {
		name: "write outside a section",
		steps: []step{
			{"write", 0, 9, 1, false},
		},
		want: stats{staleWrites: 1},
	}} {
		t.Run(c.name, func(t *testing.T) {
			r := newResource()
			for i, s := range c.steps {
				switch s.op {
				case "enter":
					reply := r.enter(s.worker, s.token)
					require.Equal(t, s.ok, reply.OK, "step %d", i)
				case "write":
					require.Equal(t, s.ok, r.write(s.worker, s.token, s.value), "step %d", i)
				case "kill":
					r.killed(s.worker)
				}
			}
			st := r.stats()
			st.examples = nil
			assert.Equal(t, c.want, st)
		})
	}
}

func TestCheckerHold(t *testing.T) {
	r := newResource()
	entered := r.holdNext(0, time.Hour)
	reply := r.enter(0, 1)
	require.True(t, reply.Hold)
	<-entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.hold(context.Background(), 0)
	}()
	r.release(0)
	<-done
	require.True(t, r.write(0, 1, 1))
}
