package kit

import "sync"

// Notifier fans release signals out to the waiters of each key. Backends feed
// it from whatever tells them a lock was released (a Redis PUBLISH, an
// inotify event, a NATS watch) and hand each waiter the channel to pass to
// Wait.
//
// A signal that arrives while nobody listens is dropped; a waiter subscribes
// before its first try so it cannot miss the release that follows.
type Notifier struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	// OnFirst and OnLast, when set, are called (outside the Notifier's lock)
	// when a key gains its first subscriber or loses its last, so a backend
	// can start and stop watching it. OnLast of a key happens before a
	// later OnFirst of the same key.
	OnFirst, OnLast func(key string)
	hooks           sync.Mutex
}

// Subscribe returns a channel that receives (without blocking the sender,
// coalescing bursts) each Notify of key, and a func that unsubscribes.
func (n *Notifier) Subscribe(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.hooks.Lock()
	n.mu.Lock()
	if n.subs == nil {
		n.subs = make(map[string]map[chan struct{}]struct{})
	}
	set, ok := n.subs[key]
	if !ok {
		set = make(map[chan struct{}]struct{})
		n.subs[key] = set
	}
	set[ch] = struct{}{}
	n.mu.Unlock()
	if !ok && n.OnFirst != nil {
		n.OnFirst(key)
	}
	n.hooks.Unlock()

	var once sync.Once
	return ch, func() { once.Do(func() { n.unsubscribe(key, ch) }) }
}

func (n *Notifier) unsubscribe(key string, ch chan struct{}) {
	n.hooks.Lock()
	defer n.hooks.Unlock()
	n.mu.Lock()
	set := n.subs[key]
	delete(set, ch)
	last := len(set) == 0
	if last {
		delete(n.subs, key)
	}
	n.mu.Unlock()
	if last && n.OnLast != nil {
		n.OnLast(key)
	}
}

// Notify wakes every current subscriber of key.
func (n *Notifier) Notify(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// NotifyAll wakes every subscriber of every key, for when a backend may have
// missed signals (a reconnect, say).
func (n *Notifier) NotifyAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, set := range n.subs {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Len returns the number of keys with subscribers.
func (n *Notifier) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.subs)
}
