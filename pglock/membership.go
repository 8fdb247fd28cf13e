package pglock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Membership: one row per (group, id) in the members table (WithMembersTable),
// expiring at the server's now() + ttl, so the clocks of the instances never
// matter, with the member's announced value in a bytea column (empty after
// Register or Heartbeat, NULL in rows written before the column existed).
// Each call is one round trip on the pool (the first also creates the table,
// or adds the value column to one made by an earlier version). A Provider
// whose user may not add the column goes on without it (noValue): Announce
// fails with core.ErrUnsupported, the other calls leave the column out.

// upsertSQL is the head of the statements that register a member: a CTE
// "up" that purges the group's registrations that expired long ago and
// registers $2 in group $1 for $3 µs with value, returning id. Params:
// group, id, ttl in µs, and what value binds. Where the table has no value
// column (noValue), the registration leaves it out.
func (p *Provider) upsertSQL(value string) string {
	cols, vals, set := ", value", ", "+value, ", value = EXCLUDED.value"
	if p.noValue.Load() {
		cols, vals, set = "", "", ""
	}
	return fmt.Sprintf(`WITH purge AS (DELETE FROM %[1]s WHERE grp = $1 AND id <> $2 AND expires_at < now() - interval '1 hour'),
up AS (INSERT INTO %[1]s (grp, id, expires_at%[2]s) VALUES ($1, $2, now() + $3 * interval '1 microsecond'%[3]s)
  ON CONFLICT (grp, id) DO UPDATE SET expires_at = EXCLUDED.expires_at%[4]s RETURNING id)
`, quoteIdent(p.opts.MembersTable), cols, vals, set)
}

// Register adds id to group, or refreshes it, for ttl (at least 1 ms),
// measured on the server's clock, and empties its value. It also purges
// the group's registrations that expired long ago, in the same statement.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.registration(ctx, "register", group, id, ttl, nil); err != nil {
		return err
	}
	q := p.upsertSQL(`''`) + `SELECT FROM up`
	if _, err := p.pool.Exec(ctx, q, group, id, ttl.Microseconds()); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
}

// Heartbeat registers id in group for ttl, as Register does, and returns
// the live members of group, sorted, in the same statement: one round trip
// (core.Heartbeater).
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	if err := p.registration(ctx, "heartbeat", group, id, ttl, nil); err != nil {
		return nil, err
	}
	// The statement's snapshot does not see its own upsert: list the
	// others from the table and this id from the upsert.
	t := quoteIdent(p.opts.MembersTable)
	q := p.upsertSQL(`''`) + fmt.Sprintf(`SELECT id FROM (SELECT id FROM %s WHERE grp = $1 AND id <> $2 AND expires_at > now()
  UNION ALL SELECT id FROM up) AS m
ORDER BY id COLLATE "C"`, t)
	rows, err := p.pool.Query(ctx, q, group, id, ttl.Microseconds())
	if err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	return ids, nil
}

// Announce registers id in group for ttl, as Register does, with value as
// its value, and returns the live members of group with their values,
// sorted by ID (byte order), in the same statement: one round trip
// (core.Announcer). The listing carries the values of the other members
// only; this member's is the one given. Where the members table has no
// value column and this Provider's user may not add it, Announce fails
// with an error matching core.ErrUnsupported, registering nothing.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.registration(ctx, "announce", group, id, ttl, value); err != nil {
		return nil, err
	}
	t := quoteIdent(p.opts.MembersTable)
	if p.noValue.Load() {
		return nil, kit.Wrap(backend, "announce", group, fmt.Errorf("%w: members table %s has no value column, which this user may not add; its owner can run %s",
			core.ErrUnsupported, p.opts.MembersTable, addValueSQL(t)))
	}
	if value == nil {
		value = []byte{} // stored as empty, as Register stores it, not NULL
	}
	// As in Heartbeat, this id comes from the upsert; its value is not
	// sent back, the caller has it.
	q := p.upsertSQL(`$4`) + fmt.Sprintf(`SELECT id, value FROM (SELECT id, value FROM %s WHERE grp = $1 AND id <> $2 AND expires_at > now()
  UNION ALL SELECT id, NULL FROM up) AS m
ORDER BY id COLLATE "C"`, t)
	rows, err := p.pool.Query(ctx, q, group, id, ttl.Microseconds(), value)
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (m core.Member, err error) {
		err = r.Scan(&m.ID, &m.Value)
		return m, err
	})
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	if i := slices.IndexFunc(ms, func(m core.Member) bool { return m.ID == id }); i >= 0 {
		ms[i].Value = slices.Clone(value)
	}
	return ms, nil
}

