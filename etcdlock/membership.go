package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Membership: each member is the key "<prefix>members/<SafeName(group)>/
// <SafeName(id)>", holding its id, and, when it announced a non-empty
// value, "<prefix>member-values/<SafeName(group)>/<SafeName(id)>", holding
// the value. Both are attached to a lease of their own granted by each
// registration with the member's ttl, and written in one transaction, a
// Register or an empty Announce deleting the value key. So an older
// version, which reads the member keys alone, lists every member as ever.
// The server deletes the keys when the lease expires, so a member that
// stops registering is listed no longer than ttl after its last Register,
// rounded up to whole seconds (etcd's lease unit, and at least the
// server's minimum lease, 2 s with etcd's defaults), plus the server's
// expiry sweep (500 ms). A replaced lease holds no key and expires on its
// own.

// Register adds id to group, or refreshes it, for ttl, with an empty
// value: two round trips (a lease grant and a put). ttl must be positive
// and at most MaxTTL.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	_, _, err := p.register(ctx, "register", group, id, ttl, nil, listNone)
	return err
}

// Heartbeat is Register followed by Members, in two round trips: the put
// and the listing share one transaction.
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	kvs, _, err := p.register(ctx, "heartbeat", group, id, ttl, nil, listIDs)
	if err != nil {
		return nil, err
	}
	return memberIDs(kvs), nil
}

// Announce is Register with value as the member's value, followed by a
// listing of the group with every member's value (core.Announcer): two
// round trips, as Heartbeat. etcd's request limit (--max-request-bytes,
// 1.5 MiB by default) bounds the put (key, id and value), which a value of
// up to core.MaxMemberValue fits, and not the listing: that is one
// response, bounded by the client's MaxCallRecvMsgSize (clientv3's default
// is about 2 GiB) and built in the server's memory, so the group's values
// together are what limits a group.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	kvs, vals, err := p.register(ctx, "announce", group, id, ttl, value, listValues)
	if err != nil {
		return nil, err
	}
	return p.decodeMembers(group, kvs, vals), nil
}

// listing is what a registration reads back in its transaction.
type listing int

const (
	listNone   listing = iota
	listIDs            // the group's member keys
	listValues         // and its value keys
)

// register checks its arguments, writes id's key, and value's key or its
// deletion, on a new lease of ttl, and reads what list asks for in the same
// transaction. Errors are wrapped for op.
func (p *Provider) register(ctx context.Context, op, group, id string, ttl time.Duration, value []byte, list listing) ([]*mvccpb.KeyValue, []*mvccpb.KeyValue, error) {
	if err := validMember(group, id, value, ttl); err != nil {
		return nil, nil, kit.Wrap(backend, op, group, err)
	}
	if p.isClosed.Load() {
		return nil, nil, kit.Wrap(backend, op, group, ErrClosed)
	}
	ctx, cancel := p.ctxFor(ctx)
	defer cancel()
	secs := int64((ttl + time.Second - 1) / time.Second)
	g, err := p.cli.Grant(ctx, secs)
	if err != nil {
		return nil, nil, kit.Wrap(backend, op, group, fmt.Errorf("granting a lease: %w", err))
	}
	ops := []clientv3.Op{clientv3.OpPut(p.memberKey(group, id), id, clientv3.WithLease(g.ID))}
	if len(value) > 0 {
		ops = append(ops, clientv3.OpPut(p.valueKey(group, id), string(value), clientv3.WithLease(g.ID)))
	} else {
		ops = append(ops, clientv3.OpDelete(p.valueKey(group, id)))
	}
	if list >= listIDs {
		ops = append(ops, clientv3.OpGet(p.membersPrefix(group), clientv3.WithPrefix()))
	}
	if list == listValues {
		ops = append(ops, clientv3.OpGet(p.valuesPrefix(group), clientv3.WithPrefix()))
	}
	resp, err := p.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, nil, kit.Wrap(backend, op, group, err)
	}
	if list == listNone {
		return nil, nil, nil
	}
	members := resp.Responses[2].GetResponseRange().Kvs
	if len(resp.Responses) < 4 {
		return members, nil, nil
	}
	return members, resp.Responses[3].GetResponseRange().Kvs, nil
}

// Deregister removes id from group at once: one round trip. Removing an
// absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := validMember(group, id, nil, time.Second); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	ctx, cancel := p.ctxFor(ctx)
	defer cancel()
	_, err := p.cli.Txn(ctx).Then(clientv3.OpDelete(p.memberKey(group, id)), clientv3.OpDelete(p.valueKey(group, id))).Commit()
	if err != nil {
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

func (p *Provider) valuesPrefix(group string) string {
	return p.opts.prefix + valuesKind + kit.SafeName(group) + "/"
}

func (p *Provider) valueKey(group, id string) string {
	return p.valuesPrefix(group) + kit.SafeName(id)
}

// decodeMembers reads group's member keys and value keys as members,
// sorted by ID; a member without a value key has an empty value.
func (p *Provider) decodeMembers(group string, kvs, vals []*mvccpb.KeyValue) []core.Member {
	values := make(map[string][]byte, len(vals))
	prefix := p.valuesPrefix(group)
	for _, kv := range vals {
		values[strings.TrimPrefix(string(kv.Key), prefix)] = kv.Value
	}
	prefix = p.membersPrefix(group)
	ms := make([]core.Member, 0, len(kvs))
	for _, kv := range kvs {
		ms = append(ms, core.Member{ID: string(kv.Value), Value: values[strings.TrimPrefix(string(kv.Key), prefix)]})
	}
	kit.SortMembers(ms)
	return ms
}

// memberIDs reads member keys as their ids, sorted.
func memberIDs(kvs []*mvccpb.KeyValue) []string {
	ids := make([]string, len(kvs))
	for i, kv := range kvs {
		ids[i] = string(kv.Value)
	}
	slices.Sort(ids)
	return ids
}

// validMember checks a member call's arguments: group and id as
// kit.ValidateAnnounce does, value at most core.MaxMemberValue bytes, ttl
// in (0, MaxTTL].
func validMember(group, id string, value []byte, ttl time.Duration) error {
	if err := kit.ValidateAnnounce(group, id, value); err != nil {
		return err
	}
	if ttl <= 0 || ttl > MaxTTL {
		return kit.Invalid("ttl %v not in (0, %v]", ttl, MaxTTL)
	}
	return nil
}
