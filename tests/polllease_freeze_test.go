package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/polllease"
)

const (
	envPollFreezeChild = "DISTLOCK_POLLLEASE_FREEZE_CHILD" // "addr group id ntargets"
	freezePollGap      = 100 * time.Millisecond            // between a target's poll starts in the frozen instance
	freezePollWork     = 20 * time.Millisecond             // each of its polls
)

// freezeLine is a line the frozen instance prints: a poll start or end, or
// an event, with the wall-clock time it was written.
type freezeLine struct {
	at     time.Time
	kind   string // "poll", "done" or an EventKind's String
	target string
	token  uint64
}

// runFreezeChild is an instance in a process of its own, which the parent
// freezes with SIGSTOP. It prints every poll start and end and every event.
func runFreezeChild(t *testing.T, spec string) {
	f := strings.Fields(spec)
	addr, group, id := f[0], f[1], f[2]
	n, _ := strconv.Atoi(f[3])
	targets := plTargets(n)
	p, _, closeP := plProvider(t, addr)
	defer closeP()
	say := func(kind, target string, token uint64) {
		fmt.Printf("%d %s %s %d\n", time.Now().UnixNano(), kind, target, token)
	}
	cfg := plConfig(p, p, group, id,
		func(context.Context) ([]string, error) { return targets, nil },
		func(ctx context.Context, target string, token uint64) error {
			say("poll", target, token)
			defer say("done", target, token)
			select {
			case <-ctx.Done():
			case <-time.After(freezePollWork):
			}
			return nil
		},
		func(e polllease.Event) { say(e.Kind.String(), e.Target, e.Token) })
	cfg.PollInterval = func(string) time.Duration { return freezePollGap }
	c, err := polllease.New(cfg)
	require.NoError(t, err)
	_ = c.Run(context.Background()) // until killed
}

// freezeChild follows the frozen instance's output.
type freezeChild struct {
	mu       sync.Mutex
	lines    []freezeLine
	held     map[string]uint64 // target → token, from acquired, lost and released
	inFlight int
}

func (c *freezeChild) read(lines <-chan string) {
	for line := range lines {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		token, _ := strconv.ParseUint(f[3], 10, 64)
		l := freezeLine{at: time.Unix(0, ns), kind: f[1], target: f[2], token: token}
		c.mu.Lock()
		c.lines = append(c.lines, l)
		switch l.kind {
		case "poll":
			c.inFlight++
		case "done":
			c.inFlight--
		case "acquired":
			c.held[l.target] = l.token
		case "lost", "released":
			delete(c.held, l.target)
		}
		c.mu.Unlock()
	}
}

func (c *freezeChild) state() (held map[string]uint64, inFlight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held = make(map[string]uint64, len(c.held))
	for k, v := range c.held {
		held[k] = v
	}
	return held, c.inFlight
}

// since returns the lines written at or after t, in the order written.
func (c *freezeChild) since(t time.Time) []freezeLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []freezeLine
	for _, l := range c.lines {
		if !l.at.Before(t) {
			out = append(out, l)
		}
	}
	return out
}

