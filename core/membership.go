package core

import (
	"context"
	"time"
)

// Membership is implemented by backends that can track live instances of a
// service, as polllease needs for its heartbeats.
type Membership interface {
	// Register adds id to group, or refreshes it, for ttl. A member whose
	// registration is not refreshed within ttl is no longer listed. The
	// backend's clock (the server's where there is one) decides expiry.
	Register(ctx context.Context, group, id string, ttl time.Duration) error
	// Deregister removes id from group at once. Removing an absent id is
	// not an error.
	Deregister(ctx context.Context, group, id string) error
	// Members lists the live ids of group, sorted, in one round trip.
	Members(ctx context.Context, group string) ([]string, error)
}

// Heartbeater is implemented by Membership backends that can register a
// member and list the live ones in a single round trip.
type Heartbeater interface {
	// Heartbeat does Register(group, id, ttl) and then Members(group),
	// atomically where the backend allows.
	Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error)
}

// Heartbeat registers id in group for ttl and returns the live members,
// sorted: one round trip when m implements Heartbeater, two otherwise.
func Heartbeat(ctx context.Context, m Membership, group, id string, ttl time.Duration) ([]string, error) {
	if hb, ok := m.(Heartbeater); ok {
		return hb.Heartbeat(ctx, group, id, ttl)
	}
	if err := m.Register(ctx, group, id, ttl); err != nil {
		return nil, err
	}
	return m.Members(ctx, group)
}
