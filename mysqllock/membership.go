package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/go-sql-driver/mysql"
)

// Membership: one row per (group, id) in the members table
// (WithMembersTable), expiring at the server's UTC_TIMESTAMP(6) + ttl, so
// the clocks of the instances never matter, with the member's announced
// value in a MEDIUMBLOB column (empty after Register, NULL in rows written
// before the column existed). Each statement is prepared once per
// connection of the pool and then runs in one round trip: Register,
// Deregister and Members are one, Announce two (MySQL has no statement
// that both writes a row and lists a table). The first call also creates
// the table with CREATE TABLE IF NOT EXISTS, or adds the value column to a
// table made by an earlier version. An expired row is never listed; a
// Register or Announce purges its group's rows that expired over an hour
// before, at most once a minute per Provider (one more round trip then).
// After Close the calls fail with the error its locks give after Close.

// maxMember is the longest group or id, in bytes (the table's columns).
const maxMember = 255

// Register adds id to group, or refreshes it, for ttl (at least 1 ms),
// measured on the server's clock, and empties its value.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.registration(ctx, "register", group, id, ttl, nil); err != nil {
		return err
	}
	if err := p.upsertMember(ctx, group, id, ttl, []byte{}); err != nil {
		return kit.Wrap(backend, "register", group, err)
	}
	return nil
}

// Announce registers id in group for ttl, as Register does, with value as
// its value, and returns the live members of group with their values,
// sorted by ID (byte order) (core.Announcer): two round trips, the upsert
// and a read of the group's other live rows. This member's value is not
// read back: the listing carries the one given.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.registration(ctx, "announce", group, id, ttl, value); err != nil {
		return nil, err
	}
	if value == nil {
		value = []byte{} // stored as empty, as Register stores it, not NULL
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

// upsertMember writes id's row with value and, when the last purge of this
// Provider is a minute old, purges group's rows that expired over an hour
// before (best effort: a failed purge is left to the next).
func (p *Provider) upsertMember(ctx context.Context, group, id string, ttl time.Duration, value []byte) error {
	m := &p.memberStmts
	return m.run(func() error {
		if _, err := m.upsert.ExecContext(ctx, group, id, ttl.Microseconds(), value); err != nil {
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

// ensureMembers creates the members table, or adds the value column to one
// made by an earlier version, and prepares the membership statements, once
// per Provider.
func (p *Provider) ensureMembers(ctx context.Context) error {
	return p.membersSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (grp VARBINARY(255), id VARBINARY(255),
expires_at DATETIME(6) NOT NULL, value MEDIUMBLOB, PRIMARY KEY (grp, id)) ENGINE=InnoDB`, p.sql.members)
		if _, err := p.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create members table %s: %w", p.opts.MembersTable, err)
		}
		if err := p.addValueColumn(ctx); err != nil {
			return fmt.Errorf("add the value column to members table %s: %w", p.opts.MembersTable, err)
		}
		return p.memberStmts.prepare(ctx, p.db, p.sql.members)
	})
}

// addValueColumn adds the value column to a members table that lacks it.
// MySQL has no ADD COLUMN IF NOT EXISTS, and ALTER TABLE needs the ALTER
// privilege even when it would change nothing: so information_schema is
// asked first, and a duplicate column (error 1060) from a Provider that
// added it meanwhile is success.
func (p *Provider) addValueColumn(ctx context.Context) error {
	var schema any // nil: the connection's database
	table := p.opts.MembersTable
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	var n int
	err := p.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = 'value'`, schema, table).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = p.db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN value MEDIUMBLOB`, p.sql.members))
	if me := (*mysql.MySQLError)(nil); errors.As(err, &me) && me.Number == 1060 {
		return nil
	}
	return err
}

// memberStmts are the membership statements, prepared on the pool once
// per Provider: database/sql then prepares each once per connection it
// runs on, and a run costs one round trip, where a statement with
// arguments (and no interpolateParams in the DSN) would cost a prepare and
// a close around it every time. Close closes them.
type memberStmts struct {
	mu     sync.RWMutex // held for reading while a statement runs
	closed bool
	// Set by prepare before the members setup succeeds, read after it.
	upsert, others, list, remove, purge *sql.Stmt
	lastPurge                           atomic.Int64 // unix ns of the last purge
}

// run runs f, which uses the statements, unless Close closed them: then
// it fails with errClosed.
func (m *memberStmts) run(f func() error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return errClosed
	}
	return f()
}

// prepare prepares the statements on db for the quoted members table.
func (m *memberStmts) prepare(ctx context.Context, db *sql.DB, table string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errClosed
	}
	qs := []struct {
		s **sql.Stmt
		q string
	}{
		{&m.upsert, `INSERT INTO %s (grp, id, expires_at, value) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), value = VALUES(value)`},
		{&m.others, `SELECT id, value FROM %s WHERE grp = ? AND id <> ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY id`},
		{&m.list, `SELECT id FROM %s WHERE grp = ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY id`},
		{&m.remove, `DELETE FROM %s WHERE grp = ? AND id = ?`},
		{&m.purge, `DELETE FROM %s WHERE grp = ? AND id <> ? AND expires_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR`},
	}
	for _, s := range qs {
		st, err := db.PrepareContext(ctx, fmt.Sprintf(s.q, table))
		if err != nil {
			m.closeLocked()
			return err
		}
		*s.s = st
	}
	return nil
}

// close closes the statements; prepare fails after it.
func (m *memberStmts) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.closeLocked()
}

func (m *memberStmts) closeLocked() {
	for _, s := range []*sql.Stmt{m.upsert, m.others, m.list, m.remove, m.purge} {
		if s != nil {
			_ = s.Close()
		}
	}
}
