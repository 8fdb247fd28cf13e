package redisop

import (
	"slices"
	"strconv"
	"strings"

	"github.com/distlock/distlock/core/kit"
)

// lockKeys are a Lock's keys under one Client prefix, computed once by
// Client.Prepare for a Lock that serves many calls.
type lockKeys struct {
	prefix, base string
	key, wake    string
	mutex        []string // mutexKeys; len == cap, so an append copies

	// For a mutex, the heads of its script calls and its WakeKey, boxed
	// once (Client.call).
	acquire, try, release, spare []any
	ticketRelease                []any // release with the counter and boot keys, for a Client WithTicketInbox
	wakeArg                      any
}

// Prepare returns l with its keys under c's prefix computed once, for a
// Lock that serves many calls: every call through a Client with the same
// prefix then reuses them instead of building them again.
func (c *Client) Prepare(l Lock) Lock {
	if l.safe == "" {
		l.safe = kit.SafeName(l.Name)
	}
	l.keys = nil
	k := &lockKeys{prefix: c.prefix, base: c.base(l)}
	k.key, k.wake = c.Key(l), c.WakeKey(l)
	k.mutex = slices.Clip(c.mutexKeys(l))
	if l.Kind == KindMutex {
		k.acquire = scriptMutexAcquire.head(k.mutex)
		k.try = scriptMutexAcquire.head(k.mutex[:1])
		k.release = scriptMutexRelease.head(k.mutex)
		if c.tickets {
			k.ticketRelease = scriptMutexRelease.head(append(k.mutex, c.counterKey(l), c.BootKey()))
		}
		k.spare = scriptMutexSpare.head(k.mutex[:1])
		k.wakeArg = k.wake
	}
	l.keys = k
	return l
}

// prepared returns l's precomputed keys when they were computed for c's
// prefix.
func (c *Client) prepared(l Lock) *lockKeys {
	if k := l.keys; k != nil && k.prefix == c.prefix {
		return k
	}
	return nil
}

func (c *Client) base(l Lock) string {
	if k := c.prepared(l); k != nil {
		return k.base
	}
	safe := l.safe
	if safe == "" {
		safe = kit.SafeName(l.Name)
	}
	return c.prefix + "{" + safe + "}:"
}

// WakeKey is what a release of l publishes on Channel: both sides of a
// reader-writer lock share one.
func (c *Client) WakeKey(l Lock) string {
	if k := c.prepared(l); k != nil {
		return k.wake
	}
	switch l.Kind {
	case KindWrite, KindRead:
		return c.base(l) + "rw"
	}
	return c.Key(l)
}

// HandoffKey identifies the handoff of mutex l to the waiter owner: a
// release that hands the lock over publishes HandoffKey + "#" + token on
// the waiter's Inbox, and a Waker delivers it to Subscribe(HandoffKey) and
// ExpectHandoff(HandoffKey).
func (c *Client) HandoffKey(l Lock, owner string) string {
	return c.WakeKey(l) + "#" + owner
}

// parseHandoff splits a message published on a Channel or an Inbox into the key waiters
// listen on (a WakeKey or a HandoffKey) and, for a handoff, the fencing
// token granted with it (0 otherwise).
func parseHandoff(msg string) (key string, token uint64) {
	i := strings.LastIndexByte(msg, '#')
	if i < 0 || !strings.Contains(msg[:i], "#") {
		return msg, 0
	}
	tok, err := strconv.ParseUint(msg[i+1:], 10, 64)
	if err != nil || tok == 0 {
		return msg, 0
	}
	return msg[:i], tok
}

// Key returns the key that holds l's grants.
func (c *Client) Key(l Lock) string {
	if k := c.prepared(l); k != nil {
		return k.key
	}
	b := c.base(l)
	switch l.Kind {
	case KindWrite:
		return b + "rw:w"
	case KindRead:
		return b + "rw:r"
	case KindSemaphore:
		return b + "sem"
	}
	return b + "mutex"
}

// FenceKey is the key that holds the last fencing token of l's name for
// reader-writer locks and semaphores; while a writer holds the lock it is
// the writer's token.
func (c *Client) FenceKey(l Lock) string { return c.base(l) + "fence" }

// mutexKeys are the keys of the mutex scripts: the lock, and the wait
// queue's arrivals, entry expiries and TTLs. A mutex keeps its token in its
// lock key and needs no fence key.
func (c *Client) mutexKeys(l Lock) []string {
	if k := c.prepared(l); k != nil {
		return k.mutex
	}
	b := c.base(l)
	return []string{b + "mutex", b + "mutex:q", b + "mutex:qx", b + "mutex:qt"}
}

// rwKeys are the keys of the RW scripts: writer, readers, marker, fence.
func (c *Client) rwKeys(l Lock) []string {
	b := c.base(l)
	return []string{b + "rw:w", b + "rw:r", b + "rw:wait", b + "fence"}
}
