package natslock

import (
	"context"
	"sync"
)

// gates queues the waiting Acquires of one Provider per key, so that only
// the first in line contends on the server and the rest wait locally,
// without I/O, in arrival order. Without it, every release would wake every
// local waiter into the same compare-and-set race, of which all but one are
// lost round trips. Waiters of different Providers (processes) still race.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	token chan struct{} // holds one value while the gate is free
	refs  int
}

// enter waits for key's gate, or for ctx to end. On success the caller must
// call the returned func to let the next waiter in.
func (g *gates) enter(ctx context.Context, key string) (func(), error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[string]*gate)
	}
	gt, ok := g.m[key]
	if !ok {
		gt = &gate{token: make(chan struct{}, 1)}
		gt.token <- struct{}{}
		g.m[key] = gt
	}
	gt.refs++
	g.mu.Unlock()

	leave := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if gt.refs--; gt.refs == 0 {
			delete(g.m, key)
		}
	}
	select {
	case <-gt.token:
		return func() { gt.token <- struct{}{}; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
