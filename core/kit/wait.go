package kit

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/core"
)

// Backoff is a randomized, bounded exponential backoff: the n-th delay is
// drawn uniformly from [d/2, d] where d = min(Max, Min·2ⁿ). The randomness
// keeps contenders that failed together from retrying together.
type Backoff struct {
	Min, Max time.Duration
}

// DefaultBackoff is the fallback retry cadence of a waiting acquire. Waiters
// normally wake earlier, on a release signal; the backoff only bounds how
// long a missed signal can cost.
var DefaultBackoff = Backoff{Min: 2 * time.Millisecond, Max: 250 * time.Millisecond}

// QueuedPollMin is the least first delay of Backoff.Queued.
const QueuedPollMin = 20 * time.Millisecond

// Queued returns b for a waiter whose turn the lock's release announces to
// it alone (a queued waiter): its polls only refresh its place and recover
// a lost announcement, so they start at QueuedPollMin at least, and many
// waiters do not load the server with early polls.
func (b Backoff) Queued() Backoff { return b.AtLeast(QueuedPollMin) }

// AtLeast returns b with its first delay raised to least when lower, and its
// longest to match.
func (b Backoff) AtLeast(least time.Duration) Backoff {
	b.Min = max(b.Min, least)
	b.Max = max(b.Max, b.Min)
	return b
}

// Delay returns the randomized delay before retry n (n ≥ 0).
func (b Backoff) Delay(n int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = time.Millisecond
	}
	if hi < lo {
		hi = lo
	}
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	half := d / 2
	return half + rand.N(d-half+1)
}

// Attempt makes one try at a lock. It returns the handle when granted; an
// error matching ErrNotAcquired when the lock is busy, with retryIn > 0 when
// the backend knows the longest it is worth waiting before trying again (the
// holder's remaining lease, say); any other error ends the wait at once.
type Attempt func(ctx context.Context) (h core.Handle, retryIn time.Duration, err error)

// Wait calls try until it grants the lock, fails with an error that is not
// ErrNotAcquired, or ctx is done. Between tries it sleeps for the next
// backoff delay (capped by the retryIn hint) but wakes at once when wake
// receives, so a release signal hands the lock over in about one round trip.
// wake may be nil. When ctx ends it returns an error matching ErrNotAcquired
// and ctx.Err().
func Wait(ctx context.Context, b Backoff, wake <-chan struct{}, try Attempt) (core.Handle, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return nil, NotAcquired(ctx)
		}
		h, retryIn, err := try(ctx)
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, NotAcquired(ctx)
		}
		if !errors.Is(err, core.ErrNotAcquired) {
			return nil, err
		}
		d := b.Delay(n)
		if retryIn > 0 && retryIn < d {
			d = retryIn
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, NotAcquired(ctx)
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}
