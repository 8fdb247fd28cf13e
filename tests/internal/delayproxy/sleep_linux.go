package delayproxy

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// clock is one writer's timer. On Linux it is a timerfd read through the
// runtime's poller: the goroutine waits without holding a thread or a P,
// and epoll wakes it when the kernel's timer fires, within microseconds.
// The runtime's own timers round a sub-millisecond wait up to a
// millisecond or more, and a nanosleep holds its P until the scheduler
// takes it back, which on a two-core machine stalls the goroutines that
// forward the other connections' bytes.
type clock struct {
	f *os.File // nil when no timerfd could be made: nanosleep instead
}

func newClock() *clock {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &clock{}
	}
	return &clock{f: os.NewFile(uintptr(fd), "delayproxy-timer")}
}

// sleep waits d, never less.
func (c *clock) sleep(d time.Duration) {
	if c.f != nil && c.arm(d) {
		var buf [8]byte
		if _, err := c.f.Read(buf[:]); err == nil {
			return
		}
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// arm sets the timer to fire once, d from now.
func (c *clock) arm(d time.Duration) bool {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	ok := false
	err := withFd(c.f, func(fd int) {
		ok = unix.TimerfdSettime(fd, 0, &spec, nil) == nil
	})
	return err == nil && ok
}

func withFd(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

func (c *clock) close() {
	if c.f != nil {
		_ = c.f.Close()
	}
}
