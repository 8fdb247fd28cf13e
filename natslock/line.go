package natslock

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// The wait line of a mutex. A mutex's value names the holder's Provider
// inbox (a core NATS subject). A waiter in another process that finds the
// mutex held sends a join to that inbox; the holder's Provider keeps the
// joins of each grant in arrival order (a hold, keyed by the grant's owner).
// A waiter that knows the last holder its Provider handed the key to, or
// read, joins it without reading the key: a finished hold forwards joins to
// its heir, or says the key is free.
//
// A release with waiters in its hold does not delete the key: it rewrites
// it for the first waiter (owner, identity, inbox), expecting the holder's
// last revision. The write goes out with the waiter's subject as its reply,
// so the server's acknowledgement (the revision, which is the waiter's
// fencing token, or the error) goes to the waiter, one hop; alongside, the
// releaser announces the grant to the waiter, with the rest of the line,
// which becomes the waiter's hold, and waits for the waiter's answer, the
// acknowledgement it got. So a handover between processes costs one KV
// write and a few core NATS messages, and wakes one process; no KV consumer
// delivers anything, and waiters do not race. Joins that reach the
// releaser during the handover go on to the heir.
//
// What decides who holds the key is still only the KV write: a grant is
// written expecting the releaser's revision, so it lands only while the key
// is the releaser's, and a waiter takes it only on the server's word that
// it landed. The messages decide whom a release writes for, and wake that
// waiter.
//
// The heir's trust window starts when it sent the join the releaser acted
// on (each join carries a number; the announcement echoes it): the
// releaser wrote the grant after it received that join, so the key's age
// on the server started after that moment.
//
// A waiter that gives up asks the holder it joined to take it out of the
// line, and waits for the answer: either it was still waiting there, or the
// answer is the grant the holder wrote for it, which the waiter then hands
// on along the line (or deletes) before its Acquire returns. The holder
// answers only once a handover to that waiter in flight has ended, so a
// waiter that gives up leaves the lock taken behind it only when the
// holder does not answer within withdrawTimeout: the grant is then handed
// on when its messages reach the waiter's Provider.
//
// Messages are at most once. A waiter also polls (from lineRecheck, capped
// by the holder's remaining TTL): a poll that finds the key written for it
// confirms the grant with a write of its own, from which its trust window
// starts, and a poll that finds the key held by another grant joins that
// grant's line again (the holder keeps the place of a waiter it knows).
// Joins go out with a reply subject of the waiter's, where the server
// answers "no responders" when the holder's Provider is gone (its process
// exited): the waiter then reads the key at once, and waits for an expiry
// rather than join that holder again. A grant whose waiter gave up is
// handed on along its line, or the key deleted, by the waiter's Provider;
// one whose waiter's Provider is gone, by the releaser. A waiter whose
// process hangs while its turn comes keeps the lock until its grant
// expires, one TTL, as a holder that hangs does.
//
// A release that finds no waiter deletes the key and tells every join that
// arrives afterwards that the key is free, with the delete marker's
// revision, so the waiter takes it in one round trip. A join to a grant
// that is not held at its Provider, with no delete to point to (the
// delete failed, or the hold is forgotten), is answered "none": the
// waiter reads the key, and waits for it to expire if it still names that
// grant.

// Kinds of line messages.
const (
	msgJoin  = "join"  // a waiter asks the holder To for a place
	msgLeave = "leave" // a waiter gives up its place with To
	msgGrant = "grant" // the key is written for W (at Rev, once known); Rest follow
	msgFree  = "free"  // the key was deleted by a release (marker Rev), or a handover to W failed
	msgNone  = "none"  // the holder To that W joined holds nothing at its Provider
)

// maxLine bounds the waiters one hold keeps: later joins are dropped, and
// those waiters poll.
const maxLine = 1024

// goneLinger is how long a Provider remembers a waiter that left, to skip
// its place in a line that was on its way to it.
const goneLinger = 10 * time.Second

// lineLinger is how long a finished hold is kept to forward the joins that
// were on their way to it.
const lineLinger = time.Second

type lineMsg struct {
	Kind string       `json:"k"`
	Key  string       `json:"key"`
	To   string       `json:"to,omitempty"`  // join, leave: the holder's owner
	Rev  uint64       `json:"rev,omitempty"` // grant: the grant's revision; free: the marker's
	W    lineWaiter   `json:"w"`
	Rest []lineWaiter `json:"rest,omitempty"` // grant: the line after W
	// An announced grant: the revision its write expects, and the nonce
	// that names the write's acknowledgement.
	Expect uint64 `json:"exp,omitempty"`
	Nonce  string `json:"nonce,omitempty"`
}

