package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

var (
	_ core.Membership  = (*Provider)(nil)
	_ core.Heartbeater = (*Provider)(nil)
	_ core.Announcer   = (*Provider)(nil)
)

// Membership over N servers follows the majority rule of the locks: a call
// is sent to every server in parallel and succeeds when a majority of them
// succeeded; an id is live when a majority of all N servers list it, each
// by its own clock. A member is therefore listed while a majority of the
// servers saw its registration within its TTL, and a minority of servers
// down, slow or restarted empty changes nothing; a restarted server learns
// every member again at its next registration. Every registration carries
// one stamp to all servers (nextStamp), and a member's value is chosen
// among the servers' by the rule of the package doc (agreed).

// Register adds id to group, or refreshes it, for ttl on every server, with
// an empty value: one parallel round trip. It fails unless a majority of
// the servers took it.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	stamp := p.nextStamp()
	_, err := majority(p, ctx, "register", group, func(ctx context.Context, s server) (struct{}, error) {
		return struct{}{}, s.client.WithStamp(stamp).Register(ctx, group, id, ttl)
	})
	return err
}

// Deregister removes id from group on every server: one parallel round
// trip. Removing an absent id is not an error; it fails unless a majority
// of the servers answered.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	_, err := majority(p, ctx, "deregister", group, func(ctx context.Context, s server) (struct{}, error) {
		return struct{}{}, s.client.Deregister(ctx, group, id)
	})
	return err
}

// Members lists the ids of group that a majority of the servers list,
// sorted: one parallel round trip.
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	lists, err := majority(p, ctx, "members", group, func(ctx context.Context, s server) ([]string, error) {
		return s.client.Members(ctx, group)
	})
	if err != nil {
		return nil, err
	}
	return p.listed(lists), nil
}

// Heartbeat registers id in group for ttl and lists the live members, as
// Register and Members do: one script call per server, in parallel.
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	stamp := p.nextStamp()
	lists, err := majority(p, ctx, "heartbeat", group, func(ctx context.Context, s server) ([]string, error) {
		return s.client.WithStamp(stamp).Heartbeat(ctx, group, id, ttl)
	})
	if err != nil {
		return nil, err
	}
	return p.listed(lists), nil
}

// Announce registers id in group for ttl with value, as Register does, and
// lists the live members with their values: one script call per server, in
// parallel, that writes the registration and the value and reads every
// live member's. A member is listed when a majority of all N servers list
// it, with the value a majority of all N servers hold, or else the value
// of its most recently stamped registration among those listing it (see
// the package doc). It fails unless a majority of the servers answered;
// bad input fails before any I/O as on one server.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	stamp := p.nextStamp()
	lists, err := majority(p, ctx, "announce", group, func(ctx context.Context, s server) ([]redisop.Member, error) {
		return s.client.WithStamp(stamp).Announce(ctx, group, id, ttl, value)
	})
	if err != nil {
		return nil, err
	}
	return p.announced(lists), nil
}

// listed returns the ids on at least a majority of all N servers' lists,
// sorted; none is an empty list.
func (p *Provider) listed(lists [][]string) []string {
	count := map[string]int{}
	for _, l := range lists {
		for _, id := range l {
			count[id]++
		}
	}
	out := []string{}
	for id, n := range count {
		if n >= p.quorum {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// announced returns the members on at least a majority of all N servers'
// lists, sorted by ID, each with its agreed value; none is an empty list.
func (p *Provider) announced(lists [][]redisop.Member) []core.Member {
	byID := map[string][]redisop.Member{}
	for _, l := range lists {
		for _, m := range l {
			byID[m.ID] = append(byID[m.ID], m)
		}
	}
	out := []core.Member{}
	for id, seen := range byID {
		if len(seen) >= p.quorum {
			out = append(out, core.Member{ID: id, Value: p.agreed(seen)})
		}
	}
	kit.SortMembers(out)
	return out
}

// agreed picks a member's value among the servers that list it (seen, one
// entry per server): the value at least a majority of all N servers hold,
// or else the value of the entry with the largest stamp (the larger value,
// byte by byte, among equal stamps). At most one value can be on a
// majority of N.
func (p *Provider) agreed(seen []redisop.Member) []byte {
	latest := seen[0]
	for _, m := range seen {
		n := 0
		for _, o := range seen {
			if bytes.Equal(o.Value, m.Value) {
				n++
			}
		}
		if n >= p.quorum {
			return m.Value
		}
		if m.Stamp > latest.Stamp || m.Stamp == latest.Stamp && bytes.Compare(m.Value, latest.Value) > 0 {
			latest = m
		}
	}
	return latest.Value
}

// nextStamp returns the stamp of a registration this Provider sends: its
// clock's time in µs, or its last stamp + 1 when that is larger, so its
// own registrations are stamped in the order it sends them.
func (p *Provider) nextStamp() uint64 {
	now := uint64(time.Now().UnixMicro())
	for {
		last := p.stamp.Load()
		next := max(now, last+1)
		if p.stamp.CompareAndSwap(last, next) {
			return next
		}
	}
}

// majority runs f on every server in parallel and returns the values of
// those that succeeded, once all answered, provided a majority did. An
// error from f that matches core.ErrInvalidArgument (bad input: the same on
// every server) is returned as it is.
func majority[T any](p *Provider, ctx context.Context, op, group string, f func(ctx context.Context, s server) (T, error)) ([]T, error) {
	replies := each(p, ctx, f)
	var vs []T
	var errs []error
	for range p.servers {
		r := <-replies
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		vs = append(vs, r.v)
	}
	if len(vs) >= p.quorum {
		return vs, nil
	}
	err := errors.Join(errs...)
	if !errors.Is(err, core.ErrInvalidArgument) && !errors.Is(err, core.ErrInvalidName) {
		err = fmt.Errorf("%d of %d servers answered, %d needed: %w", len(vs), len(p.servers), p.quorum, err)
	}
	return nil, kit.Wrap(backend, op, group, err)
}
