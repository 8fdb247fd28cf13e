package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/election"
)

const leaderExamples = `  # a singleton daemon on three hosts: one runs it; when it dies another takes over within the TTL
  distlock leader -id "$(hostname)" 'redis://locks:6379/0?ttl=10s' ingest -- ./ingest --serve
  # who leads, and who is standing by
  distlock holder redis://locks:6379/0 ingest
  distlock members redis://locks:6379/0 ingest
`

// memberTTL is how long a candidate's registration in its group lives
// without a refresh; it refreshes every third of it.
const memberTTL = 30 * time.Second

// exited is the cause that ends an election when CMD exited on its own.
type exited struct{ status int }

func (e exited) Error() string { return "CMD exited with status " + strconv.Itoa(e.status) }

func (c *cli) leader(args []string) int {
	fs, verbose := c.flags("leader", "leader [flags] URL GROUP -- CMD [ARGS...]", leaderExamples)
	id := fs.String("id", kit.DefaultIdentity(), "this candidate's name, in the lock's holder identity and in DISTLOCK_ID")
	grace := fs.Duration("grace", 10*time.Second, "how long CMD has to exit after SIGTERM on demotion, before SIGKILL")
	pos, argv, code := c.parse(fs, verbose, args, 2, true)
	switch {
	case code >= 0:
		return code
	case *grace < 0:
		return c.usageError(fs, "-grace %v: want a duration ≥ 0", *grace)
	}
	rawURL, group := pos[0], pos[1]
	if takesIdentity(rawURL) {
		rawURL = withParam(rawURL, "identity", *id)
	}
	r := newRelay()
	defer r.stop()
	p, err := c.open(r.ctx, rawURL)
	if err != nil {
		return c.fail(err)
	}
	defer p.Close()

	ctx, end := context.WithCancelCause(r.ctx)
	defer end(nil)
	if m, ok := p.(core.Membership); ok {
		stop := c.stand(ctx, m, group, *id)
		defer stop()
	}
	e, err := election.New(p.Mutex(group), election.Config{
		ID: *id,
		OnPromote: func(term context.Context, token uint64) {
			c.lead(r, term, token, group, *id, argv, *grace, end)
		},
		OnEvent: func(ev election.Event) {
			c.log.Debug("election", "event", ev.Kind, "term", ev.Term, "leader", ev.Leader)
		},
	})
	if err != nil {
		return c.fail(err)
	}
	if err := e.Run(ctx); err != nil {
		return c.fail(err)
	}
	switch cause := context.Cause(ctx).(type) {
	case exited:
		return cause.status
	case signalled:
		return signalStatus(cause.sig)
	}
	return exitError
}

// takesIdentity reports whether rawURL's backend takes the identity
// parameter and the URL does not set it already.
func takesIdentity(rawURL string) bool {
	scheme, _, _ := strings.Cut(rawURL, "://")
	scheme = strings.ToLower(scheme)
	return scheme != "redlock" && scheme != "redlocks" && !strings.Contains(rawURL, "identity=")
}

// lead runs CMD for one term. When the term ends first, CMD is stopped and
// the candidate campaigns again; when CMD exits on its own or after a
// forwarded signal, end stops the election with CMD's status.
func (c *cli) lead(r *relay, term context.Context, token uint64, group, id string, argv []string, grace time.Duration, end context.CancelCauseFunc) {
	c.log.Info("leading", "group", group, "term", token)
	cmd, code := c.start(r, argv, []string{
		"DISTLOCK_TOKEN=" + strconv.FormatUint(token, 10),
		"DISTLOCK_NAME=" + group,
		"DISTLOCK_ID=" + id,
	})
	if cmd == nil {
		end(exited{code})
		return
	}
	status, stopped := c.supervise(r, cmd, term.Done(), grace)
	if !stopped || r.signal() != nil {
		end(exited{status})
		return
	}
	fmt.Fprintf(c.stderr, "distlock: no longer leading %s (%v): stopped %s; campaigning again\n", group, context.Cause(term), argv[0])
}

// stand registers id in group while ctx lives, refreshing it every third
// of memberTTL; the func it returns stops and deregisters.
func (c *cli) stand(ctx context.Context, m core.Membership, group, id string) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err := m.Register(ctx, group, id, memberTTL); err != nil && ctx.Err() == nil {
				c.log.Warn("register failed", "group", group, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(memberTTL / 3):
			}
		}
	}()
	return func() {
		cancel()
		<-done
		dctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
		defer cancel()
		_ = m.Deregister(dctx, group, id)
	}
}
