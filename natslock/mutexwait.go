package natslock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// lineRecheck is the least delay between the polls of a mutex waiter.
const lineRecheck = 250 * time.Millisecond

// lineBackoff is the poll cadence of a mutex waiter, from b: its line wakes
// it (line.go), so its polls only recover a lost message, and an attempt
// that joined no line shortens the next delay itself.
func lineBackoff(b kit.Backoff) kit.Backoff {
	b.Min = max(b.Min, lineRecheck)
	b.Max = max(b.Max, 4*b.Min)
	return b
}

// mutexWait is one Acquire of a mutex: the owner value under which a
// release may write it the key (line.go), and the joins it sent.
type mutexWait struct {
	m      *mutex
	owner  string
	sent   []time.Time // when join n (from 1) was sent
	to     *value      // the holder it joined last
	queued bool        // no word yet that the last join ended: we wait in its line
	deaf   string      // a holder whose Provider no one hears: not joined again
	unsure bool        // a write of ours may have landed unseen
}

func (w *mutexWait) me(seq int) lineWaiter {
	p := w.m.p
	return lineWaiter{Owner: w.owner, ID: p.cfg.identity, Inbox: p.line.inbox, Seq: seq}
}

// attempt takes a grant its line announced, else tries the key; a key held
// by another grant that has a line is joined, so the holder's release hands
// it to us in turn.
func (w *mutexWait) attempt(ctx context.Context) (core.Handle, time.Duration, error) {
	m := w.m
	if g := m.p.line.take(w.owner); g != nil {
		if h, ok := w.handed(g); ok {
			return h, 0, nil
		}
	}
	nudged, deaf := m.p.line.nudged(w.owner)
	switch {
	case deaf == lastJoined && w.to != nil:
		w.deaf = w.to.Owner
	case deaf != lastJoined && deaf != "":
		w.deaf = deaf
	}
	if nudged {
		// The line sent us to the key (it is free, the holder we joined
		// holds nothing, or its Provider is gone): we wait in no line
		// until we join one again.
		w.queued = false
	}
	if w.queued && time.Since(w.sent[len(w.sent)-1]) < lineRecheck/2 {
		// Joined just now, and nothing said the key is free: wait for
		// the line rather than ask the server.
		return nil, 0, kit.Wrap(backend, "acquire", m.name, kit.Busy("held by %s, in its line", w.to.ID))
	}
	if w.to == nil {
		if v, ok := m.p.line.lastHolder(m.key); ok {
			// The first attempt joins the holder last seen here without
			// reading the key: if it no longer holds it, its Provider
			// forwards the join along the line, or says the key is free,
			// or the server says no one listens; each wakes us to try
			// again.
			w.join(v)
			return nil, 0, kit.Wrap(backend, "acquire", m.name, kit.Busy("held by %s, last seen", v.ID))
		}
	}
	t := &keyTry{name: m.name, key: m.key, watchKey: m.key, owner: w.owner, handoff: true, line: true}
	h, retryIn, err := m.p.tryKey(ctx, t)
	if err == nil || t.held == nil || ctx.Err() != nil {
		return h, retryIn, err
	}
	if t.held.Owner == w.owner {
		return w.confirm(ctx, t.rev)
	}
	switch {
	case t.held.Owner == w.deaf:
		// Its Provider is gone (its process exited holding the key):
		// wait for the key to expire.
	case t.held.Inbox == m.p.line.inbox:
		// A holder of this Provider hands the key on locally, or wakes
		// us when it deletes it: a place in its line would be a second
		// way for the key to reach us.
	case t.held.Inbox == "":
		// A holder without a line (an older release): poll.
		retryIn = min(retryIn, kit.QueuedPollMin)
	default:
		w.join(*t.held)
	}
	return nil, retryIn, err
}

// join asks the holder v for a place in its line.
func (w *mutexWait) join(v value) {
	w.sent = append(w.sent, time.Now())
	w.m.p.line.sendJoin(w.m.key, v, w.me(len(w.sent)))
	w.to, w.queued = &v, true
}

// handed makes the handle of a grant its line announced. Our trust window
// starts when we sent the join the releaser acted on: it wrote the key
// after that join reached it. A grant naming no join of ours is left to
// the poll, which finds the key written for us and confirms it.
func (w *mutexWait) handed(g *lineMsg) (core.Handle, bool) {
	m := w.m
	if g.W.Seq < 1 || g.W.Seq > len(w.sent) {
		m.p.line.requeue(w.owner, g.Rest)
		return nil, false
	}
	m.p.line.open(m.key, w.owner, g.Rest)
	return m.p.adopt(m.name, m.key, w.owner, g.Rev, g.Rev, w.sent[g.W.Seq-1]), true
}

// confirm takes a grant a poll found written for us at rev, whose message
// did not come (yet): it rewrites our entry expecting rev, and our trust
// window starts with that write.
func (w *mutexWait) confirm(ctx context.Context, rev uint64) (core.Handle, time.Duration, error) {
	p := w.m.p
	p.line.open(w.m.key, w.owner, nil)
	v := value{ID: p.cfg.identity, Owner: w.owner, Inbox: p.line.inbox, Token: rev}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	start := time.Now()
	seq, err := p.write(wctx, w.m.key, v.encode(), rev)
	if err != nil {
		p.line.unopen(w.owner)
		w.unsure = w.unsure || !isWrongSeq(err)
		return nil, 0, kit.Wrap(backend, "acquire", w.m.name, kit.Busy("confirming the grant at revision %d: %v", rev, err))
	}
	return p.adopt(w.m.name, w.m.key, w.owner, rev, seq, start), 0, nil
}

// leave ends the wait, h being its outcome. A waiter that did not get the
// lock through its line (it gave up, or a local handoff came first) asks
// the holder it joined last to take it out of the line, and hands on a
// grant written for it meanwhile before it returns.
func (w *mutexWait) leave(h core.Handle) {
	p := w.m.p
	var g *lineMsg
	if w.to != nil && !p.line.holding(w.owner) {
		g = p.line.withdraw(w.m.key, *w.to, w.me(0))
	}
	untaken, live := p.line.quit(w.owner)
	if g == nil {
		g = untaken
	}
	if live {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.timeout)
	defer cancel()
	if g != nil {
		p.passOn(ctx, g)
	}
	if h == nil && w.unsure {
		p.cleanup(ctx, w.m.key, w.owner)
	}
}
