package etcdlock

import (
	"context"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Mutex returns the exclusive lock name. It does no I/O; a bad name is
// reported by the first acquire call (core.ErrInvalidName).
//
// Its keys live under "<prefix>m/<kit.SafeName(name)>/". TryAcquire is one
// transaction that writes a key only if the lock has none (one round trip,
// nothing left behind when busy). Acquire writes its key and reads the
// keys ahead in one transaction; when it must wait behind another
// Provider's key, it is rung on its Provider's bell by that key's release
// (it knocks on that key's Provider first when no other key is ahead:
// one write), and is granted, in arrival order, when nothing is ahead;
// other waits watch the deletions of the keys ahead (see the package
// documentation). The fencing token is the key's create revision.
// Release is one delete, which also rings the next contender. The Locker
// implements core.Inspector.
func (p *Provider) Mutex(name string) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.probe.Mutex(&inspected{locker{q: p.queue(name, mutexKind, 1), r: exclusive}})
}

// locker is one role in one queue.
type locker struct {
	q *queue
	r role
}

func (l *locker) Name() string { return l.q.name }

// TryAcquire makes one attempt; a busy lock gives an error matching
// core.ErrNotAcquired that names the holder.
func (l *locker) TryAcquire(ctx context.Context) (core.Handle, error) {
	return l.q.tryAcquire(ctx, l.r)
}

// Acquire waits in line until it is granted or ctx is done; a wait that
// ends without a grant leaves nothing behind.
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	return l.q.acquire(ctx, l.r)
}

// inspected is a locker with a single holder: a Mutex, an RWMutex's write
// side.
type inspected struct{ locker }

var _ core.Inspector = (*inspected)(nil)

// Holder reports the current holder: the identity its Provider was
// configured with (WithIdentity) and its fencing token. held is false when
// the lock is free, or held by readers. One round trip; it takes no lock.
func (l *inspected) Holder(ctx context.Context) (core.Holder, bool, error) {
	return l.q.holder(ctx)
}
