package redislock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

var _ core.Heartbeater = (*Provider)(nil)

// Heartbeat registers id in group for ttl, as Register does (with an empty
// value), and lists the live members of group, sorted, as Members does: one
// script call, so one round trip, on the same keys. The server's clock decides who is live, and
// the list is taken after the registration, so it includes id. It
// implements core.Heartbeater: polllease's reconcile tick heartbeats and
// reads the members with it.
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	ids, err := p.client.Heartbeat(ctx, group, id, ttl)
	if err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	return ids, nil
}
