package redlock

import (
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/redisop"
)

// GrantOf exposes a handle's grant to the tests, which break it by hand.
func GrantOf(h core.Handle) redisop.Grant { return h.(*handle).grant }

// OnWait has f told, before each waiting Acquire's wait, whether it skips
// the try at once after subscribing; restore ends that.
func OnWait(f func(name string, skip bool)) (restore func()) {
	onWait.Store(&f)
	return func() { onWait.Store(nil) }
}

// Listening reports whether every server's subscription of p runs.
func Listening(p *Provider) bool {
	for _, s := range p.servers {
		if s.waker.Listening() == 0 {
			return false
		}
	}
	return true
}

// OnHandover has f told each time a waiter holds a lock handed over by a
// majority; restore ends that.
func OnHandover(f func(name string)) (restore func()) {
	onHandover.Store(&f)
	return func() { onHandover.Store(nil) }
}
