package etcdlock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bells hand a mutex over between Providers without a watch of the lock's
// keys, which would reach every waiting Provider with every release.
//
// Every Provider has a bell, the key "<prefix>bell/<id>", that it watches
// for as long as it lives, and its keys' names carry its id. A contender
// for the exclusive role whose newest key ahead, P, is exclusive too
// knocks: it writes to the bell of P's Provider that it waits right
// behind P. When P's grant is released, the transaction that deletes P
// also writes to the bell of each contender that knocked: "P cleared",
// which admits it at once, since P's grant proved that nothing was ahead
// of P, and so nothing is left ahead of the contender (as
// Provider.cleared does within a Provider). A release is then heard by
// the Provider of the contender right behind it and by no other. A knock
// that comes after P went is answered at once: "cleared" when P is among
// the Provider's latest releases, "moved" (read the line again) when P is
// unknown or gave up.
//
// A bell's watch lives long, so it hears a ring at once: a watch from now
// that starts while a write commits hears what follows only at the
// server's next catch-up round (up to 100 ms later), which a watch
// started for each wait would pay often. The contender also watches P
// itself, to hear P go where no ring tells (a Provider that died, a lost
// write), and reads the line again then.

// bellKind is where the bells live under the Provider's prefix.
const bellKind = "bell/"

// What a ring says of key, a key of some lock, and to, the key of the
// contender right behind it.
const (
	knockRing   = 'k' // to the owner of key: to waits right behind key
	clearedRing = 'c' // to the owner of to: key's grant was released
	movedRing   = 'm' // to the owner of to: key left without a grant, or is unknown
)

// ring is one message on a bell.
type ring struct {
	kind byte
	key  string
	rev  int64 // key's create revision
	to   string
}

func appendRing(b []byte, r ring) []byte {
	b = append(b, r.kind)
	b = binary.AppendUvarint(b, uint64(len(r.key)))
	b = append(b, r.key...)
	b = binary.AppendVarint(b, r.rev)
	b = binary.AppendUvarint(b, uint64(len(r.to)))
	return append(b, r.to...)
}

var errBadRing = errors.New("etcdlock: malformed bell value")

