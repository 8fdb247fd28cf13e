package pglock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
)

// Membership: one row per (group, id) in the members table (WithMembersTable),
// expiring at the server's now() + ttl, so the clocks of the instances never
// matter, with the member's announced value in a bytea column (empty after
// Register or Heartbeat, NULL in rows written before the column existed).
// Each call is one round trip on the pool (the first also creates the table
// with CREATE TABLE IF NOT EXISTS, and adds the value column to a table
// made by an earlier version).

// upsertSQL is the head of the statements that register a member: a CTE
// "up" that purges the group's registrations that expired long ago and
// registers $2 in group $1 for $3 µs with value, returning id. Params:
// group, id, ttl in µs, and what value binds.
func upsertSQL(table, value string) string {
	return fmt.Sprintf(`WITH purge AS (DELETE FROM %[1]s WHERE grp = $1 AND id <> $2 AND expires_at < now() - interval '1 hour'),
up AS (INSERT INTO %[1]s (grp, id, expires_at, value) VALUES ($1, $2, now() + $3 * interval '1 microsecond', %[2]s)
  ON CONFLICT (grp, id) DO UPDATE SET expires_at = EXCLUDED.expires_at, value = EXCLUDED.value RETURNING id)
`, table, value)
}

// Register adds id to group, or refreshes it, for ttl (at least 1 ms),
// measured on the server's clock, and empties its value. It also purges
// the group's registrations that expired long ago, in the same statement.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.registration(ctx, "register", group, id, ttl, nil); err != nil {
		return err
	}
	q := upsertSQL(quoteIdent(p.opts.MembersTable), `''`) + `SELECT FROM up`
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
	q := upsertSQL(t, `''`) + fmt.Sprintf(`SELECT id FROM (SELECT id FROM %s WHERE grp = $1 AND id <> $2 AND expires_at > now()
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
// only; this member's is the one given.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.registration(ctx, "announce", group, id, ttl, value); err != nil {
		return nil, err
	}
	if value == nil {
		value = []byte{} // stored as empty, as Register stores it, not NULL
	}
	// As in Heartbeat, this id comes from the upsert; its value is not
	// sent back, the caller has it.
	t := quoteIdent(p.opts.MembersTable)
	q := upsertSQL(t, `$4`) + fmt.Sprintf(`SELECT id, value FROM (SELECT id, value FROM %s WHERE grp = $1 AND id <> $2 AND expires_at > now()
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
// made by an earlier version, once per Provider.
func (p *Provider) ensureMembers(ctx context.Context) error {
	return p.membersSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		t := quoteIdent(p.opts.MembersTable)
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (grp text, id text, expires_at timestamptz NOT NULL, value bytea, PRIMARY KEY (grp, id))`, t)
		if err := execCreate(ctx, p.pool, q); err != nil {
			return fmt.Errorf("create members table %s: %w", p.opts.MembersTable, err)
		}
		// ALTER TABLE takes an exclusive lock on the table, and needs its
		// owner, even when the column exists: run it only when it is
		// missing. IF NOT EXISTS covers a Provider that adds it meanwhile.
		var missing bool
		err := p.pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'value' AND NOT attisdropped)`, t).Scan(&missing)
		if err == nil && missing {
			_, err = p.pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS value bytea`, t))
		}
		if err != nil {
			return fmt.Errorf("add the value column to members table %s: %w", p.opts.MembersTable, err)
		}
		return nil
	})
}
