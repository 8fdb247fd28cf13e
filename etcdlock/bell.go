package etcdlock

import (
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
// knocks: it tells P's Provider that it waits right behind P, by a write
// to its bell. Across Providers only a contender with no other key ahead
// (or whose key ahead left: a "moved" ring) knocks; P reads which key is
// right behind it, 5 ms into its own wait or once granted
// (Provider.findNext). When P's grant is
// released, the transaction that deletes P
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
	b.next = max(b.next, from)
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

// bellEnded marks the bell unwatched. When its revision was compacted it
// watches it again from now at once; otherwise (the client closed, say)
// the next wait, or the next exclusive key of the Provider, starts its
// watch again from the revision after the last ring heard. The
// contenders that knocked read the line again, in case a ring is lost.
func (p *Provider) bellEnded(gen int, compacted int64) {
	b := &p.bells
	b.mu.Lock()
	if gen != b.gen {
		b.mu.Unlock()
		return
	}
	b.stop, b.ready = nil, false
	if compacted > 0 {
		// Watched again from now at once: the keys held here still take
		// knocks.
		b.next = 0
		p.startBellLocked(0)
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
		// Gone already: its release forgets the knocks on a key once its
		// delete is done (doorClosed), after it recorded the key in
		// p.released, or the key was never this Provider's.
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
		c.hear(deletion{broken: true, key: r.key, created: r.rev})
	}
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

// successorAfter is how long into its wait a knocking contender that is
// not next in line reads the key behind its own (contender.knock).
const successorAfter = 5 * time.Millisecond

// knockGrace is how long a contender whose knocked key was deleted waits
// for that key's ring before it reads the line again.
const knockGrace = 20 * time.Millisecond
