package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core/kit"
)

// Membership: each member is the key "<prefix>members/<SafeName(group)>/
// <SafeName(id)>", holding its id, attached to a lease of its own granted
// by each Register with the member's ttl. The server deletes the key when
// the lease expires, so a member that stops registering is listed no
// longer than ttl after its last Register, rounded up to whole seconds
// (etcd's lease unit, and at least the server's minimum lease, 2 s with
// etcd's defaults), plus the server's expiry sweep (500 ms). A replaced
// lease holds no key and expires on its own.

// Register adds id to group, or refreshes it, for ttl: two round trips (a
// lease grant and a put). ttl must be positive and at most MaxTTL.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	_, err := p.register(ctx, group, id, ttl, false)
	return err
}

// Heartbeat is Register followed by Members, in two round trips: the put
// and the listing share one transaction.
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	return p.register(ctx, group, id, ttl, true)
}

func (p *Provider) register(ctx context.Context, group, id string, ttl time.Duration, list bool) ([]string, error) {
	if err := validMember(group, id, ttl); err != nil {
		return nil, kit.Wrap(backend, "register", group, err)
	}
	if p.isClosed.Load() {
		return nil, kit.Wrap(backend, "register", group, ErrClosed)
	}
	ctx, cancel := p.ctxFor(ctx)
	defer cancel()
	secs := int64((ttl + time.Second - 1) / time.Second)
	g, err := p.cli.Grant(ctx, secs)
	if err != nil {
		return nil, kit.Wrap(backend, "register", group, fmt.Errorf("granting a lease: %w", err))
	}
	ops := []clientv3.Op{clientv3.OpPut(p.memberKey(group, id), id, clientv3.WithLease(g.ID))}
	if list {
		ops = append(ops, clientv3.OpGet(p.membersPrefix(group), clientv3.WithPrefix()))
	}
	resp, err := p.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, kit.Wrap(backend, "register", group, err)
	}
	if !list {
		return nil, nil
	}
	return memberIDs(resp.Responses[1].GetResponseRange().Kvs), nil
}

// Deregister removes id from group at once: one round trip. Removing an
// absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := validMember(group, id, time.Second); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	ctx, cancel := p.ctxFor(ctx)
	defer cancel()
	if _, err := p.cli.Delete(ctx, p.memberKey(group, id)); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	return nil
}

// Members lists the live ids of group, sorted: one round trip.
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := kit.ValidateName(group); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ctx, cancel := p.ctxFor(ctx)
	defer cancel()
	resp, err := p.cli.Get(ctx, p.membersPrefix(group), clientv3.WithPrefix())
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	return memberIDs(resp.Kvs), nil
}

func (p *Provider) membersPrefix(group string) string {
	return p.opts.prefix + membersKind + kit.SafeName(group) + "/"
}

func (p *Provider) memberKey(group, id string) string {
	return p.membersPrefix(group) + kit.SafeName(id)
}

func memberIDs(kvs []*mvccpb.KeyValue) []string {
	ids := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		ids = append(ids, string(kv.Value))
	}
	slices.Sort(ids)
	return ids
}

func validMember(group, id string, ttl time.Duration) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return err
	}
	switch {
	case ttl <= 0 || ttl > MaxTTL:
		return kit.Invalid("ttl %v not in (0, %v]", ttl, MaxTTL)
	}
	return nil
}
