package etcdlock

import (
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Semaphore returns a semaphore of max slots named name. It does no I/O; an
// invalid name, or a max below 1, is reported by the first acquire call.
//
// Contenders queue under "<prefix>s/<kit.SafeName(name)>/", each with a key
// of its own, and the first max keys hold the semaphore: a contender is
// admitted, in arrival order, when fewer than max keys are ahead of it.
// TryAcquire writes its key and counts the keys ahead in one transaction,
// and deletes the key again when max are ahead (a second round trip). A
// waiting Acquire watches the semaphore's keys and crosses off the keys
// ahead of it as they go: a release wakes only the contender it admits,
// and none makes a request until it is admitted. Fencing tokens are create
// revisions, increasing in grant order. Every user of the name must pass
// the same max.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if max < 1 {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, kit.Invalid("semaphore max %d is below 1", max)))
	}
	return p.probe.Semaphore(&locker{q: p.queue(name, semaphoreKind, max), r: slot})
}
