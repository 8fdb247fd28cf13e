package redisop

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/redis/go-redis/v9"
)

func (c *Client) groupKey(group string) string { return c.base(Lock{Name: group}) + "members" }

// Register adds id to group, or refreshes it, for ttl by the server's clock:
// one script call.
func (c *Client) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return err
	}
	if ttl.Milliseconds() < 1 {
		return kit.Invalid("membership ttl %v is under a millisecond", ttl)
	}
	return scriptMemberRegister.Run(ctx, c.rdb, []string{c.groupKey(group)}, id, ttl.Milliseconds()).Err()
}

// Deregister removes id from group: one command. An absent id is not an error.
func (c *Client) Deregister(ctx context.Context, group, id string) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return err
	}
	return c.rdb.ZRem(ctx, c.groupKey(group), id).Err()
}

// Members lists the live ids of group, sorted, by the server's clock: one
// script call.
func (c *Client) Members(ctx context.Context, group string) ([]string, error) {
	if err := kit.ValidateName(group); err != nil {
		return nil, err
	}
	return memberIDs(scriptMemberList.Run(ctx, c.rdb, []string{c.groupKey(group)}))
}

// Heartbeat registers id in group for ttl and lists the live ids of group,
// sorted, by the server's clock: one script call.
func (c *Client) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	if err := kit.ValidateMember(group, id); err != nil {
		return nil, err
	}
	if ttl.Milliseconds() < 1 {
		return nil, kit.Invalid("membership ttl %v is under a millisecond", ttl)
	}
	return memberIDs(scriptHeartbeat.Run(ctx, c.rdb, []string{c.groupKey(group)}, id, ttl.Milliseconds()))
}

// memberIDs reads the ids a membership script returned, sorted; none is an
// empty list, not nil.
func memberIDs(cmd *redis.Cmd) ([]string, error) {
	ids, err := cmd.StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	if ids == nil {
		ids = []string{}
	}
	slices.Sort(ids)
	return ids, nil
}