// parseRings decodes the rings of one bell write.
func parseRings(b []byte) ([]ring, error) {
	var rs []ring
	for len(b) > 0 {
		r := ring{kind: b[0]}
		var ok bool
		if r.key, b, ok = cutString(b[1:]); !ok {
			return nil, errBadRing
		}
		rev, n := binary.Varint(b)
		if n <= 0 {
			return nil, errBadRing
		}
		r.rev = rev
		if r.to, b, ok = cutString(b[n:]); !ok {
			return nil, errBadRing
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func cutString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// bells is a Provider's side of the bells.
type bells struct {
	mu     sync.Mutex
	ready  bool   // the server confirmed the watch of the Provider's bell
	stop   func() // stops that watch; nil when none runs
	gen    int    // counts the watches started, to ignore a stopped one
	next   int64  // the revision a new watch starts from: after the last ring heard
	waits  map[string]*contender
	behind map[string]*knocks // this Provider's exclusive keys, by name
}

// knocks are the contenders that knocked on one key: their keys' names.
type knocks struct {
	rev  int64
	to   []string
	next chan struct{} // closed when the read of the key right behind is done (findNext)
}

// newID returns a Provider's id: 64 random bits in hex.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ownerOf returns the id of the Provider that made key, a key of the
// queue under prefix; false for a name from a Provider without a bell.
func ownerOf(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) < 2 {
		return "", false
	}
	id, _, ok := strings.Cut(rest[1:], ".")
	if !ok || id == "" {
		return "", false
	}
	return id, true
}

func (p *Provider) bellKey(id string) string { return p.opts.prefix + bellKind + id }

// bellReady reports whether the server confirmed the watch of the
// Provider's bell, and starts that watch when none runs.
func (p *Provider) bellReady() bool {
	b := &p.bells
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop == nil {
		p.startBellLocked(b.next)
	}
	return b.ready
}

// startBellLocked starts the watch of the Provider's bell from revision
// from (0: from now); b.mu is held. A watch from the past replays the
// rings since, so a knock on a key is not lost when the bell is first
// watched from that key's creation (openDoor), or watched again after it
// broke; the server delivers what such a watch missed at its next
// catch-up round.
func (p *Provider) startBellLocked(from int64) {
	b := &p.bells
	b.gen++
	gen := b.gen
	b.stop = p.watch(watchSpec{key: p.bellKey(p.id), from: from,
		created: func(rev int64) {
			b.mu.Lock()
			if gen == b.gen {
				b.ready = true
				if from == 0 {
					b.next = max(b.next, rev+1)
				}
			}
			b.mu.Unlock()
		},
		put: func(ev *clientv3.Event) {
			b.mu.Lock()
			b.next = max(b.next, ev.Kv.ModRevision+1)
			b.mu.Unlock()
			p.heard(ev.Kv.Value)
		},
		ended: func(compacted int64) { p.bellEnded(gen, compacted) },
	})
}

// bellEnded marks the bell unwatched; the next wait or grant starts its
// watch again, from the revision after the last ring heard (from now when
// that revision was compacted). The contenders that knocked read the line
// again, in case a ring is lost.
func (p *Provider) bellEnded(gen int, compacted int64) {
	b := &p.bells
	b.mu.Lock()
	if gen != b.gen {
		b.mu.Unlock()
		return
	}
	b.stop, b.ready = nil, false
	if compacted > 0 {
		b.next = 0
	}
	cs := make([]*contender, 0, len(b.waits))
	for _, c := range b.waits {
		cs = append(cs, c)
	}
	b.mu.Unlock()
	for _, c := range cs {
		c.hear(deletion{broken: true})
	}
}

// heard takes in a write to the Provider's bell.
func (p *Provider) heard(v []byte) {
	rs, err := parseRings(v)
	if err != nil {
		p.log.Debug("etcdlock: bell", "err", err)
		return
	}
	for _, r := range rs {
		p.take(r)
	}
}

// take acts on a ring meant for this Provider.
func (p *Provider) take(r ring) {
	b := &p.bells
	b.mu.Lock()
	if r.kind == knockRing {
		if k := b.behind[r.key]; k != nil && k.rev == r.rev {
			if !slices.Contains(k.to, r.to) {
				k.to = append(k.to, r.to)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		// Gone already (the release took its knocks after it recorded
		// itself in p.released).
		r.kind = movedRing
		if p.wasReleased(r.key, r.rev) {
			r.kind = clearedRing
		}
		p.ring(r)
		return
	}
	c := b.waits[r.to]
	b.mu.Unlock()
	switch {
	case c == nil:
	case r.kind == clearedRing:
		c.hear(deletion{key: r.key, created: r.rev, cleared: true})
	default:
		c.hear(deletion{broken: true})
	}
}

// openDoor records key, an exclusive key of this Provider's created at
// revision rev, for knocks.
func (p *Provider) openDoor(key string, rev int64) {
	b := &p.bells
	b.mu.Lock()
	defer b.mu.Unlock()
	b.behind[key] = &knocks{rev: rev}
	if b.stop == nil {
		// Knocks on key come after its creation: none is missed.
		p.startBellLocked(cmp.Or(b.next, rev))
	}
}

// closeDoor forgets key and returns the contenders that knocked on it,
// once its findNext is done (bounded by ctx) unless a knock came first.
func (p *Provider) closeDoor(ctx context.Context, key string) []string {
	b := &p.bells
	b.mu.Lock()
	k := b.behind[key]
	wait := k != nil && k.next != nil && len(k.to) == 0
	b.mu.Unlock()
	if k == nil {
		return nil
	}
	if wait {
		select {
		case <-k.next:
		case <-ctx.Done():
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.behind, key)
	return k.to
}

// findNext reads the key right behind key, an exclusive grant of this
// Provider's created at revision rev in the queue under prefix, and
// records it as knocked when it is exclusive: a contender that found more
// than one key ahead of it does not knock (the key it waits behind was
// not granted yet, and reads its successor once granted).
func (p *Provider) findNext(prefix, key string, rev int64) {
	b := &p.bells
	b.mu.Lock()
	k := b.behind[key]
	if k == nil || k.rev != rev || len(k.to) > 0 {
		b.mu.Unlock()
		return // a knock named the key behind
	}
	done := make(chan struct{})
	k.next = done
	b.mu.Unlock()
	if !p.spawn(func() {
		defer close(done)
		ctx, cancel := p.ctxFor(p.ctx)
		defer cancel()
		resp, err := p.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMinCreateRev(rev+1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
		if err != nil || len(resp.Kvs) == 0 || role(resp.Kvs[0].Key[len(prefix)]) != exclusive {
			return
		}
		p.take(ring{kind: knockRing, key: key, rev: rev, to: string(resp.Kvs[0].Key)})
	}) {
		close(done)
	}
}

// ringOps returns the writes that ring each of to, contenders of the
// queue under prefix, about key: one write per remote Provider, attached
// to lease; this Provider's own contenders hear it at once.
func (p *Provider) ringOps(prefix, key string, rev int64, kind byte, to []string, lease clientv3.LeaseID) []clientv3.Op {
	var ids []string
	vals := make(map[string][]byte)
	for _, x := range to {
		r := ring{kind: kind, key: key, rev: rev, to: x}
		id, ok := ownerOf(prefix, x)
		switch {
		case !ok:
		case id == p.id:
			p.take(r)
		default:
			if _, seen := vals[id]; !seen {
				ids = append(ids, id)
			}
			vals[id] = appendRing(vals[id], r)
		}
	}
	ops := make([]clientv3.Op, 0, len(ids))
	for _, id := range ids {
		ops = append(ops, clientv3.OpPut(p.bellKey(id), string(vals[id]), clientv3.WithLease(lease)))
	}
	return ops
}

// ring sends r to the Provider it is meant for, on a goroutine: a lost
// ring is made up for by the watch of the key and the fallback reads.
func (p *Provider) ring(r ring) {
	target := r.to
	if r.kind == knockRing {
		target = r.key
	}
	id, ok := ownerOf(r.key[:strings.LastIndexByte(r.key, '/')+1], target)
	switch {
	case !ok:
		return
	case id == p.id:
		p.take(r)
		return
	}
	v := string(appendRing(nil, r))
	p.spawn(func() {
		ctx, cancel := p.ctxFor(p.ctx)
		defer cancel()
		s, err := p.lease(ctx)
		if err == nil {
			_, err = p.cli.Put(ctx, p.bellKey(id), v, clientv3.WithLease(s.id))
		}
		if err != nil {
			p.log.Debug("etcdlock: ring", "bell", id, "err", err)
		}
	})
}

// wasReleased reports whether key, created at revision rev, is among the
// Provider's latest exclusive releases.
func (p *Provider) wasReleased(key string, rev int64) bool {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	return slices.ContainsFunc(p.released, func(r released) bool { return r.key == key && r.created == rev })
}

// knockFollow is how long a contender waits behind the key it knocked on
// before it watches that key too (contender.follow).
const knockFollow = 100 * time.Millisecond

// knockGrace is how long a contender whose knocked key was deleted waits
// for that key's ring before it reads the line again.
const knockGrace = 20 * time.Millisecond
