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

// MaxMemberValue is the largest value Announce takes, in bytes.
const MaxMemberValue = 256 << 10

// Member is a live member of a group and the value it announced last.
type Member struct {
	ID    string
	Value []byte
}

// Announcer is implemented by Membership backends that keep a value with
// each member, as polllease needs to tell the other instances which
// targets it holds.
type Announcer interface {
	// Announce registers id in group for ttl, as Register does, with
	// value as the member's value, and returns the live members of group
	// sorted by ID, each with the value it announced last: one round trip
	// where the backend allows, and the listing includes this
	// registration. value may be empty, is kept byte for byte, and may be
	// at most MaxMemberValue bytes (longer fails with ErrInvalidArgument).
	// Register and Heartbeat set a member's value to empty. It fails with
	// an error matching ErrUnsupported, registering nothing, when the
	// backend cannot keep values where it keeps this group's members (a
	// members table of an earlier version that this user may not alter,
	// say); Register, Heartbeat, Members and Deregister still work, and a
	// caller falls back to them.
	Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]Member, error)
}
