package memlock

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/distlock/distlock/core/kit"
)

// Register adds id to group, or refreshes it, for ttl by the system clock.
// An invalid group or id is an error matching core.ErrInvalidName, ttl ≤ 0
// one matching core.ErrInvalidArgument.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := memberArgs(ctx, group, id); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	if ttl <= 0 {
		return kit.Wrap(backend, "register", group, kit.Invalid("ttl %v must be positive", ttl))
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.registerLocked(group, id, ttl)
	return nil
}

// Deregister removes id from group.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := memberArgs(ctx, group, id); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	delete(p.s.members[group], id)
	if len(p.s.members[group]) == 0 {
		delete(p.s.members, group)
	}
	return nil
}

// Members lists the live ids of group, sorted.
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := memberArgs(ctx, group, "-"); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.membersLocked(group), nil
}

// Heartbeat registers id in group for ttl and lists the live members,
// atomically.
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	if err := memberArgs(ctx, group, id); err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	if ttl <= 0 {
		return nil, kit.Wrap(backend, "heartbeat", group, kit.Invalid("ttl %v must be positive", ttl))
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.registerLocked(group, id, ttl)
	return p.s.membersLocked(group), nil
}

func memberArgs(ctx context.Context, group, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return kit.ValidateMember(group, id)
}

func (s *Store) registerLocked(group, id string, ttl time.Duration) {
	if s.members[group] == nil {
		s.members[group] = make(map[string]time.Time)
	}
	s.members[group][id] = time.Now().Add(ttl)
}

// membersLocked drops the expired members of group and lists the others.
func (s *Store) membersLocked(group string) []string {
	now := time.Now()
	maps.DeleteFunc(s.members[group], func(_ string, exp time.Time) bool { return !now.Before(exp) })
	return slices.Sorted(maps.Keys(s.members[group]))
}
