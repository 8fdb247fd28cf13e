package kit

import (
	"context"
	"sync"

	"github.com/distlock/distlock/core"
)

// Gates queues the waiting acquires of one process per key, so that only
// the first in line contends on the backend while the rest wait locally, in
// arrival order, without I/O. Without it every release wakes every local
// waiter into the same race, which all but one lose at the cost of a round
// trip each; on a quorum backend the race also splits the votes. Waiters in
// other processes still race. It is the line of Handoffs without holders or
// handoffs. The zero value is ready to use.
type Gates struct {
	line Handoffs[struct{}, core.Handle]
}

// Enter waits until the caller is first in line for key, or ctx ends (then
// it returns an error matching ErrNotAcquired and ctx.Err()). On success
// the caller must call leave once its acquire attempt is over, granted or
// not, to let the next waiter in.
func (g *Gates) Enter(ctx context.Context, key string) (leave func(), err error) {
	w, _ := g.line.Enqueue(key, "")
	select {
	case <-w.Turn():
		return sync.OnceFunc(func() { g.line.Leave(key, w) }), nil
	case <-ctx.Done():
		g.line.Leave(key, w)
		return nil, NotAcquired(ctx)
	}
}

// Len returns the number of keys with waiters in line.
func (g *Gates) Len() int {
	g.line.mu.Lock()
	defer g.line.mu.Unlock()
	return len(g.line.lines)
}
