package etcdlock

import (
	"bytes"
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
// <SafeName(id)>", holding its id, then, when it announced a non-empty
// value, a 0xff byte and the value (encodeMember; 0xff never occurs in
// UTF-8, so the first one ends the id, and a key of the previous version,
// the bare id, reads as the id with an empty value). The key is attached
// to a lease of its own granted by each Register with the member's ttl.
// The server deletes the key when the lease expires, so a member that
// stops registering is listed no longer than ttl after its last Register,
// rounded up to whole seconds (etcd's lease unit, and at least the
// server's minimum lease, 2 s with etcd's defaults), plus the server's
// expiry sweep (500 ms). A replaced lease holds no key and expires on its
// own.

// Register adds id to group, or refreshes it, for ttl, with an empty
// value: two round trips (a lease grant and a put). ttl must be positive
// and at most MaxTTL.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := validMember(group, id, nil, ttl); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	_, err := p.register(ctx, "register", group, id, ttl, nil, false)
	return err
}

// Heartbeat is Register followed by Members, in two round trips: the put
// and the listing share one transaction.
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	if err := validMember(group, id, nil, ttl); err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	kvs, err := p.register(ctx, "heartbeat", group, id, ttl, nil, true)
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
	if err := validMember(group, id, value, ttl); err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	kvs, err := p.register(ctx, "announce", group, id, ttl, value, true)
	if err != nil {
		return nil, err
	}
	return decodeMembers(kvs), nil
}

// register writes id's key with value on a new lease of ttl and, with
// list, reads the group's keys in the same transaction. Errors are
// wrapped for op.
func (p *Provider) register(ctx context.Context, op, group, id string, ttl time.Duration, value []byte, list bool) ([]*mvccpb.KeyValue, error) {
	if p.isClosed.Load() {
		return nil, kit.Wrap(backend, op, group, ErrClosed)
	}
	ctx, cancel := p.ctxFor(ctx)
	defer cancel()
	secs := int64((ttl + time.Second - 1) / time.Second)
	g, err := p.cli.Grant(ctx, secs)
	if err != nil {
		return nil, kit.Wrap(backend, op, group, fmt.Errorf("granting a lease: %w", err))
	}
	ops := []clientv3.Op{clientv3.OpPut(p.memberKey(group, id), encodeMember(id, value), clientv3.WithLease(g.ID))}
	if list {
		ops = append(ops, clientv3.OpGet(p.membersPrefix(group), clientv3.WithPrefix()))
	}
	resp, err := p.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, kit.Wrap(backend, op, group, err)
	}
	if !list {
		return nil, nil
	}
	return resp.Responses[1].GetResponseRange().Kvs, nil
}

// Deregister removes id from group at once: one round trip. Removing an
// absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := validMember(group, id, nil, time.Second); err != nil {
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

// memberSep ends the id in a member key's value: a byte that valid UTF-8,
// and so an id, never holds.
const memberSep = 0xff

// encodeMember returns the value of id's member key: the bare id when
// value is empty, as the previous version wrote it, else the id, memberSep
// and value.
func encodeMember(id string, value []byte) string {
	if len(value) == 0 {
		return id
	}
	return id + string([]byte{memberSep}) + string(value)
}

// decodeMembers reads member keys as members, sorted by ID.
func decodeMembers(kvs []*mvccpb.KeyValue) []core.Member {
	ms := make([]core.Member, 0, len(kvs))
	for _, kv := range kvs {
		id, value, _ := bytes.Cut(kv.Value, []byte{memberSep})
		ms = append(ms, core.Member{ID: string(id), Value: value})
	}
	slices.SortFunc(ms, func(a, b core.Member) int { return strings.Compare(a.ID, b.ID) })
	return ms
}

// memberIDs reads member keys as their ids, sorted.
func memberIDs(kvs []*mvccpb.KeyValue) []string {
	ms := decodeMembers(kvs)
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
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
