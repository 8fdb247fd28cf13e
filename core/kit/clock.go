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
