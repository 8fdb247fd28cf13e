package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/election"
)

// A holder frozen with SIGSTOP past its lease while another process takes
// the lock, then resumed: its first look at the lock after SIGCONT must
// read it lost, before any timer of the resumed process has had a chance
// to fire. Each test runs the frozen holder as a child process (this test
// binary, selected by envFreezeChild) on the shared Redis server.

const (
	// envFreezeChild makes the test binary the holder process: the value
	// is the lock name.
	envFreezeChild = "DISTLOCK_FREEZE_CHILD"
	// freezeGap is the pause between two of the child's looks at the
	// lock that it takes for the freeze; the parent keeps it stopped for
	// longer, and a loaded machine never stalls a process that long.
	freezeGap = electionTTL
	// freezeFor is how long the parent keeps the child stopped at least.
	freezeFor  = electionTTL + 500*time.Millisecond
	freezeRuns = 3
)

// child is a holder process started by startFreezeChild, and the lines it
// writes to stdout.
type child struct{ *selfChild }

func startFreezeChild(t *testing.T, name string) *child {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	return &child{startSelf(t, "^"+top+"$", envFreezeChild+"="+name)}
}

// next returns the child's next line that starts with prefix, without the
// prefix, passing each line before it to skip (nil: ignore them).
func (c *child) next(t *testing.T, prefix string, skip func(string)) string {
	t.Helper()
	deadline := time.After(electionWait)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the child exited before a %q line", prefix)
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
			if skip != nil {
				skip(line)
			}
		case <-deadline:
			t.Fatalf("no %q line from the child", prefix)
		}
	}
}

func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(sig))
}

// TestFreezeHandle: a bare redislock handle, its holder frozen past the
// TTL while the parent takes the lock: the holder's first core.Held after
// SIGCONT is false.
func TestFreezeHandle(t *testing.T) {
	t.Parallel() // own servers or names; waits on events only
	if name := os.Getenv(envFreezeChild); name != "" {
		freezeHandleChild(t, name)
		return
	}
	redisElectionLocker(t, "probe") // skips when there is no Redis
	for run := 0; run < freezeRuns; {
		name := electionName(t)
		c := startFreezeChild(t, name)
		c.next(t, "ACQUIRED", nil)
		c.signal(t, syscall.SIGSTOP)
		stopped := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), electionWait)
		h, err := redisElectionLocker(t, name).Acquire(ctx)
		cancel()
		require.NoError(t, err, "the parent did not get the lock of its frozen child")
		// The scenario: the child stays frozen for longer than the gap it
		// takes for a freeze.
		time.Sleep(time.Until(stopped.Add(freezeFor)))
		c.signal(t, syscall.SIGCONT)
		got := c.next(t, "RESUMED ", nil)
		require.NoError(t, h.Release(context.Background()))
		if got == "ambiguous" {
			t.Log("the child was frozen inside core.Held; trial run again")
			continue
		}
		run++
		assert.Equal(t, "held=false", got, "run %d: core.Held right after SIGCONT", run)
	}
}

// freezeHandleChild holds the lock and looks at it with core.Held in a
// tight loop; the first look after a pause longer than freezeGap is
// reported.
func freezeHandleChild(t *testing.T, name string) {
	h, err := redisElectionLocker(t, name).Acquire(context.Background())
	require.NoError(t, err)
	// The freeze may land right after the line is out: the first look
	// measures its gap from before the line.
	last := time.Now()
	fmt.Println("ACQUIRED")
	for {
		start := time.Now()
		held := core.Held(h)
		end := time.Now()
		switch {
		case start.Sub(last) >= freezeGap:
			// Frozen between the last look and this one: this is the
			// first look after the freeze.
			fmt.Printf("RESUMED held=%v\n", held)
			return
		case end.Sub(start) >= freezeGap:
			fmt.Println("RESUMED ambiguous")
			return
		case !held:
			fmt.Printf("RESUMED lost before any freeze (%v since the last look): %v\n", start.Sub(last), context.Cause(h.Context()))
			return
		}
		last = end
		// Spin between looks, so that the freeze lands between two of
		// them far more often than inside one.
		for time.Since(end) < 200*time.Microsecond {
		}
	}
}

// TestFreezeElectionLeader: an election leader frozen while the parent's
// candidate wins the next term, then resumed: no step of its work starts
// under its old term after the new term began. The child checks ctx and
// IsLeader before each step and reports the step with the time it began
// that check; a step whose check began after the parent's promotion, when
// the child was resumed, must not have passed it.
func TestFreezeElectionLeader(t *testing.T) {
	t.Parallel() // own servers or names; waits on events only
	if name := os.Getenv(envFreezeChild); name != "" {
		freezeLeaderChild(t, name)
		return
	}
	redisElectionLocker(t, "probe")
	for run := range freezeRuns {
		t.Run(strconv.Itoa(run), func(t *testing.T) {
			name := electionName(t)
			c := startFreezeChild(t, name)
			old, err := strconv.ParseUint(c.next(t, "PROMOTED ", nil), 10, 64)
			require.NoError(t, err)
			steps := 0
			c.next(t, fmt.Sprintf("STEP %d ", old), nil) // leading and working
			c.signal(t, syscall.SIGSTOP)

			type promotion struct {
				term uint64
				at   time.Time
			}
			promoted := make(chan promotion, 1)
			runCandidate(t, redisElectionLocker(t, name), election.Config{
				ID: "parent",
				OnPromote: func(ctx context.Context, term uint64) {
					promoted <- promotion{term, time.Now()}
					<-ctx.Done()
				},
			})
			var p promotion
			select {
			case p = <-promoted:
			case <-time.After(electionWait):
				t.Fatal("the parent did not take over from its frozen child")
			}
			require.Greater(t, p.term, old)
			c.signal(t, syscall.SIGCONT)

			var late []string
			c.next(t, fmt.Sprintf("ENDED %d", old), func(line string) {
				var term uint64
				var began int64
				if _, err := fmt.Sscanf(line, "STEP %d %d", &term, &began); err != nil || term != old {
					return
				}
				steps++
				if !time.Unix(0, began).Before(p.at) {
					late = append(late, line)
				}
			})
			t.Logf("%d steps of term %d read after SIGCONT", steps, old)
			assert.Empty(t, late, "steps of term %d began after term %d did (at %v)", old, p.term, p.at.UnixNano())
		})
	}
}

// freezeLeaderChild campaigns and, while leading, works in steps of a
// millisecond of CPU, each after a check of the term.
func freezeLeaderChild(t *testing.T, name string) {
	var e *election.Election
	e, err := election.New(redisElectionLocker(t, name), election.Config{
		ID: "child",
		OnPromote: func(ctx context.Context, term uint64) {
			fmt.Printf("PROMOTED %d\n", term)
			for {
				began := time.Now().UnixNano()
				if ctx.Err() != nil || !e.IsLeader() {
					break
				}
				fmt.Printf("STEP %d %d\n", term, began)
				// The step's work, on the CPU: the process resumes in
				// the middle of it and goes straight to the next check,
				// before the timers that came due in the freeze.
				for time.Since(time.Unix(0, began)) < time.Millisecond {
				}
			}
			fmt.Printf("ENDED %d\n", term)
		},
		RetryBackoff: childBackoff,
	})
	require.NoError(t, err)
	_ = e.Run(context.Background()) // until the parent kills this process
}
