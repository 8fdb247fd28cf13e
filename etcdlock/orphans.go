package etcdlock

import (
	"context"
	"time"

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

// sweepBackoff spaces the tries of a sweep: the first comes at once, and
// under a long outage one a second, each bounded by WithTimeout.
var sweepBackoff = kit.Backoff{Min: 50 * time.Millisecond, Max: time.Second}

// orphan records key to be deleted by the sweep, and starts one unless it
// runs. After Close it does nothing.
func (p *Provider) orphan(key string) {
	p.omu.Lock()
	p.orphans[key] = struct{}{}
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
	keys := make([]string, 0, len(p.orphans))
	for k := range p.orphans {
		keys = append(keys, k)
	}
	p.omu.Unlock()
	for _, k := range keys {
		if !p.deleteKey(k) {
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

func (p *Provider) deleteKey(key string) bool {
	ctx, cancel := p.ctxFor(p.ctx)
	defer cancel()
	_, err := p.cli.Delete(ctx, key)
	return err == nil
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
