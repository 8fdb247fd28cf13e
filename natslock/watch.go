package natslock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core/kit"
)

// Waiting. A waiting Acquire subscribes to the Provider's kit.Notifier under
// the key (or, for a semaphore or a reader-writer lock, the pattern of its
// keys) it waits on; waiters of one Provider first line up behind a local
// gate per key (gate.go), so only one of them subscribes at a time. The first
// subscriber of a key starts one KV watcher for it (an ordered consumer
// filtered to that key, delivering only new entries, headers only); the
// watcher wakes every waiter of the Provider on a delete or purge marker and
// remembers the marker's revision, so the woken attempt can write expecting
// it and take the lock in one round trip. The watcher lingers for a second
// after its last waiter leaves, so a hot lock does not create and delete a
// consumer on every handoff.
//
// One watcher per waited key, rather than one for the whole bucket, keeps the
// traffic a Provider receives proportional to what it waits for: a
// bucket-wide watcher would deliver every renewal of every lock in the
// bucket. (nats-server 2.9 has no multi-filter consumers, so a key set
// cannot share one consumer either.)
//
// nats-server 2.9 removes an expired key without a marker, so expiry is seen
// by the bounded retry of kit.Wait, whose sleep is capped by the holder's
// remaining TTL; the retry also covers a watcher that is still starting or
// reconnecting.

// drainTimeout bounds the wait for a stopped watcher's channel to close.
const drainTimeout = 5 * time.Second

type watch struct {
	key    string
	ctx    context.Context
	cancel context.CancelFunc
	idle   *time.Timer // set while no waiter listens
	live   atomic.Bool // the KV watcher is established
}

func (w *watch) stop() {
	w.cancel()
	if w.idle != nil {
		w.idle.Stop()
	}
}

// startWatch is the Notifier's OnFirst. Mutex waiters need no watcher:
// their line wakes them (line.go).
func (p *Provider) startWatch(key string) {
	if isMutexKey(key) {
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed {
		return
	}
	if w, ok := p.watches[key]; ok { // lingering: keep it
		if w.idle != nil {
			w.idle.Stop()
			w.idle = nil
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{key: key, ctx: ctx, cancel: cancel}
	p.watches[key] = w
	p.wg.Add(1)
	go p.runWatch(w)
}

// idleWatch is the Notifier's OnLast: the watcher stops after watchLinger
// unless a waiter comes back.
func (p *Provider) idleWatch(key string) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	w, ok := p.watches[key]
	if !ok {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(watchLinger, func() {
		p.wmu.Lock()
		defer p.wmu.Unlock()
		if p.watches[key] == w && w.idle == t {
			delete(p.watches, key)
			w.cancel()
		}
	})
	w.idle = t
}

var errWatcherClosed = errors.New("natslock: KV watcher closed")

// stopWatcher stops w and drains its channel until the subscription's
// delivery goroutine closes it, so that goroutine never blocks on a full
// channel; drainTimeout bounds the wait.
func stopWatcher(w jetstream.KeyWatcher) {
	_ = w.Stop()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

// watching reports whether this Provider has a watcher on key.
func (p *Provider) watching(key string) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, ok := p.watches[key]
	return ok
}

// watchLive reports whether this Provider's watcher on key is established,
// so that it will relay the key's next delete marker.
func (p *Provider) watchLive(key string) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	w, ok := p.watches[key]
	return ok && w.live.Load()
}

func (p *Provider) runWatch(w *watch) {
	defer p.wg.Done()
	defer w.cancel()
	for n := 0; w.ctx.Err() == nil; n++ {
		kw, err := p.kv.Watch(w.ctx, w.key, jetstream.UpdatesOnly(), jetstream.MetaOnly())
		if err != nil {
			if n == 0 && w.ctx.Err() == nil {
				p.cfg.log.Warn("distlock: release signal failed; waiters poll until it is back", "backend", backend, "key", w.key, "err", err)
			}
			t := time.NewTimer(kit.DefaultBackoff.Delay(n))
			select {
			case <-w.ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		n = 0
		w.live.Store(true)
		// Whatever happened before the watcher was live is unknown.
		p.notify.Notify(w.key)
		p.consume(w, kw)
		w.live.Store(false)
	}
}

// consume feeds the watcher's entries to the waiters until w stops or the
// watcher's channel closes.
func (p *Provider) consume(w *watch, kw jetstream.KeyWatcher) {
	updates := kw.Updates()
	for {
		select {
		case <-w.ctx.Done():
			stopWatcher(kw)
			return
		case e, ok := <-updates:
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			switch e.Operation() {
			case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
				p.hints.set(e.Key(), e.Revision())
				p.notify.Notify(w.key)
			}
		}
	}
}
