package delayproxy

import (
	"syscall"
	"time"
)

// sleep blocks the goroutine's thread in nanosleep: the runtime's timers
// round a sub-millisecond wait up to a millisecond or more.
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
