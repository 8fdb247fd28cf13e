package filelock

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// starveAfter is how many races for a released lock a waiter loses before
// it claims priority, and how many releases in a row a waiter without
// priority lets go by for waiters with it.
const starveAfter = 2

// priority makes waiting for a Semaphore, or for a Mutex whose waiters
// cannot line up (line.go), less unfair. Waiters wake together when the
// lock is released and race for it, and the race is not random: the kernel
// signals watchers in a fixed order, so the same waiter tends to win and
// another can starve. A waiter that has lost starveAfter races claims
// priority by holding a shared lock on the lock's .prio file. While anyone
// holds a claim, a waiter without one lets the next releases go by without
// trying (at most starveAfter in a row, so a claimant that is stuck, say a
// stopped process, delays the others only briefly). Claimants race among
// themselves. A claim ends with the wait, or with the process. Priority
// never affects who may hold the lock, only who tries.
type priority struct {
	path     string
	f        *os.File
	tries    int
	losses   int
	deferred int
	claiming bool
}

// wrap returns try with the priority rule around it.
func (pr *priority) wrap(try kit.Attempt) kit.Attempt {
	return func(ctx context.Context) (core.Handle, time.Duration, error) {
		pr.tries++
		// The first try of an Acquire always goes ahead: on a free lock it
		// is the fast path, and it costs nothing extra.
		if pr.tries > 1 && !pr.claiming {
			if pr.deferred < starveAfter && pr.othersClaim() {
				pr.deferred++
				return nil, 0, core.ErrNotAcquired
			}
			pr.deferred = 0
		}
		h, retry, err := try(ctx)
		if pr.tries > 1 && errors.Is(err, core.ErrNotAcquired) {
			pr.losses++
			if pr.losses >= starveAfter && !pr.claiming {
				pr.claim()
			}
		}
		return h, retry, err
	}
}

func (pr *priority) open() bool {
	if pr.f == nil {
		f, err := openLockFile(pr.path, os.O_RDONLY)
		if err != nil {
			return false
		}
		pr.f = f
	}
	return true
}

// othersClaim reports whether some waiter holds a priority claim: then an
// exclusive lock on the .prio file fails.
func (pr *priority) othersClaim() bool {
	if !pr.open() {
		return false
	}
	if err := lockNB(pr.f, false); err != nil {
		return errors.Is(err, errLocked)
	}
	_ = unlock(pr.f)
	return false
}

func (pr *priority) claim() {
	if pr.open() && lockNB(pr.f, true) == nil {
		pr.claiming = true
	}
}

// done ends the wait and its claim.
func (pr *priority) done() {
	if pr.f != nil {
		_ = pr.f.Close()
		pr.f = nil
	}
	pr.claiming = false
}
