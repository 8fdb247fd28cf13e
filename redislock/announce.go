package redislock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Announce registers id in group for ttl, as Register does, with value as
// its value, and lists the live members of group sorted by ID, each with
// the value it announced last (empty after Register or Heartbeat): one
// script call, so one round trip, that writes the registration and the
// value and reads every live member's value. The listing is taken after
// the registration, so it includes id. value may be empty and at most
// core.MaxMemberValue bytes; longer, an invalid group or id, or ttl under a
// millisecond fail with an error matching core.ErrInvalidArgument (or
// core.ErrInvalidName for the group) before any I/O.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	ms, err := p.client.Announce(ctx, group, id, ttl, value)
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	out := make([]core.Member, len(ms))
	for i, m := range ms {
		out[i] = core.Member{ID: m.ID, Value: m.Value}
	}
	return out, nil
}
