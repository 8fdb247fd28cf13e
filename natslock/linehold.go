package natslock

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core/kit"
)

// answerTimeout bounds a release's wait for its heir's answer; past it,
// the key tells whether the handover's write landed.
const answerTimeout = time.Second

// withdrawTimeout bounds a giving-up waiter's wait for the holder's answer
// (line.go); past it, a grant written for the waiter meanwhile is handed on
// when its message arrives.
const withdrawTimeout = 250 * time.Millisecond

// expect registers a waiting Acquire under owner, before its first try: a
// grant or a forwarded join for it is kept from then on.
func (ln *line) expect(key, owner string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.holdOf(key, owner).waiting = true
}

// take returns the grant announced to owner's Acquire since the last take,
// or nil.
func (ln *line) take(owner string) *lineMsg {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok {
		return nil
	}
	g := h.grant
	h.grant = nil
	return g
}

// nudged reports whether owner's Acquire was told to read the key again
// since the last call, and the holder it was told not to join again ("",
// or lastJoined), if any.
func (ln *line) nudged(owner string) (nudged bool, deaf string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok || !h.nudged {
		return false, ""
	}
	nudged, deaf = h.nudged, h.deaf
	h.nudged, h.deaf = false, ""
	return nudged, deaf
}

// quit ends owner's wait and reports whether owner's grant is held here.
// It returns a grant announced and not taken, which the caller must hand
// on; one for a grant held here already only adds its line to the hold. A
// hold that is not held here is finished, and the joins forwarded to it
// are told to read the key again.
func (ln *line) quit(owner string) (g *lineMsg, live bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok {
		return nil, false
	}
	h.waiting = false
	g, h.grant = h.grant, nil
	if h.live {
		if g != nil {
			h.prepend(g.Rest)
		}
		return nil, true
	}
	ln.finishLocked(h, nil, 0)
	return g, false
}

// requeue puts rest at the head of waiting owner's line, whose grant is
// not held yet.
func (ln *line) requeue(owner string, rest []lineWaiter) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if h, ok := ln.holds[owner]; ok {
		h.prepend(rest)
	}
}

// holding reports whether owner's grant is held here.
func (ln *line) holding(owner string) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	return ok && h.live
}

// open marks owner's grant as held here, with rest first in its line: from
// before the write that may grant it, so that no join to it is turned away.
func (ln *line) open(key, owner string, rest []lineWaiter) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.openLocked(key, owner, rest)
}

func (ln *line) openLocked(key, owner string, rest []lineWaiter) *hold {
	h := ln.holdOf(key, owner)
	h.live, h.over, h.gave = true, time.Time{}, nil
	h.prepend(rest)
	return h
}

// adopt opens the hold of grant g, to hand it on, and reports whether g
// was not handed on already: a later message of the same grant is
// ignored.
func (ln *line) adopt(g *lineMsg) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if h, ok := ln.holds[g.W.Owner]; ok && g.Rev <= h.passed {
		return false
	}
	h := ln.openLocked(g.Key, g.W.Owner, g.Rest)
	h.passed = g.Rev
	return true
}

// unopen undoes open after a write that did not grant the key. A waiting
// Acquire keeps its hold; any other hold is finished.
func (ln *line) unopen(owner string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok {
		return
	}
	h.live = false
	if !h.waiting {
		ln.finishLocked(h, nil, 0)
	}
}

// next takes the first waiter of owner's line, if any, as the one a
// handover writes for, and the rest of the line, announced to it.
func (ln *line) next(owner string) (lineWaiter, []lineWaiter, bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok || !h.live || h.passing.Owner != "" {
		return lineWaiter{}, nil, false
	}
	h.waiters = slices.DeleteFunc(h.waiters, func(w lineWaiter) bool {
		_, left := ln.gone[w.Owner]
		return left || w.Owner == owner
	})
	if len(h.waiters) == 0 {
		return lineWaiter{}, nil, false
	}
	h.passing, h.announced, h.waiters = h.waiters[0], h.waiters[1:], nil
	return h.passing, h.announced, true
}

