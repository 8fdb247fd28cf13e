package pglock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
)

// Membership: one row per (group, id) in the members table (WithMembersTable),
// expiring at the server's now() + ttl, so the clocks of the instances never
// matter. Each call is one round trip on the pool (the first also creates the
// table with CREATE TABLE IF NOT EXISTS).

// Register adds id to group, or refreshes it, for ttl (at least 1 ms),
// measured on the server's clock. It also purges the group's registrations
// that expired long ago, in the same statement.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := kit.ValidateMember(group, id); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	if ttl < time.Millisecond {
		return kit.Wrap(backend, "register", group, kit.Invalid("ttl %v must be at least 1ms", ttl))
	}
	if err := p.ensureMembers(ctx); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	t := quoteIdent(p.opts.MembersTable)
	q := fmt.Sprintf(`WITH purge AS (DELETE FROM %[1]s WHERE grp = $1 AND id <> $2 AND expires_at < now() - interval '1 hour')
INSERT INTO %[1]s (grp, id, expires_at) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
ON CONFLICT (grp, id) DO UPDATE SET expires_at = EXCLUDED.expires_at`, t)
	if _, err := p.pool.Exec(ctx, q, group, id, ttl.Microseconds()); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
}

// Heartbeat registers id in group for ttl, as Register does, and returns
// the live members of group, sorted, in the same statement: one round trip
// (core.Heartbeater).
func (p *Provider) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	if err := kit.ValidateMember(group, id); err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	if ttl < time.Millisecond {
		return nil, kit.Wrap(backend, "heartbeat", group, kit.Invalid("ttl %v must be at least 1ms", ttl))
	}
	if err := p.ensureMembers(ctx); err != nil {
		return nil, kit.Wrap(backend, "heartbeat", group, err)
	}
	// The statement's snapshot does not see its own upsert: list the
	// others from the table and this id from the upsert.
	q := fmt.Sprintf(`WITH purge AS (DELETE FROM %[1]s WHERE grp = $1 AND id <> $2 AND expires_at < now() - interval '1 hour'),
up AS (INSERT INTO %[1]s (grp, id, expires_at) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
  ON CONFLICT (grp, id) DO UPDATE SET expires_at = EXCLUDED.expires_at RETURNING id)
SELECT id FROM (SELECT id FROM %[1]s WHERE grp = $1 AND id <> $2 AND expires_at > now()
  UNION ALL SELECT id FROM up) AS m
ORDER BY id COLLATE "C"`, quoteIdent(p.opts.MembersTable))
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

func (p *Provider) ensureMembers(ctx context.Context) error {
	return p.membersSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (grp text, id text, expires_at timestamptz NOT NULL, PRIMARY KEY (grp, id))`,
			quoteIdent(p.opts.MembersTable))
		if err := execCreate(ctx, p.pool, q); err != nil {
			return fmt.Errorf("create members table %s: %w", p.opts.MembersTable, err)
		}
		return nil
	})
}
