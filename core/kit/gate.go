package kit

import (
	"context"
	"sync"
)

// Gates queues the waiting acquires of one process per key, so that only
// the first in line contends on the backend while the rest wait locally, in
// arrival order, without I/O. Without it every release wakes every local
// waiter into the same race, which all but one lose at the cost of a round
// trip each; on a quorum backend the race also splits the votes. Waiters in
// other processes still race. The zero value is ready to use.
type Gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	token chan struct{} // holds one value while the gate is free
	refs  int
}

// Enter waits until the caller is first in line for key, or ctx ends (then
// it returns an error matching ErrNotAcquired and ctx.Err()). On success
// the caller must call leave once its acquire attempt is over, granted or
// not, to let the next waiter in.
func (g *Gates) Enter(ctx context.Context, key string) (leave func(), err error) {
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

	unref := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if gt.refs--; gt.refs == 0 {
			delete(g.m, key)
		}
	}
	select {
	case <-gt.token:
		var once sync.Once
		return func() {
			once.Do(func() {
				gt.token <- struct{}{}
				unref()
			})
		}, nil
	case <-ctx.Done():
		unref()
		return nil, NotAcquired(ctx)
	}
}

// Len returns the number of keys with waiters in line.
func (g *Gates) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}
