package kit

import "time"

// Clock tells the time and waits. Keeper and election take one, so that
// tests can drive them without sleeping; the default is SystemClock.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed, as
	// time.After does; d ≤ 0 fires at once.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the Clock of package time.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// at returns a channel that receives once clock reaches t. It reads the
// clock again after asking for the wait, so that a clock moving in steps (a
// test's) cannot pass t unseen between the read and the wait.
func at(clock Clock, t time.Time) <-chan time.Time {
	ch := clock.After(t.Sub(clock.Now()))
	if now := clock.Now(); !now.Before(t) {
		passed := make(chan time.Time, 1)
		passed <- now
		return passed
	}
	return ch
}
