package etcdlock

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchSpec is what a watch follows: the deletions of key (of every key
// under it, with prefix) at revision from and later. A watch from a
// revision replays what happened since, so nothing between the read that
// chose the key and the start of the watch goes unseen.
type watchSpec struct {
	key    string
	prefix bool
	from   int64
	// deleted is called for each deletion, in revision order; with prefix
	// the event carries the deleted key's last version (PrevKv).
	deleted func(ev *clientv3.Event)
	// ended is called once if the watch ends before stop: the server
	// cancelled it (compacted > 0 when its revision was compacted away) or
	// the client closed.
	ended func(compacted int64)
}

// watch starts a watch on a goroutine of the Provider's and returns at
// once the func that stops it. A callback may still run once stop has returned: the
// callers' callbacks check that they still want what they hear. After
// Close it starts nothing and reports the watch ended.
func (p *Provider) watch(w watchSpec) (stop func()) {
	p.wmu.Lock()
	if p.closed {
		p.wmu.Unlock()
		w.ended(0)
		return func() {}
	}
	p.wg.Add(1)
	p.wmu.Unlock()
	ctx, cancel := context.WithCancel(p.ctx)
	opts := []clientv3.OpOption{clientv3.WithRev(w.from), clientv3.WithFilterPut()}
	if w.prefix {
		opts = append(opts, clientv3.WithPrefix(), clientv3.WithPrevKV())
	}
	go func() {
		defer p.wg.Done()
		defer cancel()
		// Watch waits for the server to confirm the watch (a round trip,
		// one creation at a time per client stream): here, not in the
		// caller.
		ch := p.cli.Watch(ctx, w.key, opts...)
		for resp := range ch {
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					p.log.Debug("etcdlock: watch ended", "key", w.key, "err", err)
					w.ended(resp.CompactRevision)
				}
				cancel()
				for range ch { // the client closes ch once the cancel is through
				}
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					w.deleted(ev)
				}
			}
		}
		if ctx.Err() == nil {
			w.ended(0)
		}
	}()
	return cancel
}
