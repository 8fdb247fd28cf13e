package mysqllock

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Membership: one row per (group, id) in the members table
// (WithMembersTable), expiring at the server's UTC_TIMESTAMP(6) + ttl, so
// the clocks of the instances never matter, with the member's announced
// value in a MEDIUMBLOB column (empty after Register, NULL in rows written
// before the column existed). Each statement is prepared once per
// connection of the pool and then runs in one round trip: Register,
// Deregister and Members are one, Announce two (MySQL has no statement
// that both writes a row and lists a table). The first call also creates
// the table, or adds the value column to a table made by an earlier
// version; where the user may not add it, the Provider works without
// values and Announce fails with core.ErrUnsupported (ensureMembers).
// An expired row is never listed; a Register or Announce purges its
// group's rows that expired over an hour before, at most once a minute
// per Provider (one more round trip then).
// After Close the calls fail with the error its locks give after Close.

// maxMember is the longest group or id, in bytes (the table's columns).
const maxMember = 255

// Register adds id to group, or refreshes it, for ttl (at least 1 ms),
// measured on the server's clock, and empties its value (where the members
// table has the value column).
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.registration(ctx, "register", group, id, ttl, nil); err != nil {
		return err
	}
	if err := p.upsertMember(ctx, group, id, ttl, nil); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
}

// Announce registers id in group for ttl, as Register does, with value as
// its value, and returns the live members of group with their values,
// sorted by ID (byte order) (core.Announcer): two round trips, the upsert
// and a read of the group's other live rows. This member's value is not
// read back: the listing carries the one given. On a members table without
// the value column it fails with an error matching core.ErrUnsupported
// that names the statement that adds the column, and writes nothing.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.registration(ctx, "announce", group, id, ttl, value); err != nil {
		return nil, err
	}
	if value == nil {
		value = []byte{} // an Announce's value is never nil (upsertMember)
	}
	if err := p.upsertMember(ctx, group, id, ttl, value); err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	ms, err := p.otherMembers(ctx, group, id)
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	i, _ := slices.BinarySearchFunc(ms, id, func(m core.Member, id string) int { return strings.Compare(m.ID, id) })
	return slices.Insert(ms, i, core.Member{ID: id, Value: slices.Clone(value)}), nil
}

// otherMembers lists the live members of group but id, with their values,
// sorted by ID.
func (p *Provider) otherMembers(ctx context.Context, group, id string) ([]core.Member, error) {
	ms := make([]core.Member, 0, 8)
	err := p.memberStmts.run(func() error {
		rows, err := p.memberStmts.others.QueryContext(ctx, group, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m core.Member
			if err := rows.Scan(&m.ID, &m.Value); err != nil {
				return err
			}
			ms = append(ms, m)
		}
		return rows.Err()
	})
	return ms, err
}

// upsertMember writes id's row with value, or, for a Register (nil), with
// an empty value where the table has the value column, and, when the last
// purge of this Provider is a minute old, purges group's rows that expired
// over an hour before (best effort: a failed purge is left to the next).
// An Announce's value on a table without the value column fails with
// noValues, writing nothing.
func (p *Provider) upsertMember(ctx context.Context, group, id string, ttl time.Duration, value []byte) error {
	m := &p.memberStmts
	return m.run(func() error {
		args := []any{group, id, ttl.Microseconds()}
		switch {
		case !m.values && value != nil:
			return p.noValues()
		case m.values && value == nil:
			args = append(args, []byte{}) // empty, not NULL
		case m.values:
			args = append(args, value)
		}
		if _, err := m.upsert.ExecContext(ctx, args...); err != nil {
			return err
		}
		now, last := time.Now().UnixNano(), m.lastPurge.Load()
		if now-last >= int64(purgeEvery) && m.lastPurge.CompareAndSwap(last, now) {
			_, _ = m.purge.ExecContext(ctx, group, id)
		}
		return nil
	})
}

// purgeEvery is how often a Provider purges long-expired rows at most.
const purgeEvery = time.Minute

// Deregister removes id from group at once; an absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := validMember(group, id); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	if err := p.ensureMembers(ctx); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	err := p.memberStmts.run(func() error {
		_, err := p.memberStmts.remove.ExecContext(ctx, group, id)
		return err
	})
	if err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	return nil
}

// Members lists the live ids of group, sorted by byte order, in one round
// trip that reads only the group's rows (a primary key range).
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := validGroup(group); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	if err := p.ensureMembers(ctx); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ids := []string{}
	err := p.memberStmts.run(func() error {
		rows, err := p.memberStmts.list.QueryContext(ctx, group)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	return ids, nil
}

func validGroup(group string) error {
	if err := kit.ValidateName(group); err != nil {
		return err
	}
	if len(group) > maxMember {
		return kit.Invalid("group must be at most %d bytes", maxMember)
	}
	return nil
}

func validMember(group, id string) error {
	if err := validGroup(group); err != nil {
		return err
	}
	if err := kit.ValidateMember(group, id); err != nil {
		return err
	}
	if len(id) > maxMember {
		return kit.Invalid("member id must be at most %d bytes", maxMember)
	}
	return nil
}

// registration checks the arguments of a registration (op) and makes sure
// the members table is ready; its error is wrapped for op.
func (p *Provider) registration(ctx context.Context, op, group, id string, ttl time.Duration, value []byte) error {
	err := validMember(group, id)
	if err == nil {
		err = kit.ValidateRegistration(group, id, value, ttl, time.Millisecond)
	}
	if err == nil {
		err = p.ensureMembers(ctx)
	}
	if err != nil {
		return kit.Wrap(backend, op, group, err)
	}
	return nil
}