// lineWaiter is a waiting Acquire as its joins name it.
type lineWaiter struct {
	Owner string `json:"o"`
	ID    string `json:"id"`
	Inbox string `json:"in"`
	Seq   int    `json:"n"` // the join's number within the Acquire
}

// hold is the line of one grant, or of a waiter before its grant, keyed by
// the grant's owner value.
type hold struct {
	key     string
	waiters []lineWaiter
	live    bool     // the grant is held here
	waiting bool     // an Acquire waits under this owner
	grant   *lineMsg // announced to that Acquire, not taken yet
	nudged  bool     // that Acquire was told to read the key again
	deaf    string   // a holder said to hold nothing, or unheard (lastJoined)
	passed  uint64   // grants to this owner up to this revision were handed on

	// A handover in flight: the waiter it writes for, the line announced
	// to it, and the leave requests of either, settled when it ends.
	passing   lineWaiter
	announced []lineWaiter
	leaves    []leaveReq

	// Grants to this owner being assembled, by nonce: the announcement
	// (and the releaser's request to answer) and the server's
	// acknowledgement of the write, which come apart and in either order.
	halves map[string]*halves

	// Finished: joins are forwarded to the heir of the grant gave, or
	// told the key is free (marker: the delete's revision, 0 unknown).
	over   time.Time
	gave   *lineMsg
	marker uint64
}

// halves is what came of one grant: its announcement, the request to
// answer, and the acknowledgement of its write.
type halves struct {
	ann   *lineMsg
	reply string
	ack   *pubAck
}

// maxHalves bounds the unmatched grants a hold keeps (a half whose other
// half was lost); past it they are dropped.
const maxHalves = 8

// leaveReq is a leave request held until a handover ends.
type leaveReq struct {
	msg   lineMsg
	reply string
}

// pubAck is JetStream's answer to a write, sent to the heir (line.go).
type pubAck struct {
	Seq   uint64    `json:"seq"`
	Error *apiError `json:"error,omitempty"`
}

// apiError is the error of a JetStream answer.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// line is a Provider's side of the wait lines: the holds of its grants and
// waiters, and the inbox their messages arrive on.
type line struct {
	p     *Provider
	nc    *nats.Conn
	base  string // the line's subjects: base.> (inbox and replies)
	inbox string // base.l: where other Providers write to us
	sub   *nats.Subscription

	mu    sync.Mutex
	holds map[string]*hold // by owner
	// gone: waiters that left, by owner, when. A place of theirs still on
	// its way in a grant's line is skipped.
	gone  map[string]time.Time
	swept time.Time // when holdOf last dropped finished holds
	// last: by key, the latest holder this Provider wrote the key for or
	// read in it. A waiter joins it without reading the key first.
	last map[string]value
}

func (ln *line) start(p *Provider) error {
	ln.p, ln.nc, ln.base = p, p.js.Conn(), nats.NewInbox()
	ln.inbox = ln.base + ".l"
	ln.holds, ln.gone, ln.last = make(map[string]*hold), make(map[string]time.Time), make(map[string]value)
	sub, err := ln.nc.Subscribe(ln.base+".>", ln.receive)
	ln.sub = sub
	return err
}

func (ln *line) stop() {
	if ln.sub != nil {
		_ = ln.sub.Unsubscribe()
	}
}

// send publishes m to inbox (with a reply subject when reply is not "").
// A publish does not wait for the server (it only blocks while the
// connection's outgoing buffer flushes), so send may be called with mu
// held.
func (ln *line) send(inbox, reply string, m lineMsg) {
	b, _ := json.Marshal(m) // cannot fail: strings and integers
	_ = ln.nc.PublishMsg(&nats.Msg{Subject: inbox, Reply: reply, Data: b})
}

// holdOf returns owner's hold, making it; mu is held. It drops the holds
// that finished more than lineLinger ago.
func (ln *line) holdOf(key, owner string) *hold {
	if h, ok := ln.holds[owner]; ok {
		return h
	}
	if now := time.Now(); now.Sub(ln.swept) > lineLinger {
		ln.swept = now
		for o, h := range ln.holds {
			if h.finished() && now.Sub(h.over) > lineLinger {
				delete(ln.holds, o)
			}
		}
		for o, at := range ln.gone {
			if now.Sub(at) > goneLinger {
				delete(ln.gone, o)
			}
		}
	}
	h := &hold{key: key}
	ln.holds[owner] = h
	return h
}