// putBack ends a handover whose write failed: its waiter and the line
// announced to it are back at the head, but for those that asked to leave
// meanwhile, who are told the key did not come to them.
func (ln *line) putBack(owner string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok {
		return
	}
	h.prepend(append([]lineWaiter{h.passing}, h.announced...))
	for _, l := range h.leaves {
		h.remove(l.msg.W.Owner)
		ln.gone[l.msg.W.Owner] = time.Now()
		if l.reply != "" {
			ln.send(l.reply, "", lineMsg{Kind: msgFree, Key: h.key, W: l.msg.W})
		}
	}
	h.passing, h.announced, h.leaves = lineWaiter{}, nil, nil
}

// handed ends a handover whose write landed at rev: owner's hold is
// finished, and what came for it meanwhile goes to the heir (joins, and
// leave requests of the announced line); the heir's own leave request is
// answered with its grant.
func (ln *line) handed(owner string, rev uint64) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[owner]
	if !ok {
		return
	}
	heir := h.passing
	g := &lineMsg{Kind: msgGrant, Key: h.key, Rev: rev, W: heir, Rest: h.announced}
	ln.noteLocked(h.key, value{ID: heir.ID, Owner: heir.Owner, Inbox: heir.Inbox})
	for _, w := range h.waiters {
		ln.send(heir.Inbox, "", lineMsg{Kind: msgJoin, Key: h.key, To: heir.Owner, W: w})
	}
	for _, l := range h.leaves {
		if l.msg.W.Owner == heir.Owner {
			if l.reply != "" {
				ln.send(l.reply, "", *g)
			}
			continue
		}
		l.msg.To = heir.Owner
		ln.send(heir.Inbox, l.reply, l.msg)
	}
	h.waiters, h.passing, h.announced, h.leaves = nil, lineWaiter{}, nil, nil
	ln.finishLocked(h, g, 0)
}

// freed finishes owner's hold after its release deleted the key (marker:
// the delete's revision, 0 when unknown).
func (ln *line) freed(owner string, marker uint64) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if h, ok := ln.holds[owner]; ok {
		ln.finishLocked(h, nil, marker)
	}
}

// finishLocked ends h: whoever is left in its line is told the key is
// free; mu is held.
func (ln *line) finishLocked(h *hold, gave *lineMsg, marker uint64) {
	for _, w := range h.waiters {
		ln.send(w.Inbox, "", lineMsg{Kind: msgFree, Key: h.key, Rev: marker, W: w})
	}
	h.waiters, h.live, h.over, h.gave, h.marker = nil, false, time.Now(), gave, marker
}

// note records v as the latest holder of key known here.
func (ln *line) note(key string, v value) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.noteLocked(key, v)
}

func (ln *line) noteLocked(key string, v value) {
	if len(ln.last) >= maxHints {
		clear(ln.last)
	}
	ln.last[key] = v
}

// lastHolder returns the latest holder of key known here, if it has a line
// and is not of this Provider.
func (ln *line) lastHolder(key string) (value, bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	v, ok := ln.last[key]
	return v, ok && v.Inbox != "" && v.Inbox != ln.inbox
}

// sendJoin asks the holder v of key for a place in its line for w.
func (ln *line) sendJoin(key string, v value, w lineWaiter) {
	ln.send(v.Inbox, ln.replyTo(w.Owner), lineMsg{Kind: msgJoin, Key: key, To: v.Owner, W: w})
}

// withdraw takes w out of the line of the holder v of key and returns the
// grant written for w meanwhile, if the holder answers with one.
func (ln *line) withdraw(key string, v value, w lineWaiter) *lineMsg {
	b, _ := json.Marshal(lineMsg{Kind: msgLeave, Key: key, To: v.Owner, W: w})
	resp, err := ln.nc.Request(v.Inbox, b, withdrawTimeout)
	if err != nil {
		return nil
	}
	var g lineMsg
	if json.Unmarshal(resp.Data, &g) != nil || g.Kind != msgGrant || g.W.Owner != w.Owner {
		return nil
	}
	return &g
}

