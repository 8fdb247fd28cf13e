package natslock

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core/kit"
)

// Membership lives in a second bucket (WithMembersBucket), created on first
// use with the TTL set by WithMemberMaxTTL. Each member is the key
// "<SafeName(group)>.<SafeName(id)>" holding its id and ttl.

type member struct {
	ID    string `json:"id"`
	TTLms int64  `json:"ttl_ms"`
}

// Register adds id to group, or refreshes it, for ttl: one round trip (plus
// the bucket's creation on first use). ttl must be positive and at most the
// members bucket's TTL, which removes a member the server has not seen
// refreshed for that long; a shorter ttl is applied by Members, comparing
// the server's timestamp of the registration with the local clock.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	if ttl <= 0 || ttl > p.cfg.memberMaxTTL {
		return kit.Wrap(backend, "register", group, kit.Invalid("ttl %v not in (0, %v] (WithMemberMaxTTL)", ttl, p.cfg.memberMaxTTL))
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	kv, err := p.membersKV(ctx)
	if err == nil {
		val, _ := json.Marshal(member{ID: id, TTLms: ttl.Milliseconds()})
		_, err = kv.Put(ctx, memberKey(group, id), val)
	}
	if err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
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
// through one short-lived ordered consumer (a few round trips: nats-server
// 2.9 has no batched get).
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := kit.ValidateName(group); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	ids, err := p.listMembers(ctx, group)
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	return ids, nil
}

func (p *Provider) listMembers(ctx context.Context, group string) ([]string, error) {
	kv, err := p.membersKV(ctx)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	err = p.scan(ctx, kv, kit.SafeName(group)+".*", false, func(e kvEntry) {
		var m member
		if json.Unmarshal(e.value, &m) == nil && time.Since(e.created) < time.Duration(m.TTLms)*time.Millisecond {
			ids = append(ids, m.ID)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
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