func (h *hold) finished() bool { return !h.over.IsZero() }

// add puts w in h's line, or, when w is there already, renews its join
// number in its place.
func (h *hold) add(w lineWaiter) {
	for i := range h.waiters {
		if h.waiters[i].Owner == w.Owner {
			h.waiters[i] = w
			return
		}
	}
	if len(h.waiters) < maxLine {
		h.waiters = append(h.waiters, w)
	}
}

// prepend puts ws at the head of h's line, in order, dropping their
// places further back.
func (h *hold) prepend(ws []lineWaiter) {
	if len(ws) == 0 {
		return
	}
	merged := append([]lineWaiter(nil), ws...)
	for _, w := range h.waiters {
		if !slices.ContainsFunc(ws, func(x lineWaiter) bool { return x.Owner == w.Owner }) {
			merged = append(merged, w)
		}
	}
	h.waiters = merged
}

// remove takes owner out of h's line and reports whether it was there.
func (h *hold) remove(owner string) bool {
	for i := range h.waiters {
		if h.waiters[i].Owner == owner {
			h.waiters = append(h.waiters[:i], h.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// replyTo is the reply subject of owner's joins: the server answers a
// join to a Provider that is gone (no subscription: its process exited)
// with a no-responders status there.
func (ln *line) replyTo(owner string) string { return ln.base + ".r." + owner }

// receive handles one message on the line's subjects. It never blocks on
// I/O.
func (ln *line) receive(m *nats.Msg) {
	if owner, ok := strings.CutPrefix(m.Subject, ln.base+".r."); ok {
		// A join of ours reached no one: read the key again now.
		ln.wake(owner, 0, lastJoined)
		return
	}
	if rest, ok := strings.CutPrefix(m.Subject, ln.base+".a."); ok {
		var a pubAck
		owner, nonce, ok := strings.Cut(rest, ".")
		if ok && json.Unmarshal(m.Data, &a) == nil && (a.Seq != 0 || a.Error != nil) {
			ln.assemble(owner, nil, "", &a, nonce)
		}
		return
	}
	var msg lineMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Key == "" || msg.W.Owner == "" {
		return
	}
	switch msg.Kind {
	case msgJoin:
		ln.join(msg, m.Reply)
	case msgLeave:
		ln.leave(msg, m.Reply)
	case msgGrant:
		ln.assemble(msg.W.Owner, &msg, m.Reply, nil, "")
	case msgFree:
		ln.wake(msg.W.Owner, msg.Rev, "")
	case msgNone:
		ln.wake(msg.W.Owner, 0, msg.To)
	}
}

// lastJoined, as the deaf holder of wake, is the holder the waiter joined
// last: a join's no-responders status does not say which holder it was for.
const lastJoined = "*"

// wake has owner's waiting Acquire try the key at once, expecting the
// delete marker rev when it is not 0. deaf, when not "", is a holder that
// holds nothing at its Provider, or whose Provider is gone: the waiter
// does not join it again.
func (ln *line) wake(owner string, rev uint64, deaf string) {
	ln.mu.Lock()
	h, ok := ln.holds[owner]
	waiting := ok && h.waiting
	var key string
	if waiting {
		h.nudged = true
		if deaf != "" {
			h.deaf = deaf
		}
		key = h.key
	}
	ln.mu.Unlock()
	if !waiting {
		return
	}
	if rev != 0 {
		ln.p.hints.set(key, rev)
	}
	ln.p.notify.Notify(key)
}

// join queues a waiter in the hold it asked for, forwards it to the heir of
// a hold that was handed on, or tells it the key is free.
func (ln *line) join(msg lineMsg, reply string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[msg.To]
	switch {
	case ok && h.passing.Owner != "":
		// A handover is under way: the line goes on with its heir.
		if heir := h.passing; heir.Owner != msg.W.Owner {
			msg.To = heir.Owner
			ln.send(heir.Inbox, reply, msg)
		}
	case ok && !h.finished():
		h.add(msg.W)
	case ok && h.gave != nil:
		if heir := h.gave.W; heir.Owner != msg.W.Owner {
			msg.To = heir.Owner
			ln.send(heir.Inbox, reply, msg)
		}
	case ok && h.marker != 0:
		ln.send(msg.W.Inbox, "", lineMsg{Kind: msgFree, Key: msg.Key, Rev: h.marker, W: msg.W})
	default:
		// Not a grant held here, and no delete of ours to point to: the
		// key, if it still names this grant, stays taken until it
		// expires. The waiter reads it, and does not join it again.
		ln.send(msg.W.Inbox, "", lineMsg{Kind: msgNone, Key: msg.Key, To: msg.To, W: msg.W})
	}
}

// leave takes a waiter out of the hold it names and answers reply: "free"
// when it was not granted the key, or the grant written for it. A handover
// to it in flight is answered when it ends; a hold handed on forwards the
// request to its heir.
func (ln *line) leave(msg lineMsg, reply string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	h, ok := ln.holds[msg.To]
	answer := lineMsg{Kind: msgFree, Key: msg.Key, W: msg.W}
	switch {
	case ok && h.handing(msg.W.Owner):
		h.leaves = append(h.leaves, leaveReq{msg, reply})
		return
	case ok && h.gave != nil && h.gave.W.Owner == msg.W.Owner:
		answer = *h.gave
	case ok && h.gave != nil:
		msg.To = h.gave.W.Owner
		ln.send(h.gave.W.Inbox, reply, msg)
		return
	case ok:
		h.remove(msg.W.Owner)
	}
	ln.gone[msg.W.Owner] = time.Now()
	if reply != "" {
		ln.send(reply, "", answer)
	}
}

// handing reports whether a handover in flight announced owner, as heir or
// in the line.
func (h *hold) handing(owner string) bool {
	return h.passing.Owner != "" && (h.passing.Owner == owner ||
		slices.ContainsFunc(h.announced, func(w lineWaiter) bool { return w.Owner == owner }))
}

// assemble adds a grant's announcement or the acknowledgement of its write
// (whichever came) to owner's hold. Once it has both it answers the
// releaser, and a grant that landed is taken as granted takes it. The
// announcement names the key, the join the releaser acted on and the rest
// of the line; the acknowledgement, from the server, says whether the
// write landed and at which revision.
func (ln *line) assemble(owner string, ann *lineMsg, reply string, ack *pubAck, nonce string) {
	ln.mu.Lock()
	h, ok := ln.holds[owner]
	if !ok {
		// A grant for no one here (a waiter that left long ago): kept
		// only until it is handed on, or for lineLinger.
		h = ln.holdOf("", owner)
		h.over = time.Now()
	}
	if h.finished() {
		// Keep it past the sweep until the other half comes.
		h.over = time.Now()
	}
	if ann != nil {
		nonce = ann.Nonce
		h.key = ann.Key
	}
	if h.halves == nil || len(h.halves) >= maxHalves {
		h.halves = make(map[string]*halves)
	}
	hv := h.halves[nonce]
	if hv == nil {
		hv = &halves{}
		h.halves[nonce] = hv
	}
	if ann != nil {
		hv.ann, hv.reply = ann, reply
	}
	if ack != nil {
		hv.ack = ack
	}
	if hv.ann == nil || hv.ack == nil {
		ln.mu.Unlock()
		return
	}
	delete(h.halves, nonce)
	g, a, reply := *hv.ann, hv.ack, hv.reply
	ln.mu.Unlock()
	if a.Error != nil || a.Seq <= g.Expect {
		ln.send(reply, "", lineMsg{Kind: msgFree, Key: g.Key, W: g.W})
		ln.wake(owner, 0, "")
		return
	}
	g.Rev = a.Seq
	ln.send(reply, "", g)
	ln.granted(g)
}

// granted takes a grant: it is kept for the waiting Acquire, merged into
// the hold of a grant this Provider found by a poll meanwhile, or, when no
// one here wants it, handed on.
func (ln *line) granted(msg lineMsg) {
	ln.mu.Lock()
	h, ok := ln.holds[msg.W.Owner]
	switch {
	case ok && msg.Rev <= h.passed:
		ln.mu.Unlock()
		return
	case ok && h.waiting:
		h.grant = &msg
		ln.mu.Unlock()
		ln.p.notify.Notify(msg.Key)
		return
	case ok && h.live:
		h.prepend(msg.Rest)
		ln.mu.Unlock()
		return
	}
	ln.mu.Unlock()
	ln.p.passOnAsync(msg)
}
