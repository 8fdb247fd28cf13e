package polllease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// TryAcquire makes one attempt at target's lease, whoever is preferred for
// it, and starts its poller when granted. It fails with an error matching
// core.ErrNotAcquired when the lease is held (by another instance or
// already by this one) or the instance's heartbeat is uncertain, with
// core.ErrInvalidName for an empty or non-UTF-8 target, and with
// ErrNotRunning outside Run. One store round trip.
//
// A target taken this way is still subject to rebalancing: once held for
// MinHold, it is released if another instance is preferred for it.
func (c *Coordinator) TryAcquire(ctx context.Context, target string) error {
	if err := kit.ValidateName(target); err != nil {
		return err
	}
	c.mu.Lock()
	running, owned := c.running, c.owned[target] != nil
	c.mu.Unlock()
	switch {
	case !running:
		return ErrNotRunning
	case owned:
		return kit.Busy("target %q is held by this instance", target)
	case !c.canAcquire():
		return kit.Busy("instance %s: heartbeat uncertain", c.id)
	}
	return c.acquire(ctx, target)
}

// Release stops target's poller, waits for it to return, and releases the
// lease (reason "manual"). Releasing a target this instance does not hold
// returns nil. A later reconcile tick acquires the target again if this
// instance is preferred for it. One store round trip.
func (c *Coordinator) Release(ctx context.Context, target string) error {
	c.mu.Lock()
	l := c.owned[target]
	if l != nil {
		c.detach(l)
	}
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	return c.release(ctx, l, ReasonManual)
}

// IsOwned reports whether this instance holds target's lease and may poll
// it: the lease's handle is live, the lease's and the heartbeat's trust
// windows are open by the clock (even when the timers that would close them
// have not fired yet, right after a freeze) and the lease's last renewal
// did not fail. It is local and cheap; IsOwnedStrict asks the store.
func (c *Coordinator) IsOwned(target string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.owned[target]
	return l != nil && c.mayPoll(l, c.now())
}

// IsOwnedStrict is IsOwned confirmed by the store. Use it before a
// critical poll. It asks the lease's handle when the backend can confirm a
// grant with its store (core.Verifier: pglock and mysqllock, in every
// mode), and otherwise whether the lock's current holder has this
// instance's fencing token (core.Inspector: filelock, redislock, redlock by
// a majority, natslock, etcdlock, core/memlock). A backend that can do
// neither gives an error matching core.ErrUnsupported. One store round
// trip when IsOwned is true, none otherwise.
func (c *Coordinator) IsOwnedStrict(ctx context.Context, target string) (bool, error) {
	c.mu.Lock()
	l := c.owned[target]
	local := l != nil && c.mayPoll(l, c.now())
	c.mu.Unlock()
	if !local {
		return false, nil
	}
	if v, ok := l.h.(core.Verifier); ok {
		held, err := v.Verify(ctx)
		if !errors.Is(err, core.ErrUnsupported) {
			return held, err
		}
	}
	in, ok := c.cfg.Provider.Mutex(c.cfg.LeaseName(target)).(core.Inspector)
	if !ok {
		return false, fmt.Errorf("%w: polllease: the backend can neither confirm a lease nor tell its holder", core.ErrUnsupported)
	}
	h, held, err := in.Holder(ctx)
	if err != nil {
		return false, err
	}
	return held && h.Token == l.token, nil
}

// Owned returns the targets this instance holds, sorted.
func (c *Coordinator) Owned() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.owned))
	for t := range c.owned {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Members returns the live instances as of the last reconcile tick, sorted.
func (c *Coordinator) Members() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members)
}

// PreferredOwner returns the instance the last reconcile tick assigned
// target to (bounded-load rendezvous hashing over the live members), or,
// for a target that tick did not see, its rendezvous choice ignoring load.
// It is "" before the first tick. The assignment is desired, not effective:
// the owner is whoever holds the lease.
func (c *Coordinator) PreferredOwner(target string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.assign[target]; ok {
		return m
	}
	return Preferred(target, c.members)
}

// IsPreferredOwner reports whether PreferredOwner(target) is this instance.
func (c *Coordinator) IsPreferredOwner(target string) bool {
	return c.PreferredOwner(target) == c.id
}

// Snapshot is an operator's view of a group: who is live, who holds what,
// and where this instance stands on each target.
type Snapshot struct {
	Instance string      // the instance that took the snapshot
	Taken    time.Time   // when
	Members  []string    // live instances, from the store
	Leases   []LeaseInfo // one per target of the last reconcile tick, sorted by target
}

// LeaseInfo is one target in a Snapshot.
type LeaseInfo struct {
	Target    string
	Lock      string // the lease's lock name on the store
	Preferred string // the instance assigned to it
	// Held reports whether the store has a holder. Owner is the holder's
	// identity as the backend knows it (its Provider's identity; configure
	// it to the instance ID to match) and Token its fencing token. They
	// come from core.Inspector; without it, only this instance's leases
	// are known.
	Held  bool
	Owner string
	Token uint64
	// Local reports whether this instance holds the lease.
	Local bool
	// State is this instance's standing on the target (see
	// Coordinator.State): Owned, Uncertain or NotOwned, since when, and
	// its token.
	State TargetState
}

// Snapshot reads the live members and the holder of every target's lease
// from the store. It costs 1 + (number of targets) round trips when the
// backend can tell a lock's holder (core.Inspector), 1 otherwise, when
// only this instance's own leases are reported held. See the package
// documentation for the store-side recipes.
func (c *Coordinator) Snapshot(ctx context.Context) (Snapshot, error) {
	members, err := c.cfg.Membership.Members(ctx, c.cfg.Group)
	if err != nil {
		return Snapshot{}, err
	}
	c.mu.Lock()
	s := Snapshot{Instance: c.id, Taken: c.now(), Members: members}
	for t := range c.targets {
		info := LeaseInfo{Target: t, Lock: c.cfg.LeaseName(t), Preferred: c.assign[t], State: c.state(t, s.Taken)}
		if l := c.owned[t]; l != nil {
			info.Local, info.Held, info.Owner, info.Token = true, true, c.id, l.token
		}
		s.Leases = append(s.Leases, info)
	}
	c.mu.Unlock()
	slices.SortFunc(s.Leases, func(a, b LeaseInfo) int {
		switch {
		case a.Target < b.Target:
			return -1
		case a.Target > b.Target:
			return 1
		}
		return 0
	})
	for i := range s.Leases {
		info := &s.Leases[i]
		in, ok := c.cfg.Provider.Mutex(info.Lock).(core.Inspector)
		if !ok {
			continue
		}
		h, held, err := in.Holder(ctx)
		if errors.Is(err, core.ErrUnsupported) {
			break // this backend, in this mode, cannot tell: local only
		}
		if err != nil {
			return s, err
		}
		local := info.Local && held && h.Token == info.Token
		info.Held, info.Token, info.Owner = held, h.Token, h.ID
		if local {
			info.Owner = c.id
		}
	}
	return s, nil
}
