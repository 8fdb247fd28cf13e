package etcdlock

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core/kit"
)

// An orphan is a key of this Provider's that may still stand in its line
// although no acquire waits with it and no handle holds it: the key of an
// acquire whose write had an unknown outcome (the connection broke or the
// timeout passed after the request was sent; etcd's client never retries
// a write, and the cluster may apply it after the client gave up, as when
// the member that forwarded it dies and a new leader commits it), of a
// release whose delete failed, or of a grant lost while its key may live
// on. An orphan is attached to the Provider's lease, which the Provider's
// other keys keep alive, so it would not expire: every contender behind it
// would wait for as long as the Provider lives. So the Provider deletes
// its orphans on a goroutine of its own, trying again (sweepBackoff) until
// every delete has succeeded (the delete of a key already gone succeeds
// too) or the Provider closes, whose Close revokes the lease and deletes
// the keys with it. A contender behind an orphan hears the delete from its
// watch, as from any release.
//
// A write with an unknown outcome may also land after the sweep: a member
// frozen or cut off with the request in hand can pass it on when it
// returns, long after the client gave up. So a sweep does not just delete
// the key: in the same transaction it writes the key's void mark
// ("<prefix>void/..."), attached to the key's lease, and every write of a
// key requires that its mark does not exist. A late write then fails, or
// finds the lease gone and fails too, since the mark lives as long as the
// lease. Orphans are rare (faults), and their marks go with their lease.

// sweepBackoff spaces the tries of a sweep: the first comes at once, and
// under a long outage one a second, each bounded by WithTimeout.
var sweepBackoff = kit.Backoff{Min: 50 * time.Millisecond, Max: time.Second}

// orphan records key to be deleted by the sweep, and starts one unless it
// runs. After Close it does nothing.
func (p *Provider) orphan(key string, lease clientv3.LeaseID) {
	p.omu.Lock()
	p.orphans[key] = lease
	start := !p.sweeping
	p.sweeping = true
	p.omu.Unlock()
	if start && !p.spawn(p.sweep) {
		p.omu.Lock()
		p.sweeping = false
		p.omu.Unlock()
	}
}

// sweep deletes the orphans until none is left or the Provider closes.
func (p *Provider) sweep() {
	t := time.NewTimer(0)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		if p.deleteOrphans() {
			return
		}
		t.Reset(sweepBackoff.Delay(n))
	}
}

// deleteOrphans deletes the orphans, one request each, until one fails. It
// reports whether none is left, and then marks the sweep over.
func (p *Provider) deleteOrphans() bool {
	p.omu.Lock()
	keys := maps.Clone(p.orphans)
	p.omu.Unlock()
	for k, lease := range keys {
		if !p.voidKey(k, lease) {
			break
		}
		p.omu.Lock()
		delete(p.orphans, k)
		p.omu.Unlock()
	}
	p.omu.Lock()
	defer p.omu.Unlock()
	if len(p.orphans) > 0 {
		return false
	}
	p.sweeping = false
	return true
}

// voidKey deletes key and writes its void mark on lease, in one
// transaction, and reports whether the key is gone for good: deleted, and
// never to be written again, or its lease gone, with which it went and with
// which no write can attach it again.
func (p *Provider) voidKey(key string, lease clientv3.LeaseID) bool {
	ctx, cancel := p.ctxFor(p.ctx)
	defer cancel()
	_, err := p.cli.Txn(ctx).Then(
		clientv3.OpPut(p.voidMark(key), "", clientv3.WithLease(lease)),
		clientv3.OpDelete(key),
	).Commit()
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// voidMark is the name of key's void mark, outside every lock's keys.
func (p *Provider) voidMark(key string) string {
	return p.opts.prefix + voidKind + strings.TrimPrefix(key, p.opts.prefix)
}

// unvoided is the condition of every write of key: its void mark does not
// exist.
func (p *Provider) unvoided(key string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(p.voidMark(key)), "=", 0)
}

// spawn runs f on a goroutine that Close waits for. After Close it runs
// nothing and returns false.
func (p *Provider) spawn(f func()) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// ctxFor bounds ctx by the Provider's timeout.
func (p *Provider) ctxFor(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.opts.timeout)
}
