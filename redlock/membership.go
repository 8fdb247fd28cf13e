package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

var (
	_ core.Membership  = (*Provider)(nil)
	_ core.Heartbeater = (*Provider)(nil)
)

// Membership over N servers follows the majority rule of the locks: a call
// is sent to every server in parallel and succeeds when a majority of them
// succeeded; an id is live when a majority of all N servers list it, each
// by its own clock. A member is therefore listed while a majority of the
// servers saw its registration within its TTL, and a minority of servers
// down, slow or restarted empty changes nothing; a restarted server learns
// every member again at its next registration.

// Register adds id to group, or refreshes it, for ttl on every server: one
// parallel round trip. It fails unless a majority of the servers took it.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	_, err := majority(p, ctx, "register", group, func(ctx context.Context, s server) (struct{}, error) {
		return struct{}{}, s.client.Register(ctx, group, id, ttl)
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
	lists, err := majority(p, ctx, "heartbeat", group, func(ctx context.Context, s server) ([]string, error) {
		return s.client.Heartbeat(ctx, group, id, ttl)
	})
	if err != nil {
		return nil, err
	}
	return p.listed(lists), nil
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