// TestPollLeaseRedisFreeze freezes an instance's process with SIGSTOP while
// its polls are in flight and resumes it once the others have taken its
// targets over, after the lease TTL: the resumed instance starts no poll
// with a superseded token, and reports each lease it held uncertain or lost
// before any poll of it. (A poll already running at the freeze finishes
// after the resume; only the resource's fencing check can refuse it.)
func TestPollLeaseRedisFreeze(t *testing.T) {
	if spec := os.Getenv(envPollFreezeChild); spec != "" {
		runFreezeChild(t, spec)
		return
	}
	const n = 120
	f := newPlFleet(t, plRedisAddr(t), plTargets(n))
	for i := range 3 {
		f.start(fmt.Sprintf("parent-%d", i))
	}
	self := startSelf(t, "^TestPollLeaseRedisFreeze$", fmt.Sprintf("%s=%s %s child %d", envPollFreezeChild, f.addr, f.group, n))
	cmd := self.cmd
	child := &freezeChild{held: map[string]uint64{}}
	go child.read(self.lines)

	plWaitFor(t, "child holds its share, polls in flight", plWait, func() bool {
		held, inFlight := child.state()
		return f.childShare(n, len(held)) && inFlight > 0
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	plWaitFor(t, "the frozen instance's targets taken over", plWait, f.covered)
	// Read the frozen instance's state only now: the lines it wrote just
	// before the freeze (a release, say) have been read by now, and it
	// writes nothing while stopped.
	heldAtStop, inFlight := child.state()
	require.Greater(t, time.Since(stoppedAt), plTTL, "taken over within the TTL")
	// contAt is taken before the signal: the resumed instance may write
	// its first lines before the signal call returns here.
	contAt := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	t.Logf("froze the instance for %v with %d leases and about %d polls in flight", contAt.Sub(stoppedAt).Round(time.Millisecond), len(heldAtStop), inFlight)

	lost := func() map[string]bool {
		lost := map[string]bool{}
		for _, l := range child.since(contAt) {
			if l.kind == "lost" && heldAtStop[l.target] == l.token {
				lost[l.target] = true
			}
		}
		return lost
	}
	t.Cleanup(func() {
		if t.Failed() {
			logUnreported(t, child.since(contAt), heldAtStop, lost(), contAt)
		}
	})
	plWaitFor(t, "every stale lease reported lost", plWait, func() bool { return len(lost()) == len(heldAtStop) })
	checkFreezeResume(t, child.since(contAt), heldAtStop, f.eventsSince(polllease.EventAcquired, stoppedAt), contAt)
}

// checkFreezeResume checks the frozen instance's lines after the resume:
// no poll starts with a token older than one the others acquired for the
// target, and each lease held at the freeze is reported uncertain or lost
// before any poll of its target.
func checkFreezeResume(t *testing.T, after []freezeLine, heldAtStop map[string]uint64, taken []polllease.Event, contAt time.Time) {
	newest := map[string]uint64{}
	for _, e := range taken {
		newest[e.Target] = max(newest[e.Target], e.Token)
	}
	reported := map[string]time.Duration{}
	superseded, early := 0, 0
	for _, l := range after {
		switch {
		case l.kind == "poll" && l.token < newest[l.target]:
			superseded++
			t.Errorf("poll of %s with superseded token %d (newest %d) %v after SIGCONT", l.target, l.token, newest[l.target], l.at.Sub(contAt))
		case l.kind == "poll" && heldAtStop[l.target] != 0:
			if _, ok := reported[l.target]; !ok {
				early++
				t.Errorf("poll of %s %v after SIGCONT before its lease was reported uncertain or lost", l.target, l.at.Sub(contAt))
			}
		case l.kind == "uncertain" || l.kind == "lost":
			if _, ok := reported[l.target]; !ok && heldAtStop[l.target] == l.token {
				reported[l.target] = l.at.Sub(contAt)
			}
		}
	}
	var first, last time.Duration
	for _, d := range reported {
		if first == 0 || d < first {
			first = d
		}
		last = max(last, d)
	}
	t.Logf("resume: %d stale leases reported uncertain or lost %v to %v after SIGCONT; %d polls with superseded tokens, %d polls before the report",
		len(reported), first.Round(10*time.Microsecond), last.Round(10*time.Microsecond), superseded, early)
	assert.Len(t, reported, len(heldAtStop))
}

// logUnreported logs what the resumed instance wrote about each lease it
// held at the freeze and has not reported lost.
func logUnreported(t *testing.T, after []freezeLine, heldAtStop map[string]uint64, lost map[string]bool, contAt time.Time) {
	for target, token := range heldAtStop {
		if lost[target] {
			continue
		}
		t.Logf("%s (token %d at the freeze) not reported lost; its lines after SIGCONT:", target, token)
		for _, l := range after {
			if l.target == target {
				t.Logf("  %v %s token %d", l.at.Sub(contAt).Round(time.Microsecond), l.kind, l.token)
			}
		}
	}
}
