package memlock

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Register adds id to group, or refreshes it, for ttl by the system clock.
// An invalid group or id is an error matching core.ErrInvalidName, ttl ≤ 0
// one matching core.ErrInvalidArgument.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := registration(ctx, "register", group, id, ttl, nil); err != nil {
		return err
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.registerLocked(group, id, ttl, nil)
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
	ms, err := p.beat(ctx, "heartbeat", group, id, ttl, nil)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids, nil
}

// Announce registers id in group for ttl with value, and lists the live
// members with their values, atomically (core.Announcer).
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	return p.beat(ctx, "announce", group, id, ttl, value)
}

// beat registers id in group for ttl with value, and lists the live
// members with their values; errors are wrapped for op.
func (p *Provider) beat(ctx context.Context, op, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := registration(ctx, op, group, id, ttl, value); err != nil {
		return nil, err
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.registerLocked(group, id, ttl, value)
	ids := p.s.membersLocked(group)
	out := make([]core.Member, len(ids))
	for i, m := range ids {
		out[i] = core.Member{ID: m, Value: slices.Clone(p.s.members[group][m].value)}
	}
	return out, nil
}

// registration checks a registration's (op) context, group, id, value
// and ttl; its error is wrapped for op.
func registration(ctx context.Context, op, group, id string, ttl time.Duration, value []byte) error {
	err := ctx.Err()
	if err == nil {
		err = kit.ValidateAnnounce(group, id, value)
	}
	if err == nil && ttl <= 0 {
		err = kit.Invalid("ttl %v must be positive", ttl)
	}
	if err != nil {
		return kit.Wrap(backend, op, group, err)
	}
	return nil
}

func memberArgs(ctx context.Context, group, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return kit.ValidateMember(group, id)
}

// member is one registration: its expiry and announced value.
type member struct {
	expires time.Time
	value   []byte
}

func (s *Store) registerLocked(group, id string, ttl time.Duration, value []byte) {
	if s.members[group] == nil {
		s.members[group] = make(map[string]member)
	}
	s.members[group][id] = member{time.Now().Add(ttl), slices.Clone(value)}
}

// membersLocked drops the expired members of group and lists the others.
func (s *Store) membersLocked(group string) []string {
	now := time.Now()
	maps.DeleteFunc(s.members[group], func(_ string, m member) bool { return !now.Before(m.expires) })
	return slices.Sorted(maps.Keys(s.members[group]))
}
