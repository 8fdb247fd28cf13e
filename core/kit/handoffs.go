package kit

import (
	"slices"
	"sync"
)

// Handoffs is the local bookkeeping of backends that hand a released lock
// straight to the next waiter of the same process, without a round trip:
// per key, the line of waiting acquires in arrival order and the live local
// holder. As with Gates, only the first waiter of a line contends on the
// backend while the rest wait without I/O; a release of the local holder
// claims the first waiter, builds its grant and delivers it, which it can
// do as soon as that waiter moved up, before the waiter's goroutine runs.
//
// L is the backend's record of a local holder (compared by ==), H its
// handle. The zero value is ready to use.
type Handoffs[L comparable, H any] struct {
	mu      sync.Mutex
	lines   map[string][]*Waiter[H]
	holders map[string]L
}

// waiterState is where a waiter stands.
type waiterState uint8

const (
	waiterIdle    waiterState = iota // waiting, free to be claimed
	waiterAway                       // contending on the backend: not to be claimed
	waiterClaimed                    // a release is handing it the lock
	waiterGranted                    // the handoff landed: h is its handle
	waiterGone                       // left the line, or took its grant
)

// Waiter is one waiting acquire in its key's line.
type Waiter[H any] struct {
	turn  chan struct{} // closed when the waiter becomes first in line
	tag   string
	state waiterState
	h     H
}

// Turn is closed when the waiter becomes first in its line.
func (w *Waiter[H]) Turn() <-chan struct{} { return w.turn }

// Tag returns what the waiter was enqueued with: whatever the backend needs
// to wake it (a Notifier key, say).
func (w *Waiter[H]) Tag() string { return w.tag }

// SetHolder records l as the local holder of key.
func (hs *Handoffs[L, H]) SetHolder(key string, l L) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.holders == nil {
		hs.holders = make(map[string]L)
	}
	hs.holders[key] = l
}

// DropHolder forgets l as key's local holder, if it still is.
func (hs *Handoffs[L, H]) DropHolder(key string, l L) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h, ok := hs.holders[key]; ok && h == l {
		delete(hs.holders, key)
	}
}

// Holder returns key's local holder, if any.
func (hs *Handoffs[L, H]) Holder(key string) (L, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	l, ok := hs.holders[key]
	return l, ok
}

// Enqueue puts a new waiter at the end of key's line; first reports whether
// it is first in line already (its Turn is then closed).
func (hs *Handoffs[L, H]) Enqueue(key, tag string) (w *Waiter[H], first bool) {
	w = &Waiter[H]{turn: make(chan struct{}), tag: tag}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.lines == nil {
		hs.lines = make(map[string][]*Waiter[H])
	}
	line := append(hs.lines[key], w)
	hs.lines[key] = line
	if len(line) == 1 {
		close(w.turn)
		return w, true
	}
	return w, false
}

// Len returns how many waiters stand in key's line.
func (hs *Handoffs[L, H]) Len(key string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.lines[key])
}

// First returns the tag of the first waiter of key's line.
func (hs *Handoffs[L, H]) First(key string) (tag string, ok bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if line := hs.lines[key]; len(line) > 0 {
		return line[0].tag, true
	}
	return "", false
}

// Claim reserves the first waiter of key's line for a handoff. It returns
// nil when the line is empty, or its first waiter is away or claimed by
// another release.
func (hs *Handoffs[L, H]) Claim(key string) *Waiter[H] {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	line := hs.lines[key]
	if len(line) == 0 || line[0].state != waiterIdle {
		return nil
	}
	line[0].state = waiterClaimed
	return line[0]
}

// Unclaim gives a claimed waiter back after a failed handoff: it goes on
// waiting as it would have without the claim.
func (hs *Handoffs[L, H]) Unclaim(w *Waiter[H]) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state == waiterClaimed {
		w.state = waiterIdle
	}
}

// Away marks an idle waiter as contending on the backend, where a grant of
// its own could land: no release claims it until Back. It returns false,
// changing nothing, when the waiter is claimed or granted already: it must
// then not contend but wait for (or take) the handoff.
func (hs *Handoffs[L, H]) Away(w *Waiter[H]) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	switch w.state {
	case waiterIdle:
		w.state = waiterAway
		return true
	case waiterAway:
		return true
	}
	return false
}

// Back makes an away waiter claimable again.
func (hs *Handoffs[L, H]) Back(w *Waiter[H]) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state == waiterAway {
		w.state = waiterIdle
	}
}

// Deliver gives a claimed waiter its handle. It returns false when the
// waiter left meanwhile: the caller then owns h and must release it.
func (hs *Handoffs[L, H]) Deliver(w *Waiter[H], h H) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state != waiterClaimed {
		return false
	}
	w.state, w.h = waiterGranted, h
	return true
}

// Take returns the waiter's handle once a handoff has delivered it (ok),
// and then takes the waiter out of the line; next reports whether another
// waiter moved up to first.
func (hs *Handoffs[L, H]) Take(key string, w *Waiter[H]) (h H, ok, next bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state != waiterGranted {
		return h, false, false
	}
	h = w.h
	return h, true, hs.remove(key, w)
}

// Leave takes the waiter out of key's line. It returns a handle that a
// handoff delivered but the waiter has not taken (ok), which the caller now
// owns (a handoff still in flight finds the waiter gone and releases what
// it granted itself), and whether another waiter moved up to first.
func (hs *Handoffs[L, H]) Leave(key string, w *Waiter[H]) (h H, ok, next bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h, ok = w.h, w.state == waiterGranted
	return h, ok, hs.remove(key, w)
}

// remove takes w out of key's line; hs.mu is held. It reports whether the
// next waiter moved up to first.
func (hs *Handoffs[L, H]) remove(key string, w *Waiter[H]) bool {
	if w.state == waiterGone {
		return false
	}
	var zero H
	w.state, w.h = waiterGone, zero
	line := hs.lines[key]
	i := slices.Index(line, w)
	if i < 0 {
		return false
	}
	line = slices.Delete(line, i, i+1)
	if len(line) == 0 {
		delete(hs.lines, key)
		return false
	}
	hs.lines[key] = line
	if i == 0 {
		close(line[0].turn)
		return true
	}
	return false
}
