package redisop

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/redis/go-redis/v9"
)

// A group named G keeps its members in two keys under the base of a lock
// named G: "members", a sorted set of ids scored by expiry (ms on the
// server's clock), and "members:values", a hash of each id's entry, the
// stamp of its last registration (8 bytes, big-endian) followed by its
// value. Every registration writes both and purges the expired members
// from both; both live a TTL past the last registration.

func (c *Client) groupKeys(group string) []string {
	b := c.base(Lock{Name: group})
	return []string{b + "members", b + "members:values"}
}

// Member is a live member of a group as one server lists it: its id, the
// value and the stamp of its last registration (WithStamp).
type Member struct {
	ID    string
	Value []byte
	Stamp uint64
}

// WithStamp returns a copy of c whose membership registrations (Register,
// Heartbeat, Announce) record stamp, which Announce lists with each value.
// A multi-server algorithm sends one registration to every server under
// one stamp and orders a member's values across servers by it. A Client
// from NewClient records 0.
func (c *Client) WithStamp(stamp uint64) *Client {
	cc := *c
	cc.stamp = stamp
	return &cc
}

// Register adds id to group, or refreshes it, for ttl by the server's clock,
// with an empty value: one script call.
func (c *Client) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := kit.ValidateRegistration(group, id, nil, ttl, time.Millisecond); err != nil {
		return err
	}
	return c.enroll(ctx, scriptMemberRegister, group, id, ttl, nil).Err()
}

// Deregister removes id from group, with its value: one script call. An
// absent id is not an error.
func (c *Client) Deregister(ctx context.Context, group, id string) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return err
	}
	return scriptDeregister.Run(ctx, c.rdb, c.groupKeys(group), id).Err()
}

// Members lists the live ids of group, sorted, by the server's clock: one
// script call.
func (c *Client) Members(ctx context.Context, group string) ([]string, error) {
	if err := kit.ValidateName(group); err != nil {
		return nil, err
	}
	return memberIDs(scriptMemberList.Run(ctx, c.rdb, c.groupKeys(group)[:1]))
}

// Heartbeat registers id in group for ttl with an empty value, as Register
// does, and lists the live ids of group, sorted, by the server's clock: one
// script call.
func (c *Client) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	if err := kit.ValidateRegistration(group, id, nil, ttl, time.Millisecond); err != nil {
		return nil, err
	}
	return memberIDs(c.enroll(ctx, scriptHeartbeat, group, id, ttl, nil))
}

// Announce registers id in group for ttl with value, as Register does, and
// lists the live members of group sorted by ID, each with its value and
// stamp, by the server's clock: one script call. value is kept byte for
// byte and may be at most core.MaxMemberValue bytes. An id registered by a
// version that kept no values is listed with an empty value and stamp 0.
func (c *Client) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]Member, error) {
	if err := kit.ValidateRegistration(group, id, value, ttl, time.Millisecond); err != nil {
		return nil, err
	}
	return members(c.enroll(ctx, scriptMemberAnnounce, group, id, ttl, value))
}

// enroll runs a registration script s (lib.lua's enroll) for id with value.
func (c *Client) enroll(ctx context.Context, s script, group, id string, ttl time.Duration, value []byte) *redis.Cmd {
	entry := make([]byte, 8+len(value))
	binary.BigEndian.PutUint64(entry, c.stamp)
	copy(entry[8:], value)
	return s.Run(ctx, c.rdb, c.groupKeys(group), id, ttl.Milliseconds(), entry)
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

// members reads the ids and entries member_announce returned, sorted by ID;
// none is an empty list, not nil.
func members(cmd *redis.Cmd) ([]Member, error) {
	flat, err := cmd.Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	if len(flat)%2 != 0 {
		return nil, fmt.Errorf("redisop: announce replied %d items, not id and entry pairs", len(flat))
	}
	out := make([]Member, 0, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		id, ok1 := flat[i].(string)
		entry, ok2 := flat[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("redisop: announce replied %T, %T, not two strings", flat[i], flat[i+1])
		}
		m := Member{ID: id}
		if len(entry) >= 8 { // "" for an id an older version registered
			m.Stamp = binary.BigEndian.Uint64([]byte(entry[:8]))
		}
		if len(entry) > 8 {
			m.Value = []byte(entry[8:]) // an empty value stays nil
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
