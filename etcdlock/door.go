package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The door of an exclusive key of this Provider's is where knocks on it
// land (bell.go): the contenders right behind it, to ring when it goes.
// Its release takes the knocks so far (closeDoor), deletes the key, then
// forgets the door (doorClosed) and rings those that knocked meanwhile;
// a knock that comes later is answered from p.released.

// knocks are the contenders that knocked on one key: their keys' names.
type knocks struct {
	rev  int64
	to   []string
	told int // how many of to the release took (closeDoor)
}

// maxRingOps bounds the bell writes a release puts in its delete's
// transaction (etcd allows 128 operations); the others are rung after it.
const maxRingOps = 64

// openDoor records key, an exclusive key of this Provider's created at
// revision rev, for knocks, and has the Provider's bell watched.
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

// closeDoor returns the contenders that knocked on key so far.
func (p *Provider) closeDoor(key string) []string {
	b := &p.bells
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.behind[key]
	if k == nil {
		return nil
	}
	k.told = len(k.to)
	return slices.Clone(k.to)
}

// doorClosed forgets key, whose delete is done, and returns the
// contenders that knocked on it since closeDoor.
func (p *Provider) doorClosed(key string) []string {
	b := &p.bells
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.behind[key]
	delete(b.behind, key)
	if k == nil {
		return nil
	}
	return k.to[k.told:]
}

// findNext reads the key right behind key, an exclusive grant of this
// Provider's created at revision rev in the queue under prefix, and
// records it as knocked when it is exclusive: a contender that found more
// than one key ahead of it does not knock, since the key it waits behind
// was not granted yet. A key that a knock named already needs no read. An
// answer that comes after the release is rung on its own (take).
func (p *Provider) findNext(prefix, key string, rev int64) {
	b := &p.bells
	b.mu.Lock()
	k := b.behind[key]
	known := k == nil || k.rev != rev || len(k.to) > 0
	b.mu.Unlock()
	if known {
		return
	}
	p.spawn(func() {
		if next, ok := p.keyBehind(prefix, rev); ok {
			p.take(ring{kind: knockRing, key: key, rev: rev, to: next})
		}
	})
}

// keyBehind reads the first key created after revision rev in the queue
// under prefix, when it is exclusive. The read is serializable (the
// member's own state, without a round of its cluster's): a key it misses
// is one whose contender the bells do not reach, and that hears its turn
// from its watch of the key ahead or a fallback read.
func (p *Provider) keyBehind(prefix string, rev int64) (string, bool) {
	ctx, cancel := p.ctxFor(p.ctx)
	defer cancel()
	resp, err := p.cli.Get(ctx, prefix, clientv3.WithSerializable(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMinCreateRev(rev+1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 || role(resp.Kvs[0].Key[len(prefix)]) != exclusive {
		return "", false
	}
	return string(resp.Kvs[0].Key), true
}

// delete deletes the key; an exclusive key also rings the contenders that
// knocked on it. A released grant's rings say "cleared" and go in the
// delete's transaction, but for this Provider's own contenders, which hear
// it at once (as Provider.cleared tells them), and for knocks that came
// after closeDoor, rung once the delete is done. A key that was never
// granted says "moved" once it is gone, and when nobody knocked, tells
// the key right behind it (one read): that contender waits behind it
// without having knocked.
func (h *handle) delete(ctx context.Context) error {
	if h.r != exclusive {
		_, err := h.p.cli.Delete(ctx, h.key)
		return err
	}
	p, rev, kind := h.p, int64(h.FencingToken()), byte(movedRing)
	if h.granted.Load() {
		kind = clearedRing
	}
	knocked := p.closeDoor(h.key)
	rest := knocked
	var err error
	if kind == clearedRing && len(knocked) > 0 {
		var ops []clientv3.Op
		ops, rest = p.ringOps(h.q.prefix, h.key, rev, knocked, h.s.id)
		_, err = p.cli.Txn(ctx).Then(append(ops, clientv3.OpDelete(h.key))...).Commit()
		if err != nil {
			// Rung on their own: the grant was released either way.
			rest = knocked
		}
	}
	if kind == movedRing || len(knocked) == 0 || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		_, err = p.cli.Delete(ctx, h.key)
	}
	for _, x := range append(rest, p.doorClosed(h.key)...) {
		p.ring(ring{kind: kind, key: h.key, rev: rev, to: x})
	}
	if kind == movedRing && len(knocked) == 0 && err == nil {
		p.spawn(func() {
			if next, ok := p.keyBehind(h.q.prefix, rev); ok {
				p.ring(ring{kind: movedRing, key: h.key, rev: rev, to: next})
			}
		})
	}
	return err
}

// ringOps returns the writes that ring "cleared" to each of to,
// contenders of the queue under prefix, about key: one write per remote
// Provider, attached to lease, up to maxRingOps; this Provider's own
// contenders hear it at once. It returns too the contenders it did not
// ring.
func (p *Provider) ringOps(prefix, key string, rev int64, to []string, lease clientv3.LeaseID) ([]clientv3.Op, []string) {
	var ids, rest []string
	vals := make(map[string][]byte)
	for _, x := range to {
		r := ring{kind: clearedRing, key: key, rev: rev, to: x}
		id, ok := ownerOf(prefix, x)
		_, seen := vals[id]
		switch {
		case !ok:
		case id == p.id:
			p.take(r)
		case !seen && len(ids) == maxRingOps:
			rest = append(rest, x)
		default:
			if !seen {
				ids = append(ids, id)
			}
			vals[id] = appendRing(vals[id], r)
		}
	}
	ops := make([]clientv3.Op, 0, len(ids))
	for _, id := range ids {
		ops = append(ops, clientv3.OpPut(p.bellKey(id), string(vals[id]), clientv3.WithLease(lease)))
	}
	return ops, rest
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
