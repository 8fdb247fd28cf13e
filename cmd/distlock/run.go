package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

const runExamples = `  # a cron job on many hosts: the first takes the lock, the others skip this round (exit 75)
  distlock run -wait 0 redis://locks:6379 nightly-report -- ./report.sh
  # wait up to a minute for the lock; a dead holder frees it within the TTL
  distlock run -wait 1m -ttl 15s 'postgres://app@db/app?sslmode=disable' migrate -- ./migrate up
  # at most 4 hosts encode at once
  distlock run -wait forever -semaphore 4 nats://nats:4222 encoders -- ./encode "$FILE"
`

// waitFlag is -wait: a duration ≥ 0, or "forever" (stored as -1).
type waitFlag time.Duration

const waitForever = waitFlag(-1)

func (w *waitFlag) String() string {
	if *w == waitForever {
		return "forever"
	}
	return time.Duration(*w).String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = waitForever
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration ≥ 0 or forever, got %q", s)
	}
	*w = waitFlag(d)
	return nil
}

func (c *cli) run(args []string) int {
	fs, verbose := c.flags("run", "run [flags] URL NAME -- CMD [ARGS...]", runExamples)
	wait := waitFlag(0)
	fs.Var(&wait, "wait", "how long to wait for the lock, a `duration` or forever: 0 tries once (exit 75 when not acquired)")
	ttl := fs.Duration("ttl", 0, "the lease TTL, as the URL's ttl parameter: how long a dead holder blocks others (lease backends)")
	shared := fs.Bool("shared", false, "take the read side of the reader-writer lock NAME (holders of -shared share it)")
	sem := fs.Int("semaphore", 0, "take one of the N slots of the semaphore NAME")
	grace := fs.Duration("grace", 10*time.Second, "how long CMD has to exit after SIGTERM when the lock is lost, before SIGKILL")
	pos, argv, code := c.parse(fs, verbose, args, 2, true)
	switch {
	case code >= 0:
		return code
	case *shared && *sem != 0:
		return c.usageError(fs, "-shared and -semaphore are two kinds of lock: give one")
	case *sem < 0:
		return c.usageError(fs, "-semaphore %d: want N ≥ 1", *sem)
	case *grace < 0:
		return c.usageError(fs, "-grace %v: want a duration ≥ 0", *grace)
	}
	rawURL, name := pos[0], pos[1]
	if *ttl != 0 {
		rawURL = withParam(rawURL, "ttl", ttl.String())
	}
	r := newRelay()
	defer r.stop()
	p, err := c.open(r.ctx, rawURL)
	if err != nil {
		return c.fail(err)
	}
	defer p.Close()
	var l core.Locker = p.Mutex(name)
	switch {
	case *shared:
		l = p.RWMutex(name).RLocker()
	case *sem > 0:
		l = p.Semaphore(name, *sem)
	}
	h, code := c.acquire(r, l, wait)
	if h == nil {
		return code
	}
	defer c.release(h, name)
	return c.runHolding(r, h, name, argv, *grace)
}

// acquire takes l within wait. It returns the handle, or nil and the exit
// status, reported on stderr.
func (c *cli) acquire(r *relay, l core.Locker, wait waitFlag) (core.Handle, int) {
	ctx, start := r.ctx, time.Now()
	var h core.Handle
	var err error
	switch wait {
	case 0:
		h, err = l.TryAcquire(ctx)
	case waitForever:
		h, err = l.Acquire(ctx)
	default:
		wctx, cancel := context.WithTimeout(ctx, time.Duration(wait))
		h, err = l.Acquire(wctx)
		cancel()
	}
	switch {
	case err == nil:
		c.log.Debug("acquired", "name", l.Name(), "token", h.FencingToken(), "after", time.Since(start))
		return h, 0
	case r.ctx.Err() != nil:
		return nil, signalStatus(r.signal())
	case errors.Is(err, core.ErrNotAcquired):
		fmt.Fprintf(c.stderr, "distlock: %s is held elsewhere: not acquired within %s\n", l.Name(), &wait)
		return nil, exitBusy
	}
	return nil, c.fail(err)
}

// runHolding runs argv while h holds the lock name and returns the exit
// status: CMD's, or exitLost when the lock was lost and CMD stopped.
func (c *cli) runHolding(r *relay, h core.Handle, name string, argv []string, grace time.Duration) int {
	cmd, code := c.start(r, argv, []string{
		"DISTLOCK_TOKEN=" + strconv.FormatUint(h.FencingToken(), 10),
		"DISTLOCK_NAME=" + name,
	})
	if cmd == nil {
		return code
	}
	status, stopped := c.supervise(r, cmd, h.Context().Done(), grace)
	if stopped {
		fmt.Fprintf(c.stderr, "distlock: lost the lock %s while %s ran (%v): stopped it\n", name, argv[0], context.Cause(h.Context()))
		return exitLost
	}
	c.log.Debug("exited", "status", status)
	return status
}

// release gives h up, bounded by kit.CleanupTimeout; a failure only logs:
// the lock frees itself as its backend documents.
func (c *cli) release(h core.Handle, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		c.log.Warn("release failed", "name", name, "err", err)
		return
	}
	c.log.Debug("released", "name", name)
}