// registration checks the arguments of a registration (op) and makes sure
// the members table is ready; its error is wrapped for op.
func (p *Provider) registration(ctx context.Context, op, group, id string, ttl time.Duration, value []byte) error {
	err := kit.ValidateRegistration(group, id, value, ttl, time.Millisecond)
	if err == nil {
		err = p.ensureMembers(ctx)
	}
	if err != nil {
		return kit.Wrap(backend, op, group, err)
	}
	return nil
}

// Deregister removes id from group at once; an absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	if err := p.ensureMembers(ctx); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	q := fmt.Sprintf(`DELETE FROM %s WHERE grp = $1 AND id = $2`, quoteIdent(p.opts.MembersTable))
	if _, err := p.pool.Exec(ctx, q, group, id); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	return nil
}

// Members lists the live ids of group, sorted (by byte order), in one
// round trip that reads only the group's rows (an index range scan).
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := kit.ValidateName(group); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	if err := p.ensureMembers(ctx); err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	q := fmt.Sprintf(`SELECT id FROM %s WHERE grp = $1 AND expires_at > now() ORDER BY id COLLATE "C"`, quoteIdent(p.opts.MembersTable))
	rows, err := p.pool.Query(ctx, q, group)
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// ensureMembers creates the members table, or adds the value column to one
// made by an earlier version, once per Provider. When this user may not add
// the column (it does not own the table), it logs how to add it and sets
// noValue, which stays set for the Provider's life: a Provider opened after
// the column is added uses it.
func (p *Provider) ensureMembers(ctx context.Context) error {
	return p.membersSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		t := quoteIdent(p.opts.MembersTable)
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (grp text, id text, expires_at timestamptz NOT NULL, value bytea, PRIMARY KEY (grp, id))`, t)
		hasValue, err := p.createMissing(ctx, "members table "+p.opts.MembersTable, t, "value", q)
		if err != nil || hasValue {
			return err
		}
		// ALTER TABLE takes an exclusive lock on the table, and needs its
		// owner, even when the column exists: it runs only when the column
		// is missing.
		_, err = p.pool.Exec(ctx, addValueSQL(t))
		var pgErr *pgconn.PgError
		switch {
		case err == nil || errors.As(err, &pgErr) && pgErr.Code == "42701":
			return nil // 42701 (duplicate column): a Provider added it meanwhile
		case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient privilege
			// The privilege is checked before the column: one added
			// meanwhile by its owner is found by looking again.
			what := "members table " + p.opts.MembersTable
			if _, has, err := p.layout(ctx, what, t, "value"); err != nil || has {
				return err
			}
			p.noValue.Store(true)
			p.log.Warn("distlock: the members table has no value column, which this user may not add: Announce fails with core.ErrUnsupported, the other membership calls work, until its owner runs the statement and the Provider is reopened",
				"backend", backend, "table", p.opts.MembersTable, "statement", addValueSQL(t))
			return nil
		}
		return fmt.Errorf("add the value column to members table %s: %w", p.opts.MembersTable, err)
	})
}

// addValueSQL adds the value column to the members table t (quoted).
func addValueSQL(t string) string {
	return fmt.Sprintf(`ALTER TABLE %s ADD COLUMN value bytea`, t)
}
