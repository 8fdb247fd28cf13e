package etcdlock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchSpec is what a watch follows: the deletions of key (of every key
// under it, with prefix) at revision from and later, or from now when from
// is 0. A watch from a revision replays what happened since, so nothing
// between the read that chose the key and the start of the watch goes
// unseen; but etcd hands a watch that starts in the past its events only
// at its next catch-up round (every 100 ms), new ones included, while a
// watch from now has them at once.
type watchSpec struct {
	key    string
	prefix bool
	from   int64
	// created, if set, is called once the server confirmed the watch, with
	// the revision it started at: a watch from now hears every deletion
	// after it.
	created func(rev int64)
	// deleted is called for each deletion, in revision order.
	deleted func(ev *clientv3.Event)
	// put, when set, is called for each put instead, and deleted never.
	put func(ev *clientv3.Event)
	// ended is called once if the watch ends before stop: the server
	// cancelled it (compacted > 0 when its revision was compacted away) or
	// the client closed.
	ended func(compacted int64)
}

// watch starts a watch on a goroutine of the Provider's and returns at
// once the func that stops it. A callback may still run once stop has
// returned: the callers' callbacks check that they still want what they
// hear. After Close it starts nothing.
func (p *Provider) watch(w watchSpec) (stop func()) {
	ctx, cancel := context.WithCancel(p.ctx)
	opts := []clientv3.OpOption{clientv3.WithRev(w.from), clientv3.WithFilterPut()}
	if w.put != nil {
		opts[1] = clientv3.WithFilterDelete()
	}
	if w.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	if w.created != nil {
		opts = append(opts, clientv3.WithCreatedNotify())
	}
	p.spawn(func() {
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
			if resp.Created {
				w.created(resp.Header.Revision)
			}
			for _, ev := range resp.Events {
				switch {
				case w.put != nil && ev.Type == mvccpb.PUT:
					w.put(ev)
				case w.put == nil && ev.Type == mvccpb.DELETE:
					w.deleted(ev)
				}
			}
		}
		if ctx.Err() == nil {
			w.ended(0)
		}
	})
	return cancel
}

// deletion is a key of a lock deleted at revision at, as a contender hears
// of it.
type deletion struct {
	key     string
	at      int64
	cleared bool  // not yet deleted: the release of an exclusive grant of this Provider
	created int64 // cleared: the released key's create revision
	broken  bool  // not a deletion: the watch ended, read the queue (with key, a "moved" ring about it)
}

// Bounds of a lock watch: the deletions it keeps to replay to contenders
// that join it, and how long it outlives its last contender, so that a
// busy lock does not start a watch for every wait.
const (
	watchReplay = 256
	watchLinger = time.Second
)

// lockWatch is this Provider's watch of one lock's keys, shared by its
// contenders that wait for that lock: one etcd watch per lock and
// Provider, whatever the number of waits, and each release reaches a
// Provider once. It watches from the time it starts, so that it hears
// deletions as they happen (watchSpec), and keeps its latest deletions to
// replay to a contender that joins late (its read may be older than
// deletions already delivered). A contender whose read is older than
// what the watch can replay, or than the watch itself, reads the queue
// again.
type lockWatch struct {
	prefix string
	cs     map[*contender]int64 // the contenders, and the revision of the read each goes by
	from   int64                // the first revision the watch hears; 0 until the server confirmed it
	stop   func()               // stops the running watch; nil when none runs
	gen    int                  // counts the watches started, to ignore a stopped one
	recent []deletion           // the latest deletions delivered, oldest first
	idle   *time.Timer
}

