package etcdlock

import (
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// RWMutex returns the reader-writer lock name. It does no I/O; a bad name
// is reported by the first acquire call (core.ErrInvalidName).
//
// Readers and writers queue together under
// "<prefix>rw/<kit.SafeName(name)>/", each with a key of its own, in
// arrival (create revision) order. A writer is admitted when no key is
// ahead of it; a reader when no writer's key is ahead of it, so a waiting
// writer keeps later readers out (writer preference) and readers that
// arrived before it share the lock. A waiting reader crosses off the
// writers ahead of it as they go, a waiting writer every key. Costs are a
// Mutex's: TryAcquire one round trip, Release one delete. Fencing tokens
// are create revisions, increasing in grant order across both sides. The
// write side implements core.Inspector; the read side, which has many
// holders, does not.
func (p *Provider) RWMutex(name string) core.RWLocker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	q := p.queue(name, rwKind, 1)
	return p.probe.RWMutex(&rwMutex{inspected: inspected{locker{q: q, r: exclusive}}, read: locker{q: q, r: shared}})
}

type rwMutex struct {
	inspected
	read locker
}

// RLocker returns the shared side.
func (rw *rwMutex) RLocker() core.Locker { return &rw.read }
