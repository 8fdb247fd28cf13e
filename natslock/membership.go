package natslock

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Membership lives in a second bucket (WithMembersBucket), created on first
// use with the TTL set by WithMemberMaxTTL. Each member is the key
// "<SafeName(group)>.<SafeName(id)>" holding a JSON member: its id, ttl and
// the value it announced, omitted when empty (so Register writes what
// earlier versions wrote, and their entries read as an empty value).

type member struct {
	memberHead
	Value []byte `json:"value,omitempty"` // base64 in JSON
}

// memberHead is a member's entry without its value, which Members does not
// decode.
type memberHead struct {
	ID    string `json:"id"`
	TTLms int64  `json:"ttl_ms"`
}

// Register adds id to group, or refreshes it, for ttl, with an empty
// value: one round trip (plus the bucket's creation on first use). ttl must
// be positive and at most the members bucket's TTL, which removes a member
// the server has not seen refreshed for that long; a shorter ttl is applied
// by Members, comparing the server's timestamp of the registration with the
// local clock.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.validMember(group, id, nil, ttl); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	kv, err := p.membersKV(ctx)
	if err == nil {
		err = p.putMember(ctx, kv, group, id, ttl, nil)
	}
	if err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
}

// Announce registers id in group for ttl, as Register does, with value as
// its value, and lists the live members of group with their values
// (core.Announcer). The put goes while the listing's consumer is made, so
// it costs what Members does: two round trips for up to 255 members (plus
// the bucket's creation on first use). The listing is read as the put
// lands: it holds this registration, and other members as of about then.
// A value of core.MaxMemberValue takes about 342 KiB of JSON, under the server's
// max_payload (1 MiB by default), which bounds one member's entry; the
// listing comes one entry per message, so the group's values together are
// not bounded by it.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.validMember(group, id, value, ttl); err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	kv, err := p.membersKV(ctx)
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	put := make(chan error, 1)
	go func() { put <- p.putMember(ctx, kv, group, id, ttl, value) }()
	ms, err := p.listMembers(ctx, group, true)
	if perr := <-put; perr != nil {
		err = perr
	}
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	// The listing may have been read before the put landed.
	ms[memberKey(group, id)] = core.Member{ID: id, Value: slices.Clone(value)}
	return sortedMembers(ms), nil
}

// putMember writes id's entry in group.
func (p *Provider) putMember(ctx context.Context, kv jetstream.KeyValue, group, id string, ttl time.Duration, value []byte) error {
	val, err := json.Marshal(member{memberHead{ID: id, TTLms: ttl.Milliseconds()}, value})
	if err == nil {
		_, err = kv.Put(ctx, memberKey(group, id), val)
	}
	return err
}

// Deregister removes id from group at once: one round trip. Removing an
// absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	kv, err := p.membersKV(ctx)
	if err == nil {
		err = kv.Purge(ctx, memberKey(group, id))
	}
	if err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	return nil
}

// Members lists the live ids of group, sorted. It reads the group's keys
// through one short-lived ordered consumer: two round trips for up to 255
// members, one more per 256 beyond (nats-server 2.9 has no batched get).
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := kit.ValidateName(group); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	ms, err := p.listMembers(ctx, group, false)
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ids := make([]string, 0, len(ms))
	for _, m := range sortedMembers(ms) {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// listMembers reads the live members of group, by key, with their values
// when values is set.
func (p *Provider) listMembers(ctx context.Context, group string, values bool) (map[string]core.Member, error) {
	kv, err := p.membersKV(ctx)
	if err != nil {
		return nil, err
	}
	ms := make(map[string]core.Member)
	err = p.scan(ctx, kv, kit.SafeName(group)+".*", false, func(e kvEntry) {
		var m member
		var dst any = &m
		if !values {
			dst = &m.memberHead
		}
		if json.Unmarshal(e.value, dst) == nil && time.Since(e.created) < time.Duration(m.TTLms)*time.Millisecond {
			ms[e.key] = core.Member{ID: m.ID, Value: m.Value}
		} else {
			delete(ms, e.key) // the key's latest entry is expired or unreadable
		}
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// sortedMembers returns ms sorted by ID.
func sortedMembers(ms map[string]core.Member) []core.Member {
	out := slices.Collect(maps.Values(ms))
	kit.SortMembers(out)
	return out
}

func (p *Provider) membersKV(ctx context.Context) (jetstream.KeyValue, error) {
	if err := p.connected(ctx); err != nil {
		return nil, err
	}
	p.mmu.Lock()
	defer p.mmu.Unlock()
	if p.memberKV != nil {
		return p.memberKV, nil
	}
	kv, err := openBucket(ctx, p.js, p.cfg.membersBucket, p.cfg.memberMaxTTL)
	if err != nil {
		return nil, err
	}
	p.memberKV = kv
	return kv, nil
}

func memberKey(group, id string) string { return kit.SafeName(group) + "." + kit.SafeName(id) }

// validMember checks a member call's arguments: group, id and value as
// kit.ValidateAnnounce does, ttl in (0, WithMemberMaxTTL].
func (p *Provider) validMember(group, id string, value []byte, ttl time.Duration) error {
	if err := kit.ValidateAnnounce(group, id, value); err != nil {
		return err
	}
	if ttl <= 0 || ttl > p.cfg.memberMaxTTL {
		return kit.Invalid("ttl %v not in (0, %v] (WithMemberMaxTTL)", ttl, p.cfg.memberMaxTTL)
	}
	return nil
}