// handOver writes key, held by owner at rev, for the first waiter of
// owner's line. The server acknowledges the write to that waiter (it is
// published with the waiter's subject as its reply), while the releaser
// announces the grant to it, with the rest of the line, and waits for its
// answer: so the heir takes the key one server hop after the write, not
// two. handed is false when the line is empty or the write did not land;
// the waiter is then back at the head.
func (p *Provider) handOver(ctx context.Context, key, owner string, rev uint64) (handed bool, err error) {
	heir, rest, ok := p.line.next(owner)
	if !ok {
		return false, nil
	}
	seq, err := p.grantTo(ctx, key, rev, heir, rest)
	if seq == 0 {
		p.line.putBack(owner)
		return false, err
	}
	p.line.handed(owner, seq)
	if errors.Is(err, nats.ErrNoResponders) {
		// The heir's Provider is gone, and with it what the server and we
		// sent it: we hand its grant on in its stead. Were it back, it
		// could only take the key with a confirming write, which fails
		// once the key moved on.
		p.passOn(ctx, &lineMsg{Kind: msgGrant, Key: key, Rev: seq, W: heir, Rest: rest})
	}
	return true, nil
}

// grantTo writes key for heir, expecting rev, and returns the revision of
// the write, as the heir reports it. When the heir does not answer, the key
// says whether the write landed: seq is then its revision, and err why the
// heir did not answer.
func (p *Provider) grantTo(ctx context.Context, key string, rev uint64, heir lineWaiter, rest []lineWaiter) (uint64, error) {
	if err := p.connected(ctx); err != nil {
		return 0, err
	}
	v := value{ID: heir.ID, Owner: heir.Owner, Inbox: heir.Inbox}
	nonce := newOwner()
	w := &nats.Msg{Subject: p.prefix + key, Reply: ackTo(heir, nonce), Data: v.encode(), Header: nats.Header{}}
	w.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	if err := p.line.nc.PublishMsg(w); err != nil {
		return 0, err
	}
	b, _ := json.Marshal(lineMsg{Kind: msgGrant, Key: key, W: heir, Rest: rest, Expect: rev, Nonce: nonce})
	actx, cancel := context.WithTimeout(ctx, answerTimeout)
	resp, err := p.line.nc.RequestMsgWithContext(actx, &nats.Msg{Subject: heir.Inbox, Data: b})
	cancel()
	var ans lineMsg
	switch {
	case err == nil && json.Unmarshal(resp.Data, &ans) == nil && ans.Kind == msgGrant && ans.Rev != 0:
		return ans.Rev, nil
	case err == nil:
		return 0, errNotHanded
	}
	// No answer: the heir's Provider is gone or slow. The key tells
	// whether the write landed.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	msg, rerr := p.last(cctx, key)
	if rerr != nil {
		return 0, err
	}
	if msg != nil && !isMarker(msg) {
		if hv, derr := decodeValue(msg.Data); derr == nil && hv.Owner == heir.Owner {
			return msg.Sequence, err
		}
	}
	return 0, err
}

// errNotHanded: the heir reports that the handover's write did not land.
var errNotHanded = errors.New("natslock: the handover's write did not land")

// ackTo is the subject where heir hears the server acknowledge the write
// of its grant named by nonce: under its Provider's line subjects (its
// inbox is base.l).
func ackTo(heir lineWaiter, nonce string) string {
	return strings.TrimSuffix(heir.Inbox, ".l") + ".a." + heir.Owner + "." + nonce
}

// passOn frees grant g, which no Acquire here wants (its waiter gave up):
// it hands the key on along g's line, or deletes it.
func (p *Provider) passOn(ctx context.Context, g *lineMsg) {
	owner := g.W.Owner
	if !p.line.adopt(g) {
		return
	}
	handed, err := p.handOver(ctx, g.Key, owner, g.Rev)
	if handed {
		return
	}
	var seq uint64
	if err == nil {
		seq, err = p.del(ctx, g.Key, g.Rev)
	}
	if err != nil {
		seq = 0
	}
	p.line.freed(owner, seq)
	if seq != 0 {
		p.hints.set(g.Key, seq)
		p.notify.Notify(g.Key)
	}
}

// passOnAsync is passOn for the inbox's handler, which must not wait.
func (p *Provider) passOnAsync(g lineMsg) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.timeout)
		defer cancel()
		p.passOn(ctx, &g)
	}()
}
