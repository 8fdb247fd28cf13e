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
