package mysqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/core/kit"
)

// Membership: one row per (group, id) in the members table
// (WithMembersTable), expiring at the server's UTC_TIMESTAMP(6) + ttl, so
// the clocks of the instances never matter. Each call is one round trip on
// the pool (the first also creates the table with CREATE TABLE IF NOT
// EXISTS). An expired row is never listed; it stays in the table until its
// member registers again or deregisters.

// maxMember is the longest group or id, in bytes (the table's columns).
const maxMember = 255

// Register adds id to group, or refreshes it, for ttl (at least 1 ms),
// measured on the server's clock.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := validMember(group, id); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	if ttl < time.Millisecond {
		return kit.Wrap(backend, "register", group, kit.Invalid("ttl %v must be at least 1ms", ttl))
	}
	if err := p.ensureMembers(ctx); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	q := fmt.Sprintf(`INSERT INTO %s (grp, id, expires_at) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)`, p.sql.members)
	if _, err := p.db.ExecContext(ctx, q, group, id, ttl.Microseconds()); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
}

// Deregister removes id from group at once; an absent id is not an error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := validMember(group, id); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	if err := p.ensureMembers(ctx); err != nil {
		return kit.Wrap(backend, "deregister", group, err)
	}
	q := fmt.Sprintf(`DELETE FROM %s WHERE grp = ? AND id = ?`, p.sql.members)
	if _, err := p.db.ExecContext(ctx, q, group, id); err != nil {
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
	q := fmt.Sprintf(`SELECT id FROM %s WHERE grp = ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY id`, p.sql.members)
	rows, err := p.db.QueryContext(ctx, q, group)
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, kit.Wrap(backend, "members", group, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
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

func (p *Provider) ensureMembers(ctx context.Context) error {
	return p.membersSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (grp VARBINARY(255), id VARBINARY(255),
expires_at DATETIME(6) NOT NULL, PRIMARY KEY (grp, id)) ENGINE=InnoDB`, p.sql.members)
		if _, err := p.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create members table %s: %w", p.opts.MembersTable, err)
		}
		return nil
	})
}