// join makes sure that c hears every deletion of its lock after revision
// since, the revision of the read c goes by: c joins its lock's watch,
// which replays to c what it delivered after since, or starts if none
// runs. When the watch cannot tell c everything after since (it started
// later, or dropped deletions from its replay), c hears that its watch is
// broken and reads the queue again.
func (p *Provider) join(c *contender, since int64) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	w := p.watches[c.q.prefix]
	if w == nil {
		w = &lockWatch{prefix: c.q.prefix, cs: make(map[*contender]int64)}
		p.watches[c.q.prefix] = w
	}
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	w.cs[c] = since
	if c.r != slot {
		// A release that told this lock's waiters before c joined.
		for _, d := range p.released {
			if d.prefix == c.q.prefix {
				c.hear(d.deletion)
			}
		}
	}
	covered := w.from
	if len(w.recent) == watchReplay {
		// Deletions at its oldest revision may be gone from recent.
		covered = w.recent[0].at + 1
	}
	switch {
	case w.stop == nil:
		p.start(w)
	case w.from == 0:
		// Starting: created tells c whether it must read.
	case since+1 < covered:
		c.hear(deletion{broken: true})
	default:
		// Under p.bmu, so that the deliveries that follow come after these.
		for _, d := range w.recent {
			if d.at > since {
				c.hear(d)
			}
		}
	}
}

// start starts w's watch from now; p.bmu is held.
func (p *Provider) start(w *lockWatch) {
	w.gen++
	gen := w.gen
	w.from, w.recent = 0, nil
	w.stop = p.watch(watchSpec{key: w.prefix, prefix: true,
		created: func(rev int64) { p.created(w, gen, rev) },
		deleted: func(ev *clientv3.Event) {
			p.deliver(w, gen, deletion{key: string(ev.Kv.Key), at: ev.Kv.ModRevision})
		},
		ended: func(int64) { p.deliver(w, gen, deletion{broken: true}) },
	})
}

// created records that watch gen of w hears every deletion after revision
// rev, and has the contenders whose reads are older read the queue again:
// deletions between their reads and rev went unheard.
func (p *Provider) created(w *lockWatch, gen int, rev int64) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	if gen != w.gen {
		return
	}
	w.from = rev + 1
	for c, since := range w.cs {
		if since < rev {
			c.hear(deletion{broken: true})
		}
	}
}

// deliver hands d, heard by watch gen of w, to w's contenders.
func (p *Provider) deliver(w *lockWatch, gen int, d deletion) {
	p.bmu.Lock()
	if gen != w.gen {
		p.bmu.Unlock()
		return
	}
	if d.broken {
		w.stop, w.from, w.recent = nil, 0, nil
	} else {
		if len(w.recent) == watchReplay {
			w.recent = append(w.recent[:0], w.recent[1:]...)
		}
		w.recent = append(w.recent, d)
	}
	cs := make([]*contender, 0, len(w.cs))
	for c := range w.cs {
		cs = append(cs, c)
	}
	p.bmu.Unlock()
	for _, c := range cs {
		c.hear(d)
	}
}

// part takes c out of its lock's watch, which stops watchLinger after its
// last contender left.
func (p *Provider) part(c *contender) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	w := p.watches[c.q.prefix]
	if w == nil {
		return
	}
	delete(w.cs, c)
	if len(w.cs) > 0 || w.idle != nil {
		return
	}
	w.idle = time.AfterFunc(watchLinger, func() {
		p.bmu.Lock()
		defer p.bmu.Unlock()
		if len(w.cs) == 0 && p.watches[w.prefix] == w {
			if w.stop != nil {
				w.stop()
			}
			w.gen++
			delete(p.watches, w.prefix)
		}
	})
}

// releasedMemory is how many of its latest exclusive releases a Provider
// remembers for contenders that join after the release (Provider.cleared).
const releasedMemory = 64

// released is an exclusive grant of this Provider being released.
type released struct {
	prefix string
	deletion
}

// cleared tells the contenders of this Provider waiting right behind key,
// an exclusive grant created at revision created that is being released,
// that nothing is left ahead of them in its place (handle.release). A
// contender that has written its key but not yet joined its lock's watch
// hears it when it joins.
func (p *Provider) cleared(prefix, key string, created int64) {
	// The delete's revision is not known yet: a contender knows the key
	// right ahead by name and create revision.
	d := deletion{key: key, created: created, cleared: true}
	p.bmu.Lock()
	if len(p.released) == releasedMemory {
		p.released = append(p.released[:0], p.released[1:]...)
	}
	p.released = append(p.released, released{prefix, d})
	w := p.watches[prefix]
	var cs []*contender
	if w != nil {
		for c := range w.cs {
			cs = append(cs, c)
		}
	}
	p.bmu.Unlock()
	for _, c := range cs {
		if c.r != slot {
			c.hear(d)
		}
	}
}
